"""`ybscale plan` on the seed design: clusters, VMs, VM-hours, cost and wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from designs import seed_design_path, seed_study

from ybscale import plan as plan_verb
from ybscale import study
from ybscale.backends.gcp import plan as plan_mod
from ybscale.backends.gcp import reap
from ybscale.measure import measuring

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENT = {
    "clients": [1, 2, 4, 8],
    "repetitions": 2,
    "max_repetitions": 2,
    "sweep": "grid",
    "seconds": 10,
    "warmup": 5,
}
RATES = {
    "vm_hour": {"n2-standard-2": 0.1, "n2-standard-4": 0.2, "e2-standard-4": 0.15},
    "disk_gb_month": {"pd-ssd": 0.146},
    "nat_vm_hour": 0.001,
    "nat_gb": 0.05,
    "ip_hour": 0.004,
    "egress_gb": 0.1,
}
CONFIG = {
    "design": str(seed_design_path()),
    "backend": "gcp",
    "workloads": str(ROOT / "workloads"),
    "measurement": MEASUREMENT,
    "defaults": {"dataset": {"rows": 20000}},
    "gcp": {"provisioning_minutes": 12, "prices": {"us-central1": RATES}},
}


def plan_of(config, combos=None, **kwargs):
    loaded = study.load(config)
    return plan_mod.plan(loaded.rows, loaded.settings, combos, **kwargs)


@pytest.fixture(scope="module")
def seed():
    return study.load(CONFIG)


def test_seed_design_needs_eight_clusters(seed):
    p = plan_of(CONFIG)
    assert len(p.clusters) == 8 and all(len(c.runs) == 2 for c in p.clusters)
    by = {c.cluster: c for c in p.clusters}
    small = by["nodes3-small-reploff"]
    assert (small.masters, small.tservers, small.vms) == (1, 3, 5)
    assert small.machine_types == {"n2-standard-2": 4, "e2-standard-4": 1}
    big = by["nodes5-large-replon"]
    assert (big.masters, big.tservers, big.vms) == (5, 5, 11)
    assert big.machine_types == {"n2-standard-4": 5, "n2-standard-2": 5, "e2-standard-4": 1}
    assert sum(c.vms for c in p.clusters) == 60


def test_times_and_cost(seed):
    p = plan_of(CONFIG)
    # per client count: 5 warm-up + 2 x 10 s + 15 s overhead = 40 s; 4 counts = 160 s;
    # loading 20000 rows takes 1 s: once per row, read or write (write.sql only inserts new
    # keys: its repetitions are restored, not reloaded); a write row's 7 restores (before each
    # of its 8 repetitions but the first) each as long as the writing it undoes: the 4 counts'
    # warm-ups and repetitions but the last, 4 x 25 - 10 = 90 s (issue 59)
    read = seed.rows[0].run
    assert seed.rows[0].script == "read"
    assert p.row_seconds[read] == 161
    writes = {r.run for r in seed.rows if r.script == "write"}
    assert writes and {p.row_seconds[r] for r in writes} == {161 + 90}
    assert set(p.row_seconds.values()) == {161, 251}
    assert p.restores == {r: (7, 90.0) for r in writes}
    # every cluster: 12 min provisioning + its two rows (both read or both write: they differ
    # in isolation only); two slots of four, clusters in the measuring order (random): a slot
    # ends when its clusters' work does
    busy = {c.cluster: 12 * 60 + c.measure_seconds for c in p.clusters}
    ends = {}
    for c in p.clusters:
        ends[c.slot] = ends.get(c.slot, 0) + busy[c.cluster]
        assert c.end_seconds == ends[c.slot]
    assert p.wall_seconds == max(ends.values())
    assert {c.measure_seconds for c in p.clusters} == {2 * 161, 2 * 251}
    for c in p.clusters:
        assert c.hours_min == pytest.approx(0.2 + c.measure_seconds / 3600)
        assert c.hours_max == 8  # max_run_duration = ttl_hours deletes every VM
    vms = sum(
        n * RATES["vm_hour"][mt] * c.hours_max
        for c in p.clusters
        for mt, n in c.machine_types.items()
    )
    # 50 GB boot disk per VM at 0.146 / 730 per GB-hour; NAT per VM-hour; 1 GB per VM through
    # NAT; 0.01 GB per row back to you
    disks = sum(c.vms * 50 * 0.146 / 730 * c.hours_max for c in p.clusters)
    nat = sum(c.vms * 0.001 * c.hours_max for c in p.clusters)
    nat_ip = 8 * 0.004 * 8  # one NAT address per cluster (ssh_access iap: no other), 8 h each
    costs = p.costs()
    assert costs["VMs"] == pytest.approx(vms) and costs["disks"] == pytest.approx(disks)
    assert costs["Cloud NAT"] == pytest.approx(nat)
    assert costs["external IPs"] == pytest.approx(nat_ip)
    assert costs["NAT data"] == pytest.approx(60 * 1.0 * 0.05)
    assert costs["egress"] == pytest.approx(16 * 0.01 * 0.1)
    assert p.cost() == pytest.approx(vms + disks + nat + nat_ip + 3.0 + 0.016)
    assert p.vm_hours(False) < p.vm_hours()
    text = plan_mod.format_plan(p)
    assert (
        "8 clusters for 16 rows" in text and "ESTIMATE" in text and "gcp.prices.us-central1" in text
    )
    planned = sum(c.vms * 50 * 0.146 / 730 * c.hours_min for c in p.clusters)
    assert f"disks {planned:.2f}" in text and "not included: sustained/committed-use" in text
    assert "nodes5-large-replon" in text and "WARNING" not in text


def test_missing_price_is_flagged(seed):
    rates = {**RATES, "vm_hour": {"n2-standard-2": 0.1}, "disk_gb_month": {}}
    del rates["ip_hour"]
    config = {**CONFIG, "gcp": {"prices": {"us-central1": rates}}}
    p = plan_of(config)
    assert p.missing_prices == ["e2-standard-4", "external IP (ip_hour)", "n2-standard-4", "pd-ssd"]
    text = plan_mod.format_plan(p)
    assert (
        "WARNING: no price for e2-standard-4, external IP (ip_hour), n2-standard-4, pd-ssd in "
        "gcp.prices.us-central1" in text
    )


def test_a_public_load_generator_pays_for_its_address_too(seed):
    gcp = {**CONFIG["gcp"], "ssh_access": "public", "ssh_source_cidr": "203.0.113.7/32"}
    p = plan_of({**CONFIG, "gcp": gcp})
    assert {c.external_ips for c in p.clusters} == {2}  # the NAT's and the load generator's
    assert p.costs()["external IPs"] == pytest.approx(8 * 2 * 0.004 * 8)


def test_a_cluster_planned_near_its_ttl_is_warned(seed):
    """Issue 20, item 9: max_run_duration deletes a cluster's VMs at ttl_hours, measured or not.
    A cluster is planned for 12 min provisioning + its two rows (161 s each, 251 s with a write
    row's restores)."""
    text = plan_mod.format_plan(plan_of(CONFIG))  # ttl_hours 8: about 4 % of it
    assert "WARNING" not in text
    longest = max(plan_of(CONFIG).clusters, key=lambda c: c.hours_min)
    assert longest.hours_min == (12 * 60 + 251 + 251) / 3600
    ttl = longest.hours_min / 0.85
    p = plan_of({**CONFIG, "gcp": {**CONFIG["gcp"], "ttl_hours": ttl}})
    near = p.near_ttl()
    assert longest.cluster in [c.cluster for c in near]
    assert all(c.hours_min > 0.8 * ttl for c in near)
    assert all(c.hours_min <= 0.8 * ttl for c in p.clusters if c not in near)
    assert (
        f"WARNING: {longest.cluster} is planned for 0.3 h, 85% of gcp.ttl_hours {ttl:g}: "
        f"max_run_duration deletes its VMs at {ttl:g} h" in plan_mod.format_plan(p)
    )
    below = {**CONFIG, "gcp": {**CONFIG["gcp"], "ttl_hours": longest.hours_min / 0.75}}
    assert plan_of(below).near_ttl() == []


def test_a_changed_zone_never_keeps_another_regions_prices(seed):
    """Issue 9, 11: prices are per region; a region without prices is an error, not a default."""
    gcp = {**CONFIG["gcp"], "region": "europe-west4", "zone": "europe-west4-a"}
    config = {**CONFIG, "gcp": gcp}
    with pytest.raises(ValueError, match="gcp.prices.europe-west4: no prices for region europe-"):
        plan_of(config)
    config["gcp"]["zone"] = "us-central1-a"
    with pytest.raises(ValueError, match="gcp.zone: us-central1-a is not in gcp.region europe-"):
        plan_of(config)


def test_one_combination(seed):
    p = plan_of(CONFIG, ["nodes3-small-reploff"])
    assert [c.cluster for c in p.clusters] == ["nodes3-small-reploff"]
    assert len(p.row_seconds) == 2


def replicated(tmp_path, per_replicate=None):
    """The seed config on the seed design with 2 replications (and gcp.cluster_per_replicate)."""
    design = seed_study()
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump({**design, "replications": 2}))
    gcp = dict(CONFIG["gcp"])
    if per_replicate is not None:
        gcp["cluster_per_replicate"] = per_replicate
    return {**CONFIG, "design": str(path), "gcp": gcp}


