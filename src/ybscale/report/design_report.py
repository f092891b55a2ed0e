"""The design part of the report, written from the design itself (reStructuredText).

Factors (letter, name, description, levels at -1 and +1, base or generated), generators,
defining relation, resolution and what it means, and the full alias structure: nothing in it is
fixed text about one particular design.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path

from ybscale.design.factorial import Design


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A reStructuredText grid-free simple table."""
    cells = [header, *rows]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return [rule, fmt(header), rule, *(fmt(r) for r in rows), rule]


def _cell(value: object) -> str:
    return str(value).replace("|", "/") or "-"


def _meaning(design: Design) -> str:
    res = design.resolution
    if math.isinf(res):
        return "A full factorial: every effect is estimated on its own."
    if res >= 5:
        return (
            f"Resolution {res}: main effects and two-factor interactions are free of each "
            "other (aliased only with higher-order interactions)."
        )
    if res == 4:
        return (
            "Resolution IV: main effects are free of two-factor interactions, but two-factor "
            "interactions are aliased with each other."
        )
    return (
        f"Resolution {'III' if res == 3 else res}: main effects are not aliased with each other, "
        "but they are aliased with two-factor interactions."
    )


def _low_order(design: Design) -> list[str]:
    """Alias strings that confound a main effect or 2FI with another main effect or 2FI."""
    out = []
    for _, members in design.alias_groups():
        low = [m.lstrip("-") for m in members if len(m.lstrip("-")) <= 2]
        if len(low) > 1:
            out.append(" = ".join(low))
    return out


def design_rst(
    design: Design,
    strata: Mapping[str, str] | None = None,
    clusters: Mapping[str, str] | None = None,
    rf: Mapping[str, int] | None = None,
) -> str:
    """The design section of the report; `strata` (term -> error stratum, ybscale.design.strata)
    adds each column's stratum, `clusters` (run -> the cluster it ran on) the clusters, `rf`
    (run -> the replication factor its cluster ran with, `replication_factors`) each cluster's
    RF."""
    k, p = len(design.factors), len(design.generators)
    rows = []
    for f in design.factors:
        how = (
            f"generated {f.letter} = {design.generators[f.letter]}"
            if f.letter in design.generators
            else "base"
        )
        if f.fold:
            how += " (fold-over: original or follow-up rows)"
        knob = getattr(f, "sets", None)  # the knob a factor sets, where the design says it
        if knob:
            how = f"sets {knob}; {how}"
        rows.append([f.letter, f.name, _cell(f.levels[0]), _cell(f.levels[1]), how])
    gens = ", ".join(f"{x} = {w}" for x, w in design.generators.items()) or "none"
    lines = [
        "Design",
        "------",
        "",
        f"The design file ``{design.source}`` defines a 2\\ :sup:`{k}-{p}` design with "
        f"{design.n_rows} rows"
        + (f", each run {design.replications} times" if design.replications > 1 else "")
        + f" ({design.n_runs} runs). Tables *1. Design* hold its sign table and alias table.",
        "",
        *_table(["letter", "factor", "level at −1", "level at +1", "how it is set"], rows),
        "",
        *(f"* **{f.name}**: {f.description}" for f in design.factors if f.description),
        "",
        f"* Generators: {gens}. Defining relation: **{design.defining_relation_string()}**.",
        f"* {_meaning(design)}",
    ]
    if design.center_points:
        middles = ", ".join(
            f"{f.name} {_cell(design.center_levels[f.letter])}"
            for f in design.factors
            if f.letter in design.center_levels
        )
        runs = design.center_run_ids
        held = ", ".join(design.factor(x).name for x in design.center_held)
        where = [f"at each level of {held}, which has no middle"] if held else []
        where += ["in each block"] if design.blocks > 1 else []
        each = f" ({design.center_points} {' and '.join(where)})" if where else ""
        lines.append(
            f"* Centre points: {design.n_center} runs{each} ({runs[0]} .. {runs[-1]}) with "
            f"every factor{' that has one' if held else ''} at the middle of its two levels "
            f"({middles}), measured "
            "like the other rows in the random run order; the centre runs test whether the "
            "response bends between the levels (curvature) and give the pure error."
        )
    if design.blocks > 1:
        confounded = "; ".join(f"**{design.alias_string(w)}**" for w in design.block_words())
        sizes = ", ".join(
            f"block {b}: {design.row_blocks.count(b)} rows" for b in range(1, design.blocks + 1)
        )
        lines.append(
            f"* Blocks: {design.blocks}, measured one after the other, rows in random order "
            f"within each ({sizes}); block generators "
            f"{', '.join(design.block_generators)}: the blocks are confounded with {confounded}, "
            "which estimate the differences between blocks and are not tested as effects."
        )
    low = _low_order(design)
    if low:
        lines.append(
            "* Main effects and two-factor interactions that share a column: "
            + "; ".join(f"**{s}**" for s in low)
            + ". Each estimate is the sum of its alias string; the design cannot tell them apart."
        )
    lines += ["", f"Alias structure ({len(design.terms)} estimable columns):", ""]
    strata = strata or {}
    lines += [
        f"* {design.alias_string(t)}" + (f" ({strata[t]} stratum)" if t in strata else "")
        for t in design.terms
    ]
    if strata and set(strata.values()) != {"single"}:
        lines += [
            "",
            "Rows that share a cluster make a split plot: whole-plot columns (constant within "
            "every cluster) are judged against the cluster-to-cluster noise, sub-plot columns "
            "against the noise within a cluster.",
        ]
    return "\n".join(lines + _cluster_lines(design, clusters or {}, rf or {})) + "\n"


