"""A Cluster over YSQL/PostgreSQL endpoints, driven through a runner (this machine or SSH).

What the `existing` and `gcp` backends share: the dataset (dropped, re-created with its split and
reloaded), the tablet-layout checks on YugabyteDB, the isolation level read back, readiness.

Caution: the dataset table and its sequence `<table>_new_key` are dropped, re-created and
reloaded before client counts. Point it at a database and table name nothing else uses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Protocol

from ybscale.backends import yb_catalogue
from ybscale.backends.base import (
    BackendError,
    Cluster,
    Endpoint,
    PgbenchCommand,
    Target,
    same_setting,
    spawn_local,
)
from ybscale.backends.machine_cpu import MachineCpu
from ybscale.design import workload
from ybscale.design.row import Row
from ybscale.measure import generators as gens
from ybscale.measure import pgbench
from ybscale.measure.generators import ClockOffset

PSQL_TIMEOUT = 60
LOAD_TIMEOUT = 1800  # seconds a restore's DELETE (or the ANALYZE after a load) may take
CHUNK_TIMEOUT = 600  # seconds one chunk of a load may take (statement_timeout, and psql's)
LOADERS = 4  # sessions loading the dataset at once (existing.loaders, gcp.loaders)
CHUNK_ROWS = 100_000  # rows per chunk of a load (existing.load_chunk_rows, gcp.load_chunk_rows)
CHUNK_BYTES = 64 * 2**20  # at most this many value bytes per chunk (large dataset.value_bytes)
LAYOUT_TIMEOUT = 120  # seconds the tablet leaders may take to spread
READY_STATE = "TABLET_DATA_READY"  # yb_local_tablets.state of a replica that serves


# --------------------------------------------------------------------------- SQL

# Range sharding: tablet t holds the key range [t * BUCKET, (t + 1) * BUCKET). Loaded keys of
# tablet t are t * BUCKET + 0..n_t-1 and new keys of the clients sent to tablet t are
# t * BUCKET + n_t + nextval, so inserts are spread over every tablet instead of all landing
# above the last split point.
BUCKET = 10**12


def bucket_rows(rows: int, tablets: int) -> list[int]:
    """Loaded keys per range bucket (key i goes to bucket i mod tablets)."""
    return [len(range(t, rows, tablets)) for t in range(tablets)]


def range_keys(sharding: str = "none", tablets: int = 1) -> str:
    """The loaded key of row number k, as an SQL expression of k: k itself, or with range
    sharding (k mod tablets) * BUCKET + k / tablets (row k in range bucket k mod tablets)."""
    return f"(k % {tablets}) * {BUCKET} + k / {tablets}" if sharding == "range" else "k"


def create_sql(table: str = "kv", sharding: str = "none", tablets: int = 1) -> str:
    """DROP + CREATE of the dataset's table (k bigint, v text) and its new-key sequence, empty.

    DROP + CREATE, never TRUNCATE: since YugabyteDB 2024.1 a YSQL TRUNCATE rewrites the table
    with the default tablet count, losing the pre-split (yugabyte-db #21199, #21561, #26641).
    sharding: none (the database's default primary key), range (YugabyteDB `k ASC`, split at
    BUCKET multiples into `tablets` buckets, see BUCKET), hash (YugabyteDB `k HASH` split into
    `tablets` tablets)."""
    split = ""
    if sharding == "range":
        pk = "PRIMARY KEY (k ASC)"
        if tablets > 1:
            points = ", ".join(f"({t * BUCKET})" for t in range(1, tablets))
            split = f" SPLIT AT VALUES ({points})"
    elif sharding == "hash":
        pk = "PRIMARY KEY (k HASH)"
        split = f" SPLIT INTO {tablets} TABLETS"
    elif sharding == "none":
        pk = "PRIMARY KEY (k)"
    else:
        raise ValueError(f"sharding must be none, range or hash, got {sharding!r}")
    return (
        f"DROP TABLE IF EXISTS {table};\n"
        f"DROP SEQUENCE IF EXISTS {table}_new_key;\n"
        f"CREATE TABLE {table} (k bigint, v text NOT NULL, {pk}){split};\n"
        + workload.new_key_sequence_sql(table)
    )


def dataset_sql(
    rows: int, table: str = "kv", sharding: str = "none", tablets: int = 1, value_bytes: int = 32
) -> str:
    """The starting dataset of `rows` keys in `table` in one script: `create_sql`, one INSERT of
    every row (keys `range_keys` of 0..rows-1; value_bytes: each row's value,
    `workload.value_sql`), ANALYZE. `YsqlCluster.reset` loads the same rows in chunks, in
    parallel (`load_chunks`, `chunk_sql`)."""
    keys = range_keys(sharding, tablets)
    return (
        create_sql(table, sharding, tablets)
        + workload.insert_sql(table, 0, rows - 1, keys=keys, value_bytes=value_bytes)
        + f"ANALYZE {table};\n"
    )


def chunk_rows_for(chunk_rows: int, value_bytes: int) -> int:
    """Rows per chunk: `chunk_rows`, fewer when their values would pass CHUNK_BYTES (large
    `dataset.value_bytes`), at least one."""
    return max(1, min(chunk_rows, CHUNK_BYTES // max(1, value_bytes)))


def load_chunks(rows: int, loaders: int, chunk_rows: int) -> list[list[tuple[int, int]]]:
    """Each loader's chunks, (first, last) row numbers inclusive: loader i takes the i-th of
    `loaders` contiguous ranges of 0..rows-1 (the first rows % loaders ranges one row longer),
    in slices of at most `chunk_rows`; every row number in exactly one chunk. A loader with no
    rows (rows < loaders) has none."""
    if loaders < 1 or chunk_rows < 1:
        raise ValueError(f"loaders and chunk_rows must be positive, got {loaders}, {chunk_rows}")
    out, first = [], 0
    for i in range(loaders):
        end = first + rows // loaders + (1 if i < rows % loaders else 0)  # exclusive
        out.append([(a, min(a + chunk_rows, end) - 1) for a in range(first, end, chunk_rows)])
        first = end
    return out


def chunk_sql(table: str, first: int, last: int, sharding: str = "none", tablets: int = 1,
              value_bytes: int = 32, timeout: float = CHUNK_TIMEOUT) -> str:  # fmt: skip
    """One chunk of the load, its own session and transaction: rows first..last (keys
    `range_keys`, values of `value_bytes`) in one INSERT ... SELECT over that slice of
    generate_series, which the server cancels after `timeout` seconds (statement_timeout)."""
    return f"SET statement_timeout = {int(timeout * 1000)};\n" + workload.insert_sql(
        table, first, last, keys=range_keys(sharding, tablets), value_bytes=value_bytes
    )


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP (a job's interrupts, `lifecycle.interrupt_on_signals`)
    received inside the block are held and delivered once it ends, to the handlers they had
    (in the main thread, which runs Python's signal handlers, whichever thread the signal
    reached); elsewhere, and for a handler not set from Python, as they come."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(signum)
        if handler is not None:
            previous[signum] = handler
            signal.signal(signum, lambda received, _frame: caught.append(received))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in caught:
            signal.raise_signal(signum)


def run_loaders(loaders: Sequence[Sequence[Callable[[], object]]]) -> None:
    """Each loader's steps in a thread of its own, in order, the loaders at once. The first
    failure, or a KeyboardInterrupt here, stops every loader before its next step; the steps
    under way are waited for (each bounded by its own timeout: one chunk), then it is raised.
    Nothing is left running when this returns or raises."""
    stop = threading.Event()

    def loader(steps: Sequence[Callable[[], object]]) -> None:
        for step in steps:
            if stop.is_set():
                return
            try:
                step()
            except BaseException:
                stop.set()
                raise

    pool = ThreadPoolExecutor(max(1, len(loaders)), thread_name_prefix="ybscale-loader")
    try:
        with _interrupts_deferred():  # raised inside submit() (a thread starting), an
            # interrupt would leave that thread out of the pool's, never joined
            futures = [pool.submit(loader, steps) for steps in loaders]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:  # the first failure, in the loaders' order
            if future in done and future.exception() is not None:
                raise future.exception()
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


# Maintenance statements (the restore, its count) are range statements on the key, one per range,
# each under its own statement_timeout: YugabyteDB 2024.2 runs with bitmap scans off
# (yb_enable_bitmapscan false before 2025.2), so one `WHERE <range> OR <range>` or a count with
# no WHERE is a scan of the whole table; a range of an ordered key is an index range scan, pushed
# down. The server cancels a statement past its timeout (a psql killed by its own timeout leaves
# the statement running: PostgreSQL 11 has no client_connection_check_interval).
COUNT_TIMEOUT = 600  # seconds one count of a bucket's inserted rows may take
NEW_KEY_BATCH = 100_000  # new keys per DELETE of a restore by the new-key sequence (hash keys)


def timed_sql(statements: Sequence[str], timeout: float) -> str:
    """`statements` in one session, each cancelled by the server after `timeout` seconds."""
    return f"SET statement_timeout = {int(timeout * 1000)};\n" + "".join(
        f"{s};\n" for s in statements
    )


def psql_timeout(statements: int, timeout: float) -> float:
    """psql's own limit for `statements` statements of at most `timeout` seconds each: past
    the server's, so the server's cancel is what stops a slow one."""
    return max(1, statements) * timeout + 30


def ordered_keys(sharding: str, yugabyte: bool) -> bool:
    """Whether a range of k is an index range: range sharding (`k ASC`), or `none` on
    PostgreSQL (a btree); not hash sharding, nor `none` on YugabyteDB, whose default primary
    key hashes its first column."""
    return sharding == "range" or (sharding == "none" and not yugabyte)


def _range(lo: int | None, hi: int | None) -> str:
    return " AND ".join(
        p for p in (f"k >= {lo}" if lo is not None else "", f"k < {hi}" if hi is not None else "")
        if p
    )  # fmt: skip


def added_ranges(rows: int, sharding: str = "none", tablets: int = 1) -> list[str]:
    """The ranges of k outside the loaded keys, as WHERE clauses, each an index range on an
    ordered key: below 0, and above the loaded keys (`YsqlCluster.targets`: per range bucket
    with range sharding, then past the last bucket)."""
    if sharding != "range":
        return [_range(None, 0), _range(rows, None)]
    buckets = [_range(b * BUCKET + n, (b + 1) * BUCKET)
               for b, n in enumerate(bucket_rows(rows, tablets))]  # fmt: skip
    return [_range(None, 0), *buckets, _range(tablets * BUCKET, None)]


def inserted_sql(rows: int, table: str = "kv", tablets: int = 1,
                 timeout: float = COUNT_TIMEOUT) -> str:  # fmt: skip
    """Rows above the loaded keys of each range bucket (range sharding): one count per bucket,
    an index range each, one line of output per bucket in order."""
    buckets = added_ranges(rows, "range", tablets)[1:-1]
    return timed_sql([f"SELECT count(*) FROM {table} WHERE {w}" for w in buckets], timeout)


def new_key_batches(first: int, last: int, batch: int = NEW_KEY_BATCH) -> list[tuple[int, int]]:
    """(a, b) inclusive slices of first..last of at most `batch` values each."""
    return [(a, min(a + batch - 1, last)) for a in range(first, last + 1, batch)]


def restore_statements(rows: int, table: str = "kv", sharding: str = "none", tablets: int = 1,
                       yugabyte: bool = False, drawn: tuple[int, int] = (0, 0),
                       batch: int = NEW_KEY_BATCH) -> list[str]:  # fmt: skip
    """The DELETEs that bring the dataset of `dataset_sql` back to its loaded keys after
    INSERT-only writes. Ordered keys (`ordered_keys`): one DELETE per range of `added_ranges`.
    Hashed keys, where a range of k is no index range: the keys the new-key sequence gave
    out, `rows` + n for n in drawn = (first, last] (`YsqlCluster.targets`: keybase `rows`),
    deleted by key, `k = ANY(...)` of at most `batch` keys per DELETE (index lookups)."""
    if ordered_keys(sharding, yugabyte):
        return [f"DELETE FROM {table} WHERE {w}" for w in added_ranges(rows, sharding, tablets)]
    first, last = drawn
    return [
        f"DELETE FROM {table} WHERE k = ANY(ARRAY(SELECT {rows} + n "
        f"FROM generate_series({a}::bigint, {b}) AS n))"
        for a, b in new_key_batches(first + 1, last, batch)
    ]


def restore_sql(rows: int, table: str = "kv", sharding: str = "none", tablets: int = 1,
                vacuum: bool = False, yugabyte: bool = False, drawn: tuple[int, int] = (0, 0),
                timeout: float = LOAD_TIMEOUT) -> str:  # fmt: skip
    """`restore_statements` in one session, each under `timeout` (statement_timeout); `vacuum`
    (PostgreSQL): the space the deleted rows took made reusable. YugabyteDB ignores VACUUM (its
    DocDB compactions reclaim the space), so it is left out there."""
    statements = restore_statements(rows, table, sharding, tablets, yugabyte, drawn)
    return timed_sql(statements + ([f"VACUUM {table}"] if vacuum else []), timeout)


def restorable_script(text: str, ordered: bool, table: str = "kv") -> bool:
    """Whether a workload script only inserts new keys (`workload.inserts_only`) that a restore
    can find by the key: any key outside the loaded ones with `ordered` keys (`ordered_keys`);
    with hashed keys only keys of the new-key sequence (`nextval`), the only ones it can delete
    without reading the whole table."""
    if not workload.inserts_only(text):
        return False
    return ordered or f"nextval('{table}_new_key')" in rename_table(text, table)


def drawn_sql(table: str = "kv") -> str:
    """The new-key sequence's last value given out (0 when none was)."""
    return (f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
            f"FROM {table}_new_key")  # fmt: skip


def layout_sql(table: str, local_columns: Collection[str]) -> dict[str, str]:
    """Queries of the table's tablet layout, from the server (YugabyteDB only).

    tablets: yb_table_properties; local: this tserver's replicas (yb_local_tablets), only the
    ready ones when the view has a `state` column (2.25 and later; 2024.2 has none, see
    yb_catalogue); leaders: leader address per tablet (yb_tablet_metadata, 2025.1 and later).
    local_columns: the columns yb_local_tablets has on the server (`YsqlCluster.view_columns`).
    """
    ready = f" AND state = '{READY_STATE}'" if "state" in local_columns else ""
    return {
        "tablets": f"SELECT num_tablets FROM yb_table_properties('{table}'::regclass)",
        "replicas": (
            "SELECT count(*) FROM yb_local_tablets WHERE namespace_name = current_database() "
            f"AND table_name = '{table}'{ready}"
        ),
        "has_metadata": "SELECT to_regclass('yb_tablet_metadata') IS NOT NULL",
        "leaders": (
            "SELECT leader, count(*) FROM yb_tablet_metadata WHERE db_name = current_database() "
            f"AND relname = '{table}' GROUP BY leader ORDER BY leader"
        ),
    }


def columns_sql(relation: str) -> str:
    """The columns `relation` has on the server, in order (none when it does not exist)."""
    return (
        "SELECT attname FROM pg_attribute WHERE attrelid = "
        f"to_regclass('{relation}') AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
    )


def rename_table(sql: str, table: str) -> str:
    """A workload script with the `kv` table (and `kv_new_key`) renamed to `table`."""
    if table == "kv":
        return sql
    sql = re.sub(r"\bkv_new_key\b", f"{table}_new_key", sql)
    return re.sub(r"\bkv\b", table, sql)


ISOLATION_FUNCTION = "yb_get_effective_transaction_isolation_level()"


def master_problems(answer: str, expected: int) -> list[str]:
    """What keeps the yb-master Raft group from being complete, from a master's
    `/api/v1/masters` JSON ({"masters": [{"role": "LEADER" | "FOLLOWER", ...}, ...]})."""
    try:
        masters = json.loads(answer)["masters"]
    except (ValueError, KeyError, TypeError) as exc:
        return [f"unreadable /api/v1/masters answer ({exc}): {answer[:200]!r}"]
    problems = []
    roles = [m.get("role") for m in masters]
    failed = [m for m in masters if "error" in m]
    if failed:
        problems.append(f"{len(failed)} master(s) report an error: {failed[0]['error']}")
    members = sum(1 for r in roles if r in ("LEADER", "FOLLOWER"))
    if members != expected:
        problems.append(f"{members} of {expected} masters in the Raft group (roles {roles})")
    if roles.count("LEADER") != 1:
        problems.append(f"{roles.count('LEADER')} master leaders")
    return problems


def is_yugabyte(version: str) -> bool:
    """YugabyteDB's version() reads like `PostgreSQL 11.2-YB-2024.2.1.0-b0 ...`."""
    return "-YB-" in version


# --------------------------------------------------------------------------- block counters

# YugabyteDB 2024.2's RocksDB tickers of its shared block cache (src/yb/rocksdb/statistics.h,
# TickersNameMap, read at yugabyte-db 010a1110), instantiated per tablet for its regular RocksDB
# and, prefixed "intentsdb_", for its intents RocksDB (src/yb/rocksdb/util/statistics.cc,
# StatisticsMetricPrototypes: gauges on the "tablet" entity). BLOCK_CACHE_HIT
# "rocksdb_block_cache_hit" is INDEX_HIT + FILTER_HIT + DATA_HIT (its REQUIRES comment), MISS
# likewise: the index and bloom-filter lookups, nearly always hits, would push a hit ratio
# toward 1 whatever the data's fit in memory. The data blocks alone
# ("rocksdb_block_cache_data_hit", "rocksdb_block_cache_data_miss") are what PostgreSQL's
# blks_hit and blks_read count (the buffer_* readings); the totals of every kind are kept
# beside them (blks_hit_all, blks_read_all). A miss reads the block from the SST file: the
# operating system's page cache or the disk. Both RocksDBs share the cache.
BLOCK_CACHE = {
    "rocksdb_block_cache_data_hit": "blks_hit",
    "rocksdb_block_cache_data_miss": "blks_read",
    "intentsdb_rocksdb_block_cache_data_hit": "blks_hit",
    "intentsdb_rocksdb_block_cache_data_miss": "blks_read",
    "rocksdb_block_cache_hit": "blks_hit_all",
    "rocksdb_block_cache_miss": "blks_read_all",
    "intentsdb_rocksdb_block_cache_hit": "blks_hit_all",
    "intentsdb_rocksdb_block_cache_miss": "blks_read_all",
}
BLOCK_COUNTERS = ("blks_hit", "blks_read", "blks_hit_all", "blks_read_all")
# The size of each tablet's SST files, the same file's ticker CURRENT_VERSION_SST_FILES_SIZE
# (TickersNameMap: "rocksdb_current_version_sst_files_size"; "intentsdb_" for the intents
# RocksDB), rolled up per table like the block cache's: what the table's replicas on a tserver
# hold on its disk, compressed, without what its memtables hold that is not flushed yet.
SST_FILES_SIZE = ("rocksdb_current_version_sst_files_size",
                  "intentsdb_rocksdb_current_version_sst_files_size")  # fmt: skip
_TABLE_NAME = re.compile(r'[{,]table_name="([^"]*)"')
# The tserver's web server (src/yb/server/default-path-handlers.cc, RegisterMetricsJsonHandler:
# /metrics as JSON, /prometheus-metrics as text). Its Prometheus text (src/yb/util/
# metrics_writer.cc, PrometheusWriter::FlushSingleEntry) is one line per metric and entity,
# `name{attr="value",...} value timestamp_ms`; tablet metrics are rolled up per table
# (AggregationMetricLevel::kTable: summed over the tablets), `metric_type="tablet"`.
METRICS_PATH = "/prometheus-metrics"
TSERVER_WEB_PORT = 9000  # yb-tserver's --webserver_port default
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
DISKS = "# ybscale: disks"
METRICS = "# ybscale: metrics"
LINES = "# ybscale: lines"
# On the node: its /proc/diskstats, its whole disks (/sys/block entries with a device: not
# partitions, loop, ram or device-mapper devices), then, when $0 names a URL, the block-cache
# lines of its tserver's metrics and how many lines were read and how many of them are not
# Prometheus text (a page that is not the metrics is refused, not read as zero).
NODE_SCRIPT = r"""cat /proc/diskstats || exit 1
echo '# ybscale: disks'
for d in /sys/block/*; do [ -e "$d/device" ] && echo "${d##*/}"; done
[ -n "$0" ] || exit 0
echo '# ybscale: metrics'
m=$(curl -fsS --max-time 10 "$0") || {
  echo "# ybscale: unreadable: curl exited $? for $0"; exit 0; }
printf '%s\n' "$m" | awk '
  /^#/ || NF == 0 { next }
  /^(intentsdb_)?rocksdb_(block_cache_(data_)?(hit|miss)|current_version_sst_files_size)[{ ]/ {
    print }
  !/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? [^ ]+( [0-9]+)?$/ { bad++ }
  END { print "# ybscale: lines " NR + 0 " " bad + 0 }'
"""


def disk_read_bytes(diskstats: str, disks: Collection[str]) -> float:
    """Bytes read from the whole disks `disks` since boot: sectors read (the sixth field of
    /proc/diskstats, Documentation/admin-guide/iostats.rst) times 512."""
    total = 0
    for line in diskstats.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[2] in disks:
            total += int(fields[5])
    return float(total * SECTOR_BYTES)


def block_cache_counts(lines: Sequence[str]) -> dict[str, float]:
    """BLOCK_COUNTERS, the BLOCK_CACHE metrics of every entity (table) summed: blks_hit and
    blks_read of the data blocks, blks_hit_all and blks_read_all of every kind. ValueError when
    the page has the totals but not the data blocks' (not the tickers this reads)."""
    counts = dict.fromkeys(BLOCK_COUNTERS, 0.0)
    seen = set()
    for name, _, value in _metric_lines(lines, BLOCK_CACHE):
        counts[BLOCK_CACHE[name]] += value
        seen.add(BLOCK_CACHE[name])
    if {"blks_hit_all", "blks_read_all"} & seen and not {"blks_hit", "blks_read"} & seen:
        raise ValueError(
            "the block cache's totals without its data blocks' "
            "(rocksdb_block_cache_data_hit, _miss): not the tickers expected"
        )
    return counts


def sst_bytes(lines: Sequence[str]) -> dict[str, float]:
    """Bytes of SST files per table name (`SST_FILES_SIZE`, regular and intents RocksDB)."""
    sizes: dict[str, float] = {}
    for _, labels, value in _metric_lines(lines, SST_FILES_SIZE):
        table = _TABLE_NAME.search(labels)
        if table:
            sizes[table.group(1)] = sizes.get(table.group(1), 0.0) + value
    return sizes


def _metric_lines(lines: Sequence[str], names: Collection[str]):
    """(name, labels, value) of the Prometheus text lines `name{labels} value [ms]` of `names`."""
    for line in lines:
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        if name in names:
            labels, _, rest = line[len(name) :].rpartition("}")
            yield name, labels, float(rest.split()[0])


def node_reading(text: str) -> dict:
    """One node's answer to NODE_SCRIPT: {"disks": [...], "disk_read_bytes", and the
    BLOCK_COUNTERS and "sst_bytes" when its metrics were read, or "metrics_error" saying why
    not}."""
    head, _, rest = text.partition(DISKS + "\n")
    if not _:
        raise ValueError(f"no /proc/diskstats: {text[-300:]!r}")
    disk_part, _, metrics = rest.partition(METRICS + "\n")
    disks = disk_part.split()
    out: dict = {"disks": disks, "disk_read_bytes": disk_read_bytes(head, disks)}
    if not _:
        return out
    lines = metrics.splitlines()
    if not lines or not lines[-1].startswith(LINES):
        out["metrics_error"] = (lines[-1] if lines else "no answer").removeprefix("# ybscale: ")
        return out
    read, bad = (int(n) for n in lines[-1].split()[-2:])
    if read == 0 or bad:
        out["metrics_error"] = (
            f"{METRICS_PATH}: {read} line(s), {bad} of them not Prometheus text: not the metrics"
        )
        return out
    try:
        counts = block_cache_counts(lines[:-1])
    except ValueError as exc:
        out["metrics_error"] = f"{METRICS_PATH}: {exc}"
        return out
    return out | counts | {"sst_bytes": sst_bytes(lines[:-1])}


class NodeCounters:
    """The block counters of a YugabyteDB cluster, read on each tserver's machine over SSH (the
    hosts MachineCpu reads CPU on, and its connections): its tserver's block-cache hits and
    misses (`METRICS_PATH` on its web server, asked with curl on the machine itself) and its
    whole disks' bytes read (/proc/diskstats), summed over the tservers.

    As CPU is: the first reading (`open`) finds what can be read; a kind (block cache, disk) is
    measured only when every tserver answers it (a sum over some of the tservers would pass for
    the cluster's), otherwise it is left out with the reason (`warnings`); once measured, a
    reading that fails is a BackendError naming the tserver. Without SSH to the tservers
    (`existing` without `existing.ssh`) nothing is read: the metrics endpoint is on their
    machines' network, and no load generator is sure to reach it.
    """

    def __init__(self, cpu: MachineCpu, urls: Mapping[str, str]):
        self.cpu = cpu
        self.urls = dict(urls)  # tserver name -> its metrics URL (none: disks only)
        self.kinds: tuple[str, ...] | None = None  # set by open()
        self.record: dict = {}

    def _read(self) -> dict[str, dict]:
        from ybscale.backends import ssh

        nodes = self.cpu.nodes
        argv = {n: ["sh", "-c", NODE_SCRIPT, self.urls.get(n, "")] for n in nodes}
        readings, failed = ssh.on_every_host(
            nodes, argv, 60, node_reading, (ValueError, IndexError, KeyError)
        )
        return {**readings, **{n: {"error": why} for n, why in failed.items()}}

    def open(self) -> dict:
        """Once: the first reading decides what is measured (`record`, for measurement.json)."""
        if self.kinds is not None:
            return self.record
        self.kinds = ()
        if not self.cpu.nodes:
            self.record = {"measured": [], "why_not": "no SSH to the tservers"}
            return self.record
        self.cpu.open()  # the connections
        first = self._read()
        why: dict[str, dict[str, str]] = {"block_cache": {}, "disk": {}}
        for name, got in first.items():
            if "error" in got:
                why["block_cache"][name] = why["disk"][name] = got["error"]
                continue
            if "blks_hit" not in got:
                why["block_cache"][name] = got.get("metrics_error", "no metrics URL")
            if not got["disks"]:
                why["disk"][name] = "no whole disk in /sys/block"
        kinds = [k for k in ("block_cache", "disk") if not why[k]]
        self.kinds = tuple(kinds)
        self.record = {
            "source": f"each tserver's {METRICS_PATH} ({', '.join(BLOCK_CACHE)}, summed over its "
            "tables) and its machine's /proc/diskstats (whole disks), read there over SSH",
            "measured": kinds,
            "not_measured": {k: v for k, v in why.items() if v},
            "urls": self.urls,
            "disks": {n: got.get("disks") for n, got in first.items()},
        }
        return self.record

    def warnings(self) -> list[str]:
        return [
            f"{kind.replace('_', ' ')} counters not measured: {node}: {why}"
            for kind, nodes in self.record.get("not_measured", {}).items()
            for node, why in nodes.items()
        ]

    def table_bytes(self, table: str) -> dict[str, float] | None:
        """Each tserver's SST bytes of `table` (its replicas there: `SST_FILES_SIZE`), when the
        block cache is measured (the same metrics); None otherwise. BackendError as `read`."""
        self.open()
        if "block_cache" not in (self.kinds or ()):
            return None
        readings = self._read_every(needs="sst_bytes")
        return {n: got["sst_bytes"].get(table, 0.0) for n, got in sorted(readings.items())}

    def _read_every(self, needs: str | None) -> dict[str, dict]:
        """Every tserver's reading, each holding `needs` (None: any answer); BackendError
        naming the tservers that did not answer so."""
        readings = self._read()
        wrong = {n: got.get("error") or got.get("metrics_error") for n, got in readings.items()
                 if "error" in got or (needs and needs not in got)}  # fmt: skip
        if wrong:
            raise BackendError("block counters unreadable: " + "; ".join(
                f"{name}: {why}" for name, why in wrong.items()))  # fmt: skip
        return readings

    def read(self) -> dict[str, float]:
        """The BLOCK_COUNTERS (block cache: data blocks, and every kind) and disk_read_bytes
        summed over the tservers, the kinds `open` found readable; {} without the block cache
        (the disk alone is not returned: ybscale.measure.buffers reads hits and reads
        together). BackendError when a tserver fails now."""
        self.open()
        if not self.kinds:
            return {}
        cache = "block_cache" in self.kinds
        readings = self._read_every(needs="blks_hit" if cache else None)
        if not cache:  # ybscale.measure.buffers reads both or none
            return {}
        out = {c: sum(got[c] for got in readings.values()) for c in BLOCK_COUNTERS}
        if "disk" in self.kinds:
            out["disk_read_bytes"] = sum(got["disk_read_bytes"] for got in readings.values())
        return out


# --------------------------------------------------------------------------- cluster


class Runner(Protocol):
    """Where pgbench and psql run: this machine, or the load generator over SSH."""

    def popen(self, command: PgbenchCommand, exe: str) -> subprocess.Popen:
        """Start `command` where the runner runs it (`exe`: pgbench there)."""
        ...

    def collect(self, command: PgbenchCommand) -> dict | None:
        """Bring the finished command's files (logs) to where it names them; what a copy
        sent (`LoadgenRunner.collect`), or None when nothing was copied."""
        ...

    def psql(self, endpoint: Endpoint, sql: str, env: Mapping[str, str], timeout: float) -> str: ...

    def facts(self, pgbench: str) -> dict: ...

    def proc_stat(self) -> str:
        """The load generator's /proc/stat."""
        ...

    def clock_offset(self) -> ClockOffset:
        """Its clock minus this machine's (`ybscale.measure.generators`)."""
        ...

    where: str  # the load generator, as a record or an error names it


def generator_readers(runners: Sequence[Runner]) -> dict:
    """Each load generator's /proc/stat reader by its resource name (`MachineCpu`'s clients)."""
    readers = [lambda runner=runner: runner.proc_stat() for runner in runners]  # read when used
    return dict(zip(gens.names(len(runners)), readers, strict=True))


def parse_facts(out: str) -> dict:
    """{"cores", "pgbench_version"} from `nproc; pgbench --version` output."""
    lines = out.strip().splitlines()
    if len(lines) < 2 or not lines[0].strip().isdigit():
        raise BackendError(f"load generator facts unreadable: {out[-300:]!r}")
    return {"cores": int(lines[0]), "pgbench_version": lines[1].strip()}


FACTS_SCRIPT = 'nproc && "$0" --version'


def psql_argv(psql: str, endpoint: Endpoint) -> list[str]:
    """psql reading SQL from stdin, unaligned tuples only, stopping at the first error."""
    return [
        psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
        "-h", endpoint.host, "-p", str(endpoint.port), "-U", endpoint.user, "-d", endpoint.dbname,
        "-f", "-",
    ]  # fmt: skip


def password_env(endpoint: Endpoint) -> dict[str, str]:
    """PGPASSWORD from the endpoint's password variable, when that variable is set."""
    if endpoint.password_env and os.environ.get(endpoint.password_env):
        return {"PGPASSWORD": os.environ[endpoint.password_env]}
    return {}


class YsqlCluster(Cluster):
    """A running YSQL/PostgreSQL cluster: every endpoint serves the whole key space.

    On YugabyteDB with range or hash sharding, every reset is followed by a layout check: at
    least one tablet per tserver, a replica on every tserver, leaders spread over the tservers.
    Each check is appended to `layouts`, which `applied()` returns by reference, so the record
    written at the end of the row (measurement.json) holds every reset's layout.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        row: Row,
        runner: Runner,
        *,
        table: str = "kv",
        sharding: str = "none",
        record: Mapping | None = None,
        pgbench: str = "pgbench",
        layout_timeout: float = LAYOUT_TIMEOUT,
        sleep=time.sleep,
        health=None,
        settle=None,
        flush=None,
        cpu: MachineCpu | None = None,
        generators: Sequence[Runner] | None = None,
        spare: Sequence[Runner | Callable[[], Runner]] = (),
        auto: bool = False,
        read_back: Mapping[str, Callable[[], object]] | None = None,
        web_port: int = TSERVER_WEB_PORT,
        loaders: int = LOADERS,
        chunk_rows: int = CHUNK_ROWS,
    ):
        if not endpoints:
            raise BackendError("no SQL endpoints")
        self.endpoints = list(endpoints)
        self.row = row
        self.rows = row.dataset_rows
        self.runner = runner  # psql, and pgbench unless `generators` names several runners
        self.generators = list(generators or [runner])
        # `auto`: the generators `add_generator` adds, in order: runners, or functions that
        # make one when it joins (gcp's create its VM)
        self.spare = list(spare)
        self.auto = auto  # the generators may grow (through `spare`), and the row records it
        if len(self.generators) > len(self.endpoints):
            raise BackendError(
                f"{len(self.generators)} load generators for {len(self.endpoints)} nodes: each "
                "generator drives whole nodes, so at most one generator per node"
            )
        self.table = table
        self.sharding = sharding
        self.record = dict(record or {})
        self.pgbench = pgbench
        self.layout_timeout = layout_timeout
        self.sleep = sleep
        self.health = health  # () -> list of problems beyond SQL (gcp: the masters' Raft group)
        self.settle = settle  # () -> dict: waits after a reload (gcp: load balancer idle)
        # () -> dict: the table's memtables flushed to SST files (gcp: yb-admin flush_table)
        self.flush = flush
        # more of what `applied()` reads back, by name (gcp: each server's flags)
        self.read_back = dict(read_back or {})
        # CPU of the load generators and of the nodes the backend can reach (default: the former)
        self.cpu = cpu or MachineCpu(self.generator_readers(), {})
        self.web_port = web_port  # the tservers' web server (YugabyteDB: their metrics)
        self._blocks: NodeCounters | None = None
        self.loaders = loaders  # sessions loading the dataset at once (`load`)
        self.chunk_rows = chunk_rows  # rows per chunk of a load, at most (`chunk_rows_for`)
        self.dataset: dict = {}  # the row's first load (`load`), for measurement.json
        self.settled: list[dict] = []
        self.layouts: list[dict] = []
        self.recounted: list[dict] = []  # the layout read again after each measured repetition
        self.inserted: list[dict] = []
        self.restores: list[dict] = []  # each restore's time and DELETEs (`restore`)
        self.logs_copied: dict = {}  # pgbench's logs copied back over SSH, summed (`collect`)
        self._drawn = 0  # the new-key sequence's last value a restore deleted up to
        self._loaded = False
        self._version: str | None = None
        self._facts: list[dict] | None = None
        self._offsets: list[ClockOffset] | None = None
        self._records: list[dict] = []  # applied()'s `load_generators`, grown by add_generator
        self._columns: dict[str, tuple[list[str], str]] = {}

    @property
    def tablets(self) -> int:
        """Tablets the dataset is split into: one per tserver."""
        return len(self.endpoints)

    def name(self, endpoint: Endpoint) -> str:
        return f"{endpoint.role} ({endpoint.host}:{endpoint.port})"

    def targets(self, workload_kind: str) -> list[Target]:
        """Every node, driven by load generator i mod k; with range sharding node i works in
        range bucket i (its reads and its new keys), so inserts are spread over the tablets;
        otherwise the full key space."""
        owners = gens.assign(len(self.endpoints), len(self.generators))
        if self.sharding != "range":
            variables = workload.key_variables(self.rows, 0, 1)
            return [Target(ep, variables, g) for ep, g in zip(self.endpoints, owners, strict=True)]
        counts = bucket_rows(self.rows, self.tablets)
        return [
            Target(ep, {"shard": b * BUCKET, "nshards": 1, "shard_rows": counts[b],
                        "keybase": counts[b]}, g)
            for ep, b, g in zip(self.endpoints,
                                (i % self.tablets for i in range(len(self.endpoints))), owners,
                                strict=True)
        ]  # fmt: skip

    def run(self, command) -> subprocess.Popen:
        """pgbench on the command's load generator; an agreed start moved onto its clock."""
        if command.start_at is not None:
            local = command.start_at + self.clock_offsets()[command.generator]
            command = dataclasses.replace(command, start_at=local)
        return self.generators[command.generator].popen(command, self.pgbench)

    def collect(self, command) -> None:
        """The command's logs brought back by its load generator; what a copy over SSH sent
        added up in `logs_copied` (measurement.json's `applied.logs_copied`: the plan's egress
        is read from it)."""
        copied = self.generators[command.generator].collect(command)
        for key, value in (copied or {}).items():
            self.logs_copied[key] = round(self.logs_copied.get(key, 0) + value, 3)

    def generator_names(self) -> list[str]:
        return gens.names(len(self.generators))

    def generator_label(self, generator: int) -> str:
        return f"{self.generator_names()[generator]} ({self.generators[generator].where})"

    def generator_readers(self) -> dict:
        return generator_readers(self.generators)

    def clock_offsets(self) -> list[float]:
        """Each load generator's clock offset, measured once per row (`Runner.clock_offset`)."""
        if self._offsets is None:
            self._offsets = [runner.clock_offset() for runner in self.generators]
        return [offset.offset_s for offset in self._offsets]

    def generators_record(self) -> list[dict]:
        """What measurement.json says of each load generator: name, where, cores, pgbench
        version, clock offset (and its uncertainty). One list, refilled when `auto` adds a
        generator (the names change: `client` becomes `client0`)."""
        self.clock_offsets()
        self._records[:] = [
            {"name": name, "where": runner.where, **facts, **offset.to_dict()}
            for name, runner, facts, offset in zip(self.generator_names(), self.generators,
                                                   self.generator_facts(), self._offsets,
                                                   strict=True)
        ]  # fmt: skip
        return self._records

    def generator_bound(self) -> int | None:
        return len(self.generators) + len(self.spare) if self.auto else None

    def add_generator(self) -> None:
        """The next spare generator joins: its facts and clock offset read, its CPU measured
        from the next reading on (the generators' resource names follow their count)."""
        if len(self.generators) >= len(self.endpoints) or not self.spare:
            raise BackendError(
                f"no load generator to add: {len(self.generators)} drive "
                f"{len(self.endpoints)} node(s), {len(self.spare)} spare"
            )
        runner = self.spare.pop(0)
        if callable(runner):  # made as it joins (gcp: its VM created then)
            runner = runner()
        self.generator_facts()
        self.clock_offsets()
        self._facts.append(runner.facts(self.pgbench))
        self._offsets.append(runner.clock_offset())
        self.generators.append(runner)
        self.cpu.clients = self.generator_readers()
        if "measured" in self.cpu.record:  # measurement.json's cpu_readings: what is read now
            nodes = [name for name in self.cpu.record["measured"] if not gens.is_generator(name)]
            self.cpu.record["measured"] = [*self.cpu.clients, *nodes]
        self.generators_record()

    def psql(self, sql: str, endpoint: Endpoint | None = None, env=None, timeout=PSQL_TIMEOUT):
        endpoint = endpoint or self.endpoints[0]
        return self.runner.psql(endpoint, sql, {**password_env(endpoint), **(env or {})}, timeout)

    def generator_facts(self) -> list[dict]:
        """Cores and pgbench version of each machine that runs pgbench (not the controller's):
        what `-j` and the recorded pgbench versions must come from."""
        if self._facts is None:
            self._facts = [runner.facts(self.pgbench) for runner in self.generators]
        return self._facts

    def load_generator(self) -> dict:
        """The first load generator's facts (`generator_facts`)."""
        return self.generator_facts()[0]

    def load_cores(self, generator: int = 0) -> int:
        return self.generator_facts()[generator]["cores"]

    def cpu_seconds(self) -> dict[str, float]:
        """Busy CPU seconds of the load generators (`client`, or `client0`...) and of every
        node measured (by endpoint name), all read at once from their /proc/stat."""
        return self.cpu.seconds()

    def cpu_capacity(self) -> dict[str, float]:
        """Each load generator's cores and each node's CPUs."""
        cores = {name: float(self.load_cores(g)) for g, name in enumerate(self.generator_names())}
        return {**cores, **self.cpu.capacity()}

    def node_counters(self) -> NodeCounters | None:
        """The tservers' block counters (`NodeCounters`), on YugabyteDB only: None on
        PostgreSQL, whose endpoints have no tserver metrics."""
        if self._blocks is None and is_yugabyte(self.server_version()):
            urls = {ep.role: f"http://{ep.host}:{self.web_port}{METRICS_PATH}"
                    for ep in self.endpoints}  # fmt: skip
            self._blocks = NodeCounters(self.cpu, urls)
        return self._blocks

    def block_counters(self) -> dict[str, float]:
        """YugabyteDB: the tservers' block-cache hits (blks_hit) and misses (blks_read) of data
        blocks, of every kind beside them (blks_hit_all, blks_read_all: data, index and bloom
        filter blocks), and their machines' disk bytes read (disk_read_bytes), summed over the
        tservers
        (`NodeCounters`: each tserver's metrics and /proc/diskstats over SSH); {} on
        PostgreSQL or without SSH to the tservers."""
        blocks = self.node_counters()
        return blocks.read() if blocks is not None else {}

    def server_version(self) -> str:
        if self._version is None:
            self._version = self.psql("SELECT version()", timeout=30).strip()
        return self._version

    def restorable(self) -> bool:
        """Whether this row's write repetitions are restored (`restorable_script`); otherwise
        each write repetition reloads."""
        text = Path(self.row.script_path).read_text()
        return restorable_script(text, self.ordered(), self.table)

    def ordered(self) -> bool:
        """Whether a range of k is an index range here (`ordered_keys`)."""
        return ordered_keys(self.sharding, is_yugabyte(self.server_version()))

    def reset(self, workload_kind: str) -> str:
        """Bring the dataset to its loaded state: at first, and before a write repetition whose
        script does more than insert new keys, re-created (DROP + CREATE); before the next
        repetitions of an INSERT-only script restored (`restore_sql`: the added keys deleted,
        the loaded rows and the tablets untouched); reads leave it unchanged, so it is loaded
        once for them. Before a reload or restore, the rows the last write repetition inserted
        are counted per range bucket (= per tablet, range sharding); after a reload, `settle`
        waits (gcp: until the load balancer is idle) and the tablet layout is checked."""
        if workload_kind == "read" and self._loaded:
            return ""
        if self._loaded and self.sharding == "range":
            self.inserted.append(self.inserted_per_bucket())
        if self._loaded and self.restorable():
            self.restore()
            return "restored"
        first = not self.dataset
        self.load()
        self._loaded = True
        if self.settle is not None:
            self.settled.append(self.settle())
        if self.sharding in ("range", "hash"):
            self.layouts.append(self.check_layout())
        if first:  # the row's load: its size on the tservers, settled
            self.dataset.update(self.sst_reading())
        return "reloaded"

    def sst_reading(self) -> dict:
        """Where the tservers' metrics are read (`NodeCounters`), after the row's load and
        `settle`: the table flushed (`flush`: its memtables, 128 MiB per tablet by default,
        written to SST files), then each tserver's SST bytes of it (`sst_bytes_per_tserver`:
        compressed, its replicas there) and their sum per row and replica
        (`sst_bytes_per_row_per_replica`, with the record's `replication_factor`). Without a
        flush, or when it fails, nothing is read (`sst_not_read` says why): before one, the
        memtables hold the rows and the SST files may hold none."""
        blocks = self.node_counters()
        if blocks is None or "block_cache" not in (blocks.open().get("measured") or ()):
            return {}
        if self.flush is None:
            return {"sst_not_read": "no flush of the table here (yb-admin flush_table, gcp "
                    "only): the SST files leave out what the memtables hold"}  # fmt: skip
        try:  # a reading beside the measurement: its failure is said, not the row's
            flushed = self.flush()
        except BackendError as exc:
            return {"sst_not_read": f"the flush failed: {exc}"}
        sizes = blocks.table_bytes(self.table)
        if sizes is None:
            return {}
        out = {"sst_flush": flushed, "sst_bytes_per_tserver": sizes}
        rf = self.record.get("replication_factor")
        if rf and self.rows:
            total = sum(sizes.values())
            out["sst_bytes_per_row_per_replica"] = round(total / (self.rows * int(rf)), 3)
        return out

    def load(self) -> dict:
        """The dataset re-created and loaded as YugabyteDB's sample apps load: the table dropped
        and created empty (`create_sql`, one session), then `loaders` sessions at once (loader
        i through endpoint i mod n, each by `self.psql`: on gcp over SSH from the load
        generator), each inserting its own contiguous range of the rows in chunks
        (`load_chunks`, `chunk_sql`: each chunk its own psql session and transaction, at most
        CHUNK_TIMEOUT seconds), then ANALYZE. The keys, values and split are `dataset_sql`'s. A
        loader that fails (or Ctrl-C) stops the others before their next chunk (`run_loaders`).

        The row's first load is recorded (`dataset`, measurement.json's `applied.dataset`, as
        the local backend records its own): how (loaded), rows, seconds, rows per second,
        loaders, rows per chunk; `reset` adds its SST bytes once settled (`sst_reading`)."""
        value_bytes = self.row.dataset_value_bytes
        chunk = chunk_rows_for(self.chunk_rows, value_bytes)
        plan = load_chunks(self.rows, self.loaders, chunk)
        started = time.monotonic()
        self.psql(create_sql(self.table, self.sharding, self.tablets), timeout=CHUNK_TIMEOUT)
        self._drawn = 0  # a new sequence

        def step(endpoint: Endpoint, first: int, last: int) -> Callable[[], object]:
            sql = chunk_sql(self.table, first, last, self.sharding, self.tablets, value_bytes)
            return lambda: self.psql(sql, endpoint, timeout=CHUNK_TIMEOUT + 30)

        run_loaders([
            [step(self.endpoints[i % len(self.endpoints)], first, last) for first, last in chunks]
            for i, chunks in enumerate(plan)
        ])  # fmt: skip
        self.psql(f"ANALYZE {self.table};\n", timeout=LOAD_TIMEOUT)
        seconds = time.monotonic() - started
        record = {
            "how": "loaded",
            "rows": self.rows,
            "seconds": round(seconds, 3),
            "rows_per_second": round(self.rows / seconds) if seconds > 0 else None,
            "loaders": sum(1 for chunks in plan if chunks),
            "chunk_rows": chunk,
        }
        if not self.dataset:  # the row's load; a reload's seconds are in repetitions.csv
            self.dataset.update(record)
        return record

    def inserted_per_bucket(self) -> dict[str, int]:
        """New rows per range bucket since the last load (range sharding): one count per
        bucket of its keys above the loaded ones (`inserted_sql`, each at most COUNT_TIMEOUT)."""
        out = self.psql(inserted_sql(self.rows, self.table, self.tablets),
                        timeout=psql_timeout(self.tablets, COUNT_TIMEOUT)).split()  # fmt: skip
        if len(out) != self.tablets:
            raise BackendError(f"inserted rows per bucket: {self.tablets} counts expected, "
                               f"got {out!r}")  # fmt: skip
        return {f"tablet{b}": int(n) for b, n in enumerate(out)}

    def restore(self) -> dict:
        """The keys the write repetitions added deleted (`restore_sql`: with ordered keys one
        DELETE per range, with hashed keys the new-key sequence's keys given out since the
        last load or restore), each DELETE at most LOAD_TIMEOUT; recorded in `restores`."""
        yugabyte = is_yugabyte(self.server_version())
        started = time.monotonic()
        drawn = (0, 0)
        if not self.ordered():
            drawn = (self._drawn, int(self.psql(drawn_sql(self.table), timeout=30).strip()))
        statements = restore_statements(self.rows, self.table, self.sharding, self.tablets,
                                        yugabyte, drawn)  # fmt: skip
        sql = restore_sql(self.rows, self.table, self.sharding, self.tablets, not yugabyte,
                          yugabyte, drawn)  # fmt: skip
        self.psql(sql, timeout=psql_timeout(len(statements) + 1, LOAD_TIMEOUT))
        self._drawn = drawn[1]
        record = {"seconds": round(time.monotonic() - started, 3), "deletes": len(statements),
                  "by": "key ranges" if self.ordered() else "new-key sequence",
                  **({"new_keys": drawn[1] - drawn[0]} if not self.ordered() else {})}  # fmt: skip
        self.restores.append(record)
        return record

    def view_columns(self, view: str) -> tuple[list[str], str]:
        """(columns, where they were read): from the server's pg_attribute when it has the view,
        else from the vendored catalogue of the server's release series."""
        if view not in self._columns:
            found = self.psql(columns_sql(view), timeout=30).split()
            if found:
                self._columns[view] = (found, "server (pg_attribute)")
            else:
                series = yb_catalogue.series_of(self.server_version())
                try:
                    catalogue = yb_catalogue.load(series or "(none in its version())")
                except yb_catalogue.UnknownSeries as exc:
                    raise BackendError(
                        f"{view} not found on the server ({self.server_version()}): {exc}"
                    ) from exc
                columns = yb_catalogue.columns(series, view)
                self._columns[view] = (columns, f"catalogue {series} ({catalogue['tag']})")
        return self._columns[view]

    def layout(self) -> dict:
        """The table's tablets as the servers report them (one reading, no judgement)."""
        columns, columns_source = self.view_columns("yb_local_tablets")
        queries = layout_sql(self.table, columns)
        tablets = int(self.psql(queries["tablets"], timeout=30).strip())
        local = {
            self.name(ep): int(self.psql(queries["replicas"], ep, timeout=30).strip())
            for ep in self.endpoints
        }
        leaders: dict[str, int] | None = None
        source = "yb_tablet_metadata"
        if self.psql(queries["has_metadata"], timeout=30).strip() == "t":
            out = self.psql(queries["leaders"], timeout=30)
            leaders = {addr: int(n) for addr, n in (line.split("|") for line in out.split())}
        elif sum(local.values()) == tablets:  # one replica per tablet: it is the leader
            leaders, source = dict(local), "yb_local_tablets (one replica per tablet)"
        else:
            source = "unknown: yb_tablet_metadata needs YugabyteDB 2025.1 or later"
        replicas = (
            f"state = {READY_STATE}"
            if "state" in columns
            else "every state (yb_local_tablets has no state column)"
        )
        return {"tablets": tablets, "replicas_per_node": local, "replicas_counted": replicas,
                "local_columns_source": columns_source, "leaders_per_node": leaders,
                "leaders_source": source}  # fmt: skip

    def layout_problems(self, layout: Mapping) -> list[str]:
        n = len(self.endpoints)
        problems = []
        if layout["tablets"] < n:
            problems.append(f"{layout['tablets']} tablet(s) for {n} tservers")
        empty = [node for node, count in layout["replicas_per_node"].items() if count == 0]
        if empty:
            problems.append(f"no replica of {self.table} on {', '.join(empty)}")
        leaders = layout["leaders_per_node"]
        if leaders is not None and sum(1 for c in leaders.values() if c > 0) < n:
            problems.append(f"tablet leaders on fewer than {n} tservers: {leaders}")
        return problems

    def check_layout(self) -> dict:
        """The layout once it is right; BackendError naming the problem if it is not right
        within `layout_timeout` (leaders move for a while after CREATE)."""
        deadline = time.monotonic() + self.layout_timeout
        while True:
            layout = self.layout()
            problems = self.layout_problems(layout)
            if not problems:
                if layout["leaders_per_node"] is None:
                    layout["warning"] = "tablet leaders not verified: " + layout["leaders_source"]
                return layout
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"table {self.table} ({self.sharding} sharding) is not spread over the "
                    f"tservers: {'; '.join(problems)}"
                )
            self.sleep(5)

    def verify_layout(self, when: str) -> None:
        """After a measured repetition (YugabyteDB, range or hash sharding): the table's tablets
        and leaders read again (recorded); a tablet count other than the last reload's means a
        tablet split while the row measured: BackendError naming it and `when`."""
        if self.sharding not in ("range", "hash") or not self.layouts:
            return
        layout = {**self.layout(), "when": when}
        self.recounted.append(layout)
        before = self.layouts[-1]["tablets"]
        if layout["tablets"] != before:
            raise BackendError(
                f"table {self.table} has {layout['tablets']} tablets {when}, {before} after its "
                "reload: a tablet split while the row measured (automatic tablet splitting: "
                "gcp.yugabyte.tablet_splitting, server.enable_automatic_tablet_splitting)"
            )

    def check(self) -> None:
        """Every endpoint answers SELECT 1; on YugabyteDB every tserver is registered
        (yb_servers()) and `health` (if any) reports nothing. BackendError names what is not."""
        failed = []
        for ep in self.endpoints:
            try:
                if self.psql("SELECT 1", ep, timeout=30).strip() != "1":
                    failed.append(f"{self.name(ep)}: unexpected answer")
            except BackendError as exc:
                failed.append(f"{self.name(ep)}: {exc}")
        if failed:
            raise BackendError("nodes not answering SELECT 1:\n" + "\n".join(failed))
        problems = []
        if is_yugabyte(self.server_version()):
            n = int(self.psql("SELECT count(*) FROM yb_servers()", timeout=30).strip())
            if n != len(self.endpoints):
                problems.append(f"yb_servers() lists {n} tservers, the cluster has "
                                f"{len(self.endpoints)}")  # fmt: skip
        if self.health is not None:
            problems += self.health()
        if problems:
            raise BackendError("cluster not ready: " + "; ".join(problems))

    def isolation_in_effect(self, endpoint: Endpoint) -> tuple[str, str]:
        """(level, how it was read) for a session with the row's settings.

        YugabyteDB: only yb_get_effective_transaction_isolation_level() counts, because without
        --yb_enable_read_committed_isolation `SHOW transaction_isolation` says read committed
        while the server runs snapshot. PostgreSQL: SHOW transaction_isolation.
        """
        env = workload.session_env(self.row.session)
        if is_yugabyte(self.server_version()):
            try:
                sql = f"SELECT {ISOLATION_FUNCTION}"
                return self.psql(sql, endpoint, env=env, timeout=30).strip().lower(), (
                    ISOLATION_FUNCTION
                )
            except BackendError as exc:
                raise BackendError(
                    f"{self.name(endpoint)}: cannot read the isolation level in effect on "
                    f"YugabyteDB ({self.server_version()}): {exc}; SHOW transaction_isolation "
                    "is not trusted there (it reports read committed while running snapshot)"
                ) from exc
        sql = "SHOW transaction_isolation"
        return self.psql(sql, endpoint, env=env, timeout=30).strip().lower(), sql

    def settings_in_effect(self, wanted: Mapping[str, str]) -> dict[str, dict[str, str]]:
        """Each YSQL setting of `wanted` as every node reports it (SHOW, a session without the
        row's settings); BackendError naming the node, the setting and both values when one
        differs (gcp: the server.* settings its tservers got through --ysql_pg_conf_csv)."""
        names = sorted(wanted)
        shown = {}
        for ep in self.endpoints:
            answers = self.psql("\n".join(f"SHOW {n};" for n in names), ep).splitlines()
            shown[self.name(ep)] = dict(zip(names, answers, strict=True))
        wrong = [f"{node}: {n} is {got[n]!r}, asked {wanted[n]!r}" for node, got in shown.items()
                 for n in names if not same_setting(got[n], wanted[n])]  # fmt: skip
        if wrong:
            raise BackendError("YSQL settings in effect differ from the row's: " + "; ".join(wrong))
        return shown

    def applied(self) -> dict:
        """Isolation level read back from every node; BackendError if one differs from the row."""
        wanted = self.row.isolation
        in_effect, sources = {}, set()
        for ep in self.endpoints:
            level, source = self.isolation_in_effect(ep)
            in_effect[self.name(ep)] = level
            sources.add(source)
        blocks = self.node_counters()
        wrong = {node: level for node, level in in_effect.items() if level != wanted}
        if wrong:
            raise BackendError(
                f"isolation in effect {wrong} differs from the design's {wanted!r} "
                "(YugabyteDB: is --yb_enable_read_committed_isolation=true set on every tserver?)"
            )
        return {
            **self.record,
            **{name: read() for name, read in self.read_back.items()},
            "isolation_requested": wanted,
            "isolation_in_effect": in_effect,
            "isolation_source": sorted(sources),
            "server_version": self.server_version(),
            "load_generator": self.load_generator(),
            "load_generators": self.generators_record(),
            "table": self.table,
            "sharding": self.sharding,
            "dataset": self.dataset,  # filled by the first load
            "tablet_layout": self.layouts,  # filled by every reset
            "tablet_layout_after_repetitions": self.recounted,  # filled by verify_layout
            "inserted_per_tablet": self.inserted,  # filled before every reload
            "restores": self.restores,  # filled by every restore
            "logs_copied": self.logs_copied,  # filled by every copy of logs over SSH
            "after_reload": self.settled,  # what `settle` waited, per reload
            "cpu_readings": self.cpu.open(),
            **({"block_counters": blocks.open()} if blocks is not None else {}),
            "warnings": self.cpu.warnings() + (blocks.warnings() if blocks is not None else []),
        }


