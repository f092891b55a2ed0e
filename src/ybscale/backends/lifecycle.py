"""One cluster lifecycle for every backend: `cluster_up` -> the rows measured on it ->
`cluster_down`, as Snakemake jobs (rules/cluster.smk), and the clean-up of clusters left up.

A cluster is named by its label (`Backend.cluster_labels`: local, one per row or, with
`local.cluster_per: combination`, per combination; gcp, one per combination; existing, one per
set of endpoints) and keeps its files in the folder the rules name (`results/clusters/<label>/`):
`endpoints.json` (temp: what the measuring jobs need to reach it, or why it did not come up)
and `released.json` (when it was released, and how).

A failed bring-up is a result, not a crash: its endpoints record the error, the rows on it
fail their attempts saying so, and the cluster's slot moves on to the next cluster. An
interruption is not: the job stops what it started and exits non-zero.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ybscale.backends import backend_class, get_backend
from ybscale.backends.base import (
    Backend,
    BackendError,
    Cluster,
    alive,
    released_since,
    start_time,
)
from ybscale.design.row import Row
from ybscale.files import write_json
from ybscale.measure import attempt

ENDPOINTS = "endpoints.json"
RELEASED = "released.json"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def interrupt_on_signals() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does: what a job started is
    stopped by the same clean-up."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


@contextmanager
def _logged(path: str | Path) -> Iterator[None]:
    """The job's stdout and stderr (its subprocesses' too) into its log."""
    with open(path, "w") as log:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        yield


def bring_up(backend: Backend, label: str, definition: Mapping, folder: Path, log: str) -> dict:
    """The cluster's endpoints, or (its bring-up failed) a record of why."""
    try:
        endpoints = backend.up(label, definition, folder)
    except Exception as exc:  # the rows on it fail with this; the slot moves on
        traceback.print_exc()
        return {"label": label, "created": _now(), "failed": f"{type(exc).__name__}: {exc}",
                "log": log}  # fmt: skip
    return {"label": label, "created": _now(), **endpoints}


def up_job(settings: Mapping, label: str, definition: Mapping, out: Path, log: str) -> None:
    """`cluster_up`: bring the cluster up, write its endpoints (or why it did not come up)."""
    interrupt_on_signals()
    with _logged(log):
        backend = get_backend(settings, out.parent.parent)
        write_json(out, bring_up(backend, label, definition, out.parent, log))


def down_job(settings: Mapping, label: str, endpoints_path: Path, out: Path, log: str) -> None:
    """`cluster_down`: release the cluster once every row on it was attempted."""
    interrupt_on_signals()
    with _logged(log):
        endpoints = json.loads(endpoints_path.read_text())
        backend = get_backend(settings, out.parent.parent)
        if "failed" in endpoints:  # the failed bring-up stopped what it had started
            record = {"nothing": "the cluster did not come up"}
        else:
            record = backend.down(endpoints, out.parent)
        write_json(out, {**record, "label": label, "released": _now()})
        print(f"{label}: released")


@contextmanager
def attached(config: Mapping, row: Row, endpoints_path: Path) -> Iterator[Cluster]:
    """The cluster `row` runs on, as its endpoints describe it (the measuring job's)."""
    endpoints = json.loads(endpoints_path.read_text())
    if "failed" in endpoints:
        raise BackendError(
            f"cluster {endpoints['label']} did not come up: {endpoints['failed']} "
            f"(log: {endpoints['log']})"
        )
    backend = get_backend(config, endpoints_path.parent.parent)
    with backend.measure(row, endpoints, endpoints_path.parent) as cluster:
        yield cluster


def release_left(settings: Mapping, clusters: Path, labels: Sequence[str], log=print) -> list:
    """Release every cluster of `labels` still up (its endpoints there, not released since):
    a run whose targets needed no `cluster_down`, or one that stopped on an error or an
    interruption. Its endpoints go, so the next run brings it up again. Errors are logged."""
    backend = get_backend(settings, Path(clusters))
    released = []
    for label in dict.fromkeys(labels):
        folder = Path(clusters) / label
        path = folder / ENDPOINTS
        try:
            endpoints = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        try:
            if "failed" not in endpoints and not released_since(folder, endpoints):
                backend.down(endpoints, folder)
                released.append(label)
                log(f"{label}: released (left up by this run)")
            path.unlink(missing_ok=True)
        except Exception as exc:
            log(f"{label}: could not be released: {exc}")
    return released


