"""Two load generators on loopback (issue 38): two sshd "generators" on two loopback addresses
(127.0.0.1, the `sshd` fixture, and 127.0.0.2) drive the stand-in tservers of a 2-node cluster
(`loopback.loopback_site`) with the `existing` backend: each drives one tserver, both start at
one agreed instant, their logs merge on this machine's clock, each one's CPU is measured, and
nothing is left running on either of them."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import (
    INTERRUPTIBLE,
    REPO,
    _free_port,
    authorized_keys,
    copy_workflow,
    failed,
    jobs_in,
    ram_root,
    row_from_levels,
    servers_under,
    settings_with,
    shipped_config,
    start_sshd,
    stop_sshd,
)
from conftest import snakemake as run_snakemake
from loopback import SITE_ENV, STATE_ENV, loopback_site
from test_rehearsal import (
    ctrl_c_when,
    descendants,
    engine_env,  # noqa: F401 (the real engine: a fixture)
    gcp_settings,
    gcp_study,
    processes_with_env,
    remote_folders,
    settled,
    sshd_listener,
)

from ybscale.backends.existing import ExistingBackend
from ybscale.backends.gcp import stacks
from ybscale.backends.gcp.config import gcp_section
from ybscale.measure import bench
from ybscale.measure.bench import MeasurementError

RUNNING = "pgbench -n -M prepared"  # a measuring pgbench's command line (not its version's)
SKEW_BOUND_MS = 250  # the barrier's start skew on this (shared, 2-core) machine, at most
pytestmark = pytest.mark.slow
# the mission's three commands (README, "The study"), as a user types them on any backend
MISSION = (
    ["--cores", "4", "results/effects.csv"],
    ["--report", "report.html"],
    ["--cores", "4", "-f", "results/runs/run03/throughput.csv"],
)


@pytest.fixture(scope="module")
def site(sshd):
    """(data root, site file): the stand-in tservers of a 2-node cluster; stopped at the end."""
    with ram_root() as root:
        settings = settings_with(local={"data_root": str(root), "cpu_mechanism": "none"})
        with loopback_site(root, sshd, [2], settings) as site_file:
            yield root, site_file
        assert servers_under(root) == []


@pytest.fixture(scope="module")
def second(sshd):
    """A second generator: an sshd on 127.0.0.2 with the first one's keys; (its pid, port)."""
    port = _free_port()
    proc = start_sshd(authorized_keys(sshd).parent, ["127.0.0.2"], port, "generator2-sshd")
    try:
        yield proc.pid, port
    finally:
        stop_sshd(proc)


def logins(sshd, second, known_hosts: Path) -> list[dict]:
    first = {"host": sshd.host, "port": sshd.port}
    return [
        {**where, "user": sshd.user, "key": str(sshd.key), "known_hosts": str(known_hosts)}
        for where in (first, {"host": "127.0.0.2", "port": second[1]})
    ]


def existing_settings(
    site_file: Path, generators: list[dict], ssh=None, web_port: int | None = None, **measurement
) -> dict:
    where = json.loads(site_file.read_text())
    entry = {"hosts": where["tservers"]["2"], "port": where["ysql_port"], "password_env": None}
    combos = {"nodes2-small-reploff": entry}
    m = {**shipped_config()["measurement"], "clients": [4], "repetitions": 2,
         "max_repetitions": 2, "sweep": "grid", "seconds": 3, "warmup": 0, "timeout": 60,
         **measurement}  # fmt: skip
    section = {"combinations": combos, "load_generators": generators, "ssh": ssh}
    section |= {"tserver_web_port": web_port} if web_port else {}
    return settings_with(backend="existing", existing=section, measurement=m)


def no_session_left(sshd, second) -> list[str]:
    return descendants(sshd_listener(sshd)) + descendants(second[0])


ROW = {"nodes": 2, "node_size": "small", "replication": "off", "workload": "read",
       "operation_size": 1}  # fmt: skip


