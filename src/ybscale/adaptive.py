"""Adaptive client sweep: spend the measuring time where the ceiling is.

Client counts of the grid are measured in ascending order. The sweep stops once the two most
recently measured counts are both significantly below the best so far (`significantly_below`: a
one-sided Welch t test at `alpha`, or a prediction test for a count with one repetition). Unless
the best is the largest count measured (still rising: nothing to bracket), it then adds client
counts at the geometric midpoints between the best count and those of its measured neighbours
that are significantly below it, until each such neighbour is within a factor (1 +
peak_resolution) of the best, or no integer count lies between them. A neighbour within the
noise of the best means a plateau: the ceiling's value is known to the noise there, and a
midpoint would only add one more draw to the maximum. A count's repetitions also stop early once
it is significantly below the best so far (`clearly_below`): the precision target is for the
counts that can be the ceiling: `sweep` hands each count the best count's repetitions so far.
`grid` mode (the classical protocol) hands none, so every listed count is measured to the
precision rule, and never refines.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

SWEEPS = ("grid", "adaptive")


def significantly_below(values: Sequence[float], best: Sequence[float], alpha: float) -> bool:
    """mean(values) < mean(best) at level alpha: one-sided Welch t test; with a single value,
    the one-sided prediction test of one new observation from the best count's distribution,
    t = (mean(best) - x) / (s_best * sqrt(1 + 1/n_best)) with n_best - 1 degrees of freedom.
    The best count's spread stands in for the unknown spread of `values`; it is conservative
    where noise grows with throughput, since a count below the best is the quieter one."""
    a, b = np.asarray(values, dtype=float), np.asarray(best, dtype=float)
    if len(a) < 1 or len(b) < 2:
        return False
    if b.std(ddof=1) == 0 and (len(a) == 1 or a.std(ddof=1) == 0):
        return bool(a.mean() < b.mean())
    if len(a) == 1:
        t = (b.mean() - a[0]) / (b.std(ddof=1) * math.sqrt(1 + 1 / len(b)))
        return bool(stats.t.sf(t, len(b) - 1) < alpha)
    p = stats.ttest_ind(a, b, equal_var=False, alternative="less").pvalue
    return bool(p < alpha)


def clearly_below(
    values: Sequence[float], best: Sequence[float] | None, alpha: float = 0.05
) -> bool:
    """A client count needs no more repetitions: it is already significantly below the best
    count so far (`significantly_below`; from its first repetition on), so it cannot be the
    ceiling. Repetitions are spent on the counts that can."""
    if best is None or not values:
        return False
    return significantly_below(values, best, alpha)


def best_count(samples: dict[int, Sequence[float]]) -> int:
    """Client count with the largest mean throughput."""
    return max(samples, key=lambda c: float(np.mean(samples[c])))


def midpoint(low: int, high: int) -> int | None:
    """Rounded geometric midpoint strictly between low and high, None if there is none."""
    if high - low < 2:
        return None
    mid = int(round(math.sqrt(low * high)))
    return min(max(mid, low + 1), high - 1)


def next_refinement(
    samples: dict[int, Sequence[float]], peak_resolution: float, alpha: float = 0.05
) -> int | None:
    """The next client count to add around the best one, None when the peak is bracketed
    (within `peak_resolution`, or by neighbours within the noise of the best).

    None too when the best is the largest count measured: the peak is not bracketed and
    counts below it cannot locate it.
    """
    counts = sorted(samples)
    best = best_count(samples)
    i = counts.index(best)
    if i == len(counts) - 1:
        return None
    neighbours = counts[max(i - 1, 0) : i] + counts[i + 1 : i + 2]
    for neighbour in neighbours:
        low, high = sorted((neighbour, best))
        if high / low <= 1 + peak_resolution:
            continue
        if not significantly_below(samples[neighbour], samples[best], alpha):
            continue
        mid = midpoint(low, high)
        if mid is not None:
            return mid
    return None


def sweep(
    grid: Sequence[int],
    measure: Callable[..., Sequence[float]],
    mode: str = "adaptive",
    peak_resolution: float = 0.5,
    alpha: float = 0.05,
    max_points: int | None = None,
) -> dict[int, list[float]]:
    """Measure client counts with `measure(clients, best, previous, at_most) -> per-repetition
    tps` (all of the count's repetitions, `previous` included); returns all samples.

    `best`: the best count's repetitions so far in the adaptive sweep (a count clearly below
    them may stop repeating, see `clearly_below`), None in the grid. `at_most`: a cap on the
    count's repetitions, else None. In the adaptive sweep the first count gets one repetition
    while there is nothing to compare it with; once the others are measured it is continued
    with the best so far (`previous` = its repetition), which ends at once when it is clearly
    below the best, the usual case at 1 client.

    The dict keeps the order in which counts were first measured.
    """
    if mode not in SWEEPS:
        raise ValueError(f"measurement.sweep must be one of {SWEEPS}, got {mode!r}")
    if peak_resolution <= 0:
        raise ValueError(f"measurement.peak_resolution must be > 0, got {peak_resolution}")
    samples: dict[int, list[float]] = {}

    def best_so_far() -> list[float] | None:
        return samples[best_count(samples)] if mode == "adaptive" and samples else None

    counts = sorted(set(grid))
    for clients in counts:
        probe = 1 if mode == "adaptive" and not samples else None
        samples[clients] = list(measure(clients, best_so_far(), [], probe))
        if mode == "adaptive" and _past_peak(samples, alpha):
            break
    if mode == "grid":
        return samples
    limit = max_points if max_points is not None else 2 * len(set(grid))
    while len(samples) < limit:
        extra = next_refinement(samples, peak_resolution, alpha)
        if extra is None:
            break
        samples[extra] = list(measure(extra, best_so_far(), [], None))
    first = counts[0]
    samples[first] = list(measure(first, best_so_far(), samples[first], None))
    return samples


def _past_peak(samples: dict[int, list[float]], alpha: float) -> bool:
    """The last two measured counts are both significantly below the best so far."""
    counts = list(samples)
    if len(counts) < 3:
        return False
    best = samples[best_count(samples)]
    return all(significantly_below(samples[c], best, alpha) for c in counts[-2:])
