"""The measuring protocol: one object that bench runs, the plan times and the findings describe."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO, settings_with, shipped_config

from ybscale import settings
from ybscale.measure.measuring import ADAPTIVE_EXTRA_COUNTS, MeasuringProtocol


def test_it_is_read_from_loaded_settings_and_from_an_older_rows_record():
    loaded = settings_with(measurement={"clients": [1, 2, 4], "max_repetitions": 5})
    protocol = MeasuringProtocol.of(loaded["measurement"])
    assert protocol.clients == (1, 2, 4) and protocol.max_clients == 16
    assert protocol.most_repetitions == 5 and protocol.sweep == "adaptive"
    old = MeasuringProtocol.of({"clients": [1, 2], "sweep": "grid", "seconds": 3})
    assert old.repetitions == 3 and old.max_tries == 10  # the schema's defaults
    # max_clients null has one meaning everywhere: 4 x the grid's largest, as the loader says
    assert (
        old.max_clients
        == settings.load(
            {**shipped_config(), "measurement": {"clients": [1, 2], "max_clients": None}}
        )["measurement"]["max_clients"]
        == 8
    )


def test_the_sweep_it_runs_extends_to_its_max_clients_and_its_rule_is_the_settings():
    protocol = MeasuringProtocol.of(
        settings_with(measurement={"clients": [1, 2, 4], "max_clients": 16, "repetitions": 1})[
            "measurement"
        ]
    )

    def measure(n, previous, at_most, below_best):  # every count's rule done after one
        return list(previous) if below_best or previous else [100.0 * n]

    samples = protocol.run(measure)
    assert sorted(samples) == [1, 2, 4, 8, 16]  # still rising: doubled up to max_clients
    rule = protocol.rule([1.0, 1.0, 1.0])
    assert rule.precision == protocol.precision and rule.done


def test_its_row_time_counts_every_count_it_can_measure():
    protocol = MeasuringProtocol.of(
        {"clients": [1, 2, 4, 8], "max_clients": 32, "repetitions": 2, "max_repetitions": 3}
        | {"seconds": 10, "warmup": 5, "sweep": "adaptive"}
    )
    counts = 4 + ADAPTIVE_EXTRA_COUNTS + 2  # grid, midpoints, 16 and 32
    assert protocol.counts_at_most() == counts
    per_count = 5 + 3 * 10 + 15
    assert protocol.row_seconds(True, 2.0, 15) == pytest.approx(counts * per_count + 2.0)
    assert protocol.row_seconds(False, 2.0, 15) == pytest.approx(
        counts * per_count + counts * 3 * 2.0
    )


def test_it_describes_itself_as_it_runs():
    grid = MeasuringProtocol.of({"clients": [1, 2], "sweep": "grid", "repetitions": 3})
    assert grid.describe() == "every count 3 repetitions; 5 s each, the first 1 s not counted"
    one = {"clients": [1], "sweep": "grid", "repetitions": 1}
    assert (
        MeasuringProtocol.of(one)
        .describe()
        .startswith("every count 1 to 3 repetitions until the 95 % CI is within ±3 %; 5 s each")
    )  # up to the default max_repetitions: the interval decides
    assert (
        MeasuringProtocol.of({**one, "max_repetitions": 1})
        .describe()
        .startswith("every count 1 repetition; 5 s each")
    )
    adaptive = MeasuringProtocol.of({"clients": [1, 2], "max_clients": 8, "max_repetitions": 5})
    assert adaptive.describe().startswith(
        "adaptive sweep: one repetition per count, doubling past the grid up to 8 clients"
    )
    assert "3 to 5 repetitions" in adaptive.describe()


def test_the_test_config_is_described_as_measured_pgbench_own_tps_one_repetition():
    """config/test.yaml: 1 s repetitions with skip_seconds 1 leave no second after the skip, so
    bench keeps pgbench's own tps (`steady_throughput`'s fallback); one repetition, no interval."""
    test = yaml.safe_load((REPO / "config" / "test.yaml").read_text())["measurement"]
    loaded = settings_with(measurement={**settings_with()["measurement"], **test})
    assert loaded["measurement"]["seconds"] == 1 and loaded["measurement"]["skip_seconds"] == 1
    assert MeasuringProtocol.of(loaded["measurement"]).describe() == (
        "adaptive sweep: one repetition per count; 1 s each, throughput as pgbench reports it "
        "over the whole run (skipping the first 1 s would leave no second to count)"
    )
    every_second = MeasuringProtocol.of({**loaded["measurement"], "skip_seconds": 0})
    assert every_second.describe().endswith("1 s each, every second counted")
