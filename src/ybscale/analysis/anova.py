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

Blocks, only where the runs were blocked (`blocks=True`: each replicate measured as one block;
or run -> block labels; r >= 2): the block enters the OLS model as a categorical term with
(blocks − 1) df and gets its own ANOVA line; pure error keeps 2^(k-p)(r−1) − (blocks − 1) df
(Montgomery, 8th ed., §7.2). Without (the default) the design is completely randomized: pure
error on 2^(k-p)(r−1) df (§6.3). `order` (run → executed position, from results/run_order.csv) puts
the residuals in the order the runs were really measured (residuals-vs-order).

Centre points in blocks, or beside a factor without a middle (`ybscale.analysis.centre`): one
fit of every run (block, every column, the curvature), each line tested against the pure error
within the blocks, nothing pooled (`crossed_table`); the effects table tests on the same error.

Split plot (`clusters` where rows shared a cluster and some columns are constant within every
cluster, ybscale.design.strata): each stratum gets its own error, as the expected mean squares
of a split-plot design ask (Montgomery, Design and Analysis of Experiments, ch. 14). With m runs
per cluster, E[MS whole-plot term] = σ² + m·σ²_cluster + its effect and E[MS whole-plot error]
= σ² + m·σ²_cluster, so a whole-plot column is F-tested against the **whole-plot error**: the
clusters within combinations of the whole-plot columns (cluster-to-cluster SS less the
whole-plot columns' SS; df = clusters − 1 − whole-plot columns). A sub-plot column (its
interactions with whole-plot columns included) is tested against the **residual** within
clusters (df = runs − clusters − sub-plot columns). Nothing is pooled; a stratum whose error has
no degrees of freedom (an unreplicated design, or replicates that reused their cluster, for the
whole plot) is not F-tested, and `report.anova_text.split_plot_text` says so. The replicate is
not a block there: where rows share clusters the run order randomises clusters, and a
replicate's shift is part of the cluster-to-cluster variation. Every table has ``stratum``
(single | whole-plot | sub-plot) and ``error`` (the line a term's F is against; empty when not
tested).

