"""The local backend on real PostgreSQL servers: topology, isolation, CPU limits, clean-up."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import row_from_levels, servers_under, settings_with

from ybscale.backends.base import OWNER_ENV, BackendError, alive
from ybscale.backends.local import cluster as local
from ybscale.backends.local import cpu
from ybscale.backends.local.cluster import LocalBackend

LEVELS = {
    "operation_size": 1,
    "workload": "write",
    "isolation": "repeatable read",
    "node_size": "small",
}


def backend(data_root, **local):
    return LocalBackend(settings_with(local={"data_root": str(data_root), **local}))


def test_replicated_cluster_has_a_quorum_and_reads_back_isolation(data_root, tmp_path):
    levels = {**LEVELS, "nodes": 3, "replication": "on"}
    with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
        assert len(servers_under(data_root)) == 3
        cluster.check()
        primary = cluster.nodes[0]
        names = primary.psql("SHOW synchronous_standby_names")
        assert names == "ANY 1 (node2, node3)"
        states = primary.psql("SELECT string_agg(sync_state, ',') FROM pg_stat_replication")
        assert states == "quorum,quorum"
        applied = cluster.applied()
        assert set(applied["isolation_in_effect"].values()) == {"repeatable read"}
        # writes go to the primary only, reads to every node, all over the whole key space
        assert [t.endpoint.port for t in cluster.targets("write")] == [primary.port]
        assert len(cluster.targets("read")) == 3
        primary.psql("INSERT INTO kv VALUES (999999, 'x')")
        cluster.wait_replayed()
        assert cluster.nodes[2].psql("SELECT count(*) FROM kv") == "1001"
        cluster.reset("write")  # back to the starting state, on every node
        assert cluster.nodes[1].psql("SELECT count(*) FROM kv") == "1000"
    assert servers_under(data_root) == []
    assert not list(data_root.glob("ybscale-*/node*"))


def test_sharded_cluster_holds_each_key_once(data_root, tmp_path):
    levels = {**LEVELS, "nodes": 3, "replication": "off", "isolation": "read committed"}
    with backend(data_root).cluster(row_from_levels(levels, 3000), tmp_path) as cluster:
        counts = []
        for i, node in enumerate(cluster.nodes):
            assert node.psql(f"SELECT count(*) FROM kv WHERE k % 3 <> {i}") == "0"
            counts.append(int(node.psql("SELECT count(*) FROM kv")))
        assert counts == [1000, 1000, 1000]
        targets = cluster.targets("read")
        assert [t.variables["shard"] for t in targets] == [0, 1, 2]
        assert {t.variables["nshards"] for t in targets} == {3}
        assert cluster.applied()["isolation_in_effect"]["node2"] == "read committed"
        state = "SELECT pg_relation_filenode('kv'), sum(hashtext(k::text || v)) FROM kv"
        loaded = [node.psql(state) for node in cluster.nodes]
        for node in cluster.nodes:  # as the write script adds keys: from keybase (3000) up
            node.psql("INSERT INTO kv SELECT g, 'x' FROM generate_series(100000, 100099) g")
        # every shard back to its starting state at once, without a reload (issue 48): the
        # added keys removed, the loaded rows as they were, in the same file (a reload's
        # TRUNCATE gives the table a new one)
        assert cluster.reset("write") == "restored"
        for i, node in enumerate(cluster.nodes):
            assert node.psql(f"SELECT count(*) FROM kv WHERE k % 3 <> {i}") == "0"
            assert node.psql("SELECT count(*) FROM kv") == "1000"
        assert [node.psql(state) for node in cluster.nodes] == loaded
    assert servers_under(data_root) == []


def test_the_next_row_on_a_cluster_keeps_the_dataset_it_holds(data_root, tmp_path):
    """Issue 48: a dataset is loaded once per cluster: the next row on it with the same rows
    keeps it (the keys writes added removed, the table in the same file), recorded as kept;
    a row with another dataset size, or another value size, loads anew."""
    local = backend(data_root)
    levels = {**LEVELS, "nodes": 2, "replication": "off"}
    row = row_from_levels(levels, 2000)
    label = local.cluster_labels(local.config, [row])[row.run]
    endpoints = local.up(label, local.definition(local.config, [row]), tmp_path)
    state = "SELECT pg_relation_filenode('kv'), count(*) FROM kv GROUP BY 1"
    try:
        with local.measure(row, endpoints, tmp_path) as first:
            assert first.record["dataset"]["how"] == "loaded"
            assert first.record["dataset"]["rows_per_second"] > 0
            loaded = [node.psql(state) for node in first.nodes]
            first.nodes[1].psql("INSERT INTO kv VALUES (100001, 'x')")  # a write's new key
        with local.measure(row, endpoints, tmp_path) as second:
            assert second.record["dataset"]["how"] == "kept"
            assert [node.psql(state) for node in second.nodes] == loaded
        with local.measure(row_from_levels(levels, 3000), endpoints, tmp_path) as third:
            assert third.record["dataset"]["how"] == "loaded"
            assert sum(int(node.psql("SELECT count(*) FROM kv")) for node in third.nodes) == 3000
        # another value size (dataset.value_bytes) is another dataset: loaded anew, every
        # row's value that many bytes, built from md5s of its key
        wider = dataclasses.replace(row_from_levels(levels, 3000), dataset_value_bytes=100)
        with local.measure(wider, endpoints, tmp_path) as fourth:
            assert fourth.record["dataset"]["how"] == "loaded"
            sizes = "SELECT min(octet_length(v)), max(octet_length(v)), count(*) FROM kv"
            assert [node.psql(sizes) for node in fourth.nodes] == ["100|100|1500"] * 2
            first_md5 = "SELECT count(*) FROM kv WHERE left(v, 32) <> md5(k::text || ':1')"
            assert fourth.nodes[0].psql(first_md5) == "0"
    finally:
        local.down(endpoints, tmp_path)
    assert servers_under(data_root) == []


def test_node_size_sets_different_cpu_limits(data_root, tmp_path):
    records = {}
    for size in ("small", "large"):
        levels = {**LEVELS, "nodes": 3, "replication": "off", "node_size": size}
        with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
            records[size] = cluster.applied()["cpu"]["node1"]
    assert records["small"]["mechanism"] == records["large"]["mechanism"]
    if records["small"]["mechanism"] == "none":
        pytest.fail(f"no CPU limit mechanism works on this machine: {records}")
    assert records["small"]["cpus"] < records["large"]["cpus"]


def test_a_nodes_memory_limit_is_applied_read_back_and_refused_where_it_cannot_hold(
    template, data_root, tmp_path
):
    """Issue 48: `local.memory.<size>` puts each node (its postmaster and every backend it
    forks) under a memory limit, page cache included, read back into the record; refused
    before any cluster starts when the data is on tmpfs (memory itself) or shared_buffers do
    not fit below it. Under it, a dataset larger than the limit cannot stay in memory: each
    whole read of its table brings most of the table from the disk (`disk_read_bytes`, the
    servers' /proc/<pid>/io), and every one of its blocks passes the buffers (`blks_read`)."""
    import tempfile

    from conftest import seed

    disk = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ybscale-test-"))  # a disk, not tmpfs
    disk.chmod(0o755)  # the servers' user reads it
    try:
        seed(disk, template)
        row = row_from_levels({**LEVELS, "nodes": 1, "replication": "off"}, 1_200_000)
        limited = backend(disk, memory={"small": "64MB"}, shared_buffers="16MB")
        assert limited.check_rows([row]) == []
        with limited.cluster(row, tmp_path) as cluster:
            record = cluster.applied()["cpu"]["node1"]
            assert record["memory_bytes"] == 64 * 1024**2, record
            pid = (cluster.nodes[0].datadir / "postmaster.pid").read_text().split()[0]
            group = record["memory_path"].split("/ybscale/", 1)[1]
            assert f"/ybscale/{group}" in Path(f"/proc/{pid}/cgroup").read_text()
            [size] = cluster.record["dataset"]["bytes_per_node"].values()
            table = int(cluster.nodes[0].psql("SELECT pg_relation_size('kv')"))
            assert size > table > 64 * 1024**2  # the dataset is larger than the node's memory
            for _ in range(2):  # the second scan finds no more of it in memory than the first
                before = cluster.block_counters()
                cluster.nodes[0].psql("SELECT count(v) FROM kv")
                after = cluster.block_counters()
                read = after["disk_read_bytes"] - before["disk_read_bytes"]
                assert read > table - 64 * 1024**2, (read, table)
                assert after["blks_read"] - before["blks_read"] > 0.9 * table / 8192 - 2048
        large = backend(disk, memory={"small": "64MB"}, shared_buffers="64MB")
        [buffers] = large.check_rows([row])
        assert buffers == (
            "config: local.shared_buffers (64MB) must be below local.memory.small (64MB)"
        )
    finally:
        shutil.rmtree(disk, ignore_errors=True)
    [tmpfs] = backend(data_root, memory={"small": "64MB"}, shared_buffers="16MB").check_rows([row])
    assert tmpfs.startswith("config: local.memory: small nodes get a memory limit") and \
        "is tmpfs" in tmpfs  # fmt: skip


def test_servers_are_stopped_when_the_body_fails(data_root, tmp_path):
    levels = {**LEVELS, "nodes": 5, "replication": "on"}
    with pytest.raises(RuntimeError, match="boom"):
        with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path):
            assert len(servers_under(data_root)) == 5
            raise RuntimeError("boom")
    assert servers_under(data_root) == []
    assert (tmp_path / "node1.log").exists()  # server logs are kept with the row


