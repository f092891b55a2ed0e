"""The Automation-API driver: with a fake `pulumi.automation` for the cloud-bound paths, and
against the real Pulumi engine (a local file backend, a cloud-free inline program) for the
lifecycle: up, outputs, expiry read from a fresh workspace, sweep, destroy, interrupted up,
rerun after `onerror`."""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pulumi.automation as real_auto
import pytest
from conftest import row_from_levels
from designs import seed_design_path

from ybscale import cache_dir
from ybscale.backends import ssh
from ybscale.backends.base import BackendError
from ybscale.backends.gcp import backend as gcp
from ybscale.backends.gcp import clusters, stacks
from ybscale.backends.gcp.files import ClusterFiles
from ybscale.design.row import ClusterShape

# the interrupted `up` imports this module (its folder) and the tests' shared ones (tests/)
_TEST_FOLDERS = (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1])

NOW = dt.datetime(2026, 11, 22, 15, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(hours=1)  # a growth an hour into the cluster's run
CLUSTERS = Path("results/clusters")  # the rules' folder; every test runs in its own tmp_path
GCP = {"project": "my-proj", "owner": "ada", "study_id": "s1"}  # the fake-engine tests' study


def real_signature(method, kwargs: dict) -> None:
    """What the fakes are called with must be what the real Automation API takes."""
    inspect.signature(method).bind(None, **kwargs)


class FakeEngine:
    """The read-only commands the lifecycle runs itself (`stacks.engine_json`), answered from
    the fake stacks in the JSON the real CLI prints (checked on the real engine by the
    real_engine tests)."""

    def __init__(self, auto):
        self.auto = auto

    def run(self, args, cwd, additional_env):
        inspect.signature(real_auto.PulumiCommand.run).bind(None, args, cwd, additional_env)
        name = args[args.index("--stack") + 1]
        if args[:3] == ["stack", "output", "--json"]:
            answer = {k: v.value for k, v in self.auto.stacks[name].outputs.items()}
        elif args[:2] == ["stack", "export"] and "--show-secrets" not in args:
            pending = [{"type": "creating", "resource": {}}] if self.auto.pending else []
            answer = {"version": 3, "deployment": {"pending_operations": pending}}
        else:
            raise AssertionError(f"the fake engine does not know `pulumi {' '.join(args)}`")
        return real_auto.CommandResult(stdout=json.dumps(answer), stderr="", code=0)


def fake_workspace(auto, **methods):
    """What `stacks.engine_json` reads of a workspace, and `methods`."""
    return types.SimpleNamespace(
        pulumi_command=FakeEngine(auto), work_dir="/nonexistent", env_vars={}, pulumi_home=None,
        **methods,
    )  # fmt: skip


class FakeStack:
    def __init__(self, auto, name, program):
        self.auto, self.name, self.program = auto, name, program
        self.config = {}
        self.outputs = {}
        self.workspace = fake_workspace(
            auto,
            install_plugin=lambda name, version: auto.calls.append(("plugin", name, version)),
            remove_stack=lambda name: auto.calls.append(("remove", name)) or auto.stacks.pop(name),
        )

    def set_all_config(self, values):
        self.config.update(values)

    def up(self, **kwargs):
        real_signature(real_auto.Stack.up, kwargs)
        refresh = kwargs.get("refresh")
        self.auto.calls.append(("up", self.name))
        self.refreshed = refresh
        if self.auto.fail_up:
            raise RuntimeError("quota exceeded")
        outputs = {
            "tserver_ips": ["10.42.0.11", "10.42.0.12", "10.42.0.13"],
            "master_addresses": "10.42.0.10:7100",
            "loadgen_ip": "10.42.0.14",
            "loadgen_name": f"{self.name}-loadgen",
            "ysql_port": 5433,
            "zone": "us-central1-a",
            "ssh_access": "iap",
            "ssh_user": "ybscale",
            "replication_factor": 1,
        }
        labels = json.loads(self.config["ybscale:cluster"].value)["labels"]
        outputs.update(expiry=labels["expiry"], owner=labels["owner"], study=labels["study"])
        self.outputs = {k: real_auto.OutputValue(v, False) for k, v in outputs.items()}
        return types.SimpleNamespace(
            outputs={k: real_auto.OutputValue(v, False) for k, v in outputs.items()}
        )

    def refresh(self, **kwargs):
        real_signature(real_auto.Stack.refresh, kwargs)
        self.auto.calls.append(("refresh", self.name, kwargs.get("clear_pending_creates")))

    def destroy(self, **kwargs):
        real_signature(real_auto.Stack.destroy, kwargs)
        self.auto.calls.append(("destroy", self.name, kwargs.get("refresh")))


class FakeAuto:
    """Just enough of pulumi.automation: stacks live in a dict."""

    StackNotFoundError = real_auto.StackNotFoundError
    ConfigValue = real_auto.ConfigValue
    ProjectSettings = real_auto.ProjectSettings
    ProjectBackend = real_auto.ProjectBackend
    LocalWorkspaceOptions = real_auto.LocalWorkspaceOptions

    @staticmethod
    def PulumiCommand(**kwargs):  # noqa: N802 (mirrors the real class name)
        inspect.signature(real_auto.PulumiCommand).bind(**kwargs)  # no engine run here

    def __init__(self, fail_up=False, pending=False):
        self.fail_up, self.pending = fail_up, pending  # pending: the state has pending operations
        self.stacks: dict[str, FakeStack] = {}
        self.calls: list[tuple] = []
        self.options = []

    def create_or_select_stack(self, stack_name, project_name, program, opts):
        self.options.append(opts)
        return self.stacks.setdefault(stack_name, FakeStack(self, stack_name, program))

    def select_stack(self, stack_name, project_name, program, opts):
        if stack_name not in self.stacks:
            raise real_auto.StackNotFoundError(
                types.SimpleNamespace(stdout="", stderr="", code=1, args=[])
            )
        return self.stacks[stack_name]

    def LocalWorkspace(self, **kwargs):  # noqa: N802 (mirrors the real class name)
        auto = self

        def list_stacks():
            return [
                real_auto.StackSummary(name=f"organization/ybscale/{n}", current=False)
                for n in auto.stacks
            ] + [real_auto.StackSummary(name="other-project-stack", current=False)]

        return fake_workspace(auto, list_stacks=list_stacks)


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    nocloud = tmp_path / "nocloud"  # never the real gcloud from a test
    nocloud.mkdir()
    (nocloud / "gcloud").write_text('#!/bin/sh\necho "no cloud in tests" >&2\nexit 1\n')
    (nocloud / "gcloud").chmod(0o755)
    monkeypatch.setenv("PATH", f"{nocloud}{os.pathsep}{os.environ['PATH']}")
    return gcp.validate_section({"gcp": GCP})


def test_settings_defaults(settings, tmp_path):
    assert settings["state_url"] == f"file://{tmp_path}/state/ybscale/pulumi-state"
    assert settings["machine_types"] == {
        "small": "n2-standard-2", "large": "n2-standard-4",
        "master": "n2-standard-2", "loadgen": "e2-standard-4",
    }  # fmt: skip
    assert settings["min_cpu_platform"] == "Intel Ice Lake" and settings["balancer_timeout"] == 600
    assert settings["ssh_access"] == "iap" and settings["ttl_hours"] == 8


def test_up_writes_endpoints_and_stack_config(settings, tmp_path):
    auto = FakeAuto()
    out = tmp_path / "results/clusters/nodes3-small-reploff/endpoints.json"
    ready = []
    endpoints = stacks.up(
        "nodes3-small-reploff", settings, out=out, auto=auto, now=NOW,
        ready=lambda e, s: ready.append(e["stack"]), log=lambda m: None,
    )  # fmt: skip
    assert json.loads(out.read_text()) == json.loads(json.dumps(endpoints))
    assert endpoints["tserver_ips"] == ["10.42.0.11", "10.42.0.12", "10.42.0.13"]
    assert endpoints["stack"] == "ybscale-s1-nodes3-small-reploff" and ready == [endpoints["stack"]]
    assert endpoints["expiry"] == "20261122t2300z"
    stack = auto.stacks["ybscale-s1-nodes3-small-reploff"]
    assert stack.refreshed is True  # `up --refresh`: VMs deleted by max_run_duration come back
    cluster = json.loads(stack.config["ybscale:cluster"].value)
    assert cluster["nodes"] == 3 and cluster["replication_factor"] == 1
    assert cluster["machine_type"] == "n2-standard-2"
    assert cluster["min_cpu_platform"] == "Intel Ice Lake"
    assert cluster["labels"] == {
        "project": "ybscale", "stack": "ybscale-s1-nodes3-small-reploff",
        "owner": "ada", "study": "s1", "expiry": "20261122t2300z",
    }  # fmt: skip
    assert cluster["ssh_public_key"].startswith("ssh-ed25519 ")
    assert (tmp_path / "results/ssh/id_ed25519").exists()
    assert stack.config["gcp:project"].value == "my-proj"
    opts = auto.options[0]
    assert opts.project_settings.backend.url == settings["state_url"]
    assert (
        opts.env_vars["PULUMI_CONFIG_PASSPHRASE"] == ""
        or "PULUMI_CONFIG_PASSPHRASE" in __import__("os").environ
    )
    assert ("plugin", "gcp", "v9.23.0") in auto.calls
    # the inline program is the one infra/__main__.py runs
    assert stack.program.__module__ == "ybscale_infra.cluster"


def test_up_replicated_large(settings):
    auto = FakeAuto()
    stacks.up("nodes5-large-replon", settings, auto=auto, now=NOW, log=lambda m: None)
    cluster = json.loads(
        auto.stacks["ybscale-s1-nodes5-large-replon"].config["ybscale:cluster"].value
    )
    assert cluster["replication_factor"] == 5 and cluster["machine_type"] == "n2-standard-4"


def test_failed_up_destroys(settings, tmp_path):
    auto = FakeAuto(fail_up=True)
    out = tmp_path / "endpoints.json"
    with pytest.raises(BackendError, match="quota exceeded"):
        stacks.up("nodes3-small-reploff", settings, out=out, auto=auto, now=NOW, log=lambda m: None)
    assert ("destroy", "ybscale-s1-nodes3-small-reploff", True) in auto.calls
    assert not out.exists()


@pytest.mark.parametrize("pending", [False, True], ids=["clean-state", "pending-creates"])
def test_not_ready_destroys(settings, tmp_path, pending):
    """destroy refreshes in its own run; the pending creates of an interrupted up are cleared
    by a refresh of their own first (on the real engine: test_real_engine_pending_creates_...)."""
    auto = FakeAuto(pending=pending)

    def never_ready(endpoints, settings):
        raise BackendError("tserver-2 does not answer")

    with pytest.raises(BackendError, match="does not answer"):
        stacks.up("nodes3-small-reploff", settings, auto=auto, now=NOW, ready=never_ready,
                  log=lambda m: None)  # fmt: skip
    name = "ybscale-s1-nodes3-small-reploff"
    cleared = [("refresh", name, True)] if pending else []
    assert auto.calls[-3 + (not pending) :] == [*cleared, ("destroy", name, True), ("remove", name)]


def test_up_needs_a_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="gcp.project"):
        stacks.up("nodes3-small-reploff", gcp.validate_section({}), auto=FakeAuto())


