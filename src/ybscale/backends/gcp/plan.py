"""`ybscale plan`: clusters, VMs, VM-hours, estimated cost and wall time before anything runs.

The cost is an ESTIMATE from the editable per-region price table `gcp.prices`: VMs, persistent
disks, Cloud NAT (gateway, data and its external address) and egress; what it leaves out is
printed with it. Quotas are compared with the peak need, per region and project-wide. Each
cluster's dataset is estimated too (`DatasetPlan`): its load time at `gcp.load_rows_per_s` and
the disk it takes per tserver, refused at dry run when more than the tserver's disk.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ybscale.backends.gcp.config import gcp_section, vcpus
from ybscale.backends.gcp.limits import DEFAULT_MAX_CONNECTIONS, tserver_line
from ybscale.backends.gcp.names import cluster_label
from ybscale.backends.gcp.stacks import cluster_machines
from ybscale.backends.prices import money
from ybscale.config_sources import source_of
from ybscale.design.order import cluster_order
from ybscale.design.row import Row
from ybscale.measure.measuring import MeasuringProtocol
from ybscale.settings import thaw

HOURS_PER_MONTH = 730  # how GCP prices a GB-month of disk per hour
NOT_INCLUDED = (
    "sustained/committed-use discounts, taxes, Cloud Logging/Monitoring beyond the free tier, "
    "disk snapshots"
)
TTL_WARN_SHARE = 0.8  # warn when a cluster's planned time passes this share of gcp.ttl_hours
# Cloud NAT with nat_ip_allocate_option AUTO_ONLY (infra/) allocates one external address while
# its VMs need no more ports than one address has (64 per VM by default: 1,008 VMs)
NAT_IPS_PER_CLUSTER = 1
PER_COUNT_OVERHEAD_S = 15  # reset + checks + process start per client count (estimate)
# A restore deletes by key what was written since the one before (ysql.restore_statements): one
# DocDB write per row, as an insert is, so taken at the load's speed; a repetition writes at
# most at it: a restore is planned as long as the writing it undoes (an estimate; the study's
# measured restores are printed beside it)
RESTORE_SHARE = 1.0
KEY_BYTES = 8  # the dataset's key, k bigint (its value: dataset.value_bytes)
GB = 10**9  # the plan's disk figures in decimal GB, gcp.disk_size_gb compared as so many
DATASET_LEFT_OUT = (
    "compression, DocDB/RocksDB per-row overhead (key encoding, hybrid time, SST index and "
    "bloom filters), the WAL, space a compaction needs while it runs, the rows write "
    "repetitions add, and the OS, YugabyteDB and its logs on the same boot disk"
)
DATASET_LEFT_OUT_SHORT = (
    "compression, per-row overhead (DocDB/RocksDB), the WAL, space a compaction needs, rows "
    "write repetitions add, the OS and logs"
)


@dataclass(frozen=True)
class DatasetPlan:
    """One row's dataset on its cluster, estimated: rows x (key + value) bytes, times the
    replication factor, spread evenly over the tservers, against each tserver's disk (its boot
    disk, gcp.disk_size_gb, holds the data: infra/ fs_data_dirs); its load time at
    gcp.load_rows_per_s."""

    run: str
    rows: int
    value_bytes: int
    replication_factor: int
    tservers: int
    disk_gb: int
    load_rows_per_s: float
    loaders: int = 4  # gcp.loaders: sessions loading at once
    chunk_rows: int = 100_000  # gcp.load_chunk_rows

    @property
    def logical_bytes(self) -> int:
        return self.rows * (KEY_BYTES + self.value_bytes)

    @property
    def node_bytes(self) -> float:
        """Bytes per tserver: every row's copies spread evenly over the tservers."""
        return self.logical_bytes * self.replication_factor / self.tservers

    @property
    def load_seconds(self) -> float:
        return self.rows / self.load_rows_per_s

    @property
    def chunk_seconds(self) -> float:
        """One chunk's load time: its rows (`ysql.chunk_rows_for`) at one loader's share of
        gcp.load_rows_per_s."""
        from ybscale.backends.ysql import chunk_rows_for

        rows = chunk_rows_for(self.chunk_rows, self.value_bytes)
        return rows * self.loaders / self.load_rows_per_s

    @property
    def disk_share(self) -> float:
        """The tserver's disk the estimate takes."""
        return self.node_bytes / (self.disk_gb * GB)

    @property
    def fits(self) -> bool:
        return self.disk_share <= 1

    def arithmetic(self) -> str:
        """How the figure per tserver is reached."""
        return (
            f"{self.rows:,} rows x ({KEY_BYTES} + {self.value_bytes}) B = "
            f"{size_text(self.logical_bytes)}, x RF {self.replication_factor} / "
            f"{self.tservers} tservers"
        )