def test_clean_up_finishes_when_keeping_the_logs_fails(data_root, tmp_path):
    """The row's folder vanished under a running cluster: copying the server logs fails, and
    the servers, their data and their CPU groups are still all removed."""
    levels = {**LEVELS, "nodes": 3, "replication": "off"}
    workdir = tmp_path / "row"
    workdir.mkdir()
    with pytest.raises(FileNotFoundError):
        with backend(data_root).cluster(row_from_levels(levels, 1000), workdir) as cluster:
            groups = [Path(c["path"]) for c in cluster.applied()["cpu"].values() if "path" in c]
            shutil.rmtree(workdir)
    assert groups, "no CPU group was created: nothing to check"
    assert servers_under(data_root) == []
    assert not list(data_root.glob("ybscale-*/node*"))
    assert [g for g in groups if g.exists()] == []


def test_a_cluster_makes_its_missing_row_folder_and_keeps_its_logs_there(data_root, tmp_path):
    """A row folder that does not exist yet is made; before, the clean-up's log copy failed."""
    workdir = tmp_path / "not" / "yet"
    levels = {**LEVELS, "nodes": 1, "replication": "off"}
    with backend(data_root).cluster(row_from_levels(levels, 1000), workdir):
        pass
    assert (workdir / "node1.log").read_text()


