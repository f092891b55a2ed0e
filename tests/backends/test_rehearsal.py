"""The gcp path rehearsed on loopback: `snakemake --config backend=gcp` end to end on the real
Pulumi engine, with the cloud replaced by tests/loopback.py (PostgreSQL stand-ins carrying
YugabyteDB's catalogue, the load generator an sshd on 127.0.0.1). Everything after `pulumi up`
is the pipeline's own code: readiness, SSH, pgbench on the load generator, resets, settings read
back, cluster_down; and Ctrl-C while rows measure. The `existing` backend over SSH on the same
stand-ins and sshd (the module shares them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import scans
import vm_boot
import yaml
from conftest import (
    INTERRUPTIBLE,
    REPO,
    authorized_keys,
    copy_workflow,
    failed,
    jobs_in,
    ram_root,
    servers_under,
    settings_with,
)
from conftest import snakemake as run_snakemake
from loopback import SITE_ENV, STATE_ENV, loopback_site, tserver_ips
from test_stacks import engine_path

from ybscale.backends.gcp import stacks
from ybscale.backends.gcp.config import gcp_section
from ybscale.backends.gcp.names import resource_name
from ybscale.backends.loadgen import LoadgenRunner
from ybscale.study import load as load_study

TESTS = (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1])
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
YSQL_SETTINGS = ("log_line_prefix", "datestyle")  # of SERVER: YSQL's, not yb flags
# server knobs the end-to-end study sets (issue 46): a boolean yb flag in PostgreSQL's spelling
# (gflags refuses `off`), a yb-master flag, an int32 tserver flag, the block cache's size
# (issue 48, int64), YSQL settings whose values hold spaces, %, quotes and a comma: each must
# reach its server by the boot its VM runs
SERVER = {
    "enable_automatic_tablet_splitting": "off",
    "load_balancer_max_concurrent_moves": 4,
    "ysql_max_connections": 200,
    "db_block_cache_size_bytes": 67108864,
    "log_line_prefix": "%m [%p] ",
    # (not search_path: the stand-in database sets its own, for public.version())
    "datestyle": "ISO, DMY",
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


@pytest.fixture(scope="module")
def engine_env(tmp_path_factory):
    """This process's environment (for the tests' own look at the stacks) and the studies':
    the real engine first on PATH, a Pulumi home of the module's own, tests/ importable."""
    exe = engine_path()
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        reason = f"{exe}: no Pulumi engine; build it with `bash .ci/pulumi.sh`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as env:
        env.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
        env.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
        env.setenv("PULUMI_HOME", str(tmp_path_factory.mktemp("pulumi-home")))
        env.setenv("PULUMI_SKIP_UPDATE_CHECK", "true")
        path = [*map(str, TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
        yield {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


@pytest.fixture(scope="module")
def site(sshd):
    """(data root, site file) of the loopback site the rehearsals share: the stand-in servers
    of a 1-node and a 2-node cluster, the master endpoint, yb-admin, and the download host
    of the VMs the program boots (tests/vm_boot.py); all stopped at the end."""
    with ram_root() as root:
        settings = settings_with(local={"data_root": str(root), "cpu_mechanism": "none"})
        ysql = {k: SERVER[k] for k in YSQL_SETTINGS}
        with loopback_site(root, sshd, [1, 2], settings, ysql=ysql) as site_file:
            yield root, site_file
        assert servers_under(root) == []
        assert vm_boot.running(root / "vms") == []


def study_env(engine_env: dict, site_file: Path, study: dict, **more) -> dict:
    """A study's environment on the loopback site: the engine's, the site file, and the
    study's state folder (a booted VM lives while its stack's state file does)."""
    state = study["gcp"]["state_url"].removeprefix("file://")
    return {**engine_env, SITE_ENV: str(site_file), STATE_ENV: state, **more}


def gcp_study(
    tmp_path: Path,
    measurement: dict | None = None,
    design: dict = DESIGN,
    server: dict | None = None,
    **settings,
) -> tuple[Path, dict]:
    """A copy of the workflow measuring `design` with backend gcp on the loopback program: its
    folder and its config (config/loopback.yaml, with `settings` on top; `server`: the
    server knobs every row sets, defaults.server)."""
    work = copy_workflow(tmp_path / "study")
    (work / "config" / "rehearsal.yaml").write_text(yaml.safe_dump(design))
    study = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    study |= {"design": "config/rehearsal.yaml", "backend": "gcp", **settings}
    study["gcp"] = gcp_settings(tmp_path / "state")
    study["measurement"] |= measurement or {}
    if server:
        study["defaults"] = {**study.get("defaults", {}), "server": server}
    (work / "config" / "loopback.yaml").write_text(yaml.safe_dump(study))
    return work, study


def stand_in_logs(root: Path) -> dict[Path, int]:
    """Each stand-in server's log (tests/loopback.py) and its size now."""
    return {log: log.stat().st_size for log in sorted((root / "loopback").glob("cluster*.log"))}


def planned_since(logged: dict[Path, int], hashed: bool = False) -> str:
    """What the stand-in servers logged since `stand_in_logs`, once no statement in it read kv
    whole as YugabyteDB 2024.2 plans (tests/scans.py: bitmap scans off, every plan logged; on
    a `hashed` kv a range of k is no index path either): the loads, restores, layout queries
    and measured scripts alike."""
    text = "".join(log.read_text(errors="replace")[start:] for log, start in logged.items())
    assert "plan:" in text, "the stand-in logged no plan: nothing was checked"
    assert scans.logged_whole_scans(text, hashed=hashed) == []
    return text


def pulumi_processes(root: Path) -> list[str]:
    return [p for p in servers_under(root) if "pulumi" in p]


def processes_with_env(key: str, value: str) -> list[str]:
    """Live processes whose environment has key=value (what a run started, wherever it went)."""
    wanted, found = f"{key}={value}".encode(), []
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if wanted in environ and state != "Z":
            found.append(f"{proc.name}: {cmdline}")
    return found


def descendants(pid: int) -> list[str]:
    """Live descendants of `pid` (the load generator's sshd: its sessions and what they run)."""
    children: dict[int, list[int]] = {}
    lines = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(proc.name))
            lines[int(proc.name)] = cmdline
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(f"{child}: {lines[child]}")
        todo += children.get(child, [])
    return found


def sshd_listener(sshd) -> int:
    """The pid of the `sshd` fixture's server (its title names its config file; so may a
    session's re-executed sshd, whose parent is the server)."""
    config = f"-f {authorized_keys(sshd).parent / 'sshd_config'} "
    parents = {}
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        if "sshd" in cmdline and config in cmdline:  # "sshd: /usr/sbin/sshd -D -e -f ..."
            parents[int(proc.name)] = ppid
    (listener,) = [pid for pid, ppid in parents.items() if ppid not in parents]
    return listener


def ctrl_c_when(proc: subprocess.Popen, ready, output: Path, poll: float = 0.1) -> None:
    """Once `ready()` (within 600 s, `proc` still running: else the test fails with its
    `output`), SIGINT to `proc`'s process group, as Ctrl-C in its terminal; waits for it to end
    (killed if it has not ended in time)."""
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(poll)
        assert proc.poll() is None, output.read_text()[-3000:]
        assert ready(), "not ready within 600 s: " + output.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def settled(check, timeout: float = 60) -> list[str]:
    """`check()` once it is empty, or what it still lists after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while (left := check()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


# The rehearsals split in two halves of about equal length, each on one pytest-xdist worker
# (a worker running both sets the module's site up once): the halves run side by side.
# Half A: the replicated design through the analysis, Ctrl-C; half B: the failing rows (a 2^2
# design, with and without -k), existing over SSH.
HALF_A, HALF_B = pytest.mark.xdist_group("rehearsal-a"), pytest.mark.xdist_group("rehearsal-b")


def check_published_rows(
    work: Path, runs: list[str], root: Path, server: dict | None = None, clients=(1, 2)
) -> tuple[dict, set]:
    """What every published gcp row must show (its measurement.json, throughput.csv, logs):
    returns combination -> nodes and the cluster labels the rows ran on. Its servers were
    booted by their VMs' startup scripts (the site's VMs under `root`/vms): every master and
    tserver reports the flags it was given, with `server` (the design's server knobs) as its
    server takes them, and the YSQL settings as PostgreSQL parsed the ysql_pg.conf the
    tserver wrote; throughput at each count of `clients`."""
    combos, labels = {}, set()
    for run in runs:
        folder = work / "results" / "runs" / run
        meta = json.loads((folder / "measurement.json").read_text())
        applied = meta["applied"]
        nodes = meta["row"]["cluster"]["nodes"]
        combos.setdefault(applied["combination"], nodes)
        labels.add(applied["cluster"])
        replicate = meta["row"].get("replicate", 1)  # replicate 2 ran on <combination>-r2
        own = applied["combination"] + ("-r2" if replicate == 2 else "")
        assert applied["cluster"] == resource_name(own)  # cut when long: server knobs
        assert applied["backend"] == "gcp" and applied["tservers"] == nodes
        # what the stack told the servers: the memory split YugabyteDB ships (issue 46)
        for each in ("yb-master", "yb-tserver"):
            flags = applied["server_flags"][each]
            assert flags["use_memory_defaults_optimized_for_ysql"] == "true", applied
        # ... and what the servers booted by their startup scripts say they run with
        vms = root / "vms" / applied["stack"]
        booted = json.loads((vms / "addresses.json").read_text())
        reported = applied["server_flags_reported"]
        masters = [f"yb-master {ip}" for ip in booted["masters"]]
        tservers = [f"yb-tserver {ip}" for ip in tserver_ips(nodes)]
        assert sorted(reported) == sorted(masters + tservers), reported
        assert len(masters) == applied["replication_factor"] == applied["masters"]
        for name, flags in reported.items():
            assert flags["use_memory_defaults_optimized_for_ysql"] == "true", name
        for name, value in (server or {}).items():
            if name in YSQL_SETTINGS:  # YSQL settings: in ysql_pg.conf
                for i in range(nodes):
                    shown = json.loads((vms / f"{applied['stack']}-tserver-{i}" /
                                        "ysql_settings.json").read_text())  # fmt: skip
                    assert shown[name] == value, (name, shown)
                continue
            holders = [n for n, flags in reported.items() if name in flags]
            assert holders, (name, reported)
            written = {"off": "false", "on": "true"}.get(str(value), str(value))
            assert all(reported[n][name] == written for n in holders), (name, reported)
        if server:
            assert all("ysql_pg_conf_csv" in reported[n] for n in tservers)
            # the YSQL settings read back from every tserver (SHOW), as the row asked
            shown = applied["ysql_settings_in_effect"]
            assert len(shown) == nodes, shown
            for settings in shown.values():
                assert settings["log_line_prefix"] == "%m [%p] ", settings
                assert settings["datestyle"] == "ISO, DMY", settings
        assert "-YB-2024.2" in applied["server_version"]  # the stand-in answers as YugabyteDB
        assert applied["isolation_source"] == ["yb_get_effective_transaction_isolation_level()"]
        wanted = meta["row"]["session"]["default_transaction_isolation"]
        assert set(applied["isolation_in_effect"].values()) == {wanted}
        for ip in tserver_ips(nodes):  # read back from every stand-in tserver of the cluster
            assert any(f"({ip}:" in node for node in applied["isolation_in_effect"]), applied
        assert applied["load_generator"]["pgbench_version"].startswith("pgbench (PostgreSQL)")
        # after every reload the load generator asked yb-admin whether the balancer was idle
        assert applied["after_reload"] and all(w["polls"] == 1 for w in applied["after_reload"])
        addresses = ",".join(f"{ip}:7100" for ip in booted["masters"])
        assert applied["after_reload"][0]["command"].endswith(
            f"-master_addresses {addresses} get_is_load_balancer_idle"
        )
        throughput = pd.read_csv(folder / "throughput.csv")
        assert list(throughput["clients"]) == list(clients), throughput
        assert (throughput["tps_mean"] > 0).all(), throughput
        # where reads were served (issue 48): every tserver's block cache, read on its VM from
        # its /prometheus-metrics (the stand-in's PostgreSQL counters), around every run
        assert applied["block_counters"]["measured"] == ["block_cache", "disk"], applied
        # and the dataset's SST bytes on each tserver after its load, settled and flushed
        # (the stand-in's SST files hold nothing until yb-admin flush_table), from the same
        # metrics; per row and replica with the cluster's RF
        dataset = applied["dataset"]
        sizes = dataset["sst_bytes_per_tserver"]
        assert sorted(sizes) == [f"tserver{i}" for i in range(nodes)], dataset
        assert max(sizes.values()) > 0, sizes
        assert dataset["sst_flush"]["command"].endswith(
            f"-master_addresses {addresses} flush_table ysql.yugabyte kv 600"
        )
        rf = applied["replication_factor"]
        per_row = sum(sizes.values()) / (dataset["rows"] * rf)
        assert dataset["sst_bytes_per_row_per_replica"] == pytest.approx(per_row, abs=1e-3)
        reps = pd.read_csv(folder / "repetitions.csv")
        fields = ["buffer_hits", "buffer_reads", "buffer_hits_all", "buffer_reads_all"]
        fields += [f for f in reps if f.startswith("disk_")]
        assert reps[fields].notna().all().all() and (reps[fields] >= 0).all().all(), reps
        # the data blocks are a part of every kind's (the stand-in's index blocks beside them)
        assert (reps["buffer_hits_all"] >= reps["buffer_hits"]).all(), reps
        if meta["row"]["read_only"]:
            assert (reps["buffer_hits"] > 0).all(), reps
        # every tserver's CPU read on its VM (the second sshd), through the load generator
        for i in range(nodes):
            assert (throughput[f"util_tserver{i}"] > 0).all(), (run, list(throughput.columns))
        log = (work / "results" / "logs" / "measure" / f"{run}.log").read_text()
        assert "not measured" not in log, log
        # pgbench ran on the load generator: its per-transaction logs came back over SSH,
        # gzip'd there (issue 59): what crossed the connection is less than they hold
        assert list((folder / "pgbench-logs").glob("*")), run
        copied = applied["logs_copied"]
        assert copied["files"] > 0 and 0 < copied["bytes_sent"] < copied["bytes_raw"], copied
        assert copied["pgbench_seconds"] >= meta["measurement"]["seconds"], copied
    return combos, labels


def remote_folders(work: Path, runs: list[str]) -> list[Path]:
    """The load generator's work folder of each row (sshd's user is this one: its home),
    removed before the run."""
    remote = [Path.home() / LoadgenRunner(None).remote_dir(work / "results" / "runs" / run /
              "pgbench-logs") for run in runs]  # fmt: skip
    for folder in remote:
        shutil.rmtree(folder, ignore_errors=True)
    return remote


def clusters_were_ready(work: Path) -> int:
    """How many cluster_up logs say the cluster was ready."""
    logs = (work / "results" / "logs" / "cluster_up").glob("*.log")
    text = "\n".join(p.read_text() for p in logs)
    return text.count(": ready (masters, yb_servers(), YSQL on every tserver)")


@pytest.mark.slow
@HALF_A
def test_gcp_study_runs_end_to_end_on_loopback(engine_env, sshd, site, tmp_path):
    """The mission's three commands as written, on gcp: a 2^2 design run twice, each replicate
    on clusters of its own (4 clusters taking turns in 2 slots), to results/effects.csv (the
    measurements and the whole analysis of them), its offline report, then one row forced.
    (Rows of a combination taking turns on one cluster: here and in the failing-row runs.)"""
    root, site_file = site
    logged = stand_in_logs(root)
    # one count a row: the rows that restore between counts are the sharding rehearsals'
    work, study = gcp_study(tmp_path, {"clients": [1], "max_clients": 1}, REPLICATED, SERVER)
    runs = [f"run{i:02d}" for i in range(1, 9)]
    remote = remote_folders(work, runs)
    env = study_env(engine_env, site_file, study)
    out = run_snakemake(work, "--cores", "4", "results/effects.csv",  # as the README says
                        configfile="config/loopback.yaml", env=env, timeout=900)  # fmt: skip
    assert out.returncode == 0, failed(out)
    assert (work / "results" / "findings.md").exists()
    report = run_snakemake(work, "--report", "report.html", configfile="config/loopback.yaml",
                           env=env, timeout=600)  # fmt: skip
    assert report.returncode == 0, failed(report)
    html = (work / "report.html").read_text(encoding="utf-8")
    assert "Backend: <strong>gcp</strong>" in html
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)  # offline
    assert settled(lambda: vm_boot.running(root / "vms")) == []  # every stack's VMs stopped
    stand_ins = servers_under(root)
    assert len(stand_ins) == 2, stand_ins  # one stand-in server per cluster, nothing else
    assert clusters_were_ready(work) == 4
    combos, labels = check_published_rows(work, runs, root, SERVER, clients=[1])
    assert sorted(combos.values()) == [1, 2] and len(labels) == 4
    # the study's statements, as the stand-in planned them (`none` on YugabyteDB hashes k)
    plans = planned_since(logged, hashed=True)
    assert "Query Text: INSERT INTO kv" in plans and "Query Text: SELECT k, v FROM kv" in plans
    for label in labels:
        gone = json.loads((work / "results" / "clusters" / label / "released.json").read_text())
        assert gone["existed"] is True, gone
    left = stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True)
    assert left == [], "a stack is left"
    assert pulumi_processes(tmp_path) == []
    for folder in remote:  # each row's script went to the load generator, its logs came back
        assert [p.name for p in (folder / "scripts").iterdir()], folder
        shutil.rmtree(folder)

    # one forced row on its shared cluster (issue 36): one bring-up, that row alone measured,
    # the stack destroyed, and the next plain run has only the analysis left
    out = run_snakemake(work, "--cores", "4", "-f", "results/runs/run03/throughput.csv",
                        configfile="config/loopback.yaml", env=env, timeout=600)  # fmt: skip
    assert out.returncode == 0, failed(out)
    log = out.stdout + out.stderr
    ran = jobs_in(log)
    assert ran["measure"] == {"run03"} and log.count("rule cluster_up:") == 1, ran
    assert stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True) == []
    stale = jobs_in(run_snakemake(work, "-n", configfile="config/loopback.yaml", env=env).stdout)
    assert not stale.keys() & {"cluster_up", "measure", "publish", "cluster_down"}, stale
    remote_folders(work, ["run03"])  # the forced row's work folder on the load generator


ROWS_BY_WORKLOAD = {  # 2^2 on one cluster: the dataset's size and the script
    "factors": {
        "A": {"name": "rows", "sets": "dataset.rows", "levels": [1000, 3000]},
        "B": {"name": "workload", "levels": ["read", "write"]},
    }
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "sharding",
    [pytest.param("range", marks=HALF_A), pytest.param("hash", marks=HALF_B)],
)
def test_a_rows_by_workload_design_runs_on_both_shardings(engine_env, sshd, site, tmp_path,
                                                           sharding):  # fmt: skip
    """Issue 59: a 2-level dataset.rows x read/write design on one 2-node cluster with
    gcp.table_sharding range, then hash, on stand-in tservers that take YugabyteDB's DDL
    (tests/yb_ddl.py: SPLIT AT VALUES, SPLIT INTO n TABLETS, the tablets in the stand-in
    catalogue) and plan as 2024.2 does (bitmap scans off; on hash a range of k is no index path:
    tests/scans.py). Every statement the study sent reached kv by the key (loads, counts,
    restores, the measured reads and writes); every reload's layout was checked (2 tablets, a
    leader on each tserver); each write row was restored by the key (range: one DELETE per range
    and a count per bucket; hash: the new-key sequence's keys), its restores timed; every row
    has everything a gcp row must show (`check_published_rows`: SST bytes after a flush, block
    counters, logs gzip'd over SSH)."""
    root, site_file = site
    logged = stand_in_logs(root)
    work, study = gcp_study(tmp_path, design=ROWS_BY_WORKLOAD)
    study["gcp"]["table_sharding"] = sharding
    # 10 rows a read transaction: the read script's many-row statement (k = ANY of the keys)
    study["defaults"] = {**study.get("defaults", {}), "cluster": {"nodes": 2},
                         "workload": {"rows": 10}}  # fmt: skip
    (work / "config" / "loopback.yaml").write_text(yaml.safe_dump(study))
    config = {**study, "design": str(work / "config" / "rehearsal.yaml")}
    rows = {row.run: row for row in load_study(config).rows}
    assert len(rows) == 4 and {r.dataset_rows for r in rows.values()} == {1000, 3000}
    remote = remote_folders(work, list(rows))
    env = study_env(engine_env, site_file, study)
    targets = [f"results/runs/{run}/measurement.json" for run in rows]
    out = run_snakemake(work, "--cores", "2", *targets, configfile="config/loopback.yaml",
                        env=env, timeout=900)  # fmt: skip
    assert out.returncode == 0, failed(out)
    combos, labels = check_published_rows(work, list(rows), root)
    assert list(combos.values()) == [2] and len(labels) == 1
    for run, row in rows.items():
        applied = json.loads((work / "results/runs" / run / "measurement.json").read_text())[
            "applied"
        ]
        assert applied["sharding"] == sharding and applied["dataset"]["rows"] == row.dataset_rows
        layouts = applied["tablet_layout"]
        assert layouts and all(t["tablets"] == 2 for t in layouts), layouts
        assert all(t["leaders_per_node"] and len(t["leaders_per_node"]) == 2 for t in layouts)
        restores = applied["restores"]
        if row.read_only:
            assert restores == [] and len(layouts) == 1, applied  # loaded once, never restored
            continue
        assert restores, applied  # a write row's repetitions after its first were restored
        by = "key ranges" if sharding == "range" else "new-key sequence"
        assert {r["by"] for r in restores} == {by} and all(r["seconds"] >= 0 for r in restores)
        if sharding == "range":  # the rows each repetition added, counted per bucket
            assert applied["inserted_per_tablet"] and all(
                set(i) == {"tablet0", "tablet1"} for i in applied["inserted_per_tablet"]
            )
        else:
            assert sum(r["new_keys"] for r in restores) > 0, restores
    plans = planned_since(logged, hashed=sharding == "hash")
    assert "Query Text: SELECT k, v FROM kv WHERE k = ANY (ARRAY(" in plans
    delete = "DELETE FROM kv WHERE " + ("k >= " if sharding == "range" else "k = ANY(")
    assert f"Query Text: {delete}" in plans or delete in plans, delete
    assert settled(lambda: vm_boot.running(root / "vms")) == []
    assert stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True) == []
    for folder in remote:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@HALF_B
def test_ctrl_c_while_a_row_measures_destroys_both_stacks(engine_env, sshd, site, tmp_path):
    """Ctrl-C (SIGINT to the terminal's foreground process group: Snakemake and its jobs) while
    rows measure on both clusters: onerror destroys both stacks, and nothing the run started
    is left running, here or on the load generator."""
    root, site_file = site
    work, study = gcp_study(tmp_path, {"seconds": 5})  # rows long enough to be caught
    calls = root / "yb-admin.calls"  # the load generator's yb-admin, after each reload
    before = len(calls.read_text().splitlines()) if calls.exists() else 0
    mark = uuid.uuid4().hex
    env = study_env(engine_env, site_file, study, YBSCALE_REHEARSAL_RUN=mark)
    endpoints = [work / "results" / "clusters" / f"nodes{n}-small-reploff" / "endpoints.json"
                 for n in (1, 2)]  # fmt: skip
    output = tmp_path / "snakemake.out"
    with output.open("w") as out:
        proc = subprocess.Popen(
            # as from a terminal: Ctrl-C not ignored (INTERRUPTIBLE)
            [*INTERRUPTIBLE, sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
             "config/loopback.yaml"],
            cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )  # fmt: skip

        def measuring() -> bool:
            started = calls.exists() and len(calls.read_text().splitlines()) > before
            return started and all(p.exists() for p in endpoints)

        ctrl_c_when(proc, measuring, output, 0.2)  # both clusters up, rows measuring
    log = output.read_text()
    assert proc.returncode != 0, log[-3000:]
    assert "Terminating processes on user request" in log, log[-3000:]
    left = stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True)
    assert left == [], f"stacks left: {left}\n{log[-3000:]}"
    assert not any(p.exists() for p in endpoints)  # forgotten: a rerun brings them up again
    assert settled(lambda: processes_with_env("YBSCALE_REHEARSAL_RUN", mark)) == []
    assert settled(lambda: descendants(sshd_listener(sshd))) == []  # no session, pgbench, psql
    assert settled(lambda: vm_boot.running(root / "vms")) == []  # both stacks' VMs stopped
    assert len(servers_under(root)) == 2  # the stand-ins only


