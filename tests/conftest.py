"""Shared fixtures: a private RAM data root, a look at which servers are still running, an sshd
on 127.0.0.1, and one tiny study run once per test run that every test reading a finished study
shares.

The shared study (`tiny_study`)
-------------------------------
The README sequence on ``config/test.yaml`` (16 rows, real PostgreSQL, about a minute): the
default target, then ``--report report.html``, run once per pytest run (by the first
pytest-xdist worker that needs it; the others wait for it and share it) in a copy of the
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
        root = data_root_of(work)  # where the copy's servers go: servers_under(root) == []

The study's config names its data root relatively (``local.data_root: pgdata``, a link in the
study's folder), so a copy's config is the same file and a dry run of an unchanged copy plans
nothing, while the copy's link points to a data root of its own: copies run on several workers
at once. Every worker checks at its end that nobody wrote into the shared study while it ran: a
changed, added or removed file there is an error of the session.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from snakemake_server import SnakemakeServer

REPO = Path(__file__).resolve().parents[1]
# the stage folders' test modules share helpers (test_report's browser, test_plan's prices, ...)
# as when they were one folder: each folder importable, whichever files a run collects
_FOLDERS = sorted({str(p.parent) for p in Path(__file__).parent.glob("*/test_*.py")})
sys.path[1:1] = [f for f in _FOLDERS if f not in sys.path]
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


@pytest.fixture(scope="session")
def template():
    """The local backend's template data directory (`LocalBackend.template`: initdb once),
    made once per worker in a RAM root of its own; None without PostgreSQL's binaries."""
    from ybscale.backends.base import BackendError
    from ybscale.backends.local import LocalBackend, find_bindir

    try:
        bindir = find_bindir()
    except BackendError:
        yield None
        return
    with ram_root() as root:
        local = LocalBackend(settings_with())
        yield local.template(root, bindir, local.runas())


def seed(root: Path, template: Path | None) -> Path:
    """`root` holding a copy of `template`, as a data root does after its first cluster: its
    clusters clone it instead of running initdb (fresh roots, the tiny study's and
    test_studies', still make their own: that path runs too)."""
    if template is not None:
        subprocess.run(["cp", "-a", str(template), str(root / template.name)], check=True)
    return root


@pytest.fixture
def data_root(template):
    """A data root of the test's own (see `ram_root`), seeded with the template (`seed`)."""
    with ram_root() as root:
        yield seed(root, template)


def copy_workflow(dest: Path, source: Path = REPO, package: bool = False) -> Path:
    """The workflow's files copied from `source` into `dest` (and src/ with `package`)."""
    for name in WORKFLOW + (["src"] if package else []):
        src = source / name
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target)
    return dest


SNAKEMAKE = SnakemakeServer()  # this test process's (snakemake_server.py)

# A command after this prefix gets Ctrl-C as from a terminal: SIGINT back to its default (a
# pytest-xdist worker ignores it, and an ignored signal is inherited), then the command itself
# in the same process. Not `preexec_fn`: that runs Python in a fork of the test process, and a
# fork taken while the Pulumi Automation API's gRPC threads run can abort before the exec.
INTERRUPTIBLE = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]  # fmt: skip


def snakemake(
    work: Path, *args: str, configfile: str | None = None, timeout: float = 600, env=None
) -> subprocess.CompletedProcess:
    """`python -m snakemake --cores 2 ARGS [--configfile F]` in `work`; the caller checks it.
    Forked from SNAKEMAKE's server when it can (`SnakemakeServer.serves`), else started anew."""
    argv = ["--cores", "2", *args, *(["--configfile", configfile] if configfile else [])]
    if SNAKEMAKE.serves(env):
        return SNAKEMAKE.run(work, argv, timeout, env)
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *argv],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def gflags_compiler() -> str:
    """The C++ compiler for a program on the system's gflags (g++, libgflags-dev: setup.sh
    installs both); skips where either is missing, fails under CI=true, where it is an error."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if not compiler or not Path("/usr/include/gflags/gflags.h").exists():
        reason = "no C++ compiler or gflags headers (setup.sh installs g++ libgflags-dev)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return compiler


def failed(out: subprocess.CompletedProcess) -> str:
    """The tails of a finished command's output, for an assertion message."""
    return out.stdout[-3000:] + out.stderr[-3000:]


# ---------------------------------------------------------------------------- the shared study


def tiny_workflow(work: Path, root: Path, package: bool = False) -> Path:
    """A copy of the workflow whose config/test.yaml puts the servers under `work`/pgdata, a
    link to `root` (`data_root_of`)."""
    copy_workflow(work, package=package)
    test_cfg = yaml.safe_load((work / "config" / "test.yaml").read_text())
    test_cfg["local"] = {"data_root": "pgdata"}  # relative: to the workflow's folder
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(test_cfg))
    (work / "pgdata").symlink_to(root, target_is_directory=True)
    return work