@pytest.mark.exclusive  # another cluster's start reaps dead processes' CPU groups too
def test_cpu_groups_of_a_dead_process_are_reaped():
    dead = subprocess.Popen(["true"])
    dead.wait()
    limits = cpu.CpuLimits(group=f"{dead.pid}-0123abcd", mechanism="auto")
    _, record = limits.prefix("node1", 0.25)  # made, never cleaned up: as after a kill -9
    if "path" not in record:
        pytest.fail(f"no cgroup mechanism works on this machine: {record}")
    group = Path(record["path"]).parent
    assert group.exists() and not alive(dead.pid)
    assert str(group) in cpu.reap_orphan_groups(alive)
    assert not group.exists()


def test_server_ports_stay_out_of_the_range_client_connections_draw_from():
    low = int(local.EPHEMERAL_RANGE.read_text().split()[0])
    taken: list[int] = []
    for _ in range(50):
        taken.append(local.free_port(exclude=taken))
    assert len(set(taken)) == len(taken)
    if low - local.PORTS_FROM > 1000:
        assert all(local.PORTS_FROM <= port < low for port in taken)


def test_a_server_that_cannot_start_is_reported_with_its_logs_reason(
    data_root, tmp_path, monkeypatch
):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        monkeypatch.setattr(local, "free_port", lambda exclude=(): held.getsockname()[1])
        levels = {**LEVELS, "nodes": 1, "replication": "off"}
        with pytest.raises(BackendError, match="start node1 failed") as failed:
            with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path):
                pass
    assert "Address already in use" in str(failed.value)
    assert servers_under(data_root) == []


