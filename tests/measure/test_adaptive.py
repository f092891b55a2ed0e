"""Adaptive client sweep on synthetic curves with known peaks."""

import numpy as np
import pytest

from ybscale.measure import adaptive
from ybscale.measure.adaptive import midpoint, next_refinement, significantly_below, sweep

GRID = [1, 2, 4, 8, 16, 32, 64]


def _loop(draw, reps: int = 3):
    """A measuring function as `bench.measure_sweep` makes one: repetitions until `reps` in all
    (the precision rule with max = min) or the `at_most` cap, none for a count below the best.
    `log` gets (clients, repetition number) of every repetition drawn."""
    log: list[tuple[int, int]] = []

    def measure(n, previous=(), at_most=None, below_best=False):
        values = list(previous)
        while not below_best and len(values) < reps and (at_most is None or len(values) < at_most):
            values.append(float(draw(n)))
            log.append((n, len(values)))
        return values

    return measure, log


def _curve(peak_at: float, noise: float = 0.01, seed: int = 0):
    """USL-like curve peaking at `peak_at` clients, with relative noise."""
    rng = np.random.default_rng(seed)
    kappa = 1.0 / peak_at**2
    return _loop(lambda n: 1000.0 * n / (1 + kappa * n * (n - 1)) * (1 + noise * rng.normal()))


def _plateau(seed: int = 5, noise: float = 0.02):
    """Rising to 8 clients, then flat within `noise`."""
    rng = np.random.default_rng(seed)
    return _loop(lambda n: 1000 * min(n, 8) * (1 + noise * rng.normal()))


def test_stops_past_the_peak_and_refines_around_it():
    measure, log = _curve(peak_at=6.0)
    samples = sweep(GRID, measure, "adaptive", peak_resolution=0.25)
    assert [c for c, _ in log if c in GRID][:6] == [1, 2, 4, 8, 16, 32]  # the scan
    assert 64 not in samples  # 16 and 32 clearly below the peak
    extra = [c for c in samples if c not in GRID]
    assert extra and all(4 < c < 8 for c in extra)  # geometric midpoints around the best
    best = max(samples, key=lambda c: np.mean(samples[c]))
    assert best in (5, 6, 7)
    assert all(len(samples[c]) == 1 for c in (1, 2, 16, 32))  # far below: one repetition
    assert len(samples[best]) == 3


def test_rising_curve_measures_the_whole_grid_and_nothing_else():
    measure, log = _curve(peak_at=1000.0)
    samples = sweep(GRID, measure, "adaptive", peak_resolution=0.5)
    assert list(samples) == GRID
    assert len(samples[64]) == 3 and len(samples[1]) == 1


def test_grid_mode_measures_every_count_to_its_rule_one_after_another():
    measure, log = _curve(peak_at=6.0)
    sweep(GRID, measure, "grid")
    assert log == [(c, r) for c in GRID for r in (1, 2, 3)]


def test_noise_does_not_stop_a_flat_curve_early():
    rng = np.random.default_rng(3)
    measure, _ = _loop(lambda n: 1000 * (1 + 0.02 * rng.normal()))
    samples = sweep([1, 2, 4, 8], measure, "adaptive")
    assert list(samples) == [1, 2, 4, 8]


def test_a_plateau_is_not_refined():
    """Every neighbour of the best is within the noise, so no midpoint is added (it would only
    be one more draw to the maximum)."""
    measure, _ = _plateau()
    samples = sweep([1, 2, 4, 8, 16, 32], measure, "adaptive", peak_resolution=0.25)
    assert sorted(samples) == [1, 2, 4, 8, 16, 32]


def test_the_scan_measures_each_count_once_and_the_race_interleaves_the_rest():
    """One repetition per count first (the best's second may confirm a peak); afterwards the
    counts still in the race take turns: every second repetition comes before any third, so
    drift in the machine reaches them alike. Counts far below the plateau stop at one."""
    measure, log = _plateau()
    samples = sweep([1, 2, 4, 8, 16, 32], measure, "adaptive")
    assert log[:6] == [(c, 1) for c in (1, 2, 4, 8, 16, 32)]
    race = log[6:]
    assert race and [r for _, r in race] == sorted(r for _, r in race)
    assert len(samples[1]) == len(samples[2]) == 1
    assert all(len(samples[c]) == 3 for c in (8, 16, 32))


