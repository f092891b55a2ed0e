"""`ybscale compare STUDY_A/ STUDY_B/`: do two studies of the same design agree?

Reads each results folder's ``effects.csv`` (and ``design/design.json``, which the pipeline and
``ybscale analyze --out`` write, to refuse two different designs). For every column: both
estimates with their intervals, whether each interval covers the other study's estimate, each
study's verdict (active at ME, beyond SME) and whether the two estimates agree.

How it decides. The two studies are independent, so the difference of a column's estimates
has standard error sqrt(se_a² + se_b²) (each study's ``std_error``: Lenth's PSE, or the t test's
standard error of an effect), with Welch–Satterthwaite degrees of freedom from each study's
(read from its interval: ``me`` = t(0.975, df)·se). Each column's two-sided p-value of "same
effect" is Holm-adjusted over the columns (statsmodels); a column **differs** when the adjusted
p < 0.05, and its signs **conflict** when both studies find it active (at ME) with opposite
signs. The studies AGREE when no column differs and no signs conflict: an effect beyond SME in
one and just under it (or under ME) in the other agrees when the estimates are compatible, an
unreplicated study (Lenth) and a replicated one (t tests) are compared on their estimates
alike, and two estimates far apart beyond their uncertainty disagree even when both are
active with the same sign. A study measured beside a neighbour (rows that kept a disturbed run)
carries how far it may have moved each estimate (effects.csv ``disturbance_down``/``_up``,
ybscale.analysis.disturbance): the difference is tested from the nearest value it could have
had on quiet machines, and signs conflict only between columns that stay active there
(``established``). Each study's verdicts against analysis.relevant (ybscale.analysis.verdicts)
are set side by side: a column that matters in one and is negligible in the other, or matters
in both with opposite signs, **contradicts**, and the studies then DISAGREE; a column undecided
in one of them contradicts nothing.

Several responses (effects.csv's ``response`` column, analysis.responses): each response both
studies analysed is compared on its own (its table, its verdict); they AGREE when every one does.

Two scales. When the studies' effects are on different scales (each chose its own,
analysis.model: auto), both responses tables (``ceilings.csv``, or the ``responses.csv`` that
``ybscale analyze --out`` keeps) are analysed again on one scale and compared there, and the
summary says so. The one scale is the one the scale rule (ybscale.analysis.scale) chooses on
both studies' responses together, taken as two replicates of the design: the data of both
decide, and neither study's choice is preferred.

Exit status: 0 AGREE, 1 DISAGREE, 2 when the folders cannot be compared: a missing or
malformed effects.csv, two scales without both responses tables and design records to analyse
again, different columns, or different designs (design.json's factors, levels, signed defining
relation or rows; or the signed alias strings of effects.csv).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ybscale.analysis import verdicts
from ybscale.analysis.terms import of_response, response_names
from ybscale.files import TableError, read_table

ALPHA = 0.05
NOT_TERMS = ("error", "block")
RESPONSES_FILES = ("ceilings.csv", "responses.csv")
COLUMNS = [
    "term",
    "effect_a",
    "ci_low_a",
    "ci_high_a",
    "effect_b",
    "ci_low_b",
    "ci_high_b",
    "a_covers_b",
    "b_covers_a",
    "active_a",
    "active_b",
    "established_a",
    "established_b",
    "sme_a",
    "sme_b",
    "difference",
    "p_adjusted",
    "differ",
    "verdict_a",
    "verdict_b",
    "contradict",
    "agree",
]


class CompareError(ValueError):
    """Two folders that cannot be compared; the message names the file."""


def _flag(values: pd.Series) -> pd.Series:
    return values.astype(str).str.lower().isin(["true", "1"])


def read_effects(folder: Path | str, response: str | None = None) -> pd.DataFrame:
    """A study's effects (terms only) of one response (the main one when `response` is None;
    analysis.responses), indexed by term."""
    path = Path(folder) / "effects.csv"
    if not path.is_file():
        raise CompareError(f"{path}: no such file (is {folder} a results folder?)")
    try:
        table = read_table(path)
        table = of_response(table, response)
    except TableError as exc:
        raise CompareError(str(exc)) from None
    except ValueError as exc:
        raise CompareError(f"{path}: {exc}") from None
    return effects_frame(table, path)


def responses_of(folder: Path | str) -> list[str]:
    """The responses a study's effects.csv holds ([] for a table without a response column)."""
    path = Path(folder) / "effects.csv"
    try:
        return response_names(read_table(path)) if path.is_file() else []
    except TableError as exc:
        raise CompareError(str(exc)) from None


