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
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

PERCENTILES = (50, 95, 99)
FAILURES = {"serialization": "serialization_failures", "deadlock": "deadlock_failures"}


def read_transactions(path: Path) -> pd.DataFrame:
    """One row per logged transaction: latency_us (NaN unless it succeeded), status (ok or
    pgbench's word), done (completion, epoch seconds as a float), retries."""
    raw = pd.read_csv(path, sep=" ", header=None, dtype=str, engine="c")
    if raw.empty or raw.shape[1] < 6:
        raise ValueError(f"{path}: not a pgbench per-transaction log ({raw.shape[1]} columns)")
    time = raw[2]
    numeric = pd.to_numeric(time, errors="coerce")
    return pd.DataFrame(
        {
            "latency_us": numeric,
            "status": time.where(numeric.isna(), "ok"),
            "done": raw[4].astype("int64") + raw[5].astype("int64") / 1e6,
            "retries": raw[6].astype("int64") if raw.shape[1] > 6 else 0,
        }
    )


def per_second(tx: pd.DataFrame, seconds: int) -> pd.DataFrame:
    """pgbench's aggregate-log columns (15 of them) for one thread's transactions of a
    `seconds`-long run: intervals of 1 s, the last ending at the last completion (so the first
    holds the clients' start, as pgbench's first interval does), labelled by their whole epoch
    second; adds `second` (the interval's index)."""
    ok = tx["status"] == "ok"
    start = float(tx["done"].max()) - seconds
    tx = tx.assign(second=_interval(tx, seconds))
    lat = tx["latency_us"].where(ok)
    g = tx.assign(lat=lat, lat2=lat**2).groupby("second")
    out = pd.DataFrame(
        {
            "num_transactions": g["status"].apply(lambda s: int((s == "ok").sum())),
            "sum_latency": g["lat"].sum(),
            "sum_latency_2": g["lat2"].sum(),
            "min_latency": g["lat"].min().fillna(0),
            "max_latency": g["lat"].max().fillna(0),
        }
    )
    for col in ("sum_lag", "sum_lag_2", "min_lag", "max_lag"):
        out[col] = 0
    out["skipped"] = g["status"].apply(lambda s: int((s == "skipped").sum()))
    out["retried"] = g["retries"].apply(lambda r: int((r > 0).sum()))
    out["retries"] = g["retries"].sum()
    for word, col in FAILURES.items():
        out[col] = g["status"].apply(lambda s, w=word: int((s == w).sum()))
    out = out.reindex(range(seconds), fill_value=0)  # seconds without a transaction, as pgbench
    out.insert(0, "interval_start", [int(math.floor(start + k)) for k in range(seconds)])
    return out.rename_axis("second").reset_index()


def reduce_log(path: Path, seconds: int) -> pd.DataFrame:
    """Rewrite one per-transaction log of a `seconds`-long run in place as pgbench's aggregate
    format; return its transactions with the `interval_start` of their interval."""
    tx = read_transactions(path)
    lines = per_second(tx, seconds)
    rows = lines.drop(columns="second").to_numpy(float)
    path.write_text("".join(" ".join(f"{v:.0f}" for v in row) + "\n" for row in rows))
    return tx.assign(interval_start=lines["interval_start"].to_numpy()[_interval(tx, seconds)])


def _interval(tx: pd.DataFrame, seconds: int) -> np.ndarray:
    """Each transaction's interval index: whole seconds before the last completion, counted
    back from `seconds` (a completion at the very start of the run falls in the first)."""
    start = float(tx["done"].max()) - seconds
    return np.clip(np.floor(tx["done"].to_numpy() - start), 0, seconds - 1).astype("int64")


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


def counted_latencies(tx: pd.DataFrame, first_counted: int) -> np.ndarray:
    """Latencies (µs) of the successful transactions in the counted intervals (those labelled
    from epoch second `first_counted` on)."""
    kept = (tx["status"] == "ok") & (tx["interval_start"] >= first_counted)
    return tx.loc[kept, "latency_us"].to_numpy(float)
