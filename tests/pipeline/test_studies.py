"""Designs the seed never had, end to end through Snakemake on real PostgreSQL.

- a 2^(5-2) design with two server settings, a session setting, the isolation level and a
  workload variable, in two blocks: every level is read back from the servers or seen by
  pgbench itself (8 rows: each level of each factor on 4 of them, every pair of server levels
  on 2), the rows measured block by block and analysed without the blocks;
- a 2^2 design without any cluster factor: one cluster combination, runs end to end;
- gcp dry runs: one cluster per server-setting combination, exactly one without such factors.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import INTERRUPTIBLE, REPO, copy_workflow, failed, jobs_in, ram_root, servers_under
from conftest import snakemake as run_snakemake

# pgbench's \shell runs in the pgbench process: each transaction writes the :rows it was given
PROBE = """\\set k random(0, :shard_rows - 1) * :nshards + :shard
SELECT k, v FROM kv WHERE k >= :k ORDER BY k LIMIT :rows;
\\shell echo :rows >> rows-seen.txt
"""

NEW_FACTORS = {
    "factors": {
        "A": {"name": "batch", "sets": "workload.rows", "levels": [1, 10]},
        "B": {"name": "isolation", "levels": ["read committed", "snapshot"]},
        "C": {"name": "commit", "sets": "server.synchronous_commit", "levels": ["on", "off"]},
        "D": {"name": "sort_memory", "sets": "server.work_mem", "levels": ["4MB", "16MB"]},
        "E": {"name": "seqscan", "sets": "session.enable_seqscan", "levels": ["on", "off"]},
    },
    "generators": {"D": "AB", "E": "AC"},
    # issue 47: in two blocks, the block generator chosen as the textbooks choose it (BC, the
    # first of the two columns no main effect is on: BC = DE and BE = CD = ABC)
    "blocks": 2,
}
BLOCKED = {  # issue 47: an unreplicated 2^3 in two blocks (ABC confounded, chosen)
    "factors": {
        "A": {"name": "operation_size", "levels": [1, 100]},
        "B": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
        "C": {"name": "seqscan", "sets": "session.enable_seqscan", "levels": ["on", "off"]},
    },
    "blocks": 2,
}
CENTRED = {  # issues 47 and 60: a 2^3, two numeric factors (their middle: nodes 4, 51 rows)
    "factors": {  # and the isolation level, which has none: two centre runs at each
        "A": {"name": "operation_size", "levels": [1, 100]},
        "B": {"name": "nodes", "levels": [3, 5]},
        "C": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
    },
    "center_points": 2,
}
NO_CLUSTER_FACTOR = {
    "factors": {
        "A": {"name": "operation_size", "levels": [1, 100]},
        "B": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
    }
}


def study_dir(
    work: Path, root: Path, name: str, design: dict, measurement=None, **defaults
) -> Path:
    """A folder of its own (results included) running `design` with the tiny measurement
    (`measurement`: its changes)."""
    folder = copy_workflow(work / name)
    (folder / "workloads" / "probe.sql").write_text(PROBE)
    (folder / "config" / "study.yaml").write_text(yaml.safe_dump(design))
    tiny = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    # one client a row (the sweep's extension to more is the tiny study's)
    tiny["measurement"].update({"clients": [1], "max_clients": 1, **(measurement or {})})
    tiny["design"] = "config/study.yaml"
    tiny["defaults"] = {"dataset": {"rows": 1000}, **defaults}
    tiny["local"] = {"data_root": str(root)}
    (folder / "config" / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    return folder


@dataclass
class Study:
    """A study started in the background: its folder, its own data root, its Snakemake."""

    folder: Path
    root: Path
    proc: subprocess.Popen

    def finished(self, timeout: float = 1800) -> Path:
        """Its folder once `snakemake results/effects.csv` has succeeded."""
        self.proc.wait(timeout=timeout)
        output = (self.folder / "snakemake.out").read_text()
        assert self.proc.returncode == 0, output[-6000:]
        return self.folder


ECONOMY = {"sweep": "economy", "clients": [1, 2], "max_clients": 4, "probe_seconds": 2,
           "seconds": 3}  # fmt: skip

# name -> (design, defaults, measurement)
STUDIES = {
    "new": (NEW_FACTORS, {"cluster": {"nodes": 1}, "workload": {"script": "probe"}}, None),
    # one node: the point is one combination for every row (3 and 5 nodes: the tiny study);
    # measured by the economy sweep (issue 50)
    "plain": (NO_CLUSTER_FACTOR, {"cluster": {"nodes": 1}}, ECONOMY),
}


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """The studies, started together in their own folders and data roots (each one's servers
    are watched on its own root), so that one's waits overlap the other's work; the tests check
    levels, shapes and clean-up, never throughput."""
    work = tmp_path_factory.mktemp("studies")
    with ExitStack() as stack:
        started = {}
        for name, (design, defaults, measurement) in STUDIES.items():
            root = stack.enter_context(ram_root())
            folder = study_dir(work, root, name, design, measurement, **defaults)
            with open(folder / "snakemake.out", "w") as out:  # a file: nobody reads a pipe
                proc = subprocess.Popen(
                    # Ctrl-C not ignored, so that `stop` can interrupt it (INTERRUPTIBLE)
                    [*INTERRUPTIBLE, sys.executable, "-m", "snakemake", "--cores", "2"]
                    + ["results/effects.csv", "--configfile", "config/tiny.yaml"],
                    cwd=folder,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            stack.callback(stop, proc)
            started[name] = Study(folder, root, proc)
        yield started


def stop(proc: subprocess.Popen) -> None:
    """A study still running at the end of the module (a test failed early) is interrupted
    as from a terminal, so its servers stop before its data root is removed."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def snakemake(folder: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    out = run_snakemake(folder, *args, configfile="config/tiny.yaml", timeout=timeout)
    assert out.returncode == 0, failed(out)
    return out