def test_a_generator_that_fails_fails_the_row_naming_it(sshd, site, tmp_path):
    """The second generator's machine goes away while pgbench runs there (its sshd and its
    sessions killed): the row fails with an error naming that generator, and nothing is left
    on the first."""
    root, site_file = site
    port = _free_port()
    third = start_sshd(authorized_keys(sshd).parent, ["127.0.0.3"], port, "generator3-sshd")
    try:
        generators = logins(sshd, (third.pid, port), tmp_path / "known_hosts")
        generators[1]["host"] = "127.0.0.3"
        settings = existing_settings(site_file, generators, seconds=6, repetitions=1,
                                     max_repetitions=1)  # fmt: skip
        row = row_from_levels(ROW, 2000)

        def lose_the_machine():  # once pgbench runs on it
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if any(RUNNING in p for p in descendants(third.pid)):
                    break
                time.sleep(0.1)
            pids = [int(p.split(":")[0]) for p in descendants(third.pid)]
            stop_sshd(third)
            for pid in pids:  # its sessions and what they ran: processes this test started
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        killer = threading.Thread(target=lose_the_machine)
        with ExistingBackend(settings).cluster(row, tmp_path) as cluster:
            cluster.clock_offsets()  # measured before the machine goes
            killer.start()
            with pytest.raises(MeasurementError) as caught:
                bench.measure(row, cluster, settings["measurement"], tmp_path / "run01",
                              progress=lambda _: None)  # fmt: skip
        killer.join()
        message = str(caught.value)
        assert "run01, 4 clients, repetition 1" in message, message
        assert f"from load generator client1 ({sshd.user}@127.0.0.3:{port})" in message, message
    finally:
        stop_sshd(third)
    assert settled(lambda: descendants(sshd_listener(sshd))) == []


WORKLOAD_BY_ISOLATION = {"factors": {
    "A": {"name": "workload", "levels": ["read", "write"]},
    "B": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
}}  # fmt: skip
READS = {"factors": {  # every row reads one key: the same CPU per transaction on either side
    "A": {"name": "seqscan", "sets": "session.enable_seqscan",  # a point read by its key
          "levels": ["on", "off"]},
    "B": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
}}  # fmt: skip


def study_of(tmp_path: Path, site_file: Path, generators: list[dict], ssh=None,
             design: dict = WORKLOAD_BY_ISOLATION, auto: bool = False,
             **measurement) -> Path:  # fmt: skip
    """A copy of the workflow measuring a 2^2 `design` on the 2-node stand-in cluster from
    `generators` (SSH logins; `ssh`: existing.ssh, to read the tservers' CPU; `auto`: a pool
    grown from its first, existing.load_generators_auto): its folder
    (config/generators.yaml)."""
    where = json.loads(site_file.read_text())
    work = copy_workflow(tmp_path)
    (work / "config" / "generators-design.yaml").write_text(yaml.safe_dump(design))
    study = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    study |= {"design": "config/generators-design.yaml", "backend": "existing"}
    study["defaults"] |= {"cluster": {"nodes": 2, "node_size": "small", "replication": "off"}}
    study["measurement"] |= {"clients": [2, 4], "max_clients": 4, "seconds": 2, **measurement}
    entry = {"hosts": where["tservers"]["2"], "port": where["ysql_port"], "password_env": None}
    study["existing"] = {"combinations": {"nodes2-small-reploff": entry},
                         "load_generators": generators, "ssh": ssh,
                         "load_generators_auto": auto}  # fmt: skip
    (work / "config" / "generators.yaml").write_text(yaml.safe_dump(study))
    return work


