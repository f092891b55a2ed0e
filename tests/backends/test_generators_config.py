"""Several load generators in the config (issue 38). gcp.load_generators: the plan counts and
prices every generator VM, the Pulumi program creates them (each reaching the tservers' sshd),
`auto` sizes them from the cluster's vCPUs, and a count the clusters cannot use is refused at
dry-run time naming the field; existing.load_generators: checked the same way."""

from __future__ import annotations

import pulumi
import pytest
import yaml
from test_infra import RecordingMocks, instances, make_args, settle
from test_plan import CONFIG, RATES, plan_of
from ybscale_infra import IAP_RANGE, YugabyteCluster

from ybscale import study
from ybscale.backends.gcp import plan as plan_mod
from ybscale.backends.gcp.clusters import definition
from ybscale.backends.gcp.config import gcp_section, load_generators
from ybscale.backends.gcp.stacks import cluster_args, vm_names
from ybscale.design.row import RowError
from ybscale.settings import SettingsError


def with_generators(k) -> dict:
    return {**CONFIG, "gcp": {**CONFIG["gcp"], "load_generators": k}}


def test_three_load_generators_are_three_vms_per_cluster_in_the_plan():
    one, three = plan_of(CONFIG), plan_of(with_generators(3))
    assert [c.cluster for c in three.clusters] == [c.cluster for c in one.clusters]
    for a, b in zip(one.clusters, three.clusters, strict=True):
        assert b.loadgens == 3 and b.vms == a.vms + 2
        assert b.machine_types["e2-standard-4"] == 3  # machine_types.loadgen, three of them
    assert sum(c.vms for c in three.clusters) == 60 + 8 * 2
    # priced: two more e2-standard-4 per cluster, for as long as the cluster lives
    extra = sum(2 * RATES["vm_hour"]["e2-standard-4"] * c.hours_min for c in three.clusters)
    vms = three.costs(worst=False)["VMs"] - one.costs(worst=False)["VMs"]
    assert vms == pytest.approx(extra)
    # the quota: E2 vCPUs at the peak, 4 each, three per live cluster (two slots)
    assert one.peaks["E2_CPUS"][1] == 2 * 4 and three.peaks["E2_CPUS"][1] == 2 * 3 * 4
    text = plan_mod.format_plan(three)
    assert "loadgens" in text and "3x e2-standard-4" in text


def test_public_load_generators_each_pay_for_an_address():
    public = {"ssh_access": "public", "ssh_source_cidr": "198.51.100.7/32", "load_generators": 3}
    p = plan_of({**CONFIG, "gcp": {**CONFIG["gcp"], **public}})
    assert {c.external_ips for c in p.clusters} == {1 + 3}  # the NAT's and one per generator


def test_auto_sizes_the_generators_from_the_clusters_vcpus():
    settings = gcp_section(with_generators("auto"))  # loadgen e2-standard-4: 4 vCPUs
    assert load_generators(settings, 3, "n2-standard-2") == 1  # 6 tserver vCPUs / 8
    assert load_generators(settings, 5, "n2-standard-4") == 3  # 20 / 8, rounded up
    assert load_generators(settings, 2, "n2-standard-32") == 2  # never more than the tservers
    by = {c.cluster: c.loadgens for c in plan_of(with_generators("auto")).clusters}
    assert by["nodes3-small-reploff"] == 1 and by["nodes5-large-replon"] == 3


def test_a_bad_count_names_the_field():
    with pytest.raises(SettingsError, match="gcp.load_generators"):
        gcp_section(with_generators(0))
    with pytest.raises(SettingsError, match="gcp.load_generators"):
        gcp_section(with_generators("many"))
    with pytest.raises(RowError, match=r"gcp.load_generators: 4 load generators, but "
                       r"nodes3-small-reploff has 3 tserver\(s\)"):  # fmt: skip
        study.load(with_generators(4))  # what the Snakefile does at parse time (`-n` too)


