"""Issue 59, item 4: the dry run and `ybscale plan` check, for every gcp cluster, the sweep's
largest client count per tserver against the YSQL connections a tserver takes, and a block
cache against the tserver's memory, by YugabyteDB's own rules. The facts relied on (each cited
in src/ybscale/backends/gcp/limits.py; read from the stored yugabyte/yugabyte-db sources, not
from a checkout of the tag 2024.2.1.0-b185, which cannot be fetched here):

- connections: `ysql_max_connections` when set above 0 (src/yb/yql/pgwrapper/pg_wrapper.cc:
  a PG flag, appended to ysql_pg.conf after --ysql_pg_conf_csv, so it wins over a
  `max_connections` setting); unset, what the tserver's local initdb wrote
  (src/postgres/src/bin/initdb/initdb.c, test_config_settings: trial_conns 300, 100, 50, 40,
  30, 20, the first `postgres --check` accepts with 10 shared buffers per connection): 300 on a
  Linux VM of any size, the probe asking for 24 MB of shared memory, not for RAM. The
  yb-tserver reference page (v2024.2) says 50 to 300 per node. pgbench connects as the
  superuser `yugabyte` and holds exactly -c connections (PostgreSQL 15: max_connections 4
  runs -c 4, refuses -c 5 "sorry, too many clients already").
- memory limit: memory_limit_hard_bytes, else default_memory_limit_to_ram_ratio x RAM
  (src/yb/util/mem_tracker.cc, CreateRootTracker); the ratio's default for a tserver with
  use_memory_defaults_optimized_for_ysql (ybscale sets it): 0.45, 0.48, 0.57, 0.60 of RAM up to
  4, 8, 16 GiB and above, 0.85 without it (src/yb/tserver/server_main_util.cc at c624a4f6,
  AdjustMemoryLimitsIfNeeded; `_GB` is 2^30, src/yb/util/size_literals.h).
- block cache: db_block_cache_size_bytes (-1: a percentage, -2: none), else
  db_block_cache_size_percentage of the memory limit (32 with the YSQL defaults, 50 without;
  outside (0, 100] the tserver stops at start, a CHECK); memtables 10 % of the limit, at most
  2048 MiB (src/yb/tserver/tablet_memory_manager.cc). Both flags are defined for yb-master too:
  ybscale gives them to the tservers only (stacks.TSERVER_ONLY).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, failed, snakemake
from designs import seed_design_path, seed_study

from ybscale import plan as plan_verb
from ybscale import study
from ybscale.backends.gcp import limits
from ybscale.measure.measuring import MeasuringProtocol

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
CONFIG = {
    "design": str(seed_design_path()),
    "backend": "gcp",
    "workloads": str(ROOT / "workloads"),
    "measurement": {"clients": [1, 2, 4, 8, 16, 32], "sweep": "adaptive"},
}


def config(measurement=None, server=None, design=None) -> dict:
    out = {**CONFIG, "measurement": {**CONFIG["measurement"], **(measurement or {})}}
    if server:
        out["defaults"] = {"server": server}
    if design:
        out["design"] = str(design)
    return out


def refused(cfg: dict) -> str:
    with pytest.raises(study.RowError) as info:
        study.load(cfg)
    return str(info.value)


def test_the_largest_count_is_the_grid_doubled_up_to_max_clients_as_the_sweeps_grow_it():
    """adaptive and economy double the grid's largest count up to measurement.max_clients
    (adaptive.extension_counts: 32, 64, 128, ... the last one max_clients itself); grid never
    grows; max_clients null is 4 x the grid's largest."""

    def largest(**measurement):
        return MeasuringProtocol.of({"clients": [1, 2, 4, 8, 16, 32], **measurement})

    assert largest(sweep="adaptive", max_clients=1024).largest_count() == 1024
    assert largest(sweep="economy", max_clients=100).largest_count() == 100  # 64, then 100
    assert largest(sweep="adaptive").largest_count() == 128  # null: 4 x 32
    assert largest(sweep="grid", max_clients=1024).largest_count() == 32
    assert limits.clients_per_tserver(1024, 3) == 342  # 1024 split over 3: 342, 341, 341


def test_a_tservers_memory_limit_and_block_cache_follow_yugabytedbs_split_of_its_ram():
    small = limits.TserverMemory.of("n2-standard-2", {})
    assert small.ram == 8 * GIB and small.ratio == 0.48  # 4 < RAM <= 8 GiB
    assert small.limit == int(8 * GIB * 0.48) and small.cache == int(small.limit * 0.32)
    assert small.memtables == int(small.limit * 0.10) and small.cache_field is None
    assert limits.TserverMemory.of("e2-medium", {}).ratio == 0.45  # 4 GiB
    assert limits.TserverMemory.of("n2-standard-4", {}).ratio == 0.57  # 16 GiB
    big = limits.TserverMemory.of("n2-highmem-8", {})  # 64 GiB: 0.60, memtables at 2048 MiB
    assert big.ratio == 0.60 and big.memtables == 2048 * 2**20
    legacy = limits.TserverMemory.of(
        "n2-standard-2", {"use_memory_defaults_optimized_for_ysql": "off"}
    )
    assert legacy.ratio == 0.85 and legacy.cache == int(legacy.limit * 0.50)
    hard = limits.TserverMemory.of("n2-standard-2", {"memory_limit_hard_bytes": str(2 * GIB)})
    assert (hard.limit, hard.ratio) == (2 * GIB, None)
    sized = limits.TserverMemory.of("n2-custom-6-23040", {"db_block_cache_size_percentage": "40"})
    assert sized.ram == 23040 * 2**20 and sized.cache == int(sized.limit * 0.40)
    assert limits.TserverMemory.of("n2-standard-2", {"db_block_cache_size_bytes": "-2"}).cache == 0
    assert limits.TserverMemory.of("m3-ultramem-32", {}) is None  # not in the table: unchecked


