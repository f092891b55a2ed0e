"""pgbench's per-transaction log reduced to per-second lines and latency percentiles.

pgbench 15 cannot sample a per-transaction log and aggregate per second in one run ("log
sampling (--sampling-rate) and aggregation (--aggregate-interval) cannot be used at the same
time"), and per-second counts from a sampled log would be estimates. So every repetition logs
every transaction (`--log`, no sampling: about 32 bytes a transaction), and right after it ends
each file is rewritten in place as pgbench's own aggregate format (one line per second of that
thread: the run's `seconds` intervals, ending at its last completed transaction), from which the
throughput is read as before; the latencies of the counted seconds become percentiles. On disk
a log is therefore bounded by one line per second and thread; the raw file lives only until its
repetition ends.

Per-transaction line (pgbench 15, `--max-tries` and `--failures-detailed` on):
``client_id transaction_no time script_no time_epoch time_us retries``; `time` is the latency
in µs, or ``serialization`` / ``deadlock`` / ``failed`` / ``skipped`` (no latency).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ybscale.measure.pgbench import AGG_COLUMNS

PERCENTILES = (50, 95, 99)
FAILURES = {"serialization": "serialization_failures", "deadlock": "deadlock_failures"}
OK = "ok"
_WORD = re.compile(rb"^(\S+ \S+ )([A-Za-z_]+) ", re.M)  # a word in the time column


@dataclass(frozen=True)
class Transactions:
    """One per-transaction log, column by column (numpy arrays, one entry a transaction):
    latency_us (NaN unless it succeeded), status ("ok" or pgbench's word), done (completion,
    epoch seconds as a float), retries; interval_start once `reduce_log` assigned intervals."""

    latency_us: np.ndarray
    status: np.ndarray
    done: np.ndarray
    retries: np.ndarray
    interval_start: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.done)

    def __getitem__(self, column: str) -> np.ndarray:
        return getattr(self, column)


def read_transactions(path: Path) -> Transactions:
    """Every transaction of one per-transaction log, read by numpy's C parser (pgbench's words
    in the time column become negative codes first); no pandas, whose import alone was about
    0.3 CPU-s of every measuring job."""
    text = Path(path).read_bytes()
    first = text.split(b"\n", 1)[0].split()
    if len(first) < 6:
        raise ValueError(f"{path}: not a pgbench per-transaction log ({len(first)} columns)")
    words = sorted({m.group(2) for m in _WORD.finditer(text)}) if _WORD.search(text) else []
    for code, word in enumerate(words, 1):  # pgbench's words become -1, -2, ... for the parser
        text = re.sub(rb"(?m)^(\S+ \S+ )" + re.escape(word) + rb" ", rb"\g<1>-%d " % code, text)
    try:
        values = np.fromstring(text, dtype=np.int64, sep=" ")
    except ValueError as exc:
        raise ValueError(f"{path}: not a pgbench per-transaction log ({exc})") from exc
    lines = text.count(b"\n") + (not text.endswith(b"\n"))
    if values.size != lines * len(first):
        raise ValueError(f"{path}: not a pgbench per-transaction log (lines of unequal width)")
    table = values.reshape(lines, len(first))
    time = table[:, 2]
    failed = time < 0
    status = np.full(lines, OK, dtype=object)
    for code, word in enumerate(words, 1):
        status[time == -code] = word.decode()
    return Transactions(
        latency_us=np.where(failed, np.nan, time.astype(float)),
        status=status,
        done=table[:, 4] + table[:, 5] / 1e6,
        retries=table[:, 6] if table.shape[1] > 6 else np.zeros(lines, dtype=np.int64),
    )


# the 15 aggregate-log columns pgbench 15-17 writes, as `per_second` writes them
AGGREGATE = AGG_COLUMNS[:15]


def per_second(tx: Transactions, seconds: int, end: float | None = None) -> dict[str, np.ndarray]:
    """pgbench's aggregate-log columns (`AGGREGATE`) for one thread's transactions of a
    `seconds`-long run: intervals of 1 s, the last ending at the last completion (so the first
    holds the clients' start, as pgbench's first interval does), labelled by their whole epoch
    second; adds `second` (the interval's index). Seconds without a transaction hold zeros,
    as pgbench writes them. `end`: the last completion of the whole repetition (default:
    this log's), so that every thread's and node's intervals share their bounds and labels."""
    ok = tx.status == OK
    end = float(tx.done.max()) if end is None else end
    start = end - seconds
    second = _interval(tx, seconds, end)
    lat = np.where(ok, tx.latency_us, 0.0)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(second[mask], minlength=seconds).astype(np.int64)

    def extreme(ufunc, init: float) -> np.ndarray:
        out = np.full(seconds, init)
        ufunc.at(out, second[ok], tx.latency_us[ok])
        return np.where(np.isfinite(out), out, 0.0)

    zeros = np.zeros(seconds, dtype=np.int64)
    out = {
        "second": np.arange(seconds),
        "interval_start": np.array([math.floor(start + k) for k in range(seconds)], np.int64),
        "num_transactions": count(ok),
        "sum_latency": np.bincount(second, lat, minlength=seconds),
        "sum_latency_2": np.bincount(second, lat**2, minlength=seconds),
        "min_latency": extreme(np.minimum, math.inf),
        "max_latency": extreme(np.maximum, -math.inf),
        "sum_lag": zeros, "sum_lag_2": zeros, "min_lag": zeros, "max_lag": zeros,
        "skipped": count(tx.status == "skipped"),
        "retried": count(tx.retries > 0),
        "retries": np.bincount(second, tx.retries, minlength=seconds).astype(np.int64),
    }  # fmt: skip
    for word, column in FAILURES.items():
        out[column] = count(tx.status == word)
    return out


def reduce_logs(
    paths: Sequence[Path], seconds: int, offsets: Sequence[float] | None = None
) -> list[Transactions]:
    """Rewrite the per-transaction logs of one `seconds`-long repetition (every thread's and
    node's) in place as pgbench's aggregate format, on intervals that end at the repetition's
    last completion (one end for all: a thread that finished a moment before a second's
    boundary would otherwise label its seconds one lower than the others, and the merged
    repetition would span a second more); return each log's transactions with the
    `interval_start` of their interval.

    `offsets`: each log's clock offset in seconds (the clock of the load generator that wrote
    it minus the reference clock, `ybscale.measure.generators`; default 0). Its completions are
    moved onto the reference clock first, so the logs of several generators are reduced on one
    time base: the rewritten intervals and the returned `done` are the reference clock's."""
    logs = [read_transactions(path) for path in paths]
    if not logs:
        return []
    if offsets is not None:
        logs = [replace(tx, done=tx.done - float(offset))
                for tx, offset in zip(logs, offsets, strict=True)]  # fmt: skip
    end = max(float(tx.done.max()) for tx in logs)
    reduced = []
    for path, tx in zip(paths, logs, strict=True):
        lines = per_second(tx, seconds, end)
        rows = np.column_stack([lines[column] for column in AGGREGATE]).astype(float)
        path.write_text("".join(" ".join(f"{v:.0f}" for v in row) + "\n" for row in rows))
        starts = lines["interval_start"][_interval(tx, seconds, end)]
        reduced.append(replace(tx, interval_start=starts))
    return reduced


def reduce_log(path: Path, seconds: int) -> Transactions:
    """`reduce_logs` of a repetition logged in one file."""
    return reduce_logs([path], seconds)[0]


def _interval(tx: Transactions, seconds: int, end: float) -> np.ndarray:
    """Each transaction's interval index: whole seconds before `end`, counted back from
    `seconds` (a completion at the very start of the run falls in the first)."""
    return np.clip(np.floor(tx.done - (end - seconds)), 0, seconds - 1).astype("int64")


def percentiles(latencies_us: Sequence[float] | np.ndarray) -> dict:
    """p50/p95/p99 in ms (numpy's default, linear interpolation) and the sample size."""
    x = np.asarray(latencies_us, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return {f"latency_p{p}_ms": math.nan for p in PERCENTILES} | {"latency_n": 0}
    values = np.percentile(x, PERCENTILES) / 1000.0
    return {f"latency_p{p}_ms": float(v) for p, v in zip(PERCENTILES, values, strict=True)} | {
        "latency_n": len(x)
    }


def counted_latencies(tx: Transactions, first_counted: int) -> np.ndarray:
    """Latencies (µs) of the successful transactions in the counted intervals (those labelled
    from epoch second `first_counted` on)."""
    kept = (tx.status == OK) & (tx.interval_start >= first_counted)
    return tx.latency_us[kept].astype(float)
