"""Two load generators on loopback (issue 38): two sshd "generators" on two loopback addresses
(127.0.0.1, the `sshd` fixture, and 127.0.0.2) drive the stand-in tservers of a 2-node cluster
(`loopback.loopback_site`) with the `existing` backend: each drives one tserver, both start at
one agreed instant, their logs merge on this machine's clock, each one's CPU is measured, and
nothing is left running on either of them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import (
    _free_port,
    authorized_keys,
    ram_root,
    row_from_levels,
    servers_under,
    settings_with,
    shipped_config,
    start_sshd,
    stop_sshd,
)
from loopback import loopback_site
from test_rehearsal import descendants, settled, sshd_listener

from ybscale.backends.existing import ExistingBackend
from ybscale.measure import bench

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


def existing_settings(site_file: Path, generators: list[dict], **measurement) -> dict:
    where = json.loads(site_file.read_text())
    entry = {"hosts": where["tservers"]["2"], "port": where["ysql_port"], "password_env": None}
    combos = {"nodes2-small-reploff": entry}
    m = {**shipped_config()["measurement"], "clients": [4], "repetitions": 2,
         "max_repetitions": 2, "sweep": "grid", "seconds": 3, "warmup": 0, "timeout": 60,
         **measurement}  # fmt: skip
    section = {"combinations": combos, "load_generators": generators}
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
