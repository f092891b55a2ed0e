"""YugabyteDB's DDL as a stand-in PostgreSQL tserver takes it (the loopback load generator's
psql, tests/stand_in_bin/psql, passes the SQL it is given through this first when it holds
YugabyteDB's primary-key or split clauses).

`ysql.create_sql` writes, as YugabyteDB takes them,
  range sharding: ``PRIMARY KEY (k ASC)) SPLIT AT VALUES ((b1), (b2), ...)``: one tablet per
  range, split points + 1 (src/postgres/src/backend/parser/gram.y, OptSplit: SPLIT AT VALUES);
  hash sharding:  ``PRIMARY KEY (k HASH)) SPLIT INTO n TABLETS``: n tablets over the 65536 hash
  codes (SPLIT INTO ... TABLETS).
PostgreSQL has neither clause: the table is made with a plain ``PRIMARY KEY (k)`` (a btree
either way; tests/scans.py judges a hashed table's plans by YugabyteDB's rules, equality on k
only) and its tablets are written to the stand-in catalogue (yb_stub.tablets, which
yb_table_properties and yb_local_tablets read: ybscale.backends.yb_catalogue.stubs) as
YugabyteDB's master creates them: tablet t led by tserver t mod n, one replica (the rehearsals'
clusters run with replication off), the hash codes split evenly on hash sharding. The table's
earlier tablets are dropped with it.
"""

from __future__ import annotations

import re
import sys

HASH_CODES = 65536
_CREATE = re.compile(r"CREATE TABLE (\w+) \((.*?), PRIMARY KEY \(k (ASC|HASH)\)\)(?: SPLIT "
                     r"(?:AT VALUES \(((?:\(\d+\)(?:, )?)+)\)|INTO (\d+) TABLETS))?;")  # fmt: skip


def tablets_sql(table: str, tablets: int, hashed: bool) -> str:
    """The table's tablets in yb_stub.tablets, replacing any it had."""
    codes = (f"t * {HASH_CODES} / {tablets}, (t + 1) * {HASH_CODES} / {tablets}" if hashed
             else "NULL, NULL")  # fmt: skip
    return (
        f"DELETE FROM yb_stub.tablets WHERE table_name = '{table}' "
        "AND db_name = current_database();\n"
        "INSERT INTO yb_stub.tablets (tablet_id, db_name, table_name, leader, replicas, "
        "start_hash_code, end_hash_code)\n"
        f"SELECT '{table}-tablet' || t, current_database(), '{table}', "
        f"a[t % cardinality(a) + 1], ARRAY[a[t % cardinality(a) + 1]], {codes}\n"
        f"FROM generate_series(0, {tablets - 1}) AS t, (SELECT array_agg(host || ':' || port "
        "ORDER BY host, port) AS a FROM yb_stub.servers) AS s;\n"
    )


def translate(sql: str) -> str:
    """`sql` with each YugabyteDB CREATE TABLE of `_CREATE` made a PostgreSQL one, followed by
    its tablets (`tablets_sql`); anything else as it is."""

    def plain(match: re.Match) -> str:
        table, columns, order, points, count = match.groups()
        hashed = order == "HASH"
        tablets = int(count) if hashed and count else (points.count("(") + 1 if points else 1)
        return (f"CREATE TABLE {table} ({columns}, PRIMARY KEY (k));\n"
                + tablets_sql(table, tablets, hashed))  # fmt: skip

    return _CREATE.sub(plain, sql)


if __name__ == "__main__":
    sys.stdout.write(translate(sys.stdin.read()))