def test_the_stacks_args_and_definition_carry_the_count():
    import datetime as dt

    loaded = study.load(with_generators(3))
    row = loaded.rows[0]
    args = cluster_args(row.combination, gcp_section(loaded.settings), dt.datetime.now(dt.UTC),
                        "ssh-ed25519 AAAA k", row.cluster, row.server)  # fmt: skip
    assert args.load_generators == 3
    assert vm_names("s", args)[-3:] == ["s-loadgen", "s-loadgen-1", "s-loadgen-2"]
    assert definition(loaded.settings, row)["load_generators"] == 3
    # one generator (the default) leaves the definition as it was: no cluster re-runs
    assert "load_generators" not in definition(study.load(CONFIG).settings, row)


@pytest.fixture
def mocks():
    m = RecordingMocks()
    pulumi.runtime.set_mocks(m, project="ybscale", stack="test", preview=False)
    return m


@pulumi.runtime.test
def test_the_program_creates_every_generator_and_lets_each_reach_the_tservers(mocks):
    cluster = YugabyteCluster("ybscale-c", make_args(nodes=3, load_generators=2))

    def check(outputs):
        loadgens = instances(mocks, "loadgen")
        assert sorted(vm["name"] for vm in loadgens) == ["ybscale-c-loadgen", "ybscale-c-loadgen-1"]
        ips = [vm["networkInterfaces"][0]["networkIp"] for vm in loadgens]
        assert sorted(outputs["loadgen_private_ips"]) == sorted(ips)
        assert len(outputs["loadgen_ips"]) == len(outputs["loadgen_names"]) == 2
        assert outputs["loadgen_ip"] == outputs["loadgen_ips"][0]  # the first, as with one
        rules = {r["name"]: r for _, r in mocks.of_type("Firewall")}
        want = [IAP_RANGE, *(f"{ip}/32" for ip in outputs["loadgen_private_ips"])]
        assert rules["ybscale-c-fw-ssh-db"]["sourceRanges"] == want

    return settle(cluster, check)


def test_the_program_refuses_more_generators_than_tservers():
    with pytest.raises(ValueError, match="load_generators must be 1 to nodes"):
        make_args(nodes=2, load_generators=3)


def test_existing_generators_are_checked_at_dry_run_time_naming_the_field():
    """existing.load_generators: a list of logins (defaults filled in each), never beside
    existing.load_generator, at most one per host of every combination a row is measured on."""
    from conftest import row_from_levels

    from ybscale.backends.existing import backend as existing

    login = {"host": "lg1.example", "user": "u", "key": "k"}
    two = [login, {**login, "host": "lg2.example"}]
    combos = {"nodes2-small-reploff": {"hosts": ["db1", "db2"]},
              "nodes1-small-reploff": {"hosts": ["db1"]}}  # fmt: skip
    settings = existing.validate_section({"existing": {"combinations": combos,
                                                       "load_generators": two}})  # fmt: skip
    assert [g["port"] for g in settings["load_generators"]] == [22, 22]
    assert [g["host"] for g in existing.logins(settings)] == ["lg1.example", "lg2.example"]
    rows = [row_from_levels({"nodes": n, "node_size": "small", "replication": "off",
                             "workload": "read"}, 100, f"run0{n}") for n in (1, 2)]  # fmt: skip
    errors = existing.generator_errors(settings, rows)
    assert errors == [
        "config/config.yaml: existing.load_generators: 2 load generators, but "
        "existing.combinations.nodes1-small-reploff has 1 host(s): each generator drives whole "
        "hosts, at most one generator per host"
    ]
    both = existing.validate_section({"existing": {"combinations": combos, "load_generator": login,
                                                   "load_generators": two}})  # fmt: skip
    assert "are both set" in existing.generator_errors(both, rows[1:])[0]
    with pytest.raises(ValueError, match=r"existing.load_generators.1: 'host' is a required"):
        existing.validate_section({"existing": {"load_generators": [login, {"user": "u"}]}})
    one = existing.validate_section({"existing": {"load_generator": login}})
    assert existing.logins(one) == [one["load_generator"]]  # load_generator keeps working