def test_destroy_writes_marker_and_removes_stack(settings, tmp_path):
    auto = FakeAuto()
    stacks.up("nodes3-small-reploff", settings, auto=auto, now=NOW, log=lambda m: None)
    out = tmp_path / "destroyed.json"
    assert stacks.destroy("nodes3-small-reploff", settings, out=out, auto=auto, log=lambda m: None)
    assert not auto.stacks
    assert json.loads(out.read_text())["existed"] is True
    assert not stacks.destroy("nodes3-small-reploff", settings, auto=auto, log=lambda m: None)


def test_reap_destroys_only_expired_stacks_of_this_study(settings):
    auto = FakeAuto()
    quiet = lambda m: None  # noqa: E731
    stacks.up(
        "nodes3-small-reploff", settings, auto=auto, now=NOW - dt.timedelta(hours=9), log=quiet
    )
    stacks.up("nodes5-large-replon", settings, auto=auto, now=NOW, log=quiet)
    other = {**settings, "study_id": "s2"}  # a study in another directory, just as expired
    stacks.up("nodes3-small-reploff", other, auto=auto, now=NOW - dt.timedelta(hours=9), log=quiet)
    listed = {s["name"]: s for s in stacks.list_stacks(settings, auto=auto)}
    assert set(listed) == {"ybscale-s1-nodes3-small-reploff", "ybscale-s1-nodes5-large-replon"}
    assert listed["ybscale-s1-nodes5-large-replon"]["expiry"] == NOW + dt.timedelta(hours=8)
    assert listed["ybscale-s1-nodes5-large-replon"]["combination"] == "nodes5-large-replon"
    assert stacks.reap(settings, NOW, auto=auto, dry_run=True, log=quiet) == [
        "ybscale-s1-nodes3-small-reploff"
    ]
    assert len(auto.stacks) == 3
    assert stacks.reap(settings, NOW, auto=auto, log=quiet) == ["ybscale-s1-nodes3-small-reploff"]
    assert set(auto.stacks) == {"ybscale-s1-nodes5-large-replon", "ybscale-s2-nodes3-small-reploff"}
    everyone = stacks.list_stacks(settings, auto=auto, every_study=True)
    assert {(s["name"], s["study"]) for s in everyone} == {
        ("ybscale-s1-nodes5-large-replon", "s1"), ("ybscale-s2-nodes3-small-reploff", "s2"),
    }  # fmt: skip
    assert stacks.reap(settings, NOW, auto=auto, log=quiet, every_study=True) == [
        "ybscale-s2-nodes3-small-reploff"
    ]
    assert set(auto.stacks) == {"ybscale-s1-nodes5-large-replon"}


