"""The gcp rules' rerun triggers on a finished study: a cluster is re-provisioned and a row
re-measured only when what defines them changes (issue 20, item 2)."""

from __future__ import annotations

import os
import re
import time

import yaml
from conftest import copy_workflow, failed, shipped_config
from conftest import snakemake as run_snakemake

FINISHED = {"backend": "gcp", "gcp": {"project": "finished-study"}}
# what a config edit can trigger: the params (file times come from the simulation, not a run;
# the slot's previous cluster is an ancient() input and the profile leaves out "input")
PARAMS = ("--rerun-triggers", "params")


def scheduled(out) -> dict[str, int]:
    """Job name -> count from a dry run's job stats."""
    stats = out.stdout[out.stdout.index("Job stats:") :] if "Job stats:" in out.stdout else ""
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}


def finished_study(tmp_path):
    """The files a finished gcp study leaves, with Snakemake's provenance recorded (--touch):
    every output present, every cluster's endpoints gone (temp) and released.json there."""
    work = copy_workflow(tmp_path / "study")
    (work / "config" / "finished.yaml").write_text(yaml.safe_dump(FINISHED))
    summary = run_snakemake(work, "--summary", configfile="config/finished.yaml")
    assert summary.returncode == 0, failed(summary)
    outputs = {line.split("\t")[0] for line in summary.stdout.splitlines()[1:] if "\t" in line}
    for name in outputs:
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if "." in path.name:
            path.touch()
        else:
            path.mkdir(exist_ok=True)  # directory outputs (charts of the analysis)
    for released in (work / "results" / "clusters").glob("*/released.json"):
        outputs.add(str(released.with_name("endpoints.json").relative_to(work)))  # temp
        (released.with_name("endpoints.json")).touch()
    finished = time.time() - 3600
    for name in outputs:  # one time for all: no output is newer than what was made from it
        os.utime(work / name, (finished, finished))
    # --forceall: every job is touched and recorded whatever the checkout's file times (copied
    # from a checkout older than `finished`, nothing was out of date, so nothing was recorded);
    # --notemp: the endpoints stay until every job is recorded (removed below, as a run does)
    touched = run_snakemake(
        work, "--touch", "--forceall", "--notemp", configfile="config/finished.yaml"
    )
    assert touched.returncode == 0, failed(touched)
    for endpoints in (work / "results" / "clusters").glob("*/endpoints.json"):
        endpoints.unlink()  # temp: a finished run has removed them
    assert len(list((work / "results" / "clusters").glob("*/released.json"))) == 8
    return work


def test_alpha_a_price_and_max_clusters_reprovision_and_remeasure_nothing(tmp_path):
    work = finished_study(tmp_path)
    unchanged = scheduled(run_snakemake(work, "-n", *PARAMS, configfile="config/finished.yaml"))
    assert unchanged == {}, unchanged  # the simulated study is finished
    prices = shipped_config()["gcp"]["prices"]
    prices["us-central1"]["vm_hour"]["n1-standard-2"] *= 1.5
    edited = {
        "backend": "gcp",
        "gcp": {"project": "finished-study", "max_clusters": 3, "prices": prices},
        "analysis": {"alpha": 0.1},
    }
    (work / "config" / "edited.yaml").write_text(yaml.safe_dump(edited))
    out = run_snakemake(work, "-n", *PARAMS, configfile="config/edited.yaml")
    assert out.returncode == 0, failed(out)
    jobs = scheduled(out)
    assert jobs.get("effects") == 1, out.stdout[-2000:]  # alpha: the analysis runs again
    for rule in ("cluster_up", "measure", "cluster_down"):
        assert rule not in jobs, f"{rule} scheduled: {jobs}"
    # what defines a cluster does re-provision clusters and re-measure rows (the control)
    resized = {**edited, "gcp": {**edited["gcp"], "disk_size_gb": 60}}
    (work / "config" / "resized.yaml").write_text(yaml.safe_dump(resized))
    out = run_snakemake(work, "-n", *PARAMS, configfile="config/resized.yaml")
    jobs = scheduled(out)
    assert jobs.get("cluster_up", 0) > 0 and jobs.get("measure", 0) > 0, jobs


def test_each_replicate_is_brought_up_on_a_cluster_of_its_own(tmp_path):
    """Issue 19, item 4: with 2 replications a dry run brings up 16 clusters (replicate 2 of a
    combination on <combination>-r2, its rows measured there), 8 with cluster_per_replicate
    false; a value that is not a boolean stops the dry run naming the field."""
    work = copy_workflow(tmp_path / "study")
    design = yaml.safe_load((work / "config" / "design.yaml").read_text())
    (work / "config" / "design.yaml").write_text(yaml.safe_dump({**design, "replications": 2}))
    for per_replicate, clusters in ((True, 16), (False, 8)):
        config = {**FINISHED, "gcp": {**FINISHED["gcp"], "cluster_per_replicate": per_replicate}}
        (work / "config" / "replicated.yaml").write_text(yaml.safe_dump(config))
        out = run_snakemake(work, "-n", configfile="config/replicated.yaml")
        assert out.returncode == 0, failed(out)
        jobs = scheduled(out)
        counts = (jobs["cluster_up"], jobs["measure"], jobs["cluster_down"])
        assert counts == (clusters, 32, clusters), jobs
        r2 = set(re.findall(r"results/clusters/([\w.-]+-r2)/endpoints\.json", out.stdout))
        assert len(r2) == (8 if per_replicate else 0), sorted(r2)
    config = {**FINISHED, "gcp": {**FINISHED["gcp"], "cluster_per_replicate": "maybe"}}
    (work / "config" / "replicated.yaml").write_text(yaml.safe_dump(config))
    out = run_snakemake(work, "-n", configfile="config/replicated.yaml")
    assert out.returncode != 0
    assert "gcp.cluster_per_replicate: 'maybe' is not of type 'boolean'" in out.stdout + out.stderr
