"""The measuring loop on a real server: what the adaptive sweep's repetitions leave on disk."""

from __future__ import annotations

from pathlib import Path

from conftest import row_from_levels, settings_with

from ybscale.backends.local import LocalBackend
from ybscale.design import workload
from ybscale.measure import bench


def _sweep(
    workload_name: str, data_root, tmp_path, resets: list | None = None, tweak=None, reps=None, **m
):
    levels = {
        "operation_size": 1,
        "workload": workload_name,
        "nodes": 1,
        "node_size": "small",
        "replication": "off",
    }
    row = row_from_levels(levels, 2000)
    m = {"clients": [1, 2, 4], "repetitions": 2, "max_repetitions": 2, "seconds": 1,
         "skip_seconds": 0, "warmup": 0, "sweep": "adaptive", "timeout": 60, "max_clients": 4,
         **m}  # fmt: skip
    settings = settings_with(local={"data_root": str(data_root)}, measurement=m)
    env = workload.session_env(row.session)
    reps = [] if reps is None else reps
    logs = tmp_path / "logs"
    logs.mkdir()
    with LocalBackend(settings).cluster(row, tmp_path) as cluster:
        if tweak is not None:
            tweak(cluster)
        if resets is not None:
            reset = cluster.reset

            def counted(kind: str) -> None:
                rows = cluster.nodes[0].psql("SELECT count(*) FROM kv")
                reset(kind)
                resets.append((rows, cluster.nodes[0].psql("SELECT count(*) FROM kv")))

            cluster.reset = counted
        lines = bench.measure_sweep(
            row, cluster, Path(row.script_path), env, settings["measurement"], logs, reps, print
        )
    return lines, [(r["clients"], r["repetition"]) for r in reps]


def test_the_scan_comes_first_the_race_takes_turns_and_every_repetition_is_counted(
    data_root, tmp_path
):
    lines, order = _sweep("read", data_root, tmp_path)
    assert order[:3] == [(1, 1), (2, 1), (4, 1)]  # one repetition per count first
    by_count = {line["clients"]: line for line in lines}
    # in turns: the best may take its confirming repetitions first and a midpoint joins after
    best = max(by_count, key=lambda c: by_count[c]["tps_mean"])
    turns = [rep for c, rep in order[3:] if c in (1, 2, 4) and c != best]
    assert turns == sorted(turns)
    assert [line["clients"] for line in lines] == sorted(by_count)  # one line per count
    assert [by_count[c]["order"] for c in (1, 2, 4)] == [1, 2, 3]
    for clients, line in by_count.items():
        numbers = [rep for c, rep in order if c == clients]
        assert numbers == list(range(1, len(numbers) + 1))
        assert line["repetitions"] == len(numbers)
        if len(numbers) < 2:  # fewer than the minimum only when clearly below the best
            assert line["stopped"] == "below_best"
        else:
            assert line["stopped"] in ("precision", "max_repetitions")


def test_every_write_repetition_starts_from_the_loaded_rows(data_root, tmp_path):
    resets: list[tuple[str, str]] = []
    _, order = _sweep("write", data_root, tmp_path, resets)
    assert len(resets) == len(order)  # one reset per repetition
    assert all(after == "2000" for _, after in resets)
    assert all(int(before) > 2000 for before, _ in resets[1:])  # the writes it undid


def test_a_layout_change_during_a_repetition_fails_the_row_naming_it(data_root, tmp_path):
    """Each repetition is followed by Cluster.verify_layout (YugabyteDB: the tablets read
    again); when it finds a change, the row fails naming the count and repetition."""
    import pytest

    from ybscale.backends.base import BackendError
    from ybscale.measure.bench import MeasurementError

    seen: list[str] = []

    def verify(when: str) -> None:
        seen.append(when)
        if len(seen) == 2:
            raise BackendError("table kv has 2 tablets after 2 clients, repetition 1, 1 after")

    def tweak(cluster):
        cluster.verify_layout = verify

    with pytest.raises(MeasurementError) as failed:
        _sweep("read", data_root, tmp_path, tweak=tweak)
    assert seen == ["after 1 clients, repetition 1", "after 2 clients, repetition 1"]
    assert str(failed.value).startswith("run01, 2 clients, repetition 1: table kv has 2 tablets")


def test_the_economy_sweep_probes_each_count_and_measures_the_best_once(data_root, tmp_path):
    """Probes (repetition 0, `probe_seconds`) rank the counts; only the best probe's count gets
    a full repetition, whose interval comes from its own seconds (batch means)."""
    import math

    reps: list[dict] = []
    lines, order = _sweep("read", data_root, tmp_path, reps=reps, sweep="economy",
                          probe_seconds=2, seconds=3, skip_seconds=1)  # fmt: skip
    probes = [r for r in reps if r["probe"]]
    assert order[:3] == [(1, 0), (2, 0), (4, 0)] and len(probes) == 3
    best = max(probes, key=lambda r: r["tps"])["clients"]
    assert order[3:] == [(best, 1)]  # one full repetition, of the best probe's count
    assert all(r["duration_s"] == 2 for r in probes)
    by_count = {line["clients"]: line for line in lines}
    assert {c for c, line in by_count.items() if line["stopped"] == "probe"} == {1, 2, 4} - {best}
    full = by_count[best]
    assert full["repetitions"] == 1 and full["seconds"] == 3
    assert full["tps"] == [r["tps"] for r in reps if not r["probe"]][0]
    assert full["ci_from"] == "batch_means"
    assert full["tps_ci_low"] < full["tps"] < full["tps_ci_high"]
    assert math.isfinite(full["tps_ci_high"])
