"""Run order: randomised from a recorded seed, one block per replicate, and what was executed.

Montgomery ch. 1 / Jain ch. 16: measure the rows in random order so that slow drift of the
machine is not confounded with whichever factors happen to follow the standard order. With
r >= 2 replicates each replicate is a block (all rows once), run in its own random order, one
block after the other; the block is then a term of the ANOVA.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
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


def _positions(units: list[tuple[str, int, int]], order: str, seed: int) -> list[tuple]:
    """(run, row, replicate) -> planned (position, run, row, replicate, block), pure Python."""
    if order not in ORDERS:
        raise ValueError(f"measurement.order must be one of {ORDERS}, got {order!r}")
    blocks = sorted({rep for _, _, rep in units})
    children = np.random.SeedSequence(int(seed)).spawn(len(blocks))
    out = []
    for block, child in zip(blocks, children, strict=True):
        part = sorted((u for u in units if u[2] == block), key=lambda u: u[1])
        if order == "random":
            perm = np.random.default_rng(child).permutation(len(part))
            part = [part[i] for i in perm]
        out += [(len(out) + i + 1, run, row, rep, rep) for i, (run, row, rep) in enumerate(part)]
    return out


def planned_order(sign_table: pd.DataFrame, order: str = "random", seed: int = 0) -> pd.DataFrame:
    """Planned position of every run (1 = first), blocks (replicates) one after the other.

    `sign_table` is `Design.sign_table()` (index run, columns row and replicate). Each block is
    permuted with its own generator spawned from `seed`, so adding replicates leaves the order
    of the earlier blocks unchanged.
    """
    import pandas as pd  # lazily: the Snakefile imports this module at parse time

    units = [
        (str(run), int(r["row"]), int(r["replicate"]))
        for run, r in sign_table[["row", "replicate"]].iterrows()
    ]
    return pd.DataFrame(_positions(units, order, seed), columns=PLANNED_COLUMNS)


def priorities(plan: pd.DataFrame) -> dict[str, int]:
    """Snakemake priority per run: the first planned run gets the highest number."""
    n = len(plan)
    return {run: n - int(pos) + 1 for run, pos in zip(plan["run"], plan["position"], strict=True)}


def run_priorities(design, order: str, seed: int) -> dict[str, int]:
    """`priorities(planned_order(...))` without pandas: what the Snakefile needs at parse time."""
    units = [
        (run, (i % design.n_rows) + 1, i // design.n_rows + 1)
        for i, run in enumerate(design.run_ids)
    ]
    plan = _positions(units, order, seed)
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
    """`python -m ybscale.order --design D --order random --seed S --out run_order.csv M...`."""
    from ybscale.design import load_design

    parser = argparse.ArgumentParser(prog="python -m ybscale.order", description=__doc__)
    parser.add_argument("--design", required=True)
    parser.add_argument("--order", choices=ORDERS, default="random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("measurements", nargs="*", type=Path, help="measurement.json files")
    args = parser.parse_args(argv)
    plan = planned_order(load_design(args.design).sign_table(), args.order, args.seed)
    executed_order(plan, args.measurements, args.order, args.seed).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