Residuals (of the model after pooling; on the log10 scale for the multiplicative model) carry the
internally studentized residual (statsmodels OLSInfluence) as ``standardized`` and the externally
studentized residual with its Bonferroni p value. A run is an ``outlier`` when
|standardized| > 3 (Montgomery's rule of thumb) or its Bonferroni p value is below alpha.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf
from scipy import stats
from statsmodels.stats.anova import anova_lm
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.outliers_influence import OLSInfluence

from ybscale.analysis import multiplicity as mult
from ybscale.analysis.centre import Centre, CentreFit, fit_centre
from ybscale.analysis.effects import (
    aligned_responses,
    block_columns,
    block_labels,
    contrasts,
    lenth,
    term_sum_sq,
    transform,
)
from ybscale.analysis.terms import RESIDUAL, WHOLE_ERROR
from ybscale.design.strata import SINGLE, SUB, WHOLE, column_strata

OUTLIER_Z = 3.0
BLOCK = "block"  # the replicate column of the model (C(block)) and its line
ANOVA_COLUMNS = [
    "term", "alias", "df", "sum_sq", "mean_sq", "F", "p_value", "p_adjusted", "pooled", "stratum",
    "error", "partial_eta_sq",
]  # fmt: skip
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


def pooled_terms(design, y: pd.Series, alpha: float = 0.05, blocked=()) -> list[str]:
    """Terms pooled into error: none when replicated, else those Lenth does not flag at ME
    (judged without the `blocked` columns, those an unreplicated design's blocks are
    confounded with: they are the block line)."""
    if design.replications > 1:
        return []
    effect = contrasts(design, y).drop(list(blocked))
    me = lenth(effect.to_numpy(), alpha)["me"]
    if math.isnan(me):  # too few columns for Lenth: none judged, none pooled
        return []
    return [t for t in effect.index if not abs(effect[t]) > me]


def _var(term: str) -> str:
    """Formula-safe variable name for a term (C, I, Q are special in formula languages)."""
    return f"t_{term}"


def _fit(design, y: pd.Series, kept: list[str], blocks=None):
    """OLS of y on the kept term columns (+ the block factor: `blocks` as block_labels takes
    it); intercept only when none."""
    data = design.model_matrix().loc[y.index].astype(float)
    data = data.rename(columns=_var)
    data["y"] = y.to_numpy()
    terms = [_var(t) for t in kept]
    labels = block_labels(design, y.index, blocks)
    if labels is not None:
        data[BLOCK] = labels.to_numpy()
        terms.append(f"C({BLOCK})")
    rhs = " + ".join(terms) or "1"
    return smf.ols(f"y ~ {rhs}", data=data).fit()


def _table(
    design,
    y: pd.Series,
    fit,
    kept: list[str],
    pooled: list[str],
    blocks: bool = False,
    blocked=(),
) -> pd.DataFrame:
    """ANOVA rows in the design's term order (the `blocked` columns in the block line), then the
    residual line."""
    effect = contrasts(design, y)
    ss_term = term_sum_sq(effect, len(y))
    df_resid = int(round(fit.df_resid))
    ss_resid = float(fit.ssr) if df_resid > 0 else 0.0
    lm = None
    if (kept or blocks) and df_resid > 0:
        lm = anova_lm(fit, typ=1)
    rows = []
    for term in effect.index.drop(list(blocked)):
        ss = float(lm.loc[_var(term), "sum_sq"]) if lm is not None and term in kept else None
        ss = float(ss_term[term]) if ss is None else ss
        f_val = p_val = math.nan
        if lm is not None and term in kept:
            f_val = float(lm.loc[_var(term), "F"])
            p_val = float(lm.loc[_var(term), "PR(>F)"])
        error = RESIDUAL if math.isfinite(f_val) else ""
        rows.append(
            (term, design.alias_string(term), 1, ss, ss, f_val, p_val, math.nan, term in pooled,
             SINGLE, error)
        )  # fmt: skip
    if blocks and lm is not None:
        line = lm.loc[f"C({BLOCK})"]
        df_b = int(round(line["df"]))
        ss_b = float(line["sum_sq"])
        f_b, p_b = float(line["F"]), float(line["PR(>F)"])
        alias = "; ".join(design.alias_string(t) for t in blocked)
        rows.append(
            (BLOCK, alias, df_b, ss_b, ss_b / df_b, f_b, p_b, math.nan, False, SINGLE, RESIDUAL)
        )
    ms_resid = ss_resid / df_resid if df_resid > 0 else math.nan
    nan = math.nan
    rows.append((RESIDUAL, "", df_resid, ss_resid, ms_resid, nan, nan, nan, False, SINGLE, ""))
    return pd.DataFrame(rows, columns=ANOVA_COLUMNS[:-1])  # partial_eta_sq: fit_anova


CURVATURE, LACK_OF_FIT, PURE_ERROR = "curvature", "lack of fit", "pure error"
CURVE = "t_center"  # the centre points' indicator in the model


def center_table(
    design, y: pd.Series, yc: pd.Series, kept: list[str], pooled: list[str]
) -> pd.DataFrame:
    """The ANOVA of a two-level design with centre points (Montgomery, 8th ed., §6.8, Table
    6.24): the kept columns and the pure-quadratic **curvature** (one df: the centre points'
    indicator, after the columns, so SS = n_F n_C (ȳ_F − ȳ_C)² / (n_F + n_C)), each against the
    **residual**, which splits into **lack of fit** (the pooled columns) tested against the
    **pure error** (the centre points' spread about their mean, and the replicates' about
    theirs). Without pooled columns the residual is the pure error and stands as that line."""
    x = design.model_matrix().loc[y.index].astype(float).rename(columns=_var)
    centre = pd.DataFrame(0.0, index=yc.index, columns=x.columns)
    data = pd.concat([x, centre])
    data[CURVE] = [0.0] * len(x) + [1.0] * len(centre)
    data["y"] = np.concatenate([y.to_numpy(), yc.to_numpy()])
    terms = [_var(t) for t in kept] + [CURVE]
    fit = smf.ols("y ~ " + " + ".join(terms), data=data).fit()
    df_res = int(round(fit.df_resid))
    ss_res = float(fit.ssr)
    lm = anova_lm(fit, typ=1) if df_res > 0 else None
    ss_pe = float(((yc - yc.mean()) ** 2).sum())
    df_pe = len(yc) - 1
    if design.replications > 1:  # the replicates' spread about each combination's mean
        rows_of = design.sign_table().loc[y.index, "row"]
        ss_pe += float(((y - y.groupby(rows_of).transform("mean")) ** 2).sum())
        df_pe += design.n_rows * (design.replications - 1)
    df_lof, ss_lof = df_res - df_pe, max(ss_res - ss_pe, 0.0)
    error = RESIDUAL if df_lof > 0 else PURE_ERROR
    ms_err = ss_res / df_res if df_res > 0 else math.nan
    effect = contrasts(design, y)
    ss_term = term_sum_sq(effect, len(y))
    nan = math.nan
    rows = []
    for term in effect.index:
        tested = lm is not None and term in kept
        ss = float(lm.loc[_var(term), "sum_sq"]) if tested else float(ss_term[term])
        f_val = float(lm.loc[_var(term), "F"]) if tested else nan
        p_val = float(lm.loc[_var(term), "PR(>F)"]) if tested else nan
        rows.append((term, design.alias_string(term), 1, ss, ss, f_val, p_val, nan,
                     term in pooled, SINGLE, error if tested else ""))  # fmt: skip
    if lm is not None:
        line = lm.loc[CURVE]
        ss_c = float(line["sum_sq"])
        rows.append((CURVATURE, "", 1, ss_c, ss_c, float(line["F"]), float(line["PR(>F)"]),
                     nan, False, SINGLE, error))  # fmt: skip
    if df_lof > 0:
        rows.append((RESIDUAL, "", df_res, ss_res, ms_err, nan, nan, nan, False, SINGLE, ""))
        ms_lof, ms_pe = ss_lof / df_lof, ss_pe / df_pe if df_pe > 0 else nan
        f_lof = ms_lof / ms_pe if df_pe > 0 and ms_pe > 0 else nan
        p_lof = float(stats.f.sf(f_lof, df_lof, df_pe)) if math.isfinite(f_lof) else nan
        rows.append((LACK_OF_FIT, "", df_lof, ss_lof, ms_lof, f_lof, p_lof, nan, False, SINGLE,
                     PURE_ERROR))  # fmt: skip
    ms_pe = ss_pe / df_pe if df_pe > 0 else nan
    rows.append((PURE_ERROR, "", df_pe, ss_pe, ms_pe, nan, nan, nan, False, SINGLE, ""))
    return pd.DataFrame(rows, columns=ANOVA_COLUMNS[:-1])


def crossed_table(design, fit: CentreFit) -> pd.DataFrame:
    """The ANOVA of `ybscale.analysis.centre`'s fit (centre runs in blocks, or beside a
    factor without a middle): each column (the columns the blocks are confounded with in the
    block line), the blocks, the curvature and the lack of fit, every one against the **pure
    error**, as the effects table tests them."""
    nan = math.nan
    rows = []
    for term in fit.terms:
        ss = float(fit.sum_sq[term])
        f_val, p_val = fit.p(ss, 1)
        rows.append((term, design.alias_string(term), 1, ss, ss, f_val, p_val, nan, False,
                     SINGLE, PURE_ERROR))  # fmt: skip
    if fit.df_block > 0:
        alias = "; ".join(design.alias_string(t) for t in fit.confounded)
        f_val, p_val = fit.p(fit.ss_block, fit.df_block)
        rows.append((BLOCK, alias, fit.df_block, fit.ss_block, fit.ss_block / fit.df_block,
                     f_val, p_val, nan, False, SINGLE, PURE_ERROR))  # fmt: skip
    f_val, p_val = fit.p(fit.ss_curvature, 1)
    rows.append((CURVATURE, "", 1, fit.ss_curvature, fit.ss_curvature, f_val, p_val, nan,
                 False, SINGLE, PURE_ERROR))  # fmt: skip
    if fit.df_lof > 0:
        f_val, p_val = fit.p(fit.ss_lof, fit.df_lof)
        rows.append((LACK_OF_FIT, "", fit.df_lof, fit.ss_lof, fit.ss_lof / fit.df_lof, f_val,
                     p_val, nan, False, SINGLE, PURE_ERROR))  # fmt: skip
    rows.append((PURE_ERROR, "", fit.df_pe, fit.ss_pe, fit.ms_pe, nan, nan, nan, False, SINGLE,
                 ""))  # fmt: skip
    return pd.DataFrame(rows, columns=ANOVA_COLUMNS[:-1])


def split_plot_table(design, y: pd.Series, clusters: Mapping[str, str], strata) -> pd.DataFrame:
    """The split-plot ANOVA (module docstring): whole-plot columns against the whole-plot error,
    sub-plot columns against the residual within clusters; statsmodels OLS fits (their df from
    the fitted rank, so a stratum with no error df gets 0, never a negative or a guess)."""
    x = design.model_matrix().loc[y.index].astype(float).rename(columns=_var)
    data = x.assign(y=y.to_numpy(), cluster=[clusters.get(r, r) for r in y.index])
    whole = [t for t in design.terms if strata[t] == WHOLE]
    sub = [t for t in design.terms if strata[t] == SUB]
    between = smf.ols("y ~ C(cluster)", data=data).fit()  # cluster means: every whole plot
    whole_fit = smf.ols("y ~ " + " + ".join(_var(t) for t in whole), data=data).fit()
    whole_ss = anova_lm(whole_fit, typ=1)["sum_sq"]
    ss_w_err = max(float(between.ess) - float(whole_ss.drop("Residual").sum()), 0.0)
    df_w_err = int(round(between.df_model)) - len(whole)
    full = smf.ols("y ~ C(cluster) + " + " + ".join(_var(t) for t in sub), data=data).fit()
    df_resid = int(round(full.df_resid))
    sub_lm = anova_lm(full, typ=1) if df_resid > 0 else None
    ss_resid = float(full.ssr) if df_resid > 0 else 0.0
    ms = {
        WHOLE: ss_w_err / df_w_err if df_w_err > 0 else math.nan,
        SUB: ss_resid / df_resid if df_resid > 0 else math.nan,
    }
    error = {WHOLE: WHOLE_ERROR, SUB: RESIDUAL}
    effect = contrasts(design, y)
    ss_term = term_sum_sq(effect, len(y))
    rows = []
    for stratum, terms in ((WHOLE, whole), (SUB, sub)):
        for term in terms:
            ss = float(whole_ss[_var(term)]) if stratum == WHOLE else float(ss_term[term])
            if stratum == SUB and sub_lm is not None:
                ss = float(sub_lm.loc[_var(term), "sum_sq"])
            f_val = ss / ms[stratum]  # NaN without error df
            df_e = df_w_err if stratum == WHOLE else df_resid
            p_val = float(stats.f.sf(f_val, 1, df_e)) if math.isfinite(f_val) else math.nan
            tested = error[stratum] if math.isfinite(f_val) else ""
            rows.append((term, design.alias_string(term), 1, ss, ss, f_val, p_val, math.nan,
                         False, stratum, tested))  # fmt: skip
        df_e, ss_e = (df_w_err, ss_w_err) if stratum == WHOLE else (df_resid, ss_resid)
        line = (error[stratum], "", df_e, ss_e, ms[stratum], math.nan, math.nan, math.nan)
        rows.append((*line, False, stratum, ""))
    return pd.DataFrame(rows, columns=ANOVA_COLUMNS[:-1])  # partial_eta_sq: fit_anova


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
    """Residual diagnostics per run; `order` = executed position per run (else design order).
    A fit of more runs than `y` (the centre runs after the factorial ones,
    `ybscale.analysis.centre`) is diagnosed over all of them, the factorial runs reported."""
    signs = design.sign_table().loc[y.index]
    n = len(y)
    out = pd.DataFrame(
        {
            "run": y.index,
            "row": signs["row"].to_numpy(),
            "replicate": signs["replicate"].to_numpy(),
            "observed": y.to_numpy(),
            "fitted": np.asarray(fit.fittedvalues)[:n],
            "residual": np.asarray(fit.resid)[:n],
        }
    )
    df_resid = int(round(fit.df_resid))
    nan = np.full(len(np.asarray(fit.resid)), np.nan)
    internal, external, bonf, leverage = nan, nan.copy(), nan.copy(), nan.copy()
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        infl = OLSInfluence(fit)
        leverage = np.asarray(infl.hat_matrix_diag)
        if df_resid > 0 and fit.ssr > 0:
            internal = np.asarray(infl.resid_studentized_internal)
        if df_resid > 1 and fit.ssr > 0:
            external, bonf = externally_studentized(fit, infl)
    out["standardized"] = internal[:n]
    out["studentized_external"] = external[:n]
    out["bonferroni_p"] = bonf[:n]
    out["leverage"] = leverage[:n]
    if order is None:
        out["order"] = np.arange(1, len(y) + 1)
    else:
        executed = pd.Series(order).reindex(y.index)
        if executed.isna().any():
            missing = ", ".join(executed.index[executed.isna()])
            raise ValueError(f"run order has no position for runs: {missing}")
        out["order"] = executed.astype(int).to_numpy()
    out["outlier"] = (np.abs(internal[:n]) > OUTLIER_Z) | (bonf[:n] < alpha)
    return out[RESIDUAL_COLUMNS]


def partial_eta_squared(table: pd.DataFrame) -> pd.Series:
    """Each tested line's partial η² = SS / (SS + SS of the error it is tested against, the
    line's `error`), the effect size pingouin's `anova` reports as np2 (Cohen 1973); NaN for a
    line no F test judges (pooled terms, error lines)."""
    ss = table.set_index("term")["sum_sq"]
    out = []
    for line in table.itertuples(index=False):
        error = line.error
        tested = isinstance(error, str) and error in ss.index and pd.notna(line.F)
        out.append(line.sum_sq / (line.sum_sq + ss[error]) if tested else math.nan)
    return pd.Series(out, index=table.index, dtype=float)


def fit_anova(
    design,
    responses: pd.Series,
    alpha: float = 0.05,
    model: str = "additive",
    blocks=None,
    order=None,
    multiplicity: str = mult.DEFAULT,
    clusters: Mapping[str, str] | None = None,
    center: pd.Series | None = None,
) -> AnovaResult:
    """ANOVA table and residuals for one response per run (see the module docstring);
    `clusters` (run -> the cluster it ran on) makes a split plot's table, one error per
    stratum."""
    mult.check_rule(multiplicity)
    y = transform(aligned_responses(design, responses), model)
    blocks = block_labels(design, y.index, blocks)
    blocked = block_columns(design, y.index, blocks)  # unreplicated: the block line's columns
    pooled = pooled_terms(design, y, alpha, blocked)
    kept = [t for t in design.terms if t not in pooled and t not in blocked]
    fit = _fit(design, y, kept, blocks)
    strata = column_strata(design, clusters or {})
    split = WHOLE in strata.values()
    crossed = center if isinstance(center, Centre) and center.needs_fit() else None
    if isinstance(center, Centre):
        center = center.values
    centre = transform(center.astype(float), model) if center is not None else None
    if split:
        table = split_plot_table(design, y, clusters, strata)
    elif crossed is not None:  # in blocks, or beside a factor without a middle: one fit
        crossed = fit_centre(design, y, crossed.transformed(lambda v: transform(v, model)),
                             blocks, blocked)  # fmt: skip
        table, fit, pooled, kept = crossed_table(design, crossed), crossed.fit, [], []
    elif centre is not None and len(centre) > 1 and blocks is None:
        table = center_table(design, y, centre, kept, pooled)
    else:
        table = _table(design, y, fit, kept, pooled, blocks is not None, blocked)
    rule = multiplicity if design.replications > 1 or crossed is not None else None
    if rule:
        terms = ~table["term"].isin([RESIDUAL, BLOCK, WHOLE_ERROR, CURVATURE, LACK_OF_FIT,
                                     PURE_ERROR])  # fmt: skip
        table.loc[terms, "p_adjusted"] = mult.adjust(table.loc[terms, "p_value"], rule)
    pooled = [] if split else pooled  # the split-plot table pools nothing (the residuals' fit may)
    table["partial_eta_sq"] = partial_eta_squared(table)
    attrs = {
        "pooled": pooled,
        "model": model,
        "alpha": alpha,
        "blocks": blocks is not None and not split,
    }
    table.attrs.update({**attrs, "multiplicity": rule or "none"})
    return AnovaResult(table, _residuals(design, y, fit, alpha, order), pooled, model)


def anova(design, responses: pd.Series, alpha: float = 0.05, model: str = "additive"):
    """Just the ANOVA table of `fit_anova`."""
    return fit_anova(design, responses, alpha, model).table


def outliers(residuals: pd.DataFrame) -> pd.DataFrame:
    """The rows of a residuals table flagged as outliers."""
    return residuals[residuals["outlier"].astype(bool)].reset_index(drop=True)
