"""Issue 48: where each read was served from, from the servers' block counters (hand
arithmetic; the real counters in test_utilisation)."""

import math

from ybscale.measure import buffers


def test_a_runs_blocks_are_the_counters_difference():
    before, after = {"blks_hit": 100.0, "blks_read": 5.0}, {"blks_hit": 150.0, "blks_read": 9.0}
    assert buffers.delta(before, after) == {"buffer_hits": 50.0, "buffer_reads": 4.0}
    assert buffers.delta({}, {}) == {}


def test_a_counts_ratio_pools_its_runs_blocks_not_their_ratios():
    """80 of 100 blocks held (not the mean of 0.93 and 0.65), 20 reads over 20 transactions."""
    runs = [
        {"buffer_hits": 50, "buffer_reads": 4, "transactions": 10},
        {"buffer_hits": 30, "buffer_reads": 16, "transactions": 10},
        {"transactions": 10},  # a run without counters (another backend's) is left out
    ]
    assert buffers.summary(runs) == {"buffer_hit_ratio": 0.8, "buffer_reads_per_tx": 1.0}
    assert buffers.summary([{"transactions": 3}]) == {}
    empty = buffers.summary([{"buffer_hits": 0, "buffer_reads": 0, "transactions": 0}])
    assert math.isnan(empty["buffer_hit_ratio"]) and math.isnan(empty["buffer_reads_per_tx"])


def test_disk_bytes_are_a_counter_like_the_blocks_and_pooled_per_transaction():
    """A backend that reads its servers' disk bytes (local: /proc/<pid>/io) gives each run's
    `disk_read_bytes`; a count pools them over its transactions (3 MiB over 30 transactions:
    104857.6 B each). Runs of a backend without it give no disk field."""
    before = {"blks_hit": 0.0, "blks_read": 0.0, "disk_read_bytes": 4096.0}
    after = {"blks_hit": 10.0, "blks_read": 2.0, "disk_read_bytes": 4096.0 + 2**20}
    assert buffers.delta(before, after) == {
        "buffer_hits": 10.0,
        "buffer_reads": 2.0,
        "disk_read_bytes": 2**20,
    }
    runs = [
        {"buffer_hits": 5, "buffer_reads": 5, "disk_read_bytes": 2**20, "transactions": 10},
        {"buffer_hits": 5, "buffer_reads": 5, "disk_read_bytes": 2**21, "transactions": 20},
    ]
    assert buffers.summary(runs)["disk_bytes_per_tx"] == 3 * 2**20 / 30
    csv = [{**r, "disk_read_bytes": ""} for r in runs]  # read back from a CSV without it
    assert "disk_bytes_per_tx" not in buffers.summary(csv)
    assert buffers.summary(csv)["buffer_hit_ratio"] == 0.5
