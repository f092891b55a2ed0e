"""Adaptive client sweep: spend the measuring time where the ceiling is.

A scan measures the grid's client counts in ascending order, one repetition each, and stops
once the two most recently measured counts are both significantly below the best so far. A
race follows: counts get one repetition per turn until their precision rule is done or they
are significantly below the best, so repetitions go to the counts that can be the ceiling and
those counts share the machine's drift over the row. "Significantly below" is `below_best`: a
one-sided t test of log means with the within-count spread pooled over all counts
(`log_noise`), or, before that has two degrees of freedom, `significantly_below` (Welch, or a
prediction test for a count with one repetition).

Unless the best is the largest count measured (still rising: nothing to bracket), client counts
at the geometric midpoints between the best count and those of its measured neighbours that are
significantly below it join the race, until each such neighbour is within a factor (1 +
peak_resolution) of the best, or no integer count lies between them. A neighbour within the
noise of the best means a plateau: the ceiling's value is known to the noise there, and a
midpoint would only add one more draw to the maximum.

A peak is bracketed only by a larger count significantly below it. When the best is the grid's
largest count or beyond it (the curve still rises at the grid's end) and no larger count is
significantly below it, the sweep extends the range: it doubles the largest count measured, up
to `max_clients`, after the scan and whenever the race runs out of counts. A best inside the
grid is not extended from: the grid's larger counts lie below it (a plateau at worst). A row
whose best count is still the largest measured has a ceiling that is only a lower bound
(`ceiling.json` says so). `grid` mode (the
classical protocol) measures every listed count to its precision rule, one after another, and
never refines or extends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

SWEEPS = ("grid", "adaptive", "economy")
CONFIRM_REPETITIONS = 3  # the scan's best gets up to these to test a peak (2 degrees of freedom)


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
        return _t_upper_tail(t, len(b) - 1) < alpha
    from scipy import stats  # here: a measuring job with one repetition never needs scipy

    p = stats.ttest_ind(a, b, equal_var=False, alternative="less").pvalue
    return bool(p < alpha)


def log_noise(samples: dict[int, Sequence[float]]) -> tuple[float, int]:
    """(s, df): the within-count standard deviation of ln(tps), pooled over the counts with two
    or more repetitions (the error mean square of a one-way ANOVA on the log scale), and its
    degrees of freedom. On the log scale equal relative noise at every count is one spread."""
    ss, df = 0.0, 0
    for values in samples.values():
        x = np.asarray(values, dtype=float)
        if len(x) < 2 or (x <= 0).any():
            continue
        y = np.log(x)
        ss += float(((y - y.mean()) ** 2).sum())
        df += len(y) - 1
    return (math.sqrt(ss / df), df) if df else (math.nan, 0)


def below_best(
    values: Sequence[float],
    best: Sequence[float] | None,
    noise: tuple[float, int] = (math.nan, 0),
    alpha: float = 0.05,
) -> bool:
    """A client count needs no more repetitions: its mean is significantly below the best
    count's, so it cannot be the ceiling. With a pooled `noise` (`log_noise`, 2+ degrees of
    freedom): one-sided t test of the log means, t = (ln-mean(best) - ln-mean(values)) /
    (s * sqrt(1/n + 1/n_best)), as comparisons against the error mean square are made after an
    ANOVA (Montgomery ch. 3); one repetition of each count is then enough. Without it:
    `significantly_below` on the two counts alone."""
    if best is None or not len(values) or not len(best):
        return False
    s, df = noise
    a, b = np.asarray(values, dtype=float), np.asarray(best, dtype=float)
    if df < 2 or not s > 0 or (a <= 0).any() or (b <= 0).any():
        return significantly_below(values, best, alpha)
    t = (np.log(b).mean() - np.log(a).mean()) / (s * math.sqrt(1 / len(a) + 1 / len(b)))
    return _t_upper_tail(t, df) < alpha


def _t_upper_tail(t: float, df: int) -> float:
    """P(T > t) for Student's t with df degrees of freedom (scipy.stats.t.sf), from the
    distribution's function itself: scipy.stats alone doubles a measuring job's start."""
    from scipy.special import stdtr

    return float(stdtr(df, -t))


def best_count(samples: dict[int, Sequence[float]]) -> int:
    """Client count with the largest mean throughput."""
    return max(samples, key=lambda c: float(np.mean(samples[c])))


def midpoint(low: int, high: int) -> int | None:
    """Rounded geometric midpoint strictly between low and high, None if there is none."""
    if high - low < 2:
        return None
    mid = int(round(math.sqrt(low * high)))
    return min(max(mid, low + 1), high - 1)


def _below(samples: dict[int, list[float]], count: int, alpha: float) -> bool:
    """`count` is significantly below the best count, with the spread pooled over all counts."""
    best = best_count(samples)
    return count != best and below_best(samples[count], samples[best], log_noise(samples), alpha)


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
        if not _below(samples, neighbour, alpha):
            continue
        mid = midpoint(low, high)
        if mid is not None:
            return mid
    return None


def bracketed_above(samples: dict[int, Sequence[float]], alpha: float = 0.05) -> bool:
    """Some count larger than the best is significantly below it: the peak has an upper side."""
    best = best_count(samples)
    return any(_below(samples, c, alpha) for c in samples if c > best)


def next_extension(
    samples: dict[int, Sequence[float]],
    max_clients: int | None,
    alpha: float = 0.05,
    edge: int | None = None,
) -> int | None:
    """The next count above those measured (twice the largest, at most `max_clients`) while
    the best is at or past `edge` (the grid's largest count; default: the largest measured)
    and not bracketed above; None otherwise, or once the range reached `max_clients`."""
    largest, best = max(samples), best_count(samples)
    if max_clients is None or largest >= max_clients or best < (edge or largest):
        return None
    return None if bracketed_above(samples, alpha) else min(2 * largest, max_clients)


def extension_counts(grid: Sequence[int], max_clients: int | None) -> list[int]:
    """Every count the extension can add above `grid` (doubling up to `max_clients`)."""
    counts, largest = [], max(grid)
    while max_clients is not None and largest < max_clients:
        largest = min(2 * largest, max_clients)
        counts.append(largest)
    return counts


def sweep(
    grid: Sequence[int],
    measure: Callable[..., Sequence[float]],
    mode: str = "adaptive",
    peak_resolution: float = 0.5,
    alpha: float = 0.05,
    max_points: int | None = None,
    max_clients: int | None = None,
) -> dict[int, list[float]]:
    """Measure client counts with `measure(clients, previous, at_most, below_best) ->
    per-repetition tps` (all of the count's repetitions, `previous` included); returns all
    samples.

    `at_most`: a cap on the count's repetitions in all, else None (the count's precision rule
    decides). A call that adds no repetition means the rule is done. `below_best=True`: the
    count is stopped as significantly below the best (`below_best`); no repetition is taken.

    grid: each count in ascending order, to its rule. adaptive: a scan, then a race.
    - Scan: one repetition per count, ascending. When the last two are both below the best,
      the best gets up to CONFIRM_REPETITIONS and `_past_peak` decides whether to stop. At the
      grid's end, with the best at its largest count, `next_extension` counts follow (one
      repetition each; the best gets up to CONFIRM_REPETITIONS to tell whether the new count is
      below it) until one larger than the best is significantly below it, or `max_clients`
      (None: no extension) is reached.
    - Race: one repetition per turn, round by round, over the counts not finished, the best
      first, then by decreasing mean; a count significantly below the best leaves the race.
      Once no count is left in it, an extension joins it while the best is at or past the
      grid's largest count and not bracketed above (it moved up in the race), else a midpoint
      from `next_refinement`. The repetitions of
      the counts near the ceiling are interleaved in time, so the machine's drift over the row
      reaches them alike instead of favouring whichever count was measured in a fast minute.

    The dict keeps the order in which counts were first measured.
    """
    if mode not in SWEEPS:
        raise ValueError(f"measurement.sweep must be one of {SWEEPS}, got {mode!r}")
    if peak_resolution <= 0:
        raise ValueError(f"measurement.peak_resolution must be > 0, got {peak_resolution}")
    samples: dict[int, list[float]] = {}
    counts = sorted(set(grid))
    if mode == "grid":
        for clients in counts:
            samples[clients] = list(measure(clients, [], None, False))
        return samples

    def one_more(clients: int) -> bool:
        """One more repetition of `clients`; False when its rule is done or it is below."""
        before = samples.get(clients, [])
        if before and _below(samples, clients, alpha):
            measure(clients, before, len(before), True)
            return False
        samples[clients] = list(measure(clients, before, len(before) + 1, False))
        return len(samples[clients]) > len(before)

    for clients in counts:
        one_more(clients)
        if _looks_past_peak(samples) and _confirmed(samples, one_more, alpha):
            break
    else:
        while (extra := next_extension(samples, max_clients, alpha, counts[-1])) is not None:
            one_more(extra)
            _confirm_above(samples, one_more, alpha)
    limit = max_points if max_points is not None else 2 * len(counts)
    racing = set(samples)
    while racing:
        best = best_count(samples)
        ranked = sorted(racing, key=lambda c: (c != best, -float(np.mean(samples[c]))))
        for clients in ranked:
            if not one_more(clients):
                racing.discard(clients)
        if not racing:
            extra = next_extension(samples, max_clients, alpha, counts[-1])
            if extra is None and len(samples) < limit:
                extra = next_refinement(samples, peak_resolution, alpha)
            if extra is not None and one_more(extra):
                racing.add(extra)
    return samples


def _confirm_above(samples: dict[int, list[float]], one_more, alpha: float) -> None:
    """After an extension count below the best's mean: the best gets repetitions (up to
    CONFIRM_REPETITIONS, or until its rule is done) until that count is significantly below."""
    largest = max(samples)
    while best_count(samples) != largest and not _below(samples, largest, alpha):
        best = best_count(samples)
        if len(samples[best]) >= CONFIRM_REPETITIONS or not one_more(best):
            return


def _confirmed(samples: dict[int, list[float]], one_more, alpha: float) -> bool:
    """Whether the scan is past the peak: the best gets repetitions (up to
    CONFIRM_REPETITIONS, or until its rule is done) until the last two counts are significantly
    below it. One repetition against another leaves the test a single degree of freedom, too
    few to tell anything but a collapse from the noise."""
    while not _past_peak(samples, alpha):
        best = best_count(samples)
        if len(samples[best]) >= CONFIRM_REPETITIONS or not one_more(best):
            return False
    return True


def _looks_past_peak(samples: dict[int, list[float]]) -> bool:
    """The last two counts measured are both below the best's mean (not yet tested)."""
    counts = list(samples)
    if len(counts) < 3:
        return False
    top = float(np.mean(samples[best_count(samples)]))
    return all(float(np.mean(samples[c])) < top for c in counts[-2:])


