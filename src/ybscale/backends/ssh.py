"""Commands and file copies on a remote host through the OpenSSH client (`ssh`, `scp`)."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ybscale.backends.base import BackendError

T = TypeVar("T")


@dataclass(frozen=True)
class SshHost:
    """How to reach one host. `proxy_command` e.g. tunnels through IAP with gcloud."""

    host: str
    user: str
    key: Path
    known_hosts: Path  # the caller's file: host keys of exactly these VMs
    port: int = 22
    connect_timeout: int = 15
    proxy_command: str | None = None
    control_path: str | None = None  # reuse a master connection (see start_master) when set

    def options(self, master: bool = False) -> list[str]:
        """`-o` options shared by ssh and scp (non-interactive, new host keys accepted once)."""
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        opts = {
            "BatchMode": "yes",
            "StrictHostKeyChecking": "accept-new",
            "UserKnownHostsFile": str(self.known_hosts.resolve()),
            "ConnectTimeout": str(self.connect_timeout),
            "ServerAliveInterval": "15",
            "ServerAliveCountMax": "4",
            "IdentitiesOnly": "yes",
            "LogLevel": "ERROR",  # keep ssh's own notices out of pgbench's stderr
        }
        if self.proxy_command:
            opts["ProxyCommand"] = self.proxy_command
        if self.control_path:  # use the master when it exists, else connect directly
            opts["ControlMaster"] = "yes" if master else "no"
            opts["ControlPath"] = self.control_path
            if master:
                opts["ControlPersist"] = "yes"
        argv = ["-i", str(self.key)]
        for key, value in opts.items():
            argv += ["-o", f"{key}={value}"]
        return argv

    @property
    def login(self) -> str:
        return f"{self.user}@{self.host}"


def remote_command(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
) -> str:
    """One shell command line for the remote side: cd, env, a `timeout` guard, quoted argv."""
    parts: list[str] = []
    if cwd:
        parts += ["mkdir -p", shlex.quote(cwd), "&&", "cd", shlex.quote(cwd), "&&"]
    if env:
        parts += ["env"] + [shlex.quote(f"{k}={v}") for k, v in env.items()]
    if timeout:
        parts += ["timeout", "--kill-after=10", f"{max(1, int(timeout + 0.999))}s"]
    parts += [shlex.quote(str(a)) for a in argv]
    return " ".join(parts)


def ssh_argv(target: SshHost, command: str) -> list[str]:
    """argv running `command` (one remote shell line) on the target."""
    return ["ssh", *target.options(), "-p", str(target.port), target.login, command]


def run(
    target: SshHost,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.Popen:
    """Start `argv` on the target; the remote side is killed by `timeout` after that long.

    Returns the local ssh Popen (text pipes for stdout and stderr); its return code is the remote
    command's (255 when ssh itself failed, 124 when the remote timeout fired).
    """
    command = remote_command(argv, env=env, cwd=cwd, timeout=timeout)
    return subprocess.Popen(
        ssh_argv(target, command),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def check_output(
    target: SshHost,
    argv: Sequence[str],
    *,
    timeout: float,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run `argv` remotely, wait, return stdout; BackendError with stderr when it fails."""
    proc = run(target, argv, env=env, timeout=timeout, stdin=subprocess.PIPE)
    return finish(target, argv, proc, timeout, input)


def finish(
    target: SshHost,
    argv: Sequence[str],
    proc: subprocess.Popen,
    timeout: float,
    input: str | None = None,
) -> str:
    """Wait for a command `run` started; its stdout, or BackendError with its stderr."""
    try:
        out, err = proc.communicate(input=input, timeout=timeout + 30)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise BackendError(f"{target.login}: {shlex.join(map(str, argv))}: timed out") from exc
    if proc.returncode != 0:
        raise BackendError(
            f"{target.login}: {shlex.join(map(str, argv))} exited {proc.returncode}: "
            f"{err.strip()[-2000:]}"
        )
    return out