def test_existing_auto_needs_a_pool_of_two_logins_named_at_dry_run_time():
    """existing.load_generators_auto grows through existing.load_generators: one login (or
    none) is nothing to grow through; the setting is a boolean."""
    from conftest import row_from_levels

    from ybscale.backends.existing import backend as existing

    login = {"host": "lg1.example", "user": "u", "key": "k"}
    combos = {"nodes2-small-reploff": {"hosts": ["db1", "db2"]}}
    row = row_from_levels({"nodes": 2, "node_size": "small", "replication": "off",
                           "workload": "read"}, 100, "run01")  # fmt: skip
    for logins in ([login], None):
        one = existing.validate_section({"existing": {"combinations": combos,
                                                      "load_generators": logins,
                                                      "load_generators_auto": True}})  # fmt: skip
        (error,) = existing.generator_errors(one, [row])
        assert error.startswith(
            "config/config.yaml: existing.load_generators_auto: existing.load_generators_auto "
            f"needs at least two logins in existing.load_generators to add from (it has "
            f"{len(logins or [])})"
        )
    two = [login, {**login, "host": "lg2.example"}]
    pool = existing.validate_section({"existing": {"combinations": combos, "load_generators": two,
                                                   "load_generators_auto": True}})  # fmt: skip
    assert existing.generator_errors(pool, [row]) == []
    assert existing.validate_section({"existing": {}})["load_generators_auto"] is False
    with pytest.raises(ValueError, match=r"existing.load_generators_auto: 'yes' is not of type"):
        existing.validate_section({"existing": {"load_generators_auto": "yes"}})


def test_a_spare_generator_joins_with_its_facts_clock_and_cpu():
    """YsqlCluster.add_generator (existing.load_generators_auto): the next spare drives the
    second node from then on; the record, the CPU readers and the names follow (`client` becomes
    `client0`, `client1`); with none left it says so."""
    from conftest import row_from_levels

    from ybscale.backends.base import BackendError, Endpoint
    from ybscale.backends.ysql import YsqlCluster
    from ybscale.measure.generators import ClockOffset

    class Runner:
        def __init__(self, where: str):
            self.where = where

        def facts(self, pgbench):
            return {"cores": 2, "pgbench_version": f"pgbench on {self.where}"}

        def clock_offset(self):
            return ClockOffset(0.001, 0.0005, 9)

        def proc_stat(self):
            return "cpu  1 0 1 10 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0\n"

    nodes = [Endpoint("db", 5433 + i, "yugabyte", "yugabyte", role=f"node{i}") for i in (0, 1)]
    row = row_from_levels({"nodes": 2, "node_size": "small", "replication": "off",
                           "workload": "read"}, 100)  # fmt: skip
    first, spare = Runner("lg1"), Runner("lg2")
    cluster = YsqlCluster(nodes, row, first, generators=[first], spare=[spare], auto=True)
    record = cluster.generators_record()
    assert (cluster.generator_bound(), [g["name"] for g in record]) == (2, ["client"])
    assert [t.generator for t in cluster.targets("read")] == [0, 0]
    cluster.add_generator()
    assert [t.generator for t in cluster.targets("read")] == [0, 1]
    assert [(g["name"], g["where"]) for g in record] == [("client0", "lg1"), ("client1", "lg2")]
    assert set(cluster.cpu_seconds()) == {"client0", "client1", "steal_client0", "steal_client1"}
    assert cluster.cpu_capacity() == {"client0": 2.0, "client1": 2.0}
    assert cluster.generator_bound() == 2
    with pytest.raises(BackendError, match="no load generator to add"):
        cluster.add_generator()
    fixed = YsqlCluster(nodes, row, first, generators=[first, spare])
    assert fixed.generator_bound() is None
    # gcp's spares are made as they join (their VM created then): counted, not made before
    made = []
    lazy = YsqlCluster(nodes, row, first, generators=[first],
                       spare=[lambda: made.append("vm") or spare], auto=True)  # fmt: skip
    assert (lazy.generator_bound(), made) == (2, [])
    lazy.add_generator()
    assert made == ["vm"] and [g["where"] for g in lazy.generators_record()] == ["lg1", "lg2"]