def _past_peak(samples: dict[int, list[float]], alpha: float) -> bool:
    """The last two measured counts are both significantly below the best so far."""
    counts = list(samples)
    return len(counts) >= 3 and all(_below(samples, c, alpha) for c in counts[-2:])


# --- the economy sweep: probe every count briefly, measure only the best ----------------------


@dataclass(frozen=True)
class Step:
    """What to measure next: a client count, by a short probe or a full repetition."""

    clients: int
    probe: bool


def economy_next(
    grid: Sequence[int],
    probes: Mapping[int, float],
    full: Mapping[int, Sequence[float]],
    max_clients: int | None = None,
    repetitions: int = 1,
) -> Step | None:
    """The economy sweep's next step from what was measured so far (None: the row is done).

    `probes`: each probed count's throughput from its probe; `full`: each count's full
    repetitions. The decision reads nothing else, so the same measurements always lead to the
    same step, and a row can be resumed or replayed from its tables.
    - Scan: the grid's counts in ascending order, one probe each, until the last two probed
      are both below the best probe (past the peak; a plateau is probed to the grid's end).
      With the best probe at the grid's largest count, the range doubles (up to
      `max_clients`) until a larger count's probe is below the best.
    - Measure: the best probe's count gets `repetitions` full repetitions; nothing else does.
    """
    scan = next_probe(grid, probes, max_clients)
    if scan is not None:
        return Step(scan, True)
    best = max(probes, key=probes.__getitem__)
    if len(full.get(best, ())) < repetitions:
        return Step(best, False)
    return None


