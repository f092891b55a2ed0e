"""A capped load generator on loopback (issue 38): on stand-in machines of one CPU or less
(`loopback.machine_group`), a study with `auto` from a pool of a capped generator and a second
one starts from the capped one alone, finds it client-bound (the bottleneck), adds the second
and finds the cluster the bottleneck; the findings say where generators were added."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from conftest import (
    _free_port,
    authorized_keys,
    failed,
    ram_root,
    row_from_levels,
    servers_under,
    settings_with,
    stop_sshd,
)
from conftest import snakemake as run_snakemake
from loopback import loopback_site, machine_group, machine_sshd, set_machine_cpus
from test_generators_loopback import READS, ROW, existing_settings, study_of

from ybscale.backends.existing import ExistingBackend
from ybscale.backends.ysql import METRICS_PATH
from ybscale.measure import bench
from ybscale.measure.generators import client_bound
from ybscale.report.bottlenecks import generator_bound

pytestmark = pytest.mark.slow


# ------------------------------------------------------------- a capped generator
# Stand-in machines of one CPU or less (`loopback.machine_group`): the cluster's server (1 CPU,
# both tservers' figure, as endpoints on one host share it), generator A (1 CPU) and generator
# B, capped below what driving the whole cluster takes, above what half of it takes.
# B's quota: this share of the generator CPU the cluster's saturation takes. At 0.7 (2026-11-26,
# one passing run) B alone read 96 % of its quota against the nodes' 61-63 %, but with two
# generators 69-77 % against the nodes' 79-92 %, and in 2 of 3 full suites a k = 2 row found B
# the busiest (nodes at 48 %). At 0.8 (3 runs alone): B alone 95-98 % against the nodes'
# 77-78 %, with two 48-65 % against 80-99 %: the margin where it was thin.
CAP_SHARE = 0.8
# two rows a study (READS' first factor, a 2^1): the first grows, the second starts from two
POINT_READS = {"factors": {"A": READS["factors"]["A"]}}


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


@contextmanager
def metrics_on_every_address(site_file: Path) -> Iterator[int]:
    """A stand-in tserver's /prometheus-metrics (tests/vm_boot.py: YugabyteDB's names and
    format, from the cluster's PostgreSQL counters) on every loopback address, at a port of
    its own (what existing.tserver_web_port then names); its port."""
    import vm_boot

    from ybscale.backends.local import find_bindir

    where = json.loads(site_file.read_text())
    vm = {"ysql": f"{where['tservers']['2'][0]}:{where['ysql_port']}",
          "postgres": str(find_bindir() / "postgres")}  # fmt: skip

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path != METRICS_PATH:
                self.send_error(404)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(vm_boot.prometheus_metrics(vm, "stand-in").encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("0.0.0.0", 0), Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def node_login(sshd, site_file: Path, known_hosts: Path) -> dict:
    """existing.ssh: every tserver's CPU read from the cluster's stand-in machine."""
    port = json.loads(site_file.read_text())["tserver_ssh_port"]
    return {"user": sshd.user, "key": str(sshd.key), "port": port,
            "known_hosts": str(known_hosts)}  # fmt: skip


@pytest.mark.exclusive  # asserts on what saturated: nothing else may run beside it
def test_a_capped_generator_is_the_bottleneck_alone_and_the_cluster_is_with_two(
    sshd, capped, tmp_path
):
    """Calibrated on the machine: CPU per transaction of a generator (A alone) and of the
    cluster's server give B a quota of CAP_SHARE (80 %) of what saturating the cluster takes
    from one generator. The study (a 2^1 of point reads, POINT_READS) with `auto` over the pool
    [B, A] starts its first row from B alone, finds B the bottleneck (client-bound: that
    measurement is kept, superseded), adds A and measures that count again (B then drives half
    the clients): every row is measured with k = 2 and finds the cluster the bottleneck; the
    second row starts from two; the findings name where auto added a generator."""
    root, site_file, ((a, _), (b, b_group)) = capped
    known = tmp_path / "known_hosts"
    a, b = ({**login, "known_hosts": str(known)} for login in (a, b))
    nodes = node_login(sshd, site_file, known)
    # calibration: A alone, unrestricted relative to the cluster; the tservers' block cache
    # read from a stand-in /prometheus-metrics on existing.tserver_web_port (issue 48)
    row = row_from_levels(ROW, 2000)
    with metrics_on_every_address(site_file) as port:
        settings = existing_settings(site_file, [a], nodes, web_port=port, repetitions=1,
                                     max_repetitions=1)  # fmt: skip
        with ExistingBackend(settings).cluster(row, tmp_path) as cluster:
            out = tmp_path / "calibration"
            bench.measure(row, cluster, settings["measurement"], out, progress=lambda _: None)
    line = pd.read_csv(out / "throughput.csv").iloc[0]
    assert 0 < line["buffer_hit_ratio"] <= 1 and line["disk_bytes_per_tx"] >= 0, line.to_dict()
    generator_ms = 1000 * line["util_client"] / line["tps"]  # 1 CPU: U x 1 / X
    server_ms = 1000 * line["util_node0"] / line["tps"]
    assert 0 < generator_ms < server_ms, line.to_dict()  # pgbench is the lighter side
    set_machine_cpus(b_group, CAP_SHARE * generator_ms / server_ms)
    # one study, auto over [B, A]: its first row measured from B alone is the study of B alone
    # (superseded, kept in measurement.json); a study from B alone would repeat it
    work = study_of(tmp_path / "auto", site_file, [b, a], nodes, POINT_READS, auto=True,
                    clients=[4], max_clients=4, seconds=3)  # fmt: skip
    done = run_snakemake(  # the findings: no chart needed
        work, "results/findings.md", configfile="config/generators.yaml", timeout=900
    )
    assert done.returncode == 0, failed(done)
    ceilings = pd.read_csv(work / "results" / "ceilings.csv")
    findings = (work / "results" / "findings.md").read_text()
    runs = work / "results" / "runs"
    order = pd.read_csv(work / "results" / "run_order.csv").sort_values("executed")["run"]
    first, *later = order.tolist()
    growth = {run: json.loads((runs / run / "measurement.json").read_text())
              ["load_generator_growth"] for run in order}  # fmt: skip
    grown = growth[first]["grown"]  # the first row: from B alone to B and A at 4 clients
    assert [(g["clients"], g["generators"], g["to"]) for g in grown] == [(4, 1, 2)], growth
    assert grown[0]["utilisation"]["client"] >= 0.5 and not growth[first]["bound_reached"]
    (old,) = growth[first]["superseded"]  # its measurement with B alone, kept
    assert old["line"]["bottleneck"] == "client" and old["line"]["generators"] == 1
    assert all(growth[run]["start"] == 2 and not growth[run]["grown"] for run in later), growth
    for run in order:  # two generators split the clients: none is client-bound (the definition
        # auto grows by). Which part is then the busiest is the machine's: on a shared 2-core
        # machine the uncapped A (client1) was once, below SATURATED, in CI
        line = pd.read_csv(runs / run / "throughput.csv").iloc[0]
        assert line["generators"] == 2, line
        assert not client_bound(line["bottleneck"], line["bottleneck_util"]), line.to_dict()
    # B alone was client-bound by the definition auto grows by (its superseded line)
    assert client_bound(old["line"]["bottleneck"], old["line"]["bottleneck_util"]), old["line"]
    bound = ceilings[["run", "bottleneck", "bottleneck_utilisation"]]
    assert generator_bound(ceilings).empty, bound
    assert "0 of 2 rows are client-bound" in findings
    assert f"Load generators added by auto where they were the bottleneck ({first} 1 → 2 at 4 " in (
        " ".join(findings.split())
    )
    # (not asserted: that k = 2 measures more than B alone. It does by about 1/CAP_SHARE on a
    # quiet machine, but 3-s runs on a shared 2-core machine once gave k = 2 the lower mean,
    # one row at two thirds of the others: a timed comparison, printed here, not tested)
    print(f"generator {generator_ms:.4f} ms/tx, server {server_ms:.4f} ms/tx; "
          f"B alone {old['line']['tps']:.0f} {old['line']['bottleneck']}; "
          f"k=2 {ceilings['empirical_tps'].round().tolist()} "
          f"{ceilings['bottleneck'].tolist()}")  # fmt: skip
