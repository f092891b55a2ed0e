"""Per-transaction logs reduced to per-second lines and percentiles (synthetic and real)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import row_from_levels, settings_with

from ybscale.backends.local import LocalBackend
from ybscale.design import workload
from ybscale.measure import bench, latency, pgbench, precision

T0 = 1_700_000_000  # epoch second of the synthetic run's start


def _synthetic(path: Path, seconds: int = 5, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A per-transaction log as pgbench 15 writes it (--max-tries, --failures-detailed): one
    client, lognormal latencies, back to back from T0 + 0.25 s; every 50th transaction a
    serialization failure, every 7th retried once. Returns (completion times, latencies µs)."""
    rng = np.random.default_rng(seed)
    lat = np.round(rng.lognormal(np.log(800), 0.6, 20_000)).astype(int)
    done = T0 + 0.25 + np.cumsum(lat) / 1e6
    keep = done < T0 + 0.25 + seconds
    lat, done = lat[keep], done[keep]
    lines = []
    for i, (d, x) in enumerate(zip(done, lat, strict=True)):
        sec, usec = int(d), int(round((d - int(d)) * 1e6))
        time = "serialization" if i % 50 == 49 else str(x)
        lines.append(f"0 {i} {time} 0 {sec} {usec} {1 if i % 7 == 0 else 0}")
    path.write_text("\n".join(lines) + "\n")
    ok = np.array([i % 50 != 49 for i in range(len(lat))])
    return done[ok], lat[ok]


def test_a_reduced_log_counts_every_second_and_its_percentiles_are_numpys(tmp_path):
    log = tmp_path / "c001_r1_node1.4242"
    done, lat = _synthetic(log)
    tx = latency.reduce_log(log, 5)
    per_second = pgbench.parse_aggregate_logs([log])  # the reduced file is pgbench's format
    assert len(per_second) == 5 and per_second["num_transactions"].sum() == len(lat)
    end = float(tx["done"].max())
    for k, logged in enumerate(per_second["num_transactions"]):  # [end - 5 + k, end - 4 + k)
        low, high = end - 5 + k, end - 4 + k
        inside = (done >= low) & (done < high) if k < 4 else done >= low
        assert logged == inside.sum() + (k == 0) * (done < low).sum()
    first = int(per_second["interval_start"].min()) + 1
    counted = latency.counted_latencies(tx, first)
    expected = lat[tx["interval_start"][tx["status"] == "ok"] >= first]
    assert len(counted) == len(expected)
    got = latency.percentiles(counted)
    want = np.percentile(expected, [50, 95, 99]) / 1000
    assert [got["latency_p50_ms"], got["latency_p95_ms"], got["latency_p99_ms"]] == list(want)
    assert got["latency_n"] == len(expected)
    tps, used = precision.steady_tps(per_second, 1)
    assert used == 4 and tps == pytest.approx(len(expected) / 4)


def test_failures_and_retries_are_counted_like_pgbench_counts_them(tmp_path):
    log = tmp_path / "p.1"
    done, lat = _synthetic(log, seconds=3)
    raw = log.read_text().splitlines()
    latency.reduce_log(log, 3)
    per_second = pgbench.parse_aggregate_logs([log])
    assert per_second["serialization_failures"].sum() == sum("serialization" in x for x in raw)
    assert per_second["retried"].sum() == sum(x.endswith(" 1") for x in raw)
    assert per_second["num_transactions"].sum() == len(lat)  # failures are not transactions
    assert latency.percentiles([])["latency_n"] == 0


def test_a_real_repetitions_log_is_reduced_within_its_bound(data_root, tmp_path):
    """pgbench on a real server logs every transaction (about 32 bytes each); after the
    repetition each log holds one line per second (at most 200 bytes a line), the counts add
    up to pgbench's, and the percentiles are numpy's over the raw log's counted seconds."""
    levels = {"operation_size": 1, "workload": "read", "nodes": 1, "node_size": "small"}
    row = row_from_levels({**levels, "replication": "off"}, 2000)
    settings = settings_with(local={"data_root": str(data_root)})
    m = settings["measurement"]
    prefix = tmp_path / "c002_r1"
    with LocalBackend(settings).cluster(row, tmp_path) as cluster:
        env = workload.session_env(row.session)
        result = bench.run_pgbench(
            cluster, "read", Path(row.script_path), env, 2, 3, m, prefix, 7, row.variables
        )
    paths = pgbench.aggregate_log_paths(f"{prefix}_node1")
    raw = {p.name: latency.read_transactions(p) for p in paths}
    copies = tmp_path / "raw"
    copies.mkdir()
    for p in paths:
        shutil.copy(p, copies / p.name)
    assert sum(len(t) for t in raw.values()) == result.transactions + result.failed
    assert sum(p.stat().st_size for p in paths) > 20 * result.transactions  # every transaction
    tps, used, lat = bench.steady_throughput([Path(f"{prefix}_node1")], 3, 1, result.tps)
    for p in paths:
        assert len(p.read_text().splitlines()) == 3 and p.stat().st_size <= 3 * 200
    assert used == 2 and tps > 0
    per_second = pgbench.parse_aggregate_logs(paths)
    first = int(per_second["interval_start"].min()) + 1
    expected = np.concatenate(
        [
            latency.counted_latencies(tx, first)
            for tx in latency.reduce_logs([copies / name for name in raw], 3)
        ]
    )
    assert len(lat) == len(expected) == tps * used
    got = latency.percentiles(lat)
    assert got["latency_p95_ms"] == np.percentile(expected, 95) / 1000


def test_threads_ending_either_side_of_a_second_share_their_intervals(tmp_path):
    """Two threads of one 3 s repetition, one ending just before a second's boundary and one
    just after: reduced together, their intervals share bounds and labels, so the merged
    repetition has 3 seconds (2 counted after the first), not 4 (the run seemed 33 % longer)."""
    paths = [tmp_path / "c002_r1_node1.7", tmp_path / "c002_r1_node1.7.1"]
    for path, last in zip(paths, (T0 + 2.98, T0 + 3.02), strict=True):
        done = np.arange(T0 + 0.05, last, 0.01)
        done[-1] = last
        path.write_text(
            "".join(f"0 {i} 900 0 {int(d)} {round((d % 1) * 1e6)} 0\n" for i, d in enumerate(done))
        )
    latency.reduce_logs(paths, 3)
    per_second = pgbench.parse_aggregate_logs(paths)
    assert len(per_second) == 3, per_second["interval_start"]
    assert precision.steady_tps(per_second, 1)[1] == 2
