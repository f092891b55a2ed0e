"""A zone out of capacity: the error texts Compute Engine really returns, and one more bring-up
in gcp.fallback_zone through the real Pulumi engine."""

from __future__ import annotations

import pytest
import test_stacks
from test_stacks import NOW, cloudfree_program, quiet

from ybscale.backends.base import BackendError
from ybscale.backends.gcp import capacity, stacks
from ybscale.backends.gcp.config import gcp_section
from ybscale.settings import SettingsError

engine = test_stacks.engine  # the real Pulumi engine with a local file backend (fixture)

# As reported (project ids as their reporters masked them):
STOCKOUTS = [
    # the Terraform provider behind pulumi-gcp, openshift/release#29959 (2022)
    "Error: Error waiting for instance to create: The zone\n"
    "'projects/XXXXXXXXXXXXXXXXXXXXXXXX/zones/us-central1-c' does not have\n"
    "enough resources available to fulfill the request. '(resource\ntype:compute)'.",
    # the same provider, forseti-security/terraform-google-forseti#631 (2021)
    "Error: Error waiting for instance to create: The zone 'projects/[project-id]/zones/"
    "us-west1-c' does not have enough resources available to fulfill the request.  Try a "
    "different zone, or try again later",
    # the API's code with the message, scylladb/scylla-cluster-tests#12477 (2025)
    "503 SERVICE UNAVAILABLE ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone "
    "'projects/sct-project-1/zones/us-east1-c' does not have enough resources available to "
    "fulfill the request.  '(resource type:compute)'.",
    # gcloud's YAML of the operation error, GoogleCloudPlatform/ai-on-gke#849 (2024)
    "code: ZONE_RESOURCE_POOL_EXHAUSTED\nerrorDetails:\n- localizedMessage:\n    message: A "
    "e2-standard-2 VM instance is currently unavailable in the europe-west4-a\n      zone.",
]
NOT_CAPACITY = [
    # a regional quota: another zone of the region draws on the same one
    "Quota 'CPUS' exceeded. Limit: 24.0 in region us-central1.",
    "Code: QUOTA_EXCEEDED\nMessage: Quota 'CPUS_ALL_REGIONS' exceeded.",
    "The resource 'projects/p/zones/us-central1-a/instances/x' was not found",
]


@pytest.mark.parametrize("text", STOCKOUTS)
def test_a_zone_out_of_capacity_is_recognised(text):
    assert capacity.zone_exhausted(text)
    assert capacity.zone_exhausted(BackendError(f"ybscale-nodes3: bring-up failed: {text}"))


@pytest.mark.parametrize("text", NOT_CAPACITY)
def test_quota_and_other_errors_are_not(text):
    assert not capacity.zone_exhausted(text)


def test_the_fallback_zone_must_be_another_zone_of_the_region():
    with pytest.raises(SettingsError, match="gcp.fallback_zone: europe-west4-a must be another"):
        gcp_section({"gcp": {"fallback_zone": "europe-west4-a"}})
    with pytest.raises(SettingsError, match="gcp.fallback_zone: us-central1-a must be another"):
        gcp_section({"gcp": {"fallback_zone": "us-central1-a"}})
    assert gcp_section({"gcp": {"fallback_zone": "us-central1-b"}})["fallback_zone"]


def stocked_out_in(zone):
    """The cloud-free program, failing in `zone` as a VM insert there would."""

    def program():
        import pulumi

        if pulumi.Config("gcp").require("zone") == zone:
            raise Exception(STOCKOUTS[1].replace("us-west1-c", zone))
        cloudfree_program()

    return program


def test_real_engine_out_of_capacity_is_brought_up_once_more_in_the_fallback_zone(engine):
    combo = "nodes3-small-reploff"
    settings = {**engine, "fallback_zone": "us-central1-b"}
    program = stocked_out_in("us-central1-a")
    said = []
    endpoints = capacity.up_with_fallback(
        stacks.up, combo, settings, log=said.append, now=NOW, program=program
    )
    assert endpoints["zone"] == "us-central1-b"
    retry = f"{combo}: zone us-central1-a is out of capacity; once more in us-central1-b"
    assert [line for line in said if line.startswith(retry)]
    (info,) = stacks.list_stacks(engine)  # the failed stack was destroyed before the retry
    assert info["name"] == stacks.stack_name(combo, engine)
    assert stacks.destroy(combo, engine, log=quiet, program=program)


def test_real_engine_no_fallback_or_another_failure_is_raised_as_it_is(engine):
    combo = "nodes3-small-reploff"
    with pytest.raises(BackendError, match="does not have enough resources"):
        capacity.up_with_fallback(stacks.up, combo, engine, log=quiet, now=NOW,
                                  program=stocked_out_in("us-central1-a"))  # fmt: skip
    settings = {**engine, "fallback_zone": "us-central1-b"}
    calls = []

    def not_ready(endpoints, s):
        calls.append(s["zone"])
        raise BackendError("tserver-2 does not answer")

    with pytest.raises(BackendError, match="does not answer"):
        capacity.up_with_fallback(stacks.up, combo, settings, log=quiet, now=NOW,
                                  program=cloudfree_program, ready=not_ready)  # fmt: skip
    assert calls == ["us-central1-a"]  # no retry elsewhere for a failure that is not capacity
    assert stacks.list_stacks(engine) == []