def clean_up_after_error(settings: Mapping, clusters: Path, labels: Sequence[str]) -> None:
    """The Snakefile's `onerror:` (a failed job, Ctrl-C, SIGTERM): release what is left up,
    then whatever the backend itself tracks (gcp: this owner's stacks; local: the servers this
    workflow started)."""
    release_left(settings, clusters, labels)
    backend_class(settings["backend"]).on_error(settings, labels, Path(clusters))


RUNS = "ybscale-runs"  # in Snakemake's folder: a file <pid>-<start> per run that parsed it


def recover_after_kill(
    settings: Mapping, clusters: str | Path, labels: Sequence[str], state: Path = Path(".snakemake")
) -> None:
    """What a Snakemake run killed -9 (the OOM killer, a closed laptop) left, cleared as the
    next run parses the Snakefile, before Snakemake checks its locks: the jobs it left running
    and the servers of clusters whose workflow died are stopped, the endpoints naming them
    removed (the next run brings those clusters up again; `Backend.reap_dead`), and Snakemake's
    locks go when no run that may hold them is alive (`unlock_if_dead`). Its unfinished jobs
    run again (the profile's rerun-incomplete)."""
    backend = backend_class(settings["backend"])
    for item in backend.reap_dead(settings, list(dict.fromkeys(labels)), Path(clusters)):
        print(f"ybscale: {item} (left by a run that was killed)", file=sys.stderr)
    if unlock_if_dead(state):
        print(f"ybscale: {state}/locks: removed (left by a run that was killed)", file=sys.stderr)


def unlock_if_dead(state: Path) -> bool:
    """Record this run (`RUNS`), then remove Snakemake's locks in `state` if every other run
    recorded there is dead: a run records itself as it parses, before it locks, so a live
    holder of the locks is always on record. True if locks were removed."""
    runs = state / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    me = os.getpid()
    (runs / f"{me}-{start_time(me)}").touch()
    live = False
    for record in runs.iterdir():
        pid, _, started = record.name.partition("-")
        if not pid.isdigit() or int(pid) == me:
            continue
        if alive(int(pid)) and start_time(int(pid)) == started:
            live = True
        else:
            record.unlink(missing_ok=True)
    locks = state / "locks"
    if live or not any(locks.glob("*.lock")):
        return False
    shutil.rmtree(locks, ignore_errors=True)
    return True


LIFECYCLE_RULES = frozenset({"cluster_up", "measure", "cluster_down", "publish"})


def forced(run: str, label: str, targets, forcerun, forcetargets: bool, forceall: bool) -> bool:
    """Whether Snakemake was told to run `run`'s lifecycle again (its settings: `-F`; `-f`
    with a target in the row's or its cluster's folder; `--forcerun` naming a lifecycle rule,
    or a file there): then the row is measured, current or not."""
    if forceall or LIFECYCLE_RULES & set(forcerun):
        return True
    paths = [*forcerun, *(targets if forcetargets else ())]
    folders = (f"results/runs/{run}/", f"results/clusters/{label}/")
    return any(os.path.normpath(p).startswith(folders) for p in map(str, paths))


def measuring_order(run_priority: Mapping[str, int], cluster_of: Mapping[str, str]) -> list:
    """The clusters in the order their rows are measured (by their first row's priority)."""
    first: dict[str, int] = {}
    for run, label in cluster_of.items():
        first[label] = max(first.get(label, 0), run_priority[run])
    return sorted(first, key=lambda label: -first[label])


def slot_chain(backend: type[Backend], settings, rows, cluster_of, run_priority) -> dict:
    """Cluster label -> the cluster its slot releases before bringing it up (None: the first of
    its slot): `backend.max_clusters` slots, the clusters in the measuring order."""
    return backend.slots(settings, rows, measuring_order(run_priority, cluster_of))


