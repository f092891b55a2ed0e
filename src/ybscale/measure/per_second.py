"""One row's throughput second by second (per_second.csv), derived once from its pgbench logs
by the measuring job (staged and published with its other measurements).

Every repetition in repetitions.csv has one per-second log per node (pgbench's aggregate format,
as `ybscale.measure.latency.reduce_log` leaves it) under the row's ``pgbench-logs/``, named by
`measure.pgbench.repetition_prefix`; the nodes are added up second by second. The charts read
this table, not the logs.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from ybscale.measure.pgbench import PgbenchError, parse_aggregate_logs
from ybscale.measure.pgbench import repetition_prefix as prefix_of

COLUMNS = ["run", "clients", "repetition", "second", "tps"]
LOGS = "pgbench-logs"  # beside repetitions.csv, as the measuring job writes them


def node_logs(logs: Path, clients: int, repetition: int) -> list[Path]:
    """Every node's log files of one repetition (``<prefix>_<node>.<pid>[.<n>]``)."""
    name = re.compile(re.escape(prefix_of(logs, clients, repetition).name) + r"_.+\.\d+(\.\d+)?")
    return sorted(path for path in logs.glob("*") if name.fullmatch(path.name))


def per_second(
    repetitions: Path | str, logs: Path | str | None = None, run: str | None = None
) -> list[dict]:
    """One line (`COLUMNS`) per second of each repetition: run (default: the folder of
    `repetitions`), clients, repetition, second (since the repetition's first interval), tps:
    the nodes added up. A repetition shorter than one interval has no line."""
    repetitions = Path(repetitions)
    logs = Path(logs) if logs else repetitions.parent / LOGS
    run = run or repetitions.parent.name
    with repetitions.open(newline="") as fh:
        read = csv.DictReader(fh)
        done = dict.fromkeys((int(float(r["clients"])), int(float(r["repetition"]))) for r in read)
    lines = []
    for clients, rep in done:
        paths = node_logs(logs, clients, rep)
        if not paths:
            raise FileNotFoundError(
                f"{repetitions}: {clients} clients, repetition {rep}: no log under {logs}"
            )
        try:
            agg = parse_aggregate_logs(paths)
        except PgbenchError:
            continue  # shorter than one interval
        first = int(agg["interval_start"].min())
        lines += [
            {"run": run, "clients": clients, "repetition": rep, "second": int(start) - first,
             "tps": float(tps)}
            for start, tps in zip(agg["interval_start"], agg["tps"], strict=True)
        ]  # fmt: skip
    return lines
