"""Local backend: a real multi-node PostgreSQL cluster on 127.0.0.1 for one design row, or for
the rows of one combination (`local.cluster_per: combination`).

cluster.nodes          -> that many postgres servers, each its own data directory and port.
cluster.replication on -> node1 primary, the others synchronous quorum standbys (ANY k, majority).
cluster.replication off-> the table hash-sharded (k mod n) across n independent nodes.
cluster.node_size      -> per-node CPU limit (cpu.py, sizes from `local.cpu`), and memory limit
                          where `local.memory` gives the size one.
server.<setting>       -> postgresql.conf of every node, read back with SHOW before measuring.
session.<setting>      -> PGOPTIONS of every session, read back with SHOW before measuring.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import pwd
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ybscale.backends.base import (
    Backend,
    BackendError,
    Cluster,
    Endpoint,
    Target,
    alive,
    cluster_label,
    orphan_jobs,
    released_since,
    same_setting,
    settings_by_source,
    spawn_local,
    workflow_owner,
)
from ybscale.backends.local import catalogue
from ybscale.backends.local.cpu import CpuLimits, reap_orphan_groups
from ybscale.backends.psql_session import PsqlSession
from ybscale.design import workload
from ybscale.design.row import ClusterShape, Row
from ybscale.measure import outside, pgbench, utilisation

COMMAND_TIMEOUT = 60  # seconds for any server administration command
PSQL_ENV = {"PGCONNECT_TIMEOUT": "10"}
DATASET = "dataset.json"  # in a cluster's home: the dataset its nodes hold (`prepare`)
DROP_SQL = "DROP TABLE IF EXISTS kv;\nDROP SEQUENCE IF EXISTS kv_new_key;\n"  # a row's first load
PREFIX = "ybscale-"


def find_bindir() -> Path:
    """Directory with the PostgreSQL server binaries (pg_config --bindir, else Debian's layout)."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for cand in candidates:
        if cand and all((Path(cand) / exe).is_file() for exe in ("initdb", "postgres", "pgbench")):
            return Path(cand)
    raise BackendError(
        "local backend: PostgreSQL server binaries (initdb, postgres, pgbench) not found via "
        "pg_config --bindir or /usr/lib/postgresql/*/bin; on Debian: apt-get install postgresql-15"
    )


def _version_key(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


def choose_data_root(setting: str, fallback: Path, create: bool = True) -> tuple[Path, str]:
    """Where data directories go, and what kind of storage that is (not `create`: where they
    would go, nothing made or asked of the file system)."""
    if setting == "auto":
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            return shm, "tmpfs (/dev/shm, RAM)"
        return fallback, "disk (no writable /dev/shm)"
    path = Path(setting).resolve()  # relative: to the workflow's folder (the jobs' own)
    if not create:
        return path, ""
    path.mkdir(parents=True, exist_ok=True)
    return path, _fs_type(path)


SIZE = re.compile(r"^([0-9]+)\s*(kB|MB|GB)$")
UNITS = {"kB": 1024, "MB": 1024**2, "GB": 1024**3}  # as PostgreSQL reads sizes


def size_bytes(text: str) -> int:
    """'256MB' as bytes (kB, MB, GB of 1024 as PostgreSQL reads them); ValueError otherwise."""
    match = SIZE.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a size such as 512MB (units kB, MB, GB)")
    return int(match[1]) * UNITS[match[2]]


def _fs_type_of(path: Path) -> str:
    """The file system type of `path`, or of its nearest existing parent."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return _fs_type(path)


def _fs_type(path: Path) -> str:
    out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORTS_FROM = 20000  # servers' ports are drawn from here up to the ephemeral range


def _bindable(port: int) -> bool:
    """Nothing listens on 127.0.0.1:`port` right now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(exclude: Sequence[int] = ()) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, not in `exclude`, and below
    the kernel's ephemeral range: a port from that range can be handed to an outgoing client
    connection (psql, pgbench) between being chosen and the server binding it ("Address
    already in use", seen once in CI). Falls back to the kernel's choice."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    tries = 200 if low - PORTS_FROM > 1000 else 0  # no room below the range: the kernel's
    for port in (rng.randrange(PORTS_FROM, low) for _ in range(tries)):
        if port not in exclude and _bindable(port):
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Node:
    """One postgres server: its own data directory and port."""

    name: str
    datadir: Path
    port: int
    runas: list[str]
    bindir: Path
    session: PsqlSession | None = field(default=None, repr=False, compare=False)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(host="127.0.0.1", port=self.port, role=self.name)

    @property
    def logfile(self) -> Path:
        return self.datadir.parent / f"{self.name}.log"

    def configure(self, shared_buffers: str, extra: Mapping[str, str] = {}) -> None:
        """Append this node's settings (then `extra`, which wins) to postgresql.conf."""
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.datadir}'",
            "max_connections": "300",
            "shared_buffers": shared_buffers,
            "wal_level": "replica",
            "max_wal_senders": "10",
            "max_replication_slots": "10",
            "hot_standby": "on",
            "cluster_name": f"'{self.name}'",
            **extra,
        }
        with open(self.datadir / "postgresql.conf", "a") as conf:
            conf.write("\n# ybscale\n")
            conf.writelines(f"{k} = {conf_value(v)}\n" for k, v in settings.items())

    def start(self, limit_prefix: Sequence[str]) -> None:
        """Start the server under its CPU limit and wait until it accepts connections."""
        argv = [*limit_prefix, *self.runas, str(self.bindir / "pg_ctl"), "start", "-w", "-t", "30"]
        argv += ["-D", str(self.datadir), "-l", str(self.logfile)]
        try:
            _run(argv, f"start {self.name}")
        except BackendError as exc:  # pg_ctl says "examine the log": quote the log's reason
            raise BackendError(f"{exc}\n{self.logfile}: {self.log_errors()}") from exc

    def log_errors(self) -> str:
        """The server log's lines that say why (FATAL, ERROR, WARNING, HINT, "could not"), the
        last five, or that there are none."""
        try:
            lines = self.logfile.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"no log ({exc.strerror})"
        keys = ("FATAL:", "ERROR:", "WARNING:", "HINT:", "could not")
        found = [ln for ln in lines if any(k in ln for k in keys)]
        return " | ".join(found[-5:]) or "no FATAL or ERROR line"

    def stop(self) -> None:
        """Stop fast, then immediately, then kill: the server must not outlive the cluster."""
        for mode in ("fast", "immediate"):
            argv = [*self.runas, str(self.bindir / "pg_ctl"), "stop", "-m", mode, "-w", "-t", "20"]
            try:
                subprocess.run(argv + ["-D", str(self.datadir)], capture_output=True, timeout=30)
            except subprocess.TimeoutExpired:
                pass
            if not self.running():
                return
        kill_postmaster(self.datadir)

    def running(self) -> bool:
        pid = postmaster_pid(self.datadir)
        return pid is not None and alive(pid)

    def psql_argv(self) -> list[str]:
        """psql on this node, reading SQL from stdin, unaligned tuples only, stopping at the
        first error."""
        argv = [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        return argv + ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres"]

    def psql(self, sql: str, env: Mapping[str, str] = {}, timeout: float = COMMAND_TIMEOUT) -> str:
        """Run SQL statements one by one (not in one transaction); return stdout."""
        full_env = {**os.environ, **PSQL_ENV, **env}
        try:
            out = subprocess.run(
                self.psql_argv(), input=sql, capture_output=True, text=True, timeout=timeout,
                env=full_env,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"{self.name}: SQL timed out after {timeout}s: {sql[:80]}") from exc
        if out.returncode != 0:
            raise BackendError(f"{self.name}: SQL failed: {out.stderr.strip()} ({sql[:80]})")
        return out.stdout.strip()

    def ask(self, sql: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """`psql(sql)` in this node's kept session (`PsqlSession`): for the read-backs a
        measurement repeats, statements that change nothing and set nothing."""
        if self.session is None:
            self.session = PsqlSession(self.psql_argv(), PSQL_ENV, self.name)
        return self.session.ask(sql, timeout)

    def close_session(self) -> None:
        if self.session is not None:
            self.session.close()


def conf_value(value: str) -> str:
    """A postgresql.conf value: quoted unless it already is (ybscale's own settings are)."""
    text = str(value)
    if text.startswith("'") and text.endswith("'") and len(text) > 1:
        return text
    return "'" + text.replace("'", "''") + "'"


def postmaster_pid(datadir: Path) -> int | None:
    try:
        return int((datadir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_bytes(pid: int) -> int:
    """Bytes a server brought from the storage device so far: /proc/<pid>/io `read_bytes` of
    the postmaster and of each live child (its backends and workers). The kernel adds a
    reaped child's counts to its parent's (proc(5), /proc/pid/io), so the sum keeps what
    exited backends read; a page found in the page cache adds nothing. 0 when the server is
    gone."""
    children = [pid]
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and _parent(proc) == pid:
                children.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue  # it exited meanwhile
    total = 0
    for child in children:
        try:
            fields = dict(
                line.split(": ", 1) for line in Path(f"/proc/{child}/io").read_text().splitlines()
            )
        except OSError:
            continue
        total += int(fields.get("read_bytes", 0))
    return total


def _parent(proc: Path) -> int:
    return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])


def kill_postmaster(datadir: Path) -> None:
    """Stop an orphaned server: immediate shutdown (SIGQUIT, which still removes its shared
    memory segments from /dev/shm), SIGKILL if it has not exited within 5 s."""
    pid = postmaster_pid(datadir)
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        if not (pid and alive(pid)):
            return
        os.kill(pid, sig)
        for _ in range(50):
            if not alive(pid):
                return
            time.sleep(0.1)


def _run(argv: Sequence[str], what: str, timeout: float = COMMAND_TIMEOUT) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BackendError(f"{what}: timed out after {timeout}s") from exc
    if out.returncode != 0:
        raise BackendError(f"{what} failed: {(out.stderr or out.stdout).strip()[-800:]}")
    return out.stdout


def _keep_log(node: Node, workdir: Path) -> None:
    """Copy a node's server log next to the row's results."""
    if node.logfile.exists():
        shutil.copy(node.logfile, workdir / node.logfile.name)


def reap_orphans(root: Path, owned_by: int | None = None) -> list[str]:
    """Stop servers and remove data whose owner (the workflow, or the process that brought
    them up) died, e.g. killed -9; with `owned_by`, those of that owner instead. The endpoints
    naming a reaped cluster go too (`forget_endpoints`): the next run brings it up again."""
    reaped = []
    for owner in root.glob(PREFIX + "*/owner.json"):
        try:
            record = json.loads(owner.read_text())
            pid = record["pid"]
        except (OSError, ValueError, KeyError):
            continue
        if pid != owned_by if owned_by is not None else alive(pid):
            continue
        for datadir in owner.parent.glob("*/"):
            kill_postmaster(datadir)
        shutil.rmtree(owner.parent, ignore_errors=True)
        if record.get("folder"):
            forget_endpoints(Path(record["folder"]))
        reaped.append(str(owner.parent))
    return reaped


def forget_endpoints(folder: Path) -> bool:
    """Remove the cluster folder's endpoints when the servers they name are gone (their data
    directory removed: reaped, here or by another study's run on the same data root) and the
    cluster was not released since: a measuring job would find nothing there. True if removed."""
    path = folder / "endpoints.json"
    try:
        endpoints = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    home = endpoints.get("home")
    if not home or Path(home).exists() or released_since(folder, endpoints):
        return False
    path.unlink(missing_ok=True)
    return True


def nodes_of(endpoints: Mapping) -> list[Node]:
    """The nodes a bring-up's endpoints describe (`LocalBackend.up`)."""
    bindir = Path(endpoints["record"]["bindir"])
    runas = list(endpoints["runas"])
    return [
        Node(n["name"], Path(n["datadir"]), n["port"], runas, bindir) for n in endpoints["nodes"]
    ]


class LocalCluster(Cluster):
    """Nodes of one row, the topology mapping and the dataset."""

    def __init__(
        self,
        nodes: list[Node],
        row: Row,
        record: dict,
        limits: CpuLimits,
        client_cpus: float | None = None,
        client_prefix: Sequence[str] = (),
    ):
        self.nodes = nodes
        self.limits = limits  # lifted while the dataset loads
        self.row = row
        self.rows = row.dataset_rows
        self.replicated = row.cluster.replication
        self.record = record
        self.pgbench = str(nodes[0].bindir / "pgbench")
        self.client_cpus = client_cpus  # pgbench's quota (None: none); its CPU time is counted
        self.client_prefix = list(client_prefix)  # pgbench's CPU group (made by the bring-up)

    @property
    def quorum(self) -> int:
        """Standbys that must confirm a commit: a majority of all nodes, counting the primary."""
        return len(self.nodes) // 2

    def targets(self, kind: str) -> list[Target]:
        n = len(self.nodes)
        if not self.replicated:
            return [
                Target(node.endpoint, workload.key_variables(self.rows, i, n))
                for i, node in enumerate(self.nodes)
            ]
        serving = self.nodes if kind == "read" else self.nodes[:1]
        return [Target(node.endpoint, workload.key_variables(self.rows, 0, 1)) for node in serving]

    def run(self, command) -> subprocess.Popen:
        """pgbench here, in its CPU group (`client_prefix`)."""
        argv = [*self.client_prefix, *pgbench.argv(command, self.pgbench)]
        return spawn_local(argv, command.env, command.workdir)

    def cpu_seconds(self) -> dict[str, float]:
        """Each node's and pgbench's CPU group counter, the measuring job's own CPU time (this
        process, every thread), the machine's busy time, and what every other process, kernel
        thread, the interrupts and the hypervisor took (`ybscale.measure.outside`)."""
        counted = self.limits.cpu_seconds()
        if not counted:
            return {}
        own = resource.getrusage(resource.RUSAGE_SELF)
        return {
            **counted,
            "job": own.ru_utime + own.ru_stime,
            "host": utilisation.host_cpu_seconds(),
            **outside.readings(self.limits.group),
        }  # fmt: skip (what others used, by name)

    def cpu_capacity(self) -> dict[str, float]:
        """A node's CPU quota, the CPUs pgbench may use (its quota or every core), the
        machine's cores (the job's and the machine's)."""
        cores = float(os.cpu_count() or 1)
        quotas = {name: float(cpu["cpus"]) for name, cpu in self.record.get("cpu", {}).items()}
        return {**quotas, "client": min(cores, self.client_cpus or cores), "job": cores,
                "host": cores}  # fmt: skip

    def block_counters(self) -> dict[str, float]:
        """pg_stat_database's blks_hit and blks_read of the study's database and the bytes
        the servers read from the disk (`read_bytes`), summed over the nodes (each node's own
        reads: a standby serves reads too), once every other session of the database has
        ended (`sessions_ended`: a session's last counts reach pg_stat_database as it exits)."""
        sql = "SELECT blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()"
        hits = reads = disk = 0.0
        for node in self.nodes:
            sessions_ended(node)
            hit, read = node.ask(sql).split("|")
            hits, reads = hits + float(hit), reads + float(read)
            pid = postmaster_pid(node.datadir)
            disk += read_bytes(pid) if pid else 0
        return {"blks_hit": hits, "blks_read": reads, "disk_read_bytes": disk}

    def reset(self, kind: str) -> str:
        """Bring the dataset back to its loaded state before a write repetition (writes grow
        it): the added keys removed when the script only inserts new ones
        (`workload.inserts_only`), else a full reload; how ('restored', 'reloaded', '' for
        reads, which change nothing)."""
        if kind != "write":
            return ""
        if self.restorable():
            self.restore()
            return "restored"
        self.load()
        return "reloaded"

    def restorable(self) -> bool:
        """Whether this row's script only inserts new keys (`workload.inserts_only`)."""
        return workload.inserts_only(Path(self.row.script_path).read_text())

    def prepare(self) -> None:
        """A row's dataset, recorded (`dataset` in the record: how, seconds, rows per second):
        kept when this cluster already holds it (an earlier row on it loaded the same rows on
        the same shards: `DATASET` in its home says so), the keys writes added removed; else
        loaded anew (the table and its key sequence dropped first)."""
        marker = self.nodes[0].datadir.parent / DATASET
        wanted = {"rows": self.rows, "shards": len(self.nodes), "replicated": self.replicated}
        if self.row.dataset_value_bytes != workload.VALUE_BYTES:  # a row of another value size
            wanted["value_bytes"] = self.row.dataset_value_bytes
        started = time.monotonic()
        held = marker.is_file() and json.loads(marker.read_text()) == wanted
        if held:
            self.restore()
        else:
            marker.unlink(missing_ok=True)  # a load that fails leaves no claim behind
            self.load(anew=True)
            marker.write_text(json.dumps(wanted))
        seconds = time.monotonic() - started
        if not self.row.read_only and not self.restorable():
            marker.unlink()  # this row's writes change loaded rows: the next row loads anew
        self.record["dataset"] = {
            "how": "kept" if held else "loaded",
            "rows": self.rows,
            "seconds": round(seconds, 3),
            "rows_per_second": round(self.rows / seconds) if seconds > 0 and not held else None,
            # its table and index on each node's disk (a standby holds the whole of it)
            "bytes_per_node": {
                node.name: int(node.ask("SELECT pg_total_relation_size('kv')"))
                for node in self.nodes
            },
        }

    def restore(self) -> None:
        """The keys the write repetitions added removed on every shard (the primary when
        replicated, its standbys then caught up), quotas lifted meanwhile as for a load."""
        with self.limits.lifted():
            self._on_shards(lambda i, n: workload.restore_sql(self.rows, i, n))

    def load(self, anew: bool = False) -> None:
        """(Re)create `rows` keys: split over the shards, or on the primary when replicated;
        `anew` (a row's first load: the cluster may have served another row) drops the table
        and its key sequence first, as the existing backend's reset does.

        The nodes' CPU quotas are lifted meanwhile (restored before anything is measured): a
        reload at a quarter of a CPU was most of the time between two write counts."""
        with self.limits.lifted():
            self._load(DROP_SQL if anew else "")

    def _load(self, before: str) -> None:
        size = self.row.dataset_value_bytes
        self._on_shards(
            lambda i, n: before + workload.load_sql(self.rows, i, n, size) + "CHECKPOINT;\n"
        )

    def _on_shards(self, sql: Callable[[int, int], str]) -> None:
        """`sql(shard, shards)` on every shard at once (each node within its own CPU quota);
        replicated: `sql(0, 1)` on the primary, then its standbys caught up."""
        if self.replicated:
            self.nodes[0].psql(sql(0, 1), timeout=300)
            self.wait_replayed()
            return
        n = len(self.nodes)
        with ThreadPoolExecutor(n) as pool:  # re-raises the first failure
            list(pool.map(lambda i: self.nodes[i].psql(sql(i, n), timeout=300), range(n)))

    def wait_replayed(self, timeout: float = COMMAND_TIMEOUT) -> None:
        """Wait until every standby has replayed everything the primary wrote."""
        target = self.nodes[0].ask("SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + timeout
        for node in self.nodes[1:]:
            sql = f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            while node.ask(sql) != "t":
                if time.monotonic() > deadline:
                    raise BackendError(f"{node.name}: standby did not catch up within {timeout}s")
                time.sleep(0.05)

    def close(self) -> None:
        """Each node's kept psql session ended (`Node.ask`)."""
        for node in self.nodes:
            node.close_session()

    def check(self) -> None:
        """Every node running and answering (one question each, in its kept session); the
        primary also reports its replication quorum in the same question."""
        quorum_sql = "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'quorum';"
        for node in self.nodes:
            if not node.running():
                raise BackendError(
                    f"{node.name} (port {node.port}) is not running; see {node.logfile}"
                )
        replicated = self.replicated and len(self.nodes) > 1
        answers = self.nodes[0].ask("SELECT 1;" + (quorum_sql if replicated else ""), timeout=15)
        for node in self.nodes[1:]:
            node.ask("SELECT 1", timeout=15)
        if replicated:
            quorum = answers.splitlines()[1]
            if int(quorum) < len(self.nodes) - 1:
                raise BackendError(
                    f"replication quorum not met: {quorum} of {len(self.nodes) - 1} standbys "
                    "in sync_state 'quorum'"
                )

    def applied(self) -> dict:
        """Server and session settings read back from every node, with its isolation level and
        its postmaster's pid and start (rows with equal ones ran on the same servers): one
        session with the row's session settings a node, and one without them for its server
        settings; BackendError on a mismatch."""
        env = workload.session_env(self.row.session)
        server, session = list(self.row.server), list(self.row.session)
        isolation, in_effect, servers = {}, {"server": {}, "session": {}}, {}
        version = ""
        for i, node in enumerate(self.nodes):
            sql = ["SHOW transaction_isolation;", "SELECT pg_postmaster_start_time();"]
            sql += [f"SHOW {name};" for name in session]
            sql += ["SHOW server_version;"] if i == 0 else []
            answers = node.psql("\n".join(sql), env=env).splitlines()
            isolation[node.name] = answers[0]
            servers[node.name] = {"pid": postmaster_pid(node.datadir), "started": answers[1]}
            in_effect["session"][node.name] = dict(
                zip(session, answers[2 : 2 + len(session)], strict=True)
            )
            if i == 0:
                version = answers[-1]
            # server settings in a session without the row's (its PGOPTIONS could mask them)
            in_effect["server"][node.name] = read_settings(node, server, {})
        for kind, wanted in (("server", self.row.server), ("session", self.row.session)):
            for node, got in in_effect[kind].items():
                wrong = {k: v for k, v in got.items() if not same_setting(v, wanted[k])}
                if wrong:
                    raise BackendError(
                        f"{node}: {kind} settings in effect {wrong} differ from the "
                        f"row's {dict(wanted)}"
                    )
        return {
            **self.record,
            "isolation_in_effect": isolation,
            "settings_in_effect": in_effect,
            "server_version": version,
            "servers": servers,
        }


# Another session of the database on a node: its backend adds its pending counts to
# pg_stat_database as it exits (PostgreSQL 15: `pgstat_shutdown_hook`, a before_shmem_exit
# callback), before it leaves pg_stat_activity (`pgstat_beshutdown_hook`, on_shmem_exit); while
# it runs, at most once a second (PGSTAT_MIN_INTERVAL). A count read as pgbench ends would miss
# its sessions' last second: a run of one second, nearly all of it.
OTHER_SESSIONS = (
    "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE datname = current_database()"
    " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
)
SESSIONS_TIMEOUT = 10.0  # seconds for a closed session's backend to exit


def sessions_ended(node: Node, timeout: float = SESSIONS_TIMEOUT) -> None:
    """Wait until no other client session of the study's database is left on `node` (its
    kept session asks: pg_stat_activity as of each statement); BackendError naming the pids
    still there after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while left := node.ask(OTHER_SESSIONS):
        if time.monotonic() > deadline:
            raise BackendError(
                f"{node.name}: sessions {left} still open after {timeout:g} s: the block "
                "counters read now would miss their reads"
            )
        time.sleep(0.005)


def read_settings(node: Node, names: list[str], env: Mapping[str, str]) -> dict[str, str]:
    """Setting -> value as the server reports it (SHOW), in a session with `env`."""
    if not names:
        return {}
    sql = "\n".join(f"SHOW {name};" for name in names)
    return dict(zip(names, node.psql(sql, env=env).splitlines(), strict=True))


class LocalBackend(Backend):
    """A real PostgreSQL cluster per row (or per combination) on 127.0.0.1: `up` starts its
    servers as daemons (each under its CPU quota), `measure` loads the row's dataset anew,
    `down` stops them."""

    name = "local"
    modules = ("backends/local/cluster.py", "backends/local/cpu.py")
    runs_here = True

    @classmethod
    def cluster_labels(cls, settings, rows) -> dict[str, str]:
        """A fresh cluster per row (`local.cluster_per: row`), or one per combination and
        replicate (`combination`: the rows differing only in session or workload knobs)."""
        if settings["local"]["cluster_per"] == "row":
            return {row.run: row.run for row in rows}
        return {row.run: cluster_label(row, per_replicate=True) for row in rows}

    def __init__(self, config: Mapping, clusters: Path | None = None):
        super().__init__(config, clusters)
        self.settings = config["local"]

    @staticmethod
    def report_text(applied) -> list[str]:
        from ybscale.backends.local.report import report_text

        return report_text(applied)

    @classmethod
    def cpu_quota(cls, settings: Mapping, row: Row) -> tuple[float, str] | None:
        """Each node's CPU quota, `local.cpu.<node size>` (what the price per vCPU counts)."""
        cpus = settings["local"]["cpu"].get(row.cluster.node_size)
        if cpus is None:
            return None
        return float(cpus), f"local.cpu.{row.cluster.node_size}"

    def node_sizes(self) -> list[str]:
        return sorted(self.settings["cpu"])

    def memory_bytes(self, node_size: str) -> int | None:
        """Each node's memory limit, `local.memory.<node size>`, in bytes (None: no limit)."""
        size = (self.settings.get("memory") or {}).get(node_size)
        return None if size is None else size_bytes(size)

    def check_memory(self, rows) -> list[str]:
        """A memory limit needs the data on a disk (on tmpfs the data itself is memory, charged
        to the node and never evicted) and shared_buffers below it."""
        limited = sorted(
            {r.cluster.node_size for r in rows if self.memory_bytes(r.cluster.node_size)}
        )
        if not limited:
            return []
        errors = []
        root, kind = choose_data_root(self.settings["data_root"], Path("."), create=False)
        if kind.startswith("tmpfs") or _fs_type_of(root) == "tmpfs":
            errors.append(
                f"config: local.memory: {', '.join(limited)} nodes get a memory limit, page cache "
                f"included, but local.data_root ({self.settings['data_root']}: {root}) is tmpfs, "
                "memory itself: set local.data_root to a folder on a disk"
            )
        buffers = size_bytes(self.settings["shared_buffers"])
        for size in limited:
            if buffers >= self.memory_bytes(size):
                errors.append(
                    f"config: local.shared_buffers ({self.settings['shared_buffers']}) must be "
                    f"below local.memory.{size} ({self.settings['memory'][size]})"
                )
        return errors

    def check_rows(self, rows) -> list[str]:
        """Sizes against `local.cpu`; settings against the installed server's catalogue."""
        errors = super().check_rows(rows) + self.check_memory(rows)
        server = settings_by_source(rows, "server")
        session = settings_by_source(rows, "session")
        if set(server) | set(session) - {"default_transaction_isolation"}:
            user = self.settings["user"]
            errors += catalogue.check_settings(str(find_bindir()), server, session, user)
        return errors

    def runas(self) -> list[str]:
        """Prefix that runs server commands as the unprivileged user when we are root."""
        if os.geteuid() != 0:
            return []
        user = self.settings["user"]
        try:
            pwd.getpwnam(user)
        except KeyError as exc:
            raise BackendError(
                f"config: local.user: user {user!r} does not exist; servers cannot run as root"
            ) from exc
        return ["runuser", "-u", user, "--"]

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(self.settings["user"])
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def template(self, root: Path, bindir: Path, runas: list[str]) -> Path:
        """An initialised data directory, made once per PostgreSQL version and cloned per node."""
        version = bindir.parent.name
        path = root / f"ybscale-template-{version}"
        with open(root / f"ybscale-template-{version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (path / "PG_VERSION").exists():
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir(mode=0o700)
                self._chown(path)
                argv = [*runas, str(bindir / "initdb"), "-D", str(path), "-U", "postgres"]
                argv += [
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                    "--no-instructions",
                ]
                _run(argv, "initdb of the template data directory", timeout=120)
        return path

    @classmethod
    def max_clusters(cls, settings) -> int:
        return 1  # this machine holds one cluster at a time: an idle one would take its CPU

    def up(self, label: str, definition: Mapping, folder: Path) -> dict:
        """Start the servers of cluster `label` (daemons, each under its CPU quota; owned by
        the workflow, `workflow_owner`) and return what the measuring and releasing jobs need
        to find them again. What was started is stopped when the bring-up fails or is
        interrupted. Clusters whose owner died are reaped first."""
        folder.mkdir(parents=True, exist_ok=True)
        shape = ClusterShape(**definition["shape"])
        bindir = find_bindir()
        runas = self.runas()
        root, storage = choose_data_root(self.settings["data_root"], self._fallback_root(folder))
        root.mkdir(parents=True, exist_ok=True)
        reaped = reap_orphans(root) + reap_orphan_groups(alive)
        template = self.template(root, bindir, runas)
        owner = workflow_owner()
        cluster_id = f"{owner}-{uuid.uuid4().hex[:8]}"  # the CPU groups' name carries the owner
        home = root / (PREFIX + cluster_id)
        cpu = self.settings["cpu"]
        limits = CpuLimits(
            group=cluster_id,
            mechanism=self.settings["cpu_mechanism"],
            largest=max(cpu.values()),
            period_ms=self.settings["cpu_period_ms"],
        )
        ports: list[int] = []
        for _ in range(shape.nodes):
            ports.append(free_port(exclude=ports))
        nodes = [
            Node(f"node{i + 1}", home / f"node{i + 1}", port, runas, bindir)
            for i, port in enumerate(ports)
        ]
        record = {
            "backend": "local",
            "cluster": label,
            "bindir": str(bindir),
            "storage": {"data_root": str(root), "kind": storage},
            "topology": (
                "primary + quorum standbys" if shape.replication else f"{shape.nodes} hash shards"
            ),
            "nodes": [{"name": nd.name, "port": nd.port} for nd in nodes],
            "reaped_orphans": reaped,
        }
        endpoints = {
            "home": str(home),
            "runas": runas,
            "nodes": [
                {"name": nd.name, "datadir": str(nd.datadir), "port": nd.port} for nd in nodes
            ],
            "record": record,
            "client_cpus": self.settings["client_cpus"],
        }
        home.mkdir(mode=0o755)
        with ExitStack() as cleanup:  # on failure or interruption: what started is stopped
            cleanup.callback(lambda: self.down({**endpoints, "limits": limits.to_dict()}, folder))
            (home / "owner.json").write_text(
                json.dumps({"pid": owner, "label": label, "folder": str(folder.resolve())})
            )
            self._chown(home)
            self._start(nodes, template, shape, definition["server"], record, limits,
                        cpu[shape.node_size])  # fmt: skip
            client_cpus = endpoints["client_cpus"]
            endpoints["client_prefix"] = (
                limits.prefix("client", client_cpus)[0] if client_cpus else limits.counted("client")
            )
            record["warnings"] = [limits.warning] if limits.warning else []
            endpoints["limits"] = limits.to_dict()
            cleanup.pop_all()
        return endpoints

    @contextmanager
    def measure(self, row: Row, endpoints: Mapping, folder: Path) -> Iterator[LocalCluster]:
        """The cluster brought up for `row` (maybe another row's before: its dataset is
        re-created from scratch), every node checked."""
        nodes = nodes_of(endpoints)
        cluster = LocalCluster(
            nodes,
            row,
            dict(endpoints["record"]),
            CpuLimits.restore(endpoints["limits"]),
            endpoints["client_cpus"],
            endpoints["client_prefix"],
        )
        try:
            cluster.prepare()
            cluster.check()
            yield cluster
        finally:
            cluster.close()

    def down(self, endpoints: Mapping, folder: Path) -> dict:
        """Stop every server (the primary last; the others at once, their quotas lifted), keep
        their logs in `folder`, remove their data and CPU groups: each step even when one
        before it failed."""
        home = Path(endpoints["home"])
        nodes = nodes_of(endpoints)
        limits = CpuLimits.restore(endpoints["limits"])
        replicated = "replication" in endpoints["record"]
        with ExitStack() as cleanup:  # callbacks run last first, each even if one raised
            cleanup.callback(limits.cleanup)
            cleanup.callback(shutil.rmtree, home, ignore_errors=True)
            for node in nodes:
                cleanup.callback(_keep_log, node, folder)
            cleanup.callback(stop_nodes, nodes, replicated)
            limits.lift()  # nothing is measured any more: shutting down at a quota is slow
        return {"stopped": [n.name for n in nodes], "logs": str(folder)}

    def _fallback_root(self, folder: Path) -> Path:
        """Where data goes without a writable /dev/shm: beside the clusters' files."""
        return Path(self.clusters or folder) / "pgdata"

    @classmethod
    def reap_dead(cls, settings, labels, clusters) -> list[str]:
        """The jobs a workflow that died (killed -9) left running here and the servers of
        every cluster on the data root whose workflow died, stopped; the endpoints of this
        study's clusters whose servers are gone, removed."""
        jobs = orphan_jobs(Path.cwd().resolve())
        for pid in jobs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # not to record or measure any more
        backend = cls(settings, clusters)
        fallback = backend._fallback_root(clusters)
        root, _ = choose_data_root(backend.settings["data_root"], fallback, create=False)
        reaped = reap_orphans(root) if root.is_dir() else []
        reap_orphan_groups(alive)
        forgotten = [Path(clusters) / label for label in labels]
        return (
            [f"process {pid}: a job stopped" for pid in jobs]
            + [f"{home}: servers stopped" for home in reaped]
            + [
                f"{folder}/endpoints.json: removed (its servers are gone)"
                for folder in forgotten
                if forget_endpoints(folder)
            ]
        )

    @classmethod
    def on_error(cls, settings, labels, clusters) -> None:
        """Stop the servers this workflow brought up that are still running (a bring-up cut
        short before it wrote its endpoints), their data and CPU groups removed."""
        backend = cls(settings, clusters)
        root, _ = choose_data_root(backend.settings["data_root"], backend._fallback_root(clusters))
        for home in reap_orphans(root, owned_by=workflow_owner()):
            print(f"local: stopped the servers of {home}", file=sys.stderr)
        reap_orphan_groups(alive)

    def _start(
        self,
        nodes: list[Node],
        template: Path,
        shape: ClusterShape,
        server: Mapping[str, str],
        record: dict,
        limits: CpuLimits,
        cpus: float,
    ) -> None:
        """Clone the template per node, start the nodes at once (the standbys once the primary
        is up), and wire up replication when asked. The CPU quotas are lifted meanwhile and
        written back before anything is measured, as for the data load: nothing is measured
        while servers start."""
        shared_buffers = self.settings["shared_buffers"]
        replicated = shape.replication
        primary, standbys = nodes[0], nodes[1:]
        prefixes = {}
        record["cpu"] = {}
        memory = self.memory_bytes(shape.node_size)
        for node in nodes:
            try:
                prefixes[node.name], record["cpu"][node.name] = limits.prefix(
                    node.name, cpus, memory
                )
            except (ValueError, OSError) as exc:
                raise BackendError(f"config: local.memory.{shape.node_size}: {exc}") from exc

        def prepare(node: Node) -> None:
            _run(["cp", "-a", str(template), str(node.datadir)], f"clone template for {node.name}")
            extra = dict(server)
            if replicated and node is not primary:
                extra |= {
                    "primary_conninfo": f"'host=127.0.0.1 port={primary.port} user=postgres "
                    f"application_name={node.name}'",
                    "primary_slot_name": f"'{node.name}'",
                }
                (node.datadir / "standby.signal").touch()
                self._chown(node.datadir / "standby.signal")
            node.configure(shared_buffers, extra)

        def start(node: Node) -> None:
            node.start(prefixes[node.name])

        with limits.lifted():
            at_once(prepare, nodes)
            if not replicated or not standbys:
                at_once(start, nodes)
                return
            start(primary)
            primary.psql(
                "".join(
                    f"SELECT pg_create_physical_replication_slot('{node.name}', true);\n"
                    for node in standbys
                )
            )
            at_once(start, standbys)
            names = ", ".join(n.name for n in standbys)
            quorum = len(nodes) // 2  # a majority of all nodes, counting the primary
            # a server.synchronous_commit factor (postgresql.conf) wins over the backend's default
            commit = server.get("synchronous_commit", "remote_apply")
            sql = f"ALTER SYSTEM SET synchronous_standby_names = 'ANY {quorum} ({names})';\n"
            if "synchronous_commit" not in server:
                sql += "ALTER SYSTEM SET synchronous_commit = 'remote_apply';\n"
            primary.psql(sql + "SELECT pg_reload_conf();\n")
            _wait_quorum(primary, len(standbys))
        record["replication"] = {
            "synchronous_standby_names": f"ANY {quorum} ({names})",
            "synchronous_commit": commit,
        }


def at_once(action: Callable[[Node], None], nodes: Sequence[Node]) -> None:
    """`action` on every node, each in a thread of its own. Once all have finished (an
    interruption meanwhile waits for them, so that what they started can be stopped), the
    interruption or else the first failure is raised."""
    interrupted = None
    with ThreadPoolExecutor(max(1, len(nodes))) as pool:
        futures = [pool.submit(action, node) for node in nodes]
        while True:
            try:
                wait(futures)
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
    if interrupted:
        raise interrupted
    for future in futures:
        future.result()


def stop_nodes(nodes: Sequence[Node], replicated: bool) -> None:
    """Stop every node, the primary last (its standbys at once before it; shards all at once);
    the primary is stopped even when a standby's stop failed."""
    first, last = (nodes[1:], nodes[:1]) if replicated else (nodes, [])
    with ExitStack() as then:
        then.callback(at_once, Node.stop, last)
        at_once(Node.stop, first)


def _wait_quorum(primary: Node, standbys: int, timeout: float = COMMAND_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    sql = "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'quorum'"
    while int(primary.psql(sql)) < standbys:
        if time.monotonic() > deadline:
            raise BackendError(f"standbys did not reach sync_state 'quorum' within {timeout}s")
        time.sleep(0.05)


if __name__ == "__main__":  # pragma: no cover - manual smoke test
    print(find_bindir(), file=sys.stderr)
