"""The backend interface: how a design row's levels become a running cluster to measure."""

from __future__ import annotations

import abc
import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ybscale.design.row import Row
from ybscale.errors import BackendError
from ybscale.measure.pgbench import Endpoint, PgbenchCommand

__all__ = ["BackendError", "Endpoint", "PgbenchCommand"]  # defined below the backends, used by them


OWNER_ENV = "YBSCALE_WORKFLOW_PID"  # the Snakemake workflow's pid, set by rules/common.smk


def _ancestors() -> set[int]:
    """This process's parent, its parent's, ... (from /proc)."""
    found, pid = set(), os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def claim_workflow() -> int:
    """Make this process the owner of the clusters its jobs bring up (the Snakefile calls it
    at parse time); a job keeps its workflow's claim (an ancestor of it). Returns the owner."""
    claimed = os.environ.get(OWNER_ENV, "")
    if not (claimed.isdigit() and int(claimed) in _ancestors()):
        os.environ[OWNER_ENV] = str(os.getpid())
    return int(os.environ[OWNER_ENV])


def workflow_owner() -> int:
    """The process a cluster lives no longer than: the Snakemake workflow whose job brought it
    up (clusters stay up between jobs), else this process. A cluster whose owner died is an
    orphan, reaped by the next bring-up."""
    claimed = os.environ.get(OWNER_ENV, "")
    return int(claimed) if claimed.isdigit() and int(claimed) in _ancestors() else os.getpid()


def orphan_jobs(cwd: Path) -> list[int]:
    """Processes that a workflow which died started in `cwd` (its jobs, still running when
    Snakemake alone was killed -9): their OWNER_ENV names a process that is gone. Never a
    server (a data directory's, reaped by its owner file)."""
    found, mine, claim = [], {os.getpid(), *_ancestors()}, f"{OWNER_ENV}=".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            if (proc / "comm").read_text().strip() == "postgres":
                continue
            if Path(os.readlink(proc / "cwd")) != cwd:
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        owner = next((e[len(claim) :] for e in environ if e.startswith(claim)), b"")
        if owner.isdigit() and not alive(int(owner)):
            found.append(int(proc.name))
    return found


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


def start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot, /proc): with its pid, which process
    it is (a pid is reused); None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None


def released_since(folder: Path, endpoints: Mapping) -> bool:
    """Whether the cluster of `endpoints` was released after they were written (its folder's
    released.json)."""
    try:
        released = json.loads((folder / "released.json").read_text()).get("released", "")
    except (OSError, ValueError, AttributeError):
        return False
    return released >= endpoints.get("created", "")