def test_a_tserver_takes_300_ysql_connections_unless_a_setting_says_otherwise():
    assert limits.Connections.of({}).limit == 300
    assert limits.Connections.of({"ysql_max_connections": "0"}).limit == 300  # 0: unset
    assert limits.Connections.of({"ysql_max_connections": "500"}).limit == 500
    assert limits.Connections.of({"max_connections": "400"}).limit == 400  # a YSQL setting
    both = {"max_connections": "400", "ysql_max_connections": "200"}
    assert limits.Connections.of(both) == limits.Connections(200, "ysql_max_connections")


def test_a_sweep_that_grows_past_the_tservers_connections_is_refused_naming_file_and_field():
    """The issue's grid: doubling to 1,024 clients on 3 tservers asks 342 connections of each,
    more than the 300 a tserver takes: refused, naming measurement.max_clients and the node
    level; on 5 tservers (205 each) it would run. 900 = 300 x 3 passes, as does 1,024 with
    server.ysql_max_connections 400; a grid's own largest count names measurement.clients."""
    message = refused(config({"max_clients": 1024}))
    assert message.count("\n") == 0, message  # one line: the 5-tserver clusters are fine
    assert message.startswith(
        "config/config.yaml: measurement.max_clients: the adaptive sweep may grow to 1,024 "
        "clients (measurement.clients doubled up to measurement.max_clients 1,024): 342 per "
        f"tserver on 3 tservers (cluster.nodes 3, {seed_design_path()}: factors.C.levels[0]), "
        "more than the 300 YSQL connections per tserver (ysql_max_connections unset"
    ), message
    assert "keep the sweep at 900 clients or fewer" in message
    assert "set server.ysql_max_connections to 342 or more" in message
    assert len(study.load(config({"max_clients": 900})).rows) == 16
    assert study.load(config({"max_clients": 1024}, {"ysql_max_connections": 400})).rows
    grid = refused(config({"sweep": "grid", "clients": [1, 1000]}))
    assert grid.startswith("config/config.yaml: measurement.clients: the sweep runs up to 1,000")
    assert "334 per tserver on 3 tservers" in grid


def test_a_block_cache_beyond_the_tservers_memory_share_is_refused_naming_file_and_field(
    tmp_path,
):
    """A 6 GiB block cache on an n2-standard-2 tserver (8 GiB: a 3.84 GiB memory limit, 0.38
    GiB of it for memtables) is refused naming the level that sets it and the machine type's
    field; on the large nodes (n2-standard-4, 16 GiB: 9.12 GiB, room for 8.2) it is not; 3 GiB
    passes on both. A percentage that leaves the memtables no room, or that the tserver
    refuses at start, is refused too."""
    design = seed_study()
    design["factors"]["D"] = {
        "name": "block_cache",
        "sets": "server.db_block_cache_size_bytes",
        "levels": [GIB, 6 * GIB],
    }
    path = tmp_path / "cache.yaml"
    path.write_text(yaml.safe_dump(design))
    message = refused(config(design=path))
    assert message.count("\n") == 0, message  # the small nodes only
    assert message.startswith(
        f"{path}: factors.D.levels[1]: server.db_block_cache_size_bytes: 6442450944: a block "
        "cache of 6.00 GiB on each tserver of n2-standard-2, 8.00 GiB (config/config.yaml: "
        "gcp.machine_types.small), more than the 3.46 GiB left beside its memtables (0.38 GiB: "
        "global_memstore_size_percentage) by a memory limit of 3.84 GiB = 0.48 x 8.00 GiB of RAM"
    ), message
    design["factors"]["D"]["levels"] = [GIB, 3 * GIB]
    path.write_text(yaml.safe_dump(design))
    assert len(study.load(config(design=path)).rows) == 16
    for percentage, why in ((95, "more than the"), (150, "not a percentage in (0, 100]")):
        text = refused(config(server={"db_block_cache_size_percentage": percentage}))
        assert f"server.db_block_cache_size_percentage: {percentage}: " in text and why in text
    assert study.load(config(server={"db_block_cache_size_percentage": 60})).rows


