"""pgbench command lines and output parsing.

Everything here is pure except `version`, which runs `pgbench --version`. Formats were checked
against real pgbench 15.18 output (tests/data/pgbench/); 14- ("excluding connections
establishing") and 16/17 stdout are handled by the same line patterns.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Endpoint",
    "PgbenchCommand",
    "AGG_COLUMNS",
    "AggregateLog",
    "PgbenchError",
    "PgbenchResult",
    "aggregate_log_paths",
    "argv",
    "executable",
    "merge",
    "parse_aggregate_logs",
    "parse_output",
    "parse_progress_line",
    "version",
]


@dataclass(frozen=True)
class Endpoint:
    """One SQL endpoint a pgbench client can connect to."""

    host: str
    port: int
    dbname: str = "postgres"
    user: str = "postgres"
    password_env: str | None = None  # name of the environment variable holding the password
    role: str = "primary"  # primary | standby | shard


@dataclass(frozen=True)
class PgbenchCommand:
    """One timed pgbench run of custom scripts against one endpoint: what to run, not where.

    A runner renders it where pgbench runs (`ybscale.measure.pgbench.argv`), with
    `dataclasses.replace` for what differs there (scripts and log prefix on a load generator)."""

    scripts: tuple[Path, ...]
    endpoint: Endpoint
    clients: int
    threads: int
    seconds: int
    variables: Mapping[str, int | str]  # -D variables
    env: Mapping[str, str]  # the sessions' environment (PGOPTIONS)
    workdir: Path  # where its files go on this machine (logs, adapted scripts)
    timeout: float  # seconds until the run is killed
    log_prefix: Path | None = None
    max_tries: int = 10
    progress: int | None = None
    random_seed: int | None = None
    generator: int = 0  # which of the cluster's load generators runs it
    start_at: float | None = None  # the agreed start (epoch s; `ybscale.measure.generators`)

    def __post_init__(self):
        if self.clients < 1 or self.threads < 1 or self.seconds < 1:
            raise ValueError(
                f"clients, threads, seconds must be >= 1: {self.clients}, {self.threads}, "
                f"{self.seconds}"
            )
        if self.max_tries < 0:
            raise ValueError(f"max_tries must be >= 0, got {self.max_tries}")
        if not self.scripts:
            raise ValueError("pgbench needs at least one script")


class PgbenchError(RuntimeError):
    """pgbench output that cannot be used as a measurement."""


@dataclass(frozen=True)
class PgbenchResult:
    """The summary pgbench prints at the end of a run."""

    tps: float  # "without initial connection time" (14-: "excluding connections establishing")
    latency_ms: float | None
    latency_stddev_ms: float | None  # only printed with --progress, --rate or --latency-limit
    transactions: int  # "number of transactions actually processed" (successful ones)
    failed: int
    retried: int
    retries: int
    clients: int
    threads: int
    duration_s: float
    includes_failures: bool  # latency average carries the "(including failures)" suffix


_TPS = re.compile(
    r"^tps = ([0-9.]+|nan|inf) \((without initial connection time|excluding connections "
    r"establishing)\)",
    re.M,
)
_LATENCY = re.compile(r"^latency average = ([0-9.]+|nan|inf) ms( \(including failures\))?", re.M)
_STDDEV = re.compile(r"^latency stddev = ([0-9.]+|nan|inf) ms", re.M)
_INTS = {
    "transactions": re.compile(r"^number of transactions actually processed: (\d+)", re.M),
    "failed": re.compile(r"^number of failed transactions: (\d+)", re.M),
    "retried": re.compile(r"^number of transactions retried: (\d+)", re.M),
    "retries": re.compile(r"^total number of retries: (\d+)", re.M),
    "clients": re.compile(r"^number of clients: (\d+)", re.M),
    "threads": re.compile(r"^number of threads: (\d+)", re.M),
}
_DURATION = re.compile(r"^duration: (\d+) s", re.M)
_PROGRESS = re.compile(r"^progress: [0-9.]+ s, ([0-9.]+|nan|inf) tps", re.I)
_ABORTED = "Run was aborted"


def _first_error(stderr: str | None) -> str:
    for line in (stderr or "").splitlines():
        if "error:" in line:
            return line.strip()
    return ""


def _fail(why: str, stdout: str, stderr: str | None) -> PgbenchError:
    err = _first_error(stderr)
    tail = " | ".join(stdout.strip().splitlines()[-3:]) or "<empty stdout>"
    return PgbenchError(f"{why}; stdout ends: {tail}" + (f"; stderr: {err}" if err else ""))


def parse_output(stdout: str, stderr: str | None = None) -> PgbenchResult:
    """Parse pgbench's final report; raise PgbenchError if it is not a usable measurement.

    With `stderr`, a run where some client aborted ("Run was aborted") is rejected too, since
    pgbench still prints (incomplete) totals for it.
    """
    if stderr and _ABORTED in stderr:
        raise _fail("pgbench run was aborted, results are incomplete", stdout, stderr)
    ints = {}
    for key, pat in _INTS.items():
        m = pat.search(stdout)
        ints[key] = int(m.group(1)) if m else None
    if ints["transactions"] == 0:
        raise _fail("pgbench processed no transactions", stdout, stderr)
    tps_m = _TPS.findall(stdout)
    if not tps_m:
        raise _fail("pgbench output has no 'tps = ...' line", stdout, stderr)
    # 14- prints "including" then "excluding connections establishing"; the pattern skips the first
    tps = float(tps_m[-1][0])
    if ints["transactions"] is None:
        raise _fail("pgbench output has no 'transactions actually processed' line", stdout, stderr)
    lat = _LATENCY.search(stdout)
    sd = _STDDEV.search(stdout)
    dur = _DURATION.search(stdout)
    if dur:
        duration = float(dur.group(1))
    else:  # -t runs print no duration
        duration = ints["transactions"] / tps if tps > 0 else float("nan")
    return PgbenchResult(
        tps=tps,
        latency_ms=float(lat.group(1)) if lat else None,
        latency_stddev_ms=float(sd.group(1)) if sd else None,
        transactions=ints["transactions"],
        failed=ints["failed"] or 0,
        retried=ints["retried"] or 0,
        retries=ints["retries"] or 0,
        clients=ints["clients"] or 0,
        threads=ints["threads"] or 0,
        duration_s=duration,
        includes_failures=bool(lat and lat.group(2)),
    )


def parse_progress_line(line: str) -> float | None:
    """tps of a `--progress` line ("progress: 1.0 s, 1234.5 tps, lat ..."), else None."""
    m = _PROGRESS.match(line.strip())
    return float(m.group(1)) if m else None


def merge(results: Sequence[PgbenchResult]) -> PgbenchResult:
    """Combine pgbench processes that ran at the same time against different nodes.

    tps and counts add up; latency is the transaction-weighted mean and the stddev is pooled
    with the law of total variance: var = sum n_i (s_i^2 + (m_i - m)^2) / N.
    """
    if not results:
        raise ValueError("merge() needs at least one result")
    if len(results) == 1:
        return results[0]
    n = [r.transactions for r in results]
    total = sum(n)
    lat = stddev = None
    if all(r.latency_ms is not None for r in results) and total > 0:
        lat = sum(k * r.latency_ms for k, r in zip(n, results, strict=True)) / total
        if all(r.latency_stddev_ms is not None for r in results):
            var = (
                sum(
                    k * (r.latency_stddev_ms**2 + (r.latency_ms - lat) ** 2)
                    for k, r in zip(n, results, strict=True)
                )
                / total
            )
            stddev = math.sqrt(var)
    return PgbenchResult(
        tps=sum(r.tps for r in results),
        latency_ms=lat,
        latency_stddev_ms=stddev,
        transactions=total,
        failed=sum(r.failed for r in results),
        retried=sum(r.retried for r in results),
        retries=sum(r.retries for r in results),
        clients=sum(r.clients for r in results),
        threads=sum(r.threads for r in results),
        duration_s=max(r.duration_s for r in results),
        includes_failures=any(r.includes_failures for r in results),
    )


# pgbench 15-17 always writes these 15 columns (zeros when the option is off); 18+ may append
# other_sql_failures; 14- wrote 6, +4 lag with --rate, +1 skipped with --latency-limit.
AGG_COLUMNS = [
    "interval_start",
    "num_transactions",
    "sum_latency",
    "sum_latency_2",
    "min_latency",
    "max_latency",
    "sum_lag",
    "sum_lag_2",
    "min_lag",
    "max_lag",
    "skipped",
    "retried",
    "retries",
    "serialization_failures",
    "deadlock_failures",
    "other_sql_failures",
]
_AGG_WIDTHS = {6, 10, 11, 15, 16}
_MIN_MAX = ["min_latency", "max_latency", "min_lag", "max_lag"]
_FAILURE_COLUMNS = ("serialization_failures", "deadlock_failures", "other_sql_failures")


def repetition_prefix(logs: Path, clients: int, repetition: int) -> Path:
    """The log prefix of one repetition in a row's log folder; each node's files add
    ``_<node>.<pid>[.<n>]`` (read back by `ybscale.measure.per_second`)."""
    return Path(logs) / f"c{clients:03d}_r{repetition}"


def aggregate_log_paths(prefix: str | Path) -> list[Path]:
    """The per-thread log files of one run: `PREFIX.<pid>` and `PREFIX.<pid>.<n>` (per
    transaction until `ybscale.measure.latency.reduce_log` rewrites them per second)."""
    prefix = Path(prefix)
    pat = re.compile(re.escape(prefix.name) + r"\.\d+(\.\d+)?")
    return sorted(p for p in prefix.parent.glob(prefix.name + ".*") if pat.fullmatch(p.name))


@dataclass(frozen=True)
class AggregateLog:
    """Per-interval totals (`parse_aggregate_logs`): numpy columns by name, one entry an
    interval; len() counts the intervals."""

    columns: dict

    def __getitem__(self, name: str):
        return self.columns[name]

    def __len__(self) -> int:
        return len(self.columns["interval_start"])


def parse_aggregate_logs(paths: Iterable[str | Path], interval_s: float = 1) -> AggregateLog:
    """Per-interval totals of `--log --aggregate-interval` files merged across threads/processes.

    One entry per interval_start (epoch s, ascending): counts and sums are added, min/max combined
    (intervals with no transactions do not contribute their zero min/max). Latencies are in µs
    as pgbench writes them; adds `failures`, `tps` and `latency_avg_ms`. pgbench 15 drops the
    last partial interval of a -T run, so num_transactions sums to less than stdout's count.
    """
    paths = list(paths)
    rows = []
    for path in paths:
        for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) not in _AGG_WIDTHS:
                raise PgbenchError(
                    f"{path}:{lineno}: {len(fields)} columns, not an aggregate log line: {line!r}"
                )
            rows.append([float(x) for x in fields])
    if not rows:
        raise PgbenchError(f"no aggregate log lines in {[str(p) for p in paths]}")
    import numpy as np  # here: the backends render commands with this module, numpy-free

    table = np.zeros((len(rows), len(AGG_COLUMNS)))
    for i, row in enumerate(rows):
        table[i, : len(row)] = row
    starts, interval = np.unique(table[:, 0], return_inverse=True)
    empty = table[:, AGG_COLUMNS.index("num_transactions")] == 0
    out = {"interval_start": starts.astype(np.int64)}
    for k, column in enumerate(AGG_COLUMNS[1:], 1):
        if column in _MIN_MAX:  # NaN where every line of the interval was empty
            combined = np.full(len(starts), np.nan)
            extreme = np.fmin if column.startswith("min") else np.fmax
            extreme.at(combined, interval, np.where(empty, np.nan, table[:, k]))
            out[column] = combined
        else:
            out[column] = np.bincount(interval, table[:, k], minlength=len(starts))
    for column in ("num_transactions", "skipped", "retried", "retries", *_FAILURE_COLUMNS):
        out[column] = out[column].astype(np.int64)
    out["failures"] = sum(out[column] for column in _FAILURE_COLUMNS)
    out["tps"] = out["num_transactions"] / interval_s
    n = np.where(out["num_transactions"] > 0, out["num_transactions"], np.nan)
    out["latency_avg_ms"] = out["sum_latency"] / n / 1000.0
    return AggregateLog(out)


def executable(bindir_or_exe: str | Path) -> str:
    """`bindir/pgbench` for a directory, otherwise the argument itself (a path or a name)."""
    p = Path(bindir_or_exe)
    return str(p / "pgbench") if p.is_dir() else str(bindir_or_exe)


def argv(command: PgbenchCommand, exe: str | Path = "pgbench") -> list[str]:
    """pgbench's command line for `command` (the one place it is written), `exe` being pgbench
    (or its bin directory) where it runs. -n: no vacuum; prepared statements; `progress` adds
    `--progress=N` (pgbench then reports a latency stddev instead of the "(including failures)"
    estimate); a log prefix logs every transaction (`ybscale.measure.latency` reduces the log
    after the run)."""
    ep = command.endpoint
    out = [executable(exe), "-n", "-M", "prepared"]
    out += ["-c", str(command.clients), "-j", str(command.threads), "-T", str(command.seconds)]
    out += [f"--max-tries={command.max_tries}"]
    if command.progress:
        out += [f"--progress={command.progress}"]
    for script in command.scripts:
        out += ["-f", str(script)]
    for key, value in command.variables.items():
        out += ["-D", f"{key}={value}"]
    out += ["-h", ep.host, "-p", str(ep.port), "-U", ep.user]
    if command.log_prefix is not None:
        out += ["--log", "--failures-detailed", f"--log-prefix={command.log_prefix}"]
    if command.random_seed is not None:
        out += [f"--random-seed={command.random_seed}"]
    return [*out, ep.dbname]


def version(bindir_or_exe: str | Path = "pgbench") -> str:
    """`pgbench --version`, e.g. "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"."""
    out = subprocess.run(
        [executable(bindir_or_exe), "--version"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()
