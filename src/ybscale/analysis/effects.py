"""Sign-table effects of a 2^(k-p) design, allocation of variation and their significance.

For every estimable term (one per alias group) the effect is mean(y at +) − mean(y at −) and the
coefficient is q = effect / 2 (Jain's q_i). Sums of squares follow Jain: SS = 2^(k-p)·r·q².

Significance, always on the effect scale:
* r == 1 (no error degrees of freedom): Lenth (1989). s0 = 1.5·median|c|,
  PSE = 1.5·median{|c| : |c| < 2.5·s0}, ME = IER(m, α)·PSE and SME = EER(m, α)·PSE with the
  critical values of Ye & Hamada (2000) for m columns (`lenth_critical`): one rule for every
  table and every stratum, whether or not the runs shared clusters; active = |effect| > ME,
  active_sme = > SME. Lenth's own t(1−α/2, m/3) and t(γ, m/3), γ = (1 + (1−α)^(1/m))/2, are
  conservative for small m (`lenth` keeps them as me_t, sme_t). Fewer than 4 columns: not
  tested.
* r >= 2: Jain ch. 18. s_e² = SSE / (2^(k-p)(r−1)), s_q = s_e / sqrt(2^(k-p)·r),
  CI = q ± t(1−α/2, 2^(k-p)(r−1))·s_q, reported doubled (effect scale); ``p_value`` is the
  column's two-sided t test. The family of columns tested (one per alias group) is controlled by
  ``multiplicity`` (ybscale.analysis.multiplicity: holm, bh or none): ``p_adjusted`` is the adjusted
  p-value, active = p_adjusted < α, and ``me_adjusted`` is the |effect| the rule's cut
  corresponds to (active = |effect| > me_adjusted). The CI stays the column's own 95 % interval.
  Unreplicated designs (Lenth) have no p-values: NaN, multiplicity "none" (active is at ME).

``df`` is a t-tested column's error degrees of freedom (NaN for Lenth's columns), from which
ybscale.analysis.verdicts draws its simultaneous intervals.

model="multiplicative" analyses log10(response) (Jain 18.7); effects are then log10 ratios.

Blocks, only where the runs really were blocked (`blocks=True`: each replicate measured as one
block, r >= 2; or `blocks` a run -> block label Series, e.g. a batch column): the block sum of
squares Σ_b n_b (ȳ_b − ȳ)² with (blocks − 1) df is taken out of the error, which keeps
2^(k-p)(r−1) − (blocks − 1) df (Montgomery, 8th ed., §7.2: complete blocks orthogonal to the
effects); a `block` line joins the table. An unreplicated design in b blocks (Montgomery
§7.4-7.6) has its blocks confounded with b − 1 columns (`block_columns`): those estimate the
block differences, not effects, so they leave the effect table for its `block` line (their SS;
`alias` names them) and Lenth judges the other columns. Without blocks (the default) the
design is completely randomized and the error is the pure error on 2^(k-p)(r−1) df
(Montgomery §6.3).

Measurement noise (`noise_se`: each run's standard error of its ceiling, e.g. from its 95 %
interval): an effect is a ±2/n-weighted sum of the n responses, so its noise standard error is
(2/n)·sqrt(Σ se_i²) (on log10 with the delta method se/(y ln 10) for the multiplicative model).
`noise` is z(1−α/2) times that; `below_noise` marks effects with |effect| < noise, which
run-to-run scatter alone could produce.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import ndtri, stdtr, stdtrit  # scipy.stats' normal and t, fast

from ybscale.analysis import multiplicity as mult
from ybscale.analysis.terms import BLOCK_TERM, ERROR_TERM

MODELS = ("additive", "multiplicative")
COLUMNS = [
    "term",
    "alias",
    "effect",
    "coefficient",
    "sum_sq",
    "variation_pct",
    "std_error",
    "standardized",
    "me",
    "sme",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "me_adjusted",
    "active",
    "active_sme",
    "method",
    "multiplicity",
    "model",
    "noise",
    "below_noise",
    "df",
]


def noise_se_from_ci(low, high, confidence: float = 0.95):
    """Standard error from a symmetric normal-theory interval: (high − low) / (2 z)."""
    z = float(ndtri(0.5 + confidence / 2))
    return (np.asarray(high, dtype=float) - np.asarray(low, dtype=float)) / (2 * z)


def noise_band(design, y_raw: pd.Series, noise_se: pd.Series, model: str, alpha: float) -> float:
    """Half-width (z, 1−α) of the effect that measurement noise alone produces."""
    se = pd.to_numeric(noise_se.reindex(y_raw.index), errors="coerce").astype(float)
    if se.isna().any():
        return math.nan
    if model == "multiplicative":
        se = se / (y_raw.astype(float) * math.log(10))
    sd_effect = 2.0 / len(y_raw) * math.sqrt(float((se**2).sum()))
    return float(ndtri(1 - alpha / 2)) * sd_effect


def block_labels(design, index, blocks) -> pd.Series | None:
    """The block of each run of `index`: None (completely randomized) for blocks None/False,
    or True (the replicates) on an unreplicated design; the replicate for True; else the labels
    given (run -> block), an unreplicated design's too (`block_columns`)."""
    if blocks is None or blocks is False:
        return None
    if blocks is True:
        if design.replications < 2:
            return None
        return design.sign_table().loc[index, "replicate"].astype(str)
    labels = pd.Series(blocks).reindex(index)
    if labels.isna().any():
        raise ValueError(f"no block for runs: {', '.join(map(str, labels.index[labels.isna()]))}")
    return labels.astype(str)


