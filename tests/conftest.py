"""Shared fixtures: a private RAM data root, a look at which servers are still running, an sshd
on 127.0.0.1, and one tiny study run once per session that every test reading a finished study
shares.

The shared study (`tiny_study`)
-------------------------------
The README sequence on ``config/test.yaml`` (16 rows, real PostgreSQL, about a minute): the
default target, then ``--report report.html``, run once per pytest session in a copy of the
workflow (its package too) with its own RAM data root. A test that only READS a finished study
takes it as a fixture::

    def test_something(tiny_study):
        effects = pd.read_csv(tiny_study.work / "results/effects.csv")
        out = tiny_snakemake(tiny_study.work, "-n", "results/effects.csv")  # dry runs are reads

A test that CHANGES anything (edits a file, even to restore it; forces a row; adds a config;
writes a report elsewhere than tmp_path) works on its own copy, results and Snakemake's
metadata included, so the copy is just as finished and up to date::

    def test_edit(tiny_study_copy):
        work = tiny_study_copy  # a Path: a private copy of tiny_study.work

The copies keep the shared data root (`tiny_study.root`, tests run one at a time), so a dry run
of an unchanged copy plans nothing. The session checks at its end that nobody wrote into the
shared study: a changed, added or removed file there is an error of the session.
"""

from __future__ import annotations

import fcntl
import getpass
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

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


# ---------------------------------------------------------------------------- the shared study


def tiny_workflow(work: Path, root: Path, package: bool = False) -> Path:
    """A copy of the workflow whose config/test.yaml puts the servers under `root`."""
    copy_workflow(work, package=package)
    test_cfg = yaml.safe_load((work / "config" / "test.yaml").read_text())
    test_cfg["local"] = {"data_root": str(root)}
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(test_cfg))
    return work


def tiny_snakemake(work: Path, *args, check: bool = True, timeout: float = 600, env=None):
    """Snakemake on the tiny config in `work`; raises with its output unless `check` is off."""
    out = snakemake(work, *args, configfile="config/test.yaml", timeout=timeout, env=env)
    if check and out.returncode != 0:
        raise AssertionError(failed(out))
    return out


def planned(work: Path, *args, env=None) -> dict[str, set[str]]:
    """rule -> run ids of the jobs a dry run on the tiny config would execute."""
    out = tiny_snakemake(work, "-n", *args, env=env).stdout
    jobs: dict[str, set[str]] = {}
    for block in re.split(r"\n(?=rule )", out):
        head = re.match(r"rule (\w+):", block)
        if head:
            run = re.search(r"wildcards: run=(run\d+)", block)
            jobs.setdefault(head.group(1), set()).add(run.group(1) if run else "")
    return jobs


@dataclass(frozen=True)
class TinyStudy:
    """A finished tiny study: READ it only (see the module docstring); `copy` it to change it."""

    work: Path  # the workflow copy (config, rules, src/) with its results/ and report.html
    root: Path  # its RAM data root: servers_under(root) must be [] between tests
    report: subprocess.CompletedProcess  # the `--report report.html` run (checked by a test)

    def copy(self, dest: Path) -> Path:
        """A private copy of the finished study in `dest` (results and metadata included)."""
        shutil.copytree(self.work, dest, symlinks=True)
        return dest


def _snapshot(work: Path) -> dict[str, tuple[int, int]]:
    """relative path -> (size, mtime) of every file of a study (Snakemake's metadata aside)."""
    return {
        str(path.relative_to(work)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in work.rglob("*")
        if path.is_file() and ".snakemake" not in path.parts and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory) -> TinyStudy:
    """The tiny study, run once per session and shared read-only (see the module docstring)."""
    with ram_root() as root:
        work = tiny_workflow(tmp_path_factory.mktemp("tiny-study"), root, package=True)
        # the default target: the whole study (a minute on a quiet machine; the timeout is for
        # a machine shared with other work, not a performance target)
        tiny_snakemake(work, timeout=1800)
        report = tiny_snakemake(work, "--report", "report.html", check=False, timeout=600)
        before = _snapshot(work)
        yield TinyStudy(work, root, report)
        after = _snapshot(work)
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    assert changed == [], f"tests wrote into the shared tiny study (use tiny_study_copy): {changed}"


@pytest.fixture
def tiny_study_copy(tiny_study, tmp_path) -> Path:
    """A private copy of the finished tiny study: a test that changes anything works here."""
    return tiny_study.copy(tmp_path / "study")


def row_from_levels(levels: dict, dataset_rows: int, run: str = "run01", **extra):
    """A resolved Row from seed-style levels (nodes, workload, isolation, ...), for tests."""
    from ybscale.design import knobs
    from ybscale.design.row import ClusterShape, Row
    from ybscale.measure import workload

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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the test ids
def pytest_collection_modifyitems(items):
    """Tests on the real Pulumi engine (they take the `engine` fixture) are slow long
    real-system tests: marked here once, so a new one is marked too (`-m "not slow"` skips them;
    `pytest -q` and CI run them). Tests of the shared tiny study run on one pytest-xdist worker
    (one study per session, not one per worker), and so do a module's tests that share one of
    its fixtures. The slow tests come first."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "engine" in fixtures:
            item.add_marker(pytest.mark.slow)
        if "tiny_study" in fixtures:
            item.add_marker(pytest.mark.xdist_group("tiny-study"))
        elif _module_scoped(item):  # a module's fixture set up once, on one worker
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # the long ones first, so the workers do not end waiting on one long group
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _module_scoped(item) -> bool:
    defs = getattr(item, "_fixtureinfo", None)
    defs = defs.name2fixturedefs.values() if defs else ()
    return any(d[-1].scope in ("module", "class", "package") for d in defs)


# ------------------------------------------------------------- parallel workers (pytest-xdist)
# `pytest -q` runs on two workers (pyproject.toml: -n 2). Every test holds a shared lock on one
# file of the run while it runs (set-up and tear-down included); a test marked `exclusive` (it
# asserts on what a measurement saw: CPU shares, a saturated node, a race) holds it exclusively,
# so nothing of the other worker runs beside it.
_LOCK = pytest.StashKey[str]()


def pytest_configure(config):
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        fd, path = tempfile.mkstemp(prefix="ybscale-tests-", suffix=".lock")
        os.close(fd)
        os.environ["YBSCALE_TEST_LOCK"] = path  # the workers start after this, with it
        config.stash[_LOCK] = path


def pytest_unconfigure(config):
    path = config.stash.get(_LOCK, None)
    if path:
        Path(path).unlink(missing_ok=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("YBSCALE_TEST_LOCK")
    if not (path and hasattr(item.config, "workerinput")):
        yield
        return
    mode = fcntl.LOCK_EX if item.get_closest_marker("exclusive") else fcntl.LOCK_SH
    with open(path) as lock:
        fcntl.flock(lock, mode)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
