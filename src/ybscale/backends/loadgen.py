"""pgbench and psql on a load-generator host over SSH: gcp's load-generator VM, or the host
`existing.load_generator` names (a client next to the endpoints, not this machine)."""

from __future__ import annotations

import dataclasses
import gzip
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ybscale.backends import ssh
from ybscale.backends.base import BackendError, Endpoint, PgbenchCommand
from ybscale.backends.ysql import FACTS_SCRIPT, parse_facts, psql_argv, rename_table
from ybscale.measure import generators, pgbench

CLOCK_SAMPLES = 9  # exchanges per clock-offset estimate
# pgbench's per-transaction logs (about 32 bytes a transaction: 50 MB for a 60-s repetition at
# 20,000 tps) come back over SSH, on gcp through the IAP tunnel, which bills them as egress.
# They are compressed on the load generator first (gzip at its default level: about a quarter
# of their size on pgbench's lines, some 2 s of one core for 50 MB, once the repetition ended;
# the logs stay there as written, beside their .gz) and copied compressed; each file's size
# before and after is printed, for the record (`LoadgenRunner.copied`) and the plan's egress.
PACK_SCRIPT = r"""for f in "$0".*; do
  case "$f" in *.gz) continue;; esac
  [ -f "$f" ] || continue
  raw=$(wc -c < "$f") && gzip -c -- "$f" > "$f.gz" && echo "$raw $(wc -c < "$f.gz") ${f##*/}" \
    || exit 1
done"""
COPY_TIMEOUT = 300  # seconds a copy back may take, and one more per COPY_RATE bytes it sends
COPY_RATE = 100_000  # bytes per second the slowest tunnel is assumed to carry
CLOCK_SCRIPT = "while read -r _; do date +%s%N; done"  # one reading per line received
PASS_ENV = re.compile(r"^PG[A-Z_]+$")  # only libpq variables travel to the load generator