def test_destroy_all_destroys_only_the_owners_stacks(settings):
    auto = FakeAuto()
    quiet = lambda m: None  # noqa: E731
    for combo in ("nodes3-small-reploff", "nodes5-large-replon"):
        stacks.up(combo, settings, auto=auto, now=NOW, log=quiet)
    stacks.up("nodes3-large-replon", {**settings, "owner": "bob"}, auto=auto, now=NOW, log=quiet)
    assert sorted(stacks.destroy_all({"gcp": GCP}, CLUSTERS, auto=auto, log=quiet)) == [
        "ybscale-s1-nodes3-small-reploff", "ybscale-s1-nodes5-large-replon",
    ]  # fmt: skip
    assert set(auto.stacks) == {"ybscale-s1-nodes3-large-replon"}


def test_destroy_all_destroys_this_studys_stacks_only(settings):
    """A concurrent study's stacks (another study id: another directory), same owner, same
    combination, same state backend and project, are left alone, with outputs or without; an
    interrupted first `up` of this study (no outputs) is this study's by its name."""
    auto = FakeAuto()
    for name in ("ybscale-s1-nodes3-small-reploff", "ybscale-s2-nodes5-large-replon"):
        auto.create_or_select_stack(name, "ybscale", None, None)  # no outputs
    stacks.up("nodes5-large-replon", settings, auto=auto, now=NOW, log=lambda m: None)
    stacks.up("nodes5-large-replon", {**settings, "study_id": "s2a"}, auto=auto, now=NOW,
              log=lambda m: None)  # fmt: skip
    files = ClusterFiles.of(CLUSTERS, "nodes3-small-reploff")
    files.folder.mkdir(parents=True)
    files.endpoints.write_text("{}")
    destroyed = stacks.destroy_all({"gcp": GCP}, CLUSTERS, auto=auto, log=lambda m: None)
    assert sorted(destroyed) == [
        "ybscale-s1-nodes3-small-reploff", "ybscale-s1-nodes5-large-replon",
    ]  # fmt: skip
    assert set(auto.stacks) == {"ybscale-s2-nodes5-large-replon", "ybscale-s2a-nodes5-large-replon"}
    assert not files.endpoints.exists()  # the next run brings it up again


