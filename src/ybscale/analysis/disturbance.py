"""How far a neighbour may have moved each effect: the intervals widened by the interference.

A row whose ceiling kept a disturbed run (ceilings.csv ``kept_disturbed`` > 0: other processes
took more than `measurement.outside_max` of the machine in every try) was measured on a machine
that a neighbour shared. Its neighbour took a share u of the machine at the ceiling
(``outside_utilisation``); if the study's throughput follows the CPU it gets, the quiet
machine's value lies between the measured y and y / (1 − u) (for latency, lower is better:
between y·(1 − u) and y). A row not kept disturbed moves by nothing.

An effect is a contrast Σ c_i y_i (c_i = ±2/n, `effects.contrasts`), on the analysed scale
(log10 for the multiplicative model). Each run's possible move δ_i lies in [lo_i, hi_i], so the
effect may move down by Σ_{c_i>0} c_i·(−lo_i) + Σ_{c_i<0} |c_i|·hi_i and up by the
mirror sum: ``disturbance_down`` and ``disturbance_up``. The interval widened by them is
``disturbance_low`` = ci_low − down, ``disturbance_high`` = ci_high + up; ``established``: the
column is active and its widened interval still excludes zero. Columns active but not
established may be the neighbour's artefacts. The model is a floor on what a neighbour costs,
not a ceiling: throughput can lose more than the CPU taken (a preempted lock holder; bench
/interference records where it did).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ybscale.analysis.effects import transform

COLUMNS = ("disturbance_down", "disturbance_up", "disturbance_low", "disturbance_high",
           "established")  # fmt: skip
LARGEST_SHARE = 0.95  # a neighbour's share is clipped here (the bound grows as 1 / (1 − u))
LOWER_IS_BETTER = ("latency",)  # responses a neighbour raises instead of lowering


def shares(responses: pd.DataFrame) -> pd.Series:
    """Per run: the share of the machine the neighbour took at the ceiling, for the rows that
    kept a disturbed run; 0 for the others (and for every row of a table without the
    columns)."""
    frame = responses.set_index("run") if "run" in responses.columns else responses
    if not {"kept_disturbed", "outside_utilisation"} <= set(frame.columns):
        return pd.Series(0.0, index=frame.index)
    kept = pd.to_numeric(frame["kept_disturbed"], errors="coerce").fillna(0) > 0
    share = pd.to_numeric(frame["outside_utilisation"], errors="coerce").fillna(0.0)
    return share.clip(0.0, LARGEST_SHARE).where(kept, 0.0).astype(float)


def moves(y: pd.Series, share: pd.Series, model: str, response: str) -> tuple:
    """(lo, hi): each run's possible move on the analysed scale had the neighbour not been
    there (module doc)."""
    share = share.reindex(y.index).fillna(0.0).to_numpy(float)
    values = y.to_numpy(float)
    lower = any(response.startswith(word) for word in LOWER_IS_BETTER)
    quiet = values * (1 - share) if lower else values / (1 - share)
    if model == "multiplicative":
        now, then = np.log10(values), np.log10(quiet)
    else:
        now, then = values, quiet
    return np.minimum(then - now, 0.0), np.maximum(then - now, 0.0)


def widen(effects: pd.DataFrame, design, y: pd.Series, share: pd.Series, response: str
          ) -> pd.DataFrame:  # fmt: skip
    """`effects` (one response's table, its chosen scale) with COLUMNS (module doc); the
    error and block lines move by nothing."""
    model = str(effects["model"].iloc[0]) if len(effects) else "additive"
    transform(y, model)  # the same refusals as the effects (non-positive on the log scale)
    runs = [r for r in design.run_ids if r in y.index]
    lo, hi = moves(y.loc[runs], share, model, response)
    x = design.model_matrix().loc[runs].astype(float)
    c = x.to_numpy().T / (len(runs) / 2.0)  # term x run: each effect's contrast weights
    down = pd.Series(np.where(c > 0, c * -lo, -c * hi).sum(axis=1), index=x.columns)
    up = pd.Series(np.where(c > 0, c * hi, -c * -lo).sum(axis=1), index=x.columns)
    out = effects.copy()
    term = out["term"].astype(str)
    out["disturbance_down"] = term.map(down).fillna(0.0).to_numpy()
    out["disturbance_up"] = term.map(up).fillna(0.0).to_numpy()
    out["disturbance_low"] = out["ci_low"] - out["disturbance_down"]
    out["disturbance_high"] = out["ci_high"] + out["disturbance_up"]
    active = out["active"].astype(str).str.lower().isin(["true", "1"])
    excludes = (out["disturbance_low"] > 0) | (out["disturbance_high"] < 0)
    out["established"] = active & excludes
    return out


def disturbed(effects: pd.DataFrame) -> bool:
    """Whether any effect of the table may have moved (a row kept a disturbed run)."""
    if "disturbance_down" not in effects.columns:
        return False
    moved = effects[["disturbance_down", "disturbance_up"]].to_numpy(float)
    return bool(np.nansum(moved) > 0 and math.isfinite(float(np.nansum(moved))))
