"""The measuring loop on a real server: what the adaptive sweep's repetitions leave on disk."""

from __future__ import annotations

from pathlib import Path

from conftest import row_from_levels, settings_with

from ybscale import bench, workload
from ybscale.backends.local import LocalBackend


def test_the_first_count_is_probed_then_continued_and_every_repetition_is_counted(
    data_root, tmp_path
):
    levels = {
        "operation_size": 1,
        "workload": "read",
        "nodes": 1,
        "node_size": "small",
        "replication": "off",
    }
    row = row_from_levels(levels, 2000)
    m = {"clients": [1, 2, 4], "repetitions": 2, "max_repetitions": 2, "seconds": 1}
    m.update(skip_seconds=0, warmup=0, sweep="adaptive", timeout=60)
    settings = settings_with(local={"data_root": str(data_root)}, measurement=m)
    env = workload.session_env(row.session)
    reps: list[dict] = []
    logs = tmp_path / "logs"
    logs.mkdir()
    with LocalBackend(settings).cluster(row, tmp_path) as cluster:
        lines = bench.measure_sweep(
            row, cluster, Path(row.script_path), env, settings["measurement"], logs, reps, print
        )
    order = [(r["clients"], r["repetition"]) for r in reps]
    assert order[0] == (1, 1)  # one repetition of the first count before any other count
    later_ones = [i for i, (c, _) in enumerate(order) if c == 1][1:]
    others = [i for i, (c, _) in enumerate(order) if c != 1]
    assert others and all(i > max(others) for i in later_ones)  # continued after the others
    by_count = {line["clients"]: line for line in lines}
    assert [line["clients"] for line in lines] == sorted(by_count)  # one line per count
    assert by_count[1]["order"] == 1
    for clients, line in by_count.items():
        numbers = [rep for c, rep in order if c == clients]
        assert numbers == list(range(1, len(numbers) + 1))
        assert line["repetitions"] == len(numbers)
        if len(numbers) < 2:  # fewer than the minimum only when clearly below the best
            assert line["stopped"] == "below_best"
        else:
            assert line["stopped"] in ("precision", "max_repetitions", "below_best")
