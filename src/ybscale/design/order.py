"""Run order: randomised from a recorded seed, one block per replicate (or per block of a
blocked design), and what was executed.

Montgomery ch. 1 / Jain ch. 16: measure the rows in random order so that slow drift of the
machine is not confounded with whichever factors happen to follow the standard order. With
r >= 2 replicates each replicate is a block (all rows once), run in its own random order, one
block after the other; the block is then a term of the ANOVA. A design in blocks (`blocks:`)
is measured the same way, block by block, its rows in random order within each. Where rows
share a cluster (gcp,
existing, local with `local.cluster_per: combination`: ybscale.design.strata) the cluster is the
block: clusters in random order, and the rows of each (its replicates included, since they
reuse it) in random order, all drawn from the seed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

ORDERS = ("random", "standard")
PLANNED_COLUMNS = ["position", "run", "row", "replicate", "block"]
EXECUTED_COLUMNS = [
    "executed",
    "run",
    "row",
    "replicate",
    "block",
    "planned",
    "started",
    "finished",
    "seconds",
    "order",
    "seed",
]


def _shared(clusters: Mapping[str, str] | None) -> bool:
    """Whether some rows share a cluster (gcp, existing); local: each row its own."""
    return bool(clusters) and len(set(clusters.values())) < len(clusters)


def cluster_order(runs: list[str], clusters: Mapping[str, str], order: str, seed: int) -> list:
    """The clusters of `runs` (design order) in the order they are measured: random from
    `seed`, or by their first run."""
    names = list(dict.fromkeys(clusters.get(run, run) for run in runs))
    if order == "random":
        rng = np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(1)[0])
        names = [names[i] for i in rng.permutation(len(names))]
    return names


def _by_cluster(units: list[tuple[str, int, int]], order: str, seed: int, clusters) -> list:
    """Clusters in random order, the rows of each in random order (block = the cluster)."""
    groups: dict[str, list] = {}
    for unit in sorted(units, key=lambda u: (u[2], u[1])):
        groups.setdefault(clusters.get(unit[0], unit[0]), []).append(unit)
    runs = [u[0] for part in groups.values() for u in part]
    children = np.random.SeedSequence(int(seed)).spawn(len(groups) + 1)[1:]
    out = []
    for name in cluster_order(runs, clusters, order, seed):
        part = groups[name]
        if order == "random":
            child = children[list(groups).index(name)]
            part = [part[i] for i in np.random.default_rng(child).permutation(len(part))]
        out += [(len(out) + i + 1, run, row, rep, name) for i, (run, row, rep) in enumerate(part)]
    return out


def _positions(
    units: list[tuple[str, int, int]], order: str, seed: int, clusters=None, row_blocks=()
) -> list[tuple]:
    """(run, row, replicate) -> planned (position, run, row, replicate, block), pure Python.
    With `clusters` (run -> cluster) shared by several rows, a block is a cluster; with
    `row_blocks` (the design's blocks, `Design.row_blocks`) the block of each row."""
    if order not in ORDERS:
        raise ValueError(f"measurement.order must be one of {ORDERS}, got {order!r}")
    if _shared(clusters):
        if row_blocks:
            raise ValueError(
                "design blocks with rows that share a cluster (gcp, existing, local.cluster_per:"
                " combination) are not supported yet: the clusters are the blocks there"
            )
        return _by_cluster(units, order, seed, clusters)

    def block_of(unit) -> int:  # a centre run (row 0): its block is its replicate column
        return row_blocks[unit[1] - 1] if row_blocks and unit[1] > 0 else unit[2]

    blocks = sorted({block_of(u) for u in units})
    children = np.random.SeedSequence(int(seed)).spawn(len(blocks))
    out = []
    for block, child in zip(blocks, children, strict=True):
        # the centre runs (row 0) after the design's rows, before the draw
        part = sorted((u for u in units if block_of(u) == block), key=lambda u: (u[1] == 0, u[1]))
        if order == "random":
            perm = np.random.default_rng(child).permutation(len(part))
            part = [part[i] for i in perm]
        out += [(len(out) + i + 1, run, row, rep, block)
                for i, (run, row, rep) in enumerate(part)]  # fmt: skip
    return out


def planned_order(
    sign_table: pd.DataFrame, order: str = "random", seed: int = 0, clusters=None, row_blocks=()
) -> pd.DataFrame:
    """Planned position of every run (1 = first), blocks (replicates, or the clusters rows
    share: `clusters`, run -> cluster) one after the other.

    `sign_table` is `Design.sign_table()` (index run, columns row and replicate). Each block is
    permuted with its own generator spawned from `seed`, so adding replicates leaves the order
    of the earlier blocks unchanged.
    """
    import pandas as pd  # lazily: the Snakefile imports this module at parse time

    units = [
        (str(run), int(r["row"]), int(r["replicate"]))
        for run, r in sign_table[["row", "replicate"]].iterrows()
    ]
    lines = _positions(units, order, seed, clusters, row_blocks)
    return pd.DataFrame(lines, columns=PLANNED_COLUMNS)


def planned_lines(design, order: str, seed: int, clusters=None) -> list[tuple]:
    """The order `planned_order` gives, as (position, run, row, replicate, block) tuples,
    without pandas (the Snakefile needs it at parse time; the design record holds it)."""
    units = [
        (run, (i % design.n_rows) + 1, i // design.n_rows + 1)
        for i, run in enumerate(design.run_ids)
    ]  # the centre runs: row 0, spread over the replicates (`Design.center_blocks`)
    units += list(
        zip(design.center_run_ids, [0] * design.n_center, design.center_blocks, strict=True)
    )
    if design.center_points and _shared(clusters):
        from ybscale.design.factorial import DesignError

        raise DesignError(
            f"{design.source}: center_points: with rows that share a cluster (gcp, existing, "
            "local.cluster_per: combination) is not supported yet: the centre runs would share "
            "one cluster, whose spread is not the cluster-to-cluster noise the curvature test "
            "needs (local with a cluster per row runs them)"
        )
    try:
        return _positions(units, order, seed, clusters, design.row_blocks)
    except ValueError as exc:
        from ybscale.design.factorial import DesignError

        raise DesignError(f"{design.source}: blocks: {exc}") from None


def runs_of_block(design, block) -> list[str]:
    """The runs of one block of a design in blocks (`--config block=N`: one block per
    invocation, e.g. one a day), in design order; DesignError naming `--config block` when the
    design has no blocks or no block N."""
    from ybscale.design.factorial import DesignError

    if design.blocks <= 1:
        raise DesignError(
            f"--config block={block}: {design.source} has no blocks (blocks: 2, 4 ...)"
        )
    try:
        number = int(block)
    except (TypeError, ValueError):
        number = 0
    if not 1 <= number <= design.blocks:
        raise DesignError(
            f"--config block={block}: {design.source} has blocks 1 to {design.blocks}"
        )
    return [run for run, b in design.block_labels().items() if b == number]


def run_priorities(design, order: str, seed: int, clusters=None) -> dict[str, int]:
    """Snakemake priority per run, the first planned run highest (`planned_lines`)."""
    plan = planned_lines(design, order, seed, clusters)
    return {run: len(plan) - pos + 1 for pos, run, *_ in plan}


def executed_order(plan: pd.DataFrame, measurements: Iterable[Path], order: str, seed: int):
    """run_order.csv: every measured run with its start/end (measurement.json), by start time."""
    import pandas as pd  # lazily: the Snakefile imports this module at parse time

    lines = []
    for path in measurements:
        meta = json.loads(Path(path).read_text())
        lines.append({"run": meta["run"], "started": meta["started"], "finished": meta["finished"]})
    done = pd.DataFrame(lines, columns=["run", "started", "finished"])
    unknown = sorted(set(done["run"]) - set(plan["run"]))
    if unknown:
        raise ValueError(f"measurements of runs not in the design: {', '.join(unknown)}")
    out = plan.rename(columns={"position": "planned"}).merge(done, on="run", how="inner")
    start = pd.to_datetime(out["started"], utc=True, format="ISO8601")
    end = pd.to_datetime(out["finished"], utc=True, format="ISO8601")
    out["seconds"] = (end - start).dt.total_seconds()
    out = out.assign(_start=start).sort_values(["_start", "planned"]).drop(columns="_start")
    out.insert(0, "executed", np.arange(1, len(out) + 1))
    out["order"] = order
    out["seed"] = int(seed)
    return out[EXECUTED_COLUMNS].reset_index(drop=True)


def executed_positions(path: str | Path) -> pd.Series:
    """run -> executed position from a run_order.csv (for residuals-vs-order)."""
    import pandas as pd  # lazily: the Snakefile imports this module at parse time

    table = pd.read_csv(path)
    missing = {"run", "executed"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return table.set_index("run")["executed"].astype(int)


def main(argv: list[str] | None = None) -> int:
    """`python -m ybscale.design.order --design RECORD --out O M...` (the run_order rule: the
    order, seed and clusters are the design record's), or `--design D.yaml --order random
    --seed S [--clusters RUN=CLUSTER ...]`."""

    parser = argparse.ArgumentParser(prog="python -m ybscale.design.order", description=__doc__)
    parser.add_argument("--design", required=True)
    parser.add_argument("--order", choices=ORDERS, default=None, help="default: the record's")
    parser.add_argument("--seed", type=int, default=None, help="default: the record's")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("measurements", nargs="*", type=Path, help="measurement.json files")
    parser.add_argument("--clusters", nargs="*", metavar="RUN=CLUSTER", help="shared clusters")
    args = parser.parse_args(argv)
    from ybscale.design.factorial import load_design
    from ybscale.design.strata import parse_clusters

    design, clusters, order, seed = load_design(args.design), {}, "random", 0
    if str(args.design).endswith(".json"):  # the design record (ybscale.design.record)
        data = json.loads(Path(args.design).read_text(encoding="utf-8"))
        clusters = dict(data.get("clusters") or {})
        order, seed = data["run_order"]["order"], int(data["run_order"]["seed"])
    if args.clusters is not None:
        clusters = parse_clusters(args.clusters)
    order = args.order or order
    seed = seed if args.seed is None else args.seed
    plan = planned_order(design.measured_table(), order, seed, clusters, design.row_blocks)
    executed_order(plan, args.measurements, order, seed).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
