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

This module is the partition (which columns are whole-plot, which sub-plot) and its words
for the design; the rows' clusters come from the backend (`ybscale.study.Study.clusters`), each
stratum's statistics are in `ybscale.analysis.strata`, the findings' paragraph in
`ybscale.report.strata_text`.
"""

from __future__ import annotations

from collections.abc import Mapping

SINGLE = "single"
WHOLE = "whole-plot"
SUB = "sub-plot"
MIN_COLUMNS = 4


# ---------------------------------------------------------------------------- clusters


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


def strata_of_effects(effects) -> dict[str, str]:
    """Term -> stratum as an effects table records it ({} for tables written before it)."""
    if "stratum" not in effects.columns:
        return {}
    rows = effects[effects["stratum"].notna() & (effects["stratum"].astype(str) != "")]
    return dict(zip(rows["term"].astype(str), rows["stratum"].astype(str), strict=True))


def stratified(effects) -> bool:
    """Whether an effects table judged its columns in two strata."""
    return bool(set(strata_of_effects(effects).values()) & {WHOLE, SUB})


def format_strata(design, clusters: Mapping[str, str], backend: str) -> str:
    """`ybscale plan`'s lines: how the rows share clusters and, with more than one stratum,
    the columns of each (whole-plot: constant within every cluster)."""
    strata = column_strata(design, clusters)
    if all(s == SINGLE for s in strata.values()):  # one stratum: no column to list
        return f"Error strata ({note(design, clusters, backend)})"
    n = len(set(clusters.get(r, r) for r in design.run_ids))
    judged = {
        WHOLE: "against the cluster-to-cluster noise",
        SUB: "against the noise within a cluster",
    }
    lines = [f"Error strata ({backend}: {design.n_runs} runs on {n} clusters):"]
    for stratum in (WHOLE, SUB):
        columns = [t for t, s in strata.items() if s == stratum]
        lines.append(f"  {stratum} ({judged[stratum]}): {', '.join(columns)}")
    return "\n".join(lines)
