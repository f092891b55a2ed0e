"""Effects, ANOVA, residual diagnostics and charts for a table of responses; `ybscale analyze`.

The responses CSV has one line per design run, identified either by a ``run`` column (run01, ...)
or by factor columns: letters (A, B, ...) holding -1/+1 (or -/+), or factor names holding level
labels (operation_size = 1, workload = read). Base factors are required; generated factors, when
present, must agree with the design. An optional ``replicate`` column picks the replicate; without
it, repeated combinations are taken as replicates 1, 2, ... in file order. Lines starting with #
are comments.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ybscale.analysis.anova import fit_anova, outliers
from ybscale.analysis.effects import (
    BLOCK_TERM,
    ERROR_TERM,
    MODELS,
    estimate_effects,
    noise_se_from_ci,
    transform,
)
from ybscale.analysis.multiplicity import DEFAULT as MULTIPLICITY
from ybscale.analysis.multiplicity import RULES, keep_family
from ybscale.analysis.scale import AUTO, choose
from ybscale.analysis.sensitivity import with_other_scale
from ybscale.design.factorial import DesignError, load_design
from ybscale.design.order import executed_positions
from ybscale.design.strata import column_strata, judge, mixed, mixed_applies, parse_clusters

OUTPUTS = ("effects", "anova", "residuals", "outliers")


@dataclass(frozen=True)
class AnalysisPaths:
    """Where the analysis writes each table, and its charts (None: no charts)."""

    effects: Path
    anova: Path
    residuals: Path
    outliers: Path
    charts: object | None = None  # ybscale.report.charts.AnalysisChartPaths (altair loads lazily)

    @classmethod
    def under(cls, folder: Path | str, charts: bool = True) -> AnalysisPaths:
        """``<table>.csv`` in `folder`, charts in ``folder/charts`` (the CLI's ``--out``)."""
        folder = Path(folder)
        chart_paths = None
        if charts:
            from ybscale.report.charts import AnalysisChartPaths

            chart_paths = AnalysisChartPaths.under(folder / "charts")
        return cls(*(folder / f"{name}.csv" for name in OUTPUTS), charts=chart_paths)


_PLUS = {"1", "+1", "+", "1.0", "+1.0"}
_MINUS = {"-1", "-", "-1.0"}


class ResponsesError(ValueError):
    """A malformed responses table; the message names the file and the row or column."""


# ---------------------------------------------------------------------------- reading


def _read_csv(path: Path) -> pd.DataFrame:
    """All cells as stripped strings ('' when empty)."""
    if not path.is_file():
        raise ResponsesError(f"{path}: no such file")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, comment="#")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ResponsesError(f"{path}: cannot read CSV: {exc}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.columns.duplicated().any():
        dup = frame.columns[frame.columns.duplicated()][0]
        raise ResponsesError(f"{path}: column '{dup}' appears twice")
    if frame.empty:
        raise ResponsesError(f"{path}: no data rows")
    return frame.apply(lambda col: col.str.strip())


def _id_columns(frame: pd.DataFrame, design) -> list[str]:
    """Columns that identify a run (run, row, replicate, factor letters and names)."""
    names = {"run", "row", "replicate"} | set(design.letters) | {f.name for f in design.factors}
    return [c for c in frame.columns if c in names]


def _run_number(value: str) -> int | None:
    """'run07' or 'run7' -> 7."""
    match = re.fullmatch(r"run0*(\d+)", value.strip(), flags=re.IGNORECASE)
    return int(match.group(1)) if match else None


def _runs_by_id(frame: pd.DataFrame, design, path: Path) -> list[str]:
    """Design run ids from a `run` column."""
    runs = design.run_ids
    out = []
    for i, value in enumerate(frame["run"], start=1):
        number = _run_number(value)
        if number is None or not 1 <= number <= len(runs):
            raise ResponsesError(
                f"{path}: row {i}, column 'run': unknown run id {value!r} "
                f"(the design has {runs[0]} .. {runs[-1]})"
            )
        out.append(runs[number - 1])
    return out


def _sign(value: str, letter: str, path: Path, i: int) -> int:
    """'+1'/'1'/'+' -> 1, '-1'/'-' -> -1."""
    if value in _PLUS:
        return 1
    if value in _MINUS:
        return -1
    raise ResponsesError(f"{path}: row {i}, column '{letter}': {value!r} is not -1 or +1")


def _same_label(value: str, label: object) -> bool:
    """Cell text equals a level label (numbers compared as numbers)."""
    if value == str(label):
        return True
    try:
        return float(value) == float(label)
    except (TypeError, ValueError):
        return False


def _level_sign(value: str, factor, path: Path, i: int) -> int:
    """Sign of a level label of a factor."""
    for sign, label in ((-1, factor.levels[0]), (1, factor.levels[1])):
        if _same_label(value, label):
            return sign
    levels = ", ".join(repr(str(v)) for v in factor.levels)
    raise ResponsesError(
        f"{path}: row {i}, column '{factor.name}': level {value!r} is not in the design "
        f"(levels: {levels})"
    )


def _row_signs(frame: pd.DataFrame, design, path: Path) -> list[dict[str, int]]:
    """Per line: letter -> sign, from letter columns or factor-name columns."""
    out = []
    for i, (_, line) in enumerate(frame.iterrows(), start=1):
        signs: dict[str, int] = {}
        for f in design.factors:
            if f.letter in frame.columns:
                signs[f.letter] = _sign(line[f.letter], f.letter, path, i)
            elif f.name in frame.columns:
                signs[f.letter] = _level_sign(line[f.name], f, path, i)
        out.append(signs)
    return out


def _check_base_columns(frame: pd.DataFrame, design, path: Path) -> None:
    missing = [
        f"{f.letter} ({f.name})"
        for f in design.factors
        if f.letter in design.base and f.letter not in frame.columns and f.name not in frame.columns
    ]
    if missing:
        raise ResponsesError(
            f"{path}: no 'run' column and no column for base factor(s) {', '.join(missing)}"
        )


def _replicates(frame: pd.DataFrame, design, path: Path) -> list[int | None]:
    """The replicate column as ints, or None per line when absent."""
    if "replicate" not in frame.columns:
        return [None] * len(frame)
    out = []
    for i, value in enumerate(frame["replicate"], start=1):
        if not value.isdigit() or not 1 <= int(value) <= design.replications:
            raise ResponsesError(
                f"{path}: row {i}, column 'replicate': {value!r} is not a replicate "
                f"1..{design.replications}"
            )
        out.append(int(value))
    return out


def _runs_by_factors(frame: pd.DataFrame, design, path: Path) -> list[str]:
    """Design run ids from factor columns (and the optional replicate column)."""
    _check_base_columns(frame, design, path)
    table = design.sign_table()
    row_of = {
        tuple(int(s[b]) for b in design.base): int(s["row"])
        for _, s in table[table["replicate"] == 1].iterrows()
    }
    expected = {int(s["row"]): s for _, s in table[table["replicate"] == 1].iterrows()}
    reps = _replicates(frame, design, path)
    seen: dict[int, int] = {}
    out = []
    lines = zip(_row_signs(frame, design, path), reps, strict=True)
    for i, (signs, rep) in enumerate(lines, start=1):
        row = row_of[tuple(signs[b] for b in design.base)]
        for letter, sign in signs.items():
            if expected[row][letter] != sign:
                raise ResponsesError(
                    f"{path}: row {i}: combination {_describe(signs)} is not in the fraction "
                    f"({letter} must be {int(expected[row][letter]):+d} here)"
                )
        rep = rep if rep is not None else seen.get(row, 0) + 1
        seen[row] = max(seen.get(row, 0), rep)
        if rep > design.replications:
            raise ResponsesError(
                f"{path}: row {i}: combination {_describe(signs)} appears more than "
                f"{design.replications} time(s)"
            )
        out.append(design.run_ids[(rep - 1) * design.n_rows + row - 1])
    return out


def _describe(signs: dict[str, int]) -> str:
    return " ".join(f"{k}={v:+d}" for k, v in sorted(signs.items()))


def _check_coverage(runs: list[str], design, path: Path) -> None:
    """Every design run exactly once."""
    seen: dict[str, int] = {}
    for i, run in enumerate(runs, start=1):
        if run in seen:
            raise ResponsesError(
                f"{path}: row {i}: run {run} ({_describe(design.signs(run))}) duplicates "
                f"row {seen[run]}"
            )
        seen[run] = i
    missing = [r for r in design.run_ids if r not in seen]
    if missing:
        shown = ", ".join(f"{r} ({_describe(design.signs(r))})" for r in missing[:4])
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        raise ResponsesError(f"{path}: missing run(s) {shown}{more}")


def _check_run_signs(frame: pd.DataFrame, runs: list[str], design, path: Path) -> None:
    """With a run column, factor columns present must agree with the design."""
    lines = zip(runs, _row_signs(frame, design, path), strict=True)
    for i, (run, signs) in enumerate(lines, start=1):
        want = design.signs(run)
        for letter, sign in signs.items():
            if want[letter] != sign:
                raise ResponsesError(
                    f"{path}: row {i}: {run} has {letter}={want[letter]:+d} in the design, "
                    f"the file says {sign:+d}"
                )


def _numeric(frame: pd.DataFrame, column: str, path: Path) -> pd.Series:
    """A response column as floats; missing or non-numeric cells are errors."""
    for i, value in enumerate(frame[column], start=1):
        if value == "":
            raise ResponsesError(f"{path}: row {i}, column '{column}': missing value")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ResponsesError(f"{path}: row {i}, column '{column}': {value!r} is not a number")
    return frame[column].astype(float)


def _pick_response(frame: pd.DataFrame, ids: list[str], response: str | None, path: Path) -> str:
    """The response column: the one asked for, or the only numeric non-identifying one."""
    if response is not None:
        if response not in frame.columns:
            found = ", ".join(c for c in frame.columns if c not in ids) or "none"
            raise ResponsesError(f"{path}: no response column '{response}' (found: {found})")
        return response
    candidates = [
        c
        for c in frame.columns
        if c not in ids and pd.to_numeric(frame[c], errors="coerce").notna().any()
    ]
    if len(candidates) != 1:
        listed = ", ".join(candidates) or "none"
        raise ResponsesError(
            f"{path}: cannot tell the response column; pass --response (numeric columns: {listed})"
        )
    return candidates[0]


def read_responses(path, design, response: str | None = None) -> pd.DataFrame:
    """Responses indexed by the design's run ids (design order), with ``row``, ``replicate``
    and the response column(s); the chosen response column is ``result.attrs["response"]``."""
    path = Path(path)
    frame = _read_csv(path)
    ids = _id_columns(frame, design)
    column = _pick_response(frame, ids, response, path)
    if "run" in frame.columns:
        runs = _runs_by_id(frame, design, path)
        _check_run_signs(frame, runs, design, path)
    else:
        runs = _runs_by_factors(frame, design, path)
    _check_coverage(runs, design, path)
    values = _numeric(frame, column, path)
    out = frame[[c for c in frame.columns if c not in ids]].copy()
    for c in out.columns:
        out[c] = values if c == column else pd.to_numeric(out[c], errors="coerce")
    out.index = pd.Index(runs, name="run")
    signs = design.sign_table()
    out.insert(0, "replicate", signs.loc[runs, "replicate"].to_numpy())
    out.insert(0, "row", signs.loc[runs, "row"].to_numpy())
    out = out.loc[design.run_ids]
    out.attrs["response"] = column
    return out


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


def _charts(design, responses, response, effects, residuals, paths) -> list[Path]:
    """The diagnostics charts of the analysis (ybscale.report.charts)."""
    from ybscale.report import charts  # altair is heavy: only when charts are drawn

    terms = effects[~effects["term"].isin([ERROR_TERM, BLOCK_TERM])]
    return charts.analysis_charts(design, responses, response, terms, residuals, paths)


def draw_charts(design, responses, response, effects, residuals, paths) -> list[Path]:
    """The analysis charts from the files the effects rule wrote (design YAML, ceilings.csv,
    effects.csv, residuals.csv), where `paths` (ybscale.report.charts.AnalysisChartPaths) says."""
    design = load_design(design)
    table = read_responses(responses, design, response)
    column = table.attrs["response"]
    return _charts(design, table, column, pd.read_csv(effects), pd.read_csv(residuals), paths)


def analyze(
    design,
    responses: pd.DataFrame,
    response: str,
    out: AnalysisPaths | Path | str,
    alpha: float = 0.05,
    model: str = AUTO,
    charts: bool = True,
    run_order: Path | None = None,
    clusters: dict[str, str] | None = None,
    multiplicity: str = MULTIPLICITY,
) -> dict[str, pd.DataFrame]:
    """Write the effects, ANOVA, residuals and outliers tables (and the charts) where `out`
    says: an AnalysisPaths, or a folder (``<table>.csv``, ``charts/``; no charts unless
    `charts`).

    Measurement noise: a response's 95 % interval (``<response>_ci_low``/``_ci_high`` columns,
    as ceilings.csv has them) is carried into the effects; with replications the replicate is a
    block; ``run_order`` (results/run_order.csv) orders the residuals as they were measured.
    ``model`` ``auto`` picks the scale from the data (analysis.scale); the effects table records
    the scale, how it was chosen, and which effects are active on the other scale.
    ``clusters`` (run -> the cluster it ran on; default: each its own) sets the error strata:
    each column is judged against the noise of its stratum (ybscale.design.strata).
    ``multiplicity`` adjusts the replicated design's p-values over its columns (holm, bh, none)."""
    paths = out if isinstance(out, AnalysisPaths) else AnalysisPaths.under(out, charts)
    y = _response_series(responses, response)
    noise = _noise_se(responses, response)
    blocks = design.replications > 1
    scale = choose(design, y, model)
    model = scale.model

    strata = column_strata(design, clusters or {})

    def judged(on: str) -> pd.DataFrame:
        base = estimate_effects(design, y, alpha, on, noise, blocks, multiplicity=multiplicity)
        table = judge(base, strata, alpha)
        if clusters and mixed_applies(strata, clusters, design.replications):
            # every column t-tested on its stratum's df, adjusted over all of them
            return mixed(table, design, transform(y, on), clusters, strata, alpha, multiplicity)
        same = table["std_error"].eq(base["std_error"]) & table["method"].eq(base["method"])
        return keep_family(table, same, alpha)

    effects = with_other_scale(judged(model), judged, scale, y)
    order = executed_positions(run_order) if run_order else None
    result = fit_anova(design, y, alpha, model, blocks, order, multiplicity, clusters)
    tables = {
        "effects": effects,
        "anova": result.table,
        "residuals": result.residuals,
        "outliers": outliers(result.residuals),
    }
    for name, table in tables.items():
        path = getattr(paths, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, index=False)
    if paths.charts is not None:
        _charts(design, responses, response, effects, result.residuals, paths.charts)
    return tables


def _summary(tables: dict[str, pd.DataFrame], paths: AnalysisPaths) -> str:
    """A few lines for the terminal."""
    effects = tables["effects"]
    terms = effects[effects["term"] != ERROR_TERM]
    active = terms.loc[terms["active"].astype(bool), "term"].tolist()
    runs = tables["outliers"]["run"].tolist()
    method = terms["method"].iloc[0] if len(terms) else "?"
    if method == "t":
        rule = effects.attrs["multiplicity"]
        method = f"t, {rule} over {effects.attrs['columns']} columns"
    return "\n".join(
        [
            "wrote " + ", ".join(str(getattr(paths, n)) for n in OUTPUTS),
            f"active ({method}): {', '.join(active) or 'none'}",
            f"outliers: {', '.join(runs) or 'none'}",
        ]
    )


def _one_line(exc: Exception) -> str:
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    """`ybscale analyze --design DESIGN.yaml --responses FILE.csv --out DIR`, or each output
    path given (`--effects ... --residual-charts DIR`, as the effects rule does)."""
    parser = argparse.ArgumentParser(prog="ybscale analyze", description=__doc__.splitlines()[0])
    parser.add_argument("--design", required=True, type=Path, help="design YAML")
    parser.add_argument("--responses", required=True, type=Path, help="responses CSV")
    parser.add_argument("--out", type=Path, help="output folder: <table>.csv, charts/")
    for name in (*OUTPUTS, "pareto", "half-normal", "interactions", "residual-charts"):
        parser.add_argument(f"--{name}", type=Path, help="this output's path (instead of --out)")
    parser.add_argument("--response", default=None, help="response column (default: the only one)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--model", choices=(AUTO, *MODELS), default=AUTO)
    parser.add_argument(
        "--multiplicity",
        choices=RULES,
        default=MULTIPLICITY,
        help="p-value adjustment over the columns of a replicated design (default: holm)",
    )
    parser.add_argument("--no-charts", action="store_true", help="do not draw charts")
    parser.add_argument("--run-order", type=Path, help="results/run_order.csv (residual order)")
    parser.add_argument(
        "--clusters", nargs="*", metavar="RUN=CLUSTER", help="rows that shared a cluster"
    )
    args = parser.parse_args(argv)
    if not 0 < args.alpha < 1:
        raise SystemExit(f"ybscale analyze: --alpha must be in (0, 1), got {args.alpha}")
    try:
        design = load_design(args.design)
        responses = read_responses(args.responses, design, args.response)
        column = responses.attrs["response"]
        paths = _paths(args, parser)
        clusters = parse_clusters(args.clusters)
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
        )
    except (DesignError, ResponsesError) as exc:
        raise SystemExit(f"ybscale analyze: {_one_line(exc)}") from None
    except ValueError as exc:
        raise SystemExit(f"ybscale analyze: {args.responses}: {_one_line(exc)}") from None
    print(_summary(tables, paths))
    return 0


def _paths(args, parser) -> AnalysisPaths:
    """--out DIR, or every table's path (and every chart's unless --no-charts)."""
    if args.out is not None:
        return AnalysisPaths.under(args.out, not args.no_charts)
    missing = [f"--{n}" for n in OUTPUTS if getattr(args, n) is None]
    chart_args = ("pareto", "half_normal", "interactions", "residual_charts")
    if not args.no_charts:
        missing += [f"--{n.replace('_', '-')}" for n in chart_args if getattr(args, n) is None]
    if missing:
        parser.error(f"give --out DIR or every output path (missing: {', '.join(missing)})")
    charts = None
    if not args.no_charts:
        from ybscale.report.charts import AnalysisChartPaths

        charts = AnalysisChartPaths(*(getattr(args, n) for n in chart_args))
    return AnalysisPaths(*(getattr(args, n) for n in OUTPUTS), charts=charts)


if __name__ == "__main__":
    sys.exit(main())
