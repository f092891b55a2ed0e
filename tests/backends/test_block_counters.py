"""YugabyteDB's block counters as YsqlCluster reads them on a tserver's machine (NODE_SCRIPT,
run here by sh as over SSH), from the stand-in tserver's /prometheus-metrics (tests/vm_boot.py,
YugabyteDB's names and text format) and this machine's /proc/diskstats."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import test_existing
import vm_boot

from ybscale.backends.ysql import NODE_SCRIPT, block_cache_counts, node_reading, sst_bytes


@pytest.fixture
def web():
    """A web server answering /prometheus-metrics with the stand-in tserver's text (plus one
    more table, as a tserver holding two has, written as vm_boot writes the stand-in's: HELP
    and TYPE before each entry), /html with a page that is not metrics, 404 otherwise."""
    table = ('{table_id="1",table_name="t",table_type="PGSQL_TABLE_TYPE",namespace_name="y",'
             'metric_type="tablet",exported_instance="x"}')  # fmt: skip
    values = {"rocksdb_block_cache_data_hit": 30, "rocksdb_block_cache_index_hit": 6,
              "rocksdb_block_cache_filter_hit": 4, "rocksdb_block_cache_hit": 40,
              "rocksdb_block_cache_data_miss": 2, "rocksdb_block_cache_miss": 2,
              "intentsdb_rocksdb_block_cache_data_hit": 1,
              "intentsdb_rocksdb_block_cache_filter_hit": 2,
              "intentsdb_rocksdb_block_cache_hit": 3,
              "rocksdb_current_version_sst_files_size": 4096,
              "intentsdb_rocksdb_current_version_sst_files_size": 100,
              "rocksdb_current_version_sst_files_uncompressed_size": 9999}  # fmt: skip
    extra = "".join(
        "\n".join(vm_boot._ticker(name, table, value, 1)) + "\n" for name, value in values.items()
    )

    class Web(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path == "/prometheus-metrics":
                body = vm_boot.prometheus_metrics({"ysql": ""}, "x") + extra
            elif self.path == "/html":
                body = "<html>\n<body>metrics</body>\n</html>\n"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Web)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def run(url: str) -> dict:
    done = subprocess.run(["sh", "-c", NODE_SCRIPT, url], capture_output=True, text=True,
                          timeout=30, check=True)  # fmt: skip
    return node_reading(done.stdout)


def test_node_script_reads_the_block_cache_and_the_whole_disks(web):
    got = run(web + "/prometheus-metrics")
    # the data blocks (regular + intents) as blks_*, every kind of block beside them
    assert got["blks_hit"] == 31 and got["blks_read"] == 2
    assert got["blks_hit_all"] == 43 and got["blks_read_all"] == 2
    assert got["sst_bytes"] == {"t": 4196.0}  # regular + intents, compressed, per table
    assert "metrics_error" not in got
    # the whole disks only: every one has a device, none is a partition or a loop device
    for disk in got["disks"]:
        assert not disk.startswith(("loop", "ram", "dm-"))
    assert got["disk_read_bytes"] >= 0 and got["disk_read_bytes"] % 512 == 0
    # without a URL: the disks alone
    disks_only = run("")
    assert "blks_hit" not in disks_only and "metrics_error" not in disks_only


def test_node_script_refuses_what_is_not_the_metrics(web):
    assert "curl exited 22" in run(web + "/api/v1/nothing")["metrics_error"]  # HTTP 404
    assert "not Prometheus text" in run(web + "/html")["metrics_error"]
    assert "curl exited 7" in run("http://127.0.0.1:1/prometheus-metrics")["metrics_error"]


def test_block_cache_counts_sum_the_entities():
    lines = ['rocksdb_block_cache_hit{table_id="a",metric_type="tablet"} 5 17',
             'rocksdb_block_cache_data_hit{table_id="a",metric_type="tablet"} 2 17',
             'rocksdb_block_cache_hit{table_id="b",metric_type="tablet"} 7 17',
             'rocksdb_block_cache_data_hit{table_id="b",metric_type="tablet"} 3 17',
             "intentsdb_rocksdb_block_cache_miss{} 1 17",
             "intentsdb_rocksdb_block_cache_data_miss{} 1 17"]  # fmt: skip
    assert block_cache_counts(lines) == {"blks_hit": 5.0, "blks_read": 1.0,
                                         "blks_hit_all": 12.0, "blks_read_all": 1.0}  # fmt: skip


def test_a_page_with_the_totals_alone_is_not_read_as_data_blocks():
    """The totals (data + index + filter) are no data blocks' count: a page without
    rocksdb_block_cache_data_* is refused, not read as if its totals were."""
    lines = ['rocksdb_block_cache_hit{table_id="a",metric_type="tablet"} 5 17',
             'rocksdb_block_cache_miss{table_id="a",metric_type="tablet"} 1 17']  # fmt: skip
    with pytest.raises(ValueError, match="rocksdb_block_cache_data_hit"):
        block_cache_counts(lines)
    page = "\n".join(["8 0 sda 1 0 8 0", "# ybscale: disks", "sda", "# ybscale: metrics",
                      *lines, "# ybscale: lines 2 0"])  # fmt: skip
    got = node_reading(page)
    assert "blks_hit" not in got and "rocksdb_block_cache_data_hit" in got["metrics_error"]


def test_the_stand_in_page_is_written_as_yugabytes_prometheus_writer_writes_it():
    """HELP and TYPE before every entry (PrometheusWriter, export_help_and_type), the tickers
    gauges, a histogram as _sum and _count counters and a gauge per quantile."""
    page = vm_boot.prometheus_metrics({"ysql": ""}, "x").splitlines()
    entries = [i for i, line in enumerate(page) if not line.startswith("#")]
    assert entries and all(
        page[i - 2] == f"# HELP {name} " + page[i - 2].split(" ", 3)[3]
        and page[i - 1] in (f"# TYPE {name} gauge", f"# TYPE {name} counter")
        for i in entries
        for name in [page[i].split("{")[0]]
    )
    hist = vm_boot.HISTOGRAM
    assert f"# TYPE {hist}_sum counter" in page and f"# TYPE {hist}_count counter" in page
    quantiles = [line for line in page if line.startswith(hist + "{")]
    assert [q.split('quantile="')[1].split('"')[0] for q in quantiles] == list(vm_boot.QUANTILES)


def test_sst_bytes_are_summed_per_table_name():
    lines = ['rocksdb_current_version_sst_files_size{table_id="a",table_name="kv",'
             'metric_type="tablet"} 500 17',
             'intentsdb_rocksdb_current_version_sst_files_size{table_id="a",table_name="kv"} 7 17',
             'rocksdb_current_version_sst_files_size{table_id="b",table_name="other"} 9 17',
             'rocksdb_block_cache_hit{table_id="a",table_name="kv"} 5 17']  # fmt: skip
    assert sst_bytes(lines) == {"kv": 507.0, "other": 9.0}


postgres = test_existing.postgres  # a real PostgreSQL server (fixture)


def test_the_stand_in_reports_no_sst_bytes_until_yb_admin_flushes_the_table(postgres, tmp_path):
    """A tserver's rows stay in its memtables until they flush: the stand-in's SST bytes of a
    table are 0 until `yb-admin flush_table` (vm_boot.flush_table, its arguments as yb-admin
    reads them) flushed it, then what it held then; a table made again is not flushed."""
    from ybscale.backends.local import find_bindir

    node, _ = postgres
    if node.psql("SELECT count(*) FROM pg_roles WHERE rolname = 'yugabyte'") == "0":
        node.psql("CREATE ROLE yugabyte SUPERUSER LOGIN")
    if node.psql("SELECT count(*) FROM pg_database WHERE datname = 'yugabyte'") == "0":
        node.psql("CREATE DATABASE yugabyte OWNER yugabyte")
    ysql_at = f"127.0.0.1:{node.port}"
    (tmp_path / "c1").mkdir()
    (tmp_path / "c1" / "addresses.json").write_text(
        json.dumps({"masters": ["127.9.0.1"], "ysql": ysql_at, "tserver_web_port": 1})
    )
    psql = str(find_bindir() / "psql")
    vm = {"ysql": ysql_at, "postgres": str(find_bindir() / "postgres"),
          "flushed": str(tmp_path / "c1" / "flushed.json")}  # fmt: skip

    def sst() -> float:
        lines = vm_boot.prometheus_metrics(vm, "x").splitlines()
        return sst_bytes([ln for ln in lines if not ln.startswith("#")]).get("flushkv", 0.0)

    def yb_admin(*args) -> int:
        return vm_boot.flush_table(str(tmp_path), psql, ["-master_addresses", "127.9.0.1:7100",
                                                         *args])  # fmt: skip

    def make():
        runner_sql = ("DROP TABLE IF EXISTS flushkv; CREATE TABLE flushkv (k bigint PRIMARY KEY, "
                      "v text); INSERT INTO flushkv SELECT g, md5(g::text) "
                      "FROM generate_series(1, 2000) g")  # fmt: skip
        subprocess.run([psql, "-X", "-q", "-h", "127.0.0.1", "-p", str(node.port), "-U",
                        "yugabyte", "-d", "yugabyte", "-c", runner_sql], check=True)  # fmt: skip

    make()
    assert sst() == 0.0
    assert yb_admin("flush_table", "yugabyte", "flushkv") == 1  # ycql., the default: refused
    assert yb_admin("flush_table", "ysql.yugabyte", "nothere") == 1
    assert yb_admin("flush_table", "ysql.yugabyte", "flushkv", "60", "5") == 1
    assert sst() == 0.0
    assert yb_admin("flush_table", "ysql.yugabyte", "flushkv", "600") == 0
    assert sst() > 0
    make()  # DROP + CREATE: a new table, nothing flushed yet
    assert sst() == 0.0