def test_each_replicate_gets_clusters_of_its_own_unless_told_to_reuse(seed, tmp_path):
    """Issue 19, item 4: replicate 2 of a combination runs on <combination>-r2 by default, so
    the plan counts 16 clusters (and their cost); cluster_per_replicate false keeps 8."""
    loaded = study.load(replicated(tmp_path))
    fresh = plan_mod.plan(loaded.rows, loaded.settings)
    assert len(fresh.clusters) == 16 and all(len(c.runs) == 2 for c in fresh.clusters)
    by = {c.cluster: c for c in fresh.clusters}
    rows = {r.run: r for r in loaded.rows}
    assert {rows[r].replicate for r in by["nodes3-small-reploff-r2"].runs} == {2}
    assert {rows[r].replicate for r in by["nodes3-small-reploff"].runs} == {1}
    reused = plan_of(replicated(tmp_path, per_replicate=False))
    assert len(reused.clusters) == 8 and all(len(c.runs) == 4 for c in reused.clusters)
    assert fresh.cost(False) > reused.cost(False)  # 8 more provisionings and NAT addresses
    assert fresh.costs()["external IPs"] == pytest.approx(2 * reused.costs()["external IPs"])
    text = plan_mod.format_plan(fresh)
    assert "Plan: 16 clusters for 32 rows" in text
    assert "replicates on clusters of its own (gcp.cluster_per_replicate: true)" in text
    assert "nodes5-large-replon-r2" in text
    assert "share its cluster (gcp.cluster_per_replicate: false)" in plan_mod.format_plan(reused)
    chain = plan_mod.previous_in_slot(loaded.rows, loaded.settings)
    assert len(chain) == 16 and sum(before is None for before in chain.values()) == 2


def test_cluster_per_replicate_is_validated(tmp_path):
    with pytest.raises(ValueError, match="cluster_per_replicate: 'no' is not of type 'boolean'"):
        study.load(replicated(tmp_path, per_replicate="no"))


