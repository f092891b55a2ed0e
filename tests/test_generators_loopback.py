"""Two load generators on loopback (issue 38): two sshd "generators" on two loopback addresses
(127.0.0.1, the `sshd` fixture, and 127.0.0.2) drive the stand-in tservers of a 2-node cluster
(`loopback.loopback_site`) with the `existing` backend: each drives one tserver, both start at
one agreed instant, their logs merge on this machine's clock, each one's CPU is measured, and
nothing is left running on either of them."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import ExitStack
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
    ram_root,
    row_from_levels,
    servers_under,
    settings_with,
    shipped_config,
    start_sshd,
    stop_sshd,
)
from conftest import snakemake as run_snakemake
from loopback import loopback_site, machine_group, machine_sshd, set_machine_cpus
from test_rehearsal import (
    ctrl_c_when,
    descendants,
    processes_with_env,
    settled,
    sshd_listener,
)

from ybscale.backends.existing import ExistingBackend
from ybscale.measure import bench
from ybscale.measure.bench import MeasurementError

RUNNING = "pgbench -n -M prepared"  # a measuring pgbench's command line (not its version's)
SKEW_BOUND_MS = 250  # the barrier's start skew on this (shared, 2-core) machine, at most
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("generators-loopback")]


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


def existing_settings(site_file: Path, generators: list[dict], ssh=None, **measurement) -> dict:
    where = json.loads(site_file.read_text())
    entry = {"hosts": where["tservers"]["2"], "port": where["ysql_port"], "password_env": None}
    combos = {"nodes2-small-reploff": entry}
    m = {**shipped_config()["measurement"], "clients": [4], "repetitions": 2,
         "max_repetitions": 2, "sweep": "grid", "seconds": 3, "warmup": 0, "timeout": 60,
         **measurement}  # fmt: skip
    section = {"combinations": combos, "load_generators": generators, "ssh": ssh}
    return settings_with(backend="existing", existing=section, measurement=m)


def no_session_left(sshd, second) -> list[str]:
    return descendants(sshd_listener(sshd)) + descendants(second[0])


def test_two_generators_measure_the_cluster_on_one_time_base(sshd, site, second, tmp_path):
    """One row, 4 clients: each generator drives one tserver with 2 clients, both pgbench
    start within the bounded skew (recorded per repetition), each generator's clock offset,
    pgbench and cores are recorded, each one's CPU is in throughput.csv, the per-second series
    is the two merged, and no session is left on either generator."""
    root, site_file = site
    settings = existing_settings(site_file, logins(sshd, second, tmp_path / "known_hosts"))
    row = row_from_levels({"nodes": 2, "node_size": "small", "replication": "off",
                           "workload": "read", "operation_size": 1}, 2000)  # fmt: skip
    backend = ExistingBackend(settings)
    out = tmp_path / "run01"
    with backend.cluster(row, tmp_path) as cluster:
        targets = cluster.targets("read")
        assert [t.generator for t in targets] == [0, 1]  # one tserver each
        bench.measure(row, cluster, settings["measurement"], out, progress=lambda _: None)
    reps = pd.read_csv(out / "repetitions.csv")
    assert len(reps) == 2 and (reps["clients"] == 4).all()
    assert reps["start_skew_ms"].between(0, SKEW_BOUND_MS).all(), reps["start_skew_ms"]
    meta = json.loads((out / "measurement.json").read_text())
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
    line = pd.read_csv(out / "throughput.csv").iloc[0]
    for name in ("client0", "client1"):
        assert 0 < line[f"util_{name}"] <= 1.05 and math.isfinite(line[f"util_{name}"])
    # both generators' logs came back, one node each, and merged second by second
    logs = sorted(p.name.split(".")[0] for p in (out / "pgbench-logs").glob("c004_r1_*.*[0-9]"))
    assert set(logs) == {"c004_r1_node0", "c004_r1_node1"}
    per_second = pd.read_csv(out / "per_second.csv")
    first = per_second[per_second["repetition"] == 1]
    assert list(first["second"]) == [0, 1, 2]  # one 3-s series, not two unaligned ones
    assert settled(lambda: no_session_left(sshd, second)) == []


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
READS = {"factors": {  # every row reads: a generator's and a server's CPU per transaction alike
    "A": {"name": "operation_size", "levels": [1, 2]},
    "B": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
}}  # fmt: skip


def study_of(tmp_path: Path, site_file: Path, generators: list[dict], ssh=None,
             design: dict = WORKLOAD_BY_ISOLATION, **measurement) -> Path:  # fmt: skip
    """A copy of the workflow measuring a 2^2 `design` on the 2-node stand-in cluster from
    `generators` (SSH logins; `ssh`: existing.ssh, to read the tservers' CPU): its folder
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
                         "load_generators": generators, "ssh": ssh}  # fmt: skip
    (work / "config" / "generators.yaml").write_text(yaml.safe_dump(study))
    return work


def test_a_study_with_two_generators_runs_through_the_analysis(sshd, site, second, tmp_path):
    """k = 2 end to end: every row measured from both generators (each one's CPU, pgbench and
    clock offset recorded, the barrier's skew bounded), the analysis and findings written,
    and no session left on either generator."""
    root, site_file = site
    work = study_of(tmp_path / "study", site_file, logins(sshd, second, tmp_path / "known"))
    out = run_snakemake(work, "results/effects.csv", configfile="config/generators.yaml",
                        timeout=900)  # fmt: skip
    assert out.returncode == 0, failed(out)
    for run in ("run01", "run02", "run03", "run04"):
        folder = work / "results" / "runs" / run
        meta = json.loads((folder / "measurement.json").read_text())
        assert [g["name"] for g in meta["applied"]["load_generators"]] == ["client0", "client1"]
        reps = pd.read_csv(folder / "repetitions.csv")
        assert reps["start_skew_ms"].between(0, SKEW_BOUND_MS).all(), (run, reps)
        line = pd.read_csv(folder / "throughput.csv")
        assert (line["util_client0"] > 0).all() and (line["util_client1"] > 0).all()
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


