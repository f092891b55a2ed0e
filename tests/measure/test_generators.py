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


# ------------------------------------------------------------- auto: more generators
def _line(util: dict[str, float], tps: float = 1000.0) -> dict:
    """A count's throughput line as the sweep writes it: util_* and the bottleneck."""
    from ybscale.measure import utilisation

    capacity = dict.fromkeys(util, 1.0)
    return {**{f"util_{k}": u for k, u in util.items()},
            **utilisation.bottleneck(util, tps, capacity)}  # fmt: skip


def test_auto_adds_a_generator_only_while_the_busiest_resource_is_a_saturated_generator():
    grow = generators.Growth(bound=3)
    # the generator is the busiest, at half its CPU or more: one more, at the count showing it
    assert grow.add(8, 1, _line({"client": 0.95, "node0": 0.6, "host": 0.99}))
    assert grow.grown == [{"clients": 8, "generators": 1, "to": 2, "bottleneck": "client",
                           "utilisation": {"client": 0.95}}]  # fmt: skip
    # the busiest is a generator, but below the threshold: it limits nothing
    assert not grow.add(16, 2, _line({"client0": 0.45, "client1": 0.4, "node0": 0.42}))
    # a generator at 85 % while a node is at 99 %: the cluster is the bottleneck
    assert not grow.add(16, 2, _line({"client0": 0.85, "client1": 0.83, "node0": 0.99}))
    assert grow.add(32, 2, _line({"client0": 0.9, "client1": 0.97, "node0": 0.8}))
    # at the bound: kept, and said
    assert not grow.add(64, 3, _line({"client0": 0.9, "client1": 0.9, "client2": 0.99}))
    record = grow.record()
    assert [g["clients"] for g in record["grown"]] == [8, 32]
    assert record["bound_reached"] and record["client_bound_at_bound"][0]["clients"] == 64
    # fixed generators (no auto): never
    assert not generators.Growth(bound=None).add(8, 1, _line({"client": 1.0, "node0": 0.1}))
    assert generators.client_bound("client1", generators.SATURATED)
    assert not generators.client_bound("node1", 1.0)
    assert not generators.client_bound("client", math.nan)


class _Pool:
    """A cluster that `auto` can give up to `bound` generators: each generator serves 4
    clients at most, 50 tps each, at 90 % of its CPU (99 % once more wait); the node serves
    `cap` clients at most and is at 95 % with `saturates` tps."""

    def __init__(self, bound: int, cap: float = math.inf, saturates: float = 400.0):
        self.bound, self.k, self.added = bound, 1, 0
        self.cap, self.saturates = cap, saturates

    def generator_bound(self) -> int:
        return self.bound

    def generator_names(self) -> list[str]:
        return generators.names(self.k)

    def add_generator(self) -> None:
        self.k += 1
        self.added += 1

    def tps(self, clients: int) -> float:
        return 50.0 * min(clients, 4 * self.k, self.cap)

    def util(self, clients: int) -> dict[str, float]:
        gen = min(0.99, 0.9 * clients / (4 * self.k))
        node = 0.95 * self.tps(clients) / self.saturates
        return {**dict.fromkeys(self.generator_names(), gen), "node0": node}

    def targets(self, kind):
        from ybscale.backends.base import Endpoint, Target

        return [Target(Endpoint("h", 1, "db", "u", role="node0"), {}, 0)]

    def clock_offsets(self):
        return [0.0] * self.k

    def cpu_seconds(self):
        return {}

    def block_counters(self):
        return {}

    def cpu_capacity(self):
        return dict.fromkeys([*self.generator_names(), "node0"], 1.0)

    def load_cores(self, generator=0):
        return 1

    def reset(self, kind): ...
    def check(self): ...
    def verify_layout(self, when): ...


