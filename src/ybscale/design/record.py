"""The study's design record, `results/design/design.json`: written once by the design rule and
read by every later job instead of the design file, the cluster map, the run order and the seed.

It holds the design (`factorial.design_dict`: factors, generators, aliases, resolution), each
run's cluster (`clusters`: run -> label, as the backend labels them), the error strata the
backend gives (`strata`) and the planned run order (`run_order`: order, seed, one line per run).
`factorial.load_design` reads a record like a design file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ybscale.design import order as orders
from ybscale.design import strata
from ybscale.design.factorial import (
    Design,
    DesignError,
    design_dict,
    load_design,
    write_design_outputs,
)


def build(
    design: Design,
    backend: str | None = None,
    clusters: Mapping[str, str] | None = None,
    order: str | None = "random",
    seed: int = 0,
) -> dict:
    """The record of `design` as `backend` runs it: rows on `clusters` (run -> label; default
    each its own), measured in the order drawn from `order` and `seed` (None: no run order, a
    table analysed by hand)."""
    clusters = dict(clusters or {})
    record = design_dict(design)
    record["clusters"] = {run: clusters.get(run, run) for run in design.all_run_ids}
    if backend is not None:
        record["strata"] = strata.describe(design, clusters, backend)
    if order is None:
        return record
    planned = orders.planned_lines(design, order, seed, clusters)
    record["run_order"] = {
        "order": order,
        "seed": int(seed),
        "planned": [dict(zip(orders.PLANNED_COLUMNS, line, strict=True)) for line in planned],
    }
    return record


@dataclass(frozen=True)
class Record:
    """A design record read back: the design, each run's cluster and the planned order."""

    design: Design
    clusters: dict[str, str]
    order: str
    seed: int
    planned: list[dict]


def read(path: str | Path) -> Record:
    """The record at `path` (a DesignError naming the file when it is not one)."""
    design = load_design(path)
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    run_order = data.get("run_order") or {}
    return Record(
        design=design,
        clusters=dict(data.get("clusters") or {}),
        order=run_order.get("order", "random"),
        seed=int(run_order.get("seed", 0)),
        planned=list(run_order.get("planned") or []),
    )


def clusters_of(design_path: str | Path, given: list[str] | None = None) -> dict[str, str]:
    """Run -> cluster: `given` (RUN=CLUSTER items, for a table analysed by hand) when given,
    else the record's when `design_path` is a record, else none shared."""
    if given is not None:
        return strata.parse_clusters(given)
    if str(design_path).endswith(".json"):
        return read(design_path).clusters
    return {}


def main(argv: list[str] | None = None) -> int:
    """``python -m ybscale.design.record DESIGN.yaml --sign-table T --aliases A --record R
    --backend B --order O --seed S [--clusters RUN=CLUSTER ...]``: the design rule."""
    parser = argparse.ArgumentParser(prog="python -m ybscale.design.record")
    parser.add_argument("design", help="design YAML file")
    parser.add_argument("--sign-table", required=True)
    parser.add_argument("--aliases", required=True)
    parser.add_argument("--record", required=True, type=Path, help="the design record (JSON)")
    parser.add_argument("--backend", required=True, help="the backend the rows run on")
    parser.add_argument("--clusters", nargs="*", metavar="RUN=CLUSTER", help="each run's cluster")
    parser.add_argument("--order", default="random", help="measurement.order")
    parser.add_argument("--seed", type=int, default=0, help="measurement.seed")
    args = parser.parse_args(argv)
    try:
        design = load_design(args.design)
    except DesignError as exc:
        print(exc, file=sys.stderr)
        return 1
    runs = set(design.all_run_ids)
    given = strata.parse_clusters(args.clusters)
    clusters = {r: c for r, c in given.items() if r in runs}
    built = build(design, args.backend, clusters, args.order, args.seed)
    # the clusters of the rows later rounds may add (measurement.budget, ybscale.design.rounds)
    built["later_clusters"] = {r: c for r, c in given.items() if r not in runs}
    write_design_outputs(
        design, None, built, sign_table=args.sign_table, aliases=args.aliases, summary=args.record
    )
    print(f"{design.headline}; record {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
