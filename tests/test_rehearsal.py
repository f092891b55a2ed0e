"""The gcp path rehearsed on loopback: `snakemake --config backend=gcp` end to end on the real
Pulumi engine, with the cloud replaced by tests/loopback.py (PostgreSQL stand-ins carrying
YugabyteDB's catalogue, the load generator an sshd on 127.0.0.1). Everything after `pulumi up`
is the pipeline's own code: readiness, SSH, pgbench on the load generator, resets, settings read
back, cluster_down."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, failed, ram_root, servers_under, settings_with
from conftest import snakemake as run_snakemake
from loopback import SITE_ENV, loopback_site, tserver_ips
from test_stacks import engine_path

from ybscale.backends.gcp import stacks
from ybscale.backends.gcp.backend import LoadgenRunner
from ybscale.backends.gcp.config import gcp_section

TESTS = Path(__file__).resolve().parent
DESIGN = {  # 2^3, one cluster factor: two clusters of four rows each
    "factors": {
        "A": {"name": "nodes", "levels": [1, 2]},
        "B": {"name": "workload", "levels": ["read", "write"]},
        "C": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
    }
}
REPLICATED = {  # 2^2 twice: each replicate of a combination on a cluster of its own (4 of 2 rows)
    "factors": {
        "A": {"name": "nodes", "levels": [1, 2]},
        "B": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
    },
    "replications": 2,
}


def gcp_settings(state: Path) -> dict:
    return {
        "project": "loopback",
        "owner": "rehearsal",
        "program": "loopback:program",
        "ssh_access": "public",
        "ssh_source_cidr": "127.0.0.1/32",
        "table_sharding": "none",  # PostgreSQL has no SPLIT clause: no layout to check
        "ready_timeout": 60,
        "max_clusters": 2,
        "state_url": f"file://{state}",
    }


@pytest.fixture
def engine_env(tmp_path, monkeypatch):
    """This process's environment (for the test's own look at the stacks) and the study's:
    the real engine first on PATH, a Pulumi home of the test's own, tests/ importable."""
    exe = engine_path()
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        reason = f"{exe}: no Pulumi engine; build it with `bash .ci/pulumi.sh`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "pulumi-home"))
    monkeypatch.setenv("PULUMI_SKIP_UPDATE_CHECK", "true")
    path = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def pulumi_processes(root: Path) -> list[str]:
    return [p for p in servers_under(root) if "pulumi" in p]


@pytest.mark.slow
@pytest.mark.parametrize(("design", "clusters"), [(DESIGN, 2), (REPLICATED, 4)], ids=["r1", "r2"])
def test_gcp_study_runs_end_to_end_on_loopback(engine_env, sshd, tmp_path, design, clusters):
    work = copy_workflow(tmp_path / "study")
    (work / "config" / "rehearsal.yaml").write_text(yaml.safe_dump(design))
    study = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    study |= {"design": "config/rehearsal.yaml", "backend": "gcp"}
    study["gcp"] = gcp_settings(tmp_path / "state")
    (work / "config" / "loopback.yaml").write_text(yaml.safe_dump(study))
    runs = [f"run{i:02d}" for i in range(1, 9)]
    # the load generator's work folder of each row (sshd's user is this one: its home)
    remote = [Path.home() / LoadgenRunner(None).remote_dir(work / "results" / "runs" / run /
              "pgbench-logs") for run in runs]  # fmt: skip
    for folder in remote:
        shutil.rmtree(folder, ignore_errors=True)
    with ram_root() as root:
        settings = settings_with(local={"data_root": str(root), "cpu_mechanism": "none"})
        with loopback_site(root, sshd, [1, 2], settings) as site:
            env = {**engine_env, SITE_ENV: str(site)}
            out = run_snakemake(work, configfile="config/loopback.yaml", env=env, timeout=900)
            assert out.returncode == 0, failed(out)
            stand_ins = servers_under(root)
            master = json.loads(site.read_text())["master_ip"]
        assert servers_under(root) == []
    assert len(stand_ins) == 2, stand_ins  # one stand-in server per cluster served the study

    results = work / "results"
    logs = "\n".join(p.read_text() for p in (results / "logs" / "cluster_up").glob("*.log"))
    assert logs.count(": ready (masters, yb_servers(), YSQL on every tserver)") == clusters, logs
    combos, labels = {}, set()
    for run in runs:
        folder = results / "runs" / run
        meta = json.loads((folder / "measurement.json").read_text())
        applied = meta["applied"]
        nodes = meta["row"]["cluster"]["nodes"]
        combos.setdefault(applied["combination"], nodes)
        labels.add(applied["cluster"])
        replicate = meta["row"].get("replicate", 1)  # replicate 2 ran on <combination>-r2
        assert applied["cluster"] == applied["combination"] + ("-r2" if replicate == 2 else "")
        assert applied["backend"] == "gcp" and applied["tservers"] == nodes
        assert "-YB-2024.2" in applied["server_version"]  # the stand-in answers as YugabyteDB
        assert applied["isolation_source"] == ["yb_get_effective_transaction_isolation_level()"]
        wanted = meta["row"]["session"]["default_transaction_isolation"]
        assert set(applied["isolation_in_effect"].values()) == {wanted}
        for ip in tserver_ips(nodes):  # read back from every stand-in tserver of the cluster
            assert any(f"({ip}:" in node for node in applied["isolation_in_effect"]), applied
        assert applied["load_generator"]["pgbench_version"].startswith("pgbench (PostgreSQL)")
        # after every reload the load generator asked yb-admin whether the balancer was idle
        assert applied["after_reload"] and all(w["polls"] == 1 for w in applied["after_reload"])
        assert applied["after_reload"][0]["command"].endswith(
            f"-master_addresses {master}:7100 get_is_load_balancer_idle"
        )
        throughput = pd.read_csv(folder / "throughput.csv")
        assert list(throughput["clients"]) == [1, 2] and (throughput["tps_mean"] > 0).all()
        # pgbench ran on the load generator: its per-transaction logs came back over SSH
        assert list((folder / "pgbench-logs").glob("*")), run
    assert sorted(combos.values()) == [1, 2] and len(labels) == clusters
    for label in labels:
        gone = json.loads((results / "clusters" / label / "destroyed.json").read_text())
        assert gone["existed"] is True, gone
    left = stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True)
    assert left == [], "a stack is left"
    assert pulumi_processes(tmp_path) == []
    for folder in remote:  # each row's script went to the load generator, its logs came back
        assert [p.name for p in (folder / "scripts").iterdir()], folder
        shutil.rmtree(folder)