def cluster_ups(folder: Path, *config: str) -> int:
    out = snakemake(folder, "-n", "results/effects.csv", "--config", "backend=gcp", *config)
    return len(re.findall(r"^rule cluster_up:", out.stdout, re.MULTILINE))


@pytest.mark.slow
def test_new_factors_run_end_to_end_in_blocks_and_every_level_is_in_effect(studies):
    """Every level of the 2^(5-2) is read back from the servers or seen by pgbench. Issue 47,
    `blocks: 2` in its design.yaml: the block generator is chosen as the textbooks choose it
    (BC); the rows are measured block by block (run_order.csv: block 1's four rows first, in
    random order); the BC column leaves the effect tests for the `block` line, and the
    findings say so. On gcp, where rows share clusters, the dry run refuses the blocks, naming
    the file and the field; without them it plans one cluster per server combination."""
    folder, root = studies["new"].finished(), studies["new"].root
    effects = pd.read_csv(folder / "results" / "effects.csv")
    effects = effects[effects["response"] == "ceiling"].set_index("term")
    # Lenth over the six columns left: BC is the block's
    assert sorted(effects.index.drop(["error", "block"], errors="ignore")) == sorted(
        ["A", "B", "C", "D", "E", "BE"]
    )
    assert effects.loc["block", "alias"].startswith("BC = DE")
    signs = pd.read_csv(folder / "results" / "ceilings.csv").set_index("run")
    assert len(signs) == 8
    for run, s in signs.iterrows():
        meta = json.loads((folder / "results" / "runs" / run / "measurement.json").read_text())
        effect = meta["applied"]["settings_in_effect"]
        server, session = effect["server"]["node1"], effect["session"]["node1"]
        assert server["synchronous_commit"] == ("on" if s["C"] < 0 else "off")
        assert server["work_mem"] == ("4MB" if s["D"] < 0 else "16MB")
        assert session["enable_seqscan"] == ("on" if s["E"] < 0 else "off")
        isolation = meta["applied"]["isolation_in_effect"]["node1"]
        assert isolation == ("read committed" if s["B"] < 0 else "repeatable read")
        seen = (folder / "results" / "runs" / run / "pgbench-logs" / "rows-seen.txt").read_text()
        assert set(seen.split()) == {"1" if s["A"] < 0 else "10"}
    assert servers_under(root) == []
    # the blocks
    record = json.loads((folder / "results" / "design" / "design.json").read_text())
    assert record["block_generators"] == ["BC"], record["block_aliases"]
    order = pd.read_csv(folder / "results" / "run_order.csv").sort_values("executed")
    assert list(order["block"]) == [1, 1, 1, 1, 2, 2, 2, 2]
    bc = signs["B"] * signs["C"]
    first = set(order["run"][order["block"] == 1])
    assert {run for run in signs.index if bc[run] == bc[signs.index[0]]} == first
    findings = (folder / "results" / "findings.md").read_text()
    assert "measured in blocks confounded with BC = DE" in findings
    assert "Block line of the ANOVA: F = " in findings  # what the blocks showed, in words
    quiet = [line for line in findings.splitlines() if "are within the noise" in line]
    assert quiet and not any("block" in line for line in quiet)  # never listed as an effect
    out = run_snakemake(folder, "-n", "results/effects.csv", "--config", "backend=gcp",
                        configfile="config/tiny.yaml")  # fmt: skip
    assert out.returncode != 0
    assert "config/study.yaml: blocks: design blocks with rows that share a cluster" in (
        out.stdout + out.stderr
    )
    # two server factors: one cluster per combination of their levels on gcp (the design
    # without its blocks)
    unblocked = {key: value for key, value in NEW_FACTORS.items() if key != "blocks"}
    (folder / "config" / "unblocked.yaml").write_text(yaml.safe_dump(unblocked))
    assert cluster_ups(folder, "design=config/unblocked.yaml") == 4


