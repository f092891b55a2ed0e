"""YugabyteDB's block counters as YsqlCluster reads them on a tserver's machine (NODE_SCRIPT,
run here by sh as over SSH), from the stand-in tserver's /prometheus-metrics (tests/vm_boot.py,
YugabyteDB's names and text format) and this machine's /proc/diskstats."""

from __future__ import annotations

import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import vm_boot

from ybscale.backends.ysql import NODE_SCRIPT, block_cache_counts, node_reading, sst_bytes


@pytest.fixture
def web():
    """A web server answering /prometheus-metrics with the stand-in tserver's text (plus one
    more table, as a tserver holding two has), /html with a page that is not metrics, 404
    otherwise."""
    table = ('{table_id="1",table_name="t",table_type="PGSQL_TABLE_TYPE",namespace_name="y",'
             'metric_type="tablet",exported_instance="x"}')  # fmt: skip
    extra = (f"rocksdb_block_cache_hit{table} 40 1\nrocksdb_block_cache_miss{table} 2 1\n"
             f"intentsdb_rocksdb_block_cache_hit{table} 3 1\n"
             f"rocksdb_current_version_sst_files_size{table} 4096 1\n"
             f"intentsdb_rocksdb_current_version_sst_files_size{table} 100 1\n"
             f"rocksdb_current_version_sst_files_uncompressed_size{table} 9999 1\n")  # fmt: skip

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
    assert got["blks_hit"] == 43 and got["blks_read"] == 2  # regular + intents, every table
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
             'rocksdb_block_cache_hit{table_id="b",metric_type="tablet"} 7 17',
             "intentsdb_rocksdb_block_cache_miss{} 1 17"]  # fmt: skip
    assert block_cache_counts(lines) == {"blks_hit": 12.0, "blks_read": 1.0}


def test_sst_bytes_are_summed_per_table_name():
    lines = ['rocksdb_current_version_sst_files_size{table_id="a",table_name="kv",'
             'metric_type="tablet"} 500 17',
             'intentsdb_rocksdb_current_version_sst_files_size{table_id="a",table_name="kv"} 7 17',
             'rocksdb_current_version_sst_files_size{table_id="b",table_name="other"} 9 17',
             'rocksdb_block_cache_hit{table_id="a",table_name="kv"} 5 17']  # fmt: skip
    assert sst_bytes(lines) == {"kv": 507.0, "other": 9.0}
    assert block_cache_counts(lines) == {"blks_hit": 5.0, "blks_read": 0.0}
