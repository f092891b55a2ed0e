"""What a design row runs: its pgbench script, its key space and its session settings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ISOLATION_LEVELS = ("read committed", "repeatable read", "serializable")

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS kv (k bigint PRIMARY KEY, v text NOT NULL);
CREATE SEQUENCE IF NOT EXISTS kv_new_key;
"""


def kind(levels: Mapping[str, object]) -> str:
    """The workload of a row: "read" or "write"."""
    value = str(levels["workload"]).lower()
    if value not in ("read", "write"):
        raise ValueError(f"workload level must be read or write, got {levels['workload']!r}")
    return value


def script(levels: Mapping[str, object], workloads_dir: str | Path) -> Path:
    """The pgbench script of a row: <workload>_<operation_size>.sql."""
    path = Path(workloads_dir) / f"{kind(levels)}_{int(levels['operation_size'])}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no pgbench script for this row's levels")
    return path


def shard_keys(rows: int, shard: int, nshards: int) -> range:
    """Keys of the loaded dataset held by `shard` (hash sharding by k mod nshards)."""
    return range(shard, rows, nshards)


def key_variables(rows: int, shard: int, nshards: int) -> dict[str, int]:
    """pgbench -D variables for a target holding shard `shard` of `nshards`.

    New keys are keybase + seq * nshards + shard with keybase a multiple of nshards above every
    loaded key, so inserted rows stay in their shard and never collide.
    """
    keybase = -(-rows // nshards) * nshards
    return {
        "shard": shard,
        "nshards": nshards,
        "shard_rows": len(shard_keys(rows, shard, nshards)),
        "keybase": keybase,
    }


def load_sql(rows: int, shard: int = 0, nshards: int = 1) -> str:
    """SQL that (re)creates the starting state of one shard: `rows` keys split over nshards."""
    return (
        SCHEMA_SQL
        + "TRUNCATE kv;\n"
        + f"INSERT INTO kv SELECT k, md5(k::text) FROM generate_series({shard}, {rows - 1},"
        f" {nshards}) AS k;\n" + "VACUUM ANALYZE kv;\n"
    )


def isolation(levels: Mapping[str, object]) -> str:
    """The isolation level a row asks for, as PostgreSQL spells it."""
    value = str(levels["isolation"]).lower()
    if value == "snapshot":
        value = "repeatable read"
    if value not in ISOLATION_LEVELS:
        raise ValueError(
            f"isolation level {levels['isolation']!r} is not one of {ISOLATION_LEVELS}"
        )
    return value


def session_env(levels: Mapping[str, object]) -> dict[str, str]:
    """Environment that makes every session of the row default to its isolation level."""
    return {
        "PGOPTIONS": "-c default_transaction_isolation=" + isolation(levels).replace(" ", r"\ ")
    }
