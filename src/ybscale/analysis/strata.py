"""Each error stratum's statistics (see `ybscale.design.strata` for the partition): Lenth with
critical values for the stratum's number of columns (Ye & Hamada 2000; tabulated to 0.1 % in
`ybscale.analysis.lenth_critical`), and statsmodels MixedLM with the cluster as a random effect
when replicates ran on clusters of their own."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ybscale.design.strata import MIN_COLUMNS, SINGLE, SUB, WHOLE


def stratum_lenth(effects, alpha: float = 0.05) -> dict:
    """Lenth on one stratum's effects with its tabulated critical values: pse, me, sme and the
    boolean arrays active (|effect| > me) and active_sme."""
    import numpy as np

    from ybscale.analysis.effects import lenth

    e = np.asarray(effects, dtype=float)
    info = lenth(e, alpha)  # the one rule: Ye & Hamada's critical values
    pse, me, sme = info["pse"], info["me"], info["sme"]
    return {
        "pse": pse,
        "me": me,
        "sme": sme,
        "active": np.abs(e) > me,
        "active_sme": np.abs(e) > sme,
    }


def _untested(table, mask) -> None:
    import numpy as np

    for c in ("std_error", "standardized", "me", "sme", "ci_low", "ci_high"):
        table.loc[mask, c] = np.nan
    table.loc[mask, "active"] = False
    table.loc[mask, "active_sme"] = False


def judge(table, strata: Mapping[str, str], alpha: float = 0.05):
    """The effects table with a ``stratum`` column and, when there are two strata, the columns
    of each judged against its own stratum (module docstring)."""
    out = table.copy()
    terms = out["term"].astype(str)
    out["stratum"] = terms.map(lambda t: strata.get(t, "")).to_numpy()
    if set(strata.values()) == {SINGLE}:
        return out
    replicated = bool((out["method"] == "t").any())
    for stratum in (WHOLE, SUB):
        mask = (out["stratum"] == stratum).to_numpy()
        if replicated and stratum == SUB:
            continue  # pure error: replicates on the same cluster (module docstring)
        m = int(mask.sum())
        if m < MIN_COLUMNS:
            _untested(out, mask)
            continue
        effect = out.loc[mask, "effect"].astype(float)
        found = stratum_lenth(effect.to_numpy(), alpha)
        pse, me = found["pse"], found["me"]
        out.loc[mask, "std_error"] = pse
        out.loc[mask, "standardized"] = effect / pse if pse > 0 else math.nan
        out.loc[mask, "me"] = me
        out.loc[mask, "sme"] = found["sme"]
        out.loc[mask, "ci_low"] = effect - me
        out.loc[mask, "ci_high"] = effect + me
        out.loc[mask, "active"] = found["active"]
        out.loc[mask, "active_sme"] = found["active_sme"]
        out.loc[mask, "method"] = "lenth"
        if "df" in out.columns:
            out.loc[mask, "df"] = math.nan
    return out


def stratum_errors(effects, anova):
    """A split plot's effects table with the ANOVA's error lines, one ``error`` line per stratum
    (its sum of squares and share of the total, ``stratum`` whole or sub), in place of the
    unstratified fit's ``error`` and ``block`` lines: every line belongs to a stratum. Other
    tables are returned as they are."""
    import pandas as pd

    from ybscale.analysis.terms import BLOCK_TERM, ERROR_TERM, RESIDUAL, WHOLE_ERROR

    if "stratum" not in anova or WHOLE not in set(anova["stratum"]):
        return effects
    kept = effects[~effects["term"].astype(str).isin([ERROR_TERM, BLOCK_TERM])]
    sst = effects.attrs.get("sst", math.nan)
    lines = []
    for _, line in anova[anova["term"].isin([WHOLE_ERROR, RESIDUAL])].iterrows():
        row = dict.fromkeys(effects.columns, math.nan)
        ss = float(line["sum_sq"])
        row.update(
            term=ERROR_TERM,
            alias="",
            sum_sq=ss,
            variation_pct=100 * ss / sst if sst > 0 else math.nan,
            active=False,
            active_sme=False,
            below_noise=False,
            method="t",
            model=effects["model"].iloc[0] if len(effects) else "",
            stratum=line["stratum"],
        )
        lines.append(row)
    out = pd.concat([kept, pd.DataFrame(lines, columns=effects.columns)], ignore_index=True)
    out.attrs = dict(effects.attrs)
    return out


def mixed_applies(strata: Mapping[str, str], clusters: Mapping[str, str], reps: int) -> bool:
    """Replicates on clusters of their own: the cluster-to-cluster variance has df (MixedLM)."""
    whole = sum(1 for s in strata.values() if s == WHOLE)
    n = len(set(clusters.values()))
    return reps > 1 and whole > 0 and n - 1 - whole >= 1


def mixed(
    table,
    design,
    z,
    clusters: Mapping[str, str],
    strata: Mapping[str, str],
    alpha=0.05,
    multiplicity: str = "holm",
):
    """Replicated split plot: statsmodels MixedLM of z on every term with a random intercept per
    cluster (REML); each column's t test and interval use its stratum's df (whole plot:
    clusters − 1 − whole-plot columns; sub plot: runs − clusters − sub-plot columns), and the
    p-values are adjusted over the columns by `multiplicity` (analysis.multiplicity): active
    when the adjusted p < α, `me_adjusted` the rule's cut on |effect| in each stratum."""
    import numpy as np
    import statsmodels.formula.api as smf
    from scipy import stats

    from ybscale.analysis import multiplicity as mult

    x = design.model_matrix().loc[z.index].astype(float)
    data = x.rename(columns=lambda t: f"t_{t}")
    data["z"] = z.to_numpy()
    data["cluster"] = [clusters.get(r, r) for r in z.index]
    formula = "z ~ " + " + ".join(f"t_{t}" for t in x.columns)
    fit = smf.mixedlm(formula, data, groups=data["cluster"]).fit(reml=True)
    n_clusters = data["cluster"].nunique()
    whole = sum(1 for s in strata.values() if s == WHOLE)
    df = {WHOLE: n_clusters - 1 - whole, SUB: len(z) - n_clusters - (len(strata) - whole)}
    out = table.copy()
    rows = [i for i, term in out["term"].astype(str).items() if term in strata]
    dfs = {}
    for i in rows:
        term = str(out.loc[i, "term"])
        effect, se = 2 * float(fit.params[f"t_{term}"]), 2 * float(fit.bse[f"t_{term}"])
        dfs[i] = max(df[strata[term]], 1)
        half = float(stats.t.ppf(1 - alpha / 2, dfs[i])) * se
        out.loc[i, ["std_error", "me"]] = [se, half]
        out.loc[i, ["ci_low", "ci_high"]] = [effect - half, effect + half]
        out.loc[i, "standardized"] = effect / se if se > 0 else math.nan
        out.loc[i, "p_value"] = float(2 * stats.t.sf(abs(effect / se), dfs[i])) if se > 0 else 1.0
        out.loc[i, "method"] = "t"
        out.loc[i, "df"] = float(dfs[i])
    adjusted = mult.adjust(out.loc[rows, "p_value"].astype(float), multiplicity)
    cut = mult.cut_p(adjusted, multiplicity, alpha)
    out.loc[rows, "p_adjusted"] = adjusted
    out.loc[rows, "active"] = adjusted < alpha
    out.loc[rows, "multiplicity"] = multiplicity
    for i in rows:
        out.loc[i, "me_adjusted"] = out.loc[i, "std_error"] * stats.t.isf(cut / 2, dfs[i])
    out.loc[rows, "sme"] = np.nan  # no simultaneous margin for a t test (as effects' t rows)
    out.loc[rows, "active_sme"] = False
    out.attrs["columns"] = len(rows)
    out.attrs["cluster_variance"] = float(fit.cov_re.iloc[0, 0])
    return out
