"""The findings' opening: each column's verdict against the smallest effect that matters.

Per response (ybscale.analysis.verdicts): what **matters** (its simultaneous interval, widened by
any interference, lies beyond ± analysis.relevant), what is **negligible** (inside), and what is
**undecided** (neither), with the runs that would decide each one; whether the interval excludes
0 is said beside every estimate. Words only: the verdicts come from effects.csv.
"""

from __future__ import annotations

import math

import pandas as pd

from ybscale.analysis.terms import ERROR_TERM, of_response, response_names, response_words
from ybscale.analysis.verdicts import MATTERS, NEGLIGIBLE, UNDECIDED, UNTESTED, relevant_words

BLOCK = "block"
MANY_RUNS = 1000  # beyond this no budget here would reach it: said so, not as a number


def _lines(effects: pd.DataFrame, name: str | None) -> pd.DataFrame:
    table = of_response(effects, name) if name else effects
    return table[~table["term"].astype(str).isin([ERROR_TERM, BLOCK])]


def _number(x: float) -> str:
    a = abs(x)
    if a >= 10_000:
        return f"{x / 1000:,.1f}k"
    if a >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def estimate(row: pd.Series, unit: str = "") -> str:
    """``×0.93 [0.80, 1.08]`` (log scale) or ``−1,234 tps [−2,000, −468]``: the estimate with
    its verdict interval (simultaneous, widened by any interference)."""
    effect, low, high = (float(row[c]) for c in ("effect", "verdict_low", "verdict_high"))
    if str(row["model"]) == "multiplicative":
        return f"×{10**effect:.3g} [{10**low:.3g}, {10**high:.3g}]"
    unit = f" {unit}" if unit else ""
    return f"{_number(effect)}{unit} [{_number(low)}, {_number(high)}]"


def relevant_text(lines: pd.DataFrame) -> str:
    """``10 %`` (or the amount) the table was judged against."""
    given = lines["relevant_given"].iloc[0] if "relevant_given" in lines.columns else None
    if given is None or (isinstance(given, float) and math.isnan(given)):
        return "the relevant size"
    try:
        return relevant_words(float(given))
    except (TypeError, ValueError):
        return relevant_words(str(given))


def _zero(row: pd.Series) -> str:
    return "excludes 0" if bool(row["excludes_zero"]) else "holds 0"


def _decide(row: pd.Series) -> str:
    runs = row.get("runs_to_decide")
    if runs is None or pd.isna(runs):
        return "its estimate sits at the relevant size: no number of runs decides it"
    if int(runs) > MANY_RUNS:
        return (
            f"more than {MANY_RUNS:,} runs would decide it: its estimate is near the relevant "
            "size, so in practice it stays undecided"
        )
    return f"about {int(runs)} runs in all would decide it"


def response_blocks(effects: pd.DataFrame, name: str | None, label) -> list:
    """One response's verdicts: what matters, what is negligible, what is undecided."""
    lines = _lines(effects, name)
    if "verdict" not in lines.columns or lines.empty:
        return []
    what, unit = response_words(name)[:2] if name else ("the response", "")
    size = relevant_text(lines)
    by = {v: lines[lines["verdict"] == v] for v in (MATTERS, NEGLIGIBLE, UNDECIDED, UNTESTED)}
    out = []
    head = f"**{what[0].upper()}{what[1:]}**, against ±{size} (analysis.relevant): "
    counts = [f"{len(by[v])} {v}" for v in (MATTERS, NEGLIGIBLE, UNDECIDED) if len(by[v])]
    if len(by[UNTESTED]):
        counts.append(f"{len(by[UNTESTED])} untested (too few columns in their stratum)")
    out.append(head + ", ".join(counts) + f" of {len(lines)} columns.")
    if len(by[MATTERS]):
        rows = [
            (label(str(r["term"])), estimate(r, unit), _zero(r), str(r["alias"]))
            for _, r in by[MATTERS].iterrows()
        ]
        header = ("matters", f"{what} [interval]", "0", "aliases")
        out.append(("table", [header, *rows]))
    if len(by[NEGLIGIBLE]):
        names = ", ".join(f"{label(str(t))}" for t in by[NEGLIGIBLE]["term"])
        out.append(f"Negligible (smaller than {size} on {what}): {names}.")
    if len(by[UNDECIDED]):
        items = [
            f"{label(str(r['term']))}: {estimate(r, unit)}, {_zero(r)}; {_decide(r)}"
            for _, r in by[UNDECIDED].iterrows()
        ]
        out += [f"Undecided on {what} (the interval reaches past {size} on one side only):",
                ("ul", items)]  # fmt: skip
    return out


def verdict_blocks(effects: pd.DataFrame, label, ended: str = "") -> list:
    """The findings' first section: every response's verdicts; `label(term)` names a column
    (``node_size (F)``); `ended` says what ended the study (every column decided, the budget)."""
    names = response_names(effects) or [None]
    blocks = []
    for name in names:
        blocks += response_blocks(effects, name, label)
    if not blocks:
        return []
    lead = (
        "**Verdicts.** Each column matters (its interval lies beyond the smallest effect that "
        "matters), is negligible (inside it: an equivalence test) or is undecided (neither). "
        "The intervals are simultaneous over the columns (Lenth's SME; Bonferroni's t) and "
        "widened by any interference, so two studies of the system contradict each other "
        "(one says matters, the other negligible) only when one of them missed."
    )
    return [lead + (f" {ended}" if ended else ""), *blocks]


def negligible(row: pd.Series) -> bool:
    """Whether the column's verdict on its response is negligible (False without verdicts)."""
    return str(row.get("verdict", "") or "") == NEGLIGIBLE


def verdict_cell(row: pd.Series, unit: str = "") -> str:
    """A summary-table cell for a column that is not active on a response: its verdict there
    (``negligible``, ``undecided: ×0.95 [0.70, 1.29]``), never a bare dash."""
    verdict = str(row.get("verdict", "") or "")
    if verdict in (NEGLIGIBLE, MATTERS):
        return f"{verdict}: {estimate(row, unit)}"
    if verdict == UNDECIDED:
        return f"undecided: {estimate(row, unit)}"
    return "within the noise (no verdict recorded)"


def ended_text(files) -> str:
    """What ended the study, from the final round the study's checkpoint decided
    (``results/rounds/round<N>.json``, ybscale.analysis.rounds); "" without rounds."""
    import json

    path = getattr(files, "rounds", None)
    if path is None or not path.is_file():
        return ""
    return str(json.loads(path.read_text(encoding="utf-8")).get("ended", ""))
