"""Where each read was served from (issue 48): the database's own block counters and the
bytes its servers read from the disk, around each run, per repetition and per client count.

A backend that can read them (`Cluster.block_counters`) gives cumulative counters, summed over
the nodes: `blks_hit` (blocks found in the servers' own buffers: PostgreSQL's shared buffers,
YugabyteDB's block cache), `blks_read` (blocks the servers had to look for elsewhere: the
operating system's page cache or the disk) and `disk_read_bytes` (bytes the servers' reads
brought from the storage device, read-ahead included: local, each server's /proc/<pid>/io
`read_bytes`). Per run: `buffer_hits`, `buffer_reads`, `disk_read_bytes`. Per count, over the
repetitions kept: `buffer_hit_ratio` = hits / (hits + reads), `buffer_reads_per_tx` = reads /
transactions, `disk_bytes_per_tx` = disk bytes / transactions; a read the buffers missed that
brought no disk bytes was served by the page cache. On YugabyteDB `blks_hit` and `blks_read`
are its data blocks' (what PostgreSQL's count); its block cache also serves index and bloom
filter blocks, nearly always hits, whose totals with the data's come beside them
(`blks_hit_all`, `blks_read_all`: per run `buffer_hits_all`, `buffer_reads_all`, per count
`buffer_hit_ratio_all`), never in their place. As the servers count them: PostgreSQL
reports a backend's block counts when its transaction ends or at most every second, and on
exit, so a run's last fraction of a second may be counted in the next run's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

# per run (repetitions.csv) <- cumulative counter of Cluster.block_counters
COUNTERS = {
    "buffer_hits": "blks_hit",
    "buffer_reads": "blks_read",
    "disk_read_bytes": "disk_read_bytes",
    "buffer_hits_all": "blks_hit_all",  # YugabyteDB: data, index and filter blocks
    "buffer_reads_all": "blks_read_all",
}
FIELDS = ("buffer_hits", "buffer_reads")
SUMMARY = ("buffer_hit_ratio", "buffer_reads_per_tx", "disk_bytes_per_tx")


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """One run's `buffer_hits`, `buffer_reads`, `disk_read_bytes` (and on YugabyteDB
    `buffer_hits_all`, `buffer_reads_all`) from the counters read before and after it (each the
    backend reads); {} when it reads none."""
    return {
        field: after[counter] - before[counter]
        for field, counter in COUNTERS.items()
        if counter in before and counter in after
    }


def summary(runs: Iterable[Mapping]) -> dict[str, float]:
    """A count's `buffer_hit_ratio`, `buffer_reads_per_tx`, (when the runs read the disk's
    bytes) `disk_bytes_per_tx` and (when they read every kind of block) `buffer_hit_ratio_all`
    over its runs (repetitions.csv lines with the FIELDS and
    `transactions`); {} when none has them."""
    runs = [r for r in runs if all(_number(r.get(f)) is not None for f in FIELDS)]
    if not runs:
        return {}
    hits = sum(_number(r["buffer_hits"]) for r in runs)
    reads = sum(_number(r["buffer_reads"]) for r in runs)
    transactions = sum(_number(r.get("transactions")) or 0 for r in runs)
    out = {
        "buffer_hit_ratio": hits / (hits + reads) if hits + reads > 0 else math.nan,
        "buffer_reads_per_tx": reads / transactions if transactions > 0 else math.nan,
    }
    every = [(_number(r.get("buffer_hits_all")), _number(r.get("buffer_reads_all"))) for r in runs]
    if all(h is not None and m is not None for h, m in every):
        looked = sum(h + m for h, m in every)
        out["buffer_hit_ratio_all"] = sum(h for h, _ in every) / looked if looked else math.nan
    disk = [_number(r.get("disk_read_bytes")) for r in runs]
    if all(d is not None for d in disk):
        out["disk_bytes_per_tx"] = sum(disk) / transactions if transactions > 0 else math.nan
    return out


def _number(value) -> float | None:
    """A counter's value as a number; None when absent or empty (a CSV's missing cell)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