def on_every_host(
    hosts: Mapping[str, SshHost],
    argv: Mapping[str, Sequence[str]],
    timeout: float,
    parse: Callable[[str], T],
    errors: tuple[type[Exception], ...] = (),
    meanwhile: Callable[[], object] = lambda: None,
) -> tuple[dict[str, T], dict[str, str]]:
    """`argv[name]` on every host at once (`meanwhile` called once they are started); (parsed
    stdout by name, error by name of those whose command failed or whose output `parse`
    refused with one of `errors`). Every ssh started is gone when this returns, also when it
    raises."""
    procs = {name: run(host, argv[name], timeout=timeout) for name, host in hosts.items()}
    done, failed = {}, {}
    try:
        meanwhile()
        for name, proc in procs.items():
            try:
                done[name] = parse(finish(hosts[name], argv[name], proc, timeout))
            except (BackendError, *errors) as exc:
                failed[name] = str(exc)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return done, failed


def _scp(target: SshHost, src: str, dst: str, timeout: float) -> None:
    argv = ["scp", "-q", *target.options(), "-P", str(target.port), src, dst]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"scp {src} {dst}: timed out after {timeout:g} s") from exc
    if done.returncode != 0:
        raise BackendError(f"scp {src} {dst} exited {done.returncode}: {done.stderr.strip()}")


def copy_back(target: SshHost, remote: str, local: Path, timeout: float = 300) -> None:
    """Copy `remote` (a path or glob on the target) to `local` (a file, or a directory)."""
    Path(local).parent.mkdir(parents=True, exist_ok=True)
    _scp(target, f"{target.login}:{remote}", str(local), timeout)


def copy_to(target: SshHost, local: Path, remote: str, timeout: float = 300) -> None:
    """Copy the local file `local` to `remote` on the target."""
    _scp(target, str(local), f"{target.login}:{remote}", timeout)


def control_path(tag: str = "") -> str:
    """A short socket path for connection sharing, this process's own (%C: hash of host, port
    and user): a master another process opened to the same host is never used or closed here
    (two rows on one load generator: the first row's end closed the other's connection).
    `tag` tells apart masters of hosts behind the same address, port and user."""
    name = f"ybscale-ssh-{os.getpid()}-{tag}-%C" if tag else f"ybscale-ssh-{os.getpid()}-%C"
    return str(Path(tempfile.gettempdir()) / name)


def through(via: SshHost, host: str, port: int = 22, tag: str = "") -> SshHost:
    """`host` reached through `via` (stdio forwarding, `ssh -W`, over via's shared connection
    when it has one), as the same user with the same key and known-hosts file, with a master
    connection of its own (`tag`: see control_path). The key never leaves this machine."""
    jump = ["ssh", *via.options(), "-p", str(via.port)]
    # ssh expands %-tokens in a ProxyCommand: via's own (%C, an IAP tunnel's %h %p) stay its
    command = " ".join(shlex.quote(a).replace("%", "%%") for a in jump)
    return SshHost(
        host=host,
        user=via.user,
        key=via.key,
        known_hosts=via.known_hosts,
        port=port,
        connect_timeout=via.connect_timeout,
        proxy_command=f"{command} -W %h:%p {shlex.quote(via.login)}",
        control_path=control_path(tag),
    )


def start_master(target: SshHost, timeout: float = 120) -> bool:
    """Open a background master connection for `target.control_path`; False if that failed.

    Its stdio is /dev/null, so it never holds a later command's pipes open. Interrupted
    (Ctrl-C) or timed out while connecting, it closes a master that may have forked already
    (`-f` detaches it into a session of its own, out of reach of the interrupt).
    """
    if not target.control_path:
        return False
    argv = ["ssh", *target.options(master=True), "-p", str(target.port), "-N", "-f"]
    try:
        done = subprocess.run(
            [*argv, target.login],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
        )
    except BaseException as exc:  # a master may have forked; closing it never hides `exc`
        with contextlib.suppress(Exception):
            stop_master(target)
        if isinstance(exc, subprocess.TimeoutExpired):
            return False
        raise
    return done.returncode == 0


def stop_master(target: SshHost, started: bool = True) -> None:
    """Close the master connection opened by start_master."""
    if target.control_path and started:
        subprocess.run(
            ["ssh", *target.options(), "-p", str(target.port), "-O", "exit", target.login],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )


def ensure_keypair(path: Path, comment: str = "ybscale") -> Path:
    """Create an ed25519 key pair at `path` (no passphrase) unless it exists; return `path`.pub.
    Clusters brought up in parallel share the key: the first creates it under a lock."""
    import fcntl

    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                check=True,
                capture_output=True,
            )
        if not pub.exists():
            out = subprocess.run(
                ["ssh-keygen", "-y", "-f", str(path)], check=True, capture_output=True, text=True
            )
            pub.write_text(out.stdout)
    return pub