@pytest.mark.slow
@HALF_B
def test_existing_study_over_ssh_on_loopback(sshd, site, tmp_path):
    """backend existing end to end: the endpoints are the stand-in tservers, pgbench and psql
    run on `existing.load_generator` (the sshd on 127.0.0.1) over SSH; nothing is created or
    destroyed, and no session is left on the load generator. A 2^2 design (nodes 1/2 x both
    isolation levels: both combinations, each level read back), up to the published
    measurements: their analysis is the replicated gcp study's (the same runner on a load
    generator, the same findings code)."""
    root, site_file = site
    where = json.loads(site_file.read_text())
    work = copy_workflow(tmp_path / "study")
    plain = {"factors": REPLICATED["factors"]}  # nodes x isolation, once
    (work / "config" / "rehearsal.yaml").write_text(yaml.safe_dump(plain))
    study = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    study |= {"design": "config/rehearsal.yaml", "backend": "existing"}
    login = {"host": sshd.host, "port": sshd.port, "user": sshd.user, "key": str(sshd.key),
             "known_hosts": str(tmp_path / "known_hosts")}  # fmt: skip
    combos = {
        f"nodes{n}-small-reploff": {
            "hosts": ips,
            "port": where["ysql_port"],
            "password_env": None,
        }  # fmt: skip
        for n, ips in where["tservers"].items()
    }
    study["existing"] = {"combinations": combos, "load_generator": login}
    (work / "config" / "existing.yaml").write_text(yaml.safe_dump(study))
    runs = [f"run{i:02d}" for i in range(1, 5)]
    remote = remote_folders(work, runs)
    targets = [f"results/runs/{run}/measurement.json" for run in runs]
    out = run_snakemake(work, *targets, configfile="config/existing.yaml", timeout=900)
    assert out.returncode == 0, failed(out)
    seen = set()  # (nodes, isolation) of every row: each combination, each level
    for run in runs:
        folder = work / "results" / "runs" / run
        meta = json.loads((folder / "measurement.json").read_text())
        applied = meta["applied"]
        nodes = meta["row"]["cluster"]["nodes"]
        assert applied["backend"] == "existing"
        assert applied["load_generator_host"] == f"{sshd.user}@127.0.0.1:{sshd.port}"
        assert "-YB-2024.2" in applied["server_version"]  # the stand-in answers as YugabyteDB
        wanted = meta["row"]["session"]["default_transaction_isolation"]
        seen.add((nodes, wanted))
        assert set(applied["isolation_in_effect"].values()) == {wanted}
        for ip in tserver_ips(nodes):  # read back from every endpoint of the combination
            assert any(f"({ip}:" in node for node in applied["isolation_in_effect"]), applied
        assert applied["load_generator"]["pgbench_version"].startswith("pgbench (PostgreSQL)")
        throughput = pd.read_csv(folder / "throughput.csv")
        assert list(throughput["clients"]) == [1, 2] and (throughput["tps_mean"] > 0).all()
        # where reads were served (issue 48): without existing.ssh no tserver's machine is
        # reached, so no block counter is read (the gcp study reads them) and none is written
        assert applied["block_counters"] == {"measured": [], "why_not": "no SSH to the tservers"}
        reps = pd.read_csv(folder / "repetitions.csv")
        assert not [f for f in reps if f.startswith(("buffer_", "disk_"))], list(reps)
        # pgbench ran on the load generator: its per-transaction logs came back over SSH
        assert list((folder / "pgbench-logs").glob("*")), run
    for folder in remote:  # each row's script went to the load generator
        assert [p.name for p in (folder / "scripts").iterdir()], folder
        shutil.rmtree(folder)
    assert len(seen) == 4, seen
    assert settled(lambda: descendants(sshd_listener(sshd))) == []  # every session closed
    assert len(servers_under(root)) == 2  # the stand-ins only: nothing started, nothing left