def data_root_of(work: Path) -> Path:
    """Where a tiny study's servers go: the data root its pgdata link points to."""
    return (work / "pgdata").resolve()


def tiny_snakemake(work: Path, *args, check: bool = True, timeout: float = 600, env=None):
    """Snakemake on the tiny config in `work`; raises with its output unless `check` is off."""
    out = snakemake(work, *args, configfile="config/test.yaml", timeout=timeout, env=env)
    if check and out.returncode != 0:
        raise AssertionError(failed(out))
    return out


def planned(work: Path, *args, env=None) -> dict[str, set[str]]:
    """rule -> run ids of the jobs a dry run on the tiny config would execute."""
    return jobs_in(tiny_snakemake(work, "-n", *args, env=env).stdout)


def jobs_in(log: str) -> dict[str, set[str]]:
    """rule -> the run ids of its jobs ("" for a job without a run) in Snakemake's output, of a
    dry run (the jobs it would run) or of a real one (those it ran)."""
    jobs: dict[str, set[str]] = {}
    for block in re.split(r"\n(?=(?:local)?rule )", log):
        head = re.match(r"(?:local)?rule (\w+):", block)
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

    def copy(self, dest: Path, root: Path) -> Path:
        """A private copy of the finished study in `dest` (results and metadata included)
        whose servers go to `root` (its pgdata link points there)."""
        shutil.copytree(self.work, dest, symlinks=True)
        (dest / "pgdata").unlink()
        (dest / "pgdata").symlink_to(root, target_is_directory=True)
        return dest


