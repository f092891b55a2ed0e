"""Adaptive client sweep on synthetic curves with known peaks."""

import numpy as np
import pytest

from ybscale import adaptive
from ybscale.adaptive import midpoint, next_refinement, significantly_below, sweep

GRID = [1, 2, 4, 8, 16, 32, 64]


def _more(previous, values, at_most=None) -> list[float]:
    """What a measuring function returns: the previous repetitions and new ones, capped."""
    return (list(previous) + list(values))[: at_most or None]


def _curve(peak_at: float, noise: float = 0.01, seed: int = 0):
    """USL-like curve peaking at `peak_at` clients; 3 noisy repetitions per call."""
    rng = np.random.default_rng(seed)
    kappa = 1.0 / peak_at**2
    calls = []

    def measure(n, best=None, previous=(), at_most=None):
        calls.append(n)
        x = 1000.0 * n / (1 + kappa * n * (n - 1))
        return _more(previous, x * (1 + noise * rng.standard_normal(3)), at_most)

    return measure, calls


def test_stops_past_the_peak_and_refines_around_it():
    measure, calls = _curve(peak_at=6.0)
    samples = sweep(GRID, measure, "adaptive", peak_resolution=0.25)
    grid_part = [c for c in calls if c in GRID]
    assert grid_part == [1, 2, 4, 8, 16, 32, 1]  # 16, 32 clearly below the peak: 64 skipped
    assert 64 not in samples
    extra = [c for c in calls if c not in GRID]
    assert extra and all(4 < c < 8 for c in extra)  # geometric midpoints around the best
    best = max(samples, key=lambda c: np.mean(samples[c]))
    assert best in (5, 6, 7)


def test_rising_curve_measures_the_whole_grid_and_nothing_else():
    measure, calls = _curve(peak_at=1000.0)
    sweep(GRID, measure, "adaptive", peak_resolution=0.5)
    assert calls == GRID + [1]  # the first count is continued at the end


def test_grid_mode_measures_every_count_once():
    measure, calls = _curve(peak_at=6.0)
    sweep(GRID, measure, "grid")
    assert calls == GRID


def test_noise_does_not_stop_a_flat_curve_early():
    rng = np.random.default_rng(3)
    calls = []

    def flat(n, best=None, previous=(), at_most=None):
        calls.append(n)
        return _more(previous, 1000 * (1 + 0.02 * rng.standard_normal(3)), at_most)

    sweep([1, 2, 4, 8], flat, "adaptive")
    assert [c for c in calls if c in (1, 2, 4, 8)] == [1, 2, 4, 8, 1]


def test_a_plateau_is_not_refined():
    """Rising to 8 clients, then flat within 2 % noise: every neighbour of the best is within
    the noise, so no midpoint is added (it would only be one more draw to the maximum)."""
    rng = np.random.default_rng(5)
    calls = []

    def plateau(n, best=None, previous=(), at_most=None):
        calls.append(n)
        return _more(previous, 1000 * min(n, 8) * (1 + 0.02 * rng.standard_normal(3)), at_most)

    sweep([1, 2, 4, 8, 16, 32], plateau, "adaptive", peak_resolution=0.25)
    assert calls == [1, 2, 4, 8, 16, 32, 1]


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


def test_a_count_clearly_below_the_best_stops_repeating_after_one():
    best = [60_000, 61_000, 59_500]
    assert adaptive.clearly_below([10_000], best)  # far below: one repetition suffices
    assert adaptive.clearly_below([10_000, 10_400], best)
    assert not adaptive.clearly_below([58_500], best)  # within the noise: keep going
    assert not adaptive.clearly_below([59_000, 61_500], best)
    assert not adaptive.clearly_below([61_000, 62_000], best)  # above: a new best candidate
    assert not adaptive.clearly_below([10_000], [60_000])  # the best has no spread yet
    assert not adaptive.clearly_below([10_000, 10_400], None)  # the first count measured
    assert not adaptive.clearly_below([], best)


def test_one_repetition_stops_an_equal_count_at_the_test_level_and_catches_a_low_one():
    """Simulation with known noise: a count as good as the best is wrongly stopped after its
    first repetition about alpha = 5 % of the time; one 30 % lower is stopped nearly always."""
    rng = np.random.default_rng(7)
    trials = 20_000

    def stopped(true_mean: float) -> float:
        hits = sum(
            adaptive.clearly_below([rng.normal(true_mean, 5)], list(rng.normal(100, 5, 3)))
            for _ in range(trials)
        )
        return hits / trials

    assert 0.045 < stopped(100) < 0.055  # ±3 standard errors
    assert stopped(70) > 0.9


def test_only_the_adaptive_sweep_hands_a_count_the_best_so_far():
    """What lets a count stop repeating early: in the grid (the classical protocol) no count
    gets the best so far, so each is measured to the precision rule."""
    seen = []

    def measure(n, best, previous, at_most):
        seen.append((n, best))
        return _more(previous, [1000.0 * n, 1010.0 * n], at_most)

    sweep([1, 2, 4], measure, "grid")
    assert seen == [(1, None), (2, None), (4, None)]
    seen.clear()
    sweep([1, 2, 4], measure, "adaptive")
    assert seen == [(1, None), (2, [1000.0]), (4, [2000.0, 2020.0]), (1, [4000.0, 4040.0])]


def test_the_first_count_gets_one_repetition_until_there_is_a_best():
    """The first count has nothing to be compared with: one repetition, then, after the
    others, it is continued from that repetition against the best count."""
    calls = []

    def measure(n, best, previous, at_most):
        calls.append((n, list(previous), at_most))
        return _more(previous, [1000.0 * min(n, 4) + i for i in range(3)], at_most)

    samples = sweep([1, 2, 4, 8, 16], measure, "adaptive")
    assert calls[0] == (1, [], 1)
    assert calls[-1] == (1, [1000.0], None)
    assert samples[1] == [1000.0, 1000.0, 1001.0, 1002.0]  # the probe kept, then continued
    assert list(samples)[0] == 1  # still listed first: the order counts were first measured
    calls.clear()
    sweep([1, 2, 4], measure, "grid")
    assert calls == [(1, [], None), (2, [], None), (4, [], None)]
