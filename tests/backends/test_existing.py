"""The existing backend: endpoint checks at parse time, and YsqlCluster through fake runners."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import row_from_levels, seed, settings_with, shipped_config

from ybscale import study
from ybscale.backends import yb_catalogue, ysql
from ybscale.backends.base import BackendError, Endpoint, PgbenchCommand
from ybscale.backends.existing import backend as existing
from ybscale.backends.yb_catalogue import stubs
from ybscale.measure.generators import ClockOffset

ROOT = Path(__file__).resolve().parents[2]
LEVELS = {
    "isolation": "read committed", "node_size": "small", "nodes": 3,
    "operation_size": 1, "replication": "off", "workload": "write",
}  # fmt: skip
ENTRY = {"hosts": ["db1", "db2:6433"], "port": 5433, "password_env": "YB_TEST_PW"}


def seed_rows():
    config = shipped_config()
    return study.load(config).rows


def all_combos(but=()):
    combos = {row.combination for row in seed_rows()}
    return {c: {"hosts": [f"{c}.example"]} for c in combos if c not in but}


def test_check_endpoints_names_runs_and_combination():
    config = {"existing": {"combinations": all_combos(but=("nodes3-small-reploff",))}}
    errors = existing.check_endpoints(existing.validate_section(config), seed_rows())
    assert errors == [
        "config/config.yaml: existing.combinations.nodes3-small-reploff: no endpoints; "
        "rows run03, run11 need them"
    ]


def test_check_endpoints_lists_every_missing_combination():
    errors = existing.check_endpoints(existing.validate_section({}), seed_rows())
    assert len(errors) == 8 and all("no endpoints" in e for e in errors)


def test_check_endpoints_server_settings_must_match_the_declared_ones():
    combos = all_combos()
    combos["nodes3-small-reploff"]["server"] = {"work_mem": "8MB"}
    errors = existing.check_endpoints(
        existing.validate_section({"existing": {"combinations": combos}}), seed_rows()
    )
    assert len(errors) == 1 and "nodes3-small-reploff.server: declares" in errors[0]


def test_check_endpoints_passes_and_fills_defaults():
    config = {"existing": {"combinations": all_combos()}}
    assert existing.check_endpoints(existing.validate_section(config), seed_rows()) == []
    settings = existing.validate_section(config)
    entry = settings["combinations"]["nodes3-small-reploff"]
    assert entry == {
        "hosts": ["nodes3-small-reploff.example"], "port": 5433, "database": "yugabyte",
        "user": "yugabyte", "password_env": "YB_PASSWORD", "server": {},
    }  # fmt: skip
    assert settings["table"] == "ybscale_kv"


def test_schema_errors_name_the_field():
    with pytest.raises(ValueError, match=r"existing.combinations.nodes3-small-reploff.port"):
        existing.validate_section(
            {"existing": {"combinations": {"nodes3-small-reploff": {"hosts": ["h"], "port": 0}}}}
        )
    with pytest.raises(ValueError, match=r"existing.table: 'drop table x' does not match"):
        existing.validate_section({"existing": {"table": "drop table x"}})


def test_load_generator_login_is_checked_and_completed():
    with pytest.raises(ValueError, match=r"existing.load_generator: 'host' is a required"):
        existing.validate_section({"existing": {"load_generator": {"user": "u", "key": "k"}}})
    login = {"host": "lg.example", "user": "ybscale", "key": "~/.ssh/id_ed25519"}
    settings = existing.validate_section({"existing": {"load_generator": login}})
    host = existing.load_generator(settings["load_generator"])
    assert (host.host, host.user, host.port) == ("lg.example", "ybscale", 22)
    assert host.key == Path.home() / ".ssh/id_ed25519"
    assert host.known_hosts == Path.home() / ".ssh/known_hosts"
    assert existing.validate_section({})["load_generator"] is None  # pgbench here


def test_endpoints_of_host_port():
    entry = existing.validate_section(
        {"existing": {"combinations": {"nodes3-small-reploff": ENTRY}}}
    )["combinations"]["nodes3-small-reploff"]
    eps = existing.endpoints_of(entry)
    assert [(e.host, e.port, e.role) for e in eps] == [
        ("db1", 5433, "node0"),
        ("db2", 6433, "node1"),
    ]
    assert eps[0].password_env == "YB_TEST_PW" and eps[0].dbname == "yugabyte"


def test_dataset_sql_and_rename():
    sql = ysql.dataset_sql(1000, "ybscale_kv", "range", 3)
    assert "PRIMARY KEY (k ASC)) SPLIT AT VALUES ((1000000000000), (2000000000000));" in sql
    assert "generate_series(0, 999, 1)" in sql
    assert "CREATE SEQUENCE ybscale_kv_new_key CACHE 1000;" in sql
    assert "SPLIT INTO 5 TABLETS" in ysql.dataset_sql(10, "kv", "hash", 5)
    assert "PRIMARY KEY (k));" in ysql.dataset_sql(10, "kv", "none", 5)
    script = (ROOT / "workloads" / "write.sql").read_text()
    renamed = ysql.rename_table(script, "ybscale_kv")
    assert "INSERT INTO ybscale_kv (k, v)" in renamed and "nextval('ybscale_kv_new_key')" in renamed
    assert " kv " not in renamed and ysql.rename_table(script, "kv") == script


class FakeRunner:
    """Answers psql like YugabyteDB would; `effective` is what the isolation function returns."""

    def __init__(self, effective="read committed", has_function=True, down=()):
        self.effective, self.has_function, self.down = effective, has_function, set(down)
        self.version = "PostgreSQL 11.2-YB-2024.2.1.0-b0"
        self.sql: list[tuple[str, str, dict]] = []

    where = "a fake load generator"

    def facts(self, pgbench):
        return {"cores": 48, "pgbench_version": "pgbench (PostgreSQL) 16.4"}

    def clock_offset(self):
        return ClockOffset(0.25, 0.001, 5)

    def psql(self, endpoint, sql, env, timeout):
        self.sql.append((endpoint.host, sql, dict(env)))
        if endpoint.host in self.down:
            raise BackendError("connection refused")
        if "yb_get_effective" in sql:
            if not self.has_function:
                raise BackendError("function does not exist")
            return self.effective + "\n"
        if "SHOW transaction_isolation" in sql:
            return "read committed\n"
        if sql == "SELECT 1":
            return "1\n"
        if "yb_table_properties" in sql or "yb_servers()" in sql:
            return "3\n"
        if "yb_local_tablets" in sql:
            return "1\n"
        if "to_regclass" in sql:
            return "f\n"
        if "SELECT count(*) FROM" in sql and "k >= " in sql:  # rows added per range bucket
            return "".join(f"{7 * b}\n" for b in range(sql.count("SELECT count(*)")))
        if "version()" in sql:
            return self.version + "\n"
        return ""


def cluster(runner, levels=LEVELS, n=3):
    eps = [Endpoint(f"10.0.0.{i}", 5433, "yugabyte", "yugabyte", "YB_TEST_PW", f"tserver{i}")
           for i in range(n)]  # fmt: skip
    row = row_from_levels(levels, 1000)
    return ysql.YsqlCluster(eps, row, runner, table="ybscale_kv", sharding="range")


def test_targets_cover_every_node():
    """Range: node i works in range bucket i (split point i * BUCKET); hash: every key."""
    c = cluster(FakeRunner())
    targets = c.targets("write")
    assert [t.endpoint.role for t in targets] == ["tserver0", "tserver1", "tserver2"]
    assert [t.variables for t in targets] == [
        {"shard": b * ysql.BUCKET, "nshards": 1, "shard_rows": n, "keybase": n}
        for b, n in enumerate([334, 333, 333])
    ]
    c.sharding = "hash"
    assert all(t.variables == {"shard": 0, "nshards": 1, "shard_rows": 1000, "keybase": 1000}
               for t in c.targets("read"))  # fmt: skip


def test_applied_reads_back_isolation(monkeypatch):
    monkeypatch.setenv("YB_TEST_PW", "s3cret")
    runner = FakeRunner()
    applied = cluster(runner).applied()
    assert set(applied["isolation_in_effect"].values()) == {"read committed"}
    assert applied["isolation_source"] == ["yb_get_effective_transaction_isolation_level()"]
    host, sql, env = next(q for q in runner.sql if "yb_get_effective" in q[1])
    assert env["PGOPTIONS"] == r"-c default_transaction_isolation=read\ committed"
    assert env["PGPASSWORD"] == "s3cret"


def test_applied_mismatch_fails():
    # YugabyteDB without --yb_enable_read_committed_isolation runs READ COMMITTED as snapshot
    with pytest.raises(BackendError, match="differs from the design's 'read committed'"):
        cluster(FakeRunner(effective="repeatable read")).applied()


def test_check_names_every_failed_node():
    with pytest.raises(BackendError) as err:
        cluster(FakeRunner(down={"10.0.0.1", "10.0.0.2"})).check()
    assert "tserver1 (10.0.0.1:5433)" in str(err.value) and "tserver2" in str(err.value)
    cluster(FakeRunner()).check()


def test_reset_loads_writes_every_time_reads_once():
    """An INSERT-only write script (write.sql): loaded once, then restored (the added keys
    deleted); reads: loaded once. A script that changes loaded rows: loaded every time."""
    runner = FakeRunner()
    c = cluster(runner)
    assert [c.reset("write") for _ in range(3)] == ["reloaded", "restored", "restored"]
    assert sum("DROP TABLE IF EXISTS ybscale_kv" in s for _, s, _ in runner.sql) == 1
    restores = [s for _, s, _ in runner.sql if "DELETE FROM ybscale_kv" in s]
    assert len(restores) == 2 and "VACUUM" not in restores[0]  # YugabyteDB ignores VACUUM
    # one DELETE per range (below 0, each bucket's added keys, past the last bucket), each
    # under the session's statement_timeout
    assert restores[0].startswith(f"SET statement_timeout = {ysql.LOAD_TIMEOUT * 1000};\n")
    assert restores[0].count("DELETE FROM") == 3 + 2 and " OR " not in restores[0]
    assert c.inserted == [{"tablet0": 0, "tablet1": 7, "tablet2": 14}] * 2
    c.restorable = lambda: False  # e.g. an UPDATE of loaded keys
    c.reset("write")
    assert sum("DROP TABLE IF EXISTS ybscale_kv" in s for _, s, _ in runner.sql) == 2
    runner = FakeRunner()
    c = cluster(runner, {**LEVELS, "workload": "read"})
    for _ in range(3):
        c.reset("read")
    assert sum("DROP TABLE" in s for _, s, _ in runner.sql) == 1


def test_load_chunks_cover_every_row_once():
    """10 rows, 3 loaders, chunks of 2: the ranges 0-3, 4-6, 7-9 (10 = 3 x 3 + 1: the first
    range one row longer), each cut into slices of 2; fewer rows than loaders: one each."""
    assert ysql.load_chunks(10, 3, 2) == [[(0, 1), (2, 3)], [(4, 5), (6, 6)], [(7, 8), (9, 9)]]
    assert ysql.load_chunks(2, 3, 5) == [[(0, 0)], [(1, 1)], []]
    assert ysql.load_chunks(3000, 3, 250)[2][-1] == (2750, 2999)
    for rows, loaders, chunk in [(1, 1, 1), (10, 4, 3), (1000, 3, 7), (99, 8, 100)]:
        covered = [k for chunks in ysql.load_chunks(rows, loaders, chunk)
                   for first, last in chunks for k in range(first, last + 1)]  # fmt: skip
        assert covered == list(range(rows))
        assert all(last - first < chunk for chunks in ysql.load_chunks(rows, loaders, chunk)
                   for first, last in chunks)  # fmt: skip
    # 2^20-byte values: 64 MiB / 1 MiB = 64 rows a chunk; 32-byte ones: the setting
    assert ysql.chunk_rows_for(100_000, 2**20) == 64
    assert ysql.chunk_rows_for(100_000, 32) == 100_000
    sql = ysql.chunk_sql("kv", 4, 5, "range", 3, 32)
    assert sql.startswith(f"SET statement_timeout = {ysql.CHUNK_TIMEOUT * 1000};\n")
    assert f"SELECT (k % 3) * {ysql.BUCKET} + k / 3 AS key FROM generate_series(4, 5, 1)" in sql
    assert "SELECT k AS key FROM generate_series(4, 5, 1)" in ysql.chunk_sql("kv", 4, 5, "hash", 3)


def _loader_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("ybscale-loader")]


def test_a_failing_loader_stops_the_others_before_their_next_chunk():
    import threading

    ran, started = [], threading.Event()

    def chunk(loader, i, fail=False):
        def step():
            if loader == 0 and i == 0:
                started.wait(5)  # loader 1 fails while loader 0's first chunk runs
            if fail:
                started.set()
                raise BackendError("chunk 1.0 failed")
            ran.append((loader, i))

        return step

    loaders = [[chunk(0, i) for i in range(5)], [chunk(1, 0, fail=True), chunk(1, 1)]]
    with pytest.raises(BackendError, match="chunk 1.0 failed"):
        ysql.run_loaders(loaders)
    assert ran == [(0, 0)] and not _loader_threads()  # the chunk under way ended, no more


def test_ctrl_c_while_loading_stops_every_loader():
    """A real SIGINT to this process while the loaders run: KeyboardInterrupt here, the step
    each loader had under way ended, no loader started another, none left running. Each step
    waits until the interrupt has reached this thread (its handler ran), then lasts 0.2 s more:
    what is asserted is the mechanism, not how soon a busy machine schedules the signal."""
    import signal
    import threading

    ran, lock, interrupted = [], threading.Lock(), threading.Event()

    def handler(signum, frame):
        interrupted.set()
        raise KeyboardInterrupt

    def step(loader, i):
        def run():
            if (loader, i) == (0, 0):
                os.kill(os.getpid(), signal.SIGINT)
            assert interrupted.wait(60), "the SIGINT never reached the main thread"
            time.sleep(0.2)
            with lock:
                ran.append((loader, i))

        return run

    previous = signal.signal(signal.SIGINT, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            ysql.run_loaders([[step(n, i) for i in range(20)] for n in range(3)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (0, 0) in ran and all(i == 0 for _, i in ran), ran  # the steps under way, no more
    assert not _loader_threads()


def test_the_load_is_recorded_in_applied():
    """The row's first load: in applied()'s `dataset` (the same dict: applied() is read before
    the first reset), chunked per loader over the endpoints; a reload does not replace it."""
    runner = FakeRunner()
    c = cluster(runner)
    c.loaders, c.chunk_rows = 3, 100
    applied = c.applied()
    assert applied["dataset"] == {}
    c.restorable = lambda: False
    assert [c.reset("write") for _ in range(2)] == ["reloaded", "reloaded"]
    assert applied["dataset"] is c.dataset
    assert {k: c.dataset[k] for k in ("how", "rows", "loaders", "chunk_rows")} == {
        "how": "loaded", "rows": 1000, "loaders": 3, "chunk_rows": 100}  # fmt: skip
    inserts = [(host, sql) for host, sql, _ in runner.sql if "INSERT INTO" in sql]
    assert len(inserts) == 2 * (4 + 4 + 4)  # 334, 333, 333 rows in chunks of 100, twice
    assert {host for host, _ in inserts} == {"10.0.0.0", "10.0.0.1", "10.0.0.2"}
    assert sum("ANALYZE ybscale_kv" in s for _, s, _ in runner.sql) == 2


def _fake_exe(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_local_runner_runs_pgbench_here_on_the_renamed_script(tmp_path):
    fake = _fake_exe(
        tmp_path / "pgbench",
        "import os, sys\nargs = sys.argv[1:]\n"
        "print(open(args[args.index('-f') + 1]).read())\nprint(os.environ['PGOPTIONS'])\n",
    )
    runner = ysql.LocalRunner("ybscale_kv")
    command = PgbenchCommand(
        scripts=(ROOT / "workloads" / "write.sql",),
        endpoint=Endpoint("db1", 5433, "yugabyte", "yugabyte"),
        clients=1,
        threads=1,
        seconds=1,
        variables={},
        env={"PGOPTIONS": "-c x=y"},
        workdir=tmp_path,
        timeout=10,
    )
    proc = runner.popen(command, str(fake))
    assert os.getpgid(proc.pid) == proc.pid  # its own process group: bench may killpg it
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "INSERT INTO ybscale_kv" in out and out.strip().endswith("-c x=y")


def test_local_runner_psql(tmp_path, monkeypatch):
    fake = _fake_exe(
        tmp_path / "psql",
        "import os, sys\nsql = sys.stdin.read()\n"
        "if 'fail' in sql:\n    sys.stderr.write('ERROR: boom'); sys.exit(3)\n"
        "print(' '.join(sys.argv[1:]), os.environ.get('PGPASSWORD'), sql)\n",
    )
    runner = ysql.LocalRunner("ybscale_kv", psql=str(fake))
    ep = Endpoint("db1", 5433, "yugabyte", "yugabyte")
    out = runner.psql(ep, "SELECT 1", {"PGPASSWORD": "pw"}, 10)
    assert "-h db1 -p 5433 -U yugabyte -d yugabyte -f -" in out and "pw SELECT 1" in out
    assert "ON_ERROR_STOP=1" in out
    with pytest.raises(BackendError, match="exited 3: ERROR: boom"):
        runner.psql(ep, "fail", {}, 10)


def test_backend_never_creates_anything(tmp_path):
    config = {"existing": {"combinations": {"nodes3-small-reploff": ENTRY}}}
    backend = existing.ExistingBackend(config)
    row = row_from_levels(LEVELS, 1000)
    entry = backend.settings["combinations"][row.combination]  # defaults filled
    endpoints = {"combination": row.combination, "endpoints": entry}  # what `up` returns
    with backend.measure(row, endpoints, tmp_path) as c:
        assert [e.host for e in c.endpoints] == ["db1", "db2"]
        assert c.table == "ybscale_kv"
    assert backend.down(endpoints, tmp_path) == {"nothing": "the endpoints are yours"}
    assert list(tmp_path.iterdir()) == []
    five = row_from_levels({**LEVELS, "nodes": 5}, 1000)
    with pytest.raises(BackendError, match="existing.combinations.nodes5-small-reploff"):
        backend.up(five.combination, backend.definition(config, [five]), tmp_path)


def test_up_checks_that_every_endpoint_answers(postgres, tmp_path):
    """`up` starts nothing: it asks each endpoint for SELECT 1, and names the one that does
    not answer (a real server, and a port where nothing listens)."""
    from ybscale.backends.local.cluster import free_port

    node, runner = postgres
    live = {"hosts": [f"127.0.0.1:{node.port}"], "port": 1, "database": "postgres",
            "user": "postgres"}  # fmt: skip
    config = {"existing": {"combinations": {"nodes1-small-reploff": live},
                           "psql": runner.psql_exe}}  # fmt: skip
    backend = existing.ExistingBackend(config)
    row = row_from_levels({**LEVELS, "nodes": 1}, 10)
    endpoints = backend.up(row.combination, backend.definition(config, [row]), tmp_path)
    assert endpoints["endpoints"]["hosts"] == live["hosts"]
    dead = free_port()
    config["existing"]["combinations"]["nodes1-small-reploff"] = {
        **live, "hosts": [f"127.0.0.1:{node.port}", f"127.0.0.1:{dead}"]}  # fmt: skip
    with pytest.raises(BackendError, match=f"not reachable: 127.0.0.1:{dead}: "):
        backend.up(row.combination, backend.definition(config, [row]), tmp_path)


# ------------------------------------------------------------ issue 9: layout, spread, isolation


def test_reset_recreates_the_table_instead_of_truncating_it():
    """YugabyteDB >= 2024.1 TRUNCATE rewrites the table with the default tablet count."""
    sql = ysql.dataset_sql(3000, "ybscale_kv", "range", 3)
    assert "TRUNCATE" not in sql
    assert sql.index("DROP TABLE IF EXISTS ybscale_kv;") < sql.index("CREATE TABLE ybscale_kv")
    assert "DROP SEQUENCE IF EXISTS ybscale_kv_new_key;" in sql
    assert "SPLIT AT VALUES ((1000000000000), (2000000000000));" in sql
    assert "TRUNCATE" not in ysql.dataset_sql(10, "kv", "hash", 5)


def test_isolation_on_yugabyte_never_falls_back_to_show():
    """SHOW transaction_isolation says read committed while YugabyteDB runs snapshot."""
    with pytest.raises(BackendError, match="cannot read the isolation level in effect on Yugab"):
        cluster(FakeRunner(has_function=False)).applied()


def test_isolation_on_postgresql_is_read_with_show():
    runner = FakeRunner(has_function=False)
    runner.version = "PostgreSQL 15.8 (Debian 15.8-0+deb12u1)"
    applied = cluster(runner).applied()
    assert applied["isolation_source"] == ["SHOW transaction_isolation"]


@pytest.fixture(scope="module")
def postgres(tmp_path_factory, template):
    """A real PostgreSQL server (the local backend's, one node) and a psql LocalRunner."""
    from ybscale.backends.local import LocalBackend, find_bindir

    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path_factory.mktemp("pg")
    root = seed(Path(tempfile.mkdtemp(prefix="ybscale-test-", dir=base)), template)
    root.chmod(0o755)
    backend = LocalBackend(settings_with(local={"data_root": str(root), "cpu_mechanism": "none"}))
    levels = {**LEVELS, "nodes": 1, "replication": "off"}
    try:
        with backend.cluster(row_from_levels(levels, 10), tmp_path_factory.mktemp("work")) as local:
            yield local.nodes[0], ysql.LocalRunner("kv", psql=str(find_bindir() / "psql"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def stub_cluster(postgres, tablets, leaders=None, tservers=3, name="t", series=None, rf=1,
                 one_database=False):  # fmt: skip
    """A YsqlCluster over `tservers` databases carrying YugabyteDB `series`'s views and functions
    (stand-ins generated from the vendored catalogue; each database is one tserver).

    tablets: a number (spread by stubs.tablets_sql with replication factor `rf`), or per
    tserver i the tablet ids it holds (every tserver sees the whole tablet list); leaders: tablet
    id -> leader address. series: 2026.1 (has yb_tablet_metadata) when leaders are given, else
    2024.2 (has none: the leaders come from yb_local_tablets). one_database: every tserver's
    endpoint is the first's database (as on YugabyteDB, every endpoint serves the same table;
    each then reports the first tserver's replicas).
    """
    node, runner = postgres
    series = series or ("2026.1" if leaders is not None else "2024.2")
    servers = [f"10.0.0.{i + 1}:5433" for i in range(tservers)]
    if isinstance(tablets, int):
        data = stubs.tablets_sql("kv", tablets, servers, replication_factor=rf)
    else:
        rows = []
        for t in sorted({t for held in tablets for t in held}):
            replicas = [servers[i] for i in range(tservers) if t in tablets[i]]
            leader = (leaders or {}).get(t, replicas[0] if replicas else "")
            rows.append(f"('{t}', current_database(), 'kv', '{leader}', ARRAY{replicas!r}::text[])")
        data = ("INSERT INTO yb_stub.tablets (tablet_id, db_name, table_name, leader, replicas)"
                f" VALUES {', '.join(rows)};\n") if rows else ""  # fmt: skip
    eps = []
    for i in range(tservers):
        if one_database and i:
            eps.append(dataclasses.replace(eps[0], role=f"tserver{i}"))
            continue
        db = f"{name}{i}"
        node.psql(f"DROP DATABASE IF EXISTS {db}")
        node.psql(f"CREATE DATABASE {db}")
        ep = Endpoint(node.endpoint.host, node.endpoint.port, db, "postgres", None, f"tserver{i}")
        sql = stubs.stub_sql(series, servers=servers, node=i)
        sql += "CREATE TABLE kv (k bigint PRIMARY KEY, v text);\n" + data
        runner.psql(ep, sql, {}, 60)
        eps.append(ep)
    row = row_from_levels(LEVELS, 3000)
    return ysql.YsqlCluster(eps, row, runner, sharding="range", layout_timeout=0)


@pytest.mark.parametrize(("series", "rf"), [("2024.2", 1), ("2026.1", 3)])
def test_tablets_spread_by_the_stand_in_generator_pass_the_layout_check(postgres, series, rf):
    c = stub_cluster(postgres, 6, series=series, rf=rf, name=f"spread{rf}_")
    layout = c.check_layout()
    assert layout["tablets"] == 6
    assert list(layout["replicas_per_node"].values()) == [2 * rf] * 3
    assert sorted(layout["leaders_per_node"].values()) == [2, 2, 2]


def test_layout_with_one_tablet_fails_the_row(postgres):
    """What TRUNCATE leaves behind on YugabyteDB >= 2024.1: one tablet on one tserver."""
    c = stub_cluster(postgres, [["a"], [], []])
    with pytest.raises(BackendError) as err:
        c.check_layout()
    msg = str(err.value)
    assert "table kv (range sharding) is not spread over the tservers" in msg
    assert "1 tablet(s) for 3 tservers" in msg
    assert "no replica of kv on tserver1 (127.0.0.1:" in msg


def test_layout_with_leaders_on_one_tserver_fails(postgres):
    tablets = ["a", "b", "c"]
    c = stub_cluster(postgres, [tablets] * 3, leaders=dict.fromkeys(tablets, "10.0.0.1:9100"))
    with pytest.raises(BackendError, match="tablet leaders on fewer than 3 tservers"):
        c.check_layout()


def test_good_layout_is_recorded(postgres):
    leaders = {"a": "10.0.0.1:9100", "b": "10.0.0.2:9100", "c": "10.0.0.3:9100"}
    c = stub_cluster(postgres, [["a", "b", "c"]] * 3, leaders=leaders)
    layout = c.check_layout()
    assert layout["tablets"] == 3 and set(layout["replicas_per_node"].values()) == {3}
    assert layout["leaders_per_node"] == dict.fromkeys(leaders.values(), 1)
    # replication off and no yb_tablet_metadata (YugabyteDB 2024.x): the only replica leads
    c = stub_cluster(postgres, [["a"], ["b"], ["c"]], name="rf1_")
    layout = c.check_layout()
    assert layout["leaders_source"].startswith("yb_local_tablets")
    assert list(layout["leaders_per_node"].values()) == [1, 1, 1]
    assert c.applied()["tablet_layout"] is c.layouts


def test_a_tablet_split_while_a_row_measures_fails_it_naming_when(postgres):
    """Issue 36: the layout was checked only after each reload, so a split during a
    measurement changed the numbers unseen. After each repetition the tablets and leaders are
    read again (recorded in measurement.json) and a changed tablet count fails the row."""
    c = stub_cluster(postgres, [["a", "b", "c"]] * 3, name="split")
    c.layouts.append(c.check_layout())  # what the reload found
    c.verify_layout("after 4 clients, repetition 1")
    assert [(r["when"], r["tablets"]) for r in c.applied()["tablet_layout_after_repetitions"]] == [
        ("after 4 clients, repetition 1", 3)
    ]  # fmt: skip
    node, runner = postgres
    replicas = "ARRAY['10.0.0.1:5433', '10.0.0.2:5433', '10.0.0.3:5433']::text[]"
    split_off = (
        "INSERT INTO yb_stub.tablets (tablet_id, db_name, table_name, leader, replicas) "
        f"VALUES ('d', current_database(), 'kv', '10.0.0.1:5433', {replicas})"
    )
    for ep in c.endpoints:  # tablet c splits into c and d on every tserver
        runner.psql(ep, split_off, {}, 60)
    with pytest.raises(BackendError) as split:
        c.verify_layout("after 8 clients, repetition 2")
    assert str(split.value).startswith(
        "table kv has 4 tablets after 8 clients, repetition 2, 3 after its reload: a tablet split "
        "while the row measured"
    )
    assert len(c.recounted) == 2 and c.recounted[-1]["tablets"] == 4


@pytest.mark.parametrize("series", yb_catalogue.SUPPORTED)
def test_layout_query_runs_on_the_stand_ins_of_every_supported_series(postgres, series):
    """Issue 20, blocker 1: 2024.2's yb_local_tablets has no `state` column, so the layout
    query is built from the columns the server has (read from pg_attribute)."""
    leaders = {"a": "10.0.0.1:5433", "b": "10.0.0.2:5433", "c": "10.0.0.3:5433"}
    c = stub_cluster(postgres, [["a"], ["b"], ["c"]], leaders=leaders, series=series,
                     name=f"s{series.replace('.', '_')}_")  # fmt: skip
    layout = c.check_layout()
    assert layout["tablets"] == 3
    assert list(layout["replicas_per_node"].values()) == [1, 1, 1]
    assert layout["local_columns_source"] == "server (pg_attribute)"
    has_state = "state" in yb_catalogue.columns(series, "yb_local_tablets")
    assert has_state == (series != "2024.2")
    assert layout["replicas_counted"].startswith("state = " if has_state else "every state")
    has_metadata = "yb_tablet_metadata" in yb_catalogue.load(series)["objects"]
    assert layout["leaders_source"].startswith(
        "yb_tablet_metadata" if has_metadata else "yb_local_tablets"
    )
    assert sorted(layout["leaders_per_node"].values()) == [1, 1, 1]


def test_a_replica_that_is_not_ready_does_not_count_where_the_view_has_a_state(postgres):
    c = stub_cluster(postgres, [["a"], ["b"], ["c"]], series="2026.1", name="tomb")
    for ep in c.endpoints:
        c.runner.psql(ep, "UPDATE yb_stub.tablets SET state = 'TABLET_DATA_TOMBSTONED' "
                          "WHERE tablet_id = 'b'", {}, 30)  # fmt: skip
    with pytest.raises(BackendError, match="no replica of kv on tserver1"):
        c.check_layout()


@pytest.mark.parametrize("series", yb_catalogue.SUPPORTED)
def test_stand_ins_have_exactly_the_catalogue_definitions(postgres, series):
    """What the generated stand-ins define on PostgreSQL 15 is the catalogue, column for column."""
    c = stub_cluster(postgres, [["a"]], tservers=1, series=series, name=f"def{series[:4]}_")
    catalogue = yb_catalogue.load(series)["objects"]
    for name, obj in catalogue.items():
        if obj["kind"] == "view":
            sql = (
                f"SELECT attname || ':' || format_type(atttypid, atttypmod) FROM pg_attribute"
                f" WHERE attrelid = '{name}'::regclass AND attnum > 0 ORDER BY attnum"
            )
        else:
            sql = (
                "SELECT unnest(proargnames) || ':' || format_type(unnest(proallargtypes), NULL)"
                f" FROM pg_proc WHERE proname = '{name}' AND proallargtypes IS NOT NULL"
            )
        found = c.psql(sql).split()
        want = [f"{n}:{t}" for n, t in obj.get("arguments", []) + obj.get("columns", [])]
        assert found == want, name
    assert ysql.is_yugabyte(c.server_version())


def test_without_the_view_the_columns_come_from_the_catalogue_of_the_server_version(postgres):
    c = stub_cluster(postgres, [["a"]], tservers=1, name="nocols")
    c.psql("DROP VIEW yb_local_tablets")
    columns, source = c.view_columns("yb_local_tablets")
    assert columns == yb_catalogue.columns("2024.2", "yb_local_tablets")
    assert source == "catalogue 2024.2 (2024.2.1.0-b185)"
    c._columns.clear()
    c._version = "PostgreSQL 11.2-YB-2.20.8.0-b0"
    with pytest.raises(BackendError, match="no YugabyteDB catalogue for series '2.20'"):
        c.view_columns("yb_local_tablets")


@pytest.mark.parametrize("schema", ["ysql.dataset_sql", "workload.SCHEMA_SQL"])
def test_a_100_row_insert_visits_the_new_key_sequence_once_not_per_row(postgres, schema):
    """Issue 20, item 6: real pgbench runs the real write script (one 100-row INSERT) against
    the sequence as the ysql backends (dataset_sql) and the local one (SCHEMA_SQL) create it;
    PostgreSQL counts every visit to the sequence's block in pg_statio_user_sequences."""
    from ybscale.backends.local import find_bindir
    from ybscale.design import workload

    node, runner = postgres
    db = f"seq_{schema.split('.')[0]}"
    node.psql(f"DROP DATABASE IF EXISTS {db}")
    node.psql(f"CREATE DATABASE {db}")
    ep = Endpoint(node.endpoint.host, node.endpoint.port, db, "postgres", None, "tserver0")
    runner.psql(ep, ysql.dataset_sql(10) if schema.startswith("ysql") else workload.SCHEMA_SQL,
                {}, 60)  # fmt: skip
    argv = [str(find_bindir() / "pgbench"), "-n", "-t", "1", "-f",
            str(ROOT / "workloads" / "write.sql"), "-h", ep.host, "-p", str(ep.port),
            "-U", "postgres", "-Drows=100", "-Dkeybase=10", "-Dnshards=1", "-Dshard=0",
            "-Dvalue_bytes=32",
            db]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    visits = "0"
    for _ in range(50):  # the pgbench session's statistics arrive when its backend exits
        visits = runner.psql(ep, "SELECT blks_hit + blks_read FROM pg_statio_user_sequences "
                                 "WHERE relname = 'kv_new_key'", {}, 30).strip()  # fmt: skip
        if visits != "0":
            break
        time.sleep(0.2)
    assert runner.psql(ep, "SELECT count(*) FROM kv WHERE k >= 10", {}, 30).strip() == "100"
    assert 1 <= int(visits) <= 2, f"{visits} visits to the sequence for 100 new keys"


def test_new_keys_are_spread_over_the_range_tablets(postgres, tmp_path, monkeypatch):
    """Real pgbench, the real write scripts, the range layout's keys (SPLIT clause left out,
    PostgreSQL has none): every bucket = tablet receives the inserts of its clients.

    The dataset loaded as reset loads it (issue 48): 3 loaders at once, one through each
    endpoint, in chunks of 250 rows: exactly the keys (i mod 3) * BUCKET + i / 3 of rows
    0..2999, each valued md5(key) (32 bytes), and the load recorded as local's is."""
    from ybscale.backends.gcp.plan import measured_loads
    from ybscale.backends.local import find_bindir
    from ybscale.report.dataset_text import loads_text

    c = stub_cluster(postgres, [["a"], ["b"], ["c"]], name="spread", one_database=True)
    created = ysql.create_sql

    def on_postgresql(*args):
        sql = created(*args)
        return re.sub(r" SPLIT AT VALUES \(.*?\)\);", ";", sql).replace("(k ASC)", "(k)")

    monkeypatch.setattr(ysql, "create_sql", on_postgresql)
    c.loaders, c.chunk_rows = 3, 250
    chunks, psql = [], c.runner.psql

    def seen(endpoint, sql, env, timeout):
        if "INSERT" in sql:
            chunks.append((endpoint.role, timeout))
        return psql(endpoint, sql, env, timeout)

    monkeypatch.setattr(c.runner, "psql", seen)
    assert c.reset("write") == "reloaded"
    timeout = ysql.CHUNK_TIMEOUT + 30  # per chunk, not per dataset
    assert sorted(chunks) == [(f"tserver{i}", timeout) for i in range(3) for _ in range(4)]
    keys = (f"SELECT count(*) FROM generate_series(0, 2999) AS i JOIN kv "
            f"ON kv.k = (i % 3) * {ysql.BUCKET} + i / 3 AND kv.v = md5(kv.k::text)")  # fmt: skip
    assert c.psql(keys).strip() == "3000"
    assert c.psql("SELECT count(*), min(length(v)), max(length(v)) FROM kv").strip() == "3000|32|32"
    assert {k: c.dataset[k] for k in ("how", "rows", "loaders", "chunk_rows")} == {
        "how": "loaded", "rows": 3000, "loaders": 3, "chunk_rows": 250}  # fmt: skip
    assert c.dataset["seconds"] > 0 and c.dataset["rows_per_second"] > 0
    # measurement.json's `applied.dataset`, as `ybscale plan` and the findings read it
    run = tmp_path / "results" / "runs" / "run01"
    run.mkdir(parents=True)
    applied = {"backend": "existing", "dataset": c.dataset}
    (run / "measurement.json").write_text(json.dumps({"run": "run01", "applied": applied}))
    [load] = measured_loads(tmp_path / "results")
    assert (load["backend"], load["rows"]) == ("existing", 3000)
    assert loads_text({"run01": {"applied": applied}}).startswith("3,000 rows loaded once (run01)")
    assert c.restorable()  # write.sql only inserts new keys
    for per_tx in (1, 100):
        for target in c.targets("write"):
            argv = [str(find_bindir() / "pgbench"), "-n", "-t", "4", "-f",
                    str(ROOT / "workloads" / "write.sql"), "-h", target.endpoint.host,
                    "-p", str(target.endpoint.port), "-U", "postgres",
                    f"-Drows={per_tx}", "-Dvalue_bytes=32"]  # fmt: skip
            argv += [f"-D{k}={v}" for k, v in target.variables.items()]
            done = subprocess.run(argv + [c.endpoints[0].dbname], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        assert c.inserted_per_bucket() == {f"tablet{b}": 4 * per_tx for b in range(3)}
        # restored, not reloaded (issue 48): the added keys deleted, the loaded ones kept,
        # counted per bucket first
        before = c.psql("SELECT sum(k), count(*) FROM kv WHERE v = md5(k::text)")
        assert c.reset("write") == "restored"
        assert c.inserted[-1] == {f"tablet{b}": 4 * per_tx for b in range(3)}
        assert c.psql("SELECT sum(k), count(*) FROM kv") == before
        assert before.strip().endswith("|3000")
    # every bucket's keys lie inside its own split range
    out = c.psql(f"SELECT min(k / {ysql.BUCKET}), max(k / {ysql.BUCKET}) FROM kv")
    assert out.strip() == "0|2"


def on_postgresql(created):
    """`ysql.create_sql` as a stand-in PostgreSQL takes it: no SPLIT clause, no ASC or HASH
    in the primary key (a btree either way); no autovacuum's ANALYZE of the table between
    the load's and the next (YugabyteDB 2024.2 runs no Auto Analyze service unless its flags
    enable it: on by default only from v2025.2, docs.yugabyte.com additional-features/
    auto-analyze), so its plans follow the load's statistics alone."""

    def create(*args):
        sql = re.sub(r" SPLIT (AT VALUES \(.*?\)\)|INTO \d+ TABLETS)", "", created(*args))
        table = re.search(r"CREATE TABLE (\w+)", sql).group(1)
        sql += f"ALTER TABLE {table} SET (autovacuum_enabled = off);\n"
        return sql.replace("(k ASC)", "(k)").replace("(k HASH)", "(k)")

    return create


def write_repetition(c, per_tx: int, transactions: int = 4) -> None:
    """Real pgbench running the real write.sql on every target of `c`, as a repetition does."""
    from ybscale.backends.local import find_bindir

    for target in c.targets("write"):
        argv = [str(find_bindir() / "pgbench"), "-n", "-t", str(transactions), "-f",
                str(ROOT / "workloads" / "write.sql"), "-h", target.endpoint.host,
                "-p", str(target.endpoint.port), "-U", "postgres",
                f"-Drows={per_tx}", "-Dvalue_bytes=32"]  # fmt: skip
        argv += [f"-D{k}={v}" for k, v in target.variables.items()]
        done = subprocess.run(argv + [c.endpoints[0].dbname], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("sharding", ["range", "hash"])
def test_maintenance_statements_reach_the_added_rows_by_the_key(postgres, monkeypatch, sharding):
    """YugabyteDB 2024.2 plans with bitmap scans off (tests/scans.py): every statement the
    restore and its count send, EXPLAINed so on the stand-in PostgreSQL, reaches its rows by
    an index (a range of an ordered key, keys of the new-key sequence on hashed ones), none
    by a scan of the whole table; the dataset comes back to its loaded rows each time."""
    from scans import Explaining, explain, scans_whole

    c = stub_cluster(postgres, [["a"], ["b"], ["c"]], name=f"scan_{sharding}", one_database=True)
    c.sharding = sharding
    monkeypatch.setattr(ysql, "create_sql", on_postgresql(ysql.create_sql))
    c.runner = explaining = Explaining(c.runner, hashed=sharding == "hash")
    assert c.reset("write") == "reloaded"
    loaded = c.psql("SELECT sum(k), count(*) FROM kv").strip()
    assert loaded.endswith("|3000")
    for per_tx in (1, 100):
        write_repetition(c, per_tx)
        with explaining.checking():  # what the code sends, not this test's own checks
            assert c.reset("write") == "restored"
        assert c.psql("SELECT sum(k), count(*) FROM kv").strip() == loaded
    assert explaining.whole == []
    deletes = [s for s, _ in explaining.explained if s.startswith("DELETE")]
    if sharding == "range":  # one per bucket, below 0 and past the last bucket; twice
        assert c.inserted == [{f"tablet{b}": 4 * n for b in range(3)} for n in (1, 100)]
        assert len(deletes) == 2 * (3 + 2)
        assert [r["by"] for r in c.restores] == ["key ranges"] * 2
    else:  # the sequence's keys given out since the last restore, each once
        assert len(deletes) == 2 and all("= ANY(" in s for s in deletes)
        assert [r["by"] for r in c.restores] == ["new-key sequence"] * 2
        assert c.restores[1]["new_keys"] >= 3 * 4 * 100
    assert all(r["seconds"] >= 0 for r in c.restores)
    # the check can fail: the shapes the restore and its count had (a count with no WHERE, a
    # top-level OR of key ranges) read the whole table with bitmap scans off
    for before in (f"SELECT k / {ysql.BUCKET}, count(*) FROM kv GROUP BY 1 ORDER BY 1",
                   "DELETE FROM kv WHERE k >= 3000 OR k < 0"):  # fmt: skip
        assert scans_whole(explain(explaining.runner, c.endpoints[0], before), "kv"), before
    # and a range of k alone is an index range on ordered keys, every tablet on hashed ones
    plan = explain(explaining.runner, c.endpoints[0], "DELETE FROM kv WHERE k >= 3000")
    assert scans_whole(plan, "kv", hashed=True) and not scans_whole(plan, "kv"), plan


class TakesYugabyteDDL:
    """A Runner whose psql passes its SQL through tests/yb_ddl.py first, as the loopback load
    generator's psql does (tests/stand_in_bin/psql)."""

    def __init__(self, runner):
        self.runner = runner

    def __getattr__(self, name):
        return getattr(self.runner, name)

    def psql(self, endpoint, sql, env, timeout):
        import yb_ddl

        return self.runner.psql(endpoint, yb_ddl.translate(sql), env, timeout)


@pytest.mark.parametrize("sharding", ["range", "hash"])
def test_the_stand_in_takes_yugabytedbs_ddl_and_answers_its_layout(postgres, sharding):
    """The rehearsal's stand-in tservers on both shardings (tests/yb_ddl.py): `create_sql`'s
    SPLIT AT VALUES / SPLIT INTO n TABLETS make a PostgreSQL table and its tablets in the
    stand-in catalogue, one per tserver, led by tserver t mod n, so the layout check after a
    load passes (3 tablets, a leader on each of the 3 tservers); a reload replaces them."""
    c = stub_cluster(postgres, 0, name=f"ddl_{sharding}", one_database=True)
    c.sharding = sharding
    c.runner = TakesYugabyteDDL(c.runner)
    assert c.reset("write") == "reloaded"
    layout = c.layouts[-1]
    assert layout["tablets"] == 3 and layout["replicas_per_node"] == {
        c.name(ep): 1 for ep in c.endpoints}  # fmt: skip
    assert layout["leaders_per_node"] == {c.name(ep): 1 for ep in c.endpoints}
    codes = c.psql("SELECT start_hash_code, end_hash_code FROM yb_stub.tablets "
                   "WHERE table_name = 'kv' ORDER BY tablet_id").split()  # fmt: skip
    assert codes == (["0|21845", "21845|43690", "43690|65536"] if sharding == "hash"
                     else ["|"] * 3)  # fmt: skip
    c.restorable = lambda: False
    assert c.reset("write") == "reloaded"
    assert c.psql("SELECT count(*) FROM yb_stub.tablets WHERE table_name = 'kv'").strip() == "3"


def test_a_maintenance_statement_past_its_timeout_is_cancelled_by_the_server(postgres):
    """statement_timeout in the statements' own session: the server cancels the statement
    (a psql killed by its own timeout would leave it running)."""
    node, runner = postgres
    with pytest.raises(BackendError, match="canceling statement due to statement timeout"):
        runner.psql(node.endpoint, ysql.timed_sql(["SELECT pg_sleep(5)"], 0.2), {}, 30)


MASTERS = {  # the shape of yb-master's /api/v1/masters (instance_id, registration, role)
    "masters": [
        {"instance_id": {"permanent_uuid": f"u{i}", "instance_seqno": 1},
         "registration": {"private_rpc_addresses": [{"host": f"10.42.0.{10 + i}",
                                                     "port": 7100}]},
         "role": role}
        for i, role in enumerate(["FOLLOWER", "LEADER", "FOLLOWER"])
    ]
}  # fmt: skip


def test_master_raft_group_must_be_complete():
    import json

    assert ysql.master_problems(json.dumps(MASTERS), 3) == []
    two = {"masters": MASTERS["masters"][:2]}
    assert ysql.master_problems(json.dumps(two), 3) == [
        "2 of 3 masters in the Raft group (roles ['FOLLOWER', 'LEADER'])"
    ]
    down = {"masters": [*MASTERS["masters"][:2], {"error": {"code": "NETWORK_ERROR"}}]}
    problems = ysql.master_problems(json.dumps(down), 3)
    assert "1 master(s) report an error: {'code': 'NETWORK_ERROR'}" in problems
    leaderless = {"masters": [{**m, "role": "FOLLOWER"} for m in MASTERS["masters"]]}
    assert ysql.master_problems(json.dumps(leaderless), 3) == ["0 master leaders"]
    assert "unreadable" in ysql.master_problems("<html>", 3)[0]


def test_check_needs_every_tserver_in_yb_servers(postgres):
    """Ready means yb_servers() lists every tserver (stub: it lists two of three)."""
    c = stub_cluster(postgres, [["a"], ["b"], ["c"]], name="ready")
    for ep in c.endpoints:  # the third tserver is not registered
        c.runner.psql(ep, "DELETE FROM yb_stub.servers WHERE host = '10.0.0.3'", {}, 30)
    assert ysql.is_yugabyte(c.server_version())  # the stand-ins' version() reads like 2024.2's
    with pytest.raises(BackendError, match="yb_servers\\(\\) lists 2 tservers, the cluster has 3"):
        c.check()
    c.endpoints = c.endpoints[:2]
    c.check()
    c.health = lambda: ["2 of 3 masters in the Raft group"]
    with pytest.raises(BackendError, match="cluster not ready: 2 of 3 masters"):
        c.check()


def test_load_generator_facts_come_from_where_pgbench_runs(tmp_path):
    """Issue 9, 4: -j and the recorded pgbench version are the load generator's."""
    applied = cluster(FakeRunner()).applied()
    assert applied["load_generator"] == {
        "cores": 48,
        "pgbench_version": "pgbench (PostgreSQL) 16.4",
    }
    fake = _fake_exe(tmp_path / "pgbench", "print('pgbench (PostgreSQL) 15.99')\n")
    facts = ysql.LocalRunner().facts(str(fake))
    assert facts == {
        "cores": len(os.sched_getaffinity(0)),
        "pgbench_version": "pgbench (PostgreSQL) 15.99",
    }
    with pytest.raises(BackendError, match="load generator facts unreadable"):
        ysql.LocalRunner().facts(str(tmp_path / "missing-pgbench"))
