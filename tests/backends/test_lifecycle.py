"""The lifecycle every backend shares (ybscale.backends.lifecycle): a failed bring-up is a
result the rows fail with, clusters left up are released, the slots and the stages' order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import row_from_levels, servers_under, settings_with

from ybscale.backends import lifecycle
from ybscale.backends.base import OWNER_ENV, BackendError, start_time
from ybscale.backends.local import LocalBackend
from ybscale.backends.local.cluster import forget_endpoints

LEVELS = {"operation_size": 1, "workload": "read", "node_size": "small", "nodes": 2,
          "replication": "off"}  # fmt: skip


def local(data_root, **extra):
    return LocalBackend(settings_with(local={"data_root": str(data_root), **extra}))


def test_a_failed_bring_up_is_recorded_and_fails_the_rows_on_it(data_root, tmp_path, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 0)  # as root, the servers' user must exist
    backend = local(data_root, user="no-such-user-here")
    row = row_from_levels(LEVELS, 100)
    folder = tmp_path / "clusters" / "run01"
    record = lifecycle.bring_up(backend, "run01", backend.definition(backend.config, [row]),
                                folder, "results/logs/cluster_up/run01.log")  # fmt: skip
    assert "local.user" in record["failed"] and record["label"] == "run01"
    assert servers_under(data_root) == []
    (folder / lifecycle.ENDPOINTS).write_text(json.dumps(record))
    with pytest.raises(
        BackendError,
        match=r"cluster run01 did not come up: .*local\.user.*"
        r"\(log: results/logs/cluster_up/run01\.log\)",
    ):
        with lifecycle.attached(backend.config, row, folder / lifecycle.ENDPOINTS):
            pass


def test_a_cluster_left_up_is_released_once(data_root, tmp_path):
    backend = local(data_root)
    row = row_from_levels(LEVELS, 100)
    folder = tmp_path / "run01"
    endpoints = lifecycle.bring_up(backend, "run01", backend.definition(backend.config, [row]),
                                   folder, "log")  # fmt: skip
    (folder / lifecycle.ENDPOINTS).write_text(json.dumps(endpoints))
    assert len(servers_under(data_root)) == 2
    logs = []
    assert lifecycle.release_left(backend.config, tmp_path, ["run01", "run02"], logs.append) == [
        "run01"
    ]
    assert servers_under(data_root) == [] and not (folder / lifecycle.ENDPOINTS).exists()
    assert logs == ["run01: released (left up by this run)"]
    assert lifecycle.release_left(backend.config, tmp_path, ["run01"], logs.append) == []


def test_local_clusters_come_up_one_after_the_other_in_the_measuring_order():
    priority = {"run01": 2, "run02": 4, "run03": 1, "run04": 3}  # run02 is measured first
    labels = {run: run for run in priority}
    settings = settings_with()
    chain = lifecycle.slot_chain(LocalBackend, settings, [], labels, priority)
    assert chain == {"run02": None, "run04": "run02", "run01": "run04", "run03": "run01"}
    stages = lifecycle.stage_priorities(priority, labels)
    # every release before any measurement before any bring-up, each in the measuring order
    assert min(stages["down"].values()) > max(stages["measure"].values())
    assert min(stages["measure"].values()) > max(stages["up"].values())
    assert sorted(stages["up"], key=stages["up"].get, reverse=True) == list(chain)
    assert sorted(stages["measure"], key=stages["measure"].get) == ["run03", "run01", "run04",
                                                                    "run02"]  # fmt: skip


def test_shared_clusters_take_as_many_slots_as_allowed():
    priority = {"run01": 4, "run02": 3, "run03": 2, "run04": 1}
    labels = {"run01": "a", "run02": "b", "run03": "a", "run04": "c"}  # a, b, c in that order

    class Two(LocalBackend):
        @classmethod
        def max_clusters(cls, settings):
            return 2

    chain = lifecycle.slot_chain(Two, {}, [], labels, priority)
    assert chain == {"a": None, "b": None, "c": "a"}


def test_snakemakes_locks_go_only_when_every_run_that_may_hold_them_is_dead(tmp_path):
    """A run records itself (pid and start) as it parses, before it locks: locks with no other
    live run on record are a killed run's, removed (the dead records with them); a live run's
    stay. A recorded pid that another process took since (another start) is a dead run's."""
    state = tmp_path / ".snakemake"
    runs, locks = state / lifecycle.RUNS, state / "locks"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        runs.mkdir(parents=True)
        locks.mkdir()
        (locks / "0.input.lock").write_text("results/a\n")
        (runs / f"{sleeper.pid}-{start_time(sleeper.pid)}").touch()  # a live run
        assert not lifecycle.unlock_if_dead(state)
        assert (locks / "0.input.lock").exists()
        (runs / f"{sleeper.pid}-{start_time(sleeper.pid)}").unlink()
        (runs / f"{sleeper.pid}-1").touch()  # its pid, another start: a dead run's
        assert lifecycle.unlock_if_dead(state)
        assert not locks.exists()
        assert [p.name for p in runs.iterdir()] == [f"{os.getpid()}-{start_time(os.getpid())}"]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_endpoints_naming_servers_that_are_gone_are_forgotten(tmp_path):
    """A cluster folder's endpoints go when their data directory is gone and the cluster was
    not released since; not when the servers are still there, nor after a release."""
    home = tmp_path / "ybscale-1-abcdef12"
    home.mkdir()
    folder = tmp_path / "clusters" / "run01"
    folder.mkdir(parents=True)
    endpoints = folder / lifecycle.ENDPOINTS
    endpoints.write_text(json.dumps({"home": str(home), "created": "2026-11-26T05:00:00"}))
    assert not forget_endpoints(folder) and endpoints.exists()  # its servers' data is there
    home.rmdir()
    (folder / lifecycle.RELEASED).write_text(json.dumps({"released": "2026-11-26T05:01:00"}))
    assert not forget_endpoints(folder) and endpoints.exists()  # released: nothing to forget
    (folder / lifecycle.RELEASED).write_text(json.dumps({"released": "2026-11-26T04:00:00"}))
    assert forget_endpoints(folder) and not endpoints.exists()


