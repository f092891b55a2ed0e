"""The backend interface: how a design row's levels become a running cluster to measure."""

from __future__ import annotations

import abc
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ybscale.design.row import Row


class BackendError(RuntimeError):
    """A cluster could not be provided or failed while measuring; the message says which."""


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (a lock's or a server's owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@dataclass(frozen=True)
class Endpoint:
    """One SQL endpoint a pgbench client can connect to."""

    host: str
    port: int
    dbname: str = "postgres"
    user: str = "postgres"
    password_env: str | None = None  # name of the environment variable holding the password
    role: str = "primary"  # primary | standby | shard


@dataclass(frozen=True)
class Target:
    """Where a share of the clients goes, and the pgbench -D variables of its key space."""

    endpoint: Endpoint
    variables: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PgbenchCommand:
    """One timed pgbench run of custom scripts against one endpoint: what to run, not where.

    A runner renders it where pgbench runs (`ybscale.measure.pgbench.argv`), with
    `dataclasses.replace` for what differs there (scripts and log prefix on a load generator)."""

    scripts: tuple[Path, ...]
    endpoint: Endpoint
    clients: int
    threads: int
    seconds: int
    variables: Mapping[str, int | str]  # -D variables
    env: Mapping[str, str]  # the sessions' environment (PGOPTIONS)
    workdir: Path  # where its files go on this machine (logs, adapted scripts)
    timeout: float  # seconds until the run is killed
    log_prefix: Path | None = None
    max_tries: int = 10
    progress: int | None = None
    random_seed: int | None = None

    def __post_init__(self):
        if self.clients < 1 or self.threads < 1 or self.seconds < 1:
            raise ValueError(
                f"clients, threads, seconds must be >= 1: {self.clients}, {self.threads}, "
                f"{self.seconds}"
            )
        if self.max_tries < 0:
            raise ValueError(f"max_tries must be >= 0, got {self.max_tries}")
        if not self.scripts:
            raise ValueError("pgbench needs at least one script")


def spawn_local(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen:
    """Start a load-generating command on this machine, in its own session, output captured."""
    return subprocess.Popen(
        list(argv),
        env={**os.environ, **env},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


class Cluster(abc.ABC):
    """A running cluster for one row. Everything that talks to the servers goes through here."""

    @abc.abstractmethod
    def targets(self, workload: str) -> list[Target]:
        """Endpoints that can serve `workload` (read | write: `Row.kind`), with key variables."""

    @abc.abstractmethod
    def run(self, command: PgbenchCommand) -> subprocess.Popen:
        """Start one pgbench where the load is generated, its argv rendered for that place
        (`ybscale.measure.pgbench.argv`); the caller waits on it (text pipes, its own process
        group)."""

    def collect(self, command: PgbenchCommand) -> None:
        """Once `command` has ended: bring its files (logs) to where it names them (a remote
        load generator copies them back); nothing when pgbench ran on this machine."""
        return None

    def load_cores(self) -> int:
        """Cores of the machine that runs pgbench (pgbench -j); here: this machine's."""
        return os.cpu_count() or 1

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by each resource measured (nodes by name, `client`: the
        load generator, `host`: the whole machine); {} when the backend cannot tell."""
        return {}

    def cpu_capacity(self) -> dict[str, float]:
        """CPUs each resource of `cpu_seconds` can use (a node's quota, a VM's cores)."""
        return {}

    @abc.abstractmethod
    def reset(self, workload: str) -> None:
        """Bring the dataset back to its starting state before a client count."""

    @abc.abstractmethod
    def check(self) -> None:
        """Raise BackendError unless every node is up (and, with replication, the quorum is met)."""

    @abc.abstractmethod
    def applied(self) -> dict:
        """What was applied (settings and isolation read back from every node, CPU limits,
        storage), for measurement.json; BackendError when what is in effect differs from the
        row (the one place a row's settings are verified)."""


class Backend(abc.ABC):
    """Turns a resolved design row into a cluster; translates knobs into its own mechanism.

    The class attributes are what the rest of the pipeline knows of a backend (see
    `ybscale.backends.BACKENDS`)."""

    name: str
    modules: tuple[str, ...] = ()  # its measuring modules (package paths), for the code digest
    shared_clusters = False  # True: a combination's rows share a cluster its own rules bring up
    rules: str | None = None  # its rules file (relative to the Snakefile), included when set
    loads_here = True  # pgbench runs on this machine: one benchmark at a time here
    fresh_cluster_per_row = False  # every row on a cluster of its own (no shared error stratum)

    def __init__(self, config: Mapping, clusters: Path | None = None):
        self.config = config
        self.clusters = clusters  # shared clusters: the folder of every combination's files

    @classmethod
    def section(cls, config: Mapping) -> Mapping | None:
        """Its config section validated, defaults filled (None: the config schema covers it)."""
        return None

    @classmethod
    def measuring_settings(cls, settings: Mapping) -> Mapping:
        """Its settings that change a measurement (the measuring rule's params)."""
        return settings.get(cls.name) or {}

    @classmethod
    def cluster_labels(cls, settings: Mapping, rows: Sequence[Row]) -> dict[str, str]:
        """Run id -> the cluster it runs on (equal labels: the same cluster): by default
        its combination's."""
        return {row.run: row.combination for row in rows}

    @staticmethod
    def report_text(applied: Sequence[Mapping]) -> list[str]:
        """Paragraphs for the findings, from the rows' `applied` records."""
        return []

    @classmethod
    def on_error(cls, settings: Mapping, combinations, clusters: Path) -> None:
        """Release what a failed workflow may have left (the Snakefile's `onerror:`)."""
        return None

    @abc.abstractmethod
    def node_sizes(self) -> list[str]:
        """The backend's size table: the values `cluster.node_size` may take."""

    def check_rows(self, rows: Sequence[Row]) -> list[str]:
        """Problems with the rows' knobs on this backend, one line each naming file and field."""
        errors = []
        sizes = self.node_sizes()
        for row in rows:
            if row.cluster.node_size not in sizes:
                errors.append(
                    f"{row.source('cluster.node_size')}: cluster.node_size: "
                    f"{row.cluster.node_size!r} is not in the {self.name} size table "
                    f"({', '.join(sizes)})"
                )
        return sorted(set(errors))

    @abc.abstractmethod
    @contextmanager
    def cluster(self, row: Row, workdir: Path) -> Iterator[Cluster]:
        """Yield a ready cluster with the row's dataset loaded; stop what was started on exit."""


def settings_by_source(rows: Sequence[Row], kind: str) -> dict[str, dict[str, str]]:
    """`server` or `session` setting name -> {value: where the first row took it from}."""
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        for name, value in getattr(row, kind).items():
            out.setdefault(name, {}).setdefault(value, row.source(f"{kind}.{name}"))
    return out