def _quota(record: dict) -> str:
    path = Path(record["path"])
    if record["mechanism"] == "cgroup2":
        return (path / "cpu.max").read_text().split()[0]
    return (path / "cpu.cfs_quota_us").read_text().strip()


def test_the_quota_is_lifted_only_while_data_loads_and_comes_back_after_a_failure():
    limits = cpu.CpuLimits(group=f"{os.getpid()}-4567abcd", mechanism="auto")
    try:
        _, record = limits.prefix("node1", 0.25)
        if "path" not in record:
            pytest.fail(f"no cgroup mechanism works on this machine: {record}")
        assert _quota(record) == str(record["quota_us"])
        with pytest.raises(RuntimeError, match="load failed"):
            with limits.lifted():
                assert _quota(record) in ("max", "-1")
                raise RuntimeError("load failed")
        assert _quota(record) == str(record["quota_us"])
    finally:
        limits.cleanup()


def test_a_reset_leaves_the_nodes_at_their_quota(data_root, tmp_path):
    levels = {**LEVELS, "nodes": 3, "replication": "off"}
    with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
        records = [r for r in cluster.applied()["cpu"].values() if "path" in r]
        if not records:
            pytest.fail("no cgroup mechanism works on this machine")
        cluster.reset("write")
        assert [_quota(r) for r in records] == [str(r["quota_us"]) for r in records]


KILLED_RUN = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from conftest import row_from_levels, settings_with
from ybscale.backends.local import LocalBackend
levels = {levels!r}
backend = LocalBackend(settings_with(local={{"data_root": {root!r}}}))
with backend.cluster(row_from_levels(levels, 1000), Path({work!r})):
    print("up", flush=True)
    time.sleep(600)
"""


@pytest.mark.exclusive  # looks at every server's shared memory and CPU group
def test_the_leftovers_of_a_killed_run_are_reaped_by_the_next(data_root, tmp_path):
    """kill -9 of the measuring process leaves its servers running; the next cluster on the same
    data root stops them (and their shared memory goes), removes their data and CPU groups."""
    levels = {**LEVELS, "nodes": 2, "replication": "off"}
    before = set(Path("/dev/shm").glob("PostgreSQL.*"))
    code = KILLED_RUN.format(
        tests=str(Path(__file__).resolve().parents[1]),
        levels=levels,
        root=str(data_root),
        work=str(tmp_path),
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        (home,) = data_root.glob("ybscale-*/owner.json")
        group = f"{proc.pid}-"
    finally:
        proc.kill()
        proc.wait()
    assert len(servers_under(data_root)) == 2  # orphans, still serving
    groups = [g for g in Path("/sys/fs/cgroup").rglob(f"ybscale/{group}*")]
    assert groups, "the killed run made no CPU group: nothing to check"
    with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
        assert str(home.parent) in cluster.applied()["reaped_orphans"]
        assert len(servers_under(data_root)) == 2  # only the new cluster's
    assert servers_under(data_root) == []
    assert not home.parent.exists()
    assert [g for g in groups if g.exists()] == []
    assert set(Path("/dev/shm").glob("PostgreSQL.*")) <= before


def psqls(port: int) -> list[int]:
    """The pids of the psql processes connected (or connecting) to `port`."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"/psql") and str(port).encode() in argv:
            found.append(int(proc.name))
    return found


