"""A study's rounds: more replicates of the design while a column's verdict is open.

Round 0 measures the design as written (its ``replications``). After each round the study's
checkpoint (rules/analysis.smk, ybscale.analysis.rounds) judges every column against
``analysis.relevant``; while some are undecided and ``measurement.budget`` allows, round n + 1
adds one replicate of every row: ordinary rows (``run17`` … ``run32`` for a 16-row design),
each on a fresh cluster of its own replicate, measured in the order drawn from
``measurement.seed`` (one block per replicate, after the rows before it), and re-runnable by
target path. This module is the design's side: how many replicates the budget allows (the rows
Snakemake knows of, and `ybscale plan` prices as the worst case) and which runs a round holds.

The budget (``measurement.budget``): ``replicates`` (the most replicates in all, the design's
own included) and/or ``seconds`` (the most seconds of measurement, all rows' measuring time
added up: a round is added only when the seconds measured so far and one more replicate at
the mean seconds per replicate measured so far stay within it). Designs with centre points or
blocks, and studies whose rows share clusters (gcp's clusters per combination, local.cluster_per:
combination: the clusters are then the blocks of the run order, drawn over every replicate at
once, and a later round's cluster would come before an earlier one's), are measured as
written.
A budget whose replicates would widen the run ids (``run001``) is held below that width, so a
row's id never changes with the budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

SECONDS_ONLY_MOST = 8  # with a budget in seconds alone: the most replicates Snakemake knows of


def budget(settings: Mapping) -> dict:
    """``measurement.budget`` as given ({} when unset)."""
    return dict(settings["measurement"].get("budget") or {})


def most_replicates(settings: Mapping, design) -> int:
    """The most replicates a study of `design` may measure in all (its own when the budget
    allows no more, or the design has centre points or blocks)."""
    own = design.replications
    given = budget(settings)
    if design.center_points or design.blocks > 1 or not given:
        return own
    most = int(given.get("replicates", SECONDS_ONLY_MOST))
    width = len(str(design.n_runs + design.n_center))
    while most > own and len(str(design.n_rows * most)) > max(2, width):
        most -= 1  # the run ids keep their width (module docstring)
    return max(own, most)


def with_replicates(design, replicates: int):
    """The design with `replicates` replicates of every row."""
    if replicates == design.replications:
        return design
    return dataclasses.replace(design, replications=int(replicates))


def runs_of(design, replicates: int) -> list[str]:
    """The runs of the first `replicates` replicates (run ids as `design` numbers them)."""
    return list(design.run_ids[: design.n_rows * replicates]) + list(design.center_run_ids)


def replicate_of(design, run: str) -> int:
    """The replicate (1, 2, …) a factorial run belongs to."""
    return design.run_ids.index(run) // design.n_rows + 1


def shares_clusters(clusters: Mapping[str, str]) -> bool:
    """Whether two rows share a cluster (run -> cluster label `clusters`)."""
    return len(set(clusters.values())) < len(clusters)
