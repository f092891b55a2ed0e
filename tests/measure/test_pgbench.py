"""Tests for ybscale.measure.pgbench on real pgbench 15.18 output (tests/data/pgbench/README.md)."""

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ybscale.backends.base import Endpoint, PgbenchCommand
from ybscale.measure import pgbench
from ybscale.measure.pgbench import PgbenchError, PgbenchResult

DATA = Path(__file__).resolve().parents[1] / "data" / "pgbench"


def out(name: str) -> str:
    return (DATA / name).read_text()


def result(name: str) -> PgbenchResult:
    return pgbench.parse_output(out(f"pg15_{name}.stdout"))


def agg(name: str):
    paths = pgbench.aggregate_log_paths(DATA / f"pg15_{name}_agg")
    assert len(paths) == 2  # one file per thread (-j 2)
    return pgbench.parse_aggregate_logs(paths)


# name: tps, latency, stddev, transactions, failed, retried, retries, clients, duration, incl.
EXPECTED = {
    "read": (35841.947444, 0.056, None, 71563, 0, 0, 0, 2, 2, False),
    "read_5s": (40563.229115, None, None, 202725, 0, 0, 0, 2, 5, False),
    "upsert_tries1": (4874.414965, 1.030, None, 9717, 5773, 0, 0, 8, 2, True),
    "upsert_tries10": (5029.446117, 1.590, None, 10003, 7, 3605, 6179, 8, 2, True),
    "failures_detailed": (5895.672749, 0.848, None, 11766, 7055, 0, 0, 8, 2, True),
    "rate": (490.013337, 0.205, 0.084, 974, 0, 0, 0, 2, 2, False),
    "progress": (34910.249667, 0.057, 0.018, 104602, 0, 0, 0, 2, 3, False),
    "upsert_progress": (5201.243028, 1.445, 1.492, 15554, 22, 5572, 9982, 8, 3, False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parse_output_real(name):
    tps, lat, sd, n, failed, retried, retries, clients, dur, incl = EXPECTED[name]
    r = result(name)
    assert r.tps == pytest.approx(tps)
    if lat is not None:
        assert r.latency_ms == pytest.approx(lat)
    assert r.latency_stddev_ms == (pytest.approx(sd) if sd is not None else None)
    assert (r.transactions, r.failed, r.retried, r.retries) == (n, failed, retried, retries)
    assert (r.clients, r.threads, r.duration_s) == (clients, 2, dur)
    assert r.includes_failures is incl


def test_latency_without_progress_counts_failures():
    # pgbench 15 without --progress: latency = run time * clients / (processed + failed), where
    # run time (processed / tps) excludes the connection time
    for name in ("upsert_tries1", "upsert_tries10", "failures_detailed", "read"):
        r = result(name)
        ms = 1000 * r.transactions / r.tps * r.clients / (r.transactions + r.failed)
        assert r.latency_ms == pytest.approx(ms, abs=5e-4)


def test_error_run_raises():
    stdout, stderr = out("pg15_missing_table.stdout"), out("pg15_missing_table.stderr")
    with pytest.raises(PgbenchError, match="processed no transactions"):
        pgbench.parse_output(stdout)
    with pytest.raises(PgbenchError, match="aborted.*no_such_table"):
        pgbench.parse_output(stdout, stderr)


def test_no_server_raises():
    with pytest.raises(PgbenchError, match=r"no 'tps = \.\.\.' line.*Connection refused"):
        pgbench.parse_output("", out("pg15_noserver.stderr"))


def test_aborted_client_rejected_even_with_totals():
    stderr = "pgbench: error: Run was aborted; the above results are incomplete.\n"
    with pytest.raises(PgbenchError, match="aborted"):
        pgbench.parse_output(out("pg15_read.stdout"), stderr)


def test_pg13_two_tps_lines_take_excluding():
    stdout = (  # format of pgbench 13 and older (hand-written)
        "number of clients: 4\nnumber of threads: 2\nduration: 10 s\n"
        "number of transactions actually processed: 1000\n"
        "latency average = 40.000 ms\n"
        "tps = 99.000000 (including connections establishing)\n"
        "tps = 100.500000 (excluding connections establishing)\n"
    )
    r = pgbench.parse_output(stdout)
    assert r.tps == 100.5 and r.failed == 0 and r.retries == 0 and r.latency_ms == 40.0


def test_progress_lines():
    lines = out("pg15_progress.stderr").splitlines()
    assert [pgbench.parse_progress_line(x) for x in lines] == [35774.4, 33188.0, 35572.3]
    first = out("pg15_upsert_progress.stderr").splitlines()[0]
    assert pgbench.parse_progress_line(first) == 5114.7
    assert pgbench.parse_progress_line("pgbench: error: something") is None


def test_aggregate_logs_per_second_totals():
    df = agg("read")
    assert df["interval_start"].tolist() == [1795385544, 1795385545]
    assert df["num_transactions"].tolist() == [17569 + 15273, 16770 + 18487]
    assert df["min_latency"].tolist() == [39, 39]
    assert df["max_latency"].tolist() == [3738, 1815]
    assert df["sum_latency"].tolist() == [891961 + 892939, 993686 + 994806]
    assert df["latency_avg_ms"][0] == pytest.approx((891961 + 892939) / 32842 / 1000)
    assert (df["tps"] == df["num_transactions"]).all()


@pytest.mark.parametrize(
    "name", ["read", "read_5s", "upsert_tries1", "upsert_tries10", "failures_detailed", "rate"]
)
def test_aggregate_total_vs_stdout(name):
    # pgbench 15 never writes the last, partial interval of a -T run: the logged total falls
    # short of the processed count by less than one interval's worth of transactions.
    logged = int(agg(name)["num_transactions"].sum())
    processed = result(name).transactions
    assert 0 <= processed - logged < agg(name)["num_transactions"].max()


def test_aggregate_exact_totals():
    assert agg("read")["num_transactions"].sum() == 68099
    assert agg("read_5s")["num_transactions"].sum() == 172323
    assert len(agg("read_5s")) == 5  # started mid-second: partial first interval, last dropped
    t10 = agg("upsert_tries10")
    assert (t10["retried"].sum(), t10["retries"].sum()) == (3241, 5548)
    assert t10["failures"].sum() == 0  # failures only logged with --failures-detailed
    fd = agg("failures_detailed")
    assert fd["serialization_failures"].tolist() == [274 + 279, 1807 + 1754]
    assert fd["failures"].sum() == 4114 and fd["deadlock_failures"].sum() == 0
    rate = agg("rate")
    assert rate["num_transactions"].sum() == 971
    assert rate["sum_lag"].tolist() == [21997 + 19949, 20430 + 22384]
    assert rate["min_lag"].tolist() == [20, 0] and rate["max_lag"].tolist() == [637, 411]


def test_aggregate_old_format_and_empty_intervals(tmp_path):
    a = tmp_path / "p.10"
    b = tmp_path / "p.10.1"
    c = tmp_path / "q.11"  # a second pgbench process against another node
    a.write_text("100 10 1000 200000 50 300\n101 0 0 0 0 0\n")  # pgbench 14: 6 columns
    b.write_text("100 5 500 60000 20 200 0 0 0 0 0 1 2 3 4\n")
    c.write_text("101 4 400 50000 70 150 0 0 0 0 0 0 0 0 0\n")
    assert [p.name for p in pgbench.aggregate_log_paths(tmp_path / "p")] == ["p.10", "p.10.1"]
    df = pgbench.parse_aggregate_logs([a, b, c])
    assert df["num_transactions"].tolist() == [15, 4]
    assert df["min_latency"].tolist() == [20, 70]  # the empty interval's 0 is ignored
    assert df["max_latency"].tolist() == [300, 150]
    assert df["retried"].tolist() == [1, 0] and df["failures"].tolist() == [7, 0]
    bad = tmp_path / "bad.1"
    bad.write_text("1 2 3\n")
    with pytest.raises(PgbenchError, match="3 columns"):
        pgbench.parse_aggregate_logs([bad])


def _res(n, tps, lat, sd, **kw):
    base = dict(failed=1, retried=2, retries=3, clients=4, threads=2, duration_s=60.0)
    base.update(includes_failures=False)
    base.update(kw)
    return PgbenchResult(
        tps=tps,
        latency_ms=lat,
        latency_stddev_ms=sd,
        transactions=n,
        **base,
    )


def test_merge_by_hand():
    a = _res(100, 50.0, 2.0, 1.0)
    b = _res(300, 150.0, 4.0, 2.0, duration_s=61.0, failed=5)
    m = pgbench.merge([a, b])
    # mean = (100*2 + 300*4) / 400 = 3.5
    # var = (100*(1^2 + 1.5^2) + 300*(2^2 + 0.5^2)) / 400 = (325 + 1275) / 400 = 4 -> sd 2
    assert m.latency_ms == pytest.approx(3.5)
    assert m.latency_stddev_ms == pytest.approx(2.0)
    assert (m.tps, m.transactions, m.failed, m.retried, m.retries) == (200.0, 400, 6, 4, 6)
    assert (m.clients, m.threads, m.duration_s, m.includes_failures) == (8, 4, 61.0, False)


def test_merge_matches_pooled_samples():
    rng = np.random.default_rng(1)
    xs = [rng.normal(2, 0.5, 700), rng.normal(5, 1.5, 300)]
    parts = [_res(len(x), 1.0, float(x.mean()), float(x.std())) for x in xs]
    m = pgbench.merge(parts)
    allx = np.concatenate(xs)
    assert m.latency_ms == pytest.approx(allx.mean())
    assert m.latency_stddev_ms == pytest.approx(allx.std())


def test_merge_missing_stddev_and_single():
    a = _res(10, 1.0, 2.0, None)
    b = _res(10, 1.0, 4.0, 1.0, includes_failures=True)
    m = pgbench.merge([a, b])
    assert m.latency_ms == 3.0 and m.latency_stddev_ms is None and m.includes_failures
    assert pgbench.merge([a]) is a
    with pytest.raises(ValueError):
        pgbench.merge([])
    assert math.isclose(pgbench.merge([result("read"), result("progress")]).tps, 70752.197111)


def command(**kw) -> PgbenchCommand:
    fields = dict(
        scripts=(Path("workloads/read.sql"),),
        endpoint=Endpoint("10.0.0.5", 5433, "yugabyte", "yugabyte"),
        clients=16,
        threads=4,
        seconds=30,
        variables={"rows": 10000, "size": 1},
        env={},
        workdir=Path("/tmp/run01"),
        timeout=90,
        log_prefix=Path("/tmp/run01/c16"),
    )
    return PgbenchCommand(**{**fields, **kw})


def test_command():
    assert (
        pgbench.argv(command(), "/opt/pg/bin/pgbench")
        == (
            "/opt/pg/bin/pgbench -n -M prepared -c 16 -j 4 -T 30 --max-tries=10 "
            "-f workloads/read.sql -D rows=10000 -D size=1 -h 10.0.0.5 -p 5433 -U yugabyte "
            "--log --failures-detailed --log-prefix=/tmp/run01/c16 yugabyte"
        ).split()
    )


def test_command_bindir_progress_seed_scripts(tmp_path):
    cmd = command(
        scripts=("s.sql", "t.sql"),
        endpoint=Endpoint("h", 5432, "db", "u"),
        clients=1,
        threads=1,
        seconds=5,
        variables={},
        log_prefix=None,
        max_tries=1,
        progress=1,
        random_seed=7,
    )
    assert pgbench.argv(cmd, tmp_path) == [
        str(tmp_path / "pgbench"),
        *"-n -M prepared -c 1 -j 1 -T 5 --max-tries=1 --progress=1 -f s.sql -f t.sql".split(),
        *"-h h -p 5432 -U u --random-seed=7 db".split(),
    ]
    for bad in ({"clients": 0}, {"seconds": 0}, {"max_tries": -1}, {"scripts": ()}):
        with pytest.raises(ValueError):
            command(**bad)


@pytest.mark.skipif(shutil.which("pgbench") is None, reason="pgbench not installed")
def test_version():
    assert pgbench.version("pgbench").startswith("pgbench (PostgreSQL) ")


@pytest.mark.parametrize("distribution", ["uniform", "zipfian", "zipfian 3"])
def test_the_read_scripts_keys_are_drawn_as_workload_distribution_says(
    data_root, tmp_path, distribution
):
    """Issue 48: workloads/read.sql run by real pgbench on a real server (its SELECT replaced by
    recording the key it drew): `uniform` spreads 4,000 draws over all 1,000 keys of the target
    (each key about 4 times: the most drawn key far below 40), `zipfian` (s = 1.1) draws the
    first key most often (P(1) / P(2) = 2^s: the first key alone about 4,000 / H(1000, 1.1) ≈ 17 %
    of them), and `zipfian 3` almost only the first keys (1 / ζ(3) ≈ 83 % the first)."""
    import subprocess

    from conftest import row_from_levels

    from ybscale.backends.local.cluster import LocalBackend
    from ybscale.design import knobs, workload

    s = float(knobs.distribution_parameter(distribution))
    script = (Path(__file__).parents[2] / "workloads" / "read.sql").read_text()
    select = "SELECT k, v FROM kv WHERE k = :k;"
    assert select in script
    (tmp_path / "draw.sql").write_text(script.replace(select, "INSERT INTO drawn VALUES (:k);"))
    backend = LocalBackend(
        __import__("conftest").settings_with(local={"data_root": str(data_root)})
    )
    levels = {"nodes": 1, "replication": "off", "workload": "read", "node_size": "small"}
    with backend.cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
        node = cluster.nodes[0]
        node.psql("CREATE TABLE drawn (k bigint)")
        variables = {**workload.key_variables(1000, 0, 1), "rows": 1, "distribution": s}
        argv = [cluster.pgbench, "-n", "-t", "4000", "-f", str(tmp_path / "draw.sql"),
                "-h", "127.0.0.1", "-p", str(node.port), "-U", "postgres", "postgres",
                *(f"-D{k}={v}" for k, v in variables.items())]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        counts = node.psql("SELECT k, count(*) FROM drawn GROUP BY k ORDER BY 2 DESC, 1")
    drawn = [tuple(map(int, line.split("|"))) for line in counts.splitlines()]
    assert sum(n for _, n in drawn) == 4000 and all(0 <= k < 1000 for k, _ in drawn)
    top_key, top = drawn[0]
    if distribution == "uniform":
        assert len(drawn) > 950 and top < 20, drawn[:3]
    elif distribution == "zipfian":
        assert top_key == 0 and 0.12 < top / 4000 < 0.23, drawn[:3]
    else:
        assert top_key == 0 and top / 4000 > 0.75, drawn[:3]


def test_the_read_scripts_rows_are_reached_by_their_keys_on_every_sharding(data_root, tmp_path):
    """Issue 59, item 2: with `gcp.table_sharding: hash` YugabyteDB stores rows in the order of
    their key's hash, so the 100-row read's old `k >= :k ORDER BY k LIMIT :rows` scanned and
    sorted the whole table in every transaction. workloads/read.sql now reads the `rows`
    consecutive keys of its target as `k = ANY` of an array it builds with generate_series
    from pgbench's variables: run here by real pgbench with `-M prepared` (as the harness runs
    it: variables sent as untyped parameters) on a real server, every transaction reads exactly
    `rows` keys of its own target (shard 1 of 3: 1, 4, 7, ...; a range bucket's keys above 2^31,
    as gcp's range sharding gives tserver 3), and PostgreSQL's plan is an index condition on the
    primary key, no scan of the table."""
    import re
    import subprocess

    from conftest import row_from_levels

    from ybscale.backends.local.cluster import LocalBackend
    from ybscale.design import workload

    script = (Path(__file__).parents[2] / "workloads" / "read.sql").read_text()
    code = re.sub(r"--[^\n]*", "", script)  # no range predicate left but in the comments
    statement = re.search(r"SELECT k, v FROM kv WHERE k = ANY \(ARRAY\(.*?\)\)\);", code, re.S)
    assert statement and "ORDER BY" not in code and ">=" not in code, code
    select = "SELECT k, v FROM kv WHERE k = ANY"
    record = script.replace(
        select, "INSERT INTO got SELECT txid_current(), k FROM kv WHERE k = ANY"
    )
    (tmp_path / "record.sql").write_text(record)
    backend = LocalBackend(
        __import__("conftest").settings_with(local={"data_root": str(data_root)})
    )
    levels = {"nodes": 1, "replication": "off", "workload": "read", "node_size": "small"}
    bucket = 3 * 10**12
    with backend.cluster(row_from_levels(levels, 1000), tmp_path) as cluster:
        node = cluster.nodes[0]
        node.psql(
            f"INSERT INTO kv SELECT {bucket} + g, md5(g::text) FROM generate_series(0, 999) AS g"
        )
        node.psql("CREATE TABLE got (xid bigint, k bigint)")
        targets = {
            "shard 1 of 3": workload.key_variables(1000, 1, 3),
            "range bucket 3": {"shard": bucket, "nshards": 1, "shard_rows": 1000},
        }
        for name, keys in targets.items():
            node.psql("TRUNCATE got")
            variables = {**keys, "rows": 100, "distribution": 0}
            argv = [cluster.pgbench, "-n", "-M", "prepared", "-c", "2", "-t", "10",
                    "-f", str(tmp_path / "record.sql"),
                    "-h", "127.0.0.1", "-p", str(node.port), "-U", "postgres", "postgres",
                    *(f"-D{k}={v}" for k, v in variables.items())]  # fmt: skip
            out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            read = node.psql("SELECT xid, k FROM got ORDER BY xid, k").splitlines()
            by_xid: dict[str, list[int]] = {}
            for line in read:
                xid, k = line.split("|")
                by_xid.setdefault(xid, []).append(int(k))
            assert len(by_xid) == 20, name
            step, shard = keys["nshards"], keys["shard"]
            for got in by_xid.values():
                assert len(got) == 100 and got[0] % step == shard % step, (name, got[:3])
                assert got == list(range(got[0], got[0] + 100 * step, step)), (name, got[:3])
        text = statement.group(0)
        for var, value in (("k", bucket + 5), ("rows", 100), ("nshards", 1)):
            text = text.replace(f":{var}::", f"{value}::")
        plan = node.psql("EXPLAIN " + text)
    assert "Index Cond: (k = ANY" in plan and "Seq Scan" not in plan, plan


def test_the_write_scripts_new_rows_are_as_large_as_the_loaded_ones(data_root, tmp_path):
    """Issue 48: workloads/write.sql run by real pgbench on a real server at three
    `dataset.value_bytes` (the row's `value_bytes` variable): every new row's value has exactly
    that many bytes, the values differ from row to row (distinct md5s, not one repeated), and the
    new keys lie above `keybase`, as the restore expects."""
    import subprocess

    from conftest import row_from_levels

    from ybscale.backends.local.cluster import LocalBackend
    from ybscale.design import workload

    script = Path(__file__).parents[2] / "workloads" / "write.sql"
    backend = LocalBackend(
        __import__("conftest").settings_with(local={"data_root": str(data_root)})
    )
    levels = {"nodes": 1, "replication": "off", "workload": "write", "node_size": "small"}
    row = row_from_levels(levels, 100)
    assert row.variables["value_bytes"] == "32"
    with backend.cluster(row, tmp_path) as cluster:
        node = cluster.nodes[0]
        for value_bytes in (7, 32, 100):
            variables = {**workload.key_variables(100, 0, 1), "rows": 5, "value_bytes": value_bytes}
            argv = [cluster.pgbench, "-n", "-t", "2", "-f", str(script),
                    "-h", "127.0.0.1", "-p", str(node.port), "-U", "postgres", "postgres",
                    *(f"-D{k}={v}" for k, v in variables.items())]  # fmt: skip
            out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            added = node.psql(
                "SELECT count(*), min(octet_length(v)), max(octet_length(v)), count(DISTINCT v) "
                "FROM kv WHERE k >= 100"
            )
            assert added == f"10|{value_bytes}|{value_bytes}|10", (value_bytes, added)
            node.psql("DELETE FROM kv WHERE k >= 100")