# ------------------------------------------------------------- a capped generator
# Stand-in machines of one CPU or less (`loopback.machine_group`): the cluster's server (1 CPU,
# both tservers' figure, as endpoints on one host share it), generator A (1 CPU) and generator
# B, capped below what driving the whole cluster takes, above what half of it takes.
CAP_SHARE = 0.7  # B's quota: this share of the generator CPU the cluster's saturation takes


@pytest.fixture(scope="module")
def capped(sshd):
    """(data root, site file, generators A and B as (login, CPU group)) on stand-in machines."""
    from ybscale.backends.local.cpu import CpuLimits

    with ram_root() as root:
        settings = settings_with(local={"data_root": str(root), "cpu_mechanism": "none"})
        with (
            loopback_site(root, sshd, [2], settings, cluster_cpus=1.0) as site_file,
            ExitStack() as stack,
        ):
            limits = CpuLimits(f"generators-{os.getpid()}-{uuid.uuid4().hex[:6]}")
            stack.callback(limits.cleanup)  # last: after both sshd stopped
            machines = []
            for i, ip in enumerate(["127.0.0.2", "127.0.0.3"]):
                prefix, group = machine_group(limits, f"generator{i}", 1.0)
                port = _free_port()
                keys = authorized_keys(sshd).parent
                proc = machine_sshd(keys, [ip], port, f"generator{i}-machine", group, prefix)
                stack.callback(stop_sshd, proc)
                login = {"host": ip, "port": port, "user": sshd.user, "key": str(sshd.key)}
                machines.append((login, group))
            yield root, site_file, machines
        assert servers_under(root) == []


def node_login(sshd, site_file: Path, known_hosts: Path) -> dict:
    """existing.ssh: every tserver's CPU read from the cluster's stand-in machine."""
    port = json.loads(site_file.read_text())["tserver_ssh_port"]
    return {"user": sshd.user, "key": str(sshd.key), "port": port,
            "known_hosts": str(known_hosts)}  # fmt: skip


def test_a_capped_generator_is_the_bottleneck_alone_and_the_cluster_is_with_two(
    sshd, capped, tmp_path
):
    """Calibrated on the machine: CPU per transaction of a generator (A alone) and of the
    cluster's server give B a quota of 70 % of what saturating the cluster takes from one
    generator. The study from B alone (k = 1) is client-bound, the findings naming it; the
    same study from A and B (k = 2, B driving half the clients) finds the cluster the
    bottleneck, and measures more."""
    root, site_file, ((a, _), (b, b_group)) = capped
    known = tmp_path / "known_hosts"
    a, b = ({**login, "known_hosts": str(known)} for login in (a, b))
    nodes = node_login(sshd, site_file, known)
    # calibration: A alone, unrestricted relative to the cluster
    settings = existing_settings(site_file, [a], nodes, repetitions=1, max_repetitions=1)
    row = row_from_levels(ROW, 2000)
    with ExistingBackend(settings).cluster(row, tmp_path) as cluster:
        out = tmp_path / "calibration"
        bench.measure(row, cluster, settings["measurement"], out, progress=lambda _: None)
    line = pd.read_csv(out / "throughput.csv").iloc[0]
    generator_ms = 1000 * line["util_client"] / line["tps"]  # 1 CPU: U x 1 / X
    server_ms = 1000 * line["util_node0"] / line["tps"]
    assert 0 < generator_ms < server_ms, line.to_dict()  # pgbench is the lighter side
    set_machine_cpus(b_group, CAP_SHARE * generator_ms / server_ms)
    results = {}
    for k, generators in ((1, [b]), (2, [a, b])):
        work = study_of(tmp_path / f"k{k}", site_file, generators, nodes, READS, clients=[4],
                        max_clients=4, seconds=3)  # fmt: skip
        done = run_snakemake(work, "results/effects.csv", configfile="config/generators.yaml",
                             timeout=900)  # fmt: skip
        assert done.returncode == 0, failed(done)
        results[k] = (
            pd.read_csv(work / "results" / "ceilings.csv"),
            (work / "results" / "findings.md").read_text(),
        )
    one, findings_one = results[1]
    two, findings_two = results[2]
    assert set(one["bottleneck"]) == {"client"}, one[["run", "bottleneck"]]
    assert "4 of 4 rows are client-bound" in findings_one and "run01 client" in findings_one
    assert set(two["bottleneck"]) <= {"node0", "node1"}, two[["run", "bottleneck"]]
    assert "0 of 4 rows are client-bound" in findings_two
    assert two["empirical_tps"].mean() > one["empirical_tps"].mean()
    print(f"generator {generator_ms:.4f} ms/tx, server {server_ms:.4f} ms/tx; "
          f"k=1 {one['empirical_tps'].round().tolist()} {one['bottleneck'].tolist()}; "
          f"k=2 {two['empirical_tps'].round().tolist()} {two['bottleneck'].tolist()}")  # fmt: skip
