"""The Pulumi program under pulumi.runtime.set_mocks: what one cluster is made of."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pulumi
import pytest
import vm_boot
from conftest import gflags_compiler
from vm_boot import postgres_reads, systemd_exec_argv, unit_file, yb_read_csv_values
from ybscale_infra import (
    IAP_RANGE,
    ClusterArgs,
    YugabyteCluster,
    label_value,
    startup,  # noqa: E402
)

LABELABLE = {"gcp:compute/instance:Instance", "gcp:compute/address:Address"}
DB_PORTS = {"5433", "7000", "7100", "9000", "9100", "12000", "13000", "15433"}
LABELS = {"project": "ybscale", "stack": "ybscale-x", "owner": "Ada.L", "expiry": "20261122t2300z"}


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every resource; instances get their NIC back, with a NAT IP if asked for."""

    def __init__(self):
        self.resources: list[tuple[str, str, dict]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.resources.append((args.typ, args.name, args.inputs))
        state = dict(args.inputs)
        if args.typ == "gcp:compute/instance:Instance":
            nics = []
            for nic in args.inputs.get("networkInterfaces", []):
                nic = dict(nic)
                nic["accessConfigs"] = [
                    {**ac, "natIp": "203.0.113.9"} for ac in nic.get("accessConfigs", [])
                ]
                nics.append(nic)
            state["networkInterfaces"] = nics
            state["name"] = args.inputs.get("name", args.name)
        return f"{args.name}_id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}, None

    def of_type(self, suffix: str) -> list[tuple[str, dict]]:
        return [(n, i) for t, n, i in self.resources if t.endswith(suffix)]


@pytest.fixture
def mocks():
    m = RecordingMocks()
    pulumi.runtime.set_mocks(m, project="ybscale", stack="test", preview=False)
    return m


def make_args(nodes=3, replication=False, machine="n1-standard-2", **kw) -> ClusterArgs:
    kw.setdefault("zone", "us-central1-a")
    return ClusterArgs(
        nodes=nodes,
        replication_factor=nodes if replication else 1,
        machine_type=machine,
        ssh_user="ybscale",
        ssh_public_key="ssh-ed25519 AAAAC3Nza test@host",
        labels=LABELS,
        **kw,
    )


def settle(cluster: YugabyteCluster, check):
    """Run `check(outputs)` once every resource of the cluster is registered."""
    urns = [r.urn for r in cluster.resources]
    return pulumi.Output.all(*urns, pulumi.Output.from_input(cluster.outputs)).apply(
        lambda values: check(values[-1])
    )


def instances(mocks, role):
    return [i for _, i in mocks.of_type("Instance") if i["labels"]["role"] == role]


def flags_of(script: str) -> str:
    return script


@pytest.mark.parametrize(
    "nodes,replication,machine,masters",
    [
        (3, False, "n1-standard-2", 1),
        (3, True, "n2-standard-4", 3),
        (5, False, "n1-standard-2", 1),
        (5, True, "n2-standard-4", 5),
    ],
)
@pulumi.runtime.test
def test_resource_counts_and_types(mocks, nodes, replication, machine, masters):
    cluster = YugabyteCluster("ybscale-c", make_args(nodes, replication, machine))

    def check(outputs):
        types = sorted(t.rsplit(":", 1)[-1] for t, _, _ in mocks.resources)
        assert types.count("Network") == 1 and types.count("Subnetwork") == 1
        assert types.count("Router") == 1 and types.count("RouterNat") == 1
        assert types.count("Instance") == masters + nodes + 1
        assert len(instances(mocks, "master")) == masters
        assert len(instances(mocks, "tserver")) == nodes
        assert len(instances(mocks, "loadgen")) == 1
        assert {i["machineType"] for i in instances(mocks, "tserver")} == {machine}
        assert len(outputs["tserver_ips"]) == nodes
        assert outputs["master_addresses"].count(":7100") == masters
        assert outputs["replication_factor"] == masters
        assert outputs["ysql_port"] == 5433

    return settle(cluster, check)


@pulumi.runtime.test
def test_network_is_private_with_nat(mocks):
    cluster = YugabyteCluster("ybscale-c", make_args())

    def check(_):
        [(_, net)] = mocks.of_type("compute/network:Network")
        assert net["autoCreateSubnetworks"] is False
        [(_, sub)] = mocks.of_type("Subnetwork")
        assert sub["ipCidrRange"] == "10.42.0.0/24" and sub["region"] == "us-central1"
        [(_, nat)] = mocks.of_type("RouterNat")
        assert nat["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
        for _, vm in mocks.of_type("Instance"):
            for nic in vm["networkInterfaces"]:
                assert not nic.get("accessConfigs"), "iap mode: no VM has a public IP"
                assert ipaddress.ip_address(nic["networkIp"]) in ipaddress.ip_network(
                    "10.42.0.0/24"
                )
            assert vm["zone"] == "us-central1-a"
            assert vm["bootDisk"]["initializeParams"]["image"] == "ubuntu-os-cloud/ubuntu-2204-lts"

    return settle(cluster, check)


@pulumi.runtime.test
def test_startup_flags(mocks):
    cluster = YugabyteCluster("ybscale-c", make_args(5, True, "n2-standard-4"))

    def check(outputs):
        addrs = outputs["master_addresses"]
        assert len(addrs.split(",")) == 5
        for vm in instances(mocks, "master"):
            script = vm["metadataStartupScript"]
            ip = vm["networkInterfaces"][0]["networkIp"]
            assert f"--master_addresses={addrs}" in script
            assert f"--rpc_bind_addresses={ip}:7100" in script
            assert "--replication_factor=5" in script
            assert "--enable_ysql=true" in script and "--fs_data_dirs=/mnt/d0" in script
            assert "yugabyte-2024.2.1.0-b185-linux-x86_64.tar.gz" in script
        for vm in instances(mocks, "tserver"):
            script = vm["metadataStartupScript"]
            ip = vm["networkInterfaces"][0]["networkIp"]
            assert f"--tserver_master_addrs={addrs}" in script
            assert f"--rpc_bind_addresses={ip}:9100" in script
            assert "--yb_enable_read_committed_isolation=true" in script
            assert "--enable_ysql=true" in script
        [loadgen] = instances(mocks, "loadgen")
        assert "postgresql-client-16" in loadgen["metadataStartupScript"]
        assert "ln -sf /usr/lib/postgresql/16/bin/pgbench" in loadgen["metadataStartupScript"]

    return settle(cluster, check)


@pulumi.runtime.test
def test_replication_off_has_one_master_with_rf1(mocks):
    cluster = YugabyteCluster("ybscale-c", make_args(5, False))

    def check(outputs):
        [master] = instances(mocks, "master")
        assert "--replication_factor=1" in master["metadataStartupScript"]
        assert outputs["master_addresses"] == master["networkInterfaces"][0]["networkIp"] + ":7100"

    return settle(cluster, check)


def _check_firewalls(mocks, ssh_sources):
    rules = {n: i for n, i in mocks.of_type("Firewall")}
    assert set(rules) == {"ybscale-c-fw-db", "ybscale-c-fw-ssh", "ybscale-c-fw-ssh-db"}
    for name, rule in rules.items():
        assert rule["sourceRanges"], f"{name} has no source range"
        assert "0.0.0.0/0" not in rule["sourceRanges"], name
        ports = {p for allow in rule["allows"] for p in allow["ports"]}
        if ports & DB_PORTS:
            assert rule["sourceRanges"] == ["10.42.0.0/24"], name
            assert rule["targetTags"] == ["ybscale-db"]
    assert {p for a in rules["ybscale-c-fw-db"]["allows"] for p in a["ports"]} >= {
        "5433",
        "7100",
        "9100",
    }
    assert rules["ybscale-c-fw-ssh"]["sourceRanges"] == ssh_sources
    assert rules["ybscale-c-fw-ssh"]["targetTags"] == ["ybscale-loadgen"]
    # the DB VMs: IAP, and the load generator (the pipeline reads their /proc/stat through it)
    [loadgen] = instances(mocks, "loadgen")
    loadgen_ip = loadgen["networkInterfaces"][0]["networkIp"]
    assert rules["ybscale-c-fw-ssh-db"]["sourceRanges"] == [IAP_RANGE, f"{loadgen_ip}/32"]


@pulumi.runtime.test
def test_firewall_iap(mocks):
    cluster = YugabyteCluster("ybscale-c", make_args())
    return settle(cluster, lambda _: _check_firewalls(mocks, [IAP_RANGE]))


@pulumi.runtime.test
def test_firewall_public_loadgen(mocks):
    args = make_args(ssh_access="public", ssh_source_cidr="198.51.100.7/32")
    cluster = YugabyteCluster("ybscale-c", args)

    def check(outputs):
        _check_firewalls(mocks, ["198.51.100.7/32"])
        [loadgen] = instances(mocks, "loadgen")
        assert loadgen["networkInterfaces"][0]["accessConfigs"], "loadgen has a public IP"
        for vm in instances(mocks, "master") + instances(mocks, "tserver"):
            assert not vm["networkInterfaces"][0].get("accessConfigs")
        assert outputs["loadgen_ip"] == "203.0.113.9"

    return settle(cluster, check)


@pulumi.runtime.test
def test_labels_and_ssh_key_on_every_vm(mocks):
    cluster = YugabyteCluster("ybscale-c", make_args())

    def check(_):
        labelled = [(t, n, i) for t, n, i in mocks.resources if t in LABELABLE]
        assert labelled
        for typ, name, inputs in labelled:
            labels = inputs["labels"]
            assert {"project", "stack", "owner", "expiry"} <= set(labels), name
            assert labels["owner"] == "ada-l" and labels["expiry"] == "20261122t2300z"
            for value in labels.values():
                assert value == label_value(value)
            if typ.endswith("Instance"):
                # create-only (the boot disk is made with the VM): what never changes for a stack
                assert inputs["bootDisk"]["initializeParams"]["labels"] == {
                    "project": "ybscale", "stack": "ybscale-x", "role": labels["role"]
                }  # fmt: skip
                assert inputs["metadata"]["ssh-keys"].startswith("ybscale:ssh-ed25519 ")
        # Resources GCP cannot label carry the stack's fixed facts in their description (set
        # only at creation: no expiry, which changes at every `up`)
        for typ, name, inputs in mocks.resources:
            if typ not in LABELABLE and "description" in inputs:
                assert inputs["description"] == "ybscale project=ybscale stack=ybscale-x", name

    return settle(cluster, check)


def test_args_refuse_unsafe_or_inconsistent_settings():
    with pytest.raises(ValueError, match="opens SSH to everyone"):
        make_args(ssh_access="public", ssh_source_cidr="0.0.0.0/0")
    with pytest.raises(ValueError, match="needs ssh_source_cidr"):
        make_args(ssh_access="public")
    with pytest.raises(ValueError, match="replication_factor"):
        ClusterArgs(3, 2, "n1-standard-2", "us-central1-a", "u", "k")
    with pytest.raises(ValueError, match="too small"):
        make_args(5, True, subnet_cidr="10.0.0.0/29")


def test_loadgen_refuses_old_pgbench():
    with pytest.raises(ValueError, match=">= 15"):
        startup.loadgen_script(14)


@pulumi.runtime.test
def test_program_builds_from_stack_config(mocks):
    """What stacks.up stores in `ybscale:cluster` is what the program builds."""
    import dataclasses
    import datetime as dt
    import json

    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.backend import validate_section

    settings = validate_section({"gcp": {"project": "p", "owner": "ada"}})
    now = dt.datetime(2026, 11, 22, 15, tzinfo=dt.UTC)
    args = stacks.cluster_args("nodes5-large-replon", settings, now, "ssh-ed25519 AAAA k")
    pulumi.runtime.set_config("ybscale:cluster", json.dumps(dataclasses.asdict(args)))
    pulumi.runtime.set_config("ybscale:name", "ybscale-nodes5-large-replon")
    from ybscale_infra import program

    cluster = program()

    def check(_):
        names = sorted(n for n, _ in mocks.of_type("Instance"))
        assert len(names) == 11 and names[0] == "ybscale-nodes5-large-replon-loadgen"
        assert {i["labels"]["expiry"] for i in instances(mocks, "tserver")} == {"20261122t2300z"}
        assert {i["machineType"] for i in instances(mocks, "tserver")} == {"n2-standard-4"}

    return settle(cluster, check)


@pulumi.runtime.test
def test_every_vm_deletes_itself_after_max_run_duration(mocks):
    """A cloud-side bound that needs no sweep (issue 9, 5): Compute Engine deletes each VM."""
    cluster = YugabyteCluster("ybscale-c", make_args(max_run_seconds=7200))

    def check(_):
        vms = mocks.of_type("Instance")
        assert len(vms) == 5
        for name, inputs in vms:
            scheduling = inputs["scheduling"]
            assert scheduling["maxRunDuration"] == {"seconds": 7200}, name
            assert scheduling["instanceTerminationAction"] == "DELETE", name
            assert scheduling["provisioningModel"] == "STANDARD", name

    return settle(cluster, check)


@pulumi.runtime.test
def test_database_vms_pin_the_cpu_platform_and_every_vm_reports_its_own(mocks):
    """Issue 20, item 8: masters and tservers get min_cpu_platform (E2, the load generator's
    family, takes none); each VM's cpu_platform output is exported for measurement.json."""
    args = make_args(3, True, "n2-standard-4", min_cpu_platform="Intel Ice Lake")
    cluster = YugabyteCluster("ybscale-c", args)

    def check(outputs):
        for role in ("master", "tserver"):
            assert {i.get("minCpuPlatform") for i in instances(mocks, role)} == {"Intel Ice Lake"}
        assert [i.get("minCpuPlatform") for i in instances(mocks, "loadgen")] == [None]
        assert outputs["min_cpu_platform"] == "Intel Ice Lake"
        names = {n for n, _ in mocks.of_type("Instance")}
        assert set(outputs["cpu_platforms"]) == names and len(names) == 7

    return settle(cluster, check)


@pulumi.runtime.test
def test_the_load_generator_gets_yb_admin_of_the_clusters_release(mocks):
    """The wait for an idle load balancer runs yb-admin on the load generator."""
    cluster = YugabyteCluster("ybscale-c", make_args(yugabyte_sha256="a" * 64))

    def check(_):
        (loadgen,) = instances(mocks, "loadgen")
        script = loadgen["metadataStartupScript"]
        assert "YB_VERSION=2024.2.1.0-b185" in script and "YB_SUM=" + "a" * 64 in script
        assert "ln -sf /opt/yugabyte/bin/yb-admin /usr/local/bin/yb-admin" in script
        assert script.index("yb-admin /usr/local/bin") < script.index(
            f"touch {startup.READY_MARKER}"
        )

    return settle(cluster, check)


def test_max_run_duration_follows_ttl():
    import datetime as dt

    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.backend import validate_section

    settings = validate_section({"gcp": {"project": "p", "owner": "ada", "ttl_hours": 2.5}})
    now = dt.datetime(2026, 11, 22, 15, tzinfo=dt.UTC)
    args = stacks.cluster_args("nodes3-small-reploff", settings, now, "ssh-ed25519 AAAA k")
    assert args.max_run_seconds == 9000
    with pytest.raises(ValueError, match="max_run_seconds"):
        make_args(max_run_seconds=10)


# ------------------------------------------------- startup scripts: bash -n, shellcheck, stubs


def all_scripts() -> dict[str, str]:
    url = startup.download_url(ClusterArgs.yugabyte_url, "2024.2.1.0-b185")
    common = {"master_ips": ["10.42.0.10"], "zone": "us-central1-a",
              "version": "2024.2.1.0-b185", "url": url}  # fmt: skip
    return {
        "master": startup.master_script(ip="10.42.0.10", replication_factor=1, **common),
        "tserver": startup.tserver_script(ip="10.42.0.11", **common),
        "loadgen": startup.loadgen_script(16, yugabyte=("2024.2.1.0-b185", url, None)),
    }


def need(tool: str) -> str:
    """The tool's path; missing fails in CI (setup.sh installs it) and skips elsewhere."""
    import shutil

    path = shutil.which(tool)
    if path is None:
        reason = f"{tool} is not installed (setup.sh installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.mark.parametrize("role", ["master", "tserver", "loadgen"])
def test_startup_scripts_parse_and_pass_shellcheck(role, tmp_path):
    import subprocess

    path = tmp_path / f"{role}.sh"
    path.write_text(all_scripts()[role])
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([need("shellcheck"), "-S", "warning", str(path)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout


STUBS = {
    # apt-get: the dpkg lock is held by unattended-upgrades for the first two calls
    "apt-get": 'echo "apt-get $*" >> "$LOG"\nn=$(cat "$STATE" 2>/dev/null || echo 0)\n'
    'echo $((n + 1)) > "$STATE"\n[ "$n" -ge "${APT_FAILS:-2}" ] || exit 100\n',
    "systemctl": 'echo "systemctl $*" >> "$LOG"\n',
    "locale": 'printf "C\\nC.utf8\\nPOSIX\\n"\n',
    "locale-gen": 'echo "locale-gen $*" >> "$LOG"\n',
    "update-locale": 'echo "update-locale $*" >> "$LOG"\n',
    "sleep": "true\n",
}


def run_with_stubs(tmp_path, body: str, **env):
    """Run `body` after the real script header (set -euxo pipefail + OS preparation) with the
    package manager and systemd replaced by stubs that log their arguments."""
    import subprocess

    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        (bindir / name).write_text("#!/bin/bash\n" + text)
        (bindir / name).chmod(0o755)
    script = tmp_path / "script.sh"
    script.write_text(startup._header("test") + body)
    log = tmp_path / "log"
    full_env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "LOG": str(log),
                "STATE": str(tmp_path / "apt-calls"), **env}  # fmt: skip
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=full_env,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    return done, (log.read_text() if log.exists() else "")


def test_first_boot_waits_for_apt_disables_timers_and_generates_the_locale(tmp_path):
    done, log = run_with_stubs(tmp_path, "apt_get install curl\necho done\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("done")
    lines = log.splitlines()
    assert "systemctl disable --now apt-daily.timer apt-daily-upgrade.timer" in lines
    assert "systemctl disable --now unattended-upgrades.service" in lines
    assert "locale-gen en_US.UTF-8" in lines
    # two refusals (lock held), then success: three tries, each waiting for the lock
    tries = [line for line in lines if line.startswith("apt-get")]
    assert tries == ["apt-get -o DPkg::Lock::Timeout=600 -y install locales"] * 3 + [
        "apt-get -o DPkg::Lock::Timeout=600 -y install curl"
    ]
    assert "failed (try 2 of 6), retrying" in done.stderr


def test_first_boot_gives_up_when_apt_keeps_failing(tmp_path):
    done, _ = run_with_stubs(tmp_path, "apt_get install curl\necho unreachable\n", APT_FAILS="99")
    assert done.returncode != 0
    assert "unreachable" not in done.stdout and "failed 6 times" in done.stderr


def _tarball(tmp_path):
    import hashlib
    import tarfile

    top = tmp_path / "yugabyte-2024.2.1.0"
    (top / "bin").mkdir(parents=True)
    (top / "bin" / "post_install.sh").write_text('#!/bin/bash\ntouch "$(dirname $0)/../ok"\n')
    (top / "bin" / "post_install.sh").chmod(0o755)
    tar = tmp_path / "yb.tar.gz"
    with tarfile.open(tar, "w:gz") as fh:
        fh.add(top, arcname=top.name)
    return tar, hashlib.sha256(tar.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "published", ["match", "mismatch", "pinned-mismatch", "sha1", "sha256", "sha512", "odd"]
)
def test_tarball_checksum_is_verified(tmp_path, published):
    """A pinned sha256, else the published `<url>.sha` with the algorithm its length implies
    (issue 36: YugabyteDB's instructions check it with `shasum --check`, which names none; a
    SHA-1 file failed every VM under `sha256sum -c`)."""
    import hashlib

    tar, digest = _tarball(tmp_path)
    wrong = "0" * 64
    sha = {"mismatch": wrong, "odd": digest[:50]}.get(published, digest)
    if published in ("sha1", "sha512"):
        sha = hashlib.new(published, tar.read_bytes()).hexdigest()
    # curl: -o FILE URL copies the tarball; URL.sha prints the published checksum
    STUBS["curl"] = (
        f'if [ "${{@: -1}}" = "file://yb.sha" ]; then echo "{sha}  yb.tar.gz"; exit 0; fi\n'
        'for ((i = 1; i <= $#; i++)); do [ "${!i}" = -o ] && { j=$((i + 1)); '
        f'cp {tar} "${{!j}}"; }}; done\nexit 0\n'
    )
    pinned = {"match": digest, "pinned-mismatch": wrong}.get(published)
    try:
        body = startup._install_yugabyte(
            "2024.2.1.0-b185", "file://yb", sha256=pinned,
            home=str(tmp_path / "yb"), data=str(tmp_path / "data"),
        )  # fmt: skip
        body = body.replace("/var/lib/ybscale", str(tmp_path / "state"))
        done, _ = run_with_stubs(tmp_path, body, APT_FAILS="0")
    finally:
        del STUBS["curl"]
    if published in ("match", "sha1", "sha256", "sha512"):
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "yb" / "ok").exists()
        assert (tmp_path / "yb" / ".ybscale-version").read_text().strip() == "2024.2.1.0-b185"
        return
    assert done.returncode != 0
    if published == "odd":
        assert "no SHA-1, SHA-256 or SHA-512 digest for file://yb (50 characters" in done.stderr
    else:
        assert "checksum mismatch for file://yb (expected sha256sum 0000" in done.stderr
    assert not (tmp_path / "yb").exists()


def test_the_default_download_host_is_the_current_one():
    """yugabyte-db PR #26079 moved the downloads: downloads.yugabyte.com -> software.yugabyte.com
    (https://software.yugabyte.com/releases/<version>/yugabyte-<build>-linux-x86_64.tar.gz)."""
    from ybscale import settings as ybsettings

    default = ybsettings.schema("gcp")["properties"]["yugabyte"]["properties"]["url"]["default"]
    for template in (default, ClusterArgs.yugabyte_url):
        assert startup.download_url(template, "2024.2.1.0-b185") == (
            "https://software.yugabyte.com/releases/2024.2.1.0/"
            "yugabyte-2024.2.1.0-b185-linux-x86_64.tar.gz"
        )


def test_server_knobs_become_master_and_tserver_flags_and_ysql_settings():
    """server.* knobs: YSQL settings go to --ysql_pg_conf_csv, flags to the server(s) the release
    defines them for (issue 36: a master flag reached the tservers only and did nothing)."""
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.design.row import ClusterShape

    settings = gcp_section({"gcp": {"project": "p", "owner": "ada"}})
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    server = {"work_mem": "16MB", "ysql_max_connections": "200",
              "load_balancer_max_concurrent_moves": "4",
              "enable_automatic_tablet_splitting": "false"}  # fmt: skip
    shape = ClusterShape(3, "large", False)
    args = stacks.cluster_args("c", settings, now, "ssh-ed25519 AAAA k", shape, server)
    assert args.ysql_pg_conf == {"work_mem": "16MB"}
    # ybscale's defaults: no automatic splitting, YugabyteDB's memory split (issue 46)
    own = {"enable_automatic_tablet_splitting": "false",
           "use_memory_defaults_optimized_for_ysql": "true"}  # fmt: skip
    assert args.tserver_flags == {"ysql_max_connections": "200", **own}
    assert args.master_flags == {"load_balancer_max_concurrent_moves": "4", **own}
    assert args.machine_type == settings["machine_types"]["large"] and args.nodes == 3
    flags = startup.tserver_flags(
        "10.0.0.5", ["10.0.0.2"], "us-central1-a", args.tserver_flags, args.ysql_pg_conf
    )
    assert "--ysql_max_connections=200" in flags
    assert "--enable_automatic_tablet_splitting=false" in flags
    assert not any(f.startswith("--load_balancer") for f in flags)
    assert "--ysql_pg_conf_csv=work_mem=16MB" in flags
    master = startup.master_flags("10.0.0.2", ["10.0.0.2"], 1, "us-central1-a", args.master_flags)
    assert "--load_balancer_max_concurrent_moves=4" in master
    assert "--enable_automatic_tablet_splitting=false" in master
    assert not any("ysql_max_connections" in f or "work_mem" in f for f in master)
    odd = startup.tserver_flags("10.0.0.5", ["10.0.0.2"], "z-a", {}, {"search_path": "a, b"})
    assert "--ysql_pg_conf_csv=\"search_path='a, b'\"" in odd


def test_automatic_tablet_splitting_is_off_on_masters_and_tservers_by_default():
    """Issue 36: YugabyteDB splits tablets automatically by default and can split the pre-split
    tablets while write rows run; off on every server unless gcp.yugabyte.tablet_splitting keeps
    it or a server.* knob sets it (a flag of both servers in every supported series)."""
    from ybscale.backends import yb_catalogue
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.design.row import ClusterShape

    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    shape = ClusterShape(3, "large", False)

    def flags(gcp=None, server=None):
        settings = gcp_section({"gcp": {"project": "p", "owner": "ada", **(gcp or {})}})
        args = stacks.cluster_args("c", settings, now, "ssh-ed25519 AAAA k", shape, server)
        memory = "use_memory_defaults_optimized_for_ysql"
        assert args.master_flags.pop(memory) == args.tserver_flags.pop(memory) == "true"
        return args.master_flags, args.tserver_flags

    off = {"enable_automatic_tablet_splitting": "false"}
    assert flags() == (off, off)
    assert flags({"yugabyte": {"tablet_splitting": True}}) == ({}, {})
    on = {"enable_automatic_tablet_splitting": "true"}
    assert flags(server=on) == (on, on)
    for series in yb_catalogue.SUPPORTED:
        assert stacks.SPLITTING in yb_catalogue.master_flags(series), series
        assert stacks.SPLITTING in yb_catalogue.tserver_flags(series), series
    argv = startup.master_flags("10.0.0.2", ["10.0.0.2"], 1, "us-central1-a", flags()[0])
    assert "--enable_automatic_tablet_splitting=false" in argv


@pulumi.runtime.test
def test_master_flags_reach_every_master_vm(mocks):
    """ClusterArgs.master_flags end up in each master's unit, not in a tserver's."""
    args = make_args(3, True, master_flags={"load_balancer_max_concurrent_moves": "4"})
    cluster = YugabyteCluster("ybscale-c", args)

    def check(_):
        for vm in instances(mocks, "master"):
            assert "--load_balancer_max_concurrent_moves=4" in vm["metadataStartupScript"]
        for vm in instances(mocks, "tserver"):
            assert "load_balancer_max_concurrent_moves" not in vm["metadataStartupScript"]

    return settle(cluster, check)


# ------------------------------------------- a second `up` of a live stack replaces nothing

# what the installed pulumi-gcp SDK says of a field the provider can set only at creation
# (Network.description: "must be recreated to modify this field"; Subnetwork.description: "can be
# set only at resource creation time"; metadata_startup_script: "forces the instance to be
# recreated"; "Changing this forces a new resource to be created"; "causes resource replacement")
CREATE_ONLY = re.compile(
    r"recreat|forces a new resource|only at resource\s+creation|causes resource replacement",
    re.IGNORECASE,
)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def sdk_field_docs(typ: str, path: tuple) -> list[tuple[str, str]]:
    """(field, docstring) of each field along `path` (mock input keys, list indexes skipped) in
    the installed SDK's Args classes of resource type `typ` (e.g. gcp:compute/network:Network)."""
    import importlib

    module_path, cls = typ.split(":")[1].split("/")[0], typ.rsplit(":", 1)[1]
    module = importlib.import_module(f"pulumi_gcp.{module_path}")
    args_cls = getattr(module, f"{cls}Args")
    docs = []
    for key in (k for k in path if isinstance(k, str)):
        prop = getattr(args_cls, _snake(key), None) if args_cls is not None else None
        if not isinstance(prop, property):
            break  # a map's key (labels.expiry): the map's own docstring speaks for it
        docs.append((f"{args_cls.__name__}.{_snake(key)}", prop.__doc__ or ""))
        hint = str(prop.fget.__annotations__.get("return", ""))
        nested = re.search(r"'(\w+Args)'", hint)
        args_cls = getattr(module, nested[1], None) if nested else None
    return docs


def leaves(value, path=()):
    """(path, value) of every scalar in nested mock inputs."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, (*path, i))
    else:
        yield path, value


def record_program(args: ClusterArgs) -> dict[str, tuple[str, dict]]:
    """Resource name -> (type, inputs) of the real program under fresh mocks."""
    recorded = RecordingMocks()
    pulumi.runtime.set_mocks(recorded, project="ybscale", stack="test", preview=False)

    @pulumi.runtime.test
    def run():
        return settle(YugabyteCluster("ybscale-c", args), lambda _: None)

    run()
    return {name: (typ, inputs) for typ, name, inputs in recorded.resources}


def test_a_second_up_later_changes_only_fields_updated_in_place():
    """Issue 36: the stack's program run at two times (an `up` of a live stack a day later, new
    expiry) differs only in inputs the provider updates in place, by the installed SDK's own
    docstrings, and only in labels: no network, NAT, firewall or VM is rebuilt."""
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.design.row import ClusterShape

    settings = gcp_section({"gcp": {"project": "p", "owner": "ada"}})
    shape = ClusterShape(3, "large", True)
    server = {"work_mem": "16MB", "load_balancer_max_concurrent_moves": "4"}
    first, later = (
        stacks.cluster_args("c", settings, now, "ssh-ed25519 AAAA k", shape, server)
        for now in (
            dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC),
            dt.datetime(2026, 11, 23, 15, 30, tzinfo=dt.UTC),
        )  # fmt: skip
    )
    assert first.labels["expiry"] != later.labels["expiry"]
    before, after = record_program(first), record_program(later)
    assert before.keys() == after.keys()
    changed = []
    for name, (typ, inputs) in after.items():
        old = dict(leaves(before[name][1]))
        for path, value in leaves(inputs):
            if old.get(path) != value:
                changed.append((typ, name, path))
    assert changed, "the two runs differ (expiry): the check below has something to check"
    create_only = [
        (name, field)
        for typ, name, path in changed
        for field, doc in sdk_field_docs(typ, path)
        if CREATE_ONLY.search(doc)
    ]
    assert create_only == [], create_only
    not_labels = [(name, path) for typ, name, path in changed if path[0] != "labels"]
    assert not_labels == [], not_labels


def test_one_more_load_generator_adds_its_vm_and_changes_only_the_tservers_ssh_firewall():
    """Issue 38, `auto` growing a live cluster (`stacks.grow`, hours after its bring-up): the
    program with the arguments of k + 1 load generators (`stacks.growth_args`) re-declares
    every resource of the bring-up's k with the same inputs (the expiry labels included) but
    one, the tservers' SSH firewall, whose sources gain the new generator's address, and
    declares one resource more, the new generator's VM."""
    from ybscale.backends.base import BackendError
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.design.row import ClusterShape

    settings = gcp_section({"gcp": {"project": "p", "owner": "ada", "load_generators": "auto",
                                    "fallback_zone": "us-central1-b"}})  # fmt: skip
    shape, now = ClusterShape(3, "small", True), dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    server, key = {"work_mem": "16MB"}, "ssh-ed25519 AAAA k"
    # brought up in the fallback zone (out of capacity in gcp.zone), with auto's start: 1
    one = stacks.cluster_args("c", {**settings, "zone": "us-central1-b"}, now, key, shape, server)
    assert one.load_generators == 1
    endpoints = {"created": now.isoformat(), "zone": "us-central1-b"}  # what `up` wrote
    later = now + dt.timedelta(hours=3)  # the count that finds the generator the bottleneck
    two = stacks.growth_args("c", settings, endpoints, 2, key, shape, server, now=later)
    before, after = record_program(one), record_program(two)
    assert set(after) - set(before) == {"ybscale-c-loadgen-1"} and set(before) <= set(after)
    typ, vm = after["ybscale-c-loadgen-1"]
    assert typ == "gcp:compute/instance:Instance" and vm["labels"]["role"] == "loadgen"
    # Compute Engine deletes the new VM when it deletes the others: at ttl_hours after the
    # bring-up, 3 h of them gone (the others keep their max_run_duration: nothing changed)
    ttl = round(settings["ttl_hours"] * 3600)
    assert vm["scheduling"]["maxRunDuration"]["seconds"] == ttl - 3 * 3600
    assert before["ybscale-c-loadgen"][1]["scheduling"]["maxRunDuration"]["seconds"] == ttl
    # a third, an hour later, from the endpoints the growth returned (their bounds kept)
    grown = {**endpoints, "loadgen_run_seconds": [ttl, ttl - 3 * 3600]}
    three = stacks.growth_args("c", settings, grown, 3, key, shape, server,
                               now=later + dt.timedelta(hours=1))  # fmt: skip
    assert three.loadgen_run_seconds == [ttl, ttl - 3 * 3600, ttl - 4 * 3600]
    with pytest.raises(BackendError, match="its VMs are deleted in 10 s .* no load generator"):
        stacks.growth_args("c", settings, endpoints, 2, key, shape, server,
                           now=now + dt.timedelta(seconds=ttl - 10))  # fmt: skip
    changed = []
    for name, (_, inputs) in before.items():
        old, new = dict(leaves(inputs)), dict(leaves(after[name][1]))
        changed += [(name, path, old.get(path), new.get(path))
                    for path in sorted(old.keys() | new.keys(), key=str)
                    if old.get(path) != new.get(path)]  # fmt: skip
    (second,) = two.loadgen_ips()[1:]
    assert changed == [("ybscale-c-fw-ssh-db", ("sourceRanges", 2), None, f"{second}/32")]


# ------------------------------------------------------- unit files: systemd's own quoting


def test_unit_files_pass_knob_values_through_systemd_intact(tmp_path):
    """Issue 36: the unit was written with shell quoting (shlex.quote), which systemd does not
    read: `%m`, `%p` in log_line_prefix became the machine ID and the unit's name, `%e` refused
    the unit, `$user` an empty variable. Values with %, $, quotes and spaces now reach the
    server's argv as written, by systemd's rules and by systemd-analyze verify."""
    import subprocess

    pg_conf = {"log_line_prefix": "'%m [%p] %e '", "search_path": '"$user", public'}
    flags = {"ysql_hba_conf_csv": "host all all 10.0.0.0/8 trust", "log_dir": "/tmp/a b\\c"}
    argv = startup.tserver_flags("10.0.0.5", ["10.0.0.2"], "us-central1-a", flags, pg_conf)
    binary = tmp_path / "yb-tserver"  # systemd-analyze verify wants an executable there
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    argv = [str(binary), *argv[1:]]
    assert "--ysql_pg_conf_csv=\"log_line_prefix='%m [%p] %e '\"," in "".join(argv)
    unit = unit_file(startup._service("yb-tserver", argv))
    [exec_start] = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert systemd_exec_argv(exec_start.removeprefix("ExecStart=")) == argv
    path = tmp_path / "yb-tserver.service"
    path.write_text(unit)
    done = subprocess.run([need("systemd-analyze"), "verify", "--man=no", str(path)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_csv_reader_double_reads_yugabytes_own_examples():
    """The double above against the examples in ReadCSVValues' own comment (good and
    malformed), and the docs' --ysql_pg_conf_csv example (yb-tserver.md, v2024.2)."""
    assert yb_read_csv_values('1,"two, 2","three ""3""", four ,') == [
        "1", "two, 2", 'three "3"', " four ", ""
    ]  # fmt: skip
    for malformed in ('1,"two', '1, "two"', '1,two "2"', '1,"tw"o"'):
        with pytest.raises(ValueError, match="Malformed CSV"):
            yb_read_csv_values(malformed)
    docs = (
        "\"log_line_prefix='%m [%p %l %c] %q[%C %R %Z %H] [%r %a %u %d] '\","
        "\"pgaudit.log='all, -misc'\",pgaudit.log_parameter=on"
    )
    assert yb_read_csv_values(docs) == [
        "log_line_prefix='%m [%p %l %c] %q[%C %R %Z %H] [%r %a %u %d] '",
        "pgaudit.log='all, -misc'",
        "pgaudit.log_parameter=on",
    ]


def pg_reads(bindir, conf_lines: list[str], name: str, tmp_path) -> str:
    """What PostgreSQL's own configuration-file parser makes of `name` in a postgresql.conf of
    `conf_lines` (`vm_boot.postgres_reads`); ValueError with its complaint."""
    folder = tmp_path / "conf"
    folder.mkdir(exist_ok=True)
    (folder / "postgresql.conf").write_text("\n".join(conf_lines) + "\n")
    return postgres_reads(str(bindir / "postgres"), folder / "postgresql.conf", name)


def test_ysql_settings_reach_postgresql_as_written(tmp_path):
    """Issue 46: YSQL settings were written `name=value` raw, so a value with a space, quote or
    `%` broke YSQL's start (`log_line_prefix=%m [%p]` is a syntax error). Each value now goes
    through --ysql_pg_conf_csv as YugabyteDB's pg_wrapper reads the flag (the double above)
    and, line by line, as PostgreSQL's own parser reads ysql_pg.conf: the real `postgres -C`
    prints back every value as written. YugabyteDB's own example, `"log_line_prefix='%m
    [%p]'"`, is what ybscale writes for log_line_prefix %m [%p]."""
    from ybscale.backends.local import find_bindir

    bindir = find_bindir()
    values = {
        "log_line_prefix": "%m [%p] ",  # space, %, brackets
        "search_path": '"$user", public',  # double quotes, comma, $
        "application_name": "it's a \\ test",  # a single quote and a backslash
        "cluster_name": "a.b",  # a qualified name: PostgreSQL's lexer refuses it bare
        "work_mem": "64MB",  # an integer with its unit: bare
        "random_page_cost": "1.5",  # a real: bare
        "default_text_search_config": "pg_catalog.simple",
        "TimeZone": "UTC",
    }
    csv = startup.pg_conf_csv(values)
    assert startup.pg_conf_csv({"log_line_prefix": "%m [%p]"}) == "\"log_line_prefix='%m [%p]'\""
    assert "work_mem=64MB" in csv.split(",") and "random_page_cost=1.5" in csv.split(",")
    lines = yb_read_csv_values(csv)
    assert [line.split("=", 1)[0] for line in lines] == sorted(values)
    shown = {**values, "work_mem": "65536"}  # postgres -C shows an integer in its base unit (kB)
    for name in values:
        assert pg_reads(bindir, lines, name, tmp_path) == shown[name], name
    # what the old writing gave PostgreSQL: a syntax error, as the issue says
    with pytest.raises(ValueError, match="syntax error"):
        pg_reads(bindir, ["log_line_prefix=%m [%p]"], "log_line_prefix", tmp_path)
    # and a value already written as a PostgreSQL string is kept as it is
    assert startup.pg_conf_value("'%m [%p] '") == "'%m [%p] '"
    assert startup.pg_conf_value("") == "''"


def _cluster_args(server, gcp=None, shape=None):
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.design.row import ClusterShape

    settings = gcp_section({"gcp": {"project": "p", "owner": "ada", **(gcp or {})}})
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    shape = shape or ClusterShape(3, "large", True)
    return stacks.cluster_args("c", settings, now, "ssh-ed25519 AAAA k", shape, server)


def _command_lines(args) -> list[list[str]]:
    """Every master's and tserver's argv, as the units run them."""
    masters = args.master_ips()
    return [
        *(startup.master_flags(ip, masters, args.replication_factor, args.zone, args.master_flags)
          for ip in masters),
        *(startup.tserver_flags(ip, masters, args.zone, args.tserver_flags, args.ysql_pg_conf)
          for ip in args.tserver_ips()),
    ]  # fmt: skip


@pytest.mark.parametrize(("level", "written"), [("off", "false"), ("on", "true")])
def test_a_boolean_flag_factor_reaches_every_server_as_true_or_false(level, written):
    """Issue 46, blocker: with `server.enable_automatic_tablet_splitting` at levels off/on (the
    override the gcp schema documents) every master and tserver command line carried `=off` or
    `=on`, which gflags refuses (1/t/true/y/yes, 0/f/false/n/no): no server started. Each now
    says true or false, by gflags' own grammar."""
    from ybscale.backends.yb_catalogue import gflags

    lines = _command_lines(_cluster_args({"enable_automatic_tablet_splitting": level}))
    assert len(lines) == 6  # 3 masters (replication on), 3 tservers
    for argv in lines:
        [value] = [a.split("=", 1)[1] for a in argv
                   if a.startswith("--enable_automatic_tablet_splitting=")]  # fmt: skip
        assert value == written and gflags.parses("bool", value), argv[0]


def test_the_memory_split_yugabyte_ships_is_on_every_server_unless_a_knob_says_otherwise():
    """Issue 46, item 4: --use_memory_defaults_optimized_for_ysql=true on every master and
    tserver (yugabyted's and YugabyteDB Anywhere's split; its default, false, gives the tserver
    85 % of RAM and PostgreSQL none); server.use_memory_defaults_optimized_for_ysql overrides it
    on both, in any boolean spelling."""
    name = "use_memory_defaults_optimized_for_ysql"
    for server, written in (({}, "true"), ({name: "off"}, "false"), ({name: "0"}, "false")):
        for argv in _command_lines(_cluster_args(server)):
            assert f"--use_memory_defaults_optimized_for_ysql={written}" in argv, argv[0]


@pytest.fixture(scope="module")
def download(tmp_path_factory):
    """The loopback download host of tests/vm_boot.py: the pinned release's tarball of stand-in
    servers on the real gflags, and its .sha. Skips where no compiler or gflags headers."""
    import threading

    from ybscale.backends.gcp.config import gcp_section

    compiler = gflags_compiler()
    version = gcp_section({"gcp": {"project": "p", "owner": "o"}})["yugabyte"]["version"]
    httpd, release = vm_boot.release_host(tmp_path_factory.mktemp("download"), version,
                                          "2024.2", compiler, "127.0.0.1")  # fmt: skip
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield release
    httpd.shutdown()
    httpd.server_close()


def boot_one(boot, folder, alive, edit=lambda script: script) -> vm_boot.Vm:
    """Boot one VM of a cluster (`ClusterArgs.boots`) by its startup script (after `edit`),
    its servers on free ports of 127.0.0.1; returns the VM once the script has ended."""
    from ybscale.backends.local import find_bindir
    from ybscale.backends.local.cluster import free_port

    bindir = find_bindir()
    share = Path("/usr/share/postgresql") / bindir.parent.name
    vm = vm_boot.Vm(name=boot.name, root=str(folder / boot.name), address="127.0.0.1",
                    web_port={"yb-master": free_port(), "yb-tserver": free_port()},
                    alive=str(alive), postgres=str(bindir / "postgres"),
                    postgresql_conf_sample=str(share / "postgresql.conf.sample"))  # fmt: skip
    Path(vm.root).mkdir(parents=True)
    vm_boot.boot(edit(boot.script), vm, timeout=120)
    return vm


def unit_status(vm: vm_boot.Vm, unit: str, wait: float = 20) -> int | None:
    """The unit's exit status once it has ended within `wait` seconds, else None (running:
    its web port answers)."""
    import time
    import urllib.request

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        status = vm_boot.unit_exited(vm, unit)
        if status is not None:
            return status
        try:
            urllib.request.urlopen(f"http://{vm.address}:{vm.web_port[unit]}/api/v1/varz",
                                   timeout=2)  # fmt: skip
            return None
        except OSError:
            time.sleep(0.2)
    return vm_boot.unit_exited(vm, unit)


def varz_of(vm: vm_boot.Vm, unit: str) -> dict[str, str]:
    import urllib.request

    url = f"http://{vm.address}:{vm.web_port[unit]}/api/v1/varz"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return {f["name"]: f["value"] for f in json.loads(answer.read())["flags"]}


def test_the_vms_boot_runs_their_servers_with_the_designs_knobs(download, tmp_path):
    """Issue 46, the boot rehearsed: the startup scripts the program renders
    (`ClusterArgs.boots`, the program's one rendering) run as written in a stand-in VM
    (tests/vm_boot.py): the tarball and its .sha fetched from a loopback host laid out as
    YugabyteDB's download host, the checksum, unpack, post_install.sh, the units started from
    their ExecStart= as systemd reads it. The servers are built on the real gflags with the
    catalogue's flags and types, and the tserver has the real PostgreSQL parse the
    ysql_pg.conf it writes as pg_wrapper does. With a design's knobs (a boolean flag at
    PostgreSQL's off, an int32 flag, YSQL settings with spaces, %, quotes and a comma) both
    servers run and report them (/api/v1/varz); each blocker's old writing fails the same
    boot: `=off` stops the master at gflags, `log_line_prefix=%m [%p] ` unquoted stops the
    tserver at PostgreSQL's parser. So do an unknown flag and a wrong checksum."""
    server = {"enable_automatic_tablet_splitting": "off", "ysql_max_connections": "200",
              "load_balancer_max_concurrent_moves": "4",
              "log_line_prefix": "%m [%p] ", "search_path": '"$user", public'}  # fmt: skip
    args = _cluster_args(server, gcp={"yugabyte": {"url": download.url}})
    boots = {b.role: b for b in reversed(args.boots("c"))}  # the first master and tserver
    alive = tmp_path / "alive"
    alive.write_text("the stack\n")
    try:
        master = boot_one(boots["master"], tmp_path / "fixed", alive)
        tserver = boot_one(boots["tserver"], tmp_path / "fixed", alive)
        assert unit_status(master, "yb-master") is None, Path(master.root, "yb-master.log")
        assert unit_status(tserver, "yb-tserver") is None, Path(tserver.root, "yb-tserver.log")
        for vm in (master, tserver):
            home = Path(vm.root) / "opt" / "yugabyte"
            assert (home / ".ybscale-version").read_text().strip() == args.yugabyte_version
            assert (home / ".post_install_done").exists()  # unpacked after the checksum passed
            assert (Path(vm.root) / "var" / "lib" / "ybscale" / "ready").exists()
        reported = varz_of(master, "yb-master")
        assert reported["enable_automatic_tablet_splitting"] == "false"
        assert reported["load_balancer_max_concurrent_moves"] == "4"  # a yb-master flag
        assert reported["use_memory_defaults_optimized_for_ysql"] == "true"
        reported = varz_of(tserver, "yb-tserver")
        assert reported["ysql_max_connections"] == "200"
        assert reported["enable_automatic_tablet_splitting"] == "false"
        assert "load_balancer_max_concurrent_moves" not in reported  # not a tserver flag
        shown = json.loads((Path(tserver.root) / "ysql_settings.json").read_text())
        assert shown == {"log_line_prefix": "%m [%p] ", "search_path": '"$user", public'}

        old = tmp_path / "old"  # the writings before the fixes, booted the same way
        vm = boot_one(boots["master"], old, alive,
                      lambda s: s.replace("_splitting=false", "_splitting=off"))  # fmt: skip
        assert unit_status(vm, "yb-master") == 1
        assert "illegal value 'off'" in Path(vm.root, "yb-master.log").read_text()
        vm = boot_one(boots["tserver"], old, alive, lambda s: s.replace(
            "log_line_prefix='%%m [%%p] '", "log_line_prefix=%%m [%%p] "))  # fmt: skip
        assert unit_status(vm, "yb-tserver") == 1
        assert "syntax error" in Path(vm.root, "yb-tserver.log").read_text()
        bad = tmp_path / "bad"
        vm = boot_one(
            boots["tserver"],
            bad,
            alive,
            lambda s: s.replace(
                '"--start_cql_proxy=false"', '"--start_cql_proxy=false" "--no_such_flag=1"'
            ),
        )
        assert unit_status(vm, "yb-tserver") == 1
        assert (
            "unknown command line flag 'no_such_flag'"
            in Path(vm.root, "yb-tserver.log").read_text()
        )
        vm = boot_one(boots["master"], bad / "sum", alive,
                      lambda s: s.replace("YB_SUM=''", "YB_SUM=" + "0" * 64))  # fmt: skip
        assert "checksum mismatch" in Path(vm.root, "startup.log").read_text()
        assert not (Path(vm.root) / "opt" / "yugabyte" / "bin").exists()
        assert vm_boot.unit_exited(vm, "yb-master") == -1  # never started
    finally:
        alive.unlink()  # the stack is gone: its VMs' servers stop

        deadline = time.monotonic() + 20
        while vm_boot.running(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = vm_boot.running(tmp_path)
        vm_boot.stop_vms(tmp_path)
    assert left == []


def test_a_units_pid_file_names_its_process_only_while_that_very_process_lives(tmp_path):
    """A stand-in VM's unit is running while the process its pid file names lives and started
    when the file says: the suite starts more processes than pid_max (32768 here), so a
    stopped unit's pid soon belongs to another process, which must not count as the unit
    (nor be killed by the site's teardown)."""
    from ybscale.backends.base import start_time

    vm = tmp_path / "vms" / "vm-0"
    vm.mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # killpg would reach it
    try:
        started = start_time(proc.pid)
        (vm / "yb-master.pid").write_text(f"{proc.pid} {started}")
        assert vm_boot.unit_pid(vm / "yb-master.pid") == proc.pid
        assert vm_boot.running(tmp_path / "vms") == ["vm-0 yb-master"]
        (vm / "yb-master.pid").write_text(f"{proc.pid} {int(started) - 1}")  # its pid, reused
        assert vm_boot.unit_pid(vm / "yb-master.pid") is None
        assert vm_boot.running(tmp_path / "vms") == []
        vm_boot.stop_vms(tmp_path / "vms")  # leaves the process that took the pid alone
        assert proc.poll() is None
        (vm / "yb-master.pid").write_text(f"{proc.pid} {started}")
    finally:
        proc.kill()
        proc.wait()
    assert vm_boot.running(tmp_path / "vms") == []  # dead
