"""Several load generators per cluster: their logs merged on one time base, their start
barrier, their share of the clients (issue 38)."""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from ybscale.measure import bench, generators, latency, pgbench

T0 = 1_700_000_000  # a whole epoch second of the reference clock


def _log(path: Path, done: list[float], latencies_us: list[int]) -> None:
    """A per-transaction log as pgbench 15 writes it (--max-tries, --failures-detailed):
    client 0, completions `done` (epoch seconds of the clock where it ran)."""
    lines = []
    for i, (d, lat) in enumerate(zip(done, latencies_us, strict=True)):
        sec = math.floor(d)
        lines.append(f"0 {i} {lat} 0 {sec} {round((d - sec) * 1e6)} 0")
    path.write_text("\n".join(lines) + "\n")


# generator A runs on the reference clock; generator B's clock is 2.5 s ahead of it
A_DONE = [T0 + 0.2, T0 + 1.1, T0 + 1.5, T0 + 2.9]  # reference seconds
B_DONE = [T0 + 0.6, T0 + 1.7, T0 + 2.3]  # reference seconds; B logs them 2.5 s later
B_OFFSET = 2.5
A_LAT, B_LAT = [1000, 2000, 3000, 4000], [5000, 6000, 7000]


def _two_generators(folder: Path) -> list[Path]:
    a, b = folder / "c002_r1_node0.11", folder / "c002_r1_node1.22"
    _log(a, A_DONE, A_LAT)
    _log(b, [d + B_OFFSET for d in B_DONE], B_LAT)
    return [a, b]


def test_two_generators_logs_merge_on_one_time_base_into_the_counts_computed_by_hand(tmp_path):
    """The repetition ends at the last completion on the reference clock (A's, T0 + 2.9), so
    its 3 one-second intervals are [T0-0.1, T0+0.9), [T0+0.9, T0+1.9), [T0+1.9, T0+2.9]:
    A puts 1, 2, 1 transactions in them and B (moved back by its 2.5 s) 1, 1, 1."""
    paths = _two_generators(tmp_path)
    reduced = latency.reduce_logs(paths, 3, offsets=[0.0, B_OFFSET])
    merged = pgbench.parse_aggregate_logs(paths)
    assert list(merged["num_transactions"]) == [2, 3, 2]
    assert list(merged["interval_start"]) == [T0 - 1, T0, T0 + 1]  # labelled by whole seconds
    assert list(reduced[1]["done"]) == pytest.approx(B_DONE)  # on the reference clock
    # the counted seconds (the first skipped) hold A's 2nd-4th and B's 2nd-3rd transactions
    lat = np.concatenate([latency.counted_latencies(tx, T0) for tx in reduced])
    assert sorted(lat) == [2000, 3000, 4000, 6000, 7000]


def test_without_the_offset_the_same_logs_do_not_add_up_like_that(tmp_path):
    """The test above can fail: B's own clock puts its completions after A's."""
    paths = _two_generators(tmp_path)
    latency.reduce_logs(paths, 3)
    assert list(pgbench.parse_aggregate_logs(paths)["num_transactions"]) != [2, 3, 2]


def test_steady_throughput_and_percentiles_are_the_clusters(tmp_path):
    """A count's tps and latency percentiles come from the merged seconds: (3 + 2) / 2 s."""
    _two_generators(tmp_path)
    prefixes = [tmp_path / "c002_r1_node0", tmp_path / "c002_r1_node1"]
    tps, used, lat = bench.steady_throughput(prefixes, 3, 1, math.nan, offsets=[0.0, B_OFFSET])
    assert (tps, used) == (2.5, 2.0)
    assert latency.percentiles(lat)["latency_p50_ms"] == 4.0  # median of 2, 3, 4, 6, 7 ms


def test_clock_offset_is_taken_from_the_shortest_round_trip():
    samples = [(10.0, 12.6, 10.4), (11.0, 13.52, 11.04), (12.0, 14.9, 12.2)]
    offset = generators.ClockOffset.estimate(samples)
    assert offset.offset_s == pytest.approx(2.5)  # 13.52 - 11.02
    assert offset.uncertainty_s == pytest.approx(0.02)
    with pytest.raises(ValueError):
        generators.ClockOffset.estimate([])


def test_every_node_gets_the_same_share_and_each_generator_spreads_its_cores():
    assert generators.assign(4, 2) == [0, 1, 0, 1]
    shares = bench.split(10, 4)  # [3, 3, 2, 2]
    # generator 0 (2 cores) drives nodes 0 and 2, generator 1 (8 cores) nodes 1 and 3
    assert generators.threads(shares, [0, 1, 0, 1], [2, 8]) == [1, 3, 1, 2]
    assert generators.threads([1, 0], [0, 1], [4, 4]) == [1, 0]  # no client, no pgbench
    assert generators.threads(shares, [0] * 4, [2]) == [1] * 4  # one generator, 2 cores


def test_the_barrier_starts_a_command_at_the_agreed_instant_and_says_when(tmp_path):
    start = time.time() + 0.5
    argv = generators.at_instant(["sh", "-c", "echo ran >&2"], int(start * 1e9))
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10)
    when, rest = generators.started(done.stderr)
    assert rest.strip() == "ran"
    assert start <= when < start + 0.2  # the same clock: started at the instant
    assert generators.started("no mark\n") == (None, "no mark\n")
    assert math.isnan(generators.skew([when]))