def compare_responses(a: Path, b: Path) -> dict[str | None, pd.DataFrame]:
    """The agreement table of each response both studies analysed (the one table when either
    has no response column); CompareError when they share none."""
    names_a, names_b = responses_of(a), responses_of(b)
    if not names_a or not names_b:
        return {None: compare_pair(a, b, None)}
    shared = [n for n in names_a if n in names_b]
    if not shared:
        raise CompareError(
            f"no response in common: {a} has {', '.join(names_a)}, {b} {', '.join(names_b)}"
        )
    return {n: compare_pair(a, b, n) for n in shared}


def compare_pair(a: Path, b: Path, response: str | None) -> pd.DataFrame:
    """One response's agreement table; on one scale (`on_one_scale`) when the two studies
    analysed it on different scales."""
    ea, eb = read_effects(a, response), read_effects(b, response)
    if _model(ea) == _model(eb):
        return compare(ea, eb)
    ea, eb, note = on_one_scale(a, b, response, (_model(ea), _model(eb)))
    table = compare(ea, eb)
    table.attrs["rescaled"] = note
    return table


def _model(table: pd.DataFrame) -> str:
    return str(table["model"].iloc[0])


def responses_file(folder: Path) -> Path | None:
    """The responses table a results folder holds: the pipeline's ceilings.csv, or the
    responses.csv `ybscale analyze --out` keeps."""
    for name in RESPONSES_FILES:
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


