"""The study's checkpoint: after a round, is every column decided, and may the study go on?

The round rule (rules/analysis.smk, a Snakemake checkpoint) runs this after round n, whose
runs are the first ``replicates`` replicates of every row (ybscale.design.rounds). It writes, in
``results/rounds/round<n>/``, what the study's own rules would write for those runs (the design
record, ceilings.csv, run_order.csv and the analysis' tables, with the same functions and the
same settings), judges every column of every response against ``analysis.relevant``
(ybscale.analysis.verdicts), and decides in ``results/rounds/round<n>.json``:

* ``more``: some column is undecided, another replicate is within the budget (its replicates,
  and its seconds at the mean seconds per replicate measured so far);
* ``ended``: otherwise, what ended the study, in the words the findings print (every column
  decided, or the budget, and how many columns stay undecided).

The decision reads only what was measured, so a study run again from its results decides the
same rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ybscale.analysis import verdicts
from ybscale.analysis.terms import ERROR_TERM, of_response


def _undecided(effects, names: list[str]) -> dict[str, list[str]]:
    out = {}
    for name in names:
        table = of_response(effects, name) if len(names) > 1 else effects
        table = table[table["term"].astype(str) != ERROR_TERM]
        out[name] = verdicts.undecided(table)
    return out


def decision(
    undecided: dict[str, list[str]],
    replicates: int,
    most: int,
    seconds: float,
    budget_seconds: float | None,
    relevant,
) -> dict:
    """What the round decides (module docstring), from its undecided columns per response, the
    replicates and seconds measured, and the budget."""
    open_columns = sorted({t for terms in undecided.values() for t in terms})
    per_replicate = seconds / replicates if replicates else math.nan
    within_seconds = budget_seconds is None or seconds + per_replicate <= budget_seconds
    more = bool(open_columns) and replicates < most and within_seconds
    size = verdicts.relevant_words(relevant)
    measured = f"{replicates} replicate{'s' if replicates > 1 else ''}, {seconds:,.0f} s measured"
    if not open_columns:
        ended = f"The study ended with every column decided against ±{size} ({measured})."
    elif more:
        ended = (
            f"Replicate {replicates + 1} is added: {len(open_columns)} column(s) undecided "
            f"({', '.join(open_columns)})."
        )
    elif replicates >= most:
        ended = (
            f"The study ended at its budget ({most} replicates, measurement.budget) with "
            f"{len(open_columns)} column(s) still undecided against ±{size} ({measured}); "
            "the undecided ones are listed with the runs that would decide each."
        )
    else:
        ended = (
            f"The study ended at its budget ({budget_seconds:,.0f} s of measurement, "
            f"measurement.budget): one more replicate, about {per_replicate:,.0f} s, would "
            f"pass it; {len(open_columns)} column(s) still undecided against ±{size} "
            f"({measured})."
        )
    return {
        "replicates": replicates,
        "most_replicates": most,
        "seconds": seconds,
        "seconds_per_replicate": per_replicate,
        "budget_seconds": budget_seconds,
        "undecided": undecided,
        "more": more,
        "ended": ended,
    }


def run_round(args) -> dict:
    """Analyse the round's runs as the study's rules do and decide (module docstring)."""
    from ybscale.analysis.analyze import AnalysisPaths, analyze
    from ybscale.analysis.ceiling import collect
    from ybscale.design import order as orders
    from ybscale.design.factorial import load_design
    from ybscale.design.record import build, read
    from ybscale.design.rounds import runs_of, with_replicates

    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = json.loads(Path(args.design).read_text(encoding="utf-8"))
    design = with_replicates(load_design(args.design), args.replicates)
    runs = set(runs_of(design, args.replicates))
    every = {**base.get("clusters", {}), **base.get("later_clusters", {})}
    clusters = {r: c for r, c in every.items() if r in runs}
    order = base.get("run_order") or {}
    record = folder / "design.json"
    built = build(design, args.backend, clusters, order.get("order", "random"),
                  int(order.get("seed", 0)))  # fmt: skip
    record.write_text(json.dumps(built, indent=2) + "\n", encoding="utf-8")
    ceilings = collect(str(record), args.ceilings, args.ceiling, args.prices)
    ceilings.to_csv(folder / "ceilings.csv", index=False)
    kept = read(record)
    plan = orders.planned_order(
        kept.design.measured_table(), kept.order, kept.seed, kept.clusters, design.row_blocks
    )
    run_order = folder / "run_order.csv"
    orders.executed_order(plan, args.measurements, kept.order, kept.seed).to_csv(
        run_order, index=False
    )
    names = list(args.responses)
    tables = analyze(
        kept.design,
        ceilings,
        names,
        AnalysisPaths.under(folder),
        args.alpha,
        args.model,
        run_order=run_order,
        clusters=kept.clusters,
        multiplicity=args.multiplicity,
        relevant=args.relevant,
    )
    seconds = float(ceilings["measured_seconds"].astype(float).fillna(0.0).sum())
    budget = args.budget or {}
    return decision(
        _undecided(tables["effects"], names),
        args.replicates,
        args.most,
        seconds,
        budget.get("seconds"),
        args.relevant,
    ) | {"round": args.round}


def _relevant(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def main(argv: list[str] | None = None) -> int:
    """``python -m ybscale.analysis.rounds --design D.yaml --round N --replicates R --most M
    ... --out results/rounds/roundN.json CEILING.json ...`` (the round checkpoint)."""
    parser = argparse.ArgumentParser(prog="python -m ybscale.analysis.rounds")
    parser.add_argument(
        "--design", required=True, help="the design record (results/design/design.json)"
    )
    parser.add_argument("--round", required=True, type=int)
    parser.add_argument("--replicates", required=True, type=int, help="replicates measured")
    parser.add_argument("--most", required=True, type=int, help="most replicates (budget)")
    parser.add_argument("--budget", type=json.loads, default=None, help="measurement.budget")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--ceiling", default="empirical")
    parser.add_argument("--prices", type=json.loads, default=None)
    parser.add_argument("--responses", nargs="+", default=["response"])
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--multiplicity", default="holm")
    parser.add_argument("--relevant", type=_relevant, default=verdicts.DEFAULT_RELEVANT)
    parser.add_argument("--folder", required=True, help="the round's tables")
    parser.add_argument("--measurements", nargs="+", type=Path, required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--ceilings", nargs="+", type=Path, required=True)
    args = parser.parse_args(argv)
    decided = run_round(args)
    args.out.write_text(json.dumps(decided, indent=2) + "\n", encoding="utf-8")
    print(decided["ended"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
