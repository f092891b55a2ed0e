"""A study: settings, design and resolved rows, every level checked before anything starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ybscale.backends import backend_class, get_backend
from ybscale.design import rounds
from ybscale.design.factorial import Design, load_design
from ybscale.design.row import Row, RowError, resolve_rows
from ybscale.settings import load as load_settings


@dataclass(frozen=True)
class Study:
    """The validated config (defaults filled), the design and one resolved row per run."""

    settings: dict
    design: Design  # with every replicate measurement.budget allows (ybscale.design.rounds)
    rows: list[Row]
    base_replicates: int = 1  # the design's own replications: round 0

    def row(self, run: str) -> Row:
        """The row of a run id; ValueError naming the design file and the valid ids."""
        for row in self.rows:
            if row.run == run:
                return row
        ids = [r.run for r in self.rows]
        raise ValueError(
            f"{self.design.source}: no design row {run!r}; rows are {ids[0]}..{ids[-1]}"
        )

    @property
    def cluster_of(self) -> dict[str, str]:
        """Run id -> the cluster it runs on (`cluster_of`)."""
        return cluster_of(self.settings, self.rows)

    @property
    def clusters(self) -> dict[str, list[str]]:
        """Cluster label -> its runs (rows sharing a cluster), as the backend labels them
        (`Backend.cluster_labels`; gcp: a combination's, per replicate by default)."""
        labels = self.cluster_of
        out: dict[str, list[str]] = {}
        for row in self.rows:
            out.setdefault(labels[row.run], []).append(row.run)
        return dict(sorted(out.items()))


def cluster_of(settings: Mapping, rows) -> dict[str, str]:
    """Run id -> the cluster it ran on (a label; equal labels: the same cluster), as the
    backend tells (`Backend.cluster_labels`)."""
    return backend_class(settings["backend"]).cluster_labels(settings, rows)


def load(config: Mapping, design_path: str | None = None, budget: bool = False) -> Study:
    """Validate the config, load the design, resolve and check every row on the backend; with
    `budget`, every replicate measurement.budget allows (`rounds.most_replicates`: the rows
    later rounds may measure, which the workflow knows of from the start)."""
    settings = load_settings(config)
    written = load_design(design_path or settings["design"])
    most = rounds.most_replicates(settings, written) if budget else written.replications
    design = rounds.with_replicates(written, most)
    rows = resolve_rows(design, settings)
    if most > written.replications and rounds.shares_clusters(cluster_of(settings, rows)):
        design, rows = written, resolve_rows(written, settings)  # no rounds (rounds docstring)
    errors = get_backend(settings).check_rows(rows)
    if errors:
        raise RowError("\n".join(errors))
    return Study(settings, design, rows, written.replications)


# ---------------------------------------------------------------------------- prices


def hourly_prices(settings: Mapping, rows) -> dict[str, dict]:
    """Run id -> ``{"price_per_hour", "price_basis"}``: what the row's cluster costs per hour
    and how that figure was obtained (written into ceilings.csv beside throughput_per_dollar),
    as the backend prices it (`Backend.hourly_price`: gcp, the prices table `ybscale plan`
    uses; local and existing, the user's price table or a price per vCPU of the quota)."""
    backend = backend_class(settings["backend"])
    return {row.run: backend.hourly_price(settings, row) for row in rows}
