"""YugabyteDB's views and functions as stand-ins on a plain PostgreSQL 15 database (for tests).

`stub_sql(series)` creates every view and function of the series' catalogue with exactly its
columns and argument types, backed by two tables in schema ``yb_stub``: ``servers`` (what
yb_servers() lists) and ``tablets`` (one row per tablet: its table, leader and replica addresses,
state), plus ``node`` (the address of the tserver this database stands for). A tablet is in
yb_local_tablets when this node's address is one of its replicas. `tablets_sql` spreads a table's
tablets over the servers; tests may write the tables directly for other layouts.

Where PostgreSQL cannot follow the catalogue it says so here: functions returning ``cstring``
(yb_get_effective_transaction_isolation_level) return ``text``, since SQL functions cannot return
``cstring``; psql prints both the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from ybscale.backends.yb_catalogue import load

SCHEMA = "yb_stub"
READY = "TABLET_DATA_READY"

# Value of each known column in the stand-ins (t: yb_stub.tablets, s: yb_stub.servers);
# a catalogue column not listed here is NULL of its type.
LOCAL_TABLETS = {
    "tablet_id": "t.tablet_id",
    "table_id": "md5(t.db_name || '.' || t.table_name)",
    "table_type": "'YSQL'",
    "namespace_name": "t.db_name",
    "ysql_schema_name": "'public'",
    "table_name": "t.table_name",
    "state": "t.state",
}
TABLET_METADATA = {
    "tablet_id": "t.tablet_id",
    "oid": "(SELECT c.oid FROM pg_class c WHERE c.relname = t.table_name LIMIT 1)",
    "db_name": "t.db_name",
    "relname": "t.table_name",
    "start_hash_code": "t.start_hash_code",
    "end_hash_code": "t.end_hash_code",
    "leader": "t.leader",
    "replicas": "t.replicas",
    "tablet_state": "t.state",
}
SERVERS = {
    "host": "s.host",
    "port": "s.port",
    "num_connections": "(SELECT count(*) FROM pg_stat_activity WHERE datname IS NOT NULL)",
    "node_type": "'primary'",
    "cloud": "'cloud1'",
    "region": "'datacenter1'",
    "zone": "'rack1'",
    "public_ip": "s.host",
    "uuid": "md5(s.host || ':' || s.port)",
    "universe_uuid": "md5('ybscale-stub-universe')",
}
TABLE_PROPERTIES = {
    "num_tablets": "count(*)",
    "num_hash_key_columns": "CASE WHEN bool_or(t.start_hash_code IS NOT NULL) THEN 1 ELSE 0 END",
    "is_colocated": "false",
}


def _select(columns: Sequence[Sequence[str]], known: dict[str, str]) -> str:
    return ",\n       ".join(
        f"({known[name]})::{kind} AS {name}" if name in known else f"NULL::{kind} AS {name}"
        for name, kind in columns
    )


def _out(columns: Sequence[Sequence[str]]) -> str:
    return ", ".join(f"OUT {name} {kind}" for name, kind in columns)


def _object_sql(name: str, obj: dict) -> str:
    cols = obj.get("columns", [])
    if name == "yb_local_tablets":
        return (
            f"CREATE VIEW yb_local_tablets AS\nSELECT {_select(cols, LOCAL_TABLETS)}\n"
            f"FROM {SCHEMA}.tablets t\n"
            f"WHERE (SELECT address FROM {SCHEMA}.node) = ANY (t.replicas);\n"
        )
    if name == "yb_tablet_metadata":
        return (
            f"CREATE VIEW yb_tablet_metadata AS\nSELECT {_select(cols, TABLET_METADATA)}\n"
            f"FROM {SCHEMA}.tablets t;\n"
        )
    if name == "yb_servers":
        return (
            f"CREATE FUNCTION yb_servers({_out(cols)}) RETURNS SETOF record\n"
            f"LANGUAGE sql STABLE AS $$ SELECT {_select(cols, SERVERS)}\n"
            f"FROM {SCHEMA}.servers s ORDER BY s.host, s.port $$;\n"
        )
    if name == "yb_table_properties":
        args = ", ".join(f"{arg} {kind}" for arg, kind in obj["arguments"])
        table = obj["arguments"][0][0]
        return (
            f"CREATE FUNCTION yb_table_properties({args}, {_out(cols)}) LANGUAGE sql STABLE AS\n"
            f"$$ SELECT {_select(cols, TABLE_PROPERTIES)} FROM {SCHEMA}.tablets t\n"
            f"   WHERE t.db_name = current_database()\n"
            f"     AND t.table_name = (SELECT relname FROM pg_class WHERE oid = {table}) $$;\n"
        )
    if name == "yb_get_effective_transaction_isolation_level":
        return (  # cstring in YugabyteDB; an SQL function cannot return cstring
            "CREATE FUNCTION yb_get_effective_transaction_isolation_level() RETURNS text "
            "LANGUAGE sql STABLE AS $$ SELECT current_setting('transaction_isolation') $$;\n"
        )
    raise ValueError(f"no stand-in for {name}: add one to {__name__}")


def stub_sql(
    series: str,
    *,
    servers: Sequence[str] = ("127.0.0.1:5433",),
    node: int = 0,
    version: bool = True,
) -> str:
    """SQL that makes the current database answer like a tserver of YugabyteDB `series`.

    servers: "host:port" of every tserver (what yb_servers() lists); node: which of them this
    database stands for. version: also make version() answer like the series' server (a
    ``public.version()`` and the database's search_path with pg_catalog after public, for new
    sessions). No tablets: add them with `tablets_sql`. Idempotent: a second run starts over.
    """
    catalogue = load(series)
    objects = catalogue["objects"]
    rows = ", ".join(
        f"('{host}', {int(port)})" for host, port in (s.rsplit(":", 1) for s in servers)
    )
    sql = [
        f"-- YugabyteDB {series} stand-ins ({catalogue['tag']}), ybscale.backends.yb_catalogue\n",
        "DROP VIEW IF EXISTS yb_local_tablets, yb_tablet_metadata;\n",
        "DROP FUNCTION IF EXISTS yb_servers(), yb_table_properties(oid),"
        " yb_get_effective_transaction_isolation_level(), public.version();\n",
        f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE;\n",
        f"CREATE SCHEMA {SCHEMA};\n",
        f"CREATE TABLE {SCHEMA}.servers (host text NOT NULL, port bigint NOT NULL);\n",
        f"CREATE TABLE {SCHEMA}.node (address text NOT NULL);\n",
        f"CREATE TABLE {SCHEMA}.tablets (tablet_id text PRIMARY KEY, db_name text NOT NULL,"
        f" table_name text NOT NULL, leader text, replicas text[] NOT NULL,"
        f" state text NOT NULL DEFAULT '{READY}', start_hash_code integer,"
        f" end_hash_code integer);\n",
        f"INSERT INTO {SCHEMA}.servers VALUES {rows};\n",
        f"INSERT INTO {SCHEMA}.node VALUES ('{servers[node]}');\n",
    ]
    sql += [_object_sql(name, obj) for name, obj in sorted(objects.items())]
    if version:
        text = catalogue["version_string"].replace("'", "''")
        sql += [
            "CREATE FUNCTION public.version() RETURNS text LANGUAGE sql STABLE AS\n"
            f"$$ SELECT '{text} (ybscale stand-in on ' || pg_catalog.version() || ')' $$;\n",
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = "
            '"$user", public, pg_catalog\', current_database()); END $$;\n',
        ]
    return "".join(sql)


def tablets_sql(
    table: str,
    tablets: int,
    servers: Sequence[str],
    *,
    replication_factor: int = 1,
    hash_sharded: bool = False,
    db_name: str | None = None,
) -> str:
    """Rows of yb_stub.tablets for `tablets` tablets of `table`: tablet i is led by server
    i mod n and has replicas on the replication_factor servers from there on."""
    n = len(servers)
    db = f"'{db_name}'" if db_name else "current_database()"
    rows = []
    for i in range(tablets):
        replicas = [servers[(i + j) % n] for j in range(min(replication_factor, n))]
        start, end = (
            (i * 65536 // tablets, (i + 1) * 65536 // tablets) if hash_sharded else (None, None)
        )
        rows.append(
            f"('{table}-tablet{i}', {db}, '{table}', '{replicas[0]}', "
            f"ARRAY{replicas!r}::text[], '{READY}', "
            f"{'NULL' if start is None else start}, {'NULL' if end is None else end})"
        )
    if not rows:
        return ""
    return f"INSERT INTO {SCHEMA}.tablets VALUES {', '.join(rows)};\n"
