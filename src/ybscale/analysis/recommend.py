"""The best combination in the design per response, and on what it rests (the findings' *Best
buy*).

For each response (effects.csv's ``response`` blocks), the factors active on any response are
the ones a recommendation may set (a column negligible against ``analysis.relevant`` where it
is active does not count: told from zero in one study and not in the next, it would set a
factor in one recommendation and not the other); their level combinations that the design
measured are the candidates (nothing outside the design region: a fraction's unmeasured
combinations are not offered). Each candidate's value is predicted from that response's active
effects on its own scale — the mean plus each active column's coefficient times its sign there
(log10 for a multiplicative response, back-transformed to a ratio scale) — with a 95 % interval
from the coefficients' standard errors (orthogonal columns: the variances add; the mean counted
as one more coefficient, at the largest of their standard errors), and observed as the mean of
the rows measured at it. The best candidate maximises the response (minimises a latency). With
a latency response and a p95 target, the best throughput per dollar among the candidates whose
predicted latency is within it. Every figure is a prediction inside the design region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ybscale.analysis.terms import ERROR_TERM, of_response, response_names
from ybscale.analysis.verdicts import NEGLIGIBLE

LOWER_IS_BETTER = {"latency_at_load_ms"}


@dataclass(frozen=True)
class Best:
    """One response's best combination inside the design."""

    response: str
    levels: dict[str, str]  # factor name -> level (only the active factors)
    predicted: float
    low: float
    high: float
    observed: float  # the mean of the rows measured at it
    rows: list[str]  # those rows
    terms: list[str]  # the active columns of this response the prediction uses
    model: str


def _flags(values: pd.Series) -> pd.Series:
    return values.astype(str).str.lower().isin(["true", "1"])


def _terms(effects: pd.DataFrame, name: str) -> pd.DataFrame:
    """One response's columns; ``active``: told from zero and not negligible (its verdict)."""
    table = of_response(effects, name)
    table = table[~table["term"].astype(str).isin([ERROR_TERM, "block"])].copy()
    small = table["verdict"].astype(str) == NEGLIGIBLE if "verdict" in table else False
    table["active"] = _flags(table["active"]) & ~small
    return table


def active_factors(effects: pd.DataFrame) -> list[str]:
    """The letters of every column active on any response, in design order later."""
    names = response_names(effects) or [None]
    letters: set[str] = set()
    for name in names:
        table = _terms(effects, name)
        for term in table.loc[table["active"], "term"].astype(str):
            letters |= set(term)
    return sorted(letters)


def _critical(table: pd.DataFrame) -> float:
    """The 95 % multiplier the effects' intervals used (margin of error / standard error)."""
    ratio = (table["me"].astype(float) / table["std_error"].astype(float)).replace(
        [np.inf, -np.inf], np.nan
    )
    ratio = ratio.dropna()
    return float(ratio.median()) if len(ratio) else math.nan


def predictions(design, ceilings: pd.DataFrame, effects: pd.DataFrame, name) -> pd.DataFrame:
    """One response at every candidate (the active factors' level combinations the design
    measured): ``predicted, low, high`` (its scale back-transformed), ``observed`` (the mean of
    the rows measured there), ``rows``, and a column of signs per active factor; attrs
    ``model``, ``terms`` (its active columns). Empty without an active factor or the column."""
    letters = active_factors(effects)
    terms = _terms(effects, name)
    table = ceilings.set_index("run") if "run" in ceilings.columns else ceilings
    column = name or "response"
    if not letters or terms.empty or column not in table.columns:
        return pd.DataFrame()
    signs = design.sign_table()
    model = str(terms["model"].iloc[0])
    y = table[column].astype(float).reindex(signs.index)
    scaled = np.log10(y) if model == "multiplicative" else y
    active = terms[terms["active"]]
    se = (active["std_error"].astype(float) / 2).tolist()  # a coefficient's: effect / 2
    se_mean = max(se, default=float(terms["std_error"].astype(float).max()) / 2)
    half = _critical(terms) * math.sqrt(se_mean**2 + sum(s**2 for s in se))
    back = (lambda v: 10**v) if model == "multiplicative" else (lambda v: v)
    lines = []
    for _, combo in signs[letters].drop_duplicates().iterrows():
        at = (signs[letters] == combo).all(axis=1)
        predicted = float(scaled.mean())
        for _, row in active.iterrows():
            sign = int(np.prod([combo[x] for x in str(row["term"])]))
            predicted += float(row["coefficient"]) * sign
        lines.append(
            {
                **combo.to_dict(),
                "predicted": back(predicted),
                "low": back(predicted - half),
                "high": back(predicted + half),
                "observed": float(y[at].mean()),
                "rows": list(signs.index[at]),
            }
        )
    out = pd.DataFrame(lines)
    out.attrs.update(model=model, terms=active["term"].astype(str).tolist(), response=column)
    return out


def _best(design, table: pd.DataFrame, at: int) -> Best:
    line = table.loc[at]
    letters = [c for c in table.columns if c in design.letters]
    return Best(
        response=table.attrs["response"],
        levels={design.factor(x).name: str(design.factor(x).level(int(line[x]))) for x in letters},
        predicted=float(line["predicted"]),
        low=float(line["low"]),
        high=float(line["high"]),
        observed=float(line["observed"]),
        rows=list(line["rows"]),
        terms=list(table.attrs["terms"]),
        model=table.attrs["model"],
    )


def best_by_response(design, ceilings: pd.DataFrame, effects: pd.DataFrame) -> list[Best]:
    """Each response's best combination of the active factors' levels within the design."""
    out = []
    for name in response_names(effects) or [None]:
        table = predictions(design, ceilings, effects, name)
        if table.empty:
            continue
        values = table["predicted"]
        at = values.idxmin() if name in LOWER_IS_BETTER else values.idxmax()
        out.append(_best(design, table, at))
    return out


def best_buy_within(
    design, ceilings: pd.DataFrame, effects: pd.DataFrame, slo_ms: float | None
) -> tuple[Best, Best] | None:
    """The combination with the most throughput per dollar among those whose predicted latency
    at the reference load is within `slo_ms` (and its latency prediction); None without both
    responses or a target, or when no candidate is predicted within it."""
    names = response_names(effects)
    if slo_ms is None or not {"throughput_per_dollar", "latency_at_load_ms"} <= set(names):
        return None
    money = predictions(design, ceilings, effects, "throughput_per_dollar")
    latency = predictions(design, ceilings, effects, "latency_at_load_ms")
    if money.empty or latency.empty:
        return None
    within = latency.index[latency["predicted"] <= slo_ms]
    if within.empty:
        return None
    at = money.loc[within, "predicted"].idxmax()
    return _best(design, money, at), _best(design, latency, at)
