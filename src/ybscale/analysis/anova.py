"""ANOVA on the estimable terms of a 2^(k-p) design, residuals and outliers.

One regressor per alias group (the columns of ``design.model_matrix()``), fitted with statsmodels
OLS; the table comes from ``anova_lm(typ=1)``: the columns are orthogonal, so all types agree, and
the sequential sums of squares come from one QR decomposition (type 2 refits per term).

Error term:
* r >= 2: the full model leaves pure error with 2^(k-p)(r−1) degrees of freedom.
* r == 1: the saturated model has no residual degrees of freedom, so the terms that Lenth's
  method does not flag active (|effect| <= ME) are pooled into the error. The pooled terms are
  still listed, with ``pooled = True``, their own df and SS and NaN F / p (their SS is part of the
  residual line). If every term is active nothing can be pooled: F and p are NaN and the residual
  line has 0 df. Pooling chosen from the data makes F tests optimistic; read them with Lenth's.

Multiplicity (r >= 2): ``p_adjusted`` is each term's p-value adjusted over the family of terms
(one per alias group; the block line is not in it) by the rule ``multiplicity`` (holm, bh, none;
analysis.multiplicity), as in the effects table. Unreplicated designs: NaN (the pooled F tests
are chosen by Lenth's ME; Lenth's SME is the simultaneous test).

Blocks (`blocks=True`, r >= 2, each replicate measured as one block): the block enters the OLS
model as a categorical term with r − 1 df and gets its own ANOVA line; pure error keeps
2^(k-p)(r−1) − (r−1) df. `order` (run → executed position, from results/run_order.csv) puts
the residuals in the order the runs were really measured (residuals-vs-order).

Residuals (of the model after pooling; on the log10 scale for the multiplicative model) carry the
internally studentized residual (statsmodels OLSInfluence) as ``standardized`` and the externally
studentized residual with its Bonferroni p value. A run is an ``outlier`` when
|standardized| > 3 (Montgomery's rule of thumb) or its Bonferroni p value is below alpha.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from scipy import stats
from statsmodels.stats.anova import anova_lm
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.outliers_influence import OLSInfluence

from ybscale.analysis import multiplicity as mult
from ybscale.analysis.effects import aligned_responses, contrasts, lenth, term_sum_sq, transform

OUTLIER_Z = 3.0
RESIDUAL = "residual"
BLOCK = "block"
ANOVA_COLUMNS = ["term", "alias", "df", "sum_sq", "mean_sq", "F", "p_value", "p_adjusted", "pooled"]
RESIDUAL_COLUMNS = [
    "run",
    "row",
    "replicate",
    "observed",
    "fitted",
    "residual",
    "standardized",
    "studentized_external",
    "bonferroni_p",
    "leverage",
    "order",
    "outlier",
]


@dataclass
class AnovaResult:
    """ANOVA table, residuals and the terms pooled into error."""

    table: pd.DataFrame
    residuals: pd.DataFrame
    pooled: list[str] = field(default_factory=list)
    model: str = "additive"


def pooled_terms(design, y: pd.Series, alpha: float = 0.05) -> list[str]:
    """Terms pooled into error: none when replicated, else those Lenth does not flag at ME."""
    if design.replications > 1:
        return []
    effect = contrasts(design, y)
    me = lenth(effect.to_numpy(), alpha)["me"]
    return [t for t in effect.index if not abs(effect[t]) > me]


def _var(term: str) -> str:
    """Formula-safe variable name for a term (C, I, Q are special in formula languages)."""
    return f"t_{term}"


def _fit(design, y: pd.Series, kept: list[str], blocks: bool = False):
    """OLS of y on the kept term columns (+ the block factor); intercept only when none."""
    data = design.model_matrix().loc[y.index].astype(float)
    data = data.rename(columns=_var)
    data["y"] = y.to_numpy()
    terms = [_var(t) for t in kept]
    if blocks:
        data[BLOCK] = design.sign_table().loc[y.index, "replicate"].astype(str).to_numpy()
        terms.append(f"C({BLOCK})")
    rhs = " + ".join(terms) or "1"
    return smf.ols(f"y ~ {rhs}", data=data).fit()


def _table(
    design, y: pd.Series, fit, kept: list[str], pooled: list[str], blocks: bool = False
) -> pd.DataFrame:
    """ANOVA rows in the design's term order, then the residual line."""
    effect = contrasts(design, y)
    ss_term = term_sum_sq(effect, len(y))
    df_resid = int(round(fit.df_resid))
    ss_resid = float(fit.ssr) if df_resid > 0 else 0.0
    lm = None
    if (kept or blocks) and df_resid > 0:
        lm = anova_lm(fit, typ=1)
    rows = []
    for term in effect.index:
        ss = float(lm.loc[_var(term), "sum_sq"]) if lm is not None and term in kept else None
        ss = float(ss_term[term]) if ss is None else ss
        f_val = p_val = math.nan
        if lm is not None and term in kept:
            f_val = float(lm.loc[_var(term), "F"])
            p_val = float(lm.loc[_var(term), "PR(>F)"])
        row = (term, design.alias_string(term), 1, ss, ss, f_val, p_val, math.nan, term in pooled)
        rows.append(row)
    if blocks and lm is not None:
        line = lm.loc[f"C({BLOCK})"]
        df_b = int(round(line["df"]))
        ss_b = float(line["sum_sq"])
        f_b, p_b = float(line["F"]), float(line["PR(>F)"])
        rows.append((BLOCK, "", df_b, ss_b, ss_b / df_b, f_b, p_b, math.nan, False))
    ms_resid = ss_resid / df_resid if df_resid > 0 else math.nan
    nan = math.nan
    rows.append((RESIDUAL, "", df_resid, ss_resid, ms_resid, nan, nan, nan, False))
    return pd.DataFrame(rows, columns=ANOVA_COLUMNS)