# As reported: the Terraform provider behind pulumi-gcp, poseidon/typhoon#438 (2019)
PLATFORM_REFUSED = (
    "* google_compute_instance.controllers.2: Error creating instance: googleapi: Error 400: "
    "Invalid value for field 'resource.minCpuPlatform': 'Intel Haswell'. CPU platform "
    "unavailable in requested zone. Valid options for this zone are: Intel Skylake, Intel "
    "Broadwell., invalid"
)


def test_a_zone_without_the_cpu_platform_is_recognised():
    assert capacity.platform_refused(PLATFORM_REFUSED) == (
        "Intel Haswell", "Intel Skylake, Intel Broadwell"
    )  # fmt: skip
    assert not capacity.zone_exhausted(PLATFORM_REFUSED)
    for text in STOCKOUTS + NOT_CAPACITY:
        assert capacity.platform_refused(text) is None


def _up_refused_in(zone_refusing: str, calls: list):
    def up(combo, settings, **kwargs):
        calls.append(settings["zone"])
        if settings["zone"] == zone_refusing:
            raise BackendError(f"{combo}: bring-up failed: {PLATFORM_REFUSED}")
        return {"zone": settings["zone"]}

    return up


def test_a_zone_without_the_cpu_platform_is_retried_in_the_fallback_zone():
    """Issue 36: like a stockout, a zone refusing gcp.min_cpu_platform gets one more bring-up in
    gcp.fallback_zone; with none, the error names the platform, the zone and what it offers."""
    calls, said = [], []
    settings = {"zone": "us-central1-a", "fallback_zone": "us-central1-b"}
    up = _up_refused_in("us-central1-a", calls)
    assert capacity.up_with_fallback(up, "c", settings, log=said.append) == {
        "zone": "us-central1-b"
    }  # fmt: skip
    assert calls == ["us-central1-a", "us-central1-b"]
    assert said == [
        "c: zone us-central1-a does not offer CPU platform Intel Haswell; once more in "
        "us-central1-b (gcp.fallback_zone)"
    ]
    calls.clear()
    with pytest.raises(BackendError) as failed:
        capacity.up_with_fallback(up, "c", {**settings, "fallback_zone": None})
    assert calls == ["us-central1-a"]
    assert str(failed.value).startswith(
        "c: zone us-central1-a does not offer CPU platform Intel Haswell (gcp.min_cpu_platform); "
        "it offers Intel Skylake, Intel Broadwell: set gcp.fallback_zone to a zone that does"
    )


# ------------------------------------------- the readiness wait: a key SSH keeps refusing

DENIED = (
    "ybscale@ybscale-c-loadgen: test -f /var/lib/ybscale/ready exited 255: "
    "ybscale@ybscale-c-loadgen: Permission denied (publickey)."
)


def _wait(monkeypatch, answers):
    """wait_ready against a load generator whose `ssh` answers `answers` in turn (the last
    again and again), on a clock the sleeps advance; (outcome, clock seconds, ssh calls)."""
    from pathlib import Path

    from ybscale.backends import ssh
    from ybscale.backends.gcp import reach

    calls, now = [], [0.0]

    def check_output(host, argv, timeout):
        calls.append(argv)
        answer = answers[min(len(calls), len(answers)) - 1]
        raise BackendError(answer)

    monkeypatch.setattr(ssh, "check_output", check_output)
    endpoints = {"stack": "ybscale-c", "loadgen_ip": "10.42.0.20", "loadgen_name": "lg",
                 "project": "p", "zone": "us-central1-a", "ssh_user": "ybscale",
                 "ssh_access": "iap", "ysql_port": 5433, "tserver_ips": ["10.42.0.11"],
                 "master_addresses": "10.42.0.10:7100"}  # fmt: skip
    settings = {"ssh_access": "iap", "ssh_key": "results/ssh/id_ed25519", "ready_timeout": 1200}

    def sleep(seconds):
        now[0] += seconds

    row = type("Row", (), {"dataset_rows": 1})()
    try:
        reach.wait_ready(endpoints, settings, Path("kh"), row, log=lambda _: None, sleep=sleep,
                         clock=lambda: now[0])  # fmt: skip
    except BackendError as exc:
        return str(exc), now[0], len(calls)
    return "ready", now[0], len(calls)


def test_a_key_ssh_keeps_refusing_fails_the_wait_naming_os_login(monkeypatch):
    """Issue 36: with OS Login enforced by an organisation policy, the ssh-keys metadata is
    ignored and every SSH attempt is refused; the wait fails after AUTH_GRACE_S (180 s), not
    after ready_timeout (1,200 s), and says why."""
    from ybscale.backends.gcp import reach

    error, waited, _ = _wait(monkeypatch, [DENIED])
    assert reach.AUTH_GRACE_S <= waited < reach.AUTH_GRACE_S + 30
    assert error.startswith(
        "ybscale-c: SSH to the load generator refuses the key results/ssh/id_ed25519 as ybscale "
        "for 180s: most likely an organisation policy enforces OS Login "
        "(constraints/compute.requireOsLogin)"
    )
    assert error.endswith(f"Last: {DENIED}")


def test_a_key_refused_while_the_vm_boots_is_waited_for(monkeypatch):
    """Refusals while the guest agent has not written the key yet, then other errors (the
    startup script still running): the wait goes on to ready_timeout as before."""
    booting = "ybscale@ybscale-c-lg: test -f /var/lib/ybscale/ready exited 1: "
    error, waited, calls = _wait(monkeypatch, [DENIED] * 5 + [booting])
    assert error.startswith("ybscale-c: not ready after 1200s: ") and waited >= 1200
    assert calls == 80
