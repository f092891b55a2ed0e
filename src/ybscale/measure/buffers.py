"""Where each read was served from (issue 48): the database's own block counters around each
run, per repetition and per client count.

A backend that can read them (`Cluster.block_counters`; local: PostgreSQL's pg_stat_database
`blks_hit` and `blks_read` of the study's database, summed over the nodes) gives, per run,
`buffer_hits` (blocks found in the servers' shared buffers) and `buffer_reads` (blocks the
servers had to ask the operating system for: its page cache or the disk). Per count, over the
repetitions kept: `buffer_hit_ratio` = hits / (hits + reads) and `buffer_reads_per_tx` = reads
/ transactions. As PostgreSQL counts them: a backend reports its counts when its transaction
ends or at most every second, and on exit, so a run's last fraction of a second may be counted
in the next run's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

FIELDS = ("buffer_hits", "buffer_reads")


def delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """One run's `buffer_hits` and `buffer_reads` from the counters read before and after it;
    {} when the backend reads none."""
    if not before or not after:
        return {}
    return {
        "buffer_hits": after["blks_hit"] - before["blks_hit"],
        "buffer_reads": after["blks_read"] - before["blks_read"],
    }


def summary(runs: Iterable[Mapping]) -> dict[str, float]:
    """A count's `buffer_hit_ratio` and `buffer_reads_per_tx` over its runs (repetitions.csv
    lines with the FIELDS and `transactions`); {} when none has them."""
    runs = [r for r in runs if all(f in r for f in FIELDS)]
    if not runs:
        return {}
    hits = sum(float(r["buffer_hits"]) for r in runs)
    reads = sum(float(r["buffer_reads"]) for r in runs)
    transactions = sum(float(r.get("transactions", 0) or 0) for r in runs)
    return {
        "buffer_hit_ratio": hits / (hits + reads) if hits + reads > 0 else math.nan,
        "buffer_reads_per_tx": reads / transactions if transactions > 0 else math.nan,
    }
