"""One psql process kept open for a node's many small read-backs.

A measuring job asks every node the same few questions before and after each run (is it up,
its block counters, its standbys' replay position). A psql started for each one costs its
process and a server backend's fork and authentication, about 17 ms of CPU on this kind of
machine (`docs/NOTEBOOK.md`, "The test suite's time"): 800 of them in the tiny study, taken
from the machine that measures. A session starts psql once and writes each question to its
standard input, followed by an `\\echo` of a marker line; the answer is what psql printed up
to the marker.

psql runs with ON_ERROR_STOP, so an error ends it: the question fails with psql's own message,
and the next question starts a new session. When a session that had answered before ends on
a question (its server may have restarted since), the question is asked once more in a new
one. So ask only statements that change nothing (a question may run twice) and set nothing
(the session outlives the question).
"""

from __future__ import annotations

import os
import selectors
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence

from ybscale.backends.base import BackendError


class PsqlSession:
    """psql on `argv` (reading SQL from stdin, unaligned tuples only, ON_ERROR_STOP), started
    on the first question; `name` is how errors name the server."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], name: str):
        self.argv, self.env, self.name = list(argv), dict(env), name
        self._proc: subprocess.Popen | None = None
        self._errors: list[bytes] = []
        self._drainer: threading.Thread | None = None
        self._lock = threading.Lock()  # one question at a time
        self.started = 0  # psql processes started: a test's window on the mechanism

    def ask(self, sql: str, timeout: float) -> str:
        """psql's output for `sql` (stripped), as a psql of its own would print it."""
        with self._lock:
            reused = self._proc is not None and self._proc.poll() is None
            try:
                return self._ask(sql, timeout)
            except _Ended as ended:
                if not reused:
                    raise BackendError(f"{self.name}: SQL failed: {ended} ({sql[:80]})") from None
            try:  # its server may have restarted under the idle session: once more, anew
                return self._ask(sql, timeout)
            except _Ended as ended:
                raise BackendError(f"{self.name}: SQL failed: {ended} ({sql[:80]})") from None

    def close(self) -> None:
        """psql told to quit (its end of input) and waited for; killed if it does not."""
        with self._lock:
            self._stop(kill=False)

    def _start(self) -> subprocess.Popen:
        self._errors = []
        proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **self.env},
        )
        self.started += 1
        os.set_blocking(proc.stdout.fileno(), False)
        # stderr drained beside it: notices must never fill its pipe and stall psql
        self._drainer = threading.Thread(
            target=self._drain, args=(proc.stderr, self._errors), daemon=True
        )
        self._drainer.start()
        return proc

    @staticmethod
    def _drain(pipe, into: list[bytes]) -> None:
        for line in pipe:
            into.append(line)
            del into[:-50]  # its last lines are the message

    def _ask(self, sql: str, timeout: float) -> str:
        if self._proc is None or self._proc.poll() is not None:
            self._stop(kill=True)
            self._proc = self._start()
        proc = self._proc
        self._errors.clear()  # what psql says from here on is about this question
        marker = f"__ybscale_{uuid.uuid4().hex}__".encode()
        # a lone ";" ends a statement written without one and is nothing after one that has it
        request = sql.encode() + b"\n;\n\\echo " + marker + b"\n"
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
        except OSError:  # psql had ended: its pipe is closed
            self._ended()
        out = b""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not (b"\n" + out).endswith(b"\n" + marker + b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self._stop(kill=True)  # its question may still run: not waited for
                    raise BackendError(f"{self.name}: SQL timed out after {timeout}s: {sql[:80]}")
                chunk = proc.stdout.read()
                if chunk == b"":  # psql ended: an error (ON_ERROR_STOP) or a lost connection
                    self._ended()
                out += chunk or b""
        return out[: -len(marker) - 1].decode().strip()

    def _ended(self) -> None:
        """psql has ended, or is ending: raise _Ended with what it said last."""
        code = self._stop(kill=False)
        message = b"".join(self._errors).decode(errors="replace").strip()
        raise _Ended(message or f"psql exited {code}")

    def _stop(self, kill: bool) -> int | None:
        """The session's psql ended (its input closed, then waited for; at once with `kill`)
        and its pipes closed; its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if kill:
            proc.kill()
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._drainer is not None:
            self._drainer.join(timeout=10)  # psql's last words: its stderr ends with it
        proc.stdout.close()
        return proc.returncode


class _Ended(Exception):
    """psql ended before answering; the message is what it said last."""