def test_a_dead_node_fails_the_check_and_the_read_backs_share_one_psql_a_node(data_root, tmp_path):
    levels = {**LEVELS, "nodes": 3, "replication": "off"}
    with backend(data_root).cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
        node = cluster.nodes[1]
        for _ in range(5):  # what a measurement asks before and after each run
            cluster.check()
            cluster.block_counters()
        assert [n.session.started for n in cluster.nodes] == [1, 1, 1]
        assert [len(psqls(n.port)) for n in cluster.nodes] == [1, 1, 1]
        # a session still open (as pgbench's are as it ends): its last counts reach
        # pg_stat_database as it exits, so the counters are read once it has
        before = cluster.block_counters()
        scan = "SELECT count(v) FROM kv; SELECT pg_sleep(0.5)"
        reader = subprocess.Popen([*node.psql_argv(), "-c", scan], stdout=subprocess.DEVNULL)
        while not node.ask(local.OTHER_SESSIONS):
            assert reader.poll() is None
        after = cluster.block_counters()
        assert reader.poll() == 0  # it had ended
        pages = int(node.ask("SELECT pg_relation_size('kv') / 8192"))
        assert after["blks_hit"] + after["blks_read"] >= before["blks_hit"] + before[
            "blks_read"] + pages > 0  # fmt: skip
        lingering = subprocess.Popen([*node.psql_argv(), "-c", "SELECT pg_sleep(30)"])
        try:
            while not (pid := node.ask(local.OTHER_SESSIONS)):
                assert lingering.poll() is None
            with pytest.raises(BackendError, match=f"node2: sessions {pid} still open after 0.2 s"):
                local.sessions_ended(node, timeout=0.2)
        finally:
            lingering.kill()
            lingering.wait()
        # answered as a psql of its own answers, with or without a closing semicolon
        sql = "SELECT 1, 'x|y';\nSELECT n FROM generate_series(1, 3) n -- no semicolon"
        assert node.ask(sql) == node.psql(sql) == "1|x|y\n1\n2\n3"
        with pytest.raises(BackendError, match='node2: SQL failed: .*column "nope" does not'):
            node.ask("SELECT nope")
        assert node.ask("SELECT 2") == "2"  # in a new session
        with pytest.raises(BackendError, match="node2: SQL timed out after 0.5s"):
            node.ask("SELECT pg_sleep(10)", timeout=0.5)
        assert psqls(node.port) == []  # not left waiting on its question
        assert node.ask("SELECT 3") == "3"
        started = node.session.started
        node.stop()
        with pytest.raises(BackendError, match="node2"):
            cluster.check()
        node.start([])  # back, outside its CPU group: its idle session's psql lost it
        cluster.check()  # asked again, once, in a new session
        assert node.session.started == started + 1
    assert servers_under(data_root) == []
    assert [psqls(n.port) for n in cluster.nodes] == [[], [], []]


def test_unknown_server_user_is_a_clear_error(data_root, tmp_path, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 0)
    levels = {**LEVELS, "nodes": 3, "replication": "off"}
    with pytest.raises(BackendError, match="local.user"):
        with backend(data_root, user="no-such-user-here").cluster(
            row_from_levels(levels, 1000), tmp_path
        ):
            pass


def test_server_and_session_settings_are_read_back_and_a_drift_fails(data_root, tmp_path):
    levels = {**LEVELS, "nodes": 2, "replication": "off"}
    row = row_from_levels(
        levels, 1000, server={"work_mem": "4MB"}, session={"enable_seqscan": "off"}
    )
    with backend(data_root).cluster(row, tmp_path) as cluster:
        applied = cluster.applied()
        effect = applied["settings_in_effect"]
        assert effect["server"] == {"node1": {"work_mem": "4MB"}, "node2": {"work_mem": "4MB"}}
        assert effect["session"]["node2"]["enable_seqscan"] == "off"
        assert effect["session"]["node1"]["default_transaction_isolation"] == "repeatable read"
        # a node whose configuration drifted from the row is caught, and named
        cluster.nodes[1].psql("ALTER SYSTEM SET work_mem = '1MB';\nSELECT pg_reload_conf();")
        with pytest.raises(BackendError, match="node2: server settings in effect"):
            cluster.applied()
    assert servers_under(data_root) == []


