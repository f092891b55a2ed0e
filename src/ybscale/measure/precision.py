"""Measure to a stated precision: per-second trimming and the sequential repetition rule.

Each repetition's throughput is taken from pgbench's per-second aggregate log with the first
`skip` seconds dropped (connection start-up and the ramp of the first second), so what is
averaged is steady-state work. Repetitions are added until the Student-t 95 % confidence
interval of the mean is within ±precision of the mean (Jain ch. 13, "number of measurements
for a given accuracy": n = (100·z·s / (r·x̄))²), with a floor of `min_repetitions` and a
ceiling of `max_repetitions`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def steady_tps(per_second, skip: int = 1) -> tuple[float, int]:
    """(mean tps over the whole seconds after the first `skip`, seconds used).

    `per_second` has `interval_start` and `num_transactions` columns, one entry per epoch
    second merged over threads and processes (`pgbench.parse_aggregate_logs`). The first
    interval starts when the first client connected and pgbench drops the final partial one;
    NaN when nothing is left after the skip.
    """
    starts = np.asarray(per_second["interval_start"], dtype=np.int64)
    counts = np.asarray(per_second["num_transactions"], dtype=float)
    if not len(starts):
        return math.nan, 0
    kept = starts >= starts.min() + skip
    if not kept.any():
        return math.nan, 0
    # seconds with no transaction at all are absent from the logs: count the span, not the lines
    span = int(starts[kept].max()) - int(starts[kept].min()) + 1
    return float(counts[kept].sum()) / span, span


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): Student-t interval of the mean; low = high = NaN below 2 values."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean()) if len(x) else math.nan
    if len(x) < 2:
        return mean, math.nan, math.nan
    # the t quantile (scipy.stats.t.ppf) from scipy.special: scipy.stats alone doubles a
    # measuring job's start; here: a job with one repetition never needs scipy
    from scipy.special import stdtrit

    half = float(stdtrit(len(x) - 1, 0.5 + confidence / 2)) * float(x.std(ddof=1))
    half /= math.sqrt(len(x))
    return mean, mean - half, mean + half


def relative_half_width(values: Sequence[float], confidence: float = 0.95) -> float:
    """Half the CI width divided by the mean (inf below 2 values or a zero mean)."""
    mean, low, high = mean_ci(values, confidence)
    if not (math.isfinite(low) and mean):
        return math.inf
    return (high - low) / 2 / abs(mean)


@dataclass
class Sequential:
    """State of the sequential rule for one client count; feed it with `add`."""

    precision: float = 0.03
    min_repetitions: int = 3
    max_repetitions: int = 10
    confidence: float = 0.95
    values: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.precision < 1:
            raise ValueError(f"precision must be in (0, 1), got {self.precision}")
        if not 1 <= self.min_repetitions <= self.max_repetitions:
            raise ValueError(
                f"need 1 <= min_repetitions ({self.min_repetitions}) <= max_repetitions "
                f"({self.max_repetitions})"
            )

    def add(self, value: float) -> None:
        """Record one repetition's throughput."""
        self.values.append(float(value))

    @property
    def met(self) -> bool:
        """The CI half-width is within ±precision of the mean."""
        return relative_half_width(self.values, self.confidence) <= self.precision

    @property
    def done(self) -> bool:
        """Stop: enough repetitions and the target met, or the maximum reached."""
        n = len(self.values)
        return n >= self.max_repetitions or (n >= self.min_repetitions and self.met)

    def summary(self) -> dict:
        """mean, CI, repetitions used and whether the target was met."""
        mean, low, high = mean_ci(self.values, self.confidence)
        return {
            "tps_mean": mean,
            "tps_ci_low": low,
            "tps_ci_high": high,
            "repetitions": len(self.values),
            "precision_met": bool(self.met),
        }


def batch_means(per_second, skip: int = 1) -> tuple[float, int]:
    """(standard error, degrees of freedom) of one repetition's steady tps from its own counted
    seconds, each second one batch (the method of batch means: Law & Kelton, Simulation
    Modeling and Analysis, 5th ed., §9.5.3; Schmeiser, Operations Research 30, 1982): the
    spread of the per-second throughput over the span `steady_tps` counts (a second with no
    transaction counts 0) / sqrt(batches). (NaN, 0) below two counted seconds. Batches of one
    second assume seconds nearly independent; a short repetition gives few batches and so a
    wide Student-t interval, never a narrow one."""
    starts = np.asarray(per_second["interval_start"], dtype=np.int64)
    counts = np.asarray(per_second["num_transactions"], dtype=float)
    if not len(starts):
        return math.nan, 0
    kept = starts >= starts.min() + skip
    if kept.sum() == 0:
        return math.nan, 0
    first = int(starts[kept].min())
    span = int(starts[kept].max()) - first + 1
    if span < 2:
        return math.nan, 0
    per = np.zeros(span)
    np.add.at(per, starts[kept] - first, counts[kept])
    return float(per.std(ddof=1) / math.sqrt(span)), span - 1
