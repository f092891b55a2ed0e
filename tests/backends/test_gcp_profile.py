"""config/gcp.yaml, the measurement profile for YugabyteDB on GCP, layered over config.yaml the
way Snakemake layers a --configfile (snakemake.utils.update_config)."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import copy_workflow, failed, shipped_config, snakemake
from snakemake.utils import update_config

from ybscale import study
from ybscale.backends.gcp.plan import cpu_quota

ROOT = Path(__file__).resolve().parents[2]


def test_the_profile_waits_for_the_balancer_warms_up_and_keeps_one_machine_family():
    config = shipped_config()
    update_config(config, yaml.safe_load((ROOT / "config" / "gcp.yaml").read_text()))
    config["design"] = str(ROOT / "config" / "design.yaml")
    config["workloads"] = str(ROOT / "workloads")
    loaded = study.load(config)
    assert loaded.settings["backend"] == "gcp"
    measurement = loaded.settings["measurement"]
    assert measurement["warmup"] >= 30 and measurement["seconds"] >= 60
    gcp = loaded.settings["gcp"]
    assert gcp["balancer_timeout"] > 0
    types = gcp["machine_types"]
    families = {cpu_quota(types[size]) for size in ("small", "large", "master")}
    assert families == {"N2_CPUS"}  # node_size changes the size, not the CPU generation
    assert gcp["min_cpu_platform"] == "Intel Ice Lake"


def test_the_profile_dry_runs(tmp_path):
    work = copy_workflow(tmp_path / "w")
    out = snakemake(work, "-n", "results/effects.csv", configfile="config/gcp.yaml", timeout=300)
    assert out.returncode == 0, failed(out)
    assert "cluster_up" in out.stdout and "measure" in out.stdout, failed(out)


def test_plan_layers_the_profile_as_snakemake_does(tmp_path, monkeypatch, capsys):
    from ybscale import plan

    work = copy_workflow(tmp_path / "w")
    monkeypatch.chdir(work)
    assert plan.main([]) == 0
    alone = capsys.readouterr().out
    assert plan.main(["--configfile", "config/gcp.yaml"]) == 0
    profiled = capsys.readouterr().out

    def wall(text: str) -> int:
        line = next(x for x in text.splitlines() if x.startswith("as scheduled "))
        hours, minutes = line.split(" min")[0].split()[-3::2]  # the table's wall time
        return int(hours) * 60 + int(minutes)

    assert wall(profiled) > wall(alone)  # 30-s warm-ups and 60-s repetitions take longer
    assert "n1-" not in profiled and "4x n2-standard-2" in profiled