def _model_sweep(pool: _Pool, measurement: dict, logs: Path, monkeypatch, collect=None):
    """bench.measure_sweep on `pool` (pgbench, the logs' reduction and the CPU window modelled):
    (lines, repetition rows, record). `collect(cluster)`: what bringing the logs back does,
    after pgbench ended."""
    from conftest import row_from_levels

    from ybscale.measure.pgbench import PgbenchResult

    def fake_pgbench(cluster, kind, script, env, clients, seconds, settings, prefix, *a, **kw):
        tps = cluster.tps(clients)  # the run
        if kw.get("ended"):
            kw["ended"]()
        if collect is not None:
            collect(cluster)
        return PgbenchResult(tps, 1.0, 0.1, 10, 0, 0, 0, clients, 1, 1.0, False)

    monkeypatch.setattr(bench, "run_pgbench", fake_pgbench)
    monkeypatch.setattr(
        bench,
        "steady_throughput",
        lambda prefixes, s, skip, fallback, offsets, batches=None: (fallback, 1.0, np.ones(3)),
    )
    monkeypatch.setattr(bench, "window_utilisation",
                        lambda cluster, kind, clients, readings: cluster.util(clients))  # fmt: skip
    row = row_from_levels({"operation_size": 1, "workload": "read", "nodes": 1,
                           "node_size": "small", "replication": "off"}, 100)  # fmt: skip
    m = {"seconds": 1, "skip_seconds": 0, "warmup": 0, **measurement}
    reps, record = [], {}
    lines = bench.measure_sweep(row, pool, Path("x.sql"), {}, m, logs, reps, print, record)
    return lines, reps, record


def test_auto_measures_a_client_bound_count_again_with_one_more_generator(tmp_path, monkeypatch):
    """Grid 2, 8, 16 on a pool of two: 8 clients saturate one generator, so a second joins and
    8 is measured again (the first measurement kept in the record, out of the tables); 16 starts
    with two and is client-bound at the bound."""
    pool = _Pool(bound=2)
    (logs := tmp_path / "logs").mkdir()
    (logs / "c008_r1_node0.123").write_text("")  # the first measurement's log, set aside
    m = {"clients": [2, 8, 16], "sweep": "grid", "repetitions": 1, "max_repetitions": 1}
    lines, reps, record = _model_sweep(pool, m, logs, monkeypatch)
    assert pool.added == 1
    assert [(line["clients"], line["generators"]) for line in lines] == [(2, 1), (8, 2), (16, 2)]
    by = {line["clients"]: line for line in lines}
    assert by[8]["bottleneck"] == "node0" and by[8]["tps"] == 400
    assert by[16]["bottleneck"] == "client0"  # at the bound: measured as before
    assert [(r["clients"], r["generators"]) for r in reps] == [(2, 1), (8, 2), (16, 2)]
    growth = record["load_generator_growth"]
    assert (growth["start"], growth["bound"], growth["bound_reached"]) == (1, 2, True)
    assert [(g["clients"], g["generators"], g["to"]) for g in growth["grown"]] == [(8, 1, 2)]
    assert growth["grown"][0]["utilisation"] == {"client": 0.99}
    (old,) = growth["superseded"]
    assert (old["clients"], old["generators"], old["why"]) == (8, 1, "client-bound")
    assert old["line"]["bottleneck"] == "client" and old["line"]["tps"] == 200
    assert [r["generators"] for r in old["repetitions"]] == [1]
    assert (logs / old["logs"] / "c008_r1_node0.123").is_file()
    assert not (logs / "c008_r1_node0.123").exists()


def test_auto_measures_again_a_count_the_sweep_returns_to_with_more_generators(
    tmp_path, monkeypatch
):
    """Adaptive sweep on a node saturated by 2 clients: 2 clients measured with one generator,
    8 (as fast, the generator the busiest) grows the pool to two; when the race returns to 2,
    its repetition with one generator is superseded and it is measured from the start with
    two: no count mixes repetitions of different k."""
    pool = _Pool(bound=2, cap=2, saturates=100.0)
    (logs := tmp_path / "logs").mkdir()
    m = {"clients": [2, 8], "sweep": "adaptive", "repetitions": 2, "max_repetitions": 2,
         "max_clients": 8}  # fmt: skip
    lines, reps, record = _model_sweep(pool, m, logs, monkeypatch)
    assert [(line["clients"], line["generators"]) for line in lines] == [(2, 2), (8, 2)]
    assert {(r["clients"], r["generators"]) for r in reps} == {(2, 2), (8, 2)}
    superseded = record["load_generator_growth"]["superseded"]
    assert [(s["clients"], s["generators"], s["why"]) for s in superseded] == [
        (8, 1, "client-bound"),
        (2, 1, "measured with 1 generator(s), 2 since"),
    ]
    # a count the race leaves below the best keeps the k it was measured with
    (logs := tmp_path / "below").mkdir()
    lines, reps, record = _model_sweep(_Pool(bound=2), m, logs, monkeypatch)
    assert [(line["clients"], line["generators"]) for line in lines] == [(2, 1), (8, 2)]
    assert lines[0]["stopped"] == "below_best"
    assert [s["clients"] for s in record["load_generator_growth"]["superseded"]] == [8]