def test_study_id_from_owner_and_directory(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    one = gcp.validate_section({"gcp": {"owner": "ada"}})["study_id"]
    assert re.fullmatch(r"[0-9a-f]{8}", one)
    assert gcp.validate_section({"gcp": {"owner": "ada"}})["study_id"] == one  # stable
    assert gcp.validate_section({"gcp": {"owner": "bob"}})["study_id"] != one
    monkeypatch.chdir(second)
    assert gcp.validate_section({"gcp": {"owner": "ada"}})["study_id"] != one
    assert gcp.validate_section({"gcp": {"study_id": "moved1"}})["study_id"] == "moved1"
    with pytest.raises(ValueError, match="gcp.study_id"):
        gcp.validate_section({"gcp": {"study_id": "Not-One"}})


def test_expiry_labels_round_trip():
    assert stacks.expiry_label(NOW) == "20261122t1500z"
    assert stacks.parse_expiry("20261122t1500z") == NOW
    assert stacks.parse_expiry(str(int(NOW.timestamp()))) == NOW


def test_bad_combination():
    with pytest.raises(ValueError, match="not a combination id"):
        stacks.cluster_args("three-nodes", {}, NOW, "key")


def test_section_errors_name_the_field():
    with pytest.raises(
        ValueError, match=r"config/config.yaml: gcp.ssh_access: 'ssh' is not one of"
    ):
        gcp.validate_section({"gcp": {"ssh_access": "ssh"}})
    with pytest.raises(ValueError, match="gcp.ssh_source_cidr: required"):
        gcp.validate_section({"gcp": {"ssh_access": "public"}})
    with pytest.raises(ValueError, match=r"gcp.ssh_source_cidr: '0.0.0.0/0' does not match"):
        gcp.validate_section({"gcp": {"ssh_access": "public", "ssh_source_cidr": "0.0.0.0/0"}})
    with pytest.raises(ValueError, match="gcp.colour: .*unexpected|gcp: Additional"):
        gcp.validate_section({"gcp": {"colour": "blue"}})


LEVELS = {
    "isolation": "repeatable read", "node_size": "small", "nodes": 3,
    "operation_size": 1, "replication": "off", "workload": "read",
}  # fmt: skip


def test_gcp_cluster_reads_endpoints_and_refuses_destroyed(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(ssh, "start_master", lambda host: False)
    monkeypatch.setattr(ssh, "stop_master", lambda host, started=True: None)
    backend = gcp.GcpBackend({"gcp": {"project": "my-proj"}}, CLUSTERS)
    with pytest.raises(BackendError, match="missing; the cluster_up rule"):
        with backend.cluster(row_from_levels(LEVELS, 1000), tmp_path):
            pass
    combo = "nodes3-small-reploff"
    files = ClusterFiles.of(CLUSTERS, combo)
    stacks.up(combo, settings, out=files.endpoints, auto=FakeAuto(), now=NOW,
              log=lambda m: None)  # fmt: skip
    with backend.cluster(row_from_levels(LEVELS, 1000), tmp_path) as cluster:
        assert [t.endpoint.host for t in cluster.targets("read")] == [
            "10.42.0.11", "10.42.0.12", "10.42.0.13",
        ]  # fmt: skip
        assert {t.endpoint.port for t in cluster.targets("read")} == {5433}
        assert cluster.record["masters"] == 1 and cluster.record["machine_type"] == "n2-standard-2"
        assert cluster.settle is not None  # gcp.balancer_timeout 600: wait after every reload
        host = cluster.runner.host
        assert host.host == "ybscale-s1-nodes3-small-reploff-loadgen"  # IAP: by instance name
        assert "start-iap-tunnel %h %p" in host.proxy_command
        assert "--project=my-proj --zone=us-central1-a" in host.proxy_command
        assert host.known_hosts == files.known_hosts
    files.known_hosts.write_text("loadgen ssh-ed25519 AAAA\n")  # as the first SSH records it
    stacks.destroy(combo, settings, out=files.released, auto=FakeAuto(),
                   now=NOW + dt.timedelta(hours=1), log=lambda m: None)  # fmt: skip
    assert not files.endpoints.exists()  # the next run brings it up again
    assert not files.known_hosts.exists()  # new VMs, new host keys
    with pytest.raises(BackendError, match="missing; the cluster_up rule"):
        with backend.cluster(row_from_levels(LEVELS, 1000), tmp_path):
            pass


def test_cli_prints_plan_before_up(settings, tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(
        stacks,
        "up",
        lambda combo, s, out, ready, shape, server, serial_logs: calls.append(
            (combo, out, shape, server, serial_logs)
        ),
    )
    monkeypatch.setattr(stacks, "destroy", lambda combo, s, out: calls.append(("down", out)))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        json.dumps({
            "design": str(seed_design_path()),
            "workloads": str(Path(__file__).resolve().parents[2] / "workloads"),
            "measurement": {"clients": [1, 2]}, "gcp": {"project": "p"},
        })
    )  # fmt: skip
    out = tmp_path / "e.json"
    assert clusters.main(["up", "--combo", "nodes5-large-replon", "--config", str(cfg),
                     "--out", str(out), "--serial-logs", "boot"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "Plan: 1 clusters for 2 rows" in printed and "nodes5-large-replon" in printed
    # the shape comes from the design's rows, not from the combination's name
    assert calls == [("nodes5-large-replon", out, ClusterShape(5, "large", True), {}, Path("boot"))]
    assert clusters.main(["down", "--combo", "c", "--config", str(cfg), "--out", str(out)]) == 0
    assert clusters.main(["up", "--combo", "c", "--config", str(cfg), "--out", str(out),
                     "--set", "gcp.ssh_access=telnet"]) == 1  # fmt: skip
    assert "gcp.ssh_access" in capsys.readouterr().err
    assert clusters.main(["up", "--combo", "nodes7-small-reploff", "--config", str(cfg),
                     "--out", str(out)]) == 1  # fmt: skip
    assert "no row runs on cluster 'nodes7-small-reploff'" in capsys.readouterr().err


# ------------------------------------------------------------------ the real Pulumi engine

ENGINE_VERSION = "v3.259.0"


def engine_path() -> Path:
    """YBSCALE_PULUMI, else what .ci/pulumi.sh builds: ~/.cache/ybscale/pulumi-<version>/pulumi."""
    if os.environ.get("YBSCALE_PULUMI"):
        return Path(os.environ["YBSCALE_PULUMI"])
    return cache_dir() / f"pulumi-{ENGINE_VERSION}-nozxcvbn" / "pulumi"


def cloudfree_program():
    """The real program's config and lifecycle outputs, a component with no cloud resources.

    YBSCALE_TEST_SLOW=<marker file>: signal the marker once registered, then stall the program
    (an `up` in progress, for the interrupt tests) until the driver has handled its signal
    (`STALL_ENDS`), 20 s at most.
    """
    import pulumi
    from ybscale_infra import ClusterArgs, export_lifecycle

    config = pulumi.Config("ybscale")
    args = ClusterArgs(**config.require_object("cluster"))
    export_lifecycle(args)
    cluster = pulumi.ComponentResource("ybscale:test:Cluster", config.require("name"))
    pulumi.ComponentResource("ybscale:test:Node", "tserver-0", opts=pulumi.ResourceOptions(
        parent=cluster))  # fmt: skip
    outputs = {
        "tserver_ips": args.tserver_ips(), "master_addresses": ",".join(args.master_ips()),
        "loadgen_ip": args.loadgen_ip(), "loadgen_name": "lg", "ysql_port": 5433,
        "zone": args.zone, "ssh_access": args.ssh_access, "ssh_user": args.ssh_user,
        "replication_factor": args.replication_factor,
    }  # fmt: skip
    for key, value in outputs.items():
        pulumi.export(key, value)
    marker = os.environ.get("YBSCALE_TEST_SLOW")
    if marker:
        Path(marker).write_text("registered")
        STALL_ENDS.wait(20)


# set by the interrupted driver (INTERRUPTED_UP) once its SIGTERM handler ran: the stalled
# program then returns, instead of holding the driver's exit for the rest of its 20 s (the
# Automation API runs an inline program in a thread that the interpreter joins at exit)
STALL_ENDS = threading.Event()


def then_stall_ends() -> None:
    """SIGTERM: the handler in place first, then STALL_ENDS (an interrupted driver's)."""
    handled = signal.getsignal(signal.SIGTERM)

    def handler(signum, frame):
        try:
            handled(signum, frame)
        finally:
            STALL_ENDS.set()

    signal.signal(signal.SIGTERM, handler)


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """Settings of a project whose state is a local file backend, driven by the real CLI."""
    exe = engine_path()
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        reason = f"{exe}: no Pulumi engine; build it with `bash .ci/pulumi.sh`"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)  # CI builds it: absent there is an error, not a skip
        pytest.skip(reason)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "pulumi-home"))
    monkeypatch.setenv("PULUMI_SKIP_UPDATE_CHECK", "true")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    private_tmp = tmp_path / "tmp"  # what the engine and the Automation API leave in TMPDIR
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.chdir(tmp_path)
    return gcp.validate_section({"gcp": {"project": "my-proj", "owner": "ada"}})


def left_in_tmp(tmp_path) -> list[str]:
    """What the engine tests' workspaces left in their private temp directory."""
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


def quiet(message):
    pass


def logged_engine(tmp_path, monkeypatch) -> Path:
    """Put first on PATH an engine that logs each command line it runs, then runs the real
    one; returns the log."""
    log, wrapper = tmp_path / "engine-runs.log", tmp_path / "logged-engine" / "pulumi"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {engine_path()} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def test_real_engine_lifecycle_and_reap(engine, tmp_path, monkeypatch):
    runs = logged_engine(tmp_path, monkeypatch)
    combo = "nodes3-small-reploff"
    name = stacks.stack_name(combo, engine)
    out = ClusterFiles.of(CLUSTERS, combo).endpoints
    endpoints = stacks.up(combo, engine, out=out, now=NOW, log=quiet, program=cloudfree_program)
    assert endpoints["tserver_ips"] == ["10.42.0.11", "10.42.0.12", "10.42.0.13"]
    assert json.loads(out.read_text())["stack"] == name
    # Pulumi #5578: a fresh workspace cannot read an inline program's stack config ...
    with stacks.workspace(engine) as kwargs, pytest.raises(real_auto.CommandError):
        real_auto.LocalWorkspace(**kwargs).get_config(name, "ybscale:expiry")
    # ... but it reads the stack outputs, where the expiry now is
    (info,) = stacks.list_stacks(engine)
    assert info["expiry"] == NOW + dt.timedelta(hours=8) and info["owner"] == "ada"
    assert info["expiry_source"] == "stack output"
    assert stacks.reap(engine, NOW, log=quiet, program=cloudfree_program) == []
    later = NOW + dt.timedelta(hours=9)
    assert stacks.reap(engine, later, log=quiet, program=cloudfree_program, clusters=CLUSTERS) == [
        name
    ]
    assert stacks.list_stacks(engine) == []
    assert not out.exists()  # the destroyed cluster's endpoints are gone with it
    # every workspace (up, listings, destroy) had a work folder of its own, removed after:
    # no automation-* folder with a Pulumi.yaml is left in the temp directory
    assert left_in_tmp(tmp_path) == []
    # the engine's version was asked once for the process's six workspaces; the summaries
    # after up and destroy never decrypted the state (0.2 CPU-s of key derivation from the
    # passphrase each); the decrypting commands are the lifecycle's own; a state without
    # pending operations is destroyed by one `destroy --refresh`, no refresh of its own
    lines = runs.read_text().splitlines()
    assert lines.count("version") == 1, lines
    history = [line for line in lines if line.startswith("stack history")]
    assert len(history) == 2 and not any("--show-secrets" in line for line in history), lines
    assert [line for line in lines if line.startswith("refresh")] == [], lines
    # only `up`'s own reading of its outputs decrypts; the listings' outputs and the export
    # before the destroy are read masked (stacks.engine_json)
    decrypting = [line for line in lines if "--show-secrets" in line.split()]
    assert len(decrypting) == 1 and decrypting[0].startswith("stack output"), lines
    assert any(line.startswith("stack export") for line in lines), lines
    (destroyed,) = [line for line in lines if line.startswith("destroy")]
    assert "--refresh" in destroyed.split(), destroyed


def test_real_engine_pending_creates_are_cleared_before_destroy(engine, tmp_path, monkeypatch):
    """A state holding a pending create (what an engine killed mid-`up` leaves; written here
    into the file backend's own checkpoint, as `pulumi stack import` drops pending operations)
    is refreshed with --clear-pending-creates before the destroy; nothing of it is left."""
    runs = logged_engine(tmp_path, monkeypatch)
    combo = "nodes3-small-reploff"
    name = stacks.stack_name(combo, engine)
    stacks.up(combo, engine, now=NOW, log=quiet, program=cloudfree_program)
    state_dir = Path(engine["state_url"].removeprefix("file://")) / ".pulumi" / "stacks"
    (checkpoint,) = state_dir.rglob(f"{name}.json")
    state = json.loads(checkpoint.read_text())
    latest = state["checkpoint"]["latest"]
    (node,) = [r for r in latest["resources"] if r["type"] == "ybscale:test:Node"]
    created = {**node, "urn": node["urn"].replace("tserver-0", "tserver-1")}
    latest["pending_operations"] = [{"resource": created, "type": "creating"}]
    checkpoint.write_text(json.dumps(state))
    with stacks.workspace(engine) as kwargs:
        stack = real_auto.select_stack(
            stack_name=name, project_name=engine["name"], program=cloudfree_program,
            opts=real_auto.LocalWorkspaceOptions(**kwargs),
        )  # fmt: skip
        (pending,) = stacks.pending_operations(stack)
        assert pending["type"] == "creating" and pending["resource"]["urn"] == created["urn"]
    assert stacks.destroy_stack(name, engine, log=quiet, program=cloudfree_program) is True
    lines = runs.read_text().splitlines()
    refreshes = [line.split() for line in lines if line.startswith("refresh")]
    assert len(refreshes) == 1 and "--clear-pending-creates" in refreshes[0], lines
    assert stacks.list_stacks(engine) == []


def test_real_engine_onerror_destroys_this_study_only(engine, tmp_path, monkeypatch):
    """onerror -> destroy_all: this study's stacks go with their endpoints (the next run brings
    the cluster up again); a concurrent study's stack of the same combination, owner, project
    and state backend (in another directory: another study id) stays, as does another owner's.
    """
    combo = "nodes5-large-replon"
    out = ClusterFiles.of(tmp_path / CLUSTERS, combo).endpoints
    stacks.up(combo, engine, out=out, now=NOW, log=quiet, program=cloudfree_program)
    stacks.up("nodes3-small-reploff", {**engine, "owner": "bob"}, now=NOW, log=quiet,
              program=cloudfree_program)  # fmt: skip
    config = {"gcp": {"project": "my-proj", "owner": "ada"}}
    elsewhere = tmp_path / "another-study"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    other = gcp.validate_section(config)
    assert other["study_id"] != engine["study_id"]
    other_out = ClusterFiles.of(elsewhere / CLUSTERS, combo).endpoints
    stacks.up(combo, other, out=other_out, now=NOW, log=quiet, program=cloudfree_program)
    monkeypatch.chdir(tmp_path)

    destroyed = stacks.destroy_all(config, CLUSTERS, log=quiet, program=cloudfree_program)
    assert destroyed == [stacks.stack_name(combo, engine)]
    assert not out.exists() and other_out.exists()
    left = stacks.list_stacks(engine, every_study=True)
    assert sorted((s["study"], s["owner"]) for s in left) == sorted(
        [(other["study_id"], "ada"), (engine["study_id"], "bob")]
    )
    again = stacks.up(combo, engine, out=out, now=NOW, log=quiet, program=cloudfree_program)
    assert len(again["tserver_ips"]) == 5 and out.exists()
    assert stacks.destroy(combo, engine, log=quiet, program=cloudfree_program)
    assert stacks.destroy("nodes3-small-reploff", {**engine, "owner": "bob"}, log=quiet,
                          program=cloudfree_program)  # fmt: skip
    monkeypatch.chdir(elsewhere)  # the other study's own clean-up takes its stack
    assert stacks.destroy_all(config, CLUSTERS, log=quiet, program=cloudfree_program) == [
        stacks.stack_name(combo, other)
    ]
    assert not other_out.exists()
    assert stacks.list_stacks(engine, every_study=True) == []
    assert left_in_tmp(tmp_path) == []


def test_real_engine_failed_ready_destroys_and_removes(engine):
    def never_ready(endpoints, settings):
        raise BackendError("tserver-2 does not answer")

    with pytest.raises(BackendError, match="does not answer"):
        stacks.up("nodes3-small-reploff", engine, now=NOW, ready=never_ready, log=quiet,
                  program=cloudfree_program)  # fmt: skip
    assert stacks.list_stacks(engine) == []


INTERRUPTED_UP = """
import sys
sys.path[:0] = {tests!r}
from ybscale.backends.gcp import backend as gcp
from ybscale.backends.gcp.files import ClusterFiles
from ybscale.backends.gcp import stacks
from test_stacks import cloudfree_program, CLUSTERS, NOW, then_stall_ends
stacks.install_signal_handlers()
then_stall_ends()  # stacks' own handler first, then the stalled program returns
settings = gcp.validate_section({{"gcp": {{"project": "my-proj", "owner": "ada"}}}})
try:
    stacks.up("nodes3-small-reploff", settings, now=NOW, program=cloudfree_program,
              out=ClusterFiles.of(CLUSTERS, "nodes3-small-reploff").endpoints)
except KeyboardInterrupt:
    sys.exit(130)
"""


def sigterm_once_registered(script: str, marker: Path, cwd: Path, env=None) -> str:
    """Run `script` (a driver whose program writes `marker`, then stalls), SIGTERM it once the
    marker exists; its output, once it exited with 130 (KeyboardInterrupt)."""
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), proc.communicate(timeout=60)[0]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    return out