def _adjusted(table: pd.DataFrame, n_terms: int, rule: str) -> pd.Series:
    """The terms' p-values adjusted over the family of terms (the first `n_terms` rows)."""
    out = table["p_adjusted"].copy()
    out.iloc[:n_terms] = mult.adjust(table["p_value"].iloc[:n_terms], rule)
    return out


def externally_studentized(fit, infl) -> tuple[np.ndarray, np.ndarray]:
    """Externally studentized residuals and their Bonferroni p, as statsmodels' outlier_test,
    with each leave-one-out error variance from the deletion identity
    s²_(i) = (SSE − e_i² / (1 − h_i)) / (ν − 1) (Belsley, Kuh & Welsch 1980) instead of one
    refit per run (outlier_test's loop: 385 fits of 130 columns for a 384-run design)."""
    e, h = np.asarray(fit.resid), np.asarray(infl.hat_matrix_diag)
    df = fit.df_resid - 1
    sigma2 = (fit.ssr - e**2 / (1 - h)) / df
    external = np.asarray(infl.get_resid_studentized_external(sigma=np.sqrt(sigma2)))
    p = 2 * stats.t.sf(np.abs(external), df)
    return external, multipletests(p, method="bonferroni")[1]


def _residuals(design, y: pd.Series, fit, alpha: float, order=None) -> pd.DataFrame:
    """Residual diagnostics per run; `order` = executed position per run (else design order)."""
    signs = design.sign_table().loc[y.index]
    out = pd.DataFrame(
        {
            "run": y.index,
            "row": signs["row"].to_numpy(),
            "replicate": signs["replicate"].to_numpy(),
            "observed": y.to_numpy(),
            "fitted": np.asarray(fit.fittedvalues),
            "residual": np.asarray(fit.resid),
        }
    )
    df_resid = int(round(fit.df_resid))
    nan = np.full(len(y), np.nan)
    internal, external, bonf, leverage = nan, nan.copy(), nan.copy(), nan.copy()
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        infl = OLSInfluence(fit)
        leverage = np.asarray(infl.hat_matrix_diag)
        if df_resid > 0 and fit.ssr > 0:
            internal = np.asarray(infl.resid_studentized_internal)
        if df_resid > 1 and fit.ssr > 0:
            external, bonf = externally_studentized(fit, infl)
    out["standardized"] = internal
    out["studentized_external"] = external
    out["bonferroni_p"] = bonf
    out["leverage"] = leverage
    if order is None:
        out["order"] = np.arange(1, len(y) + 1)
    else:
        executed = pd.Series(order).reindex(y.index)
        if executed.isna().any():
            missing = ", ".join(executed.index[executed.isna()])
            raise ValueError(f"run order has no position for runs: {missing}")
        out["order"] = executed.astype(int).to_numpy()
    out["outlier"] = (np.abs(internal) > OUTLIER_Z) | (bonf < alpha)
    return out[RESIDUAL_COLUMNS]


def fit_anova(
    design,
    responses: pd.Series,
    alpha: float = 0.05,
    model: str = "additive",
    blocks: bool = False,
    order=None,
    multiplicity: str = mult.DEFAULT,
) -> AnovaResult:
    """ANOVA table and residuals for one response per run (see the module docstring)."""
    mult.check_rule(multiplicity)
    y = transform(aligned_responses(design, responses), model)
    blocks = blocks and design.replications > 1
    pooled = pooled_terms(design, y, alpha)
    kept = [t for t in design.terms if t not in pooled]
    fit = _fit(design, y, kept, blocks)
    table = _table(design, y, fit, kept, pooled, blocks)
    rule = multiplicity if design.replications > 1 else None
    if rule:
        table["p_adjusted"] = _adjusted(table, len(design.terms), rule)
    attrs = {"pooled": pooled, "model": model, "alpha": alpha, "blocks": blocks}
    table.attrs.update({**attrs, "multiplicity": rule or "none"})
    return AnovaResult(table, _residuals(design, y, fit, alpha, order), pooled, model)


def anova(design, responses: pd.Series, alpha: float = 0.05, model: str = "additive"):
    """Just the ANOVA table of `fit_anova`."""
    return fit_anova(design, responses, alpha, model).table


def outliers(residuals: pd.DataFrame) -> pd.DataFrame:
    """The rows of a residuals table flagged as outliers."""
    return residuals[residuals["outlier"].astype(bool)].reset_index(drop=True)