def test_a_study_with_two_generators_runs_through_the_analysis(sshd, site, second, tmp_path):
    """k = 2 on the existing backend through the mission's three commands as written (the
    study, its report, one row forced by its path): every row measured from both generators,
    each driving one tserver (each one's CPU, pgbench, where and clock offset recorded, the
    barrier's skew bounded, both logs merged into one per-second series on this machine's
    clock), the analysis, findings and an offline report written, the forced row alone
    measured again, and no session left on either generator."""
    root, site_file = site
    generators = logins(sshd, second, tmp_path / "known")
    # one count, a client on each generator: the commands, not the sweep
    work = study_of(tmp_path / "study", site_file, generators, clients=[2], max_clients=2)
    for command in MISSION:
        out = run_snakemake(work, *command, configfile="config/generators.yaml", timeout=900)
        assert out.returncode == 0, f"{command}: {failed(out)}"
    log = out.stdout + out.stderr  # the forced row's run
    assert jobs_in(log)["measure"] == {"run03"}, log[-3000:]
    html = (work / "report.html").read_text(encoding="utf-8")
    assert "Findings" in html and not re.search(r"<script[^>]+src=[\"']https?://", html)
    for run in ("run01", "run02", "run03", "run04"):
        folder = work / "results" / "runs" / run
        meta = json.loads((folder / "measurement.json").read_text())
        gens = meta["applied"]["load_generators"]
        assert [g["name"] for g in gens] == ["client0", "client1"]
        assert [g["where"] for g in gens] == [
            f"{sshd.user}@127.0.0.1:{sshd.port}",
            f"{sshd.user}@127.0.0.2:{second[1]}",
        ]
        for g in gens:  # one clock here: the offset is within its measured uncertainty
            assert g["pgbench_version"].startswith("pgbench (PostgreSQL)")
            assert abs(g["clock_offset_s"]) <= g["clock_offset_uncertainty_s"] + 0.002, g
        assert set(meta["versions"]["pgbench_by_generator"]) == {"client0", "client1"}
        reps = pd.read_csv(folder / "repetitions.csv")
        assert reps["start_skew_ms"].between(0, SKEW_BOUND_MS).all(), (run, reps)
        line = pd.read_csv(folder / "throughput.csv")
        for name in ("client0", "client1"):  # per core its one pgbench thread can use: this
            util = line[f"util_{name}"]  # machine's CPU, the servers' too, over one core
            assert (util > 0).all() and util.map(math.isfinite).all(), (run, name, util)
        # each generator drove one tserver: both logs came back and merged second by second
        logs = {p.name.split(".")[0] for p in (folder / "pgbench-logs").glob("c002_r1_*.*[0-9]")}
        assert logs == {"c002_r1_node0", "c002_r1_node1"}, (run, logs)
        per_second = pd.read_csv(folder / "per_second.csv")
        first = per_second[(per_second["clients"] == 2) & (per_second["repetition"] == 1)]
        assert list(first["second"]) == [0, 1], (run, first)  # one 2-s series, not two
    ceilings = pd.read_csv(work / "results" / "ceilings.csv")
    assert len(ceilings) == 4 and (ceilings["empirical_tps"] > 0).all()
    findings = (work / "results" / "findings.md").read_text()
    assert "rows are client-bound" in findings
    assert settled(lambda: no_session_left(sshd, second)) == []
    assert len(servers_under(root)) == 1  # the stand-in only


