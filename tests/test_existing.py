"""The existing backend: endpoint checks at parse time, and YsqlCluster through fake runners."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
import yaml
from conftest import row_from_levels

from ybscale import study
from ybscale.backends import existing
from ybscale.backends.base import BackendError, Endpoint

ROOT = Path(__file__).resolve().parents[1]
LEVELS = {
    "isolation": "read committed", "node_size": "small", "nodes": 3,
    "operation_size": 1, "replication": "off", "workload": "write",
}  # fmt: skip
ENTRY = {"hosts": ["db1", "db2:6433"], "port": 5433, "password_env": "YB_TEST_PW"}


def seed_rows():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return study.load(config).rows


def all_combos(but=()):
    combos = {row.infra_key for row in seed_rows()}
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
    sql = existing.dataset_sql(1000, "ybscale_kv", "range", 3)
    assert "PRIMARY KEY (k ASC)) SPLIT AT VALUES ((333), (666));" in sql
    assert "TRUNCATE ybscale_kv;" in sql and "generate_series(0, 999)" in sql
    assert "CREATE SEQUENCE IF NOT EXISTS ybscale_kv_new_key;" in sql
    assert "SPLIT INTO 5 TABLETS" in existing.dataset_sql(10, "kv", "hash", 5)
    assert "PRIMARY KEY (k));" in existing.dataset_sql(10, "kv", "none", 5)
    script = (ROOT / "workloads" / "write.sql").read_text()
    renamed = existing.rename_table(script, "ybscale_kv")
    assert "INSERT INTO ybscale_kv (k, v)" in renamed and "nextval('ybscale_kv_new_key')" in renamed
    assert " kv " not in renamed and existing.rename_table(script, "kv") == script


class FakeRunner:
    """Answers psql like YugabyteDB would; `effective` is what the isolation function returns."""

    def __init__(self, effective="read committed", has_function=True, down=()):
        self.effective, self.has_function, self.down = effective, has_function, set(down)
        self.sql: list[tuple[str, str, dict]] = []

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
        if "version()" in sql:
            return "PostgreSQL 11.2-YB-2024.2.1.0-b0\n"
        return ""


def cluster(runner, levels=LEVELS, n=3):
    eps = [Endpoint(f"10.0.0.{i}", 5433, "yugabyte", "yugabyte", "YB_TEST_PW", f"tserver{i}")
           for i in range(n)]  # fmt: skip
    row = row_from_levels(levels, 1000)
    return existing.YsqlCluster(eps, row, runner, table="ybscale_kv", sharding="range")


def test_targets_cover_every_node_with_the_full_key_space():
    targets = cluster(FakeRunner()).targets("write")
    assert [t.endpoint.role for t in targets] == ["tserver0", "tserver1", "tserver2"]
    assert all(t.variables == {"shard": 0, "nshards": 1, "shard_rows": 1000, "keybase": 1000}
               for t in targets)  # fmt: skip


def test_applied_reads_back_isolation(monkeypatch):
    monkeypatch.setenv("YB_TEST_PW", "s3cret")
    runner = FakeRunner()
    applied = cluster(runner).applied()
    assert set(applied["isolation_in_effect"].values()) == {"read committed"}
    assert applied["isolation_source"] == ["yb_get_effective_transaction_isolation_level()"]
    host, sql, env = runner.sql[0]
    assert env["PGOPTIONS"] == r"-c default_transaction_isolation=read\ committed"
    assert env["PGPASSWORD"] == "s3cret"


def test_applied_mismatch_fails():
    # YugabyteDB without --yb_enable_read_committed_isolation runs READ COMMITTED as snapshot
    with pytest.raises(BackendError, match="differs from the design's 'read committed'"):
        cluster(FakeRunner(effective="repeatable read")).applied()


def test_applied_falls_back_to_show():
    applied = cluster(FakeRunner(has_function=False)).applied()
    assert applied["isolation_source"] == ["SHOW transaction_isolation"]


def test_check_names_every_failed_node():
    with pytest.raises(BackendError) as err:
        cluster(FakeRunner(down={"10.0.0.1", "10.0.0.2"})).check()
    assert "tserver1 (10.0.0.1:5433)" in str(err.value) and "tserver2" in str(err.value)
    cluster(FakeRunner()).check()


def test_reset_loads_writes_every_time_reads_once():
    runner = FakeRunner()
    c = cluster(runner)
    for _ in range(3):
        c.reset("write")
    assert sum("TRUNCATE ybscale_kv" in s for _, s, _ in runner.sql) == 3
    runner = FakeRunner()
    c = cluster(runner, {**LEVELS, "workload": "read"})
    for _ in range(3):
        c.reset("read")
    assert sum("TRUNCATE" in s for _, s, _ in runner.sql) == 1


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
    runner = existing.LocalRunner("ybscale_kv")
    proc = runner.popen([str(fake), "-f", str(ROOT / "workloads" / "write.sql"), "yugabyte"],
                        {"PGOPTIONS": "-c x=y"}, 10, tmp_path)  # fmt: skip
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
    runner = existing.LocalRunner("ybscale_kv", psql=str(fake))
    ep = Endpoint("db1", 5433, "yugabyte", "yugabyte")
    out = runner.psql(ep, "SELECT 1", {"PGPASSWORD": "pw"}, 10)
    assert "-h db1 -p 5433 -U yugabyte -d yugabyte -f -" in out and "pw SELECT 1" in out
    assert "ON_ERROR_STOP=1" in out
    with pytest.raises(BackendError, match="exited 3: ERROR: boom"):
        runner.psql(ep, "fail", {}, 10)


def test_backend_never_creates_anything(tmp_path):
    config = {"existing": {"combinations": {"nodes3-small-reploff": ENTRY}}}
    backend = existing.ExistingBackend(config)
    with backend.cluster(row_from_levels(LEVELS, 1000), tmp_path) as c:
        assert [e.host for e in c.endpoints] == ["db1", "db2"]
        assert c.table == "ybscale_kv"
    with pytest.raises(BackendError, match="existing.combinations.nodes5-small-reploff"):
        with backend.cluster(row_from_levels({**LEVELS, "nodes": 5}, 1000), tmp_path):
            pass