def test_real_engine_sigterm_during_up_leaves_nothing(engine, tmp_path):
    marker = tmp_path / "registered"
    script = INTERRUPTED_UP.format(tests=[str(p) for p in _TEST_FOLDERS])
    env = {**os.environ, "YBSCALE_TEST_SLOW": str(marker)}
    out = sigterm_once_registered(script, marker, tmp_path, env)
    assert "bring-up interrupted" in out and "destroyed and removed" in out, out
    assert stacks.list_stacks(engine) == []
    assert not ClusterFiles.of(CLUSTERS, "nodes3-small-reploff").endpoints.exists()
    locks = tmp_path / "state" / "ybscale" / "pulumi-state" / ".pulumi" / "locks"
    assert not [p for p in locks.rglob("*") if p.is_file()]


def test_failed_up_saves_every_vms_serial_console_first(settings, tmp_path, monkeypatch):
    """gcloud (a stub logging its arguments) is asked for each VM's serial console."""
    (tmp_path / "nocloud" / "gcloud").write_text('#!/bin/bash\necho "console of $5 ($*)"\n')
    auto = FakeAuto(fail_up=True)
    with pytest.raises(BackendError, match="quota exceeded"):
        stacks.up("nodes3-small-replon", settings, auto=auto, now=NOW, log=lambda m: None,
                  serial_logs=tmp_path / "boot-logs")  # fmt: skip
    logdir = tmp_path / "boot-logs/ybscale-s1-nodes3-small-replon"
    names = sorted(p.name for p in logdir.iterdir())
    assert len(names) == 7 and "ybscale-s1-nodes3-small-replon-loadgen.serial.log" in names
    text = (logdir / "ybscale-s1-nodes3-small-replon-tserver-2.serial.log").read_text()
    assert "get-serial-port-output ybscale-s1-nodes3-small-replon-tserver-2" in text
    assert "--zone=us-central1-a --project=my-proj" in text
    assert ("destroy", "ybscale-s1-nodes3-small-replon", True) in auto.calls