@dataclass(frozen=True)
class Target:
    """Where a share of the clients goes, and the pgbench -D variables of its key space."""

    endpoint: Endpoint
    variables: Mapping[str, int] = field(default_factory=dict)
    generator: int = 0  # the load generator that drives it (`Cluster.generator_names`)


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

    def load_cores(self, generator: int = 0) -> int:
        """Cores of the machine that runs pgbench (pgbench -j); here: this machine's."""
        return os.cpu_count() or 1

    def generator_names(self) -> list[str]:
        """The load generators' resource names, in the order `Target.generator` counts them:
        `client` for one (this machine, or one load generator), `client0`... for several."""
        return ["client"]

    def clock_offsets(self) -> list[float]:
        """Each load generator's clock minus this machine's, in seconds (pgbench's logs are
        stamped by its clock); 0 for pgbench on this machine."""
        return [0.0] * len(self.generator_names())

    def generator_label(self, generator: int) -> str:
        """A load generator as an error names it (its login where it is remote)."""
        return self.generator_names()[generator]

    def generator_bound(self) -> int | None:
        """With `auto` load generators (`existing.load_generators_auto`): how many can drive
        this cluster at most (`add_generator` up to it); None: the generators are fixed."""
        return None

    def add_generator(self) -> None:
        """One more load generator drives the cluster from the next measurement on (`auto`:
        the generators were the bottleneck); BackendError when there is none to add."""
        raise BackendError("this cluster's load generators are fixed: none to add")

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by each resource measured (nodes by name, `client`: the
        load generator, `host`: the whole machine); {} when the backend cannot tell."""
        return {}

    def cpu_capacity(self) -> dict[str, float]:
        """CPUs each resource of `cpu_seconds` can use (a node's quota, a VM's cores)."""
        return {}

    def block_counters(self) -> dict[str, float]:
        """The database's block counters so far, summed over the nodes: `blks_hit` (found in
        the servers' buffers) and `blks_read` (asked of the operating system), for
        ybscale.measure.buffers; {} when the backend cannot tell."""
        return {}

    @abc.abstractmethod
    def reset(self, workload: str) -> str:
        """Bring the dataset back to its starting state before a repetition; how, in a word
        ('restored': the keys writes added removed; 'reloaded'; '' when nothing changed it)."""

    @abc.abstractmethod
    def check(self) -> None:
        """Raise BackendError unless every node is up (and, with replication, the quorum is met)."""

    def verify_layout(self, when: str) -> None:
        """After a measured repetition: BackendError if the data's layout changed while it ran
        (YugabyteDB: a tablet split), naming `when`; nothing to check by default."""
        return None

    @abc.abstractmethod
    def applied(self) -> dict:
        """What was applied (settings and isolation read back from every node, CPU limits,
        storage), for measurement.json; BackendError when what is in effect differs from the
        row (the one place a row's settings are verified)."""


class Backend(abc.ABC):
    """Turns a resolved design row into a cluster; translates knobs into its own mechanism.

    Every backend has one lifecycle, run by the same rules (rules/cluster.smk): `up` a cluster
    (by its label, from its `definition`) -> `measure` each row on it (the `Cluster` the
    measuring code talks to) -> `down`. The class attributes are what the rest of the pipeline
    knows of a backend (see `ybscale.backends.BACKENDS`)."""

    name: str
    modules: tuple[str, ...] = ()  # its measuring modules (package paths), for the code digest
    rules: str | None = None  # its own rules file (in its package), included when set
    loads_here = True  # pgbench runs on this machine: one benchmark at a time here
    runs_here = False  # its servers run on this machine: up and down take the `bench` slot too

    def __init__(self, config: Mapping, clusters: Path | None = None):
        self.config = config
        self.clusters = clusters  # the folder of every cluster's files, as the rules name it

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

    @classmethod
    def definition(cls, settings: Mapping, rows: Sequence[Row]) -> dict:
        """What defines the cluster `rows` share (the cluster rules' params, what `up` gets):
        by default the combination's shape and server settings."""
        row = rows[0]
        return {
            "combination": row.combination,
            "shape": asdict(row.cluster),
            "server": dict(row.server),
        }

    @classmethod
    def max_clusters(cls, settings: Mapping) -> int | None:
        """How many of its clusters may be up at once (None: no bound)."""
        return None

    @classmethod
    def slots(cls, settings: Mapping, rows: Sequence[Row], order: Sequence[str]) -> dict:
        """Cluster label -> the one its slot releases before bringing it up (None: first in its
        slot), the labels taken in `order` (the measuring order) round the `max_clusters`
        slots."""
        n = cls.max_clusters(settings)
        return {label: order[i - n] if n and i >= n else None for i, label in enumerate(order)}

    @staticmethod
    def report_text(applied: Sequence[Mapping]) -> list[str]:
        """Paragraphs for the findings, from the rows' `applied` records."""
        return []

    @classmethod
    def reap_dead(cls, settings: Mapping, labels: Sequence[str], clusters: Path) -> list[str]:
        """Stop what workflows killed -9 left running and forget the endpoints of `labels`
        that name it (every run calls it at parse time, before Snakemake takes its locks);
        what was stopped or forgotten, one line each."""
        return []

    @classmethod
    def on_error(cls, settings: Mapping, labels, clusters: Path) -> None:
        """Release what a failed or interrupted workflow may have left that its clusters'
        endpoints do not say (the Snakefile's `onerror:`, after `lifecycle.release_left`)."""
        return None

    @classmethod
    def cpu_quota(cls, settings: Mapping, row: Row) -> tuple[float, str] | None:
        """The vCPUs of the quota per node of `row`'s size and the config field that sets
        them, for the price per vCPU (None: no CPU quota known, priced per node)."""
        return None

    @classmethod
    def hourly_price(cls, settings: Mapping, row: Row) -> dict:
        """``{"price_per_hour", "price_basis"}``: what `row`'s cluster costs per hour and how
        that figure was obtained (ceilings.csv, beside throughput_per_dollar). By default the
        user's price table: analysis.prices.node_hour by node size when given, else
        analysis.prices.vcpu_hour per vCPU of the configured quota (`cpu_quota`; none: per
        node; `backends.prices`, outside the measuring code's digest)."""
        from ybscale.backends.prices import user_price

        return user_price(settings, row, cls.cpu_quota(settings, row))

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
    def up(self, label: str, definition: Mapping, folder: Path) -> dict:
        """Bring cluster `label` up as `definition` says; its endpoints (plain JSON: all that
        `measure` and `down` need, in another process). `folder`: the cluster's own files.
        What was started is stopped again when this raises (interrupted too)."""

    @abc.abstractmethod
    def measure(
        self, row: Row, endpoints: Mapping, folder: Path
    ) -> AbstractContextManager[Cluster]:
        """A context manager: the cluster of `endpoints` ready for `row` (its dataset loaded,
        every node checked), left up on exit."""

    @abc.abstractmethod
    def down(self, endpoints: Mapping, folder: Path) -> dict:
        """Release the cluster of `endpoints` (each step even when one before it failed); a
        record of what was done."""

    @contextmanager
    def cluster(self, row: Row, workdir: Path) -> Iterator[Cluster]:
        """`row` on a cluster of its own, up -> measure -> down in one process (tests and
        bench/ scripts; the pipeline runs the three as jobs). Its files go to `workdir`."""
        label = self.cluster_labels(self.config, [row])[row.run]
        endpoints = self.up(label, self.definition(self.config, [row]), workdir)
        try:
            with self.measure(row, endpoints, workdir) as cluster:
                yield cluster
        finally:
            self.down(endpoints, workdir)


def cluster_label(row: Row, per_replicate: bool) -> str:
    """The cluster a combination's rows share: labelled by the combination; with
    `per_replicate` replicate k >= 2 on ``<combination>-r<k>`` of its own (a backend whose
    names are limited cuts it: gcp's `names.cluster_label`)."""
    if per_replicate and row.replicate > 1:
        return f"{row.combination}-r{row.replicate}"
    return row.combination


def settings_by_source(rows: Sequence[Row], kind: str) -> dict[str, dict[str, str]]:
    """`server` or `session` setting name -> {value: where the first row took it from}."""
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        for name, value in getattr(row, kind).items():
            out.setdefault(name, {}).setdefault(value, row.source(f"{kind}.{name}"))
    return out


def same_setting(shown: str, wanted: str) -> bool:
    """Whether SHOW's answer is the value asked for (on/true, 64MB/65536kB etc. agree)."""
    norm = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}
    a, b = shown.strip().lower(), str(wanted).strip().lower()
    return a == b or norm.get(a, a) == norm.get(b, b) or _bytes(a) == _bytes(b) is not None


def _bytes(text: str) -> int | None:
    units = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4}
    number, unit = text.rstrip("abgkmt"), text[len(text.rstrip("abgkmt")) :]
    if not number.isdigit() or unit not in units:
        return None
    return int(number) * units[unit]
