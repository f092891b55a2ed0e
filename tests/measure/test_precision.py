"""Sequential repetition rule and per-second trimming."""

import math

import numpy as np
import pandas as pd
import pytest

from ybscale.measure.precision import Sequential, batch_means, mean_ci, steady_tps


def _series(rel_noise: float, seed: int):
    rng = np.random.default_rng(seed)
    return lambda rep: 10_000.0 * (1 + rel_noise * rng.standard_normal())


def repeat_until_precise(measure_once, rule: Sequential) -> Sequential:
    """Feed the rule one repetition (1-based) at a time until it is done, as a sweep does."""
    while not rule.done:
        rule.add(measure_once(len(rule.values) + 1))
    return rule


def test_noisy_series_takes_more_repetitions_than_steady():
    used = {"steady": [], "noisy": []}
    for seed in range(20):
        for name, noise in (("steady", 0.005), ("noisy", 0.06)):
            rule = Sequential(precision=0.03, min_repetitions=3, max_repetitions=12)
            repeat_until_precise(_series(noise, seed), rule)
            used[name].append(len(rule.values))
    assert np.mean(used["steady"]) < 3.5  # 0.5 % noise: the floor of 3 is nearly always enough
    assert np.mean(used["noisy"]) > np.mean(used["steady"]) + 2


def test_stops_at_max_and_says_target_missed():
    rule = repeat_until_precise(_series(0.5, 1), Sequential(0.01, 3, 5))
    summary = rule.summary()
    assert summary["repetitions"] == 5
    assert summary["precision_met"] is False
    assert summary["tps_ci_low"] < summary["tps_mean"] < summary["tps_ci_high"]


def test_mean_ci_is_student_t():
    mean, low, high = mean_ci([9.0, 10.0, 11.0])
    # t(0.975, 2) = 4.3027, s = 1, half = 4.3027 / sqrt(3)
    assert mean == 10.0
    assert high - mean == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)
    assert math.isnan(mean_ci([1.0])[1])


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="precision"):
        Sequential(precision=0)
    with pytest.raises(ValueError, match="min_repetitions"):
        Sequential(min_repetitions=4, max_repetitions=3)


def test_steady_tps_drops_the_first_second_and_counts_empty_seconds():
    per_second = pd.DataFrame(
        {"interval_start": [100, 101, 102, 104], "num_transactions": [10, 500, 520, 480]}
    )
    tps, seconds = steady_tps(per_second, skip=1)
    assert seconds == 4  # 101..104, second 103 had no transaction
    assert tps == pytest.approx((500 + 520 + 480) / 4)
    assert math.isnan(steady_tps(per_second.iloc[:1], skip=1)[0])


def test_a_repetition_shorter_than_one_interval_falls_back_to_pgbench_tps(tmp_path):
    """A run that logged no transaction (an empty log) keeps pgbench's own figure."""
    import math

    from ybscale.measure.bench import steady_throughput

    (tmp_path / "c001_r1_node1.4242").write_text("")
    tps, seconds, latencies = steady_throughput([tmp_path / "c001_r1_node1"], 1, 1, 1234.5)
    assert tps == 1234.5 and math.isnan(seconds) and not len(latencies)


def test_batch_means_takes_each_counted_second_as_a_batch_and_an_empty_second_as_zero():
    """The batch-means standard error of one repetition (Law & Kelton §9.5.3): the spread of
    its per-second throughputs over sqrt(batches), the skipped second out, a gap counted 0."""
    log = pd.DataFrame({"interval_start": [100, 101, 102, 103, 104],
                        "num_transactions": [5, 100, 110, 90, 100]})  # fmt: skip
    se, df = batch_means(log, skip=1)
    assert df == 3
    assert se == pytest.approx(np.std([100, 110, 90, 100], ddof=1) / 2)
    gap = pd.DataFrame({"interval_start": [100, 101, 103], "num_transactions": [5, 100, 100]})
    se, df = batch_means(gap, skip=1)
    assert df == 2 and se == pytest.approx(np.std([100, 0, 100], ddof=1) / np.sqrt(3))
    se, df = batch_means(log.iloc[:2], skip=1)
    assert math.isnan(se) and df == 0
