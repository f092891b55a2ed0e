"""`local.cluster_per: combination`: the rows of one combination share a local cluster, as on
gcp, and the error strata follow (a split plot); `row` (the default) keeps a fresh cluster per
row and one stratum."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from conftest import (
    failed,
    jobs_in,
    servers_under,
    shipped_config,
    snakemake,
    tiny_workflow,
)
from designs import seed_design_path, seed_study

from ybscale import study
from ybscale.backends.base import alive
from ybscale.design.strata import SINGLE, SUB, WHOLE, column_strata, format_strata
from ybscale.study import cluster_of

SEED_WHOLE = {"A", "B", "C", "E", "F", "AC", "AE"}  # constant within every combination


def _config(**local) -> dict:
    config = shipped_config()
    design = str(seed_design_path())
    return {**config, "design": design, "local": {**config["local"], **local}}


def test_rows_of_a_combination_share_a_cluster_per_replicate_and_the_seed_is_a_split_plot(
    tmp_path,
):
    fresh = study.load(_config())
    assert fresh.settings["local"]["cluster_per"] == "row"  # the default
    assert len(fresh.clusters) == 16
    assert set(column_strata(fresh.design, cluster_of(fresh.settings, fresh.rows)).values()) == {
        SINGLE
    }
    shared = study.load(_config(cluster_per="combination"))
    clusters = cluster_of(shared.settings, shared.rows)
    assert len(shared.clusters) == 8 and all(len(r) == 2 for r in shared.clusters.values())
    assert all(clusters[row.run] == row.combination for row in shared.rows)
    strata = column_strata(shared.design, clusters)
    assert {t for t, s in strata.items() if s == WHOLE} == SEED_WHOLE
    assert {t for t, s in strata.items() if s == SUB} == set(shared.design.terms) - SEED_WHOLE
    assert (
        "Error strata (local: 16 runs on 8 clusters):\n  whole-plot (against the cluster-to-"
        "cluster noise): A, B, F, C, AC, E, AE\n" in format_strata(shared.design, clusters, "local")
    )
    # replicates: a cluster of their own (the replicate error holds cluster-to-cluster noise)
    design = seed_study()
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump({**design, "replications": 2}))
    twice = study.load(_config(cluster_per="combination"), str(path))
    labels = cluster_of(twice.settings, twice.rows)
    assert len(twice.clusters) == 16
    assert {labels[r.run] for r in twice.rows if r.replicate == 2} == {
        f"{r.combination}-r2" for r in twice.rows
    }


def _job_counts(out: str) -> dict[str, int]:
    """rule -> jobs, from a dry run's job stats table."""
    table = out.split("Job stats:")[1].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.MULTILINE)}


def test_dry_run_plans_a_cluster_per_combination_and_rejects_a_bad_value(tmp_path, data_root):
    """The seed design on config/test.yaml: 8 bring-ups and releases for 16 rows with
    `combination`, 16 with `row`; a bad value names the file and the field at -n time."""
    work = tiny_workflow(tmp_path / "work", data_root)
    test_yaml = work / "config" / "test.yaml"
    test_cfg = yaml.safe_load(test_yaml.read_text())
    jobs = {}
    for value in ("row", "combination", "sometimes"):
        test_cfg["local"]["cluster_per"] = value
        test_yaml.write_text(yaml.safe_dump(test_cfg))
        out = snakemake(work, "-n", configfile="config/test.yaml")
        if value == "sometimes":
            assert out.returncode != 0
            assert (
                "config/test.yaml: local.cluster_per: 'sometimes' is not one of "
                "['row', 'combination']" in out.stdout + out.stderr
            )
            continue
        assert out.returncode == 0, failed(out)
        jobs[value] = _job_counts(out.stdout)
    assert [jobs["row"][r] for r in ("cluster_up", "measure", "cluster_down")] == [16, 16, 16]
    assert [jobs["combination"][r] for r in ("cluster_up", "measure", "cluster_down")] == [8, 16, 8]
    assert servers_under(data_root) == []  # a dry run starts nothing


SHARE_DESIGN = {
    "factors": {
        "A": {"name": "node_size", "sets": "cluster.node_size", "levels": ["small", "large"]},
        "B": {
            "name": "isolation",
            "sets": "session.default_transaction_isolation",
            "levels": ["read committed", "repeatable read"],
        },
        "C": {"name": "operation_size", "sets": "workload.rows", "levels": [1, 10]},
    },
    "replications": 1,
}