def test_the_jobs_a_dead_workflow_left_running_here_are_stopped(tmp_path, monkeypatch, data_root):
    """kill -9 of Snakemake alone (the OOM killer picks one process) leaves its jobs running;
    the next run in that folder stops them before it runs their rows again. Not a job of a
    live workflow, nor one a dead workflow left in another folder."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # a workflow that died
    study, elsewhere = tmp_path / "study", tmp_path / "elsewhere"
    study.mkdir()
    elsewhere.mkdir()

    def job(owner: int, cwd) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=cwd,
                                env={**os.environ, OWNER_ENV: str(owner)})  # fmt: skip

    orphan, live, other = job(gone.pid, study), job(os.getpid(), study), job(gone.pid, elsewhere)
    try:
        monkeypatch.chdir(study)
        settings = settings_with(local={"data_root": str(data_root)})
        lines = LocalBackend.reap_dead(settings, [], study / "results" / "clusters")
        assert lines == [f"process {orphan.pid}: a job stopped"]
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert live.poll() is None and other.poll() is None
    finally:
        for proc in (orphan, live, other):
            proc.kill()
            proc.wait()


def test_a_row_measured_as_it_stands_needs_no_cluster(tmp_path):
    """attempt.is_current: an ok attempt with the same fingerprint and every measurement
    published; another fingerprint, a failed attempt or a missing file is not current."""
    from ybscale.measure import attempt

    folder = tmp_path / "run05"
    folder.mkdir()
    params = {"row": {"run": "run05"}, "code": "c1", "measurement": {"seconds": 1}}
    now = attempt.fingerprint(params)
    assert now == attempt.fingerprint(dict(reversed(params.items())))  # order-free
    assert not attempt.is_current(folder, now)  # nothing measured yet
    attempt.write_status(folder / "status.json", "run05", "log", measured_as=now)
    for name in attempt.PUBLISHED:
        (folder / name).write_text("x")
    assert attempt.is_current(folder, now)
    assert not attempt.is_current(folder, attempt.fingerprint({**params, "code": "c2"}))
    (folder / "per_second.csv").unlink()
    assert not attempt.is_current(folder, now)  # a measurement to publish again
    (folder / "per_second.csv").write_text("x")
    attempt.write_status(folder / "status.json", "run05", "log", RuntimeError("no"), now)
    assert not attempt.is_current(folder, now)


def test_forced_rows_are_those_snakemake_was_told_to_run_again():
    from ybscale.backends.lifecycle import forced

    def f(targets=(), forcerun=(), forcetargets=False, forceall=False, run="run05", label="c1"):
        return forced(run, label, targets, forcerun, forcetargets, forceall)

    row = ["results/runs/run05/throughput.csv"]
    assert f(row, forcetargets=True) and f(["./results/runs/run05/status.json"], forcetargets=True)
    assert not f(row)  # a target without -f is not forced
    assert not f(["results/runs/run01/throughput.csv"], forcetargets=True)  # a neighbour
    assert not f(["results/runs/run050/throughput.csv"], forcetargets=True)
    assert f(["results/clusters/c1/released.json"], forcetargets=True)  # its cluster
    assert f(forcerun=["measure"]) and f(forceall=True) and not f(forcerun=["ceiling"])
    assert f(forcerun=["results/runs/run05/throughput.csv"])
