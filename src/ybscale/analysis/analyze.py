"""Effects, ANOVA, residual diagnostics and charts for a table of responses; `ybscale analyze`.

The table is read by `ybscale.analysis.responses.read_responses` (one line per design run, by
run id or by factor columns); the charts are drawn by what the caller passes
(`ybscale analyze`: `ybscale.report.analyze`, through `ybscale.report.charts`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ybscale.analysis import disturbance, verdicts
from ybscale.analysis.anova import fit_anova, outliers
from ybscale.analysis.centre import Centre
from ybscale.analysis.effects import (
    ERROR_TERM,
    MODELS,
    estimate_effects,
    noise_se_from_ci,
    transform,
)
from ybscale.analysis.multiplicity import DEFAULT as MULTIPLICITY
from ybscale.analysis.multiplicity import RULES, keep_family
from ybscale.analysis.responses import ResponsesError, read_responses
from ybscale.analysis.scale import AUTO, choose
from ybscale.analysis.sensitivity import with_other_scale
from ybscale.analysis.strata import judge, mixed, mixed_applies, stratum_errors
from ybscale.analysis.terms import RESPONSE, of_response, response_names
from ybscale.design.factorial import DesignError, load_design
from ybscale.design.order import executed_positions
from ybscale.design.record import build as build_record
from ybscale.design.record import clusters_of
from ybscale.design.strata import WHOLE, column_strata

OUTPUTS = ("effects", "anova", "residuals", "outliers")


@dataclass(frozen=True)
class AnalysisPaths:
    """Where the analysis writes each table, and its charts (None: no charts)."""

    effects: Path
    anova: Path
    residuals: Path
    outliers: Path
    # where the charts go and what draws them (`draw(design, responses, response, effects,
    # residuals)`: ybscale.report.charts.AnalysisChartPaths, which the report stage passes in)
    charts: object | None = None

    @classmethod
    def under(cls, folder: Path | str, charts=None) -> AnalysisPaths:
        """``<table>.csv`` in `folder`, and with `charts` (a chart-paths class such as
        ``AnalysisChartPaths``) the charts in ``folder/charts`` (the CLI's ``--out``)."""
        folder = Path(folder)
        chart_paths = charts.under(folder / "charts") if charts else None
        return cls(*(folder / f"{name}.csv" for name in OUTPUTS), charts=chart_paths)


# ---------------------------------------------------------------------------- analysis


def _response_series(responses: pd.DataFrame, response: str) -> pd.Series:
    frame = responses.set_index("run") if "run" in responses.columns else responses
    if response not in frame.columns:
        raise ValueError(f"no response column '{response}' in the responses table")
    return frame[response].astype(float)


def _noise_se(responses: pd.DataFrame, response: str) -> pd.Series | None:
    """Standard error of each run's response from its 95 % interval, when the table has one."""
    low, high = f"{response}_ci_low", f"{response}_ci_high"
    if not {low, high} <= set(responses.columns):
        return None
    frame = responses.set_index("run") if "run" in responses.columns else responses
    return pd.Series(noise_se_from_ci(frame[low], frame[high]), index=frame.index)


def write_design_record(design, folder: Path) -> Path:
    """``folder/design/design.json``: the design record (`ybscale.design.record.build`: factors
    and levels, generators with their signs, the signed defining relation, rows, replications),
    what `ybscale compare` checks before comparing two folders (any factor names: no knobs
    needed; no run order: a table analysed by hand says nothing of it)."""
    path = Path(folder) / "design" / "design.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build_record(design, order=None), indent=2) + "\n", encoding="utf-8")
    return path


def keep_responses(source: Path, folder: Path) -> None:
    """``folder/responses.csv``: the responses table as given, so that `ybscale compare` can
    analyse the study again on another scale (a pipeline's results folder has ceilings.csv)."""
    target = Path(folder) / "responses.csv"
    if target.resolve() != Path(source).resolve():
        shutil.copyfile(source, target)


def replicate_blocks(run_order: Path | str, design) -> pd.Series | None:
    """The replicates as blocks (run -> replicate) when the executed run order
    (results/run_order.csv) kept each replicate together: its ``block`` is the replicate and
    every replicate's runs were measured one after the other. None otherwise (one random order
    over all runs, or clusters as blocks: those are strata): completely randomized."""
    table = pd.read_csv(run_order)
    if design.replications < 2 or not {"run", "replicate", "block", "executed"} <= set(table):
        return None
    if not table["block"].astype(str).eq(table["replicate"].astype(str)).all():
        return None
    table = table.sort_values("executed")
    changes = int((table["replicate"] != table["replicate"].shift()).sum())
    if changes != table["replicate"].nunique():  # a replicate interrupted by another
        return None
    return table.set_index("run")["replicate"].astype(str)


def analyze(
    design,
    responses: pd.DataFrame,
    response: str | list[str],
    out: AnalysisPaths | Path | str,
    alpha: float = 0.05,
    model: str = AUTO,
    charts=None,
    run_order: Path | None = None,
    clusters: dict[str, str] | None = None,
    multiplicity: str = MULTIPLICITY,
    blocks: pd.Series | None = None,
    relevant=verdicts.DEFAULT_RELEVANT,
) -> dict[str, pd.DataFrame]:
    """Write the effects, ANOVA, residuals and outliers tables (and the charts) where `out`
    says: an AnalysisPaths, or a folder (``<table>.csv``, and ``charts/`` when `charts` is a
    chart-paths class, `AnalysisPaths.under`; and ``design/design.json``, the design record
    `ybscale compare` checks).

    ``response``: a column, or several (analysis.responses): each analysed on its own (its own
    scale, multiplicity family and strata verdicts), the tables holding one block of lines per
    response named in their ``response`` column; the charts are the first response's.

    Measurement noise: a response's 95 % interval (``<response>_ci_low``/``_ci_high`` columns,
    as ceilings.csv has them) is carried into the effects. Blocks only where the runs were
    blocked: ``blocks`` (run -> block label), else the replicates when ``run_order``
    (results/run_order.csv, which also orders the residuals as they were measured) kept each
    replicate together (replicate_blocks); otherwise completely randomized.
    ``model`` ``auto`` picks the scale from the data (analysis.scale); the effects table records
    the scale, how it was chosen, and which effects are active on the other scale.
    ``clusters`` (run -> the cluster it ran on; default: each its own) sets the error strata:
    each column is judged against the noise of its stratum (ybscale.design.strata).
    ``multiplicity`` adjusts the replicated design's p-values over its columns (holm, bh, none).
    ``relevant`` (analysis.relevant: "10%" or an amount) is the smallest effect that matters:
    each column's verdict (matters, negligible, undecided) is judged against it
    (ybscale.analysis.verdicts)."""
    verdicts.parse_relevant(relevant)  # refused before any work
    paths = out if isinstance(out, AnalysisPaths) else AnalysisPaths.under(out, charts)
    if not isinstance(out, AnalysisPaths):
        write_design_record(design, Path(out))
    names = [response] if isinstance(response, str) else list(response)
    if blocks is None and design.blocks > 1:  # a design measured in blocks (`blocks:`)
        blocks = pd.Series(design.block_labels())
    if blocks is None and run_order is not None:
        blocks = replicate_blocks(run_order, design)
    options = (alpha, model, run_order, clusters, multiplicity, blocks, relevant)
    each = {name: _analyze_one(design, responses, name, *options) for name in names}
    tables = {}
    for table in OUTPUTS:
        parts = [each[name][table].assign(**{RESPONSE: name}) for name in names]
        tables[table] = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        tables[table].attrs = each[names[0]][table].attrs
        path = getattr(paths, table)
        path.parent.mkdir(parents=True, exist_ok=True)
        tables[table].to_csv(path, index=False)
    if paths.charts is not None:  # the main response's
        main = each[names[0]]
        paths.charts.draw(design, responses, names[0], main["effects"], main["residuals"])
    return tables


def _analyze_one(
    design, responses, response, alpha, model, run_order, clusters, multiplicity, blocks,
    relevant=verdicts.DEFAULT_RELEVANT,
) -> dict[str, pd.DataFrame]:  # fmt: skip
    """One response's tables: its own scale choice, multiplicity family and strata."""
    y = _response_series(responses, response)
    noise = _noise_se(responses, response)
    center = Centre.of(responses, response)  # centre points (read_responses), apart
    if center is not None and center.blocks is None and isinstance(blocks, pd.Series):
        # the design's blocks (`blocks:`): its centre runs' too, by their run ids
        found = blocks.reindex(center.values.index)
        if found.notna().all():
            center = Centre(center.values, center.signs, found.astype(str))
    scale = choose(design, y, model, alpha=alpha)
    model = scale.model

    strata = column_strata(design, clusters or {})
    if WHOLE in strata.values():
        blocks = None  # a split plot: the clusters are the strata, a replicate's shift is in them

    def judged(on: str) -> pd.DataFrame:
        base = estimate_effects(design, y, alpha, on, noise, blocks, multiplicity=multiplicity,
                                center=center)  # fmt: skip
        table = judge(base, strata, alpha)
        if clusters and mixed_applies(strata, clusters, design.replications):
            # every column t-tested on its stratum's df, adjusted over all of them
            return mixed(table, design, transform(y, on), clusters, strata, alpha, multiplicity)
        same = table["std_error"].eq(base["std_error"]) & table["method"].eq(base["method"])
        return keep_family(table, same, alpha)

    effects = with_other_scale(judged(model), judged, scale, y)
    order = executed_positions(run_order) if run_order else None
    result = fit_anova(design, y, alpha, model, blocks, order, multiplicity, clusters, center)
    effects = stratum_errors(effects, result.table)
    effects = disturbance.widen(effects, design, y, disturbance.shares(responses), response)
    effects = verdicts.judge(effects, y, relevant, alpha, design.n_rows)
    return {
        "effects": effects,
        "anova": result.table,
        "residuals": result.residuals,
        "outliers": outliers(result.residuals),
    }


def _summary(tables: dict[str, pd.DataFrame], paths: AnalysisPaths, more=()) -> str:
    """A few lines for the terminal (`more`: further files written)."""
    effects = tables["effects"]
    lines = []
    for name in response_names(effects):
        terms = of_response(effects, name)
        terms = terms[terms["term"] != ERROR_TERM]
        active = terms.loc[terms["active"].astype(bool), "term"].tolist()
        method = terms["method"].iloc[0] if len(terms) else "?"
        if method == "t":
            rule = effects.attrs["multiplicity"]
            method = f"t, {rule} over {effects.attrs['columns']} columns"
        lines.append(f"active on {name} ({method}): {', '.join(active) or 'none'}")
        if "verdict" in terms.columns:
            size = verdicts.relevant_words(effects.attrs.get("relevant", verdicts.DEFAULT_RELEVANT))
            for verdict in (verdicts.MATTERS, verdicts.NEGLIGIBLE, verdicts.UNDECIDED):
                named = terms.loc[terms["verdict"] == verdict, "term"].astype(str).tolist()
                lines.append(f"  {verdict} (against {size}): {', '.join(named) or 'none'}")
    runs = tables["outliers"]["run"].drop_duplicates().tolist()
    return "\n".join(
        [
            "wrote " + ", ".join([*(str(getattr(paths, n)) for n in OUTPUTS), *more]),
            *lines,
            "blocks: " + _blocks_words(tables["anova"]),
            *_curvature_words(tables["anova"]),
            f"outliers: {', '.join(runs) or 'none'}",
        ]
    )


def _curvature_words(anova: pd.DataFrame) -> list[str]:
    """The summary's line on the centre points' curvature test ([] without centre points)."""
    line = anova[anova["term"].astype(str) == "curvature"]
    if not len(line):
        return []
    f, p = float(line["F"].iloc[0]), float(line["p_value"].iloc[0])
    alpha = float(anova.attrs.get("alpha", 0.05))
    verdict = "the response bends between the levels" if p < alpha else "no evidence it bends"
    return [f"curvature (centre points): F = {f:.3g}, p = {p:.3g}: {verdict}"]


def _blocks_words(anova: pd.DataFrame) -> str:
    """How the summary names the blocking: none, the replicates' out of the error, or the
    columns an unreplicated design's blocks are confounded with."""
    if not anova.attrs.get("blocks"):
        return "none (completely randomized)"
    line = anova[anova["term"].astype(str) == "block"]
    confounded = str(line["alias"].iloc[0]) if len(line) and pd.notna(line["alias"].iloc[0]) else ""
    if confounded:
        return f"yes, confounded with {confounded}: taken out of the effect tests"
    return "yes, taken out of the error"


def _one_line(exc: Exception) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def main(argv: list[str] | None = None, charts=None, findings=None) -> int:
    """`ybscale analyze --design DESIGN.yaml --responses FILE.csv --out DIR`, or each output
    path given (`--effects ... --residual-charts DIR`); the charts only with `charts` (the
    chart-paths class `ybscale.report.analyze` passes: the `ybscale analyze` verb), else as
    with `--no-charts` (the analyze rule); with `findings` (the verb's
    `ybscale.report.findings.write_table_findings`) and `--out DIR`, DIR/findings.md."""
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(prog="ybscale analyze", description=cli_description(__doc__))
    parser.add_argument("--design", required=True, type=Path, help="design YAML")
    parser.add_argument("--responses", required=True, type=Path, help="responses CSV")
    parser.add_argument(
        "--out",
        type=Path,
        help="output folder: <table>.csv, charts/, design/ (the record compare checks)",
    )
    for name in (*OUTPUTS, "pareto", "half-normal", "interactions", "residual-charts"):
        parser.add_argument(f"--{name}", type=Path, help="this output's path (instead of --out)")
    parser.add_argument(
        "--response",
        nargs="+",
        default=None,
        help="response column(s), each analysed on its own (default: the only numeric one)",
    )
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--model", choices=(AUTO, *MODELS), default=AUTO)
    parser.add_argument(
        "--multiplicity",
        choices=RULES,
        default=MULTIPLICITY,
        help="p-value adjustment over the columns of a replicated design (default: holm)",
    )
    parser.add_argument(
        "--relevant",
        default=verdicts.DEFAULT_RELEVANT,
        help="the smallest effect that matters: a share ('10%%') or an amount in the response's "
        f"unit; each column matters, is negligible or is undecided against it (default "
        f"{verdicts.DEFAULT_RELEVANT.replace('%', '%%')})",
    )
    parser.add_argument("--no-charts", action="store_true", help="do not draw charts")
    parser.add_argument(
        "--run-order",
        type=Path,
        help="results/run_order.csv: residual order; replicates measured one after the other "
        "are blocks",
    )
    parser.add_argument(
        "--block",
        metavar="COLUMN",
        help="the responses' column naming each run's block, e.g. replicate (default: a 'block' "
        "column if the table has one; else completely randomized)",
    )
    parser.add_argument(
        "--clusters", nargs="*", metavar="RUN=CLUSTER", help="rows that shared a cluster"
    )
    args = parser.parse_args(argv)
    if not 0 < args.alpha < 1:
        raise SystemExit(f"ybscale analyze: --alpha must be in (0, 1), got {args.alpha}")
    try:
        clusters = clusters_of(args.design, args.clusters)  # given, else the design record's
    except ValueError as exc:
        raise SystemExit(f"ybscale analyze: {_one_line(exc)}") from None
    relevant = _relevant(args.relevant)
    try:
        verdicts.parse_relevant(relevant)
    except verdicts.RelevantError as exc:
        raise SystemExit(f"ybscale analyze: --relevant: {exc}") from None
    if args.run_order is not None and not args.run_order.is_file():
        raise SystemExit(f"ybscale analyze: --run-order: {args.run_order}: no such file")
    try:
        design = load_design(args.design)
        names = args.response or [None]
        for name in names[1:]:  # each column checked as the first is
            read_responses(args.responses, design, name, args.block)
        responses = read_responses(args.responses, design, names[0], args.block)
        column = [responses.attrs["response"], *names[1:]]
        blocks = responses["block"] if "block" in responses.columns else None
        paths = _paths(args, parser, charts)
        tables = analyze(
            design,
            responses,
            column,
            paths,
            args.alpha,
            args.model,
            run_order=args.run_order,
            clusters=clusters,
            multiplicity=args.multiplicity,
            blocks=blocks,
            relevant=relevant,
        )
    except (DesignError, ResponsesError) as exc:
        raise SystemExit(f"ybscale analyze: {_one_line(exc)}") from None
    except ValueError as exc:  # the responses' (an error about another file names it)
        text = _one_line(exc)
        named = str(args.run_order) if args.run_order is not None else None
        where = "" if named and text.startswith(f"{named}:") else f"{args.responses}: "
        raise SystemExit(f"ybscale analyze: {where}{text}") from None
    written = []
    if args.out is not None:
        write_design_record(design, args.out)
        keep_responses(args.responses, args.out)
        if findings is not None:
            path = findings(design, tables, responses, column, str(args.responses), args.out,
                            args.alpha, clusters)  # fmt: skip
            written.append(str(path))
    print(_summary(tables, paths, written))
    return 0


def _relevant(text: str):
    """--relevant as analysis.relevant holds it: a share as given ("10%"), an amount a number."""
    try:
        return float(text)
    except ValueError:
        return text


def _paths(args, parser, charts=None) -> AnalysisPaths:
    """--out DIR, or every table's path (and every chart's unless --no-charts)."""
    if charts is None:
        args.no_charts = True
    if args.out is not None:
        return AnalysisPaths.under(args.out, None if args.no_charts else charts)
    missing = [f"--{n}" for n in OUTPUTS if getattr(args, n) is None]
    chart_args = ("pareto", "half_normal", "interactions", "residual_charts")
    if not args.no_charts:
        missing += [f"--{n.replace('_', '-')}" for n in chart_args if getattr(args, n) is None]
    if missing:
        parser.error(f"give --out DIR or every output path (missing: {', '.join(missing)})")
    drawn = None if args.no_charts else charts(*(getattr(args, n) for n in chart_args))
    return AnalysisPaths(*(getattr(args, n) for n in OUTPUTS), charts=drawn)


if __name__ == "__main__":
    sys.exit(main())
