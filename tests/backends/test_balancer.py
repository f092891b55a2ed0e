"""The wait for an idle load balancer after each reload (gcp): yb-admin's answer as its source
prints it, the wait run over a real SSH connection to 127.0.0.1 (the `sshd` fixture) with a
stand-in yb-admin, and YsqlCluster's `settle` hook after every reload of a real PostgreSQL."""

from __future__ import annotations

import pytest
import test_existing
from conftest import row_from_levels

from ybscale.backends.base import BackendError, Endpoint
from ybscale.backends.gcp import balancer
from ybscale.backends.ysql import YsqlCluster

# yugabyte-db src/yb/tools/yb-admin_client.cc, ClusterAdminClient::GetIsLoadBalancerIdle:
#   const bool is_idle = VERIFY_RESULT(yb_client_->IsLoadBalancerIdle());
#   cout << "Idle = " << is_idle << endl;      (a bool streamed as 1 or 0)
IDLE, BUSY = "Idle = 1\n", "Idle = 0\n"
MASTERS = "10.42.0.10:7100,10.42.0.11:7100,10.42.0.12:7100"
postgres = test_existing.postgres  # a real PostgreSQL server (fixture)


def test_yb_admins_answer_is_read_as_it_prints_it():
    assert balancer.idle_answer(IDLE) is True
    assert balancer.idle_answer(BUSY) is False
    with pytest.raises(BackendError, match="unreadable answer"):
        balancer.idle_answer("Unable to get is load balancer idle: Timed out\n")


def stand_in(tmp_path, answers: list[str]):
    """A yb-admin that logs its arguments and prints the next of `answers` (the last forever)."""
    script = tmp_path / "yb-admin"
    calls = tmp_path / "calls"
    lines = "\n".join(f"{i}) printf '{a}' ;;".replace("\n", "\\n") for i, a in enumerate(answers))
    last = answers[-1].replace("\n", "\\n")
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f"n=$(($(wc -l < {calls}) - 1))\n"
        f"case \"$n\" in\n{lines}\n*) printf '{last}' ;;\nesac\n"
    )
    script.chmod(0o755)
    return script, calls


def test_the_wait_polls_yb_admin_on_the_load_generator_until_idle(sshd, tmp_path):
    script, calls = stand_in(tmp_path, [BUSY, BUSY, IDLE])
    slept = []
    endpoints = {"master_addresses": MASTERS, "yb_admin": str(script)}
    wait = balancer.load_balancer_idle(sshd, endpoints, timeout=600, sleep=slept.append)
    waited = wait()
    assert (
        calls.read_text().splitlines()
        == [f"-master_addresses {MASTERS} get_is_load_balancer_idle"] * 3
    )
    assert waited["polls"] == 3 and slept == [balancer.POLL_SECONDS] * 2
    assert waited["command"] == f"{script} -master_addresses {MASTERS} get_is_load_balancer_idle"


def test_a_balancer_that_stays_busy_fails_the_row_after_the_timeout(sshd, tmp_path):
    script, _ = stand_in(tmp_path, [BUSY])
    endpoints = {"master_addresses": MASTERS, "yb_admin": str(script)}
    wait = balancer.load_balancer_idle(sshd, endpoints, timeout=0, sleep=lambda s: None)
    with pytest.raises(BackendError, match=r"load balancer not idle .* still says Idle = 0"):
        wait()


def test_a_load_generator_without_yb_admin_is_a_clear_error(sshd, tmp_path):
    endpoints = {"master_addresses": MASTERS}  # the default: yb-admin on the PATH; none here
    wait = balancer.load_balancer_idle(sshd, endpoints, timeout=600, sleep=lambda s: None)
    with pytest.raises(BackendError, match="yb-admin not found on the load generator") as exc:
        wait()
    assert "gcp.balancer_timeout: 0" in str(exc.value)
    script, _ = stand_in(tmp_path, ["Unable to establish connection to leader master\n"])
    wait = balancer.load_balancer_idle(sshd, {**endpoints, "yb_admin": str(script)}, 600)
    with pytest.raises(BackendError, match="unreadable answer"):
        wait()