def test_rows_of_one_cluster_take_turns_rows_of_two_run_together(settings, tmp_path):
    """Issue 9, 8: one benchmark at a time per cluster (its load generator), not globally."""
    import threading

    order = []
    inside = threading.Event()

    def row(combo, tag, hold):
        with ClusterFiles.of(CLUSTERS, combo).lock():
            order.append(f"{tag} in")
            inside.set()
            time.sleep(hold)
            order.append(f"{tag} out")

    first = threading.Thread(target=row, args=("nodes3-small-reploff", "a", 0.5))
    first.start()
    inside.wait(10)
    other = threading.Thread(target=row, args=("nodes5-large-replon", "b", 0))
    same = threading.Thread(target=row, args=("nodes3-small-reploff", "c", 0))
    other.start()
    other.join(10)
    same.start()
    for t in (first, same):
        t.join(10)
    assert order.index("b out") < order.index("a out")  # another cluster did not wait
    assert order.index("c in") > order.index("a out")  # the same cluster did


def test_real_engine_reap_destroys_a_stack_locked_by_a_killed_up(engine, tmp_path):
    """SIGKILL of an `up` (engine included) leaves the stack locked; `ybscale reap` clears a
    lock no engine process holds, then destroys the expired stack."""
    combo = "nodes3-small-reploff"
    stacks.up(combo, engine, now=NOW, log=quiet, program=cloudfree_program)  # expiry recorded
    marker = tmp_path / "registered"
    script = INTERRUPTED_UP.format(tests=[str(p) for p in _TEST_FOLDERS])
    env = {**os.environ, "YBSCALE_TEST_SLOW": str(marker)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the second up never reached the program"
    os.killpg(proc.pid, signal.SIGKILL)  # the Python driver and its engine, no clean-up
    proc.wait(timeout=30)
    time.sleep(1)
    name = stacks.stack_name(combo, engine)
    assert stacks.stale_locks(name, engine), "the killed up left no lock"
    later = NOW + dt.timedelta(hours=9)
    assert stacks.reap(engine, later, log=quiet, program=cloudfree_program) == [name]
    assert stacks.list_stacks(engine) == []
    assert stacks.stale_locks(name, engine) == []


def test_long_cluster_labels_are_cut_so_every_vm_name_fits_gce():
    """<name>-<study_id>-<cluster>-tserver-<n> must fit Compute Engine's 63 characters: with
    the longest name and study id the schema allows (room for 18 characters of label), a label
    that does not fit is cut and ends in 6 hex digits of its hash; one that fits is kept."""
    longest = {"name": "y" * 20, "study_id": "s" * 12}
    prefix = f"{'y' * 20}-{'s' * 12}-"
    assert stacks.stack_name("nodes3-small-repl", longest) == prefix + "nodes3-small-repl"
    labels = [
        f"nodes{n}-small-replon-shared-buffers-{b}-r2" for n in (3, 5) for b in ("128mb", "256mb")
    ]
    names = [stacks.stack_name(label, longest) for label in labels]
    assert len(set(names)) == len(labels), names  # cut labels stay distinct
    assert all(len(f"{name}-tserver-99") == 63 for name in names), names
    assert names[0] == prefix + "nodes3-smal-" + hashlib.sha256(labels[0].encode()).hexdigest()[:6]
    assert names == [stacks.stack_name(label, longest) for label in labels]  # stable
    tservers = {label: 5 for label in labels}
    assert stacks.vm_name_errors(longest, tservers) == []
    errors = stacks.vm_name_errors(longest, {labels[0]: 101})  # -tserver-100: one too many
    assert len(errors) == 1 and "gcp.name, gcp.study_id: VM name" in errors[0], errors


def test_destroying_a_cut_stack_forgets_its_clusters_endpoints(settings, tmp_path):
    """destroy_stack finds the cluster folder of a stack whose label was cut by the name the
    label gives, not by the name's tail, and invalidates its endpoints (a folder of another
    cluster keeps its own)."""
    settings = {**settings, "name": "y" * 20, "study_id": "s" * 12}
    clusters = tmp_path / "clusters"
    label, other = "nodes5-large-replon-shared-buffers-256mb", "nodes3-small-reploff"
    for each in (label, other):
        files = ClusterFiles.of(clusters, each)
        files.folder.mkdir(parents=True)
        files.endpoints.write_text("{}")
    name = stacks.stack_name(label, settings)
    assert not name.endswith(label)
    assert not stacks.destroy_stack(name, settings, auto=FakeAuto(), log=quiet, clusters=clusters)
    assert not ClusterFiles.of(clusters, label).endpoints.exists()
    assert ClusterFiles.of(clusters, other).endpoints.exists()


def loopback_site_file(tmp_path: Path, generators: int) -> Path:
    """A site for the loopback program's stacks alone (nothing listens): a 3-tserver cluster,
    `generators` load generators."""
    keys = tmp_path / "authorized_keys"
    keys.write_text("")
    site = {"tservers": {"3": ["127.0.3.1", "127.0.3.2", "127.0.3.3"]}, "ysql_port": 5433,
            "ssh_port": 2222, "tserver_ssh_port": 2223, "ssh_user": "u",
            "authorized_keys": str(keys), "ready_file": "/ready", "yb_admin": "/yb-admin",
            "master_ip": "127.9.0.1",
            "generators": [[f"127.0.0.{i}", 2222 + i] for i in range(2, generators + 1)],
            }  # fmt: skip
    path = tmp_path / "site.json"
    path.write_text(json.dumps(site))
    return path


def last_update_changes(settings, name: str) -> tuple[int, dict]:
    """(the stack's updates so far, the last one's resource changes), as the engine recorded
    them (`pulumi stack history`)."""
    with stacks.workspace(settings) as kwargs:
        stack = real_auto.select_stack(stack_name=name, project_name=settings["name"],
                                       program=lambda: None,
                                       opts=real_auto.LocalWorkspaceOptions(**kwargs))  # fmt: skip
        history = stack.history(show_secrets=False)
    return len(history), dict(history[0].resource_changes or {})


def test_real_engine_grow_adds_one_load_generator_and_changes_nothing_else(
    engine, tmp_path, monkeypatch
):
    """Issue 38, `auto` on gcp: `stacks.grow` takes the loopback program's stack (a resource
    per load generator, as the real program has a VM each) from one load generator to two: the
    engine's own record of that update is one resource created, none updated, replaced or
    deleted; the expiry stays the bring-up's. An update that would delete a resource is
    refused before anything changes, and a failed one leaves the stack as it was, never
    destroyed (cluster_down releases it)."""
    import pulumi
    from loopback import SITE_ENV
    from loopback import program as loopback

    monkeypatch.setenv(SITE_ENV, str(loopback_site_file(tmp_path, 2)))
    settings = {**engine, "load_generators": "auto"}  # 3 x n2-standard-2: starts with one
    combo = "nodes3-small-reploff"
    name = stacks.stack_name(combo, settings)

    def with_extra():  # and a resource the plain program does not declare
        loopback()
        pulumi.ComponentResource("ybscale:loopback:Extra", "extra")

    first = stacks.up(combo, settings, now=NOW, log=quiet, program=with_extra)
    assert first["loadgen_names"] == ["loopback-loadgen"]
    updates, _ = last_update_changes(settings, name)
    grown = stacks.grow(combo, settings, first, 2, log=quiet, program=with_extra, now=LATER)
    assert grown["loadgen_names"] == ["loopback-loadgen", "loopback-loadgen-1"]
    assert grown["loadgen_ssh_ports"] == [2222, 2224] and grown["created"] == first["created"]
    count, changes = last_update_changes(settings, name)
    assert count == updates + 1
    assert changes.pop("create") == 1 and set(changes) == {"same"}, changes
    (info,) = stacks.list_stacks(settings)
    assert info["expiry"] == NOW + dt.timedelta(hours=8)  # the bring-up's, not the growth's
    with pytest.raises(BackendError, match=r"loadgen-1 \(2 load generators\) not added: the "
                       r"update would delete urn:pulumi:.*Extra::extra"):  # fmt: skip
        stacks.grow(combo, settings, grown, 2, log=quiet, program=loopback, now=LATER)
    # a failed update (the site has no third generator): the stack is left, not destroyed
    with pytest.raises(BackendError, match=r"loadgen-2 \(3 load generators\) not added"):
        stacks.grow(combo, settings, grown, 3, log=quiet, program=with_extra, now=LATER)
    count, changes = last_update_changes(settings, name)
    assert count == updates + 1  # neither ran an update: the stack is as the growth left it
    assert stacks.destroy(combo, settings, log=quiet, program=with_extra)
    assert stacks.list_stacks(settings) == []


INTERRUPTED_GROW = """
import os, sys
sys.path[:0] = {tests!r}
from ybscale.backends.gcp import backend as gcp
from ybscale.backends.gcp import stacks
from ybscale.backends import lifecycle
from test_stacks import cloudfree_program, LATER, NOW, then_stall_ends
lifecycle.interrupt_on_signals()  # the measuring job's: SIGTERM raises KeyboardInterrupt
then_stall_ends()  # the job's handler first, then the stalled program returns
settings = gcp.validate_section({{"gcp": {{"project": "my-proj", "owner": "ada"}}}})
first = stacks.up("nodes3-small-reploff", settings, now=NOW, program=cloudfree_program)
os.environ["YBSCALE_TEST_SLOW"] = {marker!r}  # the growth's program stalls
try:
    stacks.grow("nodes3-small-reploff", settings, first, 2, program=cloudfree_program, now=LATER)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_real_engine_sigterm_during_grow_leaves_the_stack_unlocked(engine, tmp_path):
    """SIGTERM to the measuring job (its handler raises KeyboardInterrupt) while `stacks.grow`
    runs the engine: the engine is asked to cancel, the growth waits for it and releases the
    stack's lock, and the stack is left as it was for cluster_down (never destroyed)."""
    marker = tmp_path / "registered"
    script = INTERRUPTED_GROW.format(tests=[str(p) for p in _TEST_FOLDERS], marker=str(marker))
    out = sigterm_once_registered(script, marker, tmp_path)
    assert "(2 load generators): interrupted" in out and "left for cluster_down" in out, out
    (info,) = stacks.list_stacks(engine)
    assert info["resource_count"] > 0  # not destroyed
    name = stacks.stack_name("nodes3-small-reploff", engine)
    locks = tmp_path / "state" / "ybscale" / "pulumi-state" / ".pulumi" / "locks"
    assert not [p for p in locks.rglob("*") if p.is_file()]
    home = f"PULUMI_HOME={tmp_path / 'pulumi-home'}".encode()  # the engine fixture's
    left = []
    for proc_dir in Path("/proc").glob("[0-9]*"):
        try:
            if home in (proc_dir / "environ").read_bytes().split(b"\0"):
                left.append((proc_dir / "cmdline").read_bytes().replace(b"\0", b" "))
        except OSError:
            continue
    assert left == [], left  # no engine left running after the job
    assert stacks.destroy("nodes3-small-reploff", engine, log=quiet, program=cloudfree_program)
    assert stacks.stale_locks(name, engine) == []