def with_auto(**gcp) -> dict:
    return {**CONFIG, "gcp": {**CONFIG["gcp"], "load_generators": "auto", **gcp}}


def test_the_bound_of_auto_on_gcp_is_checked_at_dry_run_time_naming_file_and_field(tmp_path):
    """gcp.load_generators_max (issue 38): below auto's starting count of a cluster (the vCPU
    rule: 3 for 5 n2-standard-4 tservers driven from e2-standard-4), or set without auto, is
    refused when the study is loaded (`snakemake -n`), naming the file that set it."""
    from ybscale.config_sources import file_sources, sources_in_use

    mine = tmp_path / "mine.yaml"
    for gcp, expected in (
        ({"load_generators": "auto", "load_generators_max": 2},
         r"mine.yaml: gcp.load_generators_max: 2, below the 3 load generators auto starts "
         r"nodes5-large-reploff with \(5 x n2-standard-4"),
        ({"load_generators": 2, "load_generators_max": 3},
         r"mine.yaml: gcp.load_generators_max: only meaningful with gcp.load_generators: auto"),
    ):  # fmt: skip
        mine.write_text(yaml.safe_dump({"gcp": gcp}))
        config = {**CONFIG, "gcp": {**CONFIG["gcp"], **gcp}}
        with sources_in_use(file_sources([str(mine)])), pytest.raises(RowError, match=expected):
            study.load(config)
    with pytest.raises(SettingsError, match="gcp.load_generators_max"):
        gcp_section(with_auto(load_generators_max=0))
    study.load(with_auto(load_generators_max=3))  # every cluster starts with 3 or fewer
    settings = gcp_section(with_auto())
    assert settings["load_generators_max"] is None  # default: the tservers


def test_the_plan_prices_autos_bound_beside_its_start():
    """`ybscale plan` with auto and gcp.load_generators_max: 4: each cluster's start (the vCPU
    rule) as scheduled, its bound (4, at most its tservers) as the worst case: VMs, E2 vCPUs
    at the peak, cost."""
    start, grown = plan_of(with_auto()), plan_of(with_auto(load_generators_max=4))
    by = {c.cluster: c for c in grown.clusters}
    small, large = by["nodes3-small-reploff"], by["nodes5-large-reploff"]
    assert (small.loadgens, small.loadgens_max) == (1, 3)  # at most one per tserver
    assert (large.loadgens, large.loadgens_max) == (3, 4)
    assert small.at_bound().machine_types["e2-standard-4"] == 3
    assert small.at_bound().vms == small.vms + 2
    # as scheduled: the starting counts, as before the bound existed
    assert grown.cost(worst=False) == pytest.approx(start.cost(worst=False))
    assert grown.peaks == start.peaks
    # the worst case: every cluster at its bound until max_run_duration
    extra = sum(
        (c.at_bound().loadgens - c.loadgens) * RATES["vm_hour"]["e2-standard-4"] * c.hours_max
        for c in grown.clusters
    )
    fixed = plan_of(with_generators(1))
    assert extra > 0
    worst_vms = grown.costs()["VMs"] - fixed.costs()["VMs"]
    started = sum((c.loadgens - 1) * RATES["vm_hour"]["e2-standard-4"] * c.hours_max
                  for c in grown.clusters)  # fmt: skip
    assert worst_vms == pytest.approx(started + extra)
    assert grown.vm_hours() > plan_of(with_auto(load_generators_max=3)).vm_hours()
    live = max(grown.peaks_max["E2_CPUS"][1], 0)
    assert live > grown.peaks["E2_CPUS"][1] and live % 4 == 0
    text = plan_mod.format_plan(grown)
    assert "1-3" in text and "1x e2-standard-4 (up to 3)" in text
    assert "gcp.load_generators_max" in text and "at auto's bound" in text
