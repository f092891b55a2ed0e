"""Error strata: which rows shared a cluster, and the noise each column is judged against.

Which rows share a cluster depends on the backend:

* ``local``: by default every row starts a fresh cluster, so cluster-to-cluster variation is
  part of every row's error alike: one stratum (``single``), every column judged against the
  same noise. With ``local.cluster_per: combination`` the rows of a combination share one (per
  replicate), as on gcp.
* ``gcp``: one cluster per infrastructure combination (the rows differing only in session or
  workload knobs share it) and per replicate (``gcp.cluster_per_replicate``, default true:
  replicate k >= 2 on ``<combination>-r<k>``; false: the replicates reuse the combination's).
* ``existing``: the endpoints you configured: rows whose combinations point at the same
  endpoints share a cluster (one for all when every combination names the same hosts).

When clusters are shared the design is a split plot (Bisgaard 2000; Loeppky & Sitter 2002): the
columns constant within every cluster are **whole-plot** columns and carry the cluster-to-cluster
noise; the others (**sub-plot**) do not, since it cancels within each cluster. Pooling both in
one Lenth analysis judges whole-plot columns against the smaller sub-plot noise. So each stratum
gets its own Lenth analysis, with the critical values computed for its number of columns by
simulation (Ye & Hamada 2000: with 7 or 8 columns Lenth's t(m/3) approximation flags a null
column 2 % of the time instead of α), individual (ME) and simultaneous (SME). A stratum with
fewer than ``MIN_COLUMNS`` columns has no noise estimate: its columns are not tested (``me``
empty, never active), and the findings say so. With replicates that reuse their cluster the
sub-plot columns keep the replicate (pure-error) t test (that error holds no cluster-to-cluster
variance) and the whole-plot columns get Lenth among themselves; with replicates on clusters of
their own (gcp's default) the cluster variance has degrees of freedom and ``mixed`` fits
statsmodels MixedLM with the cluster as a random effect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

SINGLE = "single"
WHOLE = "whole-plot"
SUB = "sub-plot"
MIN_COLUMNS = 4
SIMULATIONS = 200_000
SEED = 20000  # Ye & Hamada (2000)


# ---------------------------------------------------------------------------- clusters


def cluster_of(settings: Mapping, rows) -> dict[str, str]:
    """Run id -> the cluster it ran on (a label; equal labels: the same cluster), as the
    backend tells (`Backend.cluster_labels`)."""
    from ybscale.backends import backend_class

    return backend_class(settings["backend"]).cluster_labels(settings, rows)


def column_strata(design, clusters: Mapping[str, str]) -> dict[str, str]:
    """Term -> whole-plot | sub-plot, or single for every term when there is one stratum."""
    matrix = design.model_matrix()
    cluster = [clusters.get(run, run) for run in matrix.index]
    constant = matrix.groupby(cluster).nunique().eq(1).all()  # one groupby, not runs × terms
    whole = [t for t in design.terms if bool(constant[t])]
    if not whole or len(whole) == len(design.terms):
        return {t: SINGLE for t in design.terms}
    return {t: WHOLE if t in whole else SUB for t in design.terms}


def parse_clusters(items: list[str] | None) -> dict[str, str]:
    """``["run01=c1", ...]`` (the rules' ``--clusters``) -> {run: cluster}."""
    out = {}
    for item in items or []:
        run, sep, cluster = item.partition("=")
        if not sep or not run or not cluster:
            raise ValueError(f"--clusters: {item!r} is not RUN=CLUSTER")
        out[run] = cluster
    return out


def describe(design, clusters: Mapping[str, str], backend: str) -> dict:
    """design.json's ``strata``: the backend, its clusters and each column's stratum."""
    strata = column_strata(design, clusters)
    groups: dict[str, list[str]] = {}
    for run in design.run_ids:
        groups.setdefault(clusters.get(run, run), []).append(run)
    return {
        "backend": backend,
        "clusters": groups,
        "columns": strata,
        "note": note(design, clusters, backend),
    }


def note(design, clusters: Mapping[str, str], backend: str) -> str:
    """One sentence: how the rows shared clusters and what that means for the error."""
    strata = column_strata(design, clusters)
    n = len(set(clusters.get(r, r) for r in design.run_ids))
    if all(s == SINGLE for s in strata.values()):
        if n == design.n_runs:
            return (
                f"{backend}: every row runs on a fresh cluster, so every column is judged against "
                "the same noise (one stratum)"
            )
        return (
            f"{backend}: {design.n_runs} runs on {n} cluster(s), and no column is constant within "
            "every cluster: one stratum"
        )
    whole = [t for t, s in strata.items() if s == WHOLE]
    sub = [t for t, s in strata.items() if s == SUB]
    return (
        f"{backend}: {design.n_runs} runs on {n} clusters; the whole-plot columns "
        f"{', '.join(whole)} are constant within every cluster and judged against the "
        f"cluster-to-cluster noise, the sub-plot columns {', '.join(sub)} against the noise "
        "within a cluster"
    )


# ---------------------------------------------------------------------------- judging


@lru_cache(maxsize=64)
def lenth_critical(m: int, alpha: float = 0.05) -> tuple[float, float]:
    """(individual, simultaneous) critical values of |effect|/PSE for m null effects, by
    simulation (Ye & Hamada 2000), seeded: the same numbers on every machine."""
    import numpy as np

    rng = np.random.default_rng(SEED + m)
    c = np.abs(rng.standard_normal((SIMULATIONS // m + 1, m)))
    s0 = 1.5 * np.median(c, axis=1, keepdims=True)
    kept = np.where(c < 2.5 * s0, c, np.nan)
    pse = 1.5 * np.nanmedian(kept, axis=1, keepdims=True)
    t = c / pse
    return float(np.quantile(t, 1 - alpha)), float(np.quantile(t.max(axis=1), 1 - alpha))


def stratum_lenth(effects, alpha: float = 0.05) -> dict:
    """Lenth on one stratum's effects with its simulated critical values: pse, me, sme and the
    boolean arrays active (|effect| > me) and active_sme."""
    import numpy as np

    from ybscale.analysis.effects import lenth

    e = np.asarray(effects, dtype=float)
    pse = lenth(e, alpha)["pse"]
    ier, eer = lenth_critical(len(e), alpha)
    me, sme = ier * pse, eer * pse
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
    return out


def strata_of_effects(effects) -> dict[str, str]:
    """Term -> stratum as an effects table records it ({} for tables written before it)."""
    if "stratum" not in effects.columns:
        return {}
    rows = effects[effects["stratum"].notna() & (effects["stratum"].astype(str) != "")]
    return dict(zip(rows["term"].astype(str), rows["stratum"].astype(str), strict=True))


def stratified(effects) -> bool:
    """Whether an effects table judged its columns in two strata."""
    return bool(set(strata_of_effects(effects).values()) & {WHOLE, SUB})


def findings_text(
    effects, backend: str, number=lambda v: f"{v:.3g}", clusters: Mapping[str, str] | None = None
) -> list[str]:
    """The findings' **Error strata** paragraph from an effects table's ``stratum`` column;
    `clusters` (run -> the cluster it ran on, the rules' ``--clusters``) says why one stratum."""
    strata = strata_of_effects(effects)
    if not strata:
        return []
    if not stratified(effects):
        labels = list((clusters or {}).values())
        shared = (
            ""
            if not labels
            else ": every row ran on a fresh cluster, so cluster-to-cluster variation is in "
            "every row's error alike"
            if len(set(labels)) == len(labels)
            else f": {len(labels)} rows shared {len(set(labels))} cluster(s) and no column is "
            "constant within every cluster"
        )
        return [f"**Error strata.** One stratum ({backend}){shared}; every column is judged "
                "against the same noise."]  # fmt: skip
    terms = effects.set_index(effects["term"].astype(str))
    whole_cols = [t for t, s in strata.items() if s == WHOLE]
    # a whole-plot column is t-judged only by MixedLM (replicates on clusters of their own)
    fitted = str(terms.loc[whole_cols[0], "method"]) == "t"
    parts = []
    for stratum, what in ((WHOLE, "cluster-to-cluster"), (SUB, "within-cluster")):
        cols = [t for t, s in strata.items() if s == stratum]
        me = terms.loc[cols, "me"].astype(float)
        if me.isna().all():
            parts.append(
                f"the {len(cols)} {stratum} column(s) {', '.join(cols)} are too few (fewer than "
                f"{MIN_COLUMNS}) for a noise estimate of their own: not tested"
            )
            continue
        method = str(terms.loc[cols[0], "method"])
        how = (
            f"Lenth within the stratum: PSE {number(float(terms.loc[cols[0], 'std_error']))}, "
            f"ME {number(float(me.iloc[0]))}, SME {number(float(terms.loc[cols[0], 'sme']))}"
            if method == "lenth"
            else "statsmodels MixedLM with the cluster as a random effect: replicates ran on "
            "clusters of their own, a t interval on the stratum's degrees of freedom"
            if fitted
            else "the replicate error: replicates reused their cluster, so this error holds "
            "no cluster-to-cluster variance"
        )
        parts.append(f"the {stratum} columns {', '.join(cols)} against the {what} noise ({how})")
    return [
        f"**Error strata.** On {backend} rows that differ only in session or workload knobs "
        "shared a cluster, so the design is a split plot: " + "; ".join(parts) + ". Pooling "
        "both strata would judge the whole-plot columns against the smaller within-cluster noise."
    ]


def format_strata(design, clusters: Mapping[str, str], backend: str) -> str:
    """`ybscale plan`'s lines: how the rows share clusters and each column's stratum."""
    strata = column_strata(design, clusters)
    columns = ", ".join(f"{t} {s}" for t, s in strata.items())
    return f"Error strata ({note(design, clusters, backend)}):\n  {columns}"


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