def test_every_reload_is_followed_by_the_settle_hook_and_recorded(postgres):
    """Real PostgreSQL: the hook runs once the dataset is loaded, after each reload only."""
    node, runner = postgres
    node.psql("DROP DATABASE IF EXISTS settle")
    node.psql("CREATE DATABASE settle")
    ep = Endpoint(node.endpoint.host, node.endpoint.port, "settle", "postgres", None, "tserver0")
    seen = []

    def settle():
        seen.append(int(cluster.psql("SELECT count(*) FROM kv").strip()))
        return {"after": len(seen)}

    cluster = YsqlCluster([ep], row_from_levels(test_existing.LEVELS, 500), runner, settle=settle)
    cluster.restorable = lambda: False  # a script changing loaded rows: every write reloads
    cluster.reset("write")
    cluster.reset("write")
    cluster.reset("read")  # the read workload keeps the loaded dataset: no reload, no wait
    assert seen == [500, 500]
    assert cluster.settled == [{"after": 1}, {"after": 2}]
    assert cluster.applied()["after_reload"] == [{"after": 1}, {"after": 2}]


def test_the_flush_runs_yb_admin_flush_table_on_the_load_generator(sshd, tmp_path):
    """`yb-admin -master_addresses <m> flush_table ysql.<db> <table> <timeout>` (yb-admin_cli.cc,
    flush_table_args); a failing yb-admin fails the row, naming the command."""
    script, calls = stand_in(tmp_path, [""])
    flush = balancer.flush_table(sshd, {"master_addresses": MASTERS, "yb_admin": str(script)},
                                 "yugabyte", "kv")  # fmt: skip
    done = flush()
    assert calls.read_text().splitlines() == [
        f"-master_addresses {MASTERS} flush_table ysql.yugabyte kv {balancer.FLUSH_TIMEOUT}"
    ]
    assert done["command"] == f"{script} {calls.read_text().strip()}" and done["flushed_in_s"] >= 0
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\necho 'Error running flush_table: Not found' >&2\nexit 1\n")
    failing.chmod(0o755)
    flush = balancer.flush_table(sshd, {"master_addresses": MASTERS, "yb_admin": str(failing)},
                                 "yugabyte", "kv")  # fmt: skip
    with pytest.raises(BackendError, match="flush_table ysql.yugabyte kv 600: .*Not found"):
        flush()


class _Sizes:
    """NodeCounters' SST bytes as the tservers would report them: 0 until `flushed`."""

    def __init__(self, events: list):
        self.events = events

    def open(self):
        return {"measured": ["block_cache"]}

    def table_bytes(self, table):
        flushed = "flush" in self.events
        self.events.append("sizes")
        return {"tserver0": 3000.0 if flushed else 0.0, "tserver1": 1000.0 if flushed else 0.0}


def test_the_sst_bytes_are_read_after_the_settle_and_a_flush_once(postgres):
    """Real PostgreSQL: after the row's first load, the balancer settled, the table flushed,
    then the tservers' SST bytes read, per row and replica with the record's RF; not again at
    the next reload."""
    node, runner = postgres
    node.psql("DROP DATABASE IF EXISTS flushed")
    node.psql("CREATE DATABASE flushed")
    ep = Endpoint(node.endpoint.host, node.endpoint.port, "flushed", "postgres", None, "tserver0")
    events: list[str] = []
    cluster = YsqlCluster(
        [ep], row_from_levels(test_existing.LEVELS, 500), runner,
        record={"replication_factor": 2},
        settle=lambda: events.append("settle") or {},
        flush=lambda: events.append("flush") or {"command": "yb-admin flush_table"},
    )  # fmt: skip
    cluster.node_counters = lambda: _Sizes(events)
    cluster.restorable = lambda: False
    cluster.reset("write")
    cluster.reset("write")
    assert events == ["settle", "flush", "sizes", "settle"]
    assert cluster.dataset["sst_bytes_per_tserver"] == {"tserver0": 3000.0, "tserver1": 1000.0}
    assert cluster.dataset["sst_bytes_per_row_per_replica"] == 4000 / (500 * 2)
    assert cluster.dataset["sst_flush"] == {"command": "yb-admin flush_table"}
    # without a flush (existing): not read, and said why
    events.clear()
    cluster = YsqlCluster([ep], row_from_levels(test_existing.LEVELS, 500), runner)
    cluster.node_counters = lambda: _Sizes(events)
    cluster.reset("write")
    assert "sizes" not in events and "sst_bytes_per_tserver" not in cluster.dataset
    assert "flush_table" in cluster.dataset["sst_not_read"]
    # a flush that fails: said, not read, the row goes on

    def failing():
        raise BackendError("yb-admin exited 1: Timed out")

    events.clear()
    cluster = YsqlCluster([ep], row_from_levels(test_existing.LEVELS, 500), runner, flush=failing)
    cluster.node_counters = lambda: _Sizes(events)
    assert cluster.reset("write") == "reloaded"
    assert "sizes" not in events and "Timed out" in cluster.dataset["sst_not_read"]
