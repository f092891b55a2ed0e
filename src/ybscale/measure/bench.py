"""Measure one design row: at each client count, a warm-up and repetitions of pgbench."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ybscale import __version__
from ybscale.design import workload
from ybscale.design.row import Row
from ybscale.errors import BackendError
from ybscale.files import write_csv
from ybscale.measure import buffers, generators, latency, outside, pgbench, precision, utilisation
from ybscale.measure.generators import split
from ybscale.measure.measuring import MeasuringProtocol
from ybscale.measure.per_second import COLUMNS as PER_SECOND_COLUMNS
from ybscale.measure.per_second import node_logs, per_second
from ybscale.measure.pgbench import PgbenchCommand

THROUGHPUT_COLUMNS = [
    "clients",
    "tps",
    "tps_mean",
    "tps_ci_low",
    "tps_ci_high",
    "precision_met",
    "stopped",
    "tps_min",
    "tps_max",
    "tps_spread_pct",
    "repetitions",
    "latency_ms",
    "latency_stddev_ms",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "latency_n",
    "transactions",
    "retried",
    "retries",
    "failures",
    "seconds",
    "steady_seconds",
    "order",
]


# the cluster a row is measured on: a backend's `ybscale.backends.base.Cluster` (run_pgbench,
# capacity, readings, ...); the measuring job (`backends.lifecycle.measure_job`) attaches it
Cluster = object


class MeasurementError(RuntimeError):
    """A row could not be measured; the message says which row, client count and why."""


def run_pgbench(
    cluster: Cluster,
    kind: str,
    script: Path,
    env: Mapping[str, str],
    clients: int,
    seconds: int,
    settings: Mapping,
    log_prefix: Path | None,
    seed: int | None = None,
    variables: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    ended: Callable[[], object] | None = None,
    starts: list[float] | None = None,
) -> pgbench.PgbenchResult:
    """One pgbench per serving node at the same time, each on the load generator that drives
    the node (`Target.generator`); their results merged.

    `seed` makes the key choices repeatable: target i runs with --random-seed=seed+i.
    `variables` are the row's workload variables; each target adds its key space.
    `workdir`: where the runs' files go (default: the log prefix's folder). `ended` is called
    as soon as every pgbench has finished, before their logs are collected. With several
    generators every pgbench starts at one agreed instant (`generators.LEAD` s ahead); each
    one's start on the reference clock is appended to `starts`.
    """
    targets = cluster.targets(kind)
    shares = split(clients, len(targets))
    names = cluster.generator_names()
    cores = [cluster.load_cores(g) for g in range(len(names))]
    threads = generators.threads(shares, [t.generator for t in targets], cores)
    offsets = cluster.clock_offsets()
    workdir = workdir or (log_prefix.parent if log_prefix else Path.cwd())
    protocol = MeasuringProtocol.of(settings)  # the harness's timeout and tries
    start_at = time.time() + generators.LEAD if len(names) > 1 else None
    timeout = seconds + protocol.timeout + (generators.LEAD if start_at else 0)
    procs = []
    try:
        for i, (target, share) in enumerate(zip(targets, shares, strict=True)):
            if share == 0:
                continue
            prefix = Path(f"{log_prefix}_{target.endpoint.role}") if log_prefix else None
            command = PgbenchCommand(
                scripts=(script,),
                endpoint=target.endpoint,
                clients=share,
                threads=threads[i],
                seconds=seconds,
                variables={**(variables or {}), **target.variables},
                env=env,
                workdir=workdir,
                timeout=timeout,
                log_prefix=prefix,
                max_tries=protocol.max_tries,
                progress=1,
                random_seed=seed + i if seed is not None else None,
                generator=target.generator,
                start_at=start_at,
            )
            procs.append((target, prefix, command, cluster.run(command)))
        waited = [
            _wait(t, raw, proc, timeout, cluster.generator_label(t.generator))
            for t, raw, _, proc in procs
        ]
    finally:
        for *_, proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    if ended is not None:
        ended()
    if starts is not None:
        starts += [
            at - offsets[t.generator]
            for (t, *_), (_, at) in zip(procs, waited, strict=True)
            if at is not None
        ]
    for _, _, command, _ in procs:
        cluster.collect(command)
    return pgbench.merge([result for result, _ in waited])


def _wait(target, raw: Path | None, proc: subprocess.Popen, timeout: float, generator: str):
    """Wait for one pgbench, keep its raw output, and parse it (errors name the node and the
    load generator); (its result, when the start barrier let it start, or None)."""
    where = f"{target.endpoint.role} ({target.endpoint.host}:{target.endpoint.port})"
    where += f" from load generator {generator}"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise MeasurementError(f"pgbench against {where} did not finish within {timeout}s") from exc
    started, err = generators.started(err)
    if raw is not None:
        raw.with_suffix(".stdout").write_text(out)
        raw.with_suffix(".stderr").write_text(err)
    if proc.returncode != 0:
        raise MeasurementError(
            f"pgbench against {where} exited with {proc.returncode}: {(err or out).strip()[-600:]}"
        )
    try:
        return pgbench.parse_output(out, err), started
    except pgbench.PgbenchError as exc:
        raise MeasurementError(f"pgbench against {where}: {exc}") from exc


def summarize(
    clients: int,
    reps: list[pgbench.PgbenchResult],
    seconds: int,
    steady: list[float] | None = None,
    rule: precision.Sequential | None = None,
    steady_seconds: float = math.nan,
    order: int = 0,
    stopped: str = "",
) -> dict:
    """One throughput line: mean and 95 % CI of the steady-state tps, median, spread, latency.

    `steady` holds each repetition's tps without its first second(s) (pgbench's own figure when
    absent); `tps` is their mean, the figure the ceilings use.
    """
    tps = list(steady) if steady is not None else [r.tps for r in reps]
    rule = rule or precision.Sequential(min_repetitions=1, max_repetitions=max(1, len(tps)))
    if rule.values != tps:
        rule.values = list(tps)
    stat = rule.summary()
    median = statistics.median(tps)
    latencies = [r.latency_ms for r in reps if r.latency_ms is not None]
    stddevs = [r.latency_stddev_ms for r in reps if r.latency_stddev_ms is not None]
    return {
        "clients": clients,
        "tps": stat["tps_mean"],
        "tps_mean": stat["tps_mean"],
        "tps_ci_low": stat["tps_ci_low"],
        "tps_ci_high": stat["tps_ci_high"],
        "precision_met": stat["precision_met"],
        "stopped": stopped or ("precision" if stat["precision_met"] else "max_repetitions"),
        "tps_min": min(tps),
        "tps_max": max(tps),
        "tps_spread_pct": 100 * (max(tps) - min(tps)) / median if median else float("nan"),
        "repetitions": len(reps),
        "latency_ms": statistics.median(latencies) if latencies else float("nan"),
        "latency_stddev_ms": statistics.median(stddevs) if stddevs else float("nan"),
        "transactions": sum(r.transactions for r in reps),
        "retried": sum(r.retried for r in reps),
        "retries": sum(r.retries for r in reps),
        "failures": sum(r.failed for r in reps),
        "seconds": seconds,
        "steady_seconds": steady_seconds,
        "order": order,
    }


def batch_interval(tps: float, se: float, df: int, confidence: float = 0.95) -> dict:
    """A single repetition's Student-t interval from its batch-means standard error
    (`precision.batch_means`); NaN without two counted seconds."""
    if not (df >= 1 and math.isfinite(se)):
        return {"tps_ci_low": math.nan, "tps_ci_high": math.nan, "ci_from": ""}
    from scipy.special import stdtrit

    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    return {"tps_ci_low": tps - half, "tps_ci_high": tps + half, "ci_from": "batch_means"}


def steady_throughput(
    prefixes: list[Path],
    seconds: int,
    skip: int,
    fallback: float,
    offsets: list[float] | None = None,
    batches: list | None = None,
) -> tuple[float, float, np.ndarray]:
    """(tps, seconds, latencies in µs) of one repetition, its first `skip` s excluded; its
    standard error from its own seconds (`precision.batch_means`) appended to `batches`.

    Each per-transaction log is reduced to per-second lines first (`latency.reduce_logs`, on
    the reference clock: `offsets` are the clock offsets of the generators that wrote each
    prefix's logs); the latencies are those of the counted seconds. Falls back to pgbench's
    own tps (seconds NaN, no latencies) when the run was too short to trim.
    """
    paths, shifts = [], []  # the generators' logs are local once pgbench ended (copied back)
    for i, prefix in enumerate(prefixes):
        found = pgbench.aggregate_log_paths(prefix)
        paths += found
        shifts += [offsets[i] if offsets else 0.0] * len(found)
    try:
        transactions = latency.reduce_logs(paths, seconds, shifts)
        samples = pgbench.parse_aggregate_logs(paths)
    except (pgbench.PgbenchError, ValueError):  # shorter than one whole interval
        return fallback, math.nan, np.array([])
    tps, used = precision.steady_tps(samples, skip)
    if not (used > 0 and math.isfinite(tps)):
        return fallback, math.nan, np.array([])
    if batches is not None:
        batches.append(precision.batch_means(samples, skip))
    first = int(samples["interval_start"].min()) + skip
    lat = np.concatenate([latency.counted_latencies(tx, first) for tx in transactions])
    return tps, float(used), lat


QUIET_LOOK = 1.0  # seconds of one look at the machine while waiting for it to be quiet


def disturbed(
    util: Mapping[str, float], outside_max: float | None, by: Mapping[str, float] | None = None
) -> str:
    """Why a run is set aside: others took more than `outside_max` of the machine during its
    counted seconds (`utilisation.with_outside`, less the study's own work outside its groups,
    `own`), naming what took it (`by`: `outside.shares`); '' when not, or not measured."""
    others = util.get("outside", math.nan) - util.get("own", 0.0)
    if outside_max is None or not others > outside_max:
        return ""
    theirs = {k: v for k, v in (by or {}).items() if not outside.is_own(k)}
    unnamed = others - sum(theirs.values())
    if by is not None and unnamed >= 0.01:  # begun and ended within the window: not seen
        theirs["unnamed (processes begun and ended within the run)"] = unnamed
    named = outside.words(dict(sorted(theirs.items(), key=lambda item: -item[1])))
    share = f"{100 * others:.0f} % of the machine" + (f": {named}" if named else "")
    return f"others took {share} (measurement.outside_max {outside_max:g})"


def capacity(cluster: Cluster, kind: str, clients: int) -> dict[str, float]:
    """CPUs per resource; each load generator's: the cores its pgbench threads can use."""
    cap = cluster.cpu_capacity()
    targets = cluster.targets(kind)
    owners = [t.generator for t in targets]
    names = cluster.generator_names()
    cores = [cluster.load_cores(g) for g in range(len(names))]
    threads = generators.threads(split(clients, len(targets)), owners, cores)
    for g, name in enumerate(names):
        if name in cap:
            used = sum(t for t, owner in zip(threads, owners, strict=True) if owner == g)
            cap[name] = float(min(used, cap[name]))
    return cap


def window_utilisation(cluster: Cluster, kind: str, clients: int, readings) -> dict[str, float]:
    """U per resource over the counted seconds (`utilisation.Window.stop`), {} without them."""
    if readings is None:
        return {}
    seconds, first, last = readings
    cap = capacity(cluster, kind, clients)
    util = utilisation.with_outside(utilisation.utilisation(first, last, seconds, cap), cap)
    if "outside" in util and "host" in cap:  # of it, the study's own work (its other jobs)
        util["own"] = outside.own(outside.shares(first, last, seconds, cap["host"]))
    return util


def outside_by(cluster: Cluster, readings) -> dict[str, float] | None:
    """What others took over the counted seconds, by name (`ybscale.measure.outside`); None
    when the run was not read or its readings do not say who (no `outside.PREFIX` counter)."""
    if readings is None or not any(k.startswith(outside.PREFIX) for k in readings[2]):
        return None
    seconds, first, last = readings
    return outside.shares(first, last, seconds, cluster.cpu_capacity().get("host", math.nan))


def mean_utilisation(per_repetition: list[dict[str, float]]) -> dict[str, float]:
    """Each resource's mean utilisation over the repetitions that measured it."""
    names = sorted({name for util in per_repetition for name in util})
    return {n: statistics.mean(u[n] for u in per_repetition if n in u) for n in names}


def busiest(util: Mapping[str, float]) -> str:
    """', busiest: node2 97 %' for the progress line ('' when nothing was measured)."""
    named = utilisation.resources(util)
    if not named:
        return ""
    name = max(named, key=named.get)
    return f", busiest: {name} {100 * named[name]:.0f} %"


def measure_sweep(
    row: Row, cluster, script, env, settings, logs, rep_rows, progress, record=None
) -> list:
    """Every client count the sweep chooses, each repeated to the stated precision (or, in the
    economy sweep, probed once and only the best measured); one throughput line per count.

    What to measure next is the sweep's decision alone (`MeasuringProtocol.run`:
    `adaptive.sweep`, `adaptive.economy`), made from the throughputs measured so far; `RowSweep`
    carries it out (pgbench, utilisation, the lines). With `auto` load generators
    (`cluster.generator_bound()` not None): a count that finds the generators the bottleneck
    (`generators.Growth`) adds one (`cluster.add_generator`) while fewer than the bound drive
    the cluster, and is measured again; a count measured with fewer generators than drive the
    cluster when the sweep comes back to it is measured again too. What a count measured before
    is kept in `record` (`superseded`, its logs in a folder of pgbench-logs of their own), never
    in the tables; each line says its `generators`."""
    sweep = RowSweep(row, cluster, script, env, settings, logs, rep_rows, progress)
    sweep.protocol.run(sweep.one_count, sweep.probe)
    sweep.checked("after the last repetition")  # the others are followed by the next one's check
    if record is not None and sweep.growth.bound is not None:
        record["load_generator_growth"] = {**sweep.growth.record(), "superseded": sweep.superseded}
    return sorted(sweep.lines.values(), key=lambda line: line["clients"])


class RowSweep:
    """Carries out one row's sweep: each repetition or probe run, timed and read, its line
    written. Holds what was measured: `lines` (by client count, in the order counts were first
    measured), `measured` (each count's full repetitions: pgbench result, steady seconds,
    utilisation, latencies counted), `rep_rows` (repetitions.csv, probes included)."""

    def __init__(self, row: Row, cluster, script, env, settings, logs, rep_rows, progress):
        self.row, self.cluster, self.script, self.env = row, cluster, script, env
        self.settings, self.logs, self.rep_rows, self.progress = settings, logs, rep_rows, progress
        self.protocol = MeasuringProtocol.of(settings)
        self.lines: dict[int, dict] = {}
        self.measured: dict[int, list] = {}
        self.measured_with: dict[int, int] = {}  # the generators each count's repetitions ran with
        self.growth = generators.Growth(cluster.generator_bound(), len(cluster.generator_names()))
        self.superseded: list[dict] = []
        self.quiet_budget = float(self.protocol.quiet_wait)  # seconds left to wait for quiet
        self.last_reset = {"reset": "", "reset_s": math.nan}  # the last start_repetition's
        self.last_outside: dict[str, float] | None = None  # what others took in the last run

    def wait_for_quiet(self, clients: int) -> float:
        """Before a disturbed run is measured again: one-second looks at the machine, the
        study idle, until others take at most `outside_max` of it, within what is left of the
        row's `quiet_wait`; the seconds waited."""
        started = time.monotonic()
        while time.monotonic() - started < self.quiet_budget:
            window = utilisation.Window(self.cluster.cpu_seconds, 0.0)
            window.start()
            time.sleep(QUIET_LOOK)
            readings = window.stop(False)
            util = window_utilisation(self.cluster, self.row.kind, clients, readings)
            if not disturbed(util, self.protocol.outside_max, outside_by(self.cluster, readings)):
                break
        waited = time.monotonic() - started
        self.quiet_budget = max(0.0, self.quiet_budget - waited)
        return waited

    def supersede(self, clients: int, why: str) -> None:
        """The count's measurements so far out of the tables, into the record."""
        k = self.lines[clients]["generators"]
        gone = [r for r in self.rep_rows if r["clients"] == clients]
        self.rep_rows[:] = [r for r in self.rep_rows if r["clients"] != clients]
        aside = self.logs / f"superseded-c{clients:03d}-k{k}"
        aside.mkdir(exist_ok=True)
        for rep in {r["repetition"] for r in gone}:
            for path in node_logs(self.logs, clients, rep):
                path.rename(aside / path.name)
        self.superseded.append({"clients": clients, "generators": k, "why": why,
                                "line": dict(self.lines[clients]), "repetitions": gone,
                                "logs": aside.name})  # fmt: skip
        self.measured[clients] = []

    def checked(self, when: str) -> None:
        """Every node up (and the replication quorum); MeasurementError naming when."""
        try:
            self.cluster.check()
        except BackendError as exc:
            raise MeasurementError(f"{self.row.run}, {when}: {exc}") from exc

    def start_repetition(self, clients: int, warm: bool) -> None:
        """Before each repetition: the dataset reset (every write repetition starts from the
        loaded rows; how, and its seconds, go to the repetition's line: `reset`, `reset_s`), a
        check, and the warm-up before a count's first repetition in a call."""
        started = time.monotonic()
        how = self.cluster.reset(self.row.kind) or ""
        self.last_reset = {"reset": how, "reset_s": round(time.monotonic() - started, 3)}
        self.checked(f"before {clients} clients")
        if warm and self.protocol.warmup > 0:
            run_pgbench(
                self.cluster,
                self.row.kind,
                self.script,
                self.env,
                clients,
                self.protocol.warmup,
                self.settings,
                None,
                variables=self.row.variables,
                workdir=self.logs,
            )

    def repetition(self, clients: int, rep: int, seconds: int, probe: bool = False) -> tuple:
        """One run of pgbench for `seconds` (a repetition, or with `probe` the economy sweep's
        probe, repetition 0), measured again while others took more than `outside_max` of the
        machine during it (`disturbed`), at most `remeasure` times; (result, steady seconds,
        utilisation, latencies, steady tps) of the one kept. A run set aside stays in rep_rows
        (`set_aside` says why), its logs in a folder of pgbench-logs of their own."""
        again, waited = 0, 0.0
        while True:
            done = self.run_once(clients, rep, seconds, probe)
            why = disturbed(done[2], self.protocol.outside_max, self.last_outside)
            self.rep_rows[-1] |= {"measured_again": again, "disturbed": bool(why),
                                  "waited_for_quiet_s": round(waited, 1)}  # fmt: skip
            if not why or again == self.protocol.remeasure:
                return done
            self.rep_rows[-1]["set_aside"] = why
            again += 1
            aside = self.logs / f"set-aside-c{clients:03d}-r{rep}-{again}"
            aside.mkdir(exist_ok=True)
            for path in node_logs(self.logs, clients, rep):
                path.rename(aside / path.name)
            waited = self.wait_for_quiet(clients)
            self.progress(
                f"{self.row.run}: {clients:>4} clients, repetition {rep}: set aside ({why}), "
                f"measured again ({again} of at most {self.protocol.remeasure}) after "
                f"waiting {waited:.0f} s for others to leave the machine"
            )
            self.start_repetition(clients, warm=False)

    def run_once(self, clients: int, rep: int, seconds: int, probe: bool) -> tuple:
        """One run of pgbench for `seconds`: its steady tps, recorded in rep_rows; (result,
        steady seconds, utilisation, latencies, steady tps)."""
        cluster, kind, run = self.cluster, self.row.kind, self.row.run
        skip = self.protocol.skip_seconds
        prefix = pgbench.repetition_prefix(self.logs, clients, rep)
        seed = zlib.crc32(f"{run}/{clients}/{rep}".encode())
        several = len(cluster.generator_names()) > 1  # then pgbench starts LEAD s later
        window = utilisation.Window(cluster.cpu_seconds, skip + generators.LEAD * several)
        stopped = []  # the window ends with pgbench, before its logs are collected and read
        starts: list[float] = []  # each pgbench's start on the reference clock
        batches: list[tuple[float, int]] = []
        blocks = cluster.block_counters()
        # the block counters read again as pgbench ends, before its logs come back and the
        # layout is read again: the window holds the measured run's reads alone
        blocks_after: list[dict] = []

        def end() -> None:
            stopped.append(window.stop())
            blocks_after.append(cluster.block_counters() if blocks else {})

        window.start()
        try:
            result = run_pgbench(
                cluster,
                kind,
                self.script,
                self.env,
                clients,
                seconds,
                self.settings,
                prefix,
                seed,
                variables=self.row.variables,
                ended=end,
                starts=starts,
            )
            targets, offsets = cluster.targets(kind), cluster.clock_offsets()
            steady, span, lat = steady_throughput(
                [Path(f"{prefix}_{t.endpoint.role}") for t in targets],
                seconds,
                skip,
                result.tps,
                [offsets[t.generator] for t in targets],
                batches,
            )
        except (MeasurementError, pgbench.PgbenchError, BackendError) as exc:
            raise MeasurementError(f"{run}, {clients} clients, repetition {rep}: {exc}") from exc
        finally:
            readings = stopped[0] if stopped else window.stop(raising=False)
        try:  # the layout it ran on (YugabyteDB: no tablet split while it ran)
            cluster.verify_layout(f"after {clients} clients, repetition {rep}")
        except BackendError as exc:
            raise MeasurementError(f"{run}, {clients} clients, repetition {rep}: {exc}") from exc
        util = window_utilisation(cluster, kind, clients, readings)
        self.last_outside = outside_by(cluster, readings)
        if not blocks_after:  # pgbench did not end (it failed): nothing to read
            blocks_after.append({})
        blocks = buffers.delta(blocks, blocks_after[0])
        se, df = batches[0] if batches else (math.nan, 0)
        self.rep_rows.append(
            {
                "clients": clients,
                "repetition": rep,
                "probe": probe,
                "set_aside": "",
                "generators": len(cluster.generator_names()),
                "random_seed": seed,
                **self.last_reset,
                **vars(result),
                "tps_pgbench": result.tps,
                "tps": steady,
                "tps_se": se,
                "tps_se_df": df,
                "steady_seconds": span,
                "cpu_window_s": readings[0] if readings else math.nan,
                "start_skew_ms": 1000 * generators.skew(starts),
                "outside_by": outside.words(self.last_outside or {}),
                **blocks,
                **latency.percentiles(lat),
                **{f"util_{name}": u for name, u in util.items()},
                **utilisation.bottleneck(util, steady, capacity(cluster, kind, clients)),
            }
        )
        return result, span, util, lat, steady

    def probe(self, clients: int) -> float:
        """The economy sweep's probe of `clients`: one short run (`probe_seconds`); its line
        says `probe` until the count is measured in full, and no ceiling reads it."""
        self.start_repetition(clients, warm=True)
        result, span, util, lat, steady = self.repetition(
            clients, 0, self.protocol.probe_seconds, probe=True
        )
        self.progress(
            f"{self.row.run}: {clients:>4} clients, probe ({self.protocol.probe_seconds} s): "
            f"{steady:,.0f} tps (pgbench {result.tps:,.0f})" + busiest(util)
        )
        self.write_line(
            clients, [(result, span, util, lat)], [steady], None, self.protocol.probe_seconds,
            "probe",
        )  # fmt: skip
        self.lines[clients]["generators"] = len(self.cluster.generator_names())
        return steady

    def one_count(
        self, clients: int, previous: list[float], at_most: int | None, below_best: bool
    ) -> list[float]:
        """The count measured (`count`), again with one more generator while `auto` finds the
        generators the bottleneck; again from the start when more generators drive the cluster
        than when it was measured."""
        k = len(self.cluster.generator_names())
        line = self.lines.get(clients)
        if previous and not below_best and line["generators"] != k:
            self.supersede(clients, f"measured with {line['generators']} generator(s), {k} since")
            previous = []
        values = self.count(clients, previous, at_most, below_best)
        if not below_best and self.growth.add(clients, k, self.lines[clients]):
            line = self.lines[clients]
            self.supersede(clients, "client-bound")
            try:
                self.cluster.add_generator()
            except BackendError as exc:
                raise MeasurementError(
                    f"{self.row.run}, {clients} clients: the load generators are the bottleneck "
                    f"and generator {k + 1} could not join: {exc}"
                ) from exc
            self.progress(
                f"{self.row.run}: {clients:>4} clients: the load generators are the bottleneck "
                f"({line['bottleneck']} {100 * line['bottleneck_util']:.0f} %): {k + 1} "
                "generators from now on, this count measured again"
            )
            return self.one_count(clients, [], at_most, False)
        return values

    def count(
        self, clients: int, previous: list[float], at_most: int | None, below_best: bool
    ) -> list[float]:
        """The count's repetitions (after `previous`) until the rule is done or it has
        `at_most`; none when the sweep found it `below_best` (its line says so)."""
        rule = self.protocol.rule(previous)
        self.measured.setdefault(clients, [])
        below = below_best and not rule.done
        started = False  # the warm-up runs before the first repetition of a call
        while not below and not rule.done and (at_most is None or len(rule.values) < at_most):
            self.start_repetition(clients, warm=not started)
            started = True
            rep = len(rule.values) + 1
            *kept, steady = self.repetition(clients, rep, self.protocol.seconds)
            self.measured[clients].append(tuple(kept))
            self.measured_with[clients] = len(self.cluster.generator_names())
            rule.add(steady)
            half = 100 * precision.relative_half_width(rule.values)
            interval = f"95% CI ±{half:.1f}%" if math.isfinite(half) else "no interval yet"
            self.progress(
                f"{self.row.run}: {clients:>4} clients, repetition {rep}: {steady:,.0f} tps "
                f"(pgbench {kept[0].tps:,.0f}), {interval}" + busiest(kept[2])
            )
        self.write_line(
            clients, self.measured[clients], rule.values, rule, self.protocol.seconds,
            "below_best" if below else "",
        )  # fmt: skip
        self.lines[clients]["generators"] = self.measured_with[clients]
        return list(rule.values)

    def write_line(self, clients, reps, values, rule, seconds, stopped) -> None:
        """The count's throughput line from `reps` (result, steady seconds, utilisation,
        latencies) and their steady tps `values`."""
        cluster, kind = self.cluster, self.row.kind
        used = [span for _, span, _, _ in reps if math.isfinite(span)]
        order = self.lines[clients]["order"] if clients in self.lines else len(self.lines) + 1
        line = summarize(
            clients,
            [result for result, _, _, _ in reps],
            seconds,
            values,
            rule,
            statistics.mean(used) if used else math.nan,
            order,
            stopped,
        )
        kept = [r for r in self.rep_rows if r["clients"] == clients and not r["set_aside"]
                and r["probe"] == (stopped == "probe")]  # fmt: skip
        if len(values) == 1:  # one repetition: its interval from its own seconds
            own = kept[-1]
            line |= batch_interval(values[0], own["tps_se"], own["tps_se_df"])
        line |= latency.percentiles(np.concatenate([r[3] for r in reps]))
        line |= buffers.summary(kept)
        util = mean_utilisation([u for _, _, u, _ in reps])
        line |= {f"util_{name}": u for name, u in util.items()}
        line |= utilisation.bottleneck(util, line["tps"], capacity(cluster, kind, clients))
        self.lines[clients] = line


def measure(
    row: Row,
    cluster: Cluster,
    settings: Mapping,
    outdir: Path,
    staged: Path | None = None,
    progress=print,
) -> Path:
    """Measure one row on `cluster` (ready for it) as `settings` (the `measurement` section)
    say: throughput.csv, repetitions.csv, per_second.csv and measurement.json into `staged`
    (default `outdir`), pgbench's logs into `outdir`/pgbench-logs."""
    run = row.run
    script = Path(row.script_path).resolve()
    env = workload.session_env(row.session)
    staged = staged or outdir
    staged.mkdir(parents=True, exist_ok=True)
    logs = outdir.resolve() / "pgbench-logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    started = dt.datetime.now(dt.UTC)
    rep_rows = []
    applied = cluster.applied()  # raises when a setting in effect differs from the row
    for warning in applied.get("warnings", []):
        progress(f"{run}: WARNING: {warning}")
    growth: dict = {}
    lines = measure_sweep(row, cluster, script, env, settings, logs, rep_rows, progress, growth)
    finished = dt.datetime.now(dt.UTC)
    write_csv(staged / "repetitions.csv", rep_rows)
    seconds = per_second(staged / "repetitions.csv", logs, run=run)  # what the charts draw
    write_csv(staged / "per_second.csv", seconds, PER_SECOND_COLUMNS)
    meta = {
        "run": run,
        "levels": row.levels,
        "row": row.to_dict(),
        "workload_script": str(
            script.relative_to(Path.cwd()) if script.is_relative_to(Path.cwd()) else script
        ),
        "workload_sql": script.read_text(),
        "started": started.isoformat(),
        "finished": finished.isoformat(),
        "measurement": dict(settings),
        "applied": applied,
        "warnings": applied.get("warnings", []),
        "versions": _versions(getattr(cluster, "pgbench", "pgbench"), applied),
        **growth,
    }
    (staged / "measurement.json").write_text(json.dumps(meta, indent=2, default=str))
    path = staged / "throughput.csv"
    extra = sorted({k for line in lines for k in line} - set(THROUGHPUT_COLUMNS))
    write_csv(path, lines, THROUGHPUT_COLUMNS + extra)
    best = max(lines, key=lambda line: line["tps_mean"])
    progress(
        f"{run}: done in {(finished - started).total_seconds():.0f}s, best {best['tps_mean']:,.0f} "
        f"tps at {best['clients']} clients"
    )
    return path


def _versions(pgbench_exe: str, applied: Mapping) -> dict:
    """Versions for measurement.json; pgbench's from where it ran (a remote load generator)."""
    remote = applied.get("load_generator")
    if isinstance(remote, Mapping) and "pgbench_version" in remote:
        pgb = remote["pgbench_version"]
    else:
        try:
            pgb = pgbench.version(pgbench_exe)
        except (OSError, subprocess.SubprocessError):
            pgb = "unknown"
    out = {"ybscale": __version__, "pgbench": pgb, "python": platform.python_version()}
    several = applied.get("load_generators") or []
    if len(several) > 1:  # each generator's own pgbench
        out["pgbench_by_generator"] = {g["name"]: g.get("pgbench_version") for g in several}
    return out
