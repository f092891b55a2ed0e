"""Three verdicts per column against the smallest effect that matters (``analysis.relevant``).

A column's verdict interval is its estimate ± the simultaneous margin of its family, widened by
what a neighbour may have moved it (``disturbance_down`` / ``_up``, ybscale.analysis.disturbance):

* unreplicated (Lenth): effect ± SME, Lenth's simultaneous margin with Ye & Hamada's
  experiment-wise critical value for the m columns (`effects.lenth`);
* replicated (t tests): effect ± t(1 − α/(2m), ν)·se, Bonferroni's simultaneous intervals over
  the m columns tested (each interval at 1 − α/m, so all m hold together with probability at
  least 1 − α), ν the column's error df.

With R the relevant size on the analysed scale (``relevant``), the verdict is

* **matters**: the interval lies beyond ±R (its low end above R, or its high end below −R);
* **negligible**: the interval lies inside (−R, R): an equivalence test by interval inclusion
  (Schuirmann's two one-sided tests, TOST, at α/2 each side: Schuirmann 1987; Wellek,
  *Testing Statistical Hypotheses of Equivalence*, 2nd ed., §3.1); simultaneous, so a family of m
  "negligible" claims holds together;
* **undecided**: neither (the interval reaches past R on one side and not on the other).

Two studies' simultaneous intervals each hold the truth with probability ≥ 1 − α: a column that
matters in one and is negligible in the other (or matters with opposite signs) needs one of them
to miss, so contradictions are rarer than α. ``excludes_zero`` says beside it whether the
interval excludes 0 (the classic significance call).

R: ``analysis.relevant`` is a share (``"10%"``) or an amount in the response's unit (a number).
A share is a ratio on the log scale, R = log10(1 + share) (the effect multiplies or divides the
response by at most 1 + share); on the additive scale it is share × the mean response. An amount
is R itself on the additive scale, and log10(1 + amount / mean) on the log scale.

Runs to decide an undecided column: the interval's half-width shrinks as 1 / sqrt(runs), so it
takes runs × (h / g)² runs in all, h its half-width now and g what it may be for the verdict to
fall (|effect| − R to matter, R − |effect| to be negligible), in whole replicates of the design;
None when the estimate sits at R (g ≈ 0: no finite number of runs decides it).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import stdtrit

from ybscale.relevant import RelevantError, parse_relevant, relevant_words  # noqa: F401

MATTERS, NEGLIGIBLE, UNDECIDED, UNTESTED = "matters", "negligible", "undecided", "untested"
VERDICTS = (MATTERS, NEGLIGIBLE, UNDECIDED, UNTESTED)
DEFAULT_RELEVANT = "20%"
COLUMNS = ("verdict", "verdict_low", "verdict_high", "relevant", "relevant_given", "excludes_zero",
           "runs_to_decide")  # fmt: skip


def relevant_on_scale(value, model: str, mean: float) -> float:
    """R on the analysed scale (module docstring); `mean` the response's mean, as measured."""
    kind, size = parse_relevant(value)
    if model == "multiplicative":
        return math.log10(1.0 + (size if kind == "share" else size / mean))
    return size * mean if kind == "share" else size


def _flag(values) -> pd.Series:
    return pd.Series(values).astype(str).str.lower().isin(["true", "1"])


def simultaneous_half(table: pd.DataFrame, alpha: float) -> pd.Series:
    """Each column's simultaneous half-width (module docstring); NaN for an untested column."""
    tested = table["std_error"].notna() & np.isfinite(table["std_error"].astype(float))
    m = max(int(tested.sum()), 1)
    out = pd.Series(np.nan, index=table.index)
    for i, row in table.iterrows():
        if not tested[i]:
            continue
        if str(row["method"]) == "lenth":
            out[i] = float(row["sme"])
        else:
            df = float(row.get("df", math.nan))
            if not df > 0:
                continue
            out[i] = float(stdtrit(df, 1.0 - alpha / (2.0 * m))) * float(row["std_error"])
    return out


def runs_to_decide(effect: float, half: float, relevant: float, runs: int, rows: int):
    """Runs in all for the verdict to fall (module docstring), a whole number of replicates of
    the design's `rows`; None when the estimate sits at the relevant size."""
    gap = abs(abs(effect) - relevant)
    if not math.isfinite(half) or gap <= 1e-9 * max(relevant, 1e-300):
        return None
    need = runs * (half / gap) ** 2
    return int(max(math.ceil(need / rows), 1) * rows)


def judge(
    effects: pd.DataFrame,
    y: pd.Series,
    relevant=DEFAULT_RELEVANT,
    alpha: float = 0.05,
    rows: int | None = None,
) -> pd.DataFrame:
    """One response's effects table with COLUMNS (the error and block lines carry none);
    `y` the response as measured (its mean scales a share on the additive scale), `rows` the
    design's rows per replicate (runs to decide come in whole replicates)."""
    out = effects.copy()
    terms = out["term"].astype(str)
    judged = ~terms.isin(["error", "block"])
    model = str(out["model"].iloc[0]) if len(out) else "additive"
    size = relevant_on_scale(relevant, model, float(y.astype(float).mean()))
    half = simultaneous_half(out[judged], alpha).reindex(out.index)
    down = out.get("disturbance_down", pd.Series(0.0, index=out.index)).fillna(0.0)
    up = out.get("disturbance_up", pd.Series(0.0, index=out.index)).fillna(0.0)
    effect = out["effect"].astype(float)
    low = effect - half - down.astype(float)
    high = effect + half + up.astype(float)
    verdict = pd.Series(UNDECIDED, index=out.index)
    verdict[(low > size) | (high < -size)] = MATTERS
    verdict[(low > -size) & (high < size)] = NEGLIGIBLE
    verdict[half.isna()] = UNTESTED
    out["verdict"] = verdict.where(judged, "")
    out["verdict_low"] = low.where(judged)
    out["verdict_high"] = high.where(judged)
    out["relevant"] = size
    out["relevant_given"] = str(relevant)
    out["excludes_zero"] = ((low > 0) | (high < 0)) & judged
    runs = len(y)
    per = rows or runs
    out["runs_to_decide"] = [
        runs_to_decide(e, (hi - lo) / 2.0, size, runs, per) if v == UNDECIDED else None
        for e, lo, hi, v in zip(effect, low, high, out["verdict"], strict=True)
    ]
    out["runs_to_decide"] = out["runs_to_decide"].astype("Int64")
    out.attrs = dict(effects.attrs) | {"relevant": relevant, "relevant_size": size}
    return out


def undecided(effects: pd.DataFrame) -> list[str]:
    """The columns of one response's table still open: undecided, or untested (too few
    columns for Lenth, e.g. an unreplicated 2^2: a replicate gives them a pure error)."""
    if "verdict" not in effects.columns:
        return []
    open_ = effects["verdict"].isin([UNDECIDED, UNTESTED])
    return [str(t) for t in effects.loc[open_, "term"]]


def contradict(a: pd.Series, b: pd.Series) -> bool:
    """Whether two studies' lines for one column contradict each other: it matters in one and is
    negligible in the other, or matters in both with opposite signs."""
    va, vb = str(a["verdict"]), str(b["verdict"])
    if {va, vb} == {MATTERS, NEGLIGIBLE}:
        return True
    if va == vb == MATTERS:
        return (float(a["effect"]) > 0) != (float(b["effect"]) > 0)
    return False