def block_columns(design, index, labels: pd.Series | None) -> list[str]:
    """The columns an unreplicated design's blocks are confounded with: those constant within
    every block (b regular blocks confound b − 1 columns, Montgomery §7.4-7.6: e.g. ABCD for a
    2^4 in two blocks). They estimate block differences, not effects: the analysis takes them
    out of the effect tests. [] for a replicated design or no blocks. ValueError when the
    blocks are not confounded with whole columns (fewer than b − 1 are constant: the block
    differences would leak into every column) or when a column holding a main effect is one
    of them (that factor cannot be told from the blocks)."""
    if labels is None or design.replications > 1:
        return []
    x = design.model_matrix().loc[index].astype(float)
    groups = labels.reindex(index).to_numpy()
    constant = [t for t in x.columns if int(x[t].groupby(groups).nunique().max()) == 1]
    b = int(pd.Series(groups).nunique())
    if b < 2:
        return []
    if len(constant) != b - 1:
        raise ValueError(
            f"{b} blocks of an unreplicated design must be confounded with {b - 1} whole "
            f"column(s) of the design (constant within every block); "
            f"{len(constant)} are ({', '.join(constant) or 'none'}): the blocks are not a "
            "regular blocking of this design"
        )
    mains = [t for t in constant if any(len(w) == 1 for w in design.alias_string(t).split(" = "))]
    if mains:
        raise ValueError(
            f"the blocks are confounded with {', '.join(design.alias_string(t) for t in mains)}: "
            "a main effect cannot be told from the blocks"
        )
    return constant


def block_sum_sq(y: pd.Series, labels: pd.Series) -> float:
    """Σ_b n_b (ȳ_b − ȳ)² over the blocks."""
    groups = y.groupby(labels.reindex(y.index).to_numpy())
    return float((groups.size() * (groups.mean() - y.mean()) ** 2).sum())