def test_a_count_that_became_the_best_late_is_raced_with_the_others():
    """A count past the scan's best is still raced to the rule when it is not below."""
    measure, _ = _plateau(seed=11)
    samples = sweep([1, 2, 4, 8, 16, 32], measure, "adaptive")
    best = max(samples, key=lambda c: np.mean(samples[c]))
    assert best >= 8 and len(samples[best]) == 3


def test_only_a_neighbour_clearly_below_the_best_is_refined_towards():
    samples = {4: [900.0, 905, 895], 8: [1000.0, 1010, 990], 16: [995.0, 1005, 1000]}
    assert next_refinement(samples, 0.5) == 6  # 4 is clearly below 8; 16 is within the noise
    samples[6] = [950.0, 955, 945]
    assert next_refinement(samples, 0.5) is None  # 6 is within 50 % of 8


def test_helpers():
    assert midpoint(4, 8) == 6 and midpoint(8, 16) == 11 and midpoint(1, 2) is None
    assert significantly_below([90, 91, 89], [100, 101, 99], 0.05)
    assert not significantly_below([99, 102, 98], [100, 101, 99], 0.05)
    assert next_refinement({4: [1.0], 6: [3.0], 8: [2.0]}, 0.5) is None
    with pytest.raises(ValueError, match="sweep"):
        sweep(GRID, lambda n, best: [1.0], "fancy")


def test_the_tests_tail_probability_is_students():
    """The one-sided p-value both tests compare with alpha is scipy.stats' t survival
    function, on both sides of 0 and at small and large degrees of freedom."""
    from scipy import stats

    for t in (-4.0, -1.3, 0.0, 0.7, 2.1, 6.5):
        for df in (1, 2, 5, 30, 200):
            assert adaptive._t_upper_tail(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-10)


def test_without_a_pooled_spread_a_count_is_compared_with_the_best_alone():
    best = [60_000, 61_000, 59_500]
    assert adaptive.below_best([10_000], best)  # far below: one repetition suffices
    assert adaptive.below_best([10_000, 10_400], best)
    assert not adaptive.below_best([58_500], best)  # within the noise: keep going
    assert not adaptive.below_best([59_000, 61_500], best)
    assert not adaptive.below_best([61_000, 62_000], best)  # above: a new best candidate
    assert not adaptive.below_best([10_000], [60_000])  # the best has no spread yet
    assert not adaptive.below_best([10_000, 10_400], None)  # the first count measured
    assert not adaptive.below_best([], best)


def test_one_repetition_stops_an_equal_count_at_the_test_level_and_catches_a_low_one():
    """Simulation with known noise: a count as good as the best is wrongly stopped after its
    first repetition about alpha = 5 % of the time; one 30 % lower is stopped nearly always."""
    rng = np.random.default_rng(7)
    trials = 20_000

    def stopped(true_mean: float) -> float:
        hits = sum(
            adaptive.below_best([rng.normal(true_mean, 5)], list(rng.normal(100, 5, 3)))
            for _ in range(trials)
        )
        return hits / trials

    assert 0.045 < stopped(100) < 0.055  # ±3 standard errors
    assert stopped(70) > 0.9


def test_the_pooled_spread_stops_a_low_count_sooner_and_an_equal_one_at_the_test_level():
    """Simulation with known noise (5 % at every count): the best has 2 repetitions and three
    other counts 2 each (6 pooled degrees of freedom). A count as good as the best, after one
    repetition, is called below about alpha = 5 % of the time; one 15 % lower far more often
    with the pooled spread than by the prediction test on the best count alone (1 df)."""
    rng = np.random.default_rng(9)
    trials = 20_000

    def stopped(true_mean: float, pooled: bool) -> float:
        hits = 0
        for _ in range(trials):
            samples = {c: list(rng.normal(100, 5, 2)) for c in (8, 16, 32)}
            samples[4] = list(rng.normal(100, 5, 2))  # the best count
            noise = adaptive.log_noise(samples) if pooled else (np.nan, 0)
            hits += adaptive.below_best([rng.normal(true_mean, 5)], samples[4], noise)
        return hits / trials

    assert 0.04 < stopped(100, pooled=True) < 0.06
    low_pooled, low_alone = stopped(85, pooled=True), stopped(85, pooled=False)
    assert low_pooled > 0.5 and low_pooled > 2 * low_alone