@pytest.mark.slow
def test_a_study_shares_one_real_cluster_per_combination_and_judges_a_split_plot(
    tmp_path, data_root
):
    """A 2^3 study on real PostgreSQL (config/test.yaml, 2 nodes): A (node size) is the
    cluster's, so two clusters of four rows. The four rows of a cluster were measured on the
    same servers (their pid and start time, read back from each server), clusters one after the
    other, every server stopped at the end; design.json, the effects and the findings give A
    its whole-plot stratum and the rest the sub-plot one."""
    work = tiny_workflow(tmp_path / "work", data_root)
    (work / "config" / "share.yaml").write_text(yaml.safe_dump(SHARE_DESIGN))
    test_yaml = work / "config" / "test.yaml"
    test_cfg = yaml.safe_load(test_yaml.read_text())
    test_cfg["design"] = "config/share.yaml"
    test_cfg["local"]["cluster_per"] = "combination"
    test_cfg["defaults"]["cluster"] = {"nodes": 2}
    test_cfg["measurement"] |= {"clients": [1], "max_clients": 1}  # the sharing, not the sweep
    test_yaml.write_text(yaml.safe_dump(test_cfg))
    out = snakemake(work, configfile="config/test.yaml", timeout=1800)
    assert out.returncode == 0, failed(out)
    assert servers_under(data_root) == []
    assert list(data_root.glob("ybscale-*/owner.json")) == []  # every cluster's data removed

    results = work / "results"
    applied = {
        run: json.loads((results / "runs" / run / "measurement.json").read_text())["applied"]
        for run in [f"run{i:02d}" for i in range(1, 9)]
    }
    by_cluster: dict[str, list[str]] = {}
    for run, a in applied.items():
        by_cluster.setdefault(a["cluster"], []).append(run)
    assert sorted(by_cluster) == ["nodes2-large-reploff", "nodes2-small-reploff"]
    assert all(len(runs) == 4 for runs in by_cluster.values())
    servers = {label: {json.dumps(applied[r]["servers"]) for r in runs}
               for label, runs in by_cluster.items()}  # fmt: skip
    assert all(len(s) == 1 for s in servers.values())  # one set of servers per cluster
    assert len({next(iter(s)) for s in servers.values()}) == 2  # and two clusters
    pids = [n["pid"] for a in applied.values() for n in a["servers"].values()]
    assert pids and not any(alive(pid) for pid in pids)
    for label in by_cluster:
        assert json.loads((results / "clusters" / label / "released.json").read_text())[
            "stopped"
        ] == ["node1", "node2"]

    order = pd.read_csv(results / "run_order.csv").sort_values("executed")
    blocks = list(order["block"])
    assert blocks == sorted(blocks, key=blocks.index)  # a cluster's rows one after another
    assert [
        order.set_index("run").loc[runs, "block"].nunique() for runs in by_cluster.values()
    ] == [
        1,
        1,
    ]

    strata = json.loads((results / "design" / "design.json").read_text())["strata"]
    assert strata["backend"] == "local" and len(strata["clusters"]) == 2
    assert strata["columns"] == {t: WHOLE if t == "A" else SUB for t in strata["columns"]}
    assert "local: 8 runs on 2 clusters; the whole-plot columns A are constant" in strata["note"]
    effects = pd.read_csv(results / "effects.csv")
    effects = effects[effects["response"] == "ceiling"].set_index("term")  # the main response
    assert effects.loc["A", "stratum"] == WHOLE and effects.loc["B", "stratum"] == SUB
    assert pd.isna(effects.loc["A", "me"])  # one whole-plot column: no noise estimate, untested
    findings = " ".join((results / "findings.md").read_text().split())
    assert (
        "On local rows that differ only in session or workload knobs shared a cluster" in findings
    )
    assert "The 8 rows ran on 2 clusters (local.cluster_per: combination)" in findings

    # re-measuring one row by its path on a shared cluster (issue 36): one bring-up, that row
    # alone measured and published, its cluster released, and then only the analysis is stale
    run = by_cluster["nodes2-large-reploff"][1]
    before = {r: (results / "runs" / r / "throughput.csv").stat().st_mtime_ns for r in applied}
    out = snakemake(
        work, "--cores", "4", "-f", f"results/runs/{run}/throughput.csv",
        configfile="config/test.yaml", timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, failed(out)
    log = out.stdout + out.stderr
    ran = jobs_in(log)
    assert log.count("rule cluster_up:") == 1 and log.count("rule measure:") == 1, ran
    assert ran["measure"] == {run} and ran["publish"] == {run}, ran
    assert ran["cluster_up"] == {""} and ran["cluster_down"] == {""}, ran  # one cluster, once
    after = {r: (results / "runs" / r / "throughput.csv").stat().st_mtime_ns for r in applied}
    assert [r for r in applied if after[r] != before[r]] == [run]
    assert servers_under(data_root) == []
    stale = jobs_in(snakemake(work, "-n", configfile="config/test.yaml").stdout)
    assert not stale.keys() & {"cluster_up", "measure", "publish", "cluster_down"}, stale
    assert stale["ceiling"] == {run}  # the new measurement is analysed, nothing re-measured


def test_the_default_keeps_a_fresh_cluster_per_row_in_the_findings():
    """One stratum, and the findings say why: every row on a fresh cluster."""
    from ybscale.report.strata_text import findings_text

    effects = pd.DataFrame({"term": ["A", "B"], "stratum": [SINGLE, SINGLE]})
    loaded = study.load(_config())
    clusters = cluster_of(loaded.settings, loaded.rows)
    (text,) = findings_text(effects, "local", clusters=clusters)
    assert "One stratum (local): every row ran on a fresh cluster" in text
    one = {run: "c" for run in clusters}
    assert (
        "16 rows shared 1 cluster(s) and no column is constant"
        in findings_text(effects, "existing", clusters=one)[0]
    )
