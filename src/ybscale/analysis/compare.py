"""`ybscale compare STUDY_A/ STUDY_B/`: do two studies of the same design agree?

Reads each results folder's ``effects.csv`` (and ``design/design.json`` when both have one, to
refuse two different designs). For every column: both estimates with their intervals, whether
each interval covers the other study's estimate, each study's verdict (active at ME, beyond
SME) and whether they agree (same verdict and, when both find it active, the same sign). One
summary line says whether the studies agree on every effect beyond the simultaneous margin, with
the same signs, and on the active set.

Exit status: 0 when they agree beyond the simultaneous margin (or, with replicates, on the
active set), 1 when they do not, 2 when the folders cannot be compared.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from ybscale.files import TableError, read_table

NOT_TERMS = ("error", "block")
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
    "sme_a",
    "sme_b",
    "agree",
]


class CompareError(ValueError):
    """Two folders that cannot be compared; the message names the file."""


def _flag(values: pd.Series) -> pd.Series:
    return values.astype(str).str.lower().isin(["true", "1"])


def read_effects(folder: Path | str) -> pd.DataFrame:
    """A study's effects (terms only), indexed by term."""
    path = Path(folder) / "effects.csv"
    if not path.is_file():
        raise CompareError(f"{path}: no such file (is {folder} a results folder?)")
    try:
        table = read_table(path)
    except TableError as exc:
        raise CompareError(str(exc)) from None
    missing = {"term", "effect", "ci_low", "ci_high", "active", "model"} - set(table.columns)
    if missing:
        raise CompareError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    table = table[~table["term"].astype(str).isin(NOT_TERMS)].copy()
    table["active"] = _flag(table["active"])
    table["active_sme"] = _flag(table.get("active_sme", pd.Series(False, index=table.index)))
    table.attrs["path"] = path
    return table.set_index("term")


def _same_design(a: Path, b: Path) -> None:
    """Refuse two different designs when both folders have design/design.json."""
    paths = [Path(f) / "design" / "design.json" for f in (a, b)]
    if not all(p.is_file() for p in paths):
        return
    keys = ("factors", "defining_relation", "n_rows")
    da, db = ({k: json.loads(p.read_text())[k] for k in keys} for p in paths)
    for key in keys:
        if da[key] != db[key]:
            raise CompareError(f"{paths[0]} and {paths[1]}: not the same design ({key} differs)")


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The agreement table of two effects tables (read_effects) of the same design."""
    if set(a.index) != set(b.index):
        only = sorted(set(a.index) ^ set(b.index))
        raise CompareError(f"not the same design: column(s) {', '.join(only)} in one study only")
    models = (str(a["model"].iloc[0]), str(b["model"].iloc[0]))
    if models[0] != models[1]:
        raise CompareError(
            f"{a.attrs.get('path', 'A')} is on the {models[0]} scale, "
            f"{b.attrs.get('path', 'B')} on the {models[1]}: the effects are not comparable; "
            "analyse both on one scale (ybscale analyze --model ...)"
        )
    b = b.loc[a.index]
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
    same_sign = (out["effect_a"] > 0) == (out["effect_b"] > 0)
    out["agree"] = (out["active_a"] == out["active_b"]) & (~out["active_a"] | same_sign)
    out.attrs["model"] = models[0]
    return out[COLUMNS]


def _signed(table: pd.DataFrame, flag: str, effect: str) -> str:
    """``"B−, A−, F+"``: the flagged columns with their signs."""
    rows = table[table[flag]]
    pairs = zip(rows["term"], rows[effect], strict=True)
    return ", ".join(f"{t}{'+' if e > 0 else '−'}" for t, e in pairs) or "none"


def agrees(table: pd.DataFrame) -> bool:
    """Same columns beyond SME with the same signs (with no SME, e.g. replicated: the active
    set at ME with the same signs)."""
    has_sme = bool(table["sme_a"].any() or table["sme_b"].any())
    a, b = ("sme_a", "sme_b") if has_sme else ("active_a", "active_b")
    same_sign = (table["effect_a"] > 0) == (table["effect_b"] > 0)
    return bool(((table[a] == table[b]) & (~table[a] | same_sign)).all())


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
        f"{n} columns agree; each interval covers the other's estimate in {covered} of {n} "
        f"({table.attrs.get('model', '?')} scale)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ybscale compare", description=__doc__.splitlines()[0])
    parser.add_argument("study_a", type=Path, help="results folder of study A")
    parser.add_argument("study_b", type=Path, help="results folder of study B")
    parser.add_argument("--out", type=Path, help="also write the table as CSV")
    args = parser.parse_args(argv)
    try:
        _same_design(args.study_a, args.study_b)
        table = compare(read_effects(args.study_a), read_effects(args.study_b))
    except CompareError as exc:
        print(f"ybscale compare: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(summary(table))
    return 0 if agrees(table) else 1


if __name__ == "__main__":
    sys.exit(main())