def test_only_the_adaptive_sweep_stops_a_count_below_the_best():
    """In the grid (the classical protocol) every count is measured to its precision rule."""
    seen = []
    measure, _ = _loop(lambda n: 1000.0 * n * (1 + 0.01 * (n % 3)))

    def spy(n, previous, at_most, below_best):
        seen.append((n, at_most, below_best))
        return measure(n, previous, at_most, below_best)

    sweep([1, 2, 4], spy, "grid")
    assert seen == [(1, None, False), (2, None, False), (4, None, False)]
    seen.clear()
    samples = sweep([1, 2, 4], spy, "adaptive")
    assert seen[:3] == [(1, 1, False), (2, 1, False), (4, 1, False)]  # the scan
    assert (1, 1, True) in seen and len(samples[1]) == 1  # stopped after its one repetition
    assert len(samples[4]) == 3


def test_a_noisy_best_gets_a_third_repetition_before_the_scan_goes_on():
    """A read row's shape: a peak at 2 clients with 5 % noise. With two repetitions of the best
    the test of the counts after it has one degree of freedom and cannot call 4 and 8 clients
    below it; a third repetition can, and 16 and 32 clients are never measured."""
    draws = {1: [16_000], 2: [65_000, 59_000, 66_000], 4: [50_000], 8: [45_000]}
    draws |= {3: [55_000], 16: [34_000], 32: [34_000]}
    measure, log = _loop(lambda n: draws[n].pop(0) if len(draws[n]) > 1 else draws[n][0])
    samples = sweep([1, 2, 4, 8, 16, 32], measure, "adaptive")
    assert log[:6] == [(1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (2, 3)]
    assert 16 not in samples and 32 not in samples


def test_a_curve_still_rising_at_the_grids_end_is_extended_until_its_peak_is_bracketed():
    """USL curve peaking at 48 clients, grid up to 16: the sweep doubles past the grid (32, 64,
    128), stops once a larger count (128) is significantly below the best, and refines there."""
    measure, log = _curve(peak_at=48.0)
    samples = sweep([1, 2, 4, 8, 16], measure, "adaptive", peak_resolution=0.25, max_clients=256)
    assert [c for c, _ in log][:8] == [1, 2, 4, 8, 16, 32, 64, 128]  # the scan, then doubling
    assert 256 not in samples and max(samples) == 128
    best = max(samples, key=lambda c: np.mean(samples[c]))
    assert 32 < best < 128 and adaptive.bracketed_above(samples)
    assert len(samples[best]) == 3


def test_a_curve_rising_to_max_clients_stops_there_with_the_best_at_the_edge():
    measure, _ = _curve(peak_at=1000.0)
    samples = sweep([1, 2, 4, 8], measure, "adaptive", max_clients=24)
    assert sorted(samples) == [1, 2, 4, 8, 16, 24]  # doubling, capped at max_clients
    assert max(samples, key=lambda c: np.mean(samples[c])) == 24  # a lower bound
    assert not adaptive.bracketed_above(samples)


def test_only_a_larger_count_significantly_below_the_best_brackets_it():
    """What the scan's end and the race's end both ask, once the best is at or past the grid's
    edge: a count above the best, clearly below it, stops the extension; one within the noise
    does not."""
    samples = {8: [800.0, 810, 790], 16: [1000.0, 990, 1010], 32: [700.0]}
    assert adaptive.next_extension(samples, 64, edge=16) is None
    samples[32] = [995.0]
    assert adaptive.next_extension(samples, 64, edge=16) == 64
    assert adaptive.next_extension(samples, 48, edge=16) == 48
    assert adaptive.next_extension(samples, 32, edge=16) is None  # the range reached max_clients
    assert adaptive.next_extension({8: [800.0], 16: [1000.0]}, 64) == 32  # best is the largest
    # a best inside the grid (its largest count is 32) is not extended from, even when the
    # larger counts are within the noise: a plateau, as the refinement treats it
    assert adaptive.next_extension(samples, 64, edge=32) is None


def test_extension_counts_double_up_to_max_clients():
    assert adaptive.extension_counts([1, 8, 32], 128) == [64, 128]
    assert adaptive.extension_counts([1, 8, 32], 100) == [64, 100]
    assert adaptive.extension_counts([1, 8, 32], 32) == []
    assert adaptive.extension_counts([1, 8, 32], None) == []


def test_a_noisy_peak_inside_the_grid_is_not_extended():
    """A row's shape on a loaded machine: the best at 4 clients with huge noise; 8 to 32 are
    below it but not significantly after the scan. The grid's edge is not the best, so no count
    beyond 32 is measured."""
    draws = {1: [2156, 2675, 2135], 2: [3519, 2518, 2122], 4: [4996, 3126, 3212]}
    draws |= {8: [5287, 2036, 2232], 16: [1676, 1284], 32: [1203], 3: [3000], 6: [3000]}
    measure, log = _loop(lambda n: draws[n].pop(0) if len(draws[n]) > 1 else draws[n][0])
    samples = sweep([1, 2, 4, 8, 16, 32], measure, "adaptive", max_clients=128)
    assert max(samples) == 32


# --- the economy sweep: its decision read from what was measured, no database ----------------


def _economy(tps, grid=(1, 2, 4, 8, 16, 32), max_clients=None):
    """Run `adaptive.economy` on a deterministic curve `tps(clients)`; (probed counts in order,
    full repetitions by count)."""
    probed: list[int] = []

    def probe(n):
        probed.append(n)
        return tps(n)

    def measure(n, previous, at_most, below_best):
        return [*previous, tps(n)]

    return probed, adaptive.economy(list(grid), probe, measure, max_clients)


def test_economy_probes_up_to_two_counts_past_the_peak_and_measures_only_the_best():
    probed, full = _economy(lambda n: {1: 10, 2: 30, 4: 50, 8: 40, 16: 35, 32: 20}[n])
    assert probed == [1, 2, 4, 8, 16]  # 8 and 16 both below 4's probe: 32 never probed
    assert full == {4: [50]}


def test_economy_probes_a_plateau_to_the_grids_end():
    probed, full = _economy(lambda n: {1: 10, 2: 20, 4: 40, 8: 41, 16: 40, 32: 42}[n])
    assert probed == [1, 2, 4, 8, 16, 32]  # 16 below 8 but 32 above: not two in a row
    assert full == {32: [42]}


def test_economy_extends_a_rising_curve_by_doubling_until_a_probe_falls():
    curve = {1: 1, 2: 2, 4: 4, 8: 8, 16: 16, 32: 32, 64: 30, 128: 50}
    probed, full = _economy(curve.__getitem__, max_clients=128)
    assert probed == [1, 2, 4, 8, 16, 32, 64]  # 64 below 32: the peak has an upper side
    assert full == {32: [32]}
    probed, full = _economy(lambda n: n, max_clients=100)
    assert probed == [1, 2, 4, 8, 16, 32, 64, 100]  # up to max_clients, never past it
    assert full == {100: [100]}
    probed, _ = _economy(lambda n: n, max_clients=None)
    assert probed[-1] == 32


def test_economy_next_is_read_from_the_measurements_alone():
    grid = [1, 2, 4, 8]
    step = adaptive.economy_next
    assert step(grid, {}, {}) == adaptive.Step(1, True)
    assert step(grid, {1: 5.0, 2: 9.0}, {}) == adaptive.Step(4, True)
    done_scanning = {1: 5.0, 2: 9.0, 4: 8.0, 8: 7.0}
    assert step(grid, done_scanning, {}) == adaptive.Step(2, False)
    assert step(grid, done_scanning, {2: [9.5]}) is None
    # more full repetitions when asked; a count measured in full is never probed again
    assert step(grid, done_scanning, {2: [9.5]}, repetitions=2) == adaptive.Step(2, False)
