"""Shared fixtures: a private RAM data root, a look at which servers are still running, an sshd
on 127.0.0.1."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# what a user's checkout holds to run a study (results/ excluded; the package only where asked)
WORKFLOW = ["Snakefile", "rules", "config", "workloads", "report", "profiles", "envs"]


def servers_under(root: Path) -> list[str]:
    """Command lines of live (non-zombie) processes whose command line mentions `root`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if str(root) in cmdline and state != "Z":
            found.append(f"{proc.name}: {cmdline}")
    return found


@contextmanager
def ram_root():
    """A data root of the caller's own on /dev/shm, so checks see only its servers."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    root = base / f"ybscale-test-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def data_root():
    """A data root of the test's own (see `ram_root`)."""
    with ram_root() as root:
        yield root


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The README sequence on the tiny config, run once per session: effects.csv, then the report
    (test_report.py and test_report_layout.py read it)."""
    from test_pipeline import snakemake as tiny_snakemake
    from test_pipeline import tiny_workflow

    with ram_root() as root:
        work = tiny_workflow(tmp_path_factory.mktemp("report-study"), root)
        tiny_snakemake(work, "results/effects.csv")
        report = tiny_snakemake(work, "--report", "report.html", check=False)
        yield work, root, report


def copy_workflow(dest: Path, source: Path = REPO, package: bool = False) -> Path:
    """The workflow's files copied from `source` into `dest` (and src/ with `package`)."""
    for name in WORKFLOW + (["src"] if package else []):
        src = source / name
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target)
    return dest


def snakemake(
    work: Path, *args: str, configfile: str | None = None, timeout: float = 600, env=None
) -> subprocess.CompletedProcess:
    """`python -m snakemake --cores 2 ARGS [--configfile F]` in `work`; the caller checks it."""
    extra = ["--configfile", configfile] if configfile else []
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args, *extra],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def failed(out: subprocess.CompletedProcess) -> str:
    """The tails of a finished command's output, for an assertion message."""
    return out.stdout[-3000:] + out.stderr[-3000:]


def row_from_levels(levels: dict, dataset_rows: int, run: str = "run01", **extra):
    """A resolved Row from seed-style levels (nodes, workload, isolation, ...), for tests."""
    from ybscale import knobs, workload
    from ybscale.row import ClusterShape, Row

    shape = ClusterShape(
        nodes=int(levels["nodes"]),
        node_size=str(levels["node_size"]),
        replication=knobs.on_off(levels["replication"]),
    )
    script = str(levels["workload"])
    path = REPO / "workloads" / f"{script}.sql"
    isolation = knobs.isolation_text(levels.get("isolation", "read committed"))
    return Row(
        run=run,
        cluster=shape,
        server=dict(extra.get("server", {})),
        session={knobs.ISOLATION: isolation, **extra.get("session", {})},
        script=script,
        script_path=str(path),
        variables={"rows": str(levels.get("operation_size", 1))},
        dataset_rows=dataset_rows,
        read_only=workload.read_only(path.read_text()),
        levels=dict(levels),
    )


def settings_with(**sections) -> dict:
    """config/config.yaml loaded as the pipeline loads it, with `sections` replaced."""
    import yaml

    from ybscale import settings

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return settings.load({**config, **sections})


SSHD = Path("/usr/sbin/sshd")
SFTP_SERVER = next(
    (
        p
        for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server")
        if Path(p).exists()
    ),
    "internal-sftp",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("sshd did not listen")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An sshd on 127.0.0.1:<free port> with its own host key and authorized_keys (the file
    `authorized_keys(host)` names: a test may add keys to it)."""
    from ybscale.backends import ssh

    if not SSHD.exists():
        pytest.skip("/usr/sbin/sshd missing (apt-get install openssh-server)")
    tmp = tmp_path_factory.mktemp("sshd")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "host_key")], check=True
    )
    client_key = tmp / "client" / "id_ed25519"
    pub = ssh.ensure_keypair(client_key)
    (tmp / "authorized_keys").write_text(pub.read_text())
    port = _free_port()
    cfg = tmp / "sshd_config"
    cfg.write_text(
        f"ListenAddress 127.0.0.1\nHostKey {tmp / 'host_key'}\n"
        f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPidFile {tmp / 'sshd.pid'}\n"
        "StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nUsePAM no\n"
        f"Subsystem sftp {SFTP_SERVER}\nLogLevel ERROR\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(cfg), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        try:
            _wait_port(port, proc)
        except RuntimeError as exc:
            pytest.skip(f"sshd cannot run here: {exc}")
        yield ssh.SshHost(
            host="127.0.0.1",
            user=getpass.getuser(),
            key=client_key,
            port=port,
            known_hosts=tmp / "results" / "ssh" / "known_hosts",
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def authorized_keys(host) -> Path:
    """The authorized_keys file of the `sshd` fixture's server."""
    return host.key.parent.parent / "authorized_keys"