@pytest.mark.slow
@HALF_B
def test_a_failing_row_releases_its_cluster(engine_env, sshd, site, tmp_path):
    """A design whose read script fails on the stand-ins: each cluster has a failing row, and
    each is still destroyed by its cluster_down rule (its released.json) with -k; the failing
    rows' errors name them, nothing is left. A 2^2 design (nodes 1/2 x workload read/write: 2
    clusters of 2 rows); its 2 write rows are published with everything a gcp row must show
    (`check_published_rows`). Without -k: the rules are the same on every backend
    (tests/pipeline/test_pipeline.py runs both on local), and the onerror path that releases
    what a stopped run left up is the Ctrl-C rehearsal's, on gcp."""
    root, site_file = site
    logged = stand_in_logs(root)
    broken = tmp_path / "broken-workloads"
    shutil.copytree(REPO / "workloads", broken)
    (broken / "read.sql").write_text("SELECT * FROM no_such_table WHERE k < :rows;\n")
    small = {"factors": {k: DESIGN["factors"][k] for k in ("A", "B")}}
    work, study = gcp_study(tmp_path, design=small, workloads=str(broken))
    config = {**study, "design": str(work / "config" / "rehearsal.yaml")}
    rows = {row.run: row for row in load_study(config).rows}
    remote = remote_folders(work, list(rows))
    mark = uuid.uuid4().hex
    env = study_env(engine_env, site_file, study, YBSCALE_REHEARSAL_RUN=mark)
    out = run_snakemake(work, "-k", configfile="config/loopback.yaml", env=env, timeout=900)
    log = out.stdout + out.stderr
    assert out.returncode != 0, log[-3000:]
    failures = [run for run in rows if f"{run}: the measurement failed" in log]
    assert len(failures) == 2, log[-3000:]  # every read row fails, one on each cluster
    for run in failures:
        assert rows[run].script == "read"
        assert "no_such_table" in (work / "results/logs/measure" / f"{run}.log").read_text()
        assert not (work / "results/runs" / run / "throughput.csv").exists()
        combo = rows[run].combination  # released by its own rule (released.json)
        gone = work / "results/clusters" / combo / "released.json"
        assert json.loads(gone.read_text())["existed"] is True, log[-3000:]
    # the rows that worked are published all the same, and hold everything
    worked = sorted(set(rows) - set(failures))
    combos, labels = check_published_rows(work, worked, root)
    assert sorted(combos.values()) == [1, 2] and len(labels) == 2
    assert clusters_were_ready(work) == 2
    for run in worked:  # each row's script went to the load generator
        folder = remote[list(rows).index(run)]
        assert [p.name for p in (folder / "scripts").iterdir()], folder
    # the write rows' restores among them (their second count), by key, not whole
    assert "Query Text: DELETE FROM kv WHERE k = ANY(" in planned_since(logged, hashed=True)
    for folder in remote:
        shutil.rmtree(folder, ignore_errors=True)
    left = stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True)
    assert left == [], f"stacks left: {left}"
    assert settled(lambda: vm_boot.running(root / "vms")) == []  # the stacks' VMs stopped
    assert pulumi_processes(tmp_path) == []
    assert settled(lambda: processes_with_env("YBSCALE_REHEARSAL_RUN", mark)) == []
    assert settled(lambda: descendants(sshd_listener(sshd))) == []