def on_one_scale(
    a: Path, b: Path, response: str | None, models: tuple[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Both studies' effects of `response` analysed again on one scale (module doc), and the
    sentence that says so."""
    import tempfile

    from ybscale.analysis.analyze import analyze
    from ybscale.analysis.responses import ResponsesError, read_responses
    from ybscale.design.factorial import DesignError, load_design
    from ybscale.design.record import clusters_of

    words = {"additive": "additive", "multiplicative": "log"}
    said = f"{a} is on the {models[0]} scale, {b} on the {models[1]}"
    folders = (Path(a), Path(b))
    records = [study_record(f) for f in folders]
    files = [responses_file(f) for f in folders]
    lacking = [str(r) for r in records if not r.is_file()]
    either = " or ".join(RESPONSES_FILES)
    lacking += [f"{f}/{either}" for f, p in zip(folders, files, strict=True) if p is None]
    if lacking:
        raise CompareError(
            f"{said}: to compare them on one scale both are analysed again, which needs "
            f"{', '.join(lacking)} (no such file); or analyse both on one scale yourself "
            "(ybscale analyze --model ...)"
        )
    try:
        designs = [load_design(r) for r in records]
        tables = [read_responses(p, d, response) for p, d in zip(files, designs, strict=True)]
    except (DesignError, ResponsesError, ValueError) as exc:
        raise CompareError(f"{said}; analysing them again: {exc}") from None
    column = tables[0].attrs["response"]
    model, reason = common_scale(designs, [t[column] for t in tables])
    out = []
    for folder, record, table, design in zip(folders, records, tables, designs, strict=True):
        run_order = folder / "run_order.csv"
        with tempfile.TemporaryDirectory(prefix="ybscale-compare-") as tmp:
            analyze(
                design,
                table,
                column,
                Path(tmp),
                model=model,
                run_order=run_order if run_order.is_file() else None,
                clusters=clusters_of(record),
            )
            effects = read_effects(Path(tmp), response)
        effects.attrs["path"] = f"{folder} (on the {words[model]} scale)"
        out.append(effects)
    note = (
        f"{a} chose the {words[models[0]]} scale, {b} the {words[models[1]]}: both analysed again "
        f"on the {words[model]} scale, the one both studies' {column} choose together as two "
        f"replicates of the design ({reason})"
    )
    return out[0], out[1], note


def study_record(folder: Path) -> Path:
    """The design record a study's analysis read: its final round's (results/rounds/round<n>/
    design.json, the first round that decided no more, ybscale.analysis.rounds) when it ran
    rounds, else design/design.json."""
    folder = Path(folder)
    decided = sorted((folder / "rounds").glob("round*.json"), key=lambda p: int(p.stem[5:]))
    for path in decided:
        record = path.with_suffix("") / "design.json"
        if not json.loads(path.read_text()).get("more") and record.is_file():
            return record
    return folder / "design" / "design.json"


def common_scale(designs, ys) -> tuple[str, str]:
    """(model, reason): the scale rule on both studies' responses, study B's runs as the
    replicates after study A's (every term fitted, the residual pure error); each study with
    its own replicates (studies that ran other rounds: ybscale.analysis.rounds)."""
    from dataclasses import replace

    from ybscale.analysis.scale import choose

    reps = sum(d.replications for d in designs)
    both = replace(designs[0], replications=reps, blocks=1, block_generators=(), center_points=0)
    values = np.concatenate(
        [y.loc[d.run_ids].to_numpy(float) for d, y in zip(designs, ys, strict=True)]
    )
    choice = choose(both, pd.Series(values, index=both.run_ids), checks=False)
    return choice.model, choice.reason


def effects_frame(table: pd.DataFrame, path: Path | str = "effects") -> pd.DataFrame:
    """An effects table (as effects.csv holds it) as compare reads it: terms only, indexed by
    term, the flags as booleans; `path` names it in messages."""
    missing = {"term", "effect", "ci_low", "ci_high", "active", "model"} - set(table.columns)
    if missing:
        raise CompareError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    table = table[~table["term"].astype(str).isin(NOT_TERMS)].copy()
    table["active"] = _flag(table["active"])
    table["active_sme"] = _flag(table.get("active_sme", pd.Series(False, index=table.index)))
    table.attrs["path"] = path
    return table.set_index("term")


def _design_key(path: Path) -> dict:
    """What makes two designs the same: factors and levels, signed defining relation, rows."""
    record = json.loads(path.read_text())
    factors = [
        {k: f.get(k) for k in ("letter", "name", "levels", "generated")}
        for f in record.get("factors", [])
    ]
    keys = ("defining_relation", "n_rows")
    return {"factors": factors, **{k: record.get(k) for k in keys}}


def _same_design(a: Path, b: Path) -> None:
    """Refuse two different designs when both folders have design/design.json."""
    paths = [Path(f) / "design" / "design.json" for f in (a, b)]
    if not all(p.is_file() for p in paths):
        return
    da, db = (_design_key(p) for p in paths)
    for key in da:
        if da[key] != db[key]:
            raise CompareError(f"{paths[0]} and {paths[1]}: not the same design ({key} differs)")


def _same_aliases(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Refuse columns whose signed alias strings differ (two different fractions)."""
    if "alias" not in a.columns or "alias" not in b.columns:
        return
    pairs = zip(a.index, a["alias"].astype(str), b["alias"].astype(str), strict=True)
    for term, in_a, in_b in pairs:
        if "nan" not in (in_a, in_b) and in_a != in_b:
            raise CompareError(
                f"not the same design: column {term} is {in_a} in "
                f"{a.attrs.get('path', 'A')} and {in_b} in {b.attrs.get('path', 'B')}"
            )


def uncertainty(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(standard error, df) of each column's estimate: ``std_error`` and the df its interval
    used (``me`` = t(1 − α/2, df)·se at α = 0.05; ∞ when it is a normal one). Tables without
    ``std_error``: se = ME / z(0.975), normal."""
    from scipy import optimize
    from scipy.special import ndtri, stdtrit  # the normal and t quantiles, fast

    me = table["ci_high"].to_numpy(float) - table["effect"].to_numpy(float)
    z = float(ndtri(1 - ALPHA / 2))
    if "std_error" not in table.columns:
        return me / z, np.full(len(me), np.inf)
    se = table["std_error"].to_numpy(float)
    ratio = np.divide(me, se, out=np.full(len(me), np.nan), where=se > 0)
    df = np.full(len(me), np.inf)
    found: dict[float, float] = {}  # one root per distinct ratio (a Lenth table has one)
    for i, q in enumerate(np.round(ratio, 12)):
        if np.isfinite(q) and q > z * (1 + 1e-9):
            if q not in found:
                found[q] = optimize.brentq(lambda d, q=q: stdtrit(d, 1 - ALPHA / 2) - q, 0.05, 1e7)
            df[i] = found[q]
    return se, df


def moved(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(down, up): how far a neighbour may have moved each estimate (effects.csv
    ``disturbance_down``/``_up``); zeros for a table without them."""
    if "disturbance_down" not in table.columns:
        return np.zeros(len(table)), np.zeros(len(table))
    columns = ("disturbance_down", "disturbance_up")
    return tuple(table[c].fillna(0.0).to_numpy(float) for c in columns)


def differences(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(difference a − b, Holm-adjusted p-value of no difference) per column (module doc)."""
    from scipy.special import stdtr  # the t distribution function, fast

    from ybscale.analysis.multiplicity import adjust

    (se_a, df_a), (se_b, df_b) = uncertainty(a), uncertainty(b)
    diff = a["effect"].to_numpy(float) - b["effect"].to_numpy(float)
    (down_a, up_a), (down_b, up_b) = moved(a), moved(b)
    # a neighbour may have moved either estimate (ybscale.analysis.disturbance): the distance
    # from 0 to the range the difference could have had on quiet machines
    gap = np.maximum(0.0, np.maximum(diff - down_a - up_b, -(diff + up_a + down_b)))
    var = se_a**2 + se_b**2
    with np.errstate(divide="ignore", invalid="ignore"):
        df = var**2 / (se_a**4 / df_a + se_b**4 / df_b)  # Welch–Satterthwaite
        t = gap / np.sqrt(var)
    df = np.where(np.isfinite(df), df, 1e7)
    p = np.where(var > 0, 2 * stdtr(df, -t), np.where(gap == 0, 1.0, 0.0))
    return diff, adjust(p, "holm")  # statsmodels' Holm


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The agreement table of two effects tables (read_effects) of the same design."""
    if set(a.index) != set(b.index):
        only = sorted(set(a.index) ^ set(b.index))
        raise CompareError(f"not the same design: column(s) {', '.join(only)} in one study only")
    models = (_model(a), _model(b))
    if models[0] != models[1]:
        raise CompareError(
            f"{a.attrs.get('path', 'A')} is on the {models[0]} scale, "
            f"{b.attrs.get('path', 'B')} on the {models[1]}: the effects are not comparable; "
            "analyse both on one scale (ybscale analyze --model ...)"
        )
    b = b.loc[a.index]
    _same_aliases(a, b)
    out = pd.DataFrame(
        {
            "term": a.index,
            "effect_a": a["effect"].to_numpy(),
            "ci_low_a": a["ci_low"].to_numpy(),
            "ci_high_a": a["ci_high"].to_numpy(),
            "effect_b": b["effect"].to_numpy(),
            "ci_low_b": b["ci_low"].to_numpy(),
            "ci_high_b": b["ci_high"].to_numpy(),
        }
    )
    out["a_covers_b"] = out["ci_low_a"].le(out["effect_b"]) & out["effect_b"].le(out["ci_high_a"])
    out["b_covers_a"] = out["ci_low_b"].le(out["effect_a"]) & out["effect_a"].le(out["ci_high_b"])
    out["active_a"] = a["active"].to_numpy()
    out["active_b"] = b["active"].to_numpy()
    out["sme_a"] = a["active_sme"].to_numpy()
    out["sme_b"] = b["active_sme"].to_numpy()
    out["difference"], out["p_adjusted"] = differences(a, b)
    out["differ"] = out["p_adjusted"] < ALPHA
    for name, t in (("a", a), ("b", b)):
        firm = t["established"] if "established" in t.columns else t["active"]
        out[f"established_{name}"] = _flag(firm).to_numpy()
    opposite = (out["effect_a"] > 0) != (out["effect_b"] > 0)
    conflict = out["established_a"] & out["established_b"] & opposite
    for name, t in (("a", a), ("b", b)):  # ybscale.analysis.verdicts (tables before it: "")
        column = t["verdict"] if "verdict" in t.columns else pd.Series("", index=t.index)
        out[f"verdict_{name}"] = column.fillna("").astype(str).to_numpy()
    out["contradict"] = [
        verdicts.contradict(
            pd.Series({"verdict": va, "effect": ea}), pd.Series({"verdict": vb, "effect": eb})
        )
        for va, vb, ea, eb in zip(
            out["verdict_a"], out["verdict_b"], out["effect_a"], out["effect_b"], strict=True
        )
    ]
    conflict = conflict | out["contradict"]
    out.attrs["disturbed"] = [
        n for n, t in (("A", a), ("B", b)) if moved(t)[0].any() or moved(t)[1].any()
    ]
    out["agree"] = ~(out["differ"] | conflict)
    out.attrs["model"] = models[0]
    return out[COLUMNS]


def _signed(table: pd.DataFrame, flag: str, effect: str) -> str:
    """``"B−, A−, F+"``: the flagged columns with their signs."""
    rows = table[table[flag]]
    pairs = zip(rows["term"], rows[effect], strict=True)
    return ", ".join(f"{t}{'+' if e > 0 else '−'}" for t, e in pairs) or "none"


def agrees(table: pd.DataFrame) -> bool:
    """No column whose estimates differ beyond their uncertainty, no conflicting signs."""
    return bool(table["agree"].all())


def _established(table: pd.DataFrame) -> str:
    """The summary's clause on a study measured beside a neighbour: the columns that stay
    active however far it moved them ('' when neither study was)."""
    if not table.attrs.get("disturbed"):
        return ""
    firm = (
        _signed(table, "established_a", "effect_a"),
        _signed(table, "established_b", "effect_b"),
    )
    return (
        f"; {' and '.join(table.attrs['disturbed'])} kept disturbed runs: established beyond what "
        f"the neighbour may have moved A {{{firm[0]}}}, B {{{firm[1]}}}"
    )


def _verdicts(table: pd.DataFrame) -> str:
    """The summary's clause on the verdicts (ybscale.analysis.verdicts): what matters in each,
    and the columns that contradict (matters in one, negligible in the other, or matters with
    opposite signs); '' for tables without verdicts."""
    if not (table["verdict_a"].astype(bool).any() and table["verdict_b"].astype(bool).any()):
        return ""
    matters = [
        _signed(table.assign(m=table[f"verdict_{n}"] == verdicts.MATTERS), "m", f"effect_{n}")
        for n in ("a", "b")
    ]
    bad = table.loc[table["contradict"], "term"].tolist()
    return f"; verdicts: matters A {{{matters[0]}}}, B {{{matters[1]}}}, " + (
        f"contradicting in {', '.join(bad)}" if bad else "no contradiction"
    )


def summary(table: pd.DataFrame) -> str:
    """One line: the verdict, the active sets with signs, how many intervals cover."""
    covered = int((table["a_covers_b"] & table["b_covers_a"]).sum())
    n = len(table)
    verdict = "AGREE" if agrees(table) else "DISAGREE"
    same_active = bool((table["active_a"] == table["active_b"]).all())
    sme = (_signed(table, "sme_a", "effect_a"), _signed(table, "sme_b", "effect_b"))
    active = (_signed(table, "active_a", "effect_a"), _signed(table, "active_b", "effect_b"))
    return (
        f"{verdict}: beyond SME A {{{sme[0]}}}, B {{{sme[1]}}}; "
        f"active at ME A {{{active[0]}}}, B {{{active[1]}}}"
        f" ({'same set' if same_active else 'different sets'}); {int(table['agree'].sum())} of "
        f"{n} columns agree; each interval covers the other's estimate in {covered} of {n}; "
        f"{int(table['differ'].sum())} differ beyond their uncertainty (Holm, α = {ALPHA:g}) "
        f"({table.attrs.get('model', '?')} scale)"
        + _verdicts(table)
        + _established(table)
        + (f"; {table.attrs['rescaled']}" if table.attrs.get("rescaled") else "")
    )


def main(argv: list[str] | None = None) -> int:
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(prog="ybscale compare", description=cli_description(__doc__))
    parser.add_argument("study_a", type=Path, help="results folder of study A")
    parser.add_argument("study_b", type=Path, help="results folder of study B")
    parser.add_argument("--out", type=Path, help="also write the table as CSV")
    args = parser.parse_args(argv)
    try:
        _same_design(args.study_a, args.study_b)
        tables = compare_responses(args.study_a, args.study_b)
    except CompareError as exc:
        print(f"ybscale compare: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        parts = [t if n is None else t.assign(response=n) for n, t in tables.items()]
        pd.concat(parts, ignore_index=True).to_csv(args.out, index=False)
    for name, table in tables.items():
        if name is not None:
            print(f"response {name}:")
        with pd.option_context("display.width", 200, "display.max_columns", None):
            print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print(summary(table))
    return 0 if all(agrees(t) for t in tables.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