@pytest.mark.slow
def test_design_without_cluster_factor_runs_end_to_end_on_one_combination(studies):
    folder, root = studies["plain"].finished(), studies["plain"].root
    effects = pd.read_csv(folder / "results" / "effects.csv")
    effects = effects[effects["response"] == "ceiling"]  # the main response's lines
    assert sorted(effects["term"]) == sorted(["A", "B", "AB"])
    ceilings = pd.read_csv(folder / "results" / "ceilings.csv")
    assert (ceilings["empirical_tps"] > 0).all() and len(ceilings) == 4
    assert cluster_ups(folder) == 1
    assert servers_under(root) == []
    # the economy sweep: counts probed (2 s), the best probe's measured once in full (3 s);
    # the ceiling reads that repetition alone, with an interval from its own seconds
    for run, line in ceilings.set_index("run").iterrows():
        reps = pd.read_csv(folder / "results" / "runs" / run / "repetitions.csv")
        full = reps[~reps["probe"]]
        assert reps["probe"].sum() >= 2 and len(full) == 1 == line["full_repetitions"]
        assert line["probes"] == reps["probe"].sum()
        assert line["measured_seconds"] == reps["duration_s"].sum()
        assert line["empirical_tps"] == full["tps"].iloc[0]
        assert line["empirical_clients"] == full["clients"].iloc[0]
        assert line["empirical_ci_low"] < line["empirical_tps"] < line["empirical_ci_high"]
    findings = (folder / "results" / "findings.md").read_text()
    assert "economy sweep: every count probed once for 2 s" in findings
    assert f"**Measuring time.** {ceilings['measured_seconds'].sum():,.0f} s of pgbench" in findings