def _snapshot(work: Path) -> dict[str, tuple[int, int]]:
    """relative path -> (size, mtime) of every file of a study (Snakemake's metadata aside)."""
    return {
        str(path.relative_to(work)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in work.rglob("*")
        if path.is_file() and ".snakemake" not in path.parts and "__pycache__" not in path.parts
    }


def readme_quick_start() -> list[list[str]]:
    """The README's quick-start Snakemake commands, as written (their arguments): the study,
    then its report."""
    text = (REPO / "README.md").read_text()
    blocks = [text.split(marker, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
              for marker in ("## Quick start", "Its report:")]  # fmt: skip
    commands = []
    for line in "".join(blocks).splitlines():
        for part in line.split("  #", 1)[0].split("&&"):
            argv = shlex.split(part)
            if argv and argv[0] == ".venv/bin/snakemake":
                commands.append(argv[1:])
    study, report = commands
    assert "results/effects.csv" in study and "--report" in report, commands
    return commands


def _shared_folder(config, tmp_path_factory) -> Path:
    """A folder of this pytest run that every pytest-xdist worker sees (their base folders'
    parent), else the run's base folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


def _build_tiny_study(work: Path, root: Path) -> dict:
    """Run the tiny study in `work` on the data root `root`: what `tiny_study` needs, or why
    it failed."""
    try:
        tiny_workflow(work, root, package=True)
        # the README's quick start as written: the one-minute study (`snakemake --cores 4
        # results/effects.csv --configfile config/test.yaml`: a minute on a quiet machine; the
        # timeout is for a machine shared with other work, not a performance target), then its
        # report (`snakemake --report report.html --configfile config/test.yaml`)
        study, report = readme_quick_start()
        out = snakemake(work, *study, timeout=1800)
        if out.returncode != 0:
            raise AssertionError(f"{shlex.join(study)}\n{failed(out)}")
        report = snakemake(work, *report, timeout=600)
    except Exception as exc:  # every worker fails with it, none runs it again
        return {"error": f"the tiny study failed: {type(exc).__name__}: {exc}"}
    return {"report": [report.args, report.returncode, report.stdout, report.stderr]}


@pytest.fixture(scope="session")
def tiny_study(request, tmp_path_factory) -> TinyStudy:
    """The tiny study, run once per pytest run and shared read-only by every worker (see the
    module docstring); its data root is removed at the end of the run (pytest_unconfigure)."""
    shared = _shared_folder(request.config, tmp_path_factory)
    work, root, built = shared / "tiny-study", Path(os.environ[_TINY_ROOT]), shared / "tiny.json"
    with open(shared / "tiny-study.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker runs it, the others wait for it
        if not built.exists():
            root.mkdir(mode=0o755)
            root.chmod(0o755)
            built.write_text(json.dumps(_build_tiny_study(work, root)))
    record = json.loads(built.read_text())
    if "error" in record:
        raise AssertionError(record["error"])
    before = _snapshot(work)
    yield TinyStudy(work, root, subprocess.CompletedProcess(*record["report"]))
    after = _snapshot(work)
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    assert changed == [], f"tests wrote into the shared tiny study (use tiny_study_copy): {changed}"


@pytest.fixture
def tiny_study_copy(tiny_study, tmp_path, data_root) -> Path:
    """A private copy of the finished tiny study whose servers go to a data root of its own
    (`data_root_of`): a test that changes anything works here."""
    return tiny_study.copy(tmp_path / "study", data_root)


def row_from_levels(levels: dict, dataset_rows: int, run: str = "run01", **extra):
    """A resolved Row from seed-style levels (nodes, workload, isolation, ...), for tests: the
    levels (by the seed's shorthands) and `extra` server/session settings as the defaults of a
    one-factor design, resolved by `resolve_rows` as a study's rows are; the Row's run and
    level labels are then the ones asked for."""
    import dataclasses

    from ybscale.design import knobs
    from ybscale.design.factorial import design_from_dict
    from ybscale.design.row import resolve_rows

    defaults: dict = {"dataset": {"rows": dataset_rows}, "session": {}, "server": {}}
    values = {"isolation": "read committed", "operation_size": 1, **levels}
    for name, value in values.items():
        kind, knob = knobs.SHORTHANDS[name].split(".")
        defaults.setdefault(kind, {})[knob] = value
    for kind in ("server", "session"):
        defaults[kind].update(extra.get(kind, {}))
    # one factor, on a knob every row has: its low level is the default, so run01 is `levels`
    isolation = defaults["session"]["default_transaction_isolation"]
    other = "serializable" if "read committed" in str(isolation) else "read committed"
    factor = {"name": "isolation", "levels": [isolation, other]}
    design = design_from_dict({"factors": {"A": factor}})
    config = {"defaults": defaults, "workloads": str(REPO / "workloads")}
    (row, _) = resolve_rows(design, config)
    return dataclasses.replace(row, run=run, levels=dict(levels))


def shipped_config() -> dict:
    """config/config.yaml as a plain dict, with every backend's section as its schema fills
    it: the file shows only what a user edits, and a test that changes one gcp or existing
    setting starts from the defaults the loader would give."""
    import yaml

    from ybscale import settings

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    local = settings.schema("config")["properties"]["local"]
    config["local"] = settings.fill_defaults(local, dict(config.get("local") or {}))
    for name in ("gcp", "existing"):
        config[name] = settings.validated(config.get(name) or {}, name, prefix=name)
    return config


def settings_with(**sections) -> dict:
    """config/config.yaml loaded as the pipeline loads it, with `sections` replaced."""
    from ybscale import settings

    return settings.load({**shipped_config(), **sections})


SSHD = Path("/usr/sbin/sshd")
# commands the loopback load generator's sessions find first: a psql that passes YugabyteDB's
# DDL to the stand-in PostgreSQL tservers as they take it (tests/yb_ddl.py)
STAND_IN_BIN = Path(__file__).resolve().parent / "stand_in_bin"
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


def _wait_port(port: int, proc: subprocess.Popen, seconds: float = 10, host="127.0.0.1") -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("sshd did not listen")


def start_sshd(
    folder: Path,
    addresses: list[str],
    port: int,
    name: str = "sshd",
    extra: str = "",
    prefix: Sequence[str] = (),
    path_first: Path | None = None,
) -> subprocess.Popen:
    """An sshd on every one of `addresses` at `port`, configured in `folder`/`name`_config with
    the host key and authorized_keys of `folder` (and the config lines `extra`), started after
    the command `prefix` (e.g. a CPU group's); returned once it listens (RuntimeError if it
    cannot run). Stop it with `stop_sshd`. `path_first`: a folder its sessions find commands
    in before the system's (SetEnv PATH: sshd takes the first SetEnv line only)."""
    setenv = "SHLVL=1" + (f" PATH={path_first}:/usr/local/bin:/usr/bin:/bin" if path_first else "")
    cfg = folder / f"{name}_config"
    # SHLVL: bash run by sshd reads ~/.bashrc unless it is a nested shell; the stand-in VM runs
    # commands as a fresh VM does, without this machine's interactive set-up (an rc file that
    # starts pyenv costs 0.1 s per command, most of a command's time on loopback)
    cfg.write_text(
        "".join(f"ListenAddress {address}\n" for address in addresses)
        + f"HostKey {folder / 'host_key'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
        f"PidFile {folder / (name + '.pid')}\n"
        "StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nUsePAM no\n"
        f"Subsystem sftp {SFTP_SERVER}\nLogLevel ERROR\nSetEnv {setenv}\n" + extra
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen(
        [*prefix, str(SSHD), "-D", "-e", "-f", str(cfg), "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_port(port, proc, host=addresses[0])
    except RuntimeError:
        stop_sshd(proc)
        raise
    return proc


def stop_sshd(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
    try:  # its psql takes YugabyteDB's DDL to the stand-in tservers (tests/stand_in_bin/psql)
        proc = start_sshd(tmp, ["127.0.0.1"], port, path_first=STAND_IN_BIN)
    except RuntimeError as exc:
        pytest.skip(f"sshd cannot run here: {exc}")
    try:
        yield ssh.SshHost(
            host="127.0.0.1",
            user=getpass.getuser(),
            key=client_key,
            port=port,
            known_hosts=tmp / "results" / "ssh" / "known_hosts",
        )
    finally:
        stop_sshd(proc)


def authorized_keys(host) -> Path:
    """The authorized_keys file of the `sshd` fixture's server."""
    return host.key.parent.parent / "authorized_keys"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the test ids
def pytest_collection_modifyitems(items):
    """Tests on the real Pulumi engine (they take the `engine` fixture) are slow long
    real-system tests: marked here once, so a new one is marked too (`-m "not slow"` skips them;
    `pytest -q` and CI run them). A module's tests that share one of its fixtures run on one
    pytest-xdist worker, and so do the quick tests reading the tiny study; in the order of
    `_order`."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "engine" in fixtures:
            item.add_marker(pytest.mark.slow)
        if _module_scoped(item):  # a module's fixture set up once, on one worker
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
        elif _reads_the_tiny_study(item):
            item.add_marker(pytest.mark.xdist_group("tiny-study"))
    items.sort(key=_order)


def _reads_the_tiny_study(item) -> bool:
    """A quick test that reads the shared study (no copy, not slow, no fixture of its module)."""
    fixtures = getattr(item, "fixturenames", ())
    return (
        "tiny_study" in fixtures
        and "tiny_study_copy" not in fixtures
        and item.get_closest_marker("slow") is None
        and not _module_scoped(item)
    )


def _order(item) -> tuple[int, bool]:
    """First the quick tests reading the tiny study (one group: the worker that takes it runs
    the study at once), then the long tests (so the workers do not end waiting on one long
    test), those of the tiny study after the others (by then it has run, and they are shared
    out over the workers), then the quick ones, and last the tests that run alone (`exclusive`).
    An exclusive test among the first waited for the tiny study's set-up, and every other
    worker with it (`bench/suite_time --idle`: 61 of the suite's 172 idle CPU-s fell then)."""
    study = "tiny_study" in getattr(item, "fixturenames", ())
    slow = item.get_closest_marker("slow") is not None
    if item.get_closest_marker("exclusive") is not None:
        return (4, False)
    if _reads_the_tiny_study(item):
        return (0, False)
    if slow and not study:
        return (1, False)
    if study:
        return (2, not slow)
    return (3, False)


def _module_scoped(item) -> bool:
    defs = getattr(item, "_fixtureinfo", None)
    defs = defs.name2fixturedefs.values() if defs else ()
    return any(d[-1].scope in ("module", "class", "package") for d in defs)


# ------------------------------------------------------------- parallel workers (pytest-xdist)
# `pytest -q` runs on three workers (pyproject.toml: -n 3). Every test holds a shared lock on
# one file of the run while it runs (set-up and tear-down included); a test marked `exclusive`
# (it asserts on what a measurement saw: CPU shares, a saturated node, a race) holds it
# exclusively, so nothing of the other workers runs beside it. A test waiting to run alone
# first holds a gate that every test passes before it starts: the others finish what they run
# and wait, instead of starting test after test while it starves (flock has no queue).
_LOCK = pytest.StashKey[str]()
_TINY_ROOT = "YBSCALE_TINY_STUDY_ROOT"  # the shared tiny study's RAM data root (made when run)


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        return  # the workers start with what the run set up here
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    os.environ[_TINY_ROOT] = str(base / f"ybscale-test-{uuid.uuid4().hex[:8]}")
    if config.getoption("numprocesses", None):
        fd, path = tempfile.mkstemp(prefix="ybscale-tests-", suffix=".lock")
        os.close(fd)
        os.environ["YBSCALE_TEST_LOCK"] = path  # the workers start after this, with it
        Path(path + ".gate").touch()
        config.stash[_LOCK] = path


def pytest_unconfigure(config):
    SNAKEMAKE.close()
    if hasattr(config, "workerinput"):
        return
    root = os.environ.pop(_TINY_ROOT, "")
    if root:  # the servers on it were stopped by the study and by each test
        shutil.rmtree(root, ignore_errors=True)
    path = config.stash.get(_LOCK, None)
    if path:
        Path(path).unlink(missing_ok=True)
        Path(path + ".gate").unlink(missing_ok=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("YBSCALE_TEST_LOCK")
    if not (path and hasattr(item.config, "workerinput")):
        yield
        return
    alone = item.get_closest_marker("exclusive") is not None
    mode = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
    with open(path) as lock, open(path + ".gate") as gate:
        fcntl.flock(gate, mode)  # held by a test waiting to run alone: the others wait here
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(lock, mode)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)