# --------------------------------------------------------------------------- local runner


class LocalRunner:
    """pgbench and psql on this machine; workload scripts get the configured table name."""

    def __init__(self, table: str = "kv", psql: str = "psql"):
        self.table = table
        self.psql_exe = psql

    def _script(self, path: Path, workdir: Path) -> Path:
        if self.table == "kv":
            return path
        out = workdir / f"{path.stem}.{self.table}{path.suffix}"
        out.write_text(rename_table(path.read_text(), self.table))
        return out

    def popen(self, command, exe) -> subprocess.Popen:
        """pgbench here, its scripts on the configured table (copies in the work folder)."""
        scripts = tuple(self._script(Path(s), command.workdir) for s in command.scripts)
        command = dataclasses.replace(command, scripts=scripts)
        return spawn_local(pgbench.argv(command, exe), command.env, command.workdir)

    def collect(self, command) -> None:
        """Nothing to bring: pgbench wrote its logs here (nothing copied, None)."""

    def psql(self, endpoint, sql, env, timeout) -> str:
        try:
            done = subprocess.run(
                psql_argv(self.psql_exe, endpoint),
                input=sql,
                env={**os.environ, "PGCONNECT_TIMEOUT": "10", **env},
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"psql {endpoint.host}:{endpoint.port}: {exc}") from exc
        if done.returncode != 0:
            raise BackendError(
                f"psql {endpoint.host}:{endpoint.port} exited {done.returncode}: "
                f"{done.stderr.strip()[-1000:]}"
            )
        return done.stdout

    def facts(self, pgbench: str) -> dict:
        """This machine's usable cores and its pgbench's version."""
        try:
            done = subprocess.run(["sh", "-c", FACTS_SCRIPT, pgbench], capture_output=True,
                                  text=True, timeout=60)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"{pgbench} --version: {exc}") from exc
        return parse_facts(done.stdout)

    def proc_stat(self) -> str:
        return Path("/proc/stat").read_text()

    def clock_offset(self) -> ClockOffset:
        return gens.SAME_CLOCK

    where = "this machine"
