"""Workload scripts: which pgbench script a row runs, the variables it uses, its key space.

A script is ``<workloads>/<name>.sql``. Besides the variables the row sets (``workload.<var>``),
the harness gives every script its key space: ``shard``, ``nshards``, ``shard_rows``, ``keybase``
(see ``key_variables``), and the dataset's value size ``value_bytes`` (``dataset.value_bytes``:
the rows a script writes are as large as the loaded ones). A script is read-only when it
changes nothing (no INSERT, UPDATE, ...); read-only scripts may be spread over replicas and
leave the dataset as it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

HARNESS_VARIABLES = ("shard", "nshards", "shard_rows", "keybase")
DATASET_VARIABLES = ("value_bytes",)  # from the row's dataset knobs, when a script uses them

# Sequence values a session takes at once for the write scripts' new keys. PostgreSQL's default
# (1) makes every nextval() a visit to the sequence, so a 100-row INSERT paid 100 of them; on
# YugabyteDB each visit is a write to the sequence's one tablet (issue 20, item 6).
NEW_KEY_CACHE = 1000


def new_key_sequence_sql(table: str = "kv", if_not_exists: bool = False) -> str:
    """CREATE SEQUENCE `<table>_new_key`, the write scripts' new keys, cached per session."""
    guard = "IF NOT EXISTS " if if_not_exists else ""
    return f"CREATE SEQUENCE {guard}{table}_new_key CACHE {NEW_KEY_CACHE};\n"


SCHEMA_SQL = (
    "CREATE TABLE IF NOT EXISTS kv (k bigint PRIMARY KEY, v text NOT NULL);\n"
    + new_key_sequence_sql("kv", if_not_exists=True)
)

_COMMENT = re.compile(r"--[^\n]*")
_VARIABLE = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_SET = re.compile(r"^\\set\s+(\w+)", re.MULTILINE)
_WRITES = re.compile(
    r"\b(insert|update|delete|merge|upsert|copy|create|alter|drop|truncate|nextval|setval)\b",
    re.IGNORECASE,
)


def script_path(workloads_dir: str | Path, name: str) -> Path:
    """``<workloads>/<name>.sql``."""
    return Path(workloads_dir) / f"{name}.sql"


def available(workloads_dir: str | Path) -> list[str]:
    """Names of the scripts in the workloads folder."""
    return sorted(p.stem for p in Path(workloads_dir).glob("*.sql"))


def _code(text: str) -> str:
    return _COMMENT.sub("", text)


def variables_used(text: str) -> set[str]:
    """pgbench variables a script reads (``:name``) but does not set itself (``\\set name``)."""
    code = _code(text)
    return set(_VARIABLE.findall(code)) - set(_SET.findall(code))


def read_only(text: str) -> bool:
    """True when the script changes nothing (so it may run on replicas)."""
    return _WRITES.search(_code(text)) is None


def inserts_only(text: str) -> bool:
    """True when the script's only change is INSERTs of new keys (`nextval` of the new-key
    sequence may draw them): the loaded rows stay as they were, so removing every key outside
    the loaded ones (`restore_sql`) brings the dataset back without a reload. A script that
    updates, deletes or otherwise changes rows is reloaded instead."""
    found = {m.lower() for m in _WRITES.findall(_code(text))}
    return bool(found) and found <= {"insert", "nextval"}


def restore_sql(rows: int, shard: int = 0, nshards: int = 1, table: str = "kv") -> str:
    """SQL that brings one shard's dataset back to its loaded keys after INSERT-only writes:
    the keys a script added (from `keybase` up, as `key_variables` gives them; or below 0)
    deleted, and the space they took made reusable (VACUUM: the table does not grow from one
    write repetition to the next)."""
    keybase = key_variables(rows, shard, nshards)["keybase"]
    return f"DELETE FROM {table} WHERE k >= {keybase} OR k < 0;\nVACUUM {table};\n"


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


# The size of a loaded row's value (`dataset.value_bytes`): by default one md5 in hex, as it
# was before the knob, so studies without it load what they always did; at most 1 MiB.
VALUE_BYTES = 32
MAX_VALUE_BYTES = 2**20


def value_sql(value_bytes: int = VALUE_BYTES, key: str = "key") -> str:
    """An SQL text of exactly `value_bytes` bytes (ASCII hex) built from md5s of the key `key`:
    md5(key) itself at the default 32 bytes, a prefix of it below, and above the first
    `value_bytes` of md5(key:1) || md5(key:2) || ... Distinct md5s rather than one repeated:
    a repeated md5 compresses to almost nothing (PostgreSQL's TOAST above 2 kB, YugabyteDB's
    block compression), so the disks would hold far less than the rows' size says."""
    if value_bytes == VALUE_BYTES:
        return f"md5({key}::text)"
    if value_bytes < VALUE_BYTES:
        return f"left(md5({key}::text), {value_bytes})"
    copies = -(-value_bytes // VALUE_BYTES)
    return (
        f"left((SELECT string_agg(md5({key}::text || ':' || i), '' ORDER BY i) "
        f"FROM generate_series(1, {copies}) AS i), {value_bytes})"
    )


def insert_sql(
    table: str,
    first: int,
    last: int,
    step: int = 1,
    keys: str = "k",
    value_bytes: int = VALUE_BYTES,
) -> str:
    """The dataset's rows: for k = first, first + step, ... <= last, the key `keys` (an SQL
    expression of k) with v a text of `value_bytes` bytes built from md5(key) (`value_sql`).
    Every backend loads its data with this statement."""
    return (
        f"INSERT INTO {table} SELECT key, {value_sql(value_bytes)} FROM "
        f"(SELECT {keys} AS key FROM generate_series({first}, {last}, {step}) AS k) AS s;\n"
    )


def load_sql(rows: int, shard: int = 0, nshards: int = 1, value_bytes: int = VALUE_BYTES) -> str:
    """SQL that (re)creates the starting state of one shard: `rows` keys split over nshards,
    each with a value of `value_bytes` bytes."""
    return (
        SCHEMA_SQL
        + "TRUNCATE kv;\n"
        + insert_sql("kv", shard, rows - 1, nshards, value_bytes=value_bytes)
        + "VACUUM ANALYZE kv;\n"
    )


def pgoptions(settings: Mapping[str, str]) -> str:
    """``PGOPTIONS`` that set every session setting (spaces escaped as libpq wants)."""
    return " ".join(
        f"-c {name}=" + str(value).replace("\\", "\\\\").replace(" ", "\\ ")
        for name, value in sorted(settings.items())
    )


def session_env(settings: Mapping[str, str]) -> dict[str, str]:
    """Environment that applies the row's session settings to every session."""
    return {"PGOPTIONS": pgoptions(settings)} if settings else {}