def transform(values: pd.Series, model: str) -> pd.Series:
    """The analysed response: as is (additive) or log10 (multiplicative)."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if model == "additive":
        return values.astype(float)
    if (values <= 0).any():
        bad = values[values <= 0].index[0]
        raise ValueError(f"multiplicative model needs positive responses; {bad} is {values[bad]}")
    return np.log10(values.astype(float))


def aligned_responses(design, responses: pd.Series) -> pd.Series:
    """Responses reindexed to the design's run ids; ValueError on missing/extra/NaN runs."""
    runs = list(design.run_ids)
    extra = sorted(set(responses.index) - set(runs))
    if extra:
        raise ValueError(f"responses for runs not in the design: {', '.join(map(str, extra))}")
    if responses.index.duplicated().any():
        dup = responses.index[responses.index.duplicated()][0]
        raise ValueError(f"more than one response for run {dup}")
    y = pd.to_numeric(responses.reindex(runs), errors="coerce").astype(float)
    missing = y.index[y.isna()].tolist()
    if missing:
        raise ValueError(f"missing or non-numeric responses for runs: {', '.join(missing)}")
    return y


def contrasts(design, y: pd.Series) -> pd.Series:
    """Effect of every estimable term: mean at + minus mean at −, in the design's term order."""
    x = design.model_matrix().loc[y.index].astype(float)
    half = len(y) / 2.0
    return pd.Series(x.to_numpy().T @ y.to_numpy() / half, index=x.columns, name="effect")


def lenth(effects, alpha: float = 0.05) -> dict[str, float]:
    """Lenth (1989) pseudo standard error and the one rule every unreplicated table uses, each
    stratum's too: ME = IER(m, α)·PSE and SME = EER(m, α)·PSE, the critical values of Lenth's
    t for m null columns (Ye & Hamada 2000; `lenth_critical`, simulated to 0.1 %). Fewer than
    MIN_COLUMNS columns hold no noise estimate: ME and SME NaN (nothing is active). ``me_t``
    and ``sme_t`` are Lenth's own t(m/3) approximations, as his paper and Montgomery print
    them (for m = 7 his ME is 3.76·PSE against the exact 2.30: it flags a null column about
    2 % of the time instead of α), kept for reference."""
    from ybscale.analysis.lenth_critical import critical
    from ybscale.design.strata import MIN_COLUMNS

    c = np.abs(np.asarray(effects, dtype=float))
    m = len(c)
    s0 = 1.5 * float(np.median(c)) if m else math.nan
    kept = c[c < 2.5 * s0]
    pse = 1.5 * float(np.median(kept)) if len(kept) else 0.0
    d = m / 3.0
    gamma = (1.0 + (1.0 - alpha) ** (1.0 / m)) / 2.0 if m else math.nan
    ier, eer = critical(m, alpha) if m >= MIN_COLUMNS else (math.nan, math.nan)
    return {
        "s0": s0,
        "pse": pse,
        "d": d,
        "gamma": gamma,
        "ier": ier,
        "eer": eer,
        "me": ier * pse,
        "sme": eer * pse,
        "me_t": float(stdtrit(d, 1.0 - alpha / 2.0)) * pse if m else math.nan,
        "sme_t": float(stdtrit(d, gamma)) * pse if m else math.nan,
    }


def term_sum_sq(effect: pd.Series, n: int) -> pd.Series:
    """Sum of squares of each two-level term from its effect: N (effect / 2)^2."""
    return n * (effect / 2.0) ** 2


def _variation(design, y: pd.Series, effect: pd.Series) -> tuple[pd.Series, float, float]:
    """(SS per term, SST, SSE); SSE = SST − ΣSS (pure error, 0 when unreplicated)."""
    sum_sq = term_sum_sq(effect, len(y))
    sst = float(((y - y.mean()) ** 2).sum())
    sse = max(sst - float(sum_sq.sum()), 0.0) if design.replications > 1 else 0.0
    return sum_sq, sst, sse


