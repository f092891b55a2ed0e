"""The findings' **Error strata** paragraph, from an effects table's ``stratum`` column."""

from __future__ import annotations

from collections.abc import Mapping

from ybscale.design.strata import MIN_COLUMNS, SUB, WHOLE, strata_of_effects, stratified


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