class LoadgenRunner:
    """pgbench and psql on a load-generator host over SSH.

    A command's local files are mapped into a remote work folder: its scripts are uploaded, its
    log prefix moves under the folder and `collect` copies the logs back next to the local prefix
    once pgbench has finished (any file on demand with `fetch`). Only PG* environment variables
    are sent.
    """

    def __init__(self, host: ssh.SshHost, table: str = "kv", remote_root: str = "ybscale"):
        self.host = host
        self.table = table
        self.remote_root = remote_root
        self._uploaded: dict[Path, str] = {}
        self._cwd: Path | None = None
        # every log copy back (`collect`) summed: files, bytes before and after compression
        # (`bytes_sent`: what crossed the SSH connection, the tunnel's egress), seconds of the
        # copies, seconds pgbench ran for the logs copied
        self.copied = {"files": 0, "bytes_raw": 0, "bytes_sent": 0, "seconds": 0.0,
                       "pgbench_seconds": 0}  # fmt: skip

    def remote_dir(self, cwd: Path) -> str:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(Path(cwd).resolve()).strip("/"))
        return f"{self.remote_root}/{slug[-120:]}"

    def remote_path(self, local: Path, cwd: Path | None = None) -> str:
        cwd = Path(cwd or self._cwd or Path.cwd()).resolve()
        local = Path(local)
        local = local if local.is_absolute() else cwd / local
        rel = local.relative_to(cwd) if local.is_relative_to(cwd) else Path(local.name)
        return f"{self.remote_dir(cwd)}/{rel.as_posix()}"

    def _upload(self, script: Path, rdir: str) -> str:
        script = script.resolve()
        if script not in self._uploaded:
            ssh.check_output(self.host, ["mkdir", "-p", f"{rdir}/scripts"], timeout=60)
            remote = f"{rdir}/scripts/{script.name}"
            if self.table != "kv":
                ssh.check_output(
                    self.host, ["sh", "-c", 'cat > "$0"', remote],
                    input=rename_table(script.read_text(), self.table), timeout=60,
                )  # fmt: skip
            else:
                ssh.copy_to(self.host, script, remote)
            self._uploaded[script] = remote
        return self._uploaded[script]

    def remote(self, command: PgbenchCommand) -> PgbenchCommand:
        """The command as it runs on the load generator: its scripts uploaded (paths relative
        to the login directory) and its log prefix in the remote work folder."""
        rdir = self.remote_dir(command.workdir)
        scripts = tuple(self._upload(Path(script), rdir) for script in command.scripts)
        log_prefix = command.log_prefix
        if log_prefix is not None:
            log_prefix = Path(self.remote_path(log_prefix, command.workdir))
        return dataclasses.replace(command, scripts=scripts, log_prefix=log_prefix)

    def popen(self, command: PgbenchCommand, exe: str = "pgbench") -> subprocess.Popen:
        """One ssh connection: clear earlier logs of this prefix, run pgbench."""
        self._cwd = Path(command.workdir)
        there = self.remote(command)
        prep = f"mkdir -p {shlex.quote(self.remote_dir(command.workdir))}"
        if there.log_prefix is not None:  # a re-run must not fetch an earlier attempt's logs
            remote_log = str(there.log_prefix)  # pgbench's files: <prefix>.<pid>[.<n>]
            prep += f" {shlex.quote(str(there.log_prefix.parent))}"
            prep += f" && rm -f -- {shlex.quote(remote_log)}.*"
        pg_env = {k: v for k, v in command.env.items() if PASS_ENV.match(k)}
        # from the login directory: the script and log paths are relative to it, as for scp
        argv = pgbench.argv(there, exe)
        if command.start_at is not None:  # the agreed start, on this generator's clock
            argv = generators.at_instant(argv, int(command.start_at * 1e9))
        line = ssh.remote_command(argv, env=pg_env, timeout=command.timeout)
        return subprocess.Popen(
            ssh.ssh_argv(self.host, prep + " && " + line),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def collect(self, command: PgbenchCommand) -> dict | None:
        """Copy the finished command's logs (pgbench's `<prefix>.<pid>[.<n>]`) back next to its
        local log prefix: compressed on the load generator (`PACK_SCRIPT`), copied, and
        uncompressed here; the copy's files, bytes before and after, and seconds returned and
        added to `copied`. BackendError when the load generator has no log of the prefix."""
        if command.log_prefix is None:
            return None
        started = time.monotonic()
        remote = self.remote_path(command.log_prefix, command.workdir)
        out = ssh.check_output(self.host, ["sh", "-c", PACK_SCRIPT, remote], timeout=300)
        packed = [line.split(" ", 2) for line in out.splitlines() if line.strip()]
        if not packed:
            raise BackendError(f"{self.where}: no pgbench log {remote}.* to copy back")
        sent = sum(int(size) for _, size, _ in packed)
        local = Path(command.log_prefix).parent
        local.mkdir(parents=True, exist_ok=True)
        ssh.copy_back(self.host, remote + ".*.gz", local, COPY_TIMEOUT + sent / COPY_RATE)
        for _, _, name in packed:
            gz = local / f"{name}.gz"
            with gzip.open(gz, "rb") as src, open(local / name, "wb") as dst:
                shutil.copyfileobj(src, dst, 2**20)
            gz.unlink()
        record = {"files": len(packed), "bytes_raw": sum(int(raw) for raw, _, _ in packed),
                  "bytes_sent": sent, "seconds": round(time.monotonic() - started, 3),
                  "pgbench_seconds": command.seconds}  # fmt: skip
        for key, value in record.items():
            self.copied[key] += value
        self.copied["seconds"] = round(self.copied["seconds"], 3)
        return record

    def psql(self, endpoint: Endpoint, sql: str, env, timeout) -> str:
        pg_env = {"PGCONNECT_TIMEOUT": "10", **{k: v for k, v in env.items() if PASS_ENV.match(k)}}
        return ssh.check_output(
            self.host, psql_argv("psql", endpoint), input=sql, env=pg_env, timeout=timeout
        )

    def facts(self, pgbench: str = "pgbench") -> dict:
        """The load generator's cores (`nproc`) and pgbench version."""
        out = ssh.check_output(self.host, ["sh", "-c", FACTS_SCRIPT, pgbench], timeout=60)
        return parse_facts(out)

    def proc_stat(self) -> str:
        """The load generator's /proc/stat, through the row's SSH connection."""
        return ssh.check_output(self.host, ["cat", "/proc/stat"], timeout=30)

    @property
    def where(self) -> str:
        return f"{self.host.login}:{self.host.port}"

    def clock_offset(self, samples: int = CLOCK_SAMPLES) -> generators.ClockOffset:
        """The load generator's clock minus this machine's: `date +%s%N` answered line by line
        in one remote shell (no process start inside a round trip), the exchange with the
        shortest round trip of `samples`."""
        proc = ssh.run(self.host, ["sh", "-c", CLOCK_SCRIPT], timeout=60, stdin=subprocess.PIPE)
        exchanges = []
        try:
            for _ in range(samples):
                sent = time.time()
                proc.stdin.write("\n")
                proc.stdin.flush()
                answer = proc.stdout.readline()
                received = time.time()
                if not answer.strip().isdigit():
                    raise BackendError(f"{self.where}: clock unreadable: {answer[-200:]!r}")
                exchanges.append((sent, int(answer) / 1e9, received))
        except OSError as exc:
            raise BackendError(f"{self.where}: clock unreadable: {exc}") from exc
        finally:
            proc.stdin.close()  # the remote loop ends
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        return generators.ClockOffset.estimate(exchanges)

    def fetch_glob(self, remote_glob: str, local_dir: Path) -> None:
        local_dir.mkdir(parents=True, exist_ok=True)
        ssh.copy_back(self.host, remote_glob, local_dir)

    def fetch(self, remote: Path, local: Path) -> None:
        """Copy what the load generator wrote at local-style path `remote` (globs allowed)."""
        path = self.remote_path(remote)
        if any(c in str(remote) for c in "*?[") or local.is_dir():
            self.fetch_glob(path, local if local.is_dir() else local.parent)
        else:
            ssh.copy_back(self.host, path, local)


@contextmanager
def ssh_session(host: ssh.SshHost) -> Iterator[bool]:
    """One SSH connection shared by every pgbench and psql of a row (its master)."""
    master = ssh.start_master(host)
    try:
        yield master
    finally:
        ssh.stop_master(host, master)