BRING_UP = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from conftest import settings_with
from ybscale.backends.local import LocalBackend
backend = LocalBackend(settings_with(local={{"data_root": {root!r}}}))
definition = {{"shape": {{"nodes": 2, "node_size": "small", "replication": False}}, "server": {{}}}}
print(json.dumps(backend.up("run01", definition, Path({folder!r}))), flush=True)
"""


def test_a_cluster_brought_up_by_one_process_is_measured_and_released_by_others(
    data_root, tmp_path
):
    """The pipeline's lifecycle: `up` in one job (the servers outlive it, owned by the
    workflow: here this process), `measure` and `down` in others, from the endpoints alone. A
    bring-up in between reaps nothing of it (its owner lives); `down` stops every server and
    removes its data and CPU groups."""
    code = BRING_UP.format(tests=str(Path(__file__).resolve().parents[1]), root=str(data_root),
                           folder=str(tmp_path))  # fmt: skip
    env = {**os.environ, OWNER_ENV: str(os.getpid())}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    endpoints = json.loads(done.stdout)
    assert len(servers_under(data_root)) == 2  # the bring-up's process has exited
    mechanism, quotas = endpoints["limits"]["mechanism"], endpoints["limits"]["quotas"]
    assert quotas, "no CPU quota was set: nothing to check"
    for path, (quota, _) in quotas.items():  # lifted while the servers started, set again
        assert _quota({"path": path, "mechanism": mechanism}) == str(quota), path
    (home,) = data_root.glob("ybscale-*/owner.json")
    assert json.loads(home.read_text())["pid"] == os.getpid()
    levels = {**LEVELS, "nodes": 1, "replication": "off"}
    with backend(data_root).cluster(row_from_levels(levels, 100, run="run02"), tmp_path / "b"):
        assert len(servers_under(data_root)) == 3  # the first cluster was not reaped
    row = row_from_levels({**LEVELS, "nodes": 2, "replication": "off"}, 1000)
    with backend(data_root).measure(row, endpoints, tmp_path) as cluster:
        assert [n.port for n in cluster.nodes] == [n["port"] for n in endpoints["nodes"]]
        assert sum(int(n.psql("SELECT count(*) FROM kv")) for n in cluster.nodes) == 1000
        groups = [Path(c["path"]) for c in cluster.applied()["cpu"].values() if "path" in c]
    assert len(servers_under(data_root)) == 2  # measuring leaves the cluster up
    backend(data_root).down(endpoints, tmp_path)
    assert servers_under(data_root) == []
    assert not home.parent.exists()
    assert (tmp_path / "node2.log").read_text()  # the server logs are kept in its folder
    assert groups and [g for g in groups if g.exists()] == []


def postmasters(root) -> list[str]:
    """The servers under `root` (not the processes that merely name it)."""
    return [line for line in servers_under(root) if "/bin/postgres " in line]


def test_the_workflows_clean_up_stops_what_it_owns_and_only_that(data_root, tmp_path):
    """`on_error` (the Snakefile's onerror:, also after Ctrl-C) stops the servers owned by this
    workflow, e.g. a bring-up cut short before it wrote its endpoints; another live owner's
    stay, and are reaped once that owner died."""
    code = BRING_UP.format(tests=str(Path(__file__).resolve().parents[1]), root=str(data_root),
                           folder=str(tmp_path))  # fmt: skip
    env = {**os.environ, OWNER_ENV: str(os.getpid())}  # this process is the workflow
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    other = subprocess.Popen(  # another workflow, alive, owning a cluster of its own
        [sys.executable, "-c", code + "import time; time.sleep(600)\n"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert json.loads(other.stdout.readline())["home"]
        assert len(postmasters(data_root)) == 4
        settings = settings_with(local={"data_root": str(data_root)})
        LocalBackend.on_error(settings, ["run01"], tmp_path)
        assert len(postmasters(data_root)) == 2  # the other owner's cluster is still up
        (left,) = data_root.glob("ybscale-*/owner.json")
        assert json.loads(left.read_text())["pid"] == other.pid
    finally:
        other.kill()
        other.wait()
    assert str(left.parent) in local.reap_orphans(data_root)  # its owner died: an orphan
    assert servers_under(data_root) == []


def test_a_relative_data_root_is_in_the_workflows_folder_where_its_link_points(
    tmp_path, monkeypatch
):
    """`local.data_root: pgdata` is the jobs' (the workflow's) folder's pgdata, resolved: a
    server's socket path is short and its data directory absolute."""
    (tmp_path / "ram").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pgdata").symlink_to(tmp_path / "ram", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "work")
    root, _ = local.choose_data_root("pgdata", tmp_path / "fallback")
    assert root == tmp_path.resolve() / "ram"
