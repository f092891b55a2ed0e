"""Issue 22, 1 for gcp and existing: every VM's CPU from its /proc/stat over SSH, read at once,
against the real sshd on 127.0.0.1 (the load generator, and 'nodes' that are this machine too)."""

from __future__ import annotations

import dataclasses
import glob
import os
import shlex
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import _free_port, row_from_levels

from ybscale.backends import ssh, ysql
from ybscale.backends.base import Endpoint
from ybscale.backends.existing import backend as existing
from ybscale.backends.gcp.reach import node_hosts
from ybscale.backends.loadgen import LoadgenRunner
from ybscale.backends.machine_cpu import MachineCpu
from ybscale.measure import utilisation

LEVELS = {
    "isolation": "read committed", "node_size": "small", "nodes": 2,
    "operation_size": 1, "replication": "off", "workload": "read",
}  # fmt: skip


def here() -> tuple[float, int]:
    """This machine's busy CPU seconds and CPUs, read here."""
    return utilisation.proc_stat_busy(Path("/proc/stat").read_text())


def here_steal() -> float:
    """This machine's steal seconds so far, read here (every loopback machine is this one)."""
    return utilisation.proc_stat_steal(Path("/proc/stat").read_text())


def spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def sockets() -> list[str]:
    """This process's master connections (ssh.control_path)."""
    return glob.glob(str(Path(tempfile.gettempdir()) / f"ybscale-ssh-{os.getpid()}-*"))


def check_window(cluster, names: set[str]) -> None:
    """Two readings around a second of spinning: each figure lies between readings taken here
    just before and after it, and so does the utilisation the window's arithmetic gives."""
    a = here()[0]
    first = cluster.cpu_seconds()
    b = here()[0]
    start = time.monotonic()
    spin(1.0)
    c = here()[0]
    last = cluster.cpu_seconds()
    seconds = time.monotonic() - start
    d = here()[0]
    stolen = {f"steal_{name}" for name in names}  # each machine's steal time beside its busy
    assert set(first) == set(last) == names | stolen
    for name in names:
        assert a <= first[name] <= b and c <= last[name] <= d, name
        steal = first[f"steal_{name}"], last[f"steal_{name}"]
        assert 0 <= steal[0] <= steal[1] <= here_steal(), name
    capacity = cluster.cpu_capacity()
    util = utilisation.utilisation(first, last, seconds, capacity)
    assert set(util) == names | stolen
    for name in names:
        low, high = (c - b) / capacity[name], (d - a) / capacity[name]
        assert low / seconds <= util[name] <= high / seconds, name
    assert c - b >= 0.9  # the spinning shows: the readings measure CPU, not a constant


def test_gcp_reads_every_tserver_through_the_load_generator(sshd):
    """Two tservers reached through the load generator's connection (`ssh -W`) and a third
    nobody answers for: the names are the endpoints', the unreachable one is left out with a
    warning, the arithmetic matches /proc/stat read here, nothing stays open."""
    loadgen = dataclasses.replace(sshd, control_path=ssh.control_path())
    nodes = [Endpoint("127.0.0.1", 5433, "yugabyte", "yugabyte", role=f"tserver{i}")
             for i in range(2)]  # fmt: skip
    hosts = node_hosts(loadgen, nodes, port=sshd.port)
    hosts["tserver2"] = ssh.through(loadgen, "127.0.0.1", _free_port(), tag="tserver2")
    assert all(" -W %h:%p " in h.proxy_command for h in hosts.values())
    runner = LoadgenRunner(loadgen)
    master = ssh.start_master(loadgen)
    assert master
    try:
        with MachineCpu(runner.proc_stat, hosts) as cpu:
            cluster = ysql.YsqlCluster(nodes, row_from_levels(LEVELS, 100), runner, cpu=cpu)
            record = cpu.open()
            assert record["measured"] == ["client", "tserver0", "tserver1"]
            assert list(record["not_measured"]) == ["tserver2"]
            assert cpu.warnings()[0].startswith("CPU of tserver2 not measured")
            check_window(cluster, {"client", "tserver0", "tserver1"})
            cores = here()[1]
            assert cluster.cpu_capacity() == {
                "client": float(len(os.sched_getaffinity(0))),  # nproc on the load generator
                "tserver0": float(cores),
                "tserver1": float(cores),
            }
            assert len(sockets()) == 3  # the load generator's and the two tservers' masters
    finally:
        ssh.stop_master(loadgen, master)
    deadline = time.monotonic() + 5
    while sockets() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sockets() == []