def test_ctrl_c_with_two_generators_leaves_nothing_on_either(sshd, site, second, tmp_path):
    """Ctrl-C (SIGINT to Snakemake's process group) while pgbench runs on both generators:
    the run stops, and nothing it started is left here or on either generator."""
    root, site_file = site
    generators = logins(sshd, second, tmp_path / "known")
    work = study_of(tmp_path / "study", site_file, generators, seconds=8)
    mark = uuid.uuid4().hex
    env = {**os.environ, "YBSCALE_GENERATORS_RUN": mark}
    output = tmp_path / "snakemake.out"
    with output.open("w") as log:
        proc = subprocess.Popen(
            [*INTERRUPTIBLE, sys.executable, "-m", "snakemake", "results/effects.csv", "--cores",
             "2", "--configfile", "config/generators.yaml"],
            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

        def running_on_both() -> bool:
            running = [descendants(sshd_listener(sshd)), descendants(second[0])]
            return all(any(RUNNING in p for p in each) for each in running)

        ctrl_c_when(proc, running_on_both, output)
    text = output.read_text()
    assert proc.returncode != 0, text[-3000:]
    assert settled(lambda: processes_with_env("YBSCALE_GENERATORS_RUN", mark)) == []
    assert settled(lambda: no_session_left(sshd, second)) == [], text[-3000:]
    assert len(servers_under(root)) == 1  # the stand-in only


def test_a_gcp_study_with_two_load_generators_on_loopback(
    engine_env,  # noqa: F811 (the fixture imported above)
    sshd,
    site,
    second,
    tmp_path,
):
    """backend gcp with gcp.load_generators: 2 on the loopback program (the real engine): the
    stack's two load generators (the sshd on 127.0.0.1 and the one on 127.0.0.2) each get
    ready, drive one tserver each and are measured (their CPU, the tservers' through the
    first) in a row forced by its path, as a user re-measures one (the analysis of a k = 2
    study is the existing backend's test above: the same measuring code); no stack and no
    session are left."""
    root, site_file = site
    where = json.loads(site_file.read_text())
    where["generators"] = [["127.0.0.2", second[1]]]  # this study's site: two generators
    mine = tmp_path / "site.json"
    mine.write_text(json.dumps(where))
    work, study = gcp_study(tmp_path, design=READS)
    study["gcp"]["load_generators"] = 2
    study["defaults"] |= {"cluster": {"nodes": 2, "node_size": "small", "replication": "off"}}
    study["measurement"] |= {"clients": [4], "max_clients": 4, "seconds": 2}
    (work / "config" / "loopback.yaml").write_text(yaml.safe_dump(study))
    runs = ["run01"]
    remote = remote_folders(work, runs)
    env = {**engine_env, SITE_ENV: str(mine), STATE_ENV: str(tmp_path / "state")}
    out = run_snakemake(work, "results/runs/run01/throughput.csv",
                        configfile="config/loopback.yaml", env=env, timeout=900)  # fmt: skip
    assert out.returncode == 0, failed(out)
    for run in runs:
        folder = work / "results" / "runs" / run
        applied = json.loads((folder / "measurement.json").read_text())["applied"]
        assert [g["where"].split("@")[1] for g in applied["load_generators"]] == [
            f"127.0.0.1:{sshd.port}",
            f"127.0.0.2:{second[1]}",
        ]
        reps = pd.read_csv(folder / "repetitions.csv")
        assert reps["start_skew_ms"].between(0, SKEW_BOUND_MS).all(), (run, reps)
        line = pd.read_csv(folder / "throughput.csv")
        for name in ("client0", "client1", "tserver0", "tserver1"):
            assert (line[f"util_{name}"] > 0).all(), (run, name)
    assert stacks.list_stacks(gcp_section({"gcp": study["gcp"]}), every_study=True) == []
    assert settled(lambda: no_session_left(sshd, second)) == []
    for folder in remote:
        shutil.rmtree(folder, ignore_errors=True)


def test_auto_on_gcp_adds_a_generator_vm_to_the_live_cluster(
    engine_env,  # noqa: F811 (the fixture imported above)
    sshd,
    site,
    second,
    tmp_path,
    monkeypatch,
):
    """gcp.load_generators: auto on the loopback program (the real engine): a 2-tserver cluster
    starts from one generator (the vCPU rule), may grow to two (the tservers); the measuring
    code's `add_generator` updates its stack to two generators (the second, the sshd on
    127.0.0.2, ready and reached over SSH), which then drives the second tserver; the
    cluster's next row starts from two (load_generators.json), and the stack's destroy
    forgets them."""
    from ybscale.backends.gcp import GcpBackend
    from ybscale.backends.gcp.files import ClusterFiles
    from ybscale.backends.gcp.reach import wait_ready

    root, site_file = site
    where = json.loads(site_file.read_text())
    where["generators"] = [["127.0.0.2", second[1]]]  # what the stack may grow to
    mine = tmp_path / "site.json"
    mine.write_text(json.dumps(where))
    monkeypatch.setenv(SITE_ENV, str(mine))
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    gcp = {**gcp_settings(tmp_path / "state"), "load_generators": "auto",
           "ssh_key": str(tmp_path / "ssh" / "id_ed25519")}  # fmt: skip
    backend = GcpBackend(settings_with(backend="gcp", gcp=gcp))
    settings, combo = backend.settings, "nodes2-small-reploff"
    files = ClusterFiles(tmp_path / "clusters" / combo)
    row = row_from_levels(ROW, 2000)
    endpoints = stacks.up(combo, settings, out=files.endpoints, log=lambda _: None,
                          shape=row.cluster, server=row.server,
                          ready=lambda e, s: wait_ready(e, s, files.known_hosts, row,
                                                        log=lambda _: None))  # fmt: skip
    try:
        with backend.measure(row, endpoints, files.folder) as cluster:
            assert (cluster.generator_names(), cluster.generator_bound()) == (["client"], 2)
            applied = cluster.applied()  # what the row records, read before it grows (bench)
            cluster.add_generator()
            record = cluster.generators_record()
            assert [g["where"].split("@")[1] for g in record] == [
                f"127.0.0.1:{sshd.port}", f"127.0.0.2:{second[1]}"
            ]  # fmt: skip
            assert [t.generator for t in cluster.targets("read")] == [0, 1]
            assert cluster.generators[1].psql(cluster.endpoints[1], "SELECT 1", {}, 30).strip()
            assert applied["load_generator_names"] == ["loopback-loadgen", "loopback-loadgen-1"]
            assert [g["name"] for g in applied["load_generators"]] == ["client0", "client1"]
        grown = json.loads(files.grown.read_text())
        assert grown["loadgen_names"] == ["loopback-loadgen", "loopback-loadgen-1"]
        with backend.measure(row, endpoints, files.folder) as cluster:  # the cluster's next row
            assert cluster.generator_names() == ["client0", "client1"]
    finally:
        stacks.destroy(combo, settings, out=files.released, log=lambda _: None)
    assert not files.grown.exists() and not files.endpoints.exists()
    assert settled(lambda: no_session_left(sshd, second)) == []
