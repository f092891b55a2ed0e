"""`python -m snakemake ARGS` for the tests, without paying Snakemake's import on every run.

A test run starts Snakemake about 50 times, and half of each dry run's CPU is importing it
(about 0.5 CPU-s). One server per test process imports `snakemake.cli` once and forks a child
per run; the child is what `python -m snakemake` would be after its imports: its own session,
the run's folder as cwd and as sys.path[0], the run's environment, stdout and stderr to
files, then `snakemake.cli.main(ARGS)`. Nothing of ybscale is imported before the fork: the
Snakefile and its jobs load the package as in a user's run. A run whose PYTHON* variables
differ from the server's (a package copy on PYTHONPATH, import profiling) starts anew. The
server is single-threaded (a fork copies no half-held lock), exits when its test process
closes the pipe, and `close` stops it with any run still going.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = r"""
import json, os, sys, traceback
import snakemake.cli
import snakemake.workflow

def child(req):
    os.setsid()
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.path[0] = req["cwd"]
    # the one value Snakemake takes at import: the folder it was started in
    snakemake.workflow.Workflow._rundir = os.path.abspath(req["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    sys.argv = [os.path.join(os.path.dirname(snakemake.__file__), "__main__.py"), *req["args"]]
    code = 1
    try:
        snakemake.cli.main(req["args"])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            child(req)
        finally:  # never back into this loop, whatever went wrong
            os._exit(1)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""


KEEP = ("PATH", "HOME", "LANG")  # of the test process's environment, for the server itself


def _python_env(env) -> dict:
    return {key: value for key, value in env.items() if key.startswith("PYTHON")}


class SnakemakeServer:
    """One per test process, started on first use (`run`)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.running: int | None = None  # the pid of the run going on
        self.pending = b""  # what the server wrote that no reply has taken yet
        self.python_env = _python_env(os.environ)

    def serves(self, env: dict | None) -> bool:
        """Whether a run in `env` can be forked: the PYTHON* variables the server starts with
        (they act as Python starts: a package copy on PYTHONPATH imported before the installed
        one, PYTHONPROFILEIMPORTTIME); else the caller starts `python -m snakemake` anew."""
        return _python_env(os.environ if env is None else env) == self.python_env

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            # little of this process's environment (each run gets its own): a test's marker
            # variable set by then must not make the server look like what it left running
            env = {k: v for k, v in os.environ.items() if k in KEEP or k.startswith("LC_")}
            self.proc = subprocess.Popen(
                [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                bufsize=0, start_new_session=True, env={**env, **self.python_env},
            )  # fmt: skip
            self.pending = b""
        return self.proc

    def _reply(self, proc: subprocess.Popen, deadline: float | None) -> dict:
        """The server's next line (read from the pipe itself: a buffered reader could hold the
        second reply while select waits on the empty pipe)."""
        while b"\n" not in self.pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([proc.stdout], [], [], wait)[0]:
                raise TimeoutError
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"the Snakemake server exited ({proc.poll()})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, cwd: Path, args: list[str], timeout: float, env: dict | None):
        """`python -m snakemake ARGS` in `cwd`, as subprocess.run(..., capture_output=True,
        text=True, timeout=timeout) would return it (TimeoutExpired after killing the run)."""
        proc = self._start()
        with tempfile.TemporaryDirectory(prefix="snakemake-run-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {"cwd": str(Path(cwd).resolve()), "args": args,
                       "env": dict(env if env is not None else os.environ),
                       "stdout": str(out), "stderr": str(err)}  # fmt: skip
            line = memoryview(json.dumps(request).encode() + b"\n")
            while line:  # unbuffered: a write may take part of it
                line = line[proc.stdin.write(line) :]
            self.running = pid = self._reply(proc, None)["pid"]
            argv = [sys.executable, "-m", "snakemake", *args]
            try:
                code = self._reply(proc, time.monotonic() + timeout)["code"]
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                self._reply(proc, None)
                output = (out.read_text(), err.read_text())
                raise subprocess.TimeoutExpired(argv, timeout, *output) from None
            finally:
                self.running = None
            return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())

    def close(self) -> None:
        """Stop the server, and a run still going (an interrupted test's: each run is a
        session of its own, which nothing else would stop)."""
        if self.proc is None:
            return
        if self.running is not None:
            try:
                os.killpg(self.running, signal.SIGTERM)  # Snakemake's own clean-up runs
            except ProcessLookupError:
                pass
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc = None