def next_probe(
    grid: Sequence[int], probes: Mapping[int, float], max_clients: int | None
) -> int | None:
    """The scan's next count to probe, None once the peak is passed or the range is done."""
    counts = sorted(set(grid))
    probed = sorted(probes)
    if not probed:
        return counts[0]
    best = max(probes, key=probes.__getitem__)
    if len(probed) >= 3 and all(probes[c] < probes[best] for c in probed[-2:]):
        return None
    left = [c for c in counts if c not in probes and c > probed[-1]]
    if left:
        return left[0]
    largest = probed[-1]
    if best != largest or max_clients is None or largest >= max_clients:
        return None
    return min(2 * largest, max_clients)


def economy(
    grid: Sequence[int],
    probe: Callable[[int], float],
    measure: Callable[..., Sequence[float]],
    max_clients: int | None = None,
    repetitions: int = 1,
) -> dict[int, list[float]]:
    """Run the economy sweep: `probe(clients) -> tps` and `measure(clients, previous, at_most,
    below_best)` (as in `sweep`) as `economy_next` says; returns the full repetitions."""
    probes: dict[int, float] = {}
    full: dict[int, list[float]] = {}
    while (step := economy_next(grid, probes, full, max_clients, repetitions)) is not None:
        if step.probe:
            probes[step.clients] = float(probe(step.clients))
            continue
        before = full.get(step.clients, [])
        full[step.clients] = list(measure(step.clients, before, len(before) + 1, False))
        if len(full[step.clients]) <= len(before):  # its rule is done: no repetition was added
            break
    return full