def test_one_block_per_invocation(tmp_path):
    """`snakemake --cores 4 block --config block=2` measures block 2's rows and nothing else
    (a dry run: the measuring and publishing jobs of exactly its four runs); a block the design
    does not have, or a design without blocks, is refused naming `--config block`."""
    from ybscale.design.factorial import design_from_dict

    folder = study_dir(tmp_path, tmp_path / "root", "blocked", BLOCKED, cluster={"nodes": 1})
    design = design_from_dict(BLOCKED)
    second = {run for run, b in design.block_labels().items() if b == 2}
    out = run_snakemake(folder, "-n", "block", "--config", "block=2", configfile="config/tiny.yaml")
    assert out.returncode == 0, failed(out)
    jobs = jobs_in(out.stdout)
    assert jobs["measure"] == second and jobs["publish"] == second and len(second) == 4
    assert "effects" not in jobs
    out = run_snakemake(folder, "-n", "block", "--config", "block=3", configfile="config/tiny.yaml")
    assert out.returncode != 0 and "--config block=3: config/study.yaml has blocks 1 to 2" in (
        out.stdout + out.stderr
    )
    plain = study_dir(tmp_path, tmp_path / "root", "plain", NO_CLUSTER_FACTOR, ECONOMY)
    out = run_snakemake(plain, "-n", "block", "--config", "block=1", configfile="config/tiny.yaml")
    assert out.returncode != 0 and "config/study.yaml has no blocks" in out.stdout + out.stderr


@pytest.mark.slow
def test_a_design_with_centre_points_measures_them_and_tests_curvature(tmp_path):
    """Issues 47 and 60: `center_points: 2` on a 2^3 of nodes (3, 5), rows per transaction
    (1, 100) and the isolation level, which has no middle: run09 .. run12 are measured like
    any row, on clusters of four nodes with 51 rows per transaction, two at each isolation
    level, in the random run order; ceilings.csv carries them coded 0 but the isolation's
    -1/+1; the ANOVA has the curvature and pure-error lines; the findings say, at each
    isolation level, whether the throughput bends between the numeric levels; the report is
    written and a centre row re-measured by its path, as the mission's commands do. Its own
    study (not the module's fixture): one at a time on a small machine."""
    with ram_root() as root:
        folder = study_dir(tmp_path, root, "centred", CENTRED)
        snakemake(folder, "--cores", "2", "results/effects.csv", timeout=1200)
        results = folder / "results"
        record = json.loads((results / "design" / "design.json").read_text())
        centre = ["run09", "run10", "run11", "run12"]
        assert record["center_runs"] == centre
        assert record["center_levels"] == {"nodes": 4, "operation_size": 51}
        assert record["center_held"] == ["isolation"]
        held = {run: record["center_placement"][run]["isolation"] for run in centre}
        assert list(held.values()) == ["read committed"] * 2 + ["repeatable read"] * 2
        order = pd.read_csv(results / "run_order.csv")
        assert sorted(order["run"]) == [f"run{i:02d}" for i in range(1, 13)]
        for run in centre:
            meta = json.loads((results / "runs" / run / "measurement.json").read_text())
            assert meta["row"]["cluster"]["nodes"] == 4
            assert meta["row"]["variables"] == {"rows": "51", "distribution": "0"}
            assert meta["row"]["levels"]["isolation"] == held[run]
        ceilings = pd.read_csv(results / "ceilings.csv").set_index("run")
        assert (ceilings.loc[centre, ["A", "B"]] == 0).all().all()
        assert list(ceilings.loc[centre, "C"]) == [-1, -1, 1, 1]
        effects = pd.read_csv(results / "effects.csv")
        effects = effects[effects["response"] == "ceiling"].set_index("term")
        assert {"A", "B", "AB", "C"} <= set(effects.index)
        anova = pd.read_csv(results / "anova.csv")
        terms = set(anova.loc[anova["response"] == "ceiling", "term"])
        assert {"curvature", "pure error"} <= terms
        findings = " ".join((results / "findings.md").read_text().split())
        assert "**Curvature.** 4 centre runs set every factor with a middle to it" in findings
        for level in ("read committed", "repeatable read"):
            assert f"at isolation {level}: the 2 centre runs' mean" in findings
        assert findings.count("bends between the numeric levels") >= 2
        snakemake(folder, "--report", "report.html", timeout=600)
        assert (folder / "report.html").is_file()
        again = snakemake(folder, "-f", "results/runs/run10/throughput.csv", timeout=600)
        assert "run10" in again.stdout + again.stderr
        assert servers_under(root) == []