def _lenth_columns(effect: pd.Series, alpha: float) -> tuple[pd.DataFrame, dict]:
    info = lenth(effect.to_numpy(), alpha)
    out = pd.DataFrame(index=effect.index)
    out["std_error"] = info["pse"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["standardized"] = effect / info["pse"]
    out["me"] = info["me"]
    out["sme"] = info["sme"]
    out["ci_low"] = effect - info["me"]
    out["ci_high"] = effect + info["me"]
    out["p_value"] = out["p_adjusted"] = out["me_adjusted"] = math.nan
    out["active"] = effect.abs() > info["me"]
    out["active_sme"] = effect.abs() > info["sme"]
    out["method"] = "lenth"
    out["multiplicity"] = "none"
    out["df"] = math.nan  # Lenth: no error df (the margins are Ye & Hamada's)
    return out, info


def _t_columns(
    effect: pd.Series,
    sse: float,
    n_rows: int,
    r: int,
    alpha: float,
    df_block: int = 0,
    rule: str = mult.DEFAULT,
    df_center: int = 0,
) -> tuple[pd.DataFrame, dict]:
    df_error = n_rows * (r - 1) - df_block + df_center
    s_e = math.sqrt(sse / df_error)
    s_q = s_e / math.sqrt(n_rows * r)
    out, info = _t_tests(effect, 2.0 * s_q, df_error, alpha, rule)
    return out, {"s_e": s_e, "s_q": s_q, **info}


def _t_tests(
    effect: pd.Series, se, df_error: int, alpha: float, rule: str
) -> tuple[pd.DataFrame, dict]:
    """Each column's t test on `df_error` df: `se` the standard error of an effect, one for
    every column or one per column (a Series on the effects' index)."""
    se = pd.Series(se, index=effect.index, dtype=float)
    t = float(stdtrit(df_error, 1.0 - alpha / 2.0))
    half = t * se
    out = pd.DataFrame(index=effect.index)
    out["std_error"] = se
    with np.errstate(divide="ignore", invalid="ignore"):
        out["standardized"] = effect / se
        p = 2.0 * stdtr(df_error, -np.abs(out["standardized"].to_numpy()))
    out["me"] = half
    out["sme"] = math.nan
    out["ci_low"] = effect - half
    out["ci_high"] = effect + half
    out["p_value"] = p
    out["p_adjusted"] = mult.adjust(p, rule)
    cut = mult.cut_p(out["p_adjusted"], rule, alpha)
    out["me_adjusted"] = -float(stdtrit(df_error, cut / 2.0)) * se
    out["active"] = out["p_adjusted"] < alpha
    out["active_sme"] = False
    out["method"] = "t"
    out["multiplicity"] = rule
    out["df"] = float(df_error)
    return out, {"df_error": df_error, "t": t, "cut_p": cut}


def estimate_effects(
    design,
    responses: pd.Series,
    alpha: float = 0.05,
    model: str = "additive",
    noise_se: pd.Series | None = None,
    blocks: bool | pd.Series | None = None,
    multiplicity: str = mult.DEFAULT,
    center=None,
) -> pd.DataFrame:
    """Effects table (see COLUMNS), sorted by |effect| descending; r >= 2 (or centre points)
    adds an 'error' line. ``center``: the centre runs' responses (a Series), or a
    `ybscale.analysis.centre.Centre` (their blocks and the levels of the factors without a
    middle: in blocks or beside such a factor, every column is t-tested on the pure error of
    `ybscale.analysis.centre`'s fit).

    ``responses`` holds one value per run id (replicates included); ``noise_se`` each run's
    standard error of measurement; ``blocks`` (True: the replicates; or run -> block labels)
    takes the blocks out of the error (r >= 2; None: completely randomized); ``multiplicity``
    the rule over the columns tested (r >= 2). Summary numbers (mean, SST, SSE, PSE or s_e,
    noise, columns tested, ...) are in ``result.attrs``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    mult.check_rule(multiplicity)
    raw = aligned_responses(design, responses)
    y = transform(raw, model)
    effect = contrasts(design, y)
    sum_sq, sst, sse = _variation(design, y, effect)
    r = design.replications
    labels = block_labels(design, y.index, blocks)
    blocks = labels is not None
    ss_block = block_sum_sq(y, labels) if blocks else 0.0
    df_block = labels.nunique() - 1 if blocks else 0
    sse = max(sse - ss_block, 0.0)
    confounded = block_columns(design, y.index, labels)  # unreplicated: the block's columns
    effect, sum_sq = effect.drop(confounded), sum_sq.drop(confounded)
    from ybscale.analysis.centre import Centre

    if isinstance(center, Centre) and center.needs_fit():
        crossed = center.transformed(lambda v: transform(v, model))
        options = (alpha, model, noise_se, multiplicity)
        return _centre_effects(design, raw, y, crossed, labels, confounded, *options)
    if isinstance(center, Centre):
        center = center.values
    curvature = center_points(y, center, model)
    if curvature:  # the centre points' pure error joins the replicates' (Montgomery §6.8)
        sse += curvature["ss_pure_error"]
    df_center = curvature.get("df_pure_error", 0)
    if r > 1 or df_center > 0:
        sig, info = _t_columns(
            effect, sse, design.n_rows, r, alpha, df_block, multiplicity, df_center
        )
    else:
        sig, info = _lenth_columns(effect, alpha)
    table = pd.DataFrame(
        {
            "term": effect.index,
            "alias": [design.alias_string(t) for t in effect.index],
            "effect": effect.to_numpy(),
            "coefficient": effect.to_numpy() / 2.0,
            "sum_sq": sum_sq.to_numpy(),
            "variation_pct": _pct(sum_sq.to_numpy(), sst),
        }
    )
    table = pd.concat([table, sig.reset_index(drop=True)], axis=1)
    table["model"] = model
    band = noise_band(design, raw, noise_se, model, alpha) if noise_se is not None else math.nan
    table["noise"] = band
    table["below_noise"] = table["effect"].abs() < band if math.isfinite(band) else False
    table = table.sort_values("effect", key=np.abs, ascending=False, kind="stable")
    if blocks:
        alias = "; ".join(design.alias_string(t) for t in confounded)
        block = _error_line(ss_block, sst, model, BLOCK_TERM, alias)
        table = pd.concat([table, block], ignore_index=True)
    if r > 1 or df_center > 0:
        table = pd.concat([table, _error_line(sse, sst, model)], ignore_index=True)
    table = table.reset_index(drop=True)[COLUMNS]
    table.attrs.update(
        {
            "mean": float(y.mean()),
            "sst": sst,
            "sse": sse,
            "ss_block": ss_block,
            "df_block": df_block,
            "noise": band,
            "alpha": alpha,
            "model": model,
            "multiplicity": multiplicity if r > 1 or df_center > 0 else "none",
            "curvature": curvature,
            "columns": len(effect),
            "block_columns": confounded,
            **info,
        }
    )
    return table


def _centre_effects(
    design, raw, y, centre, labels, confounded, alpha, model, noise_se, multiplicity
) -> pd.DataFrame:
    """The effects table of centre runs in blocks or beside a factor without a middle: every
    column's effect, standard error and t test from `ybscale.analysis.centre.fit_centre`, on
    its pure error (the ANOVA's error too); the block line's sum of squares from every run."""
    from ybscale.analysis.centre import fit_centre

    fit = fit_centre(design, y, centre, labels, confounded)
    effect, sum_sq = fit.effect, fit.sum_sq
    sig, info = _t_tests(effect, fit.std_error, fit.df_pe, alpha, multiplicity)
    table = pd.DataFrame(
        {
            "term": effect.index,
            "alias": [design.alias_string(t) for t in effect.index],
            "effect": effect.to_numpy(),
            "coefficient": effect.to_numpy() / 2.0,
            "sum_sq": sum_sq.to_numpy(),
            "variation_pct": _pct(sum_sq.to_numpy(), fit.sst),
        }
    )
    table = pd.concat([table, sig.reset_index(drop=True)], axis=1)
    table["model"] = model
    band = noise_band(design, raw, noise_se, model, alpha) if noise_se is not None else math.nan
    table["noise"] = band
    table["below_noise"] = table["effect"].abs() < band if math.isfinite(band) else False
    table = table.sort_values("effect", key=np.abs, ascending=False, kind="stable")
    lines = [table]
    if labels is not None:
        alias = "; ".join(design.alias_string(t) for t in confounded)
        lines.append(_error_line(fit.ss_block, fit.sst, model, BLOCK_TERM, alias))
    lines.append(_error_line(fit.ss_pe, fit.sst, model))
    table = pd.concat(lines, ignore_index=True)[COLUMNS]
    s_e = math.sqrt(fit.ms_pe) if fit.ms_pe >= 0 else math.nan
    table.attrs.update(
        {
            "mean": float(y.mean()),
            "sst": fit.sst,
            "sse": fit.ss_pe,
            "ss_block": fit.ss_block,
            "df_block": fit.df_block,
            "noise": band,
            "alpha": alpha,
            "model": model,
            "multiplicity": multiplicity,
            "curvature": fit.curvature_info(),
            "columns": len(effect),
            "block_columns": list(confounded),
            "s_e": s_e,
            **info,
        }
    )
    return table


def center_points(y: pd.Series, center: pd.Series | None, model: str) -> dict:
    """The centre points' test of curvature (Montgomery, 8th ed., §6.8): with n_F factorial
    runs (mean ȳ_F) and n_C centre runs (mean ȳ_C), SS_curvature = n_F n_C (ȳ_F − ȳ_C)² /
    (n_F + n_C) on 1 df, against the centre points' pure error (their own spread, n_C − 1 df):
    F, p, and the curvature ȳ_F − ȳ_C with its standard error sqrt(MS_PE (1/n_F + 1/n_C)).
    {} without centre points; fewer than two give no pure error (no F)."""
    if center is None or len(center) == 0:
        return {}
    from scipy import stats

    yc = transform(center.astype(float), model)
    n_f, n_c = len(y), len(yc)
    diff = float(y.mean() - yc.mean())
    ss = n_f * n_c * diff**2 / (n_f + n_c)
    ss_pe = float(((yc - yc.mean()) ** 2).sum())
    df_pe = n_c - 1
    out = {"n_center": n_c, "center_mean": float(yc.mean()),
           "factorial_mean": float(y.mean()), "difference": diff, "ss": ss,
           "ss_pure_error": ss_pe, "df_pure_error": df_pe}  # fmt: skip
    if df_pe > 0 and ss_pe > 0:
        ms_pe = ss_pe / df_pe
        f = ss / ms_pe
        out |= {"ms_pure_error": ms_pe, "f": f, "p": float(stats.f.sf(f, 1, df_pe)),
                "std_error": math.sqrt(ms_pe * (1 / n_f + 1 / n_c))}  # fmt: skip
    return out


def _pct(sum_sq, sst: float):
    """Share of SST in percent (NaN when SST is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return 100.0 * np.asarray(sum_sq, dtype=float) / sst if sst > 0 else np.nan * sum_sq


def _error_line(
    sse: float, sst: float, model: str, term: str = ERROR_TERM, alias: str = ""
) -> pd.DataFrame:
    """The 'error' (or 'block') line of the allocation of variation (`alias`: the columns an
    unreplicated design's blocks are confounded with)."""
    row = {c: math.nan for c in COLUMNS}
    row.update(
        term=term,
        alias=alias,
        sum_sq=sse,
        variation_pct=float(_pct(np.array([sse]), sst)[0]),
        active=False,
        active_sme=False,
        method="t",
        model=model,
        below_noise=False,
    )
    return pd.DataFrame([row])