def test_ctrl_c_while_the_nodes_connect_leaves_no_connection(sshd, monkeypatch):
    """Ctrl-C while `open` connects to the nodes in threads: the threads go on connecting, and
    each master they opened is closed before the interrupt passes on. (No signal: the first
    thread to connect raises KeyboardInterrupt, which reaches `open` where a Ctrl-C arriving
    while it waits for the threads would; a SIGINT to the worker once went unseen.)"""
    loadgen = dataclasses.replace(sshd, control_path=ssh.control_path())
    nodes = [Endpoint("127.0.0.1", 5433, "yugabyte", "yugabyte", role=f"tserver{i}")
             for i in range(2)]  # fmt: skip
    real, once = ssh.start_master, threading.Lock()

    def connected_then_ctrl_c(host):
        started = real(host)
        if once.acquire(blocking=False):  # one Ctrl-C, as the first master is up
            raise KeyboardInterrupt
        return started

    monkeypatch.setattr(ssh, "start_master", connected_then_ctrl_c)
    hosts = node_hosts(loadgen, nodes, port=sshd.port)
    try:
        with pytest.raises(KeyboardInterrupt):
            with MachineCpu(LoadgenRunner(loadgen).proc_stat, hosts) as cpu:
                cpu.open()
        deadline = time.monotonic() + 5
        while sockets() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sockets() == []
    finally:  # whatever the test found left
        for host in hosts.values():
            ssh.stop_master(host)


def test_a_load_generator_behind_its_own_proxy_command_stays_reachable(sshd, tmp_path):
    """IAP: the load generator is reached through a ProxyCommand of its own (gcloud's; here a
    logging `ssh -W`). A node reached through it (named `localhost` here) must have that
    command's %h:%p expanded to the load generator's address, never to the node's."""
    log = tmp_path / "proxied"
    hop = shlex.join(["ssh", *sshd.options(), "-p", str(sshd.port)])
    inner = f'echo "$0" >> {shlex.quote(str(log))}; exec {hop} -W "$0" {sshd.login}'
    loadgen = dataclasses.replace(sshd, proxy_command=f"sh -c {shlex.quote(inner)} %h:%p")
    node = ssh.through(loadgen, "localhost", sshd.port, tag="t0")
    assert utilisation.proc_stat_busy(ssh.check_output(node, ["cat", "/proc/stat"], timeout=30))
    assert log.read_text().splitlines() == [f"127.0.0.1:{sshd.port}"]


def test_existing_reads_every_host_it_may_log_in_on(sshd, tmp_path):
    """`existing.ssh` set: each endpoint's host over SSH, pgbench's machine (here) as
    `client`; unset: the client only, as before."""
    entry = {"hosts": ["127.0.0.1:5433", "127.0.0.1:5434"]}
    login = {"user": sshd.user, "key": str(sshd.key), "port": sshd.port,
             "known_hosts": str(sshd.known_hosts)}  # fmt: skip
    config = {"existing": {"combinations": {"nodes2-small-reploff": entry}, "ssh": login}}
    row = row_from_levels(LEVELS, 100)
    backend = existing.ExistingBackend(config)
    # what `up` returns (nothing listens on the endpoints: only their hosts are read, over SSH)
    filled = backend.settings["combinations"][row.combination]  # defaults filled
    endpoints = {"combination": row.combination, "endpoints": filled}
    with backend.measure(row, endpoints, tmp_path) as cluster:
        assert cluster.cpu.open()["measured"] == ["client", "node0", "node1"]
        check_window(cluster, {"client", "node0", "node1"})
    assert sockets() == []
    config["existing"].pop("ssh")
    with existing.ExistingBackend(config).measure(row, endpoints, tmp_path) as cluster:
        assert set(cluster.cpu_seconds()) == {"client", "steal_client"}