def test_a_servers_memory_flags_go_to_its_tservers_only():
    """db_block_cache_size_bytes and the other memory-division flags are defined for both
    servers (the catalogue routes a flag of both to both): sized for the node size's machine,
    they reach the tservers only; a flag of the masters still reaches them."""
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.design.row import ClusterShape

    settings = gcp_section({"gcp": {"project": "p", "owner": "ada"}})
    server = {"db_block_cache_size_bytes": str(GIB), "memory_limit_hard_bytes": str(4 * GIB),
              "db_block_cache_size_percentage": "40",
              "load_balancer_max_concurrent_moves": "4"}  # fmt: skip
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    args = stacks.cluster_args(
        "c", settings, now, "ssh-ed25519 AAAA k", ClusterShape(3, "small", False), server
    )
    for name in ("db_block_cache_size_bytes", "memory_limit_hard_bytes",
                 "db_block_cache_size_percentage"):  # fmt: skip
        assert args.tserver_flags[name] == server[name] and name not in args.master_flags
    assert args.master_flags["load_balancer_max_concurrent_moves"] == "4"
    assert args.master_flags["use_memory_defaults_optimized_for_ysql"] == "true"


def test_the_plan_prints_each_clusters_tservers_and_refuses_too_many_clients(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config({"max_clients": 600})))
    assert plan_verb.main(["--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    block = out.split("Per tserver at the sweep's largest count, 600 clients", 1)[1]
    block = block.split("\n\n", 1)[0].splitlines()
    line = next(x for x in block if x.startswith("  nodes3-small-reploff "))
    assert line.split(None, 1)[1] == (
        "200 of 300 YSQL connections; 8.00 GiB RAM, memory limit 3.84 GiB, block cache 1.23 GiB"
    )
    line = next(x for x in block if x.startswith("  nodes5-large-replon "))
    assert "120 of 300 YSQL connections; 16.0 GiB RAM, memory limit 9.12 GiB" in line
    cfg.write_text(yaml.safe_dump(config({"max_clients": 1024})))
    assert plan_verb.main(["--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ybscale plan: {cfg}: measurement.max_clients: ") and "342 per" in err


def test_the_dry_run_refuses_too_many_clients_and_a_block_cache_beyond_the_memory_share(
    tmp_path,
):
    """`snakemake -n` on the gcp profile: a sweep doubling to 1,024 clients on the seed
    design's 3-tserver clusters, and a 6 GiB block cache on its small (n2-standard-2) nodes,
    each refused in one line naming the file and field that asked for it; 900 clients and a
    3 GiB cache dry-run."""
    work = copy_workflow(tmp_path / "w")
    profiles = {
        "many.yaml": {"measurement": {"sweep": "adaptive", "max_clients": 1024}},
        "cache.yaml": {"defaults": {"server": {"db_block_cache_size_bytes": 6 * GIB}}},
        "enough.yaml": {"measurement": {"sweep": "adaptive", "max_clients": 900},
                        "defaults": {"server": {"db_block_cache_size_bytes": 3 * GIB}}},
    }  # fmt: skip
    for name, profile in profiles.items():
        (work / "config" / name).write_text(yaml.safe_dump(profile))

    def dry_run(profile: str):
        return snakemake(work, "-n", "results/effects.csv", "--configfile", "config/gcp.yaml",
                         f"config/{profile}", timeout=300)  # fmt: skip

    out = dry_run("many.yaml")
    assert out.returncode == 1, failed(out)
    [line] = [x for x in out.stderr.splitlines() if "measurement.max_clients" in x]
    assert line.startswith("config/many.yaml: measurement.max_clients: the adaptive sweep may "
                           "grow to 1,024 clients"), line  # fmt: skip
    assert "342 per tserver on 3 tservers" in line and "Traceback" not in out.stderr
    out = dry_run("cache.yaml")
    assert out.returncode == 1, failed(out)
    [line] = [x for x in out.stderr.splitlines() if "db_block_cache_size_bytes" in x]
    assert line.startswith(
        "config/cache.yaml: defaults.server.db_block_cache_size_bytes: "
        "server.db_block_cache_size_bytes: 6442450944: a block cache of 6.00 GiB on each tserver "
        "of n2-standard-2, 8.00 GiB (config/gcp.yaml: gcp.machine_types.small)"
    ), line
    out = dry_run("enough.yaml")
    assert out.returncode == 0, failed(out)
    assert "cluster_up" in out.stdout and "measure" in out.stdout, failed(out)


def test_each_row_reads_every_tservers_connection_limit_before_it_measures():
    """What the dry run assumed (300, or the flag) is read back from every tserver (SHOW
    max_connections) into the row's record; a tserver that takes fewer connections than the
    sweep's largest count gives it fails the row before it measures, naming it."""
    from ybscale.backends.base import BackendError

    class Cluster:
        endpoints = ["a", "b"]
        shown = {"a": "300", "b": "100"}

        def name(self, ep):
            return f"tserver-{ep}"

        def psql(self, sql, ep, timeout):
            assert sql == "SHOW max_connections;"
            return self.shown[ep] + "\n"

    assert limits.connections_in_effect(Cluster(), 100) == {"tserver-a": 300, "tserver-b": 100}
    with pytest.raises(BackendError, match=r"max_connections \{'tserver-b': 100\}: fewer than"):
        limits.connections_in_effect(Cluster(), 101)