def size_text(nbytes: float) -> str:
    """Bytes in decimal units (kB, MB, GB, TB of 10^3, 10^6, 10^9, 10^12 bytes)."""
    for unit, scale in (("TB", 10**12), ("GB", GB), ("MB", 10**6), ("kB", 10**3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,.0f} B"


def dataset_plan(row: Row, settings: Mapping) -> DatasetPlan:
    """The row's dataset on the cluster gcp gives it (`settings`: the gcp section)."""
    machines = cluster_machines(row.cluster, settings, row.run)
    return DatasetPlan(
        run=row.run,
        rows=row.dataset_rows,
        value_bytes=row.dataset_value_bytes,
        replication_factor=machines.masters,
        tservers=machines.tservers,
        disk_gb=settings["disk_size_gb"],
        load_rows_per_s=settings["load_rows_per_s"],
        loaders=settings["loaders"],
        chunk_rows=settings["load_chunk_rows"],
    )


def dataset_errors(rows: Sequence[Row], settings: Mapping) -> list[str]:
    """One line per dataset level and cluster shape whose estimate per tserver is more than
    its disk (`settings`: the gcp section), naming the levels and gcp.disk_size_gb; rows with
    a size missing from gcp.machine_types are left to that error."""
    lines: list[str] = []
    for row in rows:
        if row.cluster.node_size not in settings["machine_types"]:
            continue
        d = dataset_plan(row, settings)
        if d.fits:
            continue
        line = (
            f"{row.source('dataset.rows')}: dataset.rows {d.rows:,} with "
            f"dataset.value_bytes {d.value_bytes} ({row.source('dataset.value_bytes')}) on "
            f"{row.combination}: an estimated {size_text(d.node_bytes)} per tserver "
            f"({d.arithmetic()}; an ESTIMATE before {DATASET_LEFT_OUT}), more than its "
            f"{d.disk_gb} GB disk ({source_of('gcp.disk_size_gb')}): load fewer rows or smaller "
            "values, or raise gcp.disk_size_gb"
        )
        if line not in lines:
            lines.append(line)
    return lines


@dataclass(frozen=True)
class ClusterPlan:
    cluster: str  # its label and stack (names.cluster_label): combination[-r<replicate>]
    runs: list[str]
    masters: int
    tservers: int
    machine_types: dict[str, int]  # machine type -> VMs
    measure_seconds: float  # its rows, back to back
    hours_min: float  # as scheduled: provisioning + its own rows, back to back
    hours_max: float  # the cloud-side bound: max_run_duration (ttl_hours) deletes every VM
    disk_gb: int = 0  # boot disks of all its VMs
    slot: int = 0  # which of the gcp.max_clusters slots it runs in
    start_seconds: float = 0.0  # scheduled bring-up, from the start of the study
    end_seconds: float = 0.0  # scheduled tear-down
    external_ips: int = NAT_IPS_PER_CLUSTER  # the NAT's, and the load generators' when public
    loadgens: int = 1  # load-generator VMs (gcp.load_generators)
    # with gcp.load_generators: auto, the VMs and addresses if it grew to its bound
    # (gcp.load_generators_max); None: the generators are fixed
    machine_types_max: dict[str, int] | None = None
    loadgens_max: int | None = None
    external_ips_max: int | None = None
    dataset: DatasetPlan | None = None  # the largest dataset of its rows (per tserver)
    # its tservers at the sweep's largest count: clients against YSQL connections, memory
    # limit and block cache (`limits.tserver_line`)
    tserver: str = ""

    @property
    def vms(self) -> int:
        return sum(self.machine_types.values())

    def at_bound(self) -> ClusterPlan:
        """The cluster with as many load generators as `auto` may grow to (its worst case)."""
        if self.loadgens_max is None:
            return self
        types = self.machine_types_max or self.machine_types
        return dataclasses.replace(
            self, machine_types=types, loadgens=self.loadgens_max,
            external_ips=self.external_ips_max or self.external_ips, machine_types_max=None,
            loadgens_max=None, external_ips_max=None,
            disk_gb=sum(types.values()) * (self.disk_gb // max(self.vms, 1)),
        )  # fmt: skip


@dataclass(frozen=True)
class Plan:
    clusters: list[ClusterPlan]
    row_seconds: dict[str, float]
    wall_seconds: float
    prices: dict[str, float]
    provisioning_minutes: float
    missing_prices: list[str] = field(default_factory=list)
    state_url: str = ""
    region: str = ""
    rates: dict = field(default_factory=dict)  # the region's price table (gcp.prices.<region>)
    disk_type: str = "pd-ssd"
    nat_gb_per_vm: float = 0.0
    egress_gb_per_row: float = 0.0
    # run -> GB its logs send back over SSH (`log_egress`: from the study's measured copies,
    # else egress_gb_per_row); how it was reached (`egress_from`)
    egress_gb: dict[str, float] = field(default_factory=dict)
    egress_from: str = ""
    # run -> (restores, their seconds in all) of a write row whose repetitions are restored
    restores: dict[str, tuple[int, float]] = field(default_factory=dict)
    max_clusters: int = 2
    peaks: dict = field(default_factory=dict)  # quota metric -> (what, peak need)
    quotas: dict | None = None  # quota metric -> (limit, usage), None when not read
    quota_note: str = ""
    ttl_hours: float = 0.0
    replicates: int = 1  # the design's replications
    cluster_per_replicate: bool = True  # gcp.cluster_per_replicate
    # with gcp.load_generators: auto, the peak needs if every cluster grew to its bound
    peaks_max: dict = field(default_factory=dict)
    # measurement.sweep -> (VM-hours as scheduled, wall seconds) of the economy and the full
    # protocol on the same settings (`protocols`)
    protocols: dict = field(default_factory=dict)
    largest_clients: int = 0  # the most clients a row's sweep runs at once (its doubling too)

    def worst_clusters(self, worst: bool = True) -> list[ClusterPlan]:
        """The clusters, each at `auto`'s bound when `worst` (`ClusterPlan.at_bound`)."""
        return [c.at_bound() for c in self.clusters] if worst else list(self.clusters)

    def vms(self, worst: bool = False) -> int:
        """VMs in all, as the clusters start or at `auto`'s bound when `worst`."""
        return sum(c.vms for c in self.worst_clusters(worst))

    def grows(self) -> bool:
        """Whether a cluster may grow its load generators (`auto`, a bound above the start)."""
        return any(c.at_bound().vms > c.vms for c in self.clusters)

    def vm_hours(self, worst: bool = True) -> float:
        """VM-hours as scheduled, or at most: until max_run_duration, at `auto`'s bound."""
        return sum(c.vms * (c.hours_max if worst else c.hours_min)
                   for c in self.worst_clusters(worst))  # fmt: skip

    def costs(self, worst: bool = True) -> dict[str, float]:
        """Estimated cost by item (USD): as scheduled with the starting load generators, or at
        most (`worst`: until max_run_duration, at `auto`'s bound)."""

        def hours(c: ClusterPlan) -> float:
            return c.hours_max if worst else c.hours_min

        disk_hour = self.rates.get("disk_gb_month", {}).get(self.disk_type, 0.0) / HOURS_PER_MONTH
        clusters = self.worst_clusters(worst)
        vms = sum(c.vms for c in clusters)
        return {
            "VMs": sum(
                n * self.prices.get(mt, 0.0) * hours(c)
                for c in clusters
                for mt, n in c.machine_types.items()
            ),
            "disks": sum(c.disk_gb * disk_hour * hours(c) for c in clusters),
            "Cloud NAT": sum(
                c.vms * self.rates.get("nat_vm_hour", 0.0) * hours(c) for c in clusters
            ),  # fmt: skip
            "external IPs": sum(
                c.external_ips * self.rates.get("ip_hour", 0.0) * hours(c) for c in clusters
            ),  # fmt: skip
            "NAT data": vms * self.nat_gb_per_vm * self.rates.get("nat_gb", 0.0),
            "egress": self.egress_total() * self.rates.get("egress_gb", 0.0),
        }

    def egress_total(self) -> float:
        """GB the rows' logs send back in all (`egress_gb`, else egress_gb_per_row each)."""
        if self.egress_gb:
            return sum(self.egress_gb.values())
        return len(self.row_seconds) * self.egress_gb_per_row

    def cost(self, worst: bool = True) -> float:
        return sum(self.costs(worst).values())

    def over_quota(self, bound: bool = False) -> list[str]:
        """One line per quota (when read) whose peak need exceeds what is free (limit - usage):
        the quota, the need and what is free. `bound`: the need if `auto` grew every cluster
        to its bound (a growth past the quota fails its row, the cluster is still released)."""
        lines = []
        for metric, (what, peak) in sorted((self.peaks_max if bound else self.peaks).items()):
            limit, usage = (self.quotas or {}).get(metric, (None, 0))
            if limit is not None and peak > limit - usage:
                lines.append(
                    f"{what}: needs {peak:g}, {limit - usage:g} free ({metric}: limit "
                    f"{limit:g}, in use {usage:g})"
                )
        return lines

    def near_ttl(self) -> list[ClusterPlan]:
        """Clusters whose planned time (provisioning + rows) passes TTL_WARN_SHARE of
        ttl_hours: max_run_duration deletes their VMs at ttl_hours, measured or not."""
        return [c for c in self.clusters if c.hours_min > TTL_WARN_SHARE * self.ttl_hours]


def restored(row: Row, sharding: str = "range") -> bool:
    """Whether a row's write repetitions are restored, not reloaded (`ysql.restorable_script`
    with the table's keys ordered on range sharding only: YugabyteDB hashes the others)."""
    from ybscale.backends.ysql import restorable_script

    text = Path(row.script_path).read_text()
    return not row.read_only and restorable_script(text, ordered=sharding == "range")


def row_seconds(
    row: Row, measurement: Mapping, load_rows_per_s: float, sharding: str = "range"
) -> float:
    """Wall time of one row at most (`MeasuringProtocol.row_seconds`), with this plan's
    estimates of the dataset's load speed (gcp.load_rows_per_s), the overhead per client
    count, and a restored write row's restores (RESTORE_SHARE; `sharding`: gcp.table_sharding,
    `restored`)."""
    protocol = MeasuringProtocol.of(measurement)
    load = row.dataset_rows / load_rows_per_s
    restores = restored(row, sharding)
    once = row.read_only or restores
    return protocol.row_seconds(once, load, PER_COUNT_OVERHEAD_S,
                                RESTORE_SHARE if restores else 0.0)  # fmt: skip


def row_restores(row: Row, measurement: Mapping, sharding: str = "range") -> tuple[int, float]:
    """(restores, their seconds in all) of a row, (0, 0.0) when it is not restored."""
    if not restored(row, sharding):
        return 0, 0.0
    protocol = MeasuringProtocol.of(measurement)
    return protocol.restores(), protocol.restore_seconds(RESTORE_SHARE)


def _measurements(results: str | Path):
    """(path, record) of every readable `runs/*/measurement.json` under `results`, in order;
    an unreadable one is left out (the plan reads what the study measured, as an aside)."""
    for path in sorted(Path(results).glob("runs/*/measurement.json")):
        try:
            yield path, json.loads(path.read_text())
        except (OSError, ValueError):
            continue


def measured_log_copies(results: str | Path) -> list[dict]:
    """The log copies this study's results recorded: per `runs/*/measurement.json` whose
    `applied.logs_copied` sent anything, its backend, tservers, bytes before and after
    compression, and seconds of pgbench (one per node and run) those logs cover."""
    found = []
    for path, meta in _measurements(results):
        applied = meta.get("applied") or {}
        copied = applied.get("logs_copied") or {}
        if not copied.get("bytes_sent") or not copied.get("pgbench_seconds"):
            continue
        found.append({"run": meta.get("run", path.parent.name),
                      "backend": applied.get("backend", "?"),
                      "bytes_raw": copied.get("bytes_raw", 0),
                      "bytes_sent": copied["bytes_sent"],
                      "pgbench_seconds": copied["pgbench_seconds"]})  # fmt: skip
    return found


def log_egress(
    rows: Sequence[Row],
    measurement: Mapping,
    tservers: Mapping[str, int],
    copies: Sequence[Mapping],
    per_row: float,
) -> tuple[dict[str, float], str]:
    """Run -> GB its pgbench logs send back over SSH (compressed on the load generator:
    `loadgen.PACK_SCRIPT`), and how that was reached: with measured copies (`copies`,
    `measured_log_copies`: gcp's), the largest bytes sent per second of one node's pgbench
    among them, times the row's tservers and the seconds it logs at most
    (`MeasuringProtocol.logged_seconds`); without, `per_row` (gcp.egress_gb_per_row) each."""
    gcp = [c for c in copies if c["backend"] == "gcp"]
    if not gcp:
        return ({row.run: per_row for row in rows},
                f"{per_row:g} GB per row ({source_of('gcp.egress_gb_per_row')}: an assumption, "
                "no gcp log copy measured yet)")  # fmt: skip
    rate = max(c["bytes_sent"] / c["pgbench_seconds"] for c in gcp)
    ratio = statistics.median(c["bytes_raw"] / c["bytes_sent"] for c in gcp)
    logged = MeasuringProtocol.of(measurement).logged_seconds()
    out = {row.run: rate * tservers[row.run] * logged / GB for row in rows}
    return out, (
        f"{rate / 1e3:,.1f} kB per second of one node's pgbench, the largest of {len(gcp)} "
        f"measured log copies ({ratio:.1f}x compressed by gzip on the load generator), x its "
        f"tservers x {logged:,} s of logged runs at most"
    )


def cpu_quota(machine_type: str) -> str:
    """The regional quota a machine type's vCPUs count against (N1: CPUS, else <FAMILY>_CPUS)."""
    family = machine_type.split("-", 1)[0].upper()
    return "CPUS" if family == "N1" else f"{family}_CPUS"


DISK_QUOTA = {
    "pd-standard": "DISKS_TOTAL_GB",
    "pd-balanced": "SSD_TOTAL_GB",
    "pd-ssd": "SSD_TOTAL_GB",
}


def schedule(order: Sequence[str], seconds: Mapping[str, float], slots: int) -> dict:
    """combo -> (slot, start, end): each combination to the slot that frees first, in `order`;
    a slot brings its next cluster up only after its previous one was destroyed."""
    free = [0.0] * slots
    placed = {}
    for combo in order:
        slot = min(range(slots), key=lambda i: (free[i], i))
        placed[combo] = (slot, free[slot], free[slot] + seconds[combo])
        free[slot] += seconds[combo]
    return placed


def previous_in_slot(rows: Sequence[Row], config: Mapping) -> dict[str, str | None]:
    """cluster -> the cluster its slot destroys before bringing it up (None: first in its slot).
    rules/cluster.smk makes cluster_up depend on that one's released.json, which bounds the live
    clusters to gcp.max_clusters."""
    p = plan(rows, config)
    by_slot: dict[int, list] = {}
    for c in sorted(p.clusters, key=lambda c: c.start_seconds):
        by_slot.setdefault(c.slot, []).append(c.cluster)
    prev: dict[str, str | None] = {}
    for combos in by_slot.values():
        for i, combo in enumerate(combos):
            prev[combo] = combos[i - 1] if i else None
    return prev


# Project-wide quotas (compute.projects.get, `gcloud compute project-info describe`); the
# others are the region's (compute.regions.get, `gcloud compute regions describe`). Both answer
# a resource whose `quotas` is a list of {metric, limit, usage, owner}.
PROJECT_METRICS = {
    "CPUS_ALL_REGIONS": "vCPUs of every family",
    "NETWORKS": "VPC networks",
}


def live_needs(live: Sequence[ClusterPlan], disk_type: str) -> dict[str, tuple[str, float]]:
    """Quota metric -> (what, need) of clusters alive together: vCPUs per family (regional)
    and of every family (CPUS_ALL_REGIONS), disk by type, one VPC network per cluster, and the
    region's external addresses: the NAT's (Cloud NAT's automatic allocation reserves a static
    regional external address and uses it: IN_USE_ADDRESSES and STATIC_ADDRESSES) and, with
    ssh_access public, the load generator's ephemeral one (IN_USE_ADDRESSES)."""
    need: dict[str, tuple[str, float]] = {}

    def add(metric: str, what: str, amount: float) -> None:
        need[metric] = (what, need.get(metric, (what, 0))[1] + amount)

    for c in live:
        for mt, n in c.machine_types.items():
            metric = cpu_quota(mt)
            family = "N1" if metric == "CPUS" else metric.removesuffix("_CPUS")
            add(metric, f"{family} vCPUs", n * vcpus(mt))
            add("CPUS_ALL_REGIONS", PROJECT_METRICS["CPUS_ALL_REGIONS"], n * vcpus(mt))
        add(DISK_QUOTA.get(disk_type, "DISKS_TOTAL_GB"), f"{disk_type} GB", c.disk_gb)
        add("NETWORKS", PROJECT_METRICS["NETWORKS"], 1)
        if c.external_ips:
            add("IN_USE_ADDRESSES", "external IPv4 addresses in use", c.external_ips)
        if NAT_IPS_PER_CLUSTER:
            add("STATIC_ADDRESSES", "static external IPv4 addresses", NAT_IPS_PER_CLUSTER)
    return need


def peak_needs(clusters: Sequence[ClusterPlan], disk_type: str) -> dict[str, tuple[str, float]]:
    """Quota metric -> (what, the most it needs at once) over the schedule."""
    peaks: dict[str, tuple[str, float]] = {}
    for t in sorted({c.start_seconds for c in clusters}):
        live = [c for c in clusters if c.start_seconds <= t < c.end_seconds]
        for metric, (what, total) in live_needs(live, disk_type).items():
            if total > peaks.get(metric, ("", -1))[1]:
                peaks[metric] = (what, total)
    return peaks


def together_over_quota(whole: Plan, live: Collection[str], done: Collection[str]) -> list[str]:
    """One line per quota (when read) that the clusters alive together overrun: the peak need
    of the study's clusters not yet released (`done`: labels with a released record) over the
    plan's schedule, against what is free (limit - usage) plus what its live clusters
    (`live`: up now, so in usage) already hold. A cluster_up comparing only its own need with
    the free quota passes alongside another that starts at the same time (the first cluster
    of every slot), and the second fails mid-creation (issue 46)."""
    remaining = [c for c in whole.clusters if c.cluster not in done]
    held = live_needs([c for c in whole.clusters if c.cluster in live], whole.disk_type)
    lines = []
    for metric, (what, peak) in sorted(peak_needs(remaining, whole.disk_type).items()):
        limit, usage = (whole.quotas or {}).get(metric, (None, 0))
        if limit is None:
            continue
        ours = held.get(metric, (what, 0))[1]
        free = limit - usage + ours
        if peak > free:
            by_us = f", {ours:g} of it this study's live clusters" if ours else ""
            lines.append(
                f"{what}: the clusters alive together need {peak:g} at once, {free:g} free "
                f"({metric}: limit {limit:g}, in use {usage:g}{by_us})"
            )
    return lines


def quota_table(resource: Mapping) -> dict[str, tuple[float, float]]:
    """{metric: (limit, usage)} of a Compute Engine Region or Project resource."""
    return {q["metric"]: (q["limit"], q.get("usage", 0)) for q in resource.get("quotas", [])}


def read_quotas(project: str | None, region: str) -> tuple[dict | None, str]:
    """({metric: (limit, usage)}, note): the region's quotas (`gcloud compute regions
    describe`) and the project-wide ones (`gcloud compute project-info describe`); (None, why)
    when gcloud cannot read them (no gcloud, no project, not logged in)."""
    import shutil
    import subprocess

    gcloud = shutil.which("gcloud")
    if not project or gcloud is None:
        return None, "quotas not read (" + ("no gcp.project" if not project else "no gcloud") + ")"
    quotas: dict[str, tuple[float, float]] = {}
    for what in (["regions", "describe", region], ["project-info", "describe"]):
        argv = [gcloud, "compute", *what, f"--project={project}", "--format=json"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            data = json.loads(done.stdout) if done.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
            return None, f"quotas not read ({exc})"
        if data is None:
            return None, f"quotas not read (gcloud: {done.stderr.strip()[-200:]})"
        table = quota_table(data)
        if what[0] == "project-info":  # a project-wide metric only from the project's list
            table = {m: v for m, v in table.items() if m in PROJECT_METRICS}
        else:
            table = {m: v for m, v in table.items() if m not in PROJECT_METRICS}
        quotas.update(table)
    return quotas, f"quotas of {project} in {region} and project-wide (gcloud)"


PROTOCOLS = {"economy": "economy", "adaptive": "full"}  # measurement.sweep -> its name here


def protocols(rows: Sequence[Row], config: Mapping, combos, chosen: Plan) -> dict:
    """VM-hours as scheduled and wall seconds of the economy and the full protocol for these
    rows (`chosen`: the plan of the configured one)."""
    current = config["measurement"]["sweep"]
    out = {}
    for sweep in PROTOCOLS:
        if sweep == current:
            p = chosen
        else:
            other = thaw(config)
            other["measurement"]["sweep"] = sweep
            p = plan(rows, other, combos)
        out[sweep] = (p.vm_hours(False), p.wall_seconds)
    return out


def plan(
    rows: Sequence[Row],
    config: Mapping,
    combos: Sequence[str] | None = None,
    *,
    quotas=False,
    compare=False,
    copies: Sequence[Mapping] = (),
) -> Plan:
    """The plan for the rows (only those of the clusters `combos` when given); `config` as
    settings.load. A cluster per label of `GcpBackend.cluster_labels` (per combination, and per
    replicate unless gcp.cluster_per_replicate is false). `compare`: also plan the other
    protocol (`protocols`), for the printed plan only: the rules read plans at parse time.
    `copies`: the study's measured log copies (`measured_log_copies`), for the logs' egress
    (`log_egress`)."""
    settings = gcp_section(config)
    measurement = config["measurement"]
    by_run = {row.run: row for row in rows}
    runs = list(by_run)
    key = {row.run: cluster_label(row, settings["cluster_per_replicate"]) for row in rows}
    if combos is not None:
        runs = [r for r in runs if key[r] in combos]
    speed = settings["load_rows_per_s"]
    sharding = settings["table_sharding"]
    seconds = {r: row_seconds(by_run[r], measurement, speed, sharding) for r in runs}
    restores = {r: row_restores(by_run[r], measurement, sharding) for r in runs}
    tservers = {r: by_run[r].cluster.nodes for r in runs}
    egress, egress_from = log_egress([by_run[r] for r in runs], measurement, tservers, copies,
                                     settings["egress_gb_per_row"])  # fmt: skip
    region = settings["region"]
    rates = settings["prices"].get(region)
    if rates is None:
        raise ValueError(
            f"{source_of('gcp.prices')}.{region}: no prices for region {region} "
            f"(gcp.zone {settings['zone']}); add them: the plan never borrows another region's"
        )
    prov_s = settings["provisioning_minutes"] * 60
    largest = MeasuringProtocol.of(measurement).largest_count()
    # clusters in the measuring order (ybscale.design.order: random from measurement.seed)
    order = cluster_order(runs, key, measurement["order"], measurement["seed"])
    busy = {combo: prov_s + sum(seconds[r] for r in runs if key[r] == combo) for combo in order}
    slots = schedule(order, busy, settings["max_clusters"])
    clusters = []
    for combo in order:
        shape = by_run[next(r for r in runs if key[r] == combo)].cluster
        machines = cluster_machines(shape, settings, combo)
        machine_types = machines.counts()
        own = [r for r in runs if key[r] == combo]
        datasets = [dataset_plan(by_run[r], settings) for r in own]
        slot, start, end = slots[combo]
        grows = machines.loadgens_max > machines.loadgens  # gcp.load_generators: auto
        clusters.append(
            ClusterPlan(
                cluster=combo,
                runs=own,
                masters=machines.masters,
                tservers=machines.tservers,
                loadgens=machines.loadgens,
                loadgens_max=machines.loadgens_max if grows else None,
                machine_types_max=machines.counts(bound=True) if grows else None,
                external_ips_max=NAT_IPS_PER_CLUSTER
                + machines.loadgens_max * (settings["ssh_access"] == "public"),
                machine_types=machine_types,
                measure_seconds=sum(seconds[r] for r in own),
                hours_min=busy[combo] / 3600,
                hours_max=max(busy[combo] / 3600, settings["ttl_hours"]),
                disk_gb=sum(machine_types.values()) * settings["disk_size_gb"],
                slot=slot,
                start_seconds=start,
                end_seconds=end,
                # the NAT's, and each load generator's with ssh_access: public
                external_ips=NAT_IPS_PER_CLUSTER
                + machines.loadgens * (settings["ssh_access"] == "public"),
                dataset=max(datasets, key=lambda d: (d.node_bytes, d.rows)),
                tserver=tserver_line(
                    machines.tserver_type, by_run[own[0]].server, largest, machines.tservers
                ),
            )
        )
    quota_table, quota_note = (
        read_quotas(settings["project"], region) if quotas else (None, "quotas not read")
    )
    used = {mt for c in clusters for mt in c.machine_types}
    prices = {k: float(v) for k, v in rates["vm_hour"].items()}
    if settings["disk_type"] not in rates["disk_gb_month"]:
        used.add(settings["disk_type"])
    if "ip_hour" not in rates:
        used.add("external IP (ip_hour)")
    out = Plan(
        clusters=clusters,
        row_seconds=seconds,
        wall_seconds=max((c.end_seconds for c in clusters), default=0.0),
        prices=prices,
        provisioning_minutes=settings["provisioning_minutes"],
        missing_prices=sorted(used - set(prices)),
        state_url=settings["state_url"],
        region=region,
        rates=rates,
        disk_type=settings["disk_type"],
        nat_gb_per_vm=settings["nat_gb_per_vm"],
        egress_gb_per_row=settings["egress_gb_per_row"],
        egress_gb=egress,
        egress_from=egress_from,
        restores={r: v for r, v in restores.items() if v[0]},
        max_clusters=settings["max_clusters"],
        peaks=peak_needs(clusters, settings["disk_type"]),
        peaks_max=peak_needs([c.at_bound() for c in clusters], settings["disk_type"]),
        quotas=quota_table,
        quota_note=quota_note,
        ttl_hours=settings["ttl_hours"],
        replicates=max((by_run[r].replicate for r in runs), default=1),
        cluster_per_replicate=settings["cluster_per_replicate"],
        largest_clients=largest,
    )
    if compare:
        out = dataclasses.replace(out, protocols=protocols(rows, config, combos, out))
    return out


def hourly_price(settings: Mapping, row: Row) -> dict:
    """The cluster's VMs at gcp.prices.<region>.vm_hour (as `ybscale plan` prices them):
    tservers and masters counted, the load generator excluded and said so."""
    gcp = gcp_section(settings)
    region = gcp["region"]
    rates = gcp["prices"].get(region)
    if rates is None:
        raise ValueError(
            f"{source_of('gcp.prices')}.{region}: no prices for region {region}: "
            "throughput_per_dollar needs the cluster's price per hour"
        )
    machines = cluster_machines(row.cluster, gcp, row.run)
    vm_hour = rates.get("vm_hour", {})
    parts, price = [], 0.0
    for what, machine, n in (
        ("tservers", machines.tserver_type, machines.tservers),
        ("masters", machines.master_type, machines.masters),
    ):
        if machine not in vm_hour:
            raise ValueError(
                f"{source_of('gcp.prices')}.{region}.vm_hour.{machine}: missing (the "
                f"{what} of {row.run})"
            )
        price += n * float(vm_hour[machine])
        parts.append(f"{n} x {machine} ({what}) at {money(float(vm_hour[machine]))}")
    loadgen = vm_hour.get(machines.loadgen_type)
    excluded = f"load generator {machines.loadgen_type}" + (
        f" ({money(float(loadgen))} per hour)" if loadgen is not None else ""
    )
    basis = (
        f"gcp.prices.{region}.vm_hour, USD: {' + '.join(parts)} = {money(price)} per hour; "
        f"{excluded} excluded, as are disks, NAT and egress"
    )
    return {"price_per_hour": price, "price_basis": basis}


def _hm(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _duration(seconds: float) -> str:
    """Seconds below a minute, else hours and minutes (`_hm`)."""
    return f"{seconds:.0f} s" if seconds < 59.5 else _hm(seconds)


def _replicate_clusters(p: Plan) -> str:
    """How a replicated design's replicates get clusters (gcp.cluster_per_replicate)."""
    if p.replicates < 2:
        return ""
    if p.cluster_per_replicate:
        return (
            f"; each of the {p.replicates} replicates on clusters of its own "
            "(gcp.cluster_per_replicate: true), so the replicate error holds cluster-to-cluster "
            "variance"
        )
    return (
        f"; the {p.replicates} replicates of a combination share its cluster "
        "(gcp.cluster_per_replicate: false): no error term holds cluster-to-cluster variance"
    )


def replication_line(p: Plan) -> str:
    """Each cluster's replication factor (its masters: 1 with cluster.replication off, its node
    count with it on), said so when it moves with the node count."""
    by_rf: dict[int, int] = {}
    for c in p.clusters:
        by_rf[c.masters] = by_rf.get(c.masters, 0) + 1
    counts = ", ".join(
        f"RF {rf} in {n} cluster{'s' if n > 1 else ''}" for rf, n in sorted(by_rf.items())
    )
    moves = sorted(rf for rf in by_rf if rf > 1)
    return (
        f"Replication factor (= masters): {counts}; RF 1 with cluster.replication off, RF = "
        "the node count with it on"
        + (
            f" ({', '.join(map(str, moves))}): the node count's effect there includes the RF's"
            if len(moves) > 1
            else ""
        )
    )


def measured_loads(results: str | Path) -> list[dict]:
    """The loads this study's results timed: one per `runs/*/measurement.json` whose `dataset`
    record (under `applied`, or at the top) says it was loaded, with its backend, rows, value
    size, seconds and rows per second; [] when none did (a dataset kept is no load)."""
    found = []
    for path, meta in _measurements(results):
        applied = meta.get("applied") or {}
        record = meta.get("dataset") or applied.get("dataset") or {}
        speed = record.get("rows_per_second")
        if record.get("how") != "loaded" or not speed:
            continue
        row = meta.get("row") or {}
        found.append({
            "run": meta.get("run", path.parent.name),
            "backend": applied.get("backend", "?"),
            "rows": record.get("rows"),
            "value_bytes": row.get("dataset_value_bytes", 32),
            "seconds": record.get("seconds"),
            "rows_per_second": speed,
            # YugabyteDB, after a flush: the SST bytes of every tserver per row and replica
            "sst_per_row": record.get("sst_bytes_per_row_per_replica"),
        })  # fmt: skip
    return found


def measured_restores(results: str | Path) -> list[dict]:
    """Every restore this study's results timed (`applied.restores` of each
    runs/*/measurement.json): its backend, seconds, DELETEs and new keys (hashed keys), and
    the seconds of the row's repetitions (`measurement.seconds`)."""
    found = []
    for _path, meta in _measurements(results):
        applied = meta.get("applied") or {}
        seconds = (meta.get("measurement") or {}).get("seconds")
        for r in applied.get("restores") or ():
            found.append({"backend": applied.get("backend", "?"), "seconds": r.get("seconds"),
                          "deletes": r.get("deletes"), "new_keys": r.get("new_keys"),
                          "repetition_seconds": seconds})  # fmt: skip
    return found


def restore_text(p: Plan, runs: Sequence[str]) -> str:
    """', N restores of S each' for the restored rows among `runs` (the first's: one protocol),
    '' when none is restored."""
    planned = [p.restores[r] for r in runs if r in p.restores]
    if not planned:
        return ""
    n, total = planned[0]
    return f", {n} restores of {_duration(total / n)} each (estimate)"


def restore_lines(p: Plan, measured: Sequence[Mapping] = (), results: str = "results") -> list[str]:
    """How restores are planned, and the restores `results` measured beside the estimate."""
    if not p.restores:
        return []
    lines = [
        "Restores: before each run of a write row after its first (its script only inserts new "
        "keys: ysql.restorable_script), the keys written since the one before deleted by key, "
        f"each planned as long as that writing took (RESTORE_SHARE {RESTORE_SHARE:g}: deleted "
        "at the load's speed, written at most at it), counted in the row's time; each DELETE "
        "at most ysql.LOAD_TIMEOUT"
    ]
    gcp = [m for m in measured if m["backend"] == "gcp" and m.get("seconds") is not None]
    if not gcp:
        lines.append(f"Measured restores: none on gcp in {results}/runs (measurement.json "
                     "`applied.restores`)")  # fmt: skip
        return lines
    secs = sorted(float(m["seconds"]) for m in gcp)
    shares = [float(m["seconds"]) / m["repetition_seconds"] for m in gcp
              if m.get("repetition_seconds")]  # fmt: skip
    share = f"; at most {max(shares):.2f} of a repetition's seconds" if shares else ""
    lines.append(
        f"Measured restores ({results}/runs, measurement.json `applied.restores`): {len(gcp)} on "
        f"gcp, {secs[0]:,.1f} to {secs[-1]:,.1f} s (median {statistics.median(secs):,.1f} s)"
        f"{share} -- a basis for the estimate"
    )
    return lines


def dataset_lines(p: Plan, loads: Sequence[Mapping] = (), results: str = "results") -> list[str]:
    """Each cluster's largest dataset, estimated (`DatasetPlan`), with what the estimates leave
    out; where the load speed came from, and the loads `results` measured beside it (`loads`,
    `measured_loads`), never in its place; a restored write row's restores (`restore_text`)."""
    from ybscale.backends.ysql import CHUNK_TIMEOUT
    from ybscale.settings import schema

    datasets = [(c.cluster, c.dataset) for c in p.clusters if c.dataset is not None]
    restores = {c.cluster: restore_text(p, c.runs) for c in p.clusters}
    if not datasets:
        return []
    width = max(len(name) for name, _ in datasets)
    disk = datasets[0][1].disk_gb
    lines = ["Dataset per cluster (its largest row; ESTIMATES, see the notes):"]
    for name, d in datasets:
        lines.append(
            f"  {name:<{width}} {d.rows:>13,} rows x {d.value_bytes} B: "
            f"{size_text(d.logical_bytes)} logical, {size_text(d.node_bytes)} per tserver "
            f"(RF {d.replication_factor}, {d.tservers} tservers; {d.disk_share:.1%} of its disk), "
            f"load {_duration(d.load_seconds)} (estimate){restores[name]}"
        )
    speed = datasets[0][1].load_rows_per_s
    default = schema("gcp")["properties"]["load_rows_per_s"]["default"]
    origin = (
        "the default: an assumption no gcp load has measured; YugabyteDB reports 39,000 rows/s "
        "on four 16-vCPU nodes"
        if speed == default
        else "as set there"
    )
    lines += [
        "Dataset: ESTIMATES: rows x (8-byte key + dataset.value_bytes) x RF / tservers, spread "
        f"evenly, GB = 10^9 bytes, against each tserver's {disk} GB disk, "
        f"{source_of('gcp.disk_size_gb')}; left out: {DATASET_LEFT_OUT_SHORT}",
        f"Load time: at {speed:,.0f} rows/s ({source_of('gcp.load_rows_per_s')}, {origin}); "
        "one load per row, one per repetition of a row whose script changes loaded rows",
    ]
    by_backend: dict[str, list[Mapping]] = {}
    for load in loads:
        by_backend.setdefault(str(load["backend"]), []).append(load)
    if not by_backend:
        lines.append(f"Measured loads: none in {results}/runs (measurement.json `dataset`)")
    for backend, got in sorted(by_backend.items()):
        speeds = sorted(float(g["rows_per_second"]) for g in got)
        rows = sorted(int(g["rows"]) for g in got if g.get("rows"))
        what = (
            "measured on this study's gcp clusters: a basis for gcp.load_rows_per_s"
            if backend == "gcp"
            else f"measured on {backend}, not YugabyteDB on gcp: not a gcp load speed"
        )
        ssts = sorted(float(g["sst_per_row"]) for g in got if g.get("sst_per_row"))
        on_disk = (
            f"; after a flush {ssts[0]:,.1f} to {ssts[-1]:,.1f} bytes of SST files per row "
            "and replica (every tserver's, compressed; the estimate above is uncompressed)"
            if ssts
            else ""
        )
        lines.append(
            f"Measured loads ({results}/runs, measurement.json `dataset`): {len(got)} on "
            f"{backend}, {speeds[0]:,.0f} to {speeds[-1]:,.0f} rows/s (median "
            f"{statistics.median(speeds):,.0f}) loading {rows[0]:,} to {rows[-1]:,} rows"
            f"{on_disk} -- {what}"
        )
    first = datasets[0][1]
    lines.append(
        f"Each load: {first.loaders} sessions at once ({source_of('gcp.loaders')}), each its "
        f"own range of the keys in chunks of at most {first.chunk_rows:,} rows "
        f"({source_of('gcp.load_chunk_rows')}), each chunk one INSERT of at most {CHUNK_TIMEOUT} s"
    )
    slow = sorted({name for name, d in datasets if d.chunk_seconds > CHUNK_TIMEOUT})
    if slow:
        lines.append(
            f"WARNING: a chunk of the load of {', '.join(slow)} is estimated above "
            f"{CHUNK_TIMEOUT} s, the most one may take (ysql.CHUNK_TIMEOUT): it would fail "
            "there; lower gcp.load_chunk_rows"
        )
    return lines


def format_plan(p: Plan, loads: Sequence[Mapping] = (), results: str = "results",
                restores: Sequence[Mapping] = ()) -> str:  # fmt: skip
    """The plan as a person reads it: a table of what the study takes (clusters, rows, VMs,
    wall time, VM-hours, cost), each cluster's VMs and dataset, any warning, then the
    assumptions as short notes (`loads`: the loads the study's `results` measured,
    `measured_loads`; `restores`: its restores, `measured_restores`)."""
    lines = [
        f"Plan: {len(p.clusters)} clusters for {len(p.row_seconds)} rows "
        f"({sum(c.vms for c in p.clusters)} VMs in all)" + _replicate_clusters(p),
        *summary_table(p),
        "",
        *cluster_table(p),
    ]
    datasets = dataset_lines(p, loads, results)
    table = [line for line in datasets if line.startswith(("Dataset per cluster", "  "))]
    if table:
        lines += ["", *table]
    lines += ["", *tserver_lines(p)]
    warnings = [line for line in datasets if line.startswith("WARNING")]
    if p.over_quota():
        warnings.append(
            "STOP: a cluster is not brought up while a quota it needs has less free than it "
            f"needs (set {source_of('gcp.allow_over_quota')} to true to try anyway)"
        )
    elif p.over_quota(bound=True):
        warnings.append(
            "WARNING: grown to auto's bound the clusters would need more than the quota leaves "
            "free: " + "; ".join(p.over_quota(bound=True)) + "; a growth refused by the quota "
            "fails its row (the cluster is still released): lower "
            f"{source_of('gcp.load_generators_max')} or raise the quota"
        )
    for c in p.near_ttl():
        share = c.hours_min / p.ttl_hours
        warnings.append(
            f"WARNING: {c.cluster} is planned for {c.hours_min:.1f} h, {share:.0%} of "
            f"gcp.ttl_hours {p.ttl_hours:g}: max_run_duration deletes its VMs at "
            f"{p.ttl_hours:g} h, measured or not; raise gcp.ttl_hours or split its rows"
        )
    if p.missing_prices:
        warnings.append(
            f"WARNING: no price for {', '.join(p.missing_prices)} in gcp.prices.{p.region}: "
            "counted as 0"
        )
    if warnings:
        lines += ["", *warnings]
    notes = [line for line in datasets if line not in table and line not in warnings]
    notes += [*restore_lines(p, restores, results), egress_line(p)]
    lines += ["", "Notes:", *(f"- {note}" for note in plan_notes(p, notes))]
    return "\n".join(lines)


def egress_line(p: Plan) -> str:
    """What the rows' logs send back over SSH, and how it was reached (`log_egress`)."""
    most = max(p.egress_gb.values(), default=p.egress_gb_per_row)
    return (
        f"Logs' egress: pgbench's per-transaction logs, gzip'd on the load generator, copied "
        f"back over SSH (the IAP tunnel): {p.egress_total():,.3f} GB in all, at most "
        f"{most:,.3f} GB per row; {p.egress_from or 'gcp.egress_gb_per_row'}"
    )


def tserver_lines(p: Plan) -> list[str]:
    """Each cluster's tservers at the sweep's largest count: its clients per tserver against
    the YSQL connections a tserver takes, its memory limit and block cache, as YugabyteDB sizes
    them on its machine type (`limits`; the dry run refuses a cluster over either)."""
    width = max([0, *(len(c.cluster) for c in p.clusters)])
    return [
        f"Per tserver at the sweep's largest count, {p.largest_clients:,} clients (the grid and "
        "its doubling up to measurement.max_clients), split over the tservers:",
        *(f"  {c.cluster:<{width}} {c.tserver}" for c in p.clusters if c.tserver),
        f"  (YSQL connections: ysql_max_connections, else {DEFAULT_MAX_CONNECTIONS}, what the "
        "tserver's initdb picks on a Linux VM; memory: YugabyteDB 2024.2's split of the machine "
        "type's RAM with use_memory_defaults_optimized_for_ysql: ybscale.backends.gcp.limits)",
    ]


def summary_table(p: Plan) -> list[str]:
    """What the study takes: as scheduled, each protocol as scheduled, and at most."""
    rows = [("as scheduled", p.vms(), _hm(p.wall_seconds), p.vm_hours(False), p.cost(False))]
    for sweep, (hours, wall) in p.protocols.items():
        name = f"{sweep} sweep" if PROTOCOLS[sweep] == sweep else f"{PROTOCOLS[sweep]} ({sweep})"
        rows.append((name, p.vms(), _hm(wall), hours, None))
    rows.append(("at most (see notes)", p.vms(worst=True), "-", p.vm_hours(), p.cost()))
    width = max(len(row[0]) for row in rows)
    out = [
        f"{'':<{width}}  {'clusters':>8} {'rows':>5} {'VMs':>7} {'wall time':>11} "
        f"{'VM-hours':>9} {'cost USD':>9}"
    ]
    for name, vms, wall, hours, cost in rows:
        money = "-" if cost is None else f"{cost:.2f}"
        out.append(
            f"{name:<{width}}  {len(p.clusters):>8} {len(p.row_seconds):>5} {vms:>7} "
            f"{wall:>11} {hours:>9.1f} {money:>9}"
        )
    return out


def cluster_table(p: Plan) -> list[str]:
    """One line per cluster: its rows and VMs (with `auto`: its start, then its bound)."""
    width = max([24, *(len(c.cluster) for c in p.clusters)])
    lines = [
        f"{'cluster':<{width}} {'rows':>4} {'masters':>7} {'tservers':>8} {'loadgens':>8} "
        f"{'VMs':>4}  machine types"
    ]
    for c in p.clusters:
        top = c.at_bound()  # with `auto`: its starting count, then its bound
        types = ", ".join(
            f"{n}x {mt}" + (f" (up to {most})" if (most := top.machine_types[mt]) > n else "")
            for mt, n in c.machine_types.items()
        )
        loadgens = f"{c.loadgens}-{top.loadgens}" if top.loadgens > c.loadgens else c.loadgens
        vms = f"{c.vms}-{top.vms}" if top.vms > c.vms else c.vms
        counts = f"{len(c.runs):>4} {c.masters:>7} {c.tservers:>8} {loadgens:>8} {vms:>4}"
        lines.append(f"{c.cluster:<{width}} {counts}  {types}")
    return lines


def plan_notes(p: Plan, dataset_notes: Sequence[str]) -> list[str]:
    """The plan's assumptions, one short line each."""
    notes = [replication_line(p), *dataset_notes]
    if p.grows():
        notes.append(
            "Load generators: gcp.load_generators auto starts each cluster at the first count, "
            f"may grow to the second ({source_of('gcp.load_generators_max')}, default the "
            "tservers); 'at most' counts every cluster at that bound"
        )
    notes += [
        f"Wall time: at most {p.max_clusters} clusters at a time (gcp.max_clusters), "
        f"{p.provisioning_minutes:g} min provisioning each, its rows one at a time, destroyed "
        "after its last",
        f"At most: every VM running until max_run_duration (gcp.ttl_hours {p.ttl_hours:g} h) "
        "deletes it" + (", every cluster grown to auto's bound" if p.grows() else ""),
    ]
    if p.protocols:
        notes.append(
            "Protocols (measurement.sweep): each planned with its own bound on a row's measuring "
            "time (docs/GUIDE.md)"
        )
    notes += [
        f"Cost: an ESTIMATE from the editable price table {source_of('gcp.prices')}.{p.region}"
        " (as scheduled: "
        + ", ".join(f"{item} {value:.2f}" for item, value in p.costs(False).items())
        + f"); not included: {NOT_INCLUDED}",
        quota_line(p),
    ]
    if p.state_url:
        notes.append(
            f"Pulumi state: {p.state_url} (outside results/: keep it until `ybscale reap` "
            "reports nothing left)"
        )
    return notes


def quota_line(p: Plan) -> str:
    """The peak need against each quota (its limit and use, when read)."""
    needs: dict[bool, list[str]] = {False: [], True: []}  # project-wide or not
    for metric, (what, peak) in sorted(p.peaks.items()):
        quota = (p.quotas or {}).get(metric)
        if quota is None:
            text = f"{what} {peak:g} ({metric})"
        else:
            limit, usage = quota
            flag = " EXCEEDS the free quota" if peak > limit - usage else ""
            text = f"{what} {peak:g} ({metric}: limit {limit:g}, in use {usage:g}){flag}"
        at_bound = p.peaks_max.get(metric, (what, peak))[1]
        if at_bound > peak:
            limit = (p.quotas or {}).get(metric)
            over = limit is not None and at_bound > limit[0] - limit[1]
            text += f" [{at_bound:g} at auto's bound" + (", EXCEEDS it" if over else "") + "]"
        needs[metric in PROJECT_METRICS].append(text)
    return (
        f"Peak need in {p.region}: " + "; ".join(needs[False])
        + "; project-wide: " + "; ".join(needs[True]) + f" -- {p.quota_note}"
    )  # fmt: skip


def replicated_cost(design, config: Mapping, replications: int) -> str:
    """The gcp cost line of the design run with `replications` replications."""
    from dataclasses import replace

    from ybscale.design.row import resolve_rows

    more = replace(
        design, replications=replications, blocks=1, block_generators=(), center_points=0
    )
    p = plan(resolve_rows(more, config), config)
    return (
        f"gcp: {p.vm_hours():.1f} VM-hours, estimated USD {p.cost():.2f} (at best "
        f"USD {p.cost(False):.2f}), an ESTIMATE from gcp.prices (see `ybscale plan` for what "
        "it counts and leaves out)."
    )


def format_factors(design) -> str:
    """One line per factor: letter, name, the knob it sets and its two levels."""
    lines = ["Factors (letter name -> knob: level at -1 | level at +1):"]
    for f in design.factors:
        gen = f" (= {design.generators[f.letter]})" if f.letter in design.generators else ""
        lines.append(f"  {f.letter}{gen} {f.name} -> {f.knob}: {f.levels[0]} | {f.levels[1]}")
    return "\n".join(lines)