def stage_priorities(run_priority: Mapping[str, int], cluster_of: Mapping[str, str]) -> dict:
    """Snakemake priorities of the lifecycle's jobs: every `cluster_down` before any row is
    measured, every row measured before any `cluster_up`, and within each stage the
    measuring order. So when a partial re-run leaves several clusters free to come up, the
    one up is measured and released before the next comes up (with the `bench` slot: one
    cluster at a time on this machine)."""
    n = max(run_priority.values(), default=0)
    order = measuring_order(run_priority, cluster_of)
    cluster = {label: len(order) - i for i, label in enumerate(order)}
    return {
        "up": cluster,
        "measure": {run: n + p for run, p in run_priority.items()},
        "down": {label: 2 * n + p for label, p in cluster.items()},
    }


def measure_job(
    settings: Mapping, run: str, row: Row, measurement: Mapping, endpoints: Path,
    status: str, staged: Path, log_path: str, measured_as: str = "",
) -> None:  # fmt: skip
    """The measuring rule's job, an attempt: it exits 0 whether the row was measured or
    failed, and records which in its status (`attempt.write_status`), so the row's cluster is
    released either way; the `publish` rule then publishes the staged measurements or fails
    with the row's error. An interruption is not a result: it exits non-zero and records
    nothing. Progress goes to the terminal and the log."""
    from ybscale.measure import bench  # numpy and the measuring code: not at parse time

    interrupt_on_signals()
    with open(log_path, "w") as log:

        def progress(msg: str) -> None:
            stamp = dt.datetime.now().strftime("%H:%M:%S")
            print(f"[{stamp}] {msg}", file=sys.stderr, flush=True)
            print(f"[{stamp}] {msg}", file=log, flush=True)

        try:
            progress(f"{run}: on cluster {endpoints.parent.name} ({row.combination}), {row.levels}")
            with attached(settings, row, endpoints) as cluster:
                # the measurement settings are the rule's param (a change re-measures the row);
                # the backend reads its whole section (how to reach its hosts, timeouts)
                bench.measure(row, cluster, measurement, staged.parent, staged, progress)
        except Exception as exc:  # any failure of the row is its result; a bug's too
            progress(f"FAILED: {exc}")
            traceback.print_exc(file=log)
            attempt.write_status(status, run, log_path, exc, measured_as)
            staged.mkdir(parents=True, exist_ok=True)  # what the row left: its server logs
        else:
            attempt.write_status(status, run, log_path, measured_as=measured_as)


def main(argv: list[str] | None = None) -> int:
    """``python -m ybscale.backends.lifecycle up|down --settings S --cluster L ... --out O
    --log LOG``: the `cluster_up` and `cluster_down` jobs (rules/cluster.smk); ``measure --run R
    --row JSON --measurement JSON --settings S --endpoints E --status S --staged D --log L``: the
    measuring job (rules/measure.smk), on the cluster it attaches to."""
    import argparse

    from ybscale.settings import freeze, read_file

    parser = argparse.ArgumentParser(prog="python -m ybscale.backends.lifecycle")
    stage = parser.add_subparsers(dest="stage", required=True)
    for name, what in (("up", "--definition"), ("down", "--endpoints")):
        sub = stage.add_parser(name)
        sub.add_argument("--settings", required=True, help="the loaded settings (a JSON file)")
        sub.add_argument("--cluster", required=True, help="the cluster's label")
        sub.add_argument(what, required=True)
        sub.add_argument("--out", required=True, type=Path)
        sub.add_argument("--log", required=True)
    sub = stage.add_parser("measure")
    sub.add_argument("--run", required=True)
    sub.add_argument("--row", required=True, help="the resolved row (JSON)")
    sub.add_argument("--measurement", required=True, help="measurement settings (JSON)")
    sub.add_argument("--settings", required=True, help="the loaded settings (a JSON file)")
    sub.add_argument("--endpoints", required=True, type=Path, help="the cluster's")
    sub.add_argument("--status", required=True)
    sub.add_argument("--staged", required=True, type=Path)
    sub.add_argument("--log", required=True)
    sub.add_argument("--fingerprint", default="", help="what it measures (attempt.fingerprint)")
    args = parser.parse_args(argv)
    settings = read_file(args.settings)
    if args.stage == "measure":
        measure_job(settings, args.run, Row.from_dict(json.loads(args.row)),
                    freeze(json.loads(args.measurement)), args.endpoints, args.status,
                    args.staged, args.log, args.fingerprint)  # fmt: skip
    elif args.stage == "up":
        up_job(settings, args.cluster, json.loads(args.definition), args.out, args.log)
    else:
        down_job(settings, args.cluster, Path(args.endpoints), args.out, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
