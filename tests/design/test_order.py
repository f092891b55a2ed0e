"""Randomised, recorded run order: reproducible from the seed, blocks per replicate, and the
order Snakemake really executes follows the priorities."""

import json
import subprocess
import sys
import textwrap

import pandas as pd
from designs import design as make_design

from ybscale.design.order import executed_order, planned_order, run_priorities


def test_same_seed_same_order_other_seed_other_order():
    table = make_design("ABC", replications=1).sign_table()
    first = planned_order(table, "random", 7)["run"].tolist()
    assert first == planned_order(table, "random", 7)["run"].tolist()
    assert sorted(first) == sorted(table.index)
    others = {tuple(planned_order(table, "random", s)["run"]) for s in range(8)}
    assert len(others) > 4
    assert planned_order(table, "standard", 7)["run"].tolist() == list(table.index)


def test_replicates_are_blocks_each_in_its_own_random_order():
    plan = planned_order(make_design("ABC", replications=2).sign_table(), "random", 3)
    assert plan["block"].tolist() == [1] * 8 + [2] * 8
    assert sorted(plan["row"][:8]) == sorted(plan["row"][8:]) == list(range(1, 9))
    assert plan["row"][:8].tolist() != plan["row"][8:].tolist()
    # adding a replicate leaves the first block's order as it was
    one = planned_order(make_design("ABC", replications=1).sign_table(), "random", 3)
    assert one["row"].tolist() == plan["row"][:8].tolist()


def test_priorities_rank_the_plan():
    for r, order in ((1, "random"), (2, "random"), (2, "standard")):
        plan = planned_order(make_design("ABC", replications=r).sign_table(), order, 5)
        prio = run_priorities(make_design("ABC", replications=r), order, 5)
        assert sorted(prio, key=prio.get, reverse=True) == plan["run"].tolist()


def test_executed_order_is_sorted_by_start(tmp_path):
    plan = planned_order(make_design("ABC", replications=1).sign_table(), "random", 1)
    paths = []
    for i, run in enumerate(reversed(plan["run"].tolist())):
        path = tmp_path / f"{run}.json"
        stamp = f"2025-01-01T00:00:{10 + 2 * i:02d}+00:00"
        end = f"2025-01-01T00:00:{11 + 2 * i:02d}+00:00"
        path.write_text(json.dumps({"run": run, "started": stamp, "finished": end}))
        paths.append(path)
    out = executed_order(plan, paths, "random", 1)
    assert out["run"].tolist() == list(reversed(plan["run"].tolist()))
    assert out["executed"].tolist() == list(range(1, 9))
    assert (out["seconds"] == 1.0).all()


def test_snakemake_executes_measuring_jobs_in_priority_order(tmp_path):
    """A real Snakemake 9 run: a callable `priority:` plus resource bench=1 fixes the order."""
    plan = planned_order(make_design("ABC", replications=2).sign_table(), "random", 11)
    # the priorities the workflow gives (rules/measure.smk), as the Snakefile would compute them
    (tmp_path / "priorities.json").write_text(
        json.dumps(run_priorities(make_design("ABC", replications=2), "random", 11))
    )
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(
            """
            import json
            PRIO = json.load(open("priorities.json"))

            rule all:
                input: expand("out/{run}.done", run=sorted(PRIO))

            rule measure:
                output: "out/{run}.done"
                priority: lambda wildcards: PRIO[wildcards.run]
                resources: bench=1
                shell: "echo {wildcards.run} >> executed.txt && touch {output}"
            """
        )
    )
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--resources", "bench=1", "-q"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    executed = (tmp_path / "executed.txt").read_text().split()
    assert executed == plan["run"].tolist()
    assert pd.Series(executed).is_unique


def test_executed_positions_read_back(tmp_path):
    from ybscale.design.order import executed_positions

    plan = planned_order(make_design("ABC", replications=1).sign_table(), "random", 2)
    paths = []
    for i, run in enumerate(plan["run"]):
        path = tmp_path / f"{run}.json"
        stamp = f"2025-01-01T00:01:{10 + i:02d}+00:00"
        path.write_text(json.dumps({"run": run, "started": stamp, "finished": stamp}))
        paths.append(path)
    executed_order(plan, paths, "random", 2).to_csv(tmp_path / "o.csv", index=False)
    pos = executed_positions(tmp_path / "o.csv")
    assert pos[plan["run"].iloc[0]] == 1 and pos[plan["run"].iloc[-1]] == 8
