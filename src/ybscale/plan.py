"""`ybscale plan`: clusters, VMs, VM-hours, estimated cost and wall time before anything runs.

The cost is an ESTIMATE from the editable price table `gcp.prices` (USD per VM-hour); disks,
Cloud NAT and network egress are not counted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ybscale.backends.base import Backend

PER_COUNT_OVERHEAD_S = 15  # reset + checks + process start per client count (estimate)
LOAD_ROWS_PER_S = 20_000  # dataset (re)load speed assumed for write rows (estimate)


@dataclass(frozen=True)
class ClusterPlan:
    combination: str
    runs: list[str]
    masters: int
    tservers: int
    machine_types: dict[str, int]  # machine type -> VMs
    measure_seconds: float  # its rows, back to back
    hours_min: float  # up only while its own rows run (+ provisioning)
    hours_max: float  # up from the start until its last row finished (+ provisioning)

    @property
    def vms(self) -> int:
        return sum(self.machine_types.values())


@dataclass(frozen=True)
class Plan:
    clusters: list[ClusterPlan]
    row_seconds: dict[str, float]
    wall_seconds: float
    prices: dict[str, float]
    provisioning_minutes: float
    missing_prices: list[str] = field(default_factory=list)

    def vm_hours(self, worst: bool = True) -> float:
        return sum(c.vms * (c.hours_max if worst else c.hours_min) for c in self.clusters)

    def cost(self, worst: bool = True) -> float:
        return sum(
            n * self.prices.get(mt, 0.0) * (c.hours_max if worst else c.hours_min)
            for c in self.clusters
            for mt, n in c.machine_types.items()
        )


def row_seconds(levels: Mapping, measurement: Mapping) -> float:
    """Expected wall time of one row: per client count warm-up, repetitions and overhead."""
    per_count = measurement.get("warmup", 1) + measurement.get("repetitions", 3) * measurement.get(
        "seconds", 3
    )
    per_count += PER_COUNT_OVERHEAD_S
    load = measurement.get("rows", 100_000) / LOAD_ROWS_PER_S
    counts = len(measurement["clients"])
    reloads = counts if str(levels["workload"]) == "write" else 1
    return counts * per_count + reloads * load


def plan(design, config: Mapping, combos: Sequence[str] | None = None) -> Plan:
    """The plan for the design's rows (only those of `combos` when given)."""
    from ybscale.backends.gcp import validate_section

    settings = validate_section(config)
    measurement = config["measurement"]
    types = settings["machine_types"]
    runs = list(design.run_ids)
    key = {r: Backend.infra_key(design.levels(r)) for r in runs}
    if combos is not None:
        runs = [r for r in runs if key[r] in combos]
    seconds = {r: row_seconds(design.levels(r), measurement) for r in runs}
    prov_h = settings["provisioning_minutes"] / 60
    clusters, elapsed, finished = [], 0.0, {}
    for r in runs:  # rows measured one at a time, in design order
        elapsed += seconds[r]
        finished[key[r]] = elapsed
    for combo in sorted(set(key[r] for r in runs)):
        levels = design.levels(next(r for r in runs if key[r] == combo))
        nodes = int(levels["nodes"])
        masters = nodes if str(levels["replication"]) == "on" else 1
        machine_types: dict[str, int] = {}
        for mt, n in ((types[str(levels["node_size"])], nodes), (types["master"], masters)):
            machine_types[mt] = machine_types.get(mt, 0) + n
        machine_types[types["loadgen"]] = machine_types.get(types["loadgen"], 0) + 1
        own = [r for r in runs if key[r] == combo]
        measure = sum(seconds[r] for r in own)
        clusters.append(
            ClusterPlan(
                combination=combo,
                runs=own,
                masters=masters,
                tservers=nodes,
                machine_types=machine_types,
                measure_seconds=measure,
                hours_min=prov_h + measure / 3600,
                hours_max=prov_h + finished[combo] / 3600,
            )
        )
    used = {mt for c in clusters for mt in c.machine_types}
    prices = {k: float(v) for k, v in settings["prices"].items()}
    return Plan(
        clusters=clusters,
        row_seconds=seconds,
        wall_seconds=settings["provisioning_minutes"] * 60 + sum(seconds.values()),
        prices=prices,
        provisioning_minutes=settings["provisioning_minutes"],
        missing_prices=sorted(used - set(prices)),
    )


def _hm(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def format_plan(p: Plan) -> str:
    """A human-readable plan, with the estimate caveats spelled out."""
    lines = [
        f"Plan: {len(p.clusters)} clusters for {len(p.row_seconds)} rows "
        f"({sum(c.vms for c in p.clusters)} VMs in all)",
        f"{'combination':<24} {'rows':>4} {'masters':>7} {'tservers':>8} {'VMs':>4}  machine types",
    ]
    for c in p.clusters:
        types = ", ".join(f"{n}x {mt}" for mt, n in c.machine_types.items())
        counts = f"{len(c.runs):>4} {c.masters:>7} {c.tservers:>8} {c.vms:>4}"
        lines.append(f"{c.combination:<24} {counts}  {types}")
    lines += [
        f"Expected wall time: {_hm(p.wall_seconds)} (rows one at a time, "
        f"{p.provisioning_minutes:g} min provisioning, clusters brought up in parallel)",
        f"VM-hours: {p.vm_hours():.1f} if every cluster stays up from the start until its last row "
        f"(how Snakemake schedules it); {p.vm_hours(False):.1f} at best",
        f"Estimated cost: USD {p.cost():.2f} (at best USD {p.cost(False):.2f}) -- an ESTIMATE "
        "from the editable price table gcp.prices in config/config.yaml; disks, NAT and egress "
        "not included",
    ]
    if p.missing_prices:
        lines.append(
            f"WARNING: no price for {', '.join(p.missing_prices)} in gcp.prices: counted as 0"
        )
    return "\n".join(lines)


def plan_file(design_path: str | Path, config: Mapping, combos=None) -> Plan:
    from ybscale.backends.gcp import validate_section
    from ybscale.design import load_design

    validate_section(config)  # config errors first, before the design is read

    return plan(load_design(design_path), config, combos)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ybscale plan", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--design", default=None, help="default: the config's design")
    parser.add_argument("--detect", default=None, help="replications to detect e.g. 10%% or 500")
    parser.add_argument("--analysis", default="results", help="study whose noise --detect uses")
    args = parser.parse_args(argv)
    try:
        config = yaml.safe_load(Path(args.config).read_text()) or {}
        if args.detect:
            from ybscale.design import load_design
            from ybscale.power import detect

            design = load_design(args.design or config["design"])
            print(detect(args.detect, design, config, args.analysis))
            return 0
        print(format_plan(plan_file(args.design or config["design"], config)))
    except (OSError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
