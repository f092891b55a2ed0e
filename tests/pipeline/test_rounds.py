"""The study's checkpoint (issue 57): while a column is undecided and measurement.budget allows,
the pipeline adds a replicate of every row, as ordinary rows, inside the Snakemake DAG.

One tiny study of a 2^2 on real PostgreSQL (4 rows a replicate), judged against a relevant size
of 0.01 %. Its factor B changes nothing the server does (which messages its sessions are sent:
the workload raises none), so B's and AB's true effects are 0: each one's interval holds 0 (but
with probability below the family's α) and reaches past ±0.01 % on both sides (its half-width is
the runs' noise, far above 0.01 %), so they stay undecided whatever the machine's noise. (At 1 %
on the isolation level, a quiet CI machine once decided every column at 8 rows, and the study
rightly stopped there.) It adds replicates 2 and 3 and stops at the budget of 3.
Then the product's commands on it: a plain run plans nothing; a forced row of replicate 3
(run09) re-measures only itself; the plain run after it measures nothing.
"""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import jobs_in, planned, servers_under, tiny_snakemake, tiny_workflow

DESIGN = {
    "factors": {
        "A": {"name": "operation_size", "sets": "workload.rows", "levels": [1, 100]},
        "B": {
            "name": "messages",
            "sets": "session.client_min_messages",
            "levels": ["notice", "warning"],
        },  # the workload sends neither
    },
}


@pytest.mark.slow  # a real study of 12 rows
def test_the_study_adds_replicates_while_a_column_is_undecided_and_stops_at_the_budget(
    tmp_path, data_root
):
    work = tiny_workflow(tmp_path / "work", data_root)
    (work / "config" / "design-rounds.yaml").write_text(yaml.safe_dump(DESIGN))
    test_cfg = yaml.safe_load((work / "config" / "test.yaml").read_text())
    test_cfg["design"] = "config/design-rounds.yaml"
    test_cfg["measurement"] |= {"budget": {"replicates": 3}, "clients": [1], "max_clients": 1}
    test_cfg["defaults"]["cluster"] = {"nodes": 1}  # the rounds' mechanics: one node a row
    test_cfg["analysis"] = {"relevant": "0.01%", "responses": ["ceiling"]}
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(test_cfg))

    first = tiny_snakemake(work, "results/effects.csv")
    ran = jobs_in(first.stdout + first.stderr)
    assert ran["measure"] == {f"run{i:02d}" for i in range(1, 13)}, ran
    decisions = [json.loads((work / f"results/rounds/round{n}.json").read_text()) for n in range(3)]
    assert not (work / "results/rounds/round3.json").exists()
    assert [d["replicates"] for d in decisions] == [1, 2, 3]
    assert [d["more"] for d in decisions] == [True, True, False]
    assert all(any(d["undecided"].values()) for d in decisions)  # B and AB stay open
    assert "at its budget (3 replicates" in decisions[-1]["ended"]
    ceilings = (work / "results" / "ceilings.csv").read_text().splitlines()
    assert len(ceilings) == 1 + 12
    record = json.loads((work / "results" / "rounds" / "round2" / "design.json").read_text())
    assert record["replications"] == 3  # what the study's analysis read
    assert json.loads((work / "results" / "design" / "design.json").read_text())[
        "replications"] == 1  # the design as written  # fmt: skip
    findings = (work / "results" / "findings.md").read_text()
    assert "The study ended at its budget (3 replicates" in findings
    assert servers_under(data_root) == []

    assert planned(work, "results/effects.csv") == {}
    forced = tiny_snakemake(work, "-f", "results/runs/run09/throughput.csv")
    ran = jobs_in(forced.stdout + forced.stderr)
    assert ran["measure"] == {"run09"}, ran
    after = planned(work, "results/effects.csv")
    assert "measure" not in after and "cluster_up" not in after, after
    assert servers_under(data_root) == []


def test_with_every_column_decided_round_zero_ends_the_study(tmp_path):
    """The decision by itself: nothing undecided ends the study at round 0; undecided columns
    within the seconds budget add a replicate; past it, the budget ends it."""
    from ybscale.analysis.rounds import decision

    done = decision({"response": []}, 1, 4, 300.0, None, "20%")
    assert not done["more"] and "every column decided" in done["ended"]
    go = decision({"response": ["B"]}, 1, 4, 300.0, 1000.0, "20%")
    assert go["more"] and "Replicate 2 is added" in go["ended"]
    stop = decision({"response": ["B"]}, 3, 4, 900.0, 1000.0, "20%")
    assert not stop["more"] and "1,000 s of measurement" in stop["ended"]