def test_a_disturbed_run_is_set_aside_kept_and_measured_again_within_the_bound(
    tmp_path, monkeypatch
):
    """Issue 49: a run during which others took more than outside_max of the machine is set
    aside (in repetitions.csv, marked why; its logs in a folder of their own) and measured
    again; at the bound the last run is kept, marked disturbed. Probes likewise."""
    pool = _Pool(bound=1)
    outside = iter([0.5, 0.02, 0.3, 0.4, 0.6])  # count 2: one disturbed; count 4: all three
    pool.util = lambda clients, util=pool.util: {**util(clients), "outside": next(outside)}
    (logs := tmp_path / "logs").mkdir()
    (logs / "c002_r1_node0.7").write_text("")
    # no waiting for quiet here: the model's readings are the runs' (the wait: test_utilisation)
    m = {"clients": [2, 4], "sweep": "grid", "repetitions": 1, "max_repetitions": 1,
         "outside_max": 0.1, "remeasure": 2, "quiet_wait": 0}  # fmt: skip
    lines, reps, _ = _model_sweep(pool, m, logs, monkeypatch)
    marks = [(r["clients"], r["measured_again"], r["disturbed"], r["set_aside"]) for r in reps]
    assert [(c, again, dist) for c, again, dist, _ in marks] == [
        (2, 0, True),
        (2, 1, False),
        (4, 0, True),
        (4, 1, True),
        (4, 2, True),
    ]
    assert marks[0][3] == "others took 50 % of the machine (measurement.outside_max 0.1)"
    assert [bool(aside) for *_, aside in marks] == [True, False, True, True, False]
    assert (logs / "set-aside-c002-r1-1" / "c002_r1_node0.7").is_file()
    assert [line["repetitions"] for line in lines] == [1, 1]  # the kept runs only
    m.update(outside_max=None)
    outside = iter([0.9, 0.9])
    _, reps, _ = _model_sweep(_Pool(bound=1), m, logs, monkeypatch)
    assert len(reps) == 2 and not any(r["set_aside"] for r in reps)


class _Counted(_Pool):
    """A pool whose block counters count what reads blocks: each transaction 3 blocks found in
    the cache, the logs' copy and the layout's queries 1000 each."""

    def __init__(self):
        super().__init__(bound=1)
        self.blocks = {"blks_hit": 0.0, "blks_read": 0.0}

    def tps(self, clients: int) -> float:
        self.blocks["blks_hit"] += 3  # the measured run, read as it ends
        return super().tps(clients)

    def util(self, clients: int) -> dict[str, float]:
        return {"client": 0.5, "node0": 0.95 * _Pool.tps(self, clients) / self.saturates}

    def block_counters(self):
        return dict(self.blocks)

    def verify_layout(self, when):
        self.blocks["blks_hit"] += 1000


def test_block_counters_are_read_around_the_measured_run_alone(tmp_path, monkeypatch):
    """The counters read before pgbench starts and as it ends: neither the logs coming back
    nor the layout read again after the run are counted in the run's buffer_hits."""
    pool = _Counted()

    def copy_logs(cluster):
        cluster.blocks["blks_hit"] += 1000

    m = {"clients": [2], "sweep": "grid", "repetitions": 2, "max_repetitions": 2}
    _, reps, _ = _model_sweep(pool, m, tmp_path, monkeypatch, collect=copy_logs)
    assert [r["buffer_hits"] for r in reps] == [3.0, 3.0]
    assert [r["buffer_reads"] for r in reps] == [0.0, 0.0]
