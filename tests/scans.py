"""Whole-table scans as YugabyteDB 2024.2's planner leaves them: bitmap scans off.

YugabyteDB 2024.2 runs YSQL with bitmap scans off (`yb_enable_bitmapscan`: on by default only
from v2025.2, with Enhanced PostgreSQL Compatibility Mode, docs.yugabyte.com
stable/reference/configuration/postgresql-compatibility), so a statement whose rows no
single index range reaches (a top-level `OR` of ranges, a count with no WHERE) scans the whole
table, every tablet. A stand-in PostgreSQL with `enable_bitmapscan = off` plans the same shapes:
`Explaining` wraps a Runner (`ybscale.backends.ysql.Runner`) and, while `checking`, EXPLAINs
every statement the code sends that reads the table, in a session with bitmap scans off, before
running it; the plans that scan the table whole are kept in `whole`: a `Seq Scan` of it, or an
index scan of it with no `Index Cond` (the whole index, every row). The session also has
`enable_seqscan = off`, so the question is whether an index path exists at all: YugabyteDB
2024.2's heuristic costs (no cost-based optimizer unless yb_enable_cbo is set) prefer an index
condition on the key to a scan of the table, which PostgreSQL's costs do not on a table of a
few pages; a statement with no index path still gets its Seq Scan. A hashed table (hash
sharding, or `none` on YugabyteDB, whose default primary key hashes its first column: the
stand-in's is a btree) is reached by the key only through an equality (`k = ...`, `k =
ANY(...)`): an index condition of ranges alone reads every tablet there, so it counts as
whole (`hashed`). What it cannot stand for:
YugabyteDB's own costs, and whether a condition is pushed down to DocDB (the first paid run's
EXPLAIN shows it).
"""

from __future__ import annotations

import re
from contextlib import contextmanager

READS = re.compile(r"^\s*(select|delete|update|with)\b", re.IGNORECASE)
SETTINGS = "SET enable_bitmapscan = off;\nSET enable_seqscan = off;\n"


def scans_whole(plan: str, table: str, hashed: bool = False) -> bool:
    """Whether an EXPLAIN (COSTS OFF) plan reads `table` whole: a Seq Scan of it; a Bitmap Heap
    Scan of it (with both scans disabled PostgreSQL still picks the cheaper of the two, and
    YugabyteDB 2024.2, without bitmap scans, runs such a statement as a Seq Scan); an Index
    (Only) Scan of it without an Index Cond (its node's detail lines, indented deeper); on a
    `hashed` table, one whose Index Cond has no equality on k."""
    lines = plan.splitlines()
    for i, line in enumerate(lines):
        node = re.search(rf"(Seq Scan|Bitmap Heap Scan|Index Scan|Index Only Scan)( Backward)?"
                         rf"( using \w+)? on {table}\b", line)  # fmt: skip
        if not node:
            continue
        if node.group(1) in ("Seq Scan", "Bitmap Heap Scan"):
            return True
        depth = len(line) - len(line.lstrip(" ->"))
        details = []
        for more in lines[i + 1 :]:
            if len(more) - len(more.lstrip(" ")) <= depth or more.lstrip().startswith("->"):
                break
            details.append(more.strip())
        conditions = [d for d in details if d.startswith("Index Cond:")]
        if not conditions:
            return True
        if hashed and not any(re.search(r"\bk = ", c) for c in conditions):
            return True
    return False


def statements(sql: str) -> list[str]:
    """The statements of a script the code sends (each ends with `;` and a new line)."""
    return [s.strip() for s in sql.split(";\n") if s.strip()]


# The loopback stand-in tservers' PostgreSQL (tests/loopback.py): planned as SETTINGS plan, and
# every statement's plan written to the server's log as it runs (auto_explain), maintenance and
# measured statements alike.
STAND_IN = {
    "enable_bitmapscan": "off",
    "enable_seqscan": "off",
    "session_preload_libraries": "auto_explain",
    "auto_explain.log_min_duration": "0",
}
_LOGGED = re.compile(r"LOG:  duration: [0-9.]+ ms  plan:$")


def logged_whole_scans(log: str, table: str = "kv", hashed: bool = False) -> list[str]:
    """The plans in a server log (auto_explain's `duration: ... plan:` entries, each followed by
    its tab-indented lines) that read `table` whole (`scans_whole`): a Seq Scan or a Bitmap
    Heap Scan of it, an index scan of it with no Index Cond (every entry: PostgreSQL takes the
    whole index with seqscan off, YugabyteDB reads every tablet), and on a `hashed` table one
    without an equality on k (a range of a hashed key reads every tablet). One pass over the
    lines (a rehearsal's log holds a plan per measured transaction)."""
    whole = re.compile(rf"(Seq Scan|Bitmap Heap Scan) on {table}\b")
    found, entry = [], None
    for line in log.splitlines():
        if _LOGGED.search(line):
            entry = []
        elif entry is not None and (line.startswith("\t") or not line[:1].isdigit()):
            entry.append(line)  # the plan's lines, or a query text's own next lines
            continue
        else:
            entry = None
            continue
        found.append(entry)

    def reads_whole(entry: list[str]) -> bool:
        if any(whole.search(line) for line in entry):
            return True
        plan = "\n".join(line.removeprefix("\t") for line in entry)
        return scans_whole(plan, table, hashed=hashed)

    return ["\n".join(e).strip() for e in found if reads_whole(e)]


def explain(runner, endpoint, statement: str, env=None, timeout: float = 60) -> str:
    """The plan of `statement` (EXPLAIN (COSTS OFF), SETTINGS), not run."""
    return runner.psql(endpoint, f"{SETTINGS}EXPLAIN (COSTS OFF) {statement};\n", env or {},
                       timeout)  # fmt: skip


class Explaining:
    """A Runner that EXPLAINs what it runs while `checking` (bitmap scans off)."""

    def __init__(self, runner, table: str = "kv", hashed: bool = False):
        self.runner = runner
        self.table = table
        self.hashed = hashed  # its key hashed on YugabyteDB: equalities only (`scans_whole`)
        self.on = False
        self.explained: list[tuple[str, str]] = []  # (statement, plan)
        self.whole: list[tuple[str, str]] = []  # the plans that scan the table whole

    def __getattr__(self, name):
        return getattr(self.runner, name)

    @contextmanager
    def checking(self):
        self.on = True
        try:
            yield self
        finally:
            self.on = False

    def psql(self, endpoint, sql, env, timeout):
        if self.on:
            for statement in statements(sql):
                if not READS.match(statement) or not re.search(rf"\b{self.table}\b", statement):
                    continue
                plan = explain(self.runner, endpoint, statement, env, timeout)
                self.explained.append((statement, plan))
                if scans_whole(plan, self.table, self.hashed):
                    self.whole.append((statement, plan))
        return self.runner.psql(endpoint, sql, env, timeout)