def _rf_text(runs: list[str], rf: Mapping[str, int]) -> str:
    """The replication factor(s) `runs` ran with, as their measurements recorded it."""
    found = sorted({int(rf[r]) for r in runs if r in rf})
    if not found:
        return "RF not recorded"
    return (
        "RF "
        + " and ".join(map(str, found))
        + ("" if all(r in rf for r in runs) else " (not recorded for every run)")
    )


def _cluster_lines(
    design: Design, clusters: Mapping[str, str], rf: Mapping[str, int] | None = None
) -> list[str]:
    """The clusters the rows ran on, each with its runs and, where the runs' measurements
    recorded it (`rf`: run -> replication factor), the replication factor it ran with ([] when
    no clusters are given)."""
    if not clusters:
        return []
    rf = rf or {}
    groups: dict[str, list[str]] = {}
    for run in design.all_run_ids:
        groups.setdefault(clusters.get(run, run), []).append(run)
    if all(len(runs) == 1 for runs in groups.values()):
        lines = ["", f"Every run ran on a cluster of its own ({len(groups)} clusters)."]
        if rf:
            by_rf: dict[str, list[str]] = {}
            for run in design.all_run_ids:
                by_rf.setdefault(_rf_text([run], rf), []).append(run)
            lines[-1] += (
                " Replication factor (each run's measurement.json): "
                + "; ".join(f"{what}: {', '.join(runs)}" for what, runs in by_rf.items())
                + "."
            )
        return lines
    return [
        "",
        f"The {len(design.all_run_ids)} runs ran on {len(groups)} clusters"
        + (" (each with the replication factor its runs' measurement.json records)" if rf else "")
        + ":",
        "",
        *(
            f"* ``{name}``" + (f" ({_rf_text(runs, rf)})" if rf else "") + f": {', '.join(runs)}"
            for name, runs in groups.items()
        ),
    ]


def replication_factors(runs: list[Path]) -> dict[str, int]:
    """Run -> the replication factor its cluster ran with, from each row folder's
    measurement.json (`applied.replication_factor`: gcp records its cluster's masters); runs
    that record none are left out."""
    import json

    found = {}
    for folder in runs:
        path = Path(folder) / "measurement.json"
        if not path.is_file():
            continue
        meta = json.loads(path.read_text(encoding="utf-8"))
        rf = (meta.get("applied") or {}).get("replication_factor")
        if rf is not None:
            found[str(meta.get("run") or Path(folder).name)] = int(rf)
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m ybscale.report.design_report --design RECORD --effects E --out PAGE``: the
    design page (the design_page rule), each column's stratum from the effects, the clusters
    from the design record."""
    import pandas as pd

    from ybscale.analysis.terms import of_response
    from ybscale.design.factorial import load_design
    from ybscale.design.record import clusters_of
    from ybscale.design.strata import strata_of_effects

    parser = argparse.ArgumentParser(prog="python -m ybscale.report.design_report")
    parser.add_argument("--design", required=True, type=Path, help="the design record")
    parser.add_argument("--effects", required=True, type=Path, help="effects.csv (its strata)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "runs", nargs="*", type=Path, help="the rows' folders (results/runs/<run>): their RF"
    )
    args = parser.parse_args(argv)
    design = load_design(args.design)
    strata = strata_of_effects(of_response(pd.read_csv(args.effects)))
    page = design_rst(design, strata, clusters_of(args.design), replication_factors(args.runs))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