def test_main_prints_the_plan(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    assert plan_verb.main(["--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    # it opens with a table (issue 58): clusters, rows, VMs, hours and cost, as scheduled
    # and at most; the assumptions follow as notes, one line each
    lines = out.splitlines()
    assert lines[0] == "Plan: 8 clusters for 16 rows (60 VMs in all)"
    assert lines[1].split() == ["clusters", "rows", "VMs", "wall", "time", "VM-hours", "cost",
                                "USD"]  # fmt: skip
    scheduled = next(line for line in lines[2:6] if line.startswith("as scheduled "))
    assert scheduled.split()[2:5] == ["8", "16", "60"]
    at_most = next(line for line in lines[2:6] if line.startswith("at most "))
    assert float(at_most.split()[-1]) > float(scheduled.split()[-1])
    notes = out.split("\nNotes:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert notes and all(line.startswith("- ") for line in notes)
    # measurement.budget is one of them: the rounds the plan prices, or why there are none
    assert any(line.startswith("- measurement.budget") for line in notes), notes
    assert "C nodes -> cluster.nodes: 3 | 5" in out
    assert "E (= BC) replication -> cluster.replication: off | on" in out
    # the seed design's RF moves with its node count (issue 46, item 5): the plan says so
    assert (
        "Replication factor (= masters): RF 1 in 4 clusters, RF 3 in 2 clusters, RF 5 in 2 "
        "clusters; RF 1 with cluster.replication off, RF = the node count with it on (3, 5): "
        "the node count's effect there includes the RF's"
    ) in out
    cfg.write_text(yaml.safe_dump({**CONFIG, "gcp": {"zone": 3}, "design": "x"}))
    assert plan_verb.main(["--config", str(cfg)]) == 1
    assert f"{cfg}: gcp.zone: 3 is not of type 'string'" in capsys.readouterr().err


def test_reap_main_dry_run(tmp_path, capsys, monkeypatch):
    from test_stacks import FakeAuto

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"gcp": {"project": "p"}}))
    assert reap.main(["--config", str(cfg), "--dry-run"], auto=FakeAuto()) == 0
    assert "would destroy 0 expired stack(s)" in capsys.readouterr().out
    cfg.write_text(yaml.safe_dump({"gcp": {"project": "p", "zone": "europe-west1-b"}}))
    assert reap.main(["--config", str(cfg), "--dry-run"], auto=FakeAuto()) == 1
    assert f"{cfg}: gcp.zone: europe-west1-b is not in gcp.region" in capsys.readouterr().err


def test_state_lives_outside_results_and_the_plan_says_where(seed, tmp_path, monkeypatch):
    """`rm -rf results` must not forget running clusters (issue 9, 7)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    text = plan_mod.format_plan(plan_of(CONFIG))
    url = f"file://{tmp_path}/state/ybscale/pulumi-state"
    assert f"Pulumi state: {url} (outside results/" in text
    monkeypatch.delenv("XDG_STATE_HOME")
    from ybscale.backends.gcp.backend import validate_section

    default = validate_section({})["state_url"]
    assert default == f"file://{Path.home().resolve()}/.local/state/ybscale/pulumi-state"
    assert "results" not in default


def test_at_most_max_clusters_live_and_the_chain_that_enforces_it(seed):
    """Issue 9, 8: a slot brings its next cluster up only after destroying the previous one."""
    p = plan_of(CONFIG)
    assert p.max_clusters == 2 and {c.slot for c in p.clusters} == {0, 1}
    for t in sorted({c.start_seconds for c in p.clusters}):
        assert sum(c.start_seconds <= t < c.end_seconds for c in p.clusters) <= 2
    prev = plan_mod.previous_in_slot(seed.rows, seed.settings)
    firsts = [combo for combo, before in prev.items() if before is None]
    assert len(firsts) == 2 and len(prev) == 8
    by = {c.cluster: c for c in p.clusters}
    for combo, before in prev.items():
        if before is not None:
            assert by[before].end_seconds == by[combo].start_seconds
            assert by[before].slot == by[combo].slot
    one = plan_of({**CONFIG, "gcp": {**CONFIG["gcp"], "max_clusters": 1}})
    assert one.wall_seconds == 8 * 12 * 60 + sum(one.row_seconds.values())


def test_a_write_row_whose_script_changes_loaded_rows_is_planned_to_reload_every_repetition(
    seed, tmp_path
):
    """A script that updates loaded rows cannot be restored: its row is planned with a load
    (1 s) before each of its 4 counts x 2 repetitions, 7 s more than a restored write row's one
    load, and none of its 7 restores (90 s in all, `test_times_and_cost`)."""
    import dataclasses

    update = tmp_path / "update.sql"
    update.write_text("UPDATE kv SET v = md5(v) WHERE k = :shard;\n")
    write = next(r for r in seed.rows if r.script == "write")
    changed = dataclasses.replace(write, script_path=str(update))
    measurement = {**CONFIG["measurement"]}
    restored = plan_mod.row_seconds(write, measurement, 20_000)
    assert plan_mod.row_restores(write, measurement) == (7, 90.0)
    assert plan_mod.row_restores(changed, measurement) == (0, 0.0)
    assert plan_mod.row_seconds(changed, measurement, 20_000) == restored + 7 - 90
    # on hashed keys (hash sharding; `none` on YugabyteDB) a restore finds only the new-key
    # sequence's keys: a script that inserts keys of its own is reloaded there, restored on range
    own_keys = tmp_path / "own_keys.sql"
    own_keys.write_text("INSERT INTO kv (k, v) VALUES (:k + 10000000, 'x');\n")
    other = dataclasses.replace(write, script_path=str(own_keys))
    assert plan_mod.row_restores(other, measurement, "range") == (7, 90.0)
    assert plan_mod.row_restores(other, measurement, "hash") == (0, 0.0)
    assert plan_mod.row_restores(write, measurement, "hash") == (7, 90.0)  # nextval: restored


def test_the_plan_prints_each_restore_and_load_and_the_logs_egress_from_what_was_sent(
    tmp_path, capsys, monkeypatch
):
    """Issue 59, items 1 and 4: `ybscale plan` prints each cluster's load and, for its write
    rows, each restore's time (counted in the row's time), the study's measured restores
    beside the estimate, and the logs' egress: gcp.egress_gb_per_row until a gcp row recorded
    what its log copies sent (applied.logs_copied), then the largest bytes sent per second of
    one node's pgbench, x the row's tservers x the seconds it logs at most, priced as egress."""
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    none = tmp_path / "none"
    assert plan_verb.main(["--config", str(cfg), "--analysis", str(none)]) == 0
    out = capsys.readouterr().out
    seed = study.load(CONFIG)
    writes = {r.combination for r in seed.rows if r.script == "write"}
    reads = {r.combination for r in seed.rows if r.script == "read"}
    table = [line for line in out.splitlines() if line.startswith("  nodes") and " rows x " in line]
    for line in table:
        combo = line.split()[0]
        if combo in writes:  # 90 s / 7 = 12.9 s each
            assert line.endswith("load 1 s (estimate), 7 restores of 13 s each (estimate)"), line
        elif combo in reads:
            assert line.endswith("load 1 s (estimate)"), line
    assert {line.split()[0] for line in table} >= writes | reads
    assert "Restores: before each run of a write row after its first" in out
    assert f"Measured restores: none on gcp in {none}/runs" in out
    assert (
        "Logs' egress: pgbench's per-transaction logs, gzip'd on the load generator, copied back "
        "over SSH (the IAP tunnel): 0.160 GB in all, at most 0.010 GB per row; 0.01 GB per row "
        f"({cfg}: gcp.egress_gb_per_row: an assumption, no gcp log copy measured yet)"
    ) in out
    # a gcp row that sent 1 MB of logs (4 MB before gzip) for 100 s of its nodes' pgbench, and
    # restored twice; a local row's copies are not a tunnel's
    results = tmp_path / "results"
    for run, backend, sent in (("run01", "gcp", 10**6), ("run02", "local", 10**9)):
        (results / "runs" / run).mkdir(parents=True)
        applied = {"backend": backend, "restores": [{"seconds": 2.5, "deletes": 1},
                                                    {"seconds": 0.5, "deletes": 1}],
                   "logs_copied": {"files": 6, "bytes_raw": 4 * sent, "bytes_sent": sent,
                                   "seconds": 3.0, "pgbench_seconds": 100}}  # fmt: skip
        meta = {"run": run, "measurement": {"seconds": 10}, "applied": applied}
        (results / "runs" / run / "measurement.json").write_text(json.dumps(meta))
    copies = plan_mod.measured_log_copies(results)
    assert [c["run"] for c in copies] == ["run01", "run02"]
    p = plan_of(CONFIG, copies=copies)
    # 10 kB per node-second x nodes x 4 counts x 2 repetitions x 10 s
    per_row = {r.run: 10**4 * r.cluster.nodes * 80 / 1e9 for r in seed.rows}
    assert p.egress_gb == pytest.approx(per_row)
    assert p.costs()["egress"] == pytest.approx(sum(per_row.values()) * RATES["egress_gb"])
    assert plan_verb.main(["--config", str(cfg), "--analysis", str(results)]) == 0
    out = capsys.readouterr().out
    assert (
        f"{sum(per_row.values()):,.3f} GB in all, at most {max(per_row.values()):,.3f} GB per "
        "row; 10.0 kB per second of one node's pgbench, the largest of 1 measured log copies "
        "(4.0x compressed by gzip on the load generator), x its tservers x 80 s of logged runs "
        "at most"
    ) in out
    assert (
        f"Measured restores ({results}/runs, measurement.json `applied.restores`): 2 on gcp, 0.5 "
        "to 2.5 s (median 1.5 s); at most 0.25 of a repetition's seconds"
    ) in out


def test_peak_needs_per_quota(seed):
    p = plan_of(CONFIG)
    # the two largest live together at some point: check against a brute force over time
    worst = {}
    for t in {c.start_seconds for c in p.clusters}:
        live = [c for c in p.clusters if c.start_seconds <= t < c.end_seconds]
        n2 = sum(
            4 * c.machine_types.get("n2-standard-4", 0)
            + 2 * c.machine_types.get("n2-standard-2", 0)
            for c in live
        )
        worst["N2_CPUS"] = max(worst.get("N2_CPUS", 0), n2)
        worst["SSD_TOTAL_GB"] = max(worst.get("SSD_TOTAL_GB", 0), sum(c.disk_gb for c in live))
    assert p.peaks["N2_CPUS"] == ("N2 vCPUs", worst["N2_CPUS"])
    assert p.peaks["SSD_TOTAL_GB"] == ("pd-ssd GB", worst["SSD_TOTAL_GB"])
    assert "CPUS" not in p.peaks and p.peaks["E2_CPUS"] == ("E2 vCPUs", 8)  # no N1 by default
    assert plan_mod.cpu_quota("n1-standard-2") == "CPUS"
    assert plan_mod.vcpus("n2-custom-6-23040") == 6 and plan_mod.vcpus("e2-medium") == 2


# The answers of `gcloud compute regions describe REGION --format=json` and `gcloud compute
# project-info describe --format=json`: a Region resource (compute.regions.get,
# https://cloud.google.com/compute/docs/reference/rest/v1/regions/get) and a Project resource
# (compute.projects.get, https://cloud.google.com/compute/docs/reference/rest/v1/projects/get),
# each with "quotas": [{"metric", "limit", "usage", "owner"}] (Quota,
# https://cloud.google.com/compute/docs/reference/rest/v1/Quota); limits and usages are JSON
# numbers (floats in gcloud's output). CPUS_ALL_REGIONS and NETWORKS are project-wide metrics.
REGION_ANSWER = {
    "kind": "compute#region",
    "name": "us-central1",
    "status": "UP",
    "zones": ["https://www.googleapis.com/compute/v1/projects/my-proj/zones/us-central1-a"],
    "quotas": [
        {"metric": "CPUS", "limit": 24.0, "usage": 0.0},
        {"metric": "N2_CPUS", "limit": 24.0, "usage": 8.0},
        {"metric": "E2_CPUS", "limit": 24.0, "usage": 0.0},
        {"metric": "SSD_TOTAL_GB", "limit": 1000.0, "usage": 0.0},
        {"metric": "DISKS_TOTAL_GB", "limit": 4096.0, "usage": 10.0},
    ],
}
PROJECT_ANSWER = {
    "kind": "compute#project",
    "name": "my-proj",
    "quotas": [
        {"metric": "SNAPSHOTS", "limit": 5000.0, "usage": 0.0},
        {"metric": "NETWORKS", "limit": 5.0, "usage": 1.0},
        {"metric": "FIREWALLS", "limit": 200.0, "usage": 4.0},
        {"metric": "CPUS_ALL_REGIONS", "limit": 32.0, "usage": 4.0},
    ],
}


def gcloud_answering(tmp_path, monkeypatch, region=REGION_ANSWER, project=PROJECT_ANSWER):
    """A `gcloud` on PATH answering the two describe commands with the documented resources."""
    import json

    (tmp_path / "region.json").write_text(json.dumps(region))
    (tmp_path / "project.json").write_text(json.dumps(project))
    gcloud = tmp_path / "gcloud"
    gcloud.write_text(
        "#!/bin/sh\n"
        f'case "$2" in regions) cat {tmp_path}/region.json ;; '
        f"project-info) cat {tmp_path}/project.json ;; *) exit 2 ;; esac\n"
    )
    gcloud.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return gcloud


def test_plan_shows_regional_and_project_wide_quotas(seed, tmp_path, monkeypatch):
    """Issue 20, item 5: the project-wide vCPUs (every family, every region) and the SSD total
    are compared with the plan's peak: 58 vCPUs and 1,100 GB of pd-ssd (two clusters of 11
    VMs live together: 5 x 4 + 5 x 2 + 4 and 5 x 2 + 5 x 2 + 4 vCPUs, 22 x 50 GB)."""
    gcloud = gcloud_answering(tmp_path, monkeypatch)
    config = {**CONFIG, "gcp": {**CONFIG["gcp"], "project": "my-proj"}}
    p = plan_of(config, quotas=True)
    assert p.peaks["CPUS_ALL_REGIONS"] == ("vCPUs of every family", 58)
    assert p.peaks["SSD_TOTAL_GB"] == ("pd-ssd GB", 1100)
    assert p.peaks["NETWORKS"] == ("VPC networks", 2)
    text = plan_mod.format_plan(p)
    need = p.peaks["N2_CPUS"][1]  # depends on which clusters the measuring order puts together
    assert need > 24 - 8
    assert f"N2 vCPUs {need:g} (N2_CPUS: limit 24, in use 8) EXCEEDS the free quota" in text
    assert "pd-ssd GB 1100 (SSD_TOTAL_GB: limit 1000, in use 0) EXCEEDS the free quota" in text
    assert (
        "project-wide: vCPUs of every family 58 (CPUS_ALL_REGIONS: limit 32, in use 4) EXCEEDS "
        "the free quota; VPC networks 2 (NETWORKS: limit 5, in use 1) -- quotas of my-proj in "
        "us-central1 and project-wide (gcloud)" in text
    )
    roomy = {**PROJECT_ANSWER, "quotas": [{"metric": "CPUS_ALL_REGIONS", "limit": 72.0,
                                           "usage": 14.0}]}  # fmt: skip
    gcloud_answering(tmp_path, monkeypatch, project=roomy)
    text = plan_mod.format_plan(plan_of(config, quotas=True))
    assert "vCPUs of every family 58 (CPUS_ALL_REGIONS: limit 72, in use 14);" in text
    gcloud.write_text("#!/bin/sh\necho 'not logged in' >&2\nexit 1\n")
    text = plan_mod.format_plan(plan_of(config, quotas=True))
    assert "quotas not read (gcloud: not logged in)" in text and "EXCEEDS" not in text


def test_plan_counts_external_addresses_against_the_regions_quotas(seed, tmp_path, monkeypatch):
    """Each live cluster's NAT holds one static external address in use; a public load
    generator one more, ephemeral: with two clusters live, 2 (iap) or 4 (public) addresses
    in use against IN_USE_ADDRESSES and 2 static ones against STATIC_ADDRESSES."""
    addresses = [
        {"metric": "IN_USE_ADDRESSES", "limit": 8.0, "usage": 5.0},
        {"metric": "STATIC_ADDRESSES", "limit": 8.0, "usage": 1.0},
    ]
    region = {**REGION_ANSWER, "quotas": REGION_ANSWER["quotas"] + addresses}
    gcloud_answering(tmp_path, monkeypatch, region=region)
    gcp = {**CONFIG["gcp"], "project": "my-proj"}
    iap = plan_of({**CONFIG, "gcp": gcp}, quotas=True)
    assert iap.peaks["IN_USE_ADDRESSES"] == ("external IPv4 addresses in use", 2)
    assert iap.peaks["STATIC_ADDRESSES"] == ("static external IPv4 addresses", 2)
    text = plan_mod.format_plan(iap)
    assert "external IPv4 addresses in use 2 (IN_USE_ADDRESSES: limit 8, in use 5);" in text
    assert "static external IPv4 addresses 2 (STATIC_ADDRESSES: limit 8, in use 1)" in text
    public = {**gcp, "ssh_access": "public", "ssh_source_cidr": "203.0.113.7/32"}
    text = plan_mod.format_plan(plan_of({**CONFIG, "gcp": public}, quotas=True))
    assert (
        "external IPv4 addresses in use 4 (IN_USE_ADDRESSES: limit 8, in use 5) EXCEEDS the "
        "free quota" in text
    )
    assert "static external IPv4 addresses 2 (STATIC_ADDRESSES" in text  # ephemeral: not static


def test_row_time_is_an_upper_bound_with_max_repetitions_and_sweep_midpoints(seed):
    grid = plan_of(CONFIG).row_seconds
    more = {**MEASUREMENT, "max_repetitions": 4}
    assert plan_of({**CONFIG, "measurement": more}).row_seconds["run01"] == grid["run01"] + 4 * 20
    adaptive = {**MEASUREMENT, "sweep": "adaptive"}
    per_count = 5 + 2 * 10 + plan_mod.PER_COUNT_OVERHEAD_S
    extra = (measuring.ADAPTIVE_EXTRA_COUNTS + 2) * per_count  # the extension: 16, 32 (4 x 8)
    assert (
        plan_of({**CONFIG, "measurement": adaptive}).row_seconds["run01"] == grid["run01"] + extra
    )
    capped = {**adaptive, "max_clients": 8}  # no extension
    assert plan_of({**CONFIG, "measurement": capped}).row_seconds["run01"] == grid["run01"] + (
        measuring.ADAPTIVE_EXTRA_COUNTS * per_count
    )


def test_cluster_up_stops_before_spending_when_a_quota_is_short(seed, tmp_path, monkeypatch):
    """Issue 36: a new project's N2 quota (24, 8 in use here) is below a 5-node cluster's need
    (5 x 4 + 5 x 2 vCPUs): cluster_up refuses before any `pulumi up`, naming the quota, the need
    and what is free; a cluster that fits goes ahead, and gcp.allow_over_quota lets one try."""
    from ybscale.backends.base import BackendError
    from ybscale.backends.gcp import capacity, clusters

    gcloud_answering(tmp_path, monkeypatch)
    brought_up = []
    monkeypatch.setattr(
        capacity, "up_with_fallback", lambda _up, combo, *a, **k: brought_up.append(combo)
    )
    config = {**CONFIG, "gcp": {**CONFIG["gcp"], "project": "my-proj"}}
    out = tmp_path / "c" / "endpoints.json"
    with pytest.raises(BackendError) as refused:
        clusters.up("nodes5-large-replon", config, out)
    assert brought_up == []
    assert (
        "cluster nodes5-large-replon not brought up: it needs more than the quota leaves free: "
        "vCPUs of every family: needs 34, 28 free (CPUS_ALL_REGIONS: limit 32, in use 4); "
        "N2 vCPUs: needs 30, 16 free (N2_CPUS: limit 24, in use 8) (quotas of my-proj in "
        "us-central1 and project-wide (gcloud))"
    ) in str(refused.value)
    assert "set config/config.yaml: gcp.allow_over_quota to true" in str(refused.value)
    # 8 + 4 vCPUs fit alone, but not with the study's other clusters alive at the same time
    # (issue 46: the plan's peak, which `ybscale plan` says STOP for): refused too
    with pytest.raises(BackendError, match="clusters alive together need more than the quota"):
        clusters.up("nodes3-small-reploff", config, out)
    allowed = {**config, "gcp": {**config["gcp"], "allow_over_quota": True}}
    clusters.up("nodes5-large-replon", allowed, out)
    stand_in = {**config, "gcp": {**config["gcp"], "program": "loopback:program"}}
    clusters.up("nodes5-large-replon", stand_in, out)  # no VMs: no quota read
    assert brought_up == ["nodes5-large-replon", "nodes5-large-replon"]


def test_cluster_up_checks_the_clusters_alive_together_against_the_quota(tmp_path, monkeypatch):
    """Issue 46, item 6: the first cluster of each slot starts at once; each compared only its
    own need with the free quota, so both could pass and the second fail mid-creation. Each
    cluster_up now also compares the peak need of the study's clusters not yet released (the
    plan's schedule) with what is free plus what its live clusters already hold. The seed
    study's N2 peak is 50 vCPUs (nodes5-small-replon and nodes5-large-replon together); its
    first two clusters need 22 and 18."""
    import copy

    from ybscale.backends.base import BackendError
    from ybscale.backends.gcp import capacity, clusters

    brought_up = []
    monkeypatch.setattr(
        capacity, "up_with_fallback", lambda _up, combo, *a, **k: brought_up.append(combo)
    )
    config = {**CONFIG, "gcp": {**CONFIG["gcp"], "project": "my-proj"}}
    project = copy.deepcopy(PROJECT_ANSWER)
    project["quotas"][-1]["limit"] = 200.0  # CPUS_ALL_REGIONS: not the question here

    def quota(n2_limit, n2_usage):
        region = copy.deepcopy(REGION_ANSWER)
        region["quotas"][1] = {"metric": "N2_CPUS", "limit": n2_limit, "usage": n2_usage}
        region["quotas"][3]["limit"] = 5000.0  # SSD_TOTAL_GB
        gcloud_answering(tmp_path, monkeypatch, region, project)

    results = tmp_path / "results" / "clusters"
    out = results / "nodes5-large-reploff" / "endpoints.json"
    quota(57.0, 8.0)  # 49 free: 22 fits alone, the peak of 50 does not
    with pytest.raises(BackendError) as refused:
        clusters.up("nodes5-large-reploff", config, out)
    assert (
        "N2 vCPUs: the clusters alive together need 50 at once, 49 free (N2_CPUS: limit 57, "
        "in use 8)"
    ) in str(refused.value)
    assert brought_up == []
    quota(58.0, 8.0)  # 50 free
    clusters.up("nodes5-large-reploff", config, out)
    # it is up (its 22 in the usage): the next cluster counts what the live one holds
    quota(58.0, 30.0)
    out.parent.mkdir(parents=True)
    out.write_text("{}")
    second = results / "nodes3-large-replon" / "endpoints.json"
    clusters.up("nodes3-large-replon", config, second)
    out.unlink()  # not known to be live: its 22 would count twice
    with pytest.raises(BackendError, match="need 50 at once, 28 free"):
        clusters.up("nodes3-large-replon", config, second)
    # the last two clusters, the others released: their 12 + 8 against 22 free
    quota(30.0, 8.0)
    with pytest.raises(BackendError, match="need 50 at once, 22 free"):
        clusters.up("nodes3-small-reploff", config, results / "nodes3-small-reploff" / "e.json")
    earlier = ["nodes5-large-reploff", "nodes3-large-replon", "nodes3-small-replon",
               "nodes3-large-reploff", "nodes5-small-replon", "nodes5-large-replon"]  # fmt: skip
    for label in earlier:
        (results / label).mkdir(parents=True, exist_ok=True)
        (results / label / "released.json").write_text("{}")
    clusters.up("nodes3-small-reploff", config, results / "nodes3-small-reploff" / "e.json")
    assert brought_up == ["nodes5-large-reploff", "nodes3-large-replon", "nodes3-small-reploff"]


def test_the_plan_says_cluster_up_will_stop_when_a_quota_is_short(seed, tmp_path, monkeypatch):
    gcloud_answering(tmp_path, monkeypatch)
    config = {**CONFIG, "gcp": {**CONFIG["gcp"], "project": "my-proj"}}
    assert "STOP: a cluster is not brought up while a quota it needs has less free" in (
        plan_mod.format_plan(plan_of(config, quotas=True))
    )
    assert "STOP" not in plan_mod.format_plan(plan_of(config))  # quotas not read: no claim


def test_an_even_replication_factor_is_refused_by_the_plan_and_the_dry_run(tmp_path, capsys):
    """Issue 46, item 5: with replication on a gcp cluster's replication factor is its node
    count, so node levels 2 and 4 give RF 2 and 4, which survive no more failed nodes than RF
    1 and 3 (YugabyteDB's fault tolerance) while every write waits for one more copy.
    `ybscale plan` (and the dry run, through the same study load) refuses them, naming the
    level and its file; replication off at an even node count, and odd counts, pass."""
    design = seed_study()
    design["factors"]["C"]["levels"] = [2, 5]
    path = tmp_path / "even.yaml"
    path.write_text(yaml.safe_dump(design))
    with pytest.raises(study.RowError) as info:
        study.load({**CONFIG, "design": str(path)})
    message = str(info.value)
    assert (
        f"{path}: factors.C.levels[0]: cluster.nodes: 2 with cluster.replication on "
        f"({path}: factors.E.levels[1]) is replication factor 2 on gcp (RF = nodes): an even RF "
        "survives no more failed nodes than RF 1"
    ) in message
    assert "levels[1]: cluster.nodes: 5" not in message  # RF 5 is odd
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({**CONFIG, "design": str(path)}))
    assert plan_verb.main(["--config", str(cfg)]) == 1
    assert "cluster.nodes: 2 with cluster.replication on" in capsys.readouterr().err
    del design["factors"]["E"]  # replication off throughout (the default): even nodes pass
    design["generators"] = {"F": design["generators"]["F"]}
    design["factors"]["C"]["levels"] = [2, 4]
    path.write_text(yaml.safe_dump(design))
    assert len(study.load({**CONFIG, "design": str(path)}).rows) == 16


def test_the_findings_say_which_replication_factor_each_row_ran_with():
    """Issue 46, item 5: the gcp findings paragraph states every row's RF (from its applied
    record: the stack's replication_factor) and that it moved with the node count."""
    from ybscale.registry import backend_class

    def applied(cluster, rf):
        return {"backend": "gcp", "cluster": cluster, "replication_factor": rf}

    rows = [applied("nodes3-small-reploff", 1), applied("nodes3-small-replon", 3),
            applied("nodes3-small-replon", 3), applied("nodes5-small-replon", 5)]  # fmt: skip
    [text] = backend_class("gcp").report_text(rows)
    assert (
        "RF 1: 1 row on nodes3-small-reploff; RF 3: 2 rows on nodes3-small-replon; RF 5: 1 row "
        "on nodes5-small-replon. With replication on the RF moved with the node count"
    ) in text
    [one] = backend_class("gcp").report_text(rows[:3])
    assert "moved" not in one
    assert backend_class("gcp").report_text([{"backend": "gcp"}]) == []


def test_a_persistent_disk_on_a_hyperdisk_only_series_is_refused_before_any_vm(capsys, tmp_path):
    """Issue 46, item 6: N4 and C4 take Hyperdisk only; with gcp.disk_type pd-ssd (every VM's
    boot disk) `pulumi up` failed on their first VM, after others were created. The dry run and
    `ybscale plan` refuse it naming the machine type's field and the disk type's; a `-lssd`
    machine type's vCPUs are read (c3-standard-8-lssd: 8)."""
    types = {"large": "n4-standard-4", "master": "c4-standard-2"}
    config = {**CONFIG, "gcp": {**CONFIG["gcp"], "machine_types": types}}
    with pytest.raises(study.RowError) as info:
        study.load(config)
    message = str(info.value)
    for key, machine in (("large", "n4-standard-4"), ("master", "c4-standard-2")):
        series = machine.split("-")[0].upper()
        assert (
            f"gcp.machine_types.{key}: {machine}: the {series} series takes Hyperdisk only, no "
            "Persistent Disk, and every VM's boot disk is pd-ssd"
        ) in message
    assert "machine_types.small" not in message
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    assert plan_verb.main(["--config", str(cfg)]) == 1
    assert "the N4 series takes Hyperdisk only" in capsys.readouterr().err
    lssd = {**CONFIG, "gcp": {**CONFIG["gcp"], "machine_types": {"large": "c3-standard-8-lssd"}}}
    assert plan_mod.vcpus("c3-standard-8-lssd") == 8
    metal = {**CONFIG, "gcp": {**CONFIG["gcp"], "machine_types": {"small": "c3-highcpu-192-metal"}}}
    with pytest.raises(study.RowError, match=r"the C3 series \(bare metal\) takes Hyperdisk only"):
        study.load(metal)
    assert len(study.load(lssd).rows) == 16  # C3 takes Persistent Disk


def test_the_plan_prices_both_protocols_and_the_economy_sweep_is_the_cheaper(seed):
    """Issue 50: `ybscale plan` prints the VM-hours as scheduled of the economy sweep and of
    the full protocol, each planned with its own bound on a row's time: the economy row is
    every count probed once plus one full repetition."""
    economy = {**MEASUREMENT, "sweep": "economy", "probe_seconds": 2}
    assert plan_of({**CONFIG, "measurement": economy}).protocols == {}  # the rules' plans
    p = plan_of({**CONFIG, "measurement": economy}, compare=True)
    assert set(p.protocols) == {"economy", "adaptive"}
    assert p.protocols["economy"][0] == pytest.approx(p.vm_hours(False))
    assert p.protocols["economy"][0] < p.protocols["adaptive"][0]
    counts = measuring.MeasuringProtocol.of(economy).counts_at_most()
    load = p.row_seconds["run01"] - (
        counts * (5 + 2 + plan_mod.PER_COUNT_OVERHEAD_S) + 10 + 5 + plan_mod.PER_COUNT_OVERHEAD_S
    )
    assert load >= 0  # the dataset's load, the only other term
    text = plan_mod.format_plan(p)
    table = text.split("\n\n")[0].splitlines()  # the plan opens with its table
    economy = next(line for line in table if line.startswith("economy sweep "))
    full = next(line for line in table if line.startswith("full (adaptive) "))
    assert float(economy.split()[-2]) < float(full.split()[-2])  # VM-hours


def test_the_plan_estimates_a_billion_row_datasets_load_and_disk_and_refuses_one_too_large(
    tmp_path, capsys, monkeypatch
):
    """Issue 48: `ybscale plan` prints each cluster's dataset estimated: rows x (8-byte key +
    dataset.value_bytes) x RF / tservers per tserver against its disk (gcp.disk_size_gb), its
    load time at gcp.load_rows_per_s (where that came from said), and the loads the study's
    results measured beside it; a dataset larger than a tserver's disk is refused by the plan
    (and the dry run: the same study load), naming the level and the disk setting."""
    monkeypatch.chdir(tmp_path)
    billion = {**CONFIG, "defaults": {"dataset": {"rows": 10**9}}}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(billion))
    results = tmp_path / "results"
    for run, how, speed in (("run01", "loaded", 41_000), ("run02", "kept", None)):
        (results / "runs" / run).mkdir(parents=True)
        record = {"how": how, "rows": 100_000, "seconds": 2.4, "rows_per_second": speed}
        meta = {"run": run, "applied": {"backend": "local", "dataset": record}}
        (results / "runs" / run / "measurement.json").write_text(json.dumps(meta))
    # a gcp load that read its SST bytes per tserver after a flush: 5.9e7 on RF 2 of 10^6 rows
    # = 29.5 B per row and replica
    sst = {"tserver0": 2.9e7, "tserver1": 3.0e7}
    record = {"how": "loaded", "rows": 10**6, "seconds": 33.3, "rows_per_second": 30_000,
              "sst_bytes_per_tserver": sst, "sst_bytes_per_row_per_replica": 29.5}  # fmt: skip
    (results / "runs" / "run03").mkdir(parents=True)
    meta = {"run": "run03", "applied": {"backend": "gcp", "dataset": record}}
    (results / "runs" / "run03" / "measurement.json").write_text(json.dumps(meta))
    assert plan_verb.main(["--config", str(cfg), "--analysis", str(results)]) == 0
    out = capsys.readouterr().out
    assert (
        "1 on gcp, 30,000 to 30,000 rows/s (median 30,000) loading 1,000,000 to 1,000,000 rows; "
        "after a flush 29.5 to 29.5 bytes of SST files per row and replica (every tserver's, "
        "compressed; the estimate above is uncompressed) -- measured on this study's gcp "
        "clusters"
    ) in out
    # 10^9 x (8 + 32) B = 40 GB logical; x RF / tservers: RF 3 on 3 = 40 GB, RF 1 on 3 =
    # 13.3 GB, RF 1 on 5 = 8 GB; at 20 000 rows/s a load takes 50 000 s = 13 h 53 min
    for cluster, rf, tservers in (
        ("nodes3-small-replon", 3, 3),
        ("nodes5-large-replon", 5, 5),
        ("nodes3-large-reploff", 1, 3),
        ("nodes5-small-reploff", 1, 5),
    ):
        per = 10**9 * (8 + 32) * rf / tservers
        line = next(line for line in out.splitlines() if line.startswith(f"  {cluster} "))
        assert (
            f"1,000,000,000 rows x 32 B: 40.0 GB logical, {per / 1e9:.1f} GB per tserver (RF "
            f"{rf}, {tservers} tservers; {per / 50e9:.1%} of its disk), load 13 h 53 min "
            "(estimate)"
        ) in line
    assert "40.0 GB per tserver (RF 3, 3 tservers; 80.0% of its disk)" in out
    assert "ESTIMATES: rows x (8-byte key + dataset.value_bytes) x RF / tservers" in out
    assert f"each tserver's 50 GB disk, {cfg}: gcp.disk_size_gb; left out: compression" in out
    assert "space a compaction needs" in out
    assert f"Load time: at 20,000 rows/s ({cfg}: gcp.load_rows_per_s, the default: an " in out
    assert (
        f"Measured loads ({results}/runs, measurement.json `dataset`): 1 on local, 41,000 to "
        "41,000 rows/s (median 41,000) loading 100,000 to 100,000 rows -- measured on local, not "
        "YugabyteDB on gcp: not a gcp load speed"
    ) in out
    # loaded in chunks (issue 48): at 20 000 rows/s over 4 loaders, a 100 000-row chunk
    # takes 20 s, far below the 600 s one may take
    assert (
        f"Each load: 4 sessions at once ({cfg}: gcp.loaders), each its own range of the keys "
        f"in chunks of at most 100,000 rows ({cfg}: gcp.load_chunk_rows), each chunk one "
        "INSERT of at most 600 s"
    ) in out
    assert "WARNING: a chunk" not in out
    # the load speed is a setting: the load time and every row's time follow it
    faster = {**billion, "gcp": {**CONFIG["gcp"], "load_rows_per_s": 50_000}}
    cfg.write_text(yaml.safe_dump(faster))
    assert plan_verb.main(["--config", str(cfg), "--analysis", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert "80.0% of its disk), load 5 h 33 min (estimate)" in out  # 20 000 s
    assert f"Load time: at 50,000 rows/s ({cfg}: gcp.load_rows_per_s, as set there)" in out
    assert f"Measured loads: none in {tmp_path / 'none'}/runs" in out
    slow, fast = plan_of(billion), plan_of(faster)
    read = next(r for r in study.load(billion).rows if r.read_only).run
    assert slow.row_seconds[read] - fast.row_seconds[read] == pytest.approx(50_000 - 20_000)
    # a chunk of 10^6 rows over 4 loaders at 5 000 rows/s: 10^6 x 4 / 5 000 = 800 s, above
    # the 600 s a chunk may take; 10^7 rows of 32 B are capped at 64 MiB / 32 B = 2^21 rows
    # (1 677.7 s); 1 MiB values: 64 rows a chunk, 64 x 4 / 20 000 = 0.0128 s
    slow_load = {"load_chunk_rows": 10**6, "load_rows_per_s": 5000}
    huge = {**billion, "gcp": {**CONFIG["gcp"], **slow_load}}
    assert plan_of(huge).clusters[0].dataset.chunk_seconds == pytest.approx(800)
    d = plan_mod.DatasetPlan("r", 10, 32, 3, 3, 50, 5000, loaders=4, chunk_rows=10**7)
    assert d.chunk_seconds == pytest.approx(2**21 * 4 / 5000)
    wide = plan_mod.DatasetPlan("r", 10, 2**20, 3, 3, 50, 20_000, loaders=4, chunk_rows=10**7)
    assert wide.chunk_seconds == pytest.approx(0.0128)
    cfg.write_text(yaml.safe_dump(huge))
    assert plan_verb.main(["--config", str(cfg), "--analysis", str(tmp_path / "none")]) == 0
    assert "WARNING: a chunk of the load of nodes" in capsys.readouterr().out
    # a factor on dataset.rows whose 10^9 level, at 100-byte values, no longer fits: 10^9 x
    # 108 B = 108 GB per tserver at RF 3 on 3, more than the 50 GB disk; 10^6 rows fit
    design = seed_study()
    design["factors"]["D"] = {"name": "rows", "sets": "dataset.rows", "levels": [10**6, 10**9]}
    path = tmp_path / "rows.yaml"
    path.write_text(yaml.safe_dump(design))
    wide = {**CONFIG, "design": str(path), "defaults": {"dataset": {"value_bytes": 100}}}
    cfg.write_text(yaml.safe_dump(wide))
    assert plan_verb.main(["--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{path}: factors.D.levels[1]: dataset.rows 1,000,000,000 with dataset.value_bytes 100 "
        f"({cfg}: defaults.dataset.value_bytes) on nodes3-small-replon: an estimated 108.0 GB "
        "per tserver (1,000,000,000 rows x (8 + 100) B = 108.0 GB, x RF 3 / 3 tservers; an "
        "ESTIMATE before compression"
    ) in err
    assert f"more than its 50 GB disk ({cfg}: gcp.disk_size_gb)" in err
    assert "factors.D.levels[0]" not in err and "nodes3-small-reploff" not in err  # 36 GB fit
    with pytest.raises(study.RowError, match="raise gcp.disk_size_gb"):
        study.load(wide)
    roomy = {**wide, "gcp": {**CONFIG["gcp"], "disk_size_gb": 120}}
    assert len(study.load(roomy).rows) == 16
