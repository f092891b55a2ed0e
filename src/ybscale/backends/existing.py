"""`existing` backend: measure SQL endpoints you already run (nothing is created or destroyed).

Also home of what gcp shares: `YsqlCluster`, a Cluster over YSQL/PostgreSQL endpoints driven
through a runner (local or SSH).

Caution: the dataset table (`existing.table`, default ybscale_kv) and its sequence
`<table>_new_key` are created, TRUNCATEd and reloaded before client counts. Point it at a
database and table name nothing else uses.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from ybscale import workload
from ybscale.backends.base import Backend, BackendError, Cluster, Endpoint, Target, spawn_local
from ybscale.row import Row
from ybscale.settings import section

CONFIG_SOURCE = "config/config.yaml"
PSQL_TIMEOUT = 60
LOAD_TIMEOUT = 1800


# --------------------------------------------------------------------------- config sections


def validate_section(config: Mapping) -> dict:
    """The `existing:` section, validated, with defaults."""
    return section(config, "existing")


# --------------------------------------------------------------------------- SQL


def dataset_sql(rows: int, table: str = "kv", sharding: str = "none", tablets: int = 1) -> str:
    """(Re)create the starting dataset: keys 0..rows-1 in `table` (k bigint, v text).

    sharding: none (the database's default primary key), range (YugabyteDB `k ASC`, pre-split into
    `tablets` equal key ranges, so range reads stay index scans), hash (YugabyteDB `k HASH`).
    """
    split = ""
    if sharding == "range":
        pk = "PRIMARY KEY (k ASC)"
        points = [rows * i // tablets for i in range(1, tablets)]
        if points:
            split = " SPLIT AT VALUES (" + ", ".join(f"({p})" for p in points) + ")"
    elif sharding == "hash":
        pk = "PRIMARY KEY (k HASH)"
        split = f" SPLIT INTO {tablets} TABLETS" if tablets > 1 else ""
    elif sharding == "none":
        pk = "PRIMARY KEY (k)"
    else:
        raise ValueError(f"sharding must be none, range or hash, got {sharding!r}")
    return (
        f"CREATE TABLE IF NOT EXISTS {table} (k bigint, v text NOT NULL, {pk}){split};\n"
        f"CREATE SEQUENCE IF NOT EXISTS {table}_new_key;\n"
        f"TRUNCATE {table};\n"
        f"INSERT INTO {table} SELECT k, md5(k::text) FROM generate_series(0, {rows - 1}) AS k;\n"
        f"ANALYZE {table};\n"
    )


def rename_table(sql: str, table: str) -> str:
    """A workload script with the `kv` table (and `kv_new_key`) renamed to `table`."""
    if table == "kv":
        return sql
    sql = re.sub(r"\bkv_new_key\b", f"{table}_new_key", sql)
    return re.sub(r"\bkv\b", table, sql)


ISOLATION_SQL = (
    (
        "yb_get_effective_transaction_isolation_level()",
        "SELECT yb_get_effective_transaction_isolation_level()",
    ),
    ("SHOW transaction_isolation", "SHOW transaction_isolation"),
)


# --------------------------------------------------------------------------- cluster


class Runner(Protocol):
    """Where pgbench and psql run: this machine, or the load generator over SSH."""

    def popen(
        self, argv: Sequence[str], env: Mapping[str, str], timeout: float, cwd: Path
    ) -> subprocess.Popen: ...

    def psql(self, endpoint: Endpoint, sql: str, env: Mapping[str, str], timeout: float) -> str: ...

    def fetch(self, remote: Path, local: Path) -> None: ...


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
    """A running YSQL/PostgreSQL cluster: every endpoint serves the whole key space."""

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
    ):
        if not endpoints:
            raise BackendError("no SQL endpoints")
        self.endpoints = list(endpoints)
        self.row = row
        self.rows = row.dataset_rows
        self.runner = runner
        self.table = table
        self.sharding = sharding
        self.record = dict(record or {})
        self.pgbench = pgbench
        self._loaded = False

    def name(self, endpoint: Endpoint) -> str:
        return f"{endpoint.role} ({endpoint.host}:{endpoint.port})"

    def targets(self, workload_kind: str) -> list[Target]:
        """Every node, each with the full key space (the database shards and replicates)."""
        variables = workload.key_variables(self.rows, 0, 1)
        return [Target(ep, variables) for ep in self.endpoints]

    def run(self, argv, env, timeout, cwd) -> subprocess.Popen:
        return self.runner.popen(argv, env, timeout, Path(cwd))

    def fetch(self, remote: Path, local: Path) -> None:
        self.runner.fetch(Path(remote), Path(local))

    def psql(self, sql: str, endpoint: Endpoint | None = None, env=None, timeout=PSQL_TIMEOUT):
        endpoint = endpoint or self.endpoints[0]
        return self.runner.psql(endpoint, sql, {**password_env(endpoint), **(env or {})}, timeout)

    def reset(self, workload_kind: str) -> None:
        """Reload the dataset; reads leave it unchanged, so it is loaded once for them."""
        if workload_kind == "read" and self._loaded:
            return
        sql = dataset_sql(self.rows, self.table, self.sharding, len(self.endpoints))
        self.psql(sql, timeout=LOAD_TIMEOUT)
        self._loaded = True

    def check(self) -> None:
        failed = []
        for ep in self.endpoints:
            try:
                if self.psql("SELECT 1", ep, timeout=30).strip() != "1":
                    failed.append(f"{self.name(ep)}: unexpected answer")
            except BackendError as exc:
                failed.append(f"{self.name(ep)}: {exc}")
        if failed:
            raise BackendError("nodes not answering SELECT 1:\n" + "\n".join(failed))

    def isolation_in_effect(self, endpoint: Endpoint) -> tuple[str, str]:
        """(level, how it was read) for a session with the row's settings."""
        env = workload.session_env(self.row.session)
        errors = []
        for source, sql in ISOLATION_SQL:
            try:
                return self.psql(sql, endpoint, env=env, timeout=30).strip().lower(), source
            except BackendError as exc:
                errors.append(str(exc))
        raise BackendError(f"{self.name(endpoint)}: cannot read the isolation level: {errors}")

    def applied(self) -> dict:
        """Isolation level read back from every node; BackendError if one differs from the row."""
        wanted = self.row.isolation
        in_effect, sources = {}, set()
        for ep in self.endpoints:
            level, source = self.isolation_in_effect(ep)
            in_effect[self.name(ep)] = level
            sources.add(source)
        wrong = {node: level for node, level in in_effect.items() if level != wanted}
        if wrong:
            raise BackendError(
                f"isolation in effect {wrong} differs from the design's {wanted!r} "
                "(YugabyteDB: is --yb_enable_read_committed_isolation=true set on every tserver?)"
            )
        version = self.psql("SELECT version()", timeout=30).strip()
        return {
            **self.record,
            "isolation_requested": wanted,
            "isolation_in_effect": in_effect,
            "isolation_source": sorted(sources),
            "server_version": version,
            "table": self.table,
            "sharding": self.sharding,
        }


# --------------------------------------------------------------------------- local runner


class LocalRunner:
    """pgbench and psql on this machine; workload scripts get the configured table name."""

    def __init__(self, table: str = "kv", psql: str = "psql"):
        self.table = table
        self.psql_exe = psql

    def _script(self, path: Path, cwd: Path) -> Path:
        if self.table == "kv":
            return path
        out = cwd / f"{path.stem}.{self.table}{path.suffix}"
        out.write_text(rename_table(path.read_text(), self.table))
        return out

    def popen(self, argv, env, timeout, cwd) -> subprocess.Popen:
        argv = list(argv)
        for i, arg in enumerate(argv[:-1]):
            if arg == "-f":
                argv[i + 1] = str(self._script(Path(argv[i + 1]), Path(cwd)))
        return spawn_local(argv, env, cwd)

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

    def fetch(self, remote: Path, local: Path) -> None:
        """Logs are written locally already."""


# --------------------------------------------------------------------------- backend


def endpoints_of(entry: Mapping, role: str = "node") -> list[Endpoint]:
    """Endpoints of one `existing.combinations` entry (hosts may carry their own :port)."""
    out = []
    for i, host in enumerate(entry["hosts"]):
        name, _, port = str(host).partition(":")
        out.append(
            Endpoint(
                host=name,
                port=int(port or entry["port"]),
                dbname=entry["database"],
                user=entry["user"],
                password_env=entry.get("password_env"),
                role=f"{role}{i}",
            )
        )
    return out


def check_endpoints(settings: Mapping, rows: Sequence[Row]) -> list[str]:
    """Rows whose combination has no endpoints, or whose server settings differ from the
    settings the combination's endpoints declare (`server:`), one line per problem."""
    combos = settings["combinations"]
    missing: dict[str, list[str]] = {}
    errors = []
    for row in rows:
        entry = combos.get(row.infra_key)
        if entry is None:
            missing.setdefault(row.infra_key, []).append(row.run)
        elif dict(entry.get("server") or {}) != row.server:
            errors.append(
                f"{CONFIG_SOURCE}: existing.combinations.{row.infra_key}.server: declares "
                f"{dict(entry.get('server') or {})}, its rows need {row.server}"
            )
    errors += [
        f"{CONFIG_SOURCE}: existing.combinations.{combo}: no endpoints; "
        f"rows {', '.join(runs)} need them"
        for combo, runs in sorted(missing.items())
    ]
    return sorted(set(errors))


class ExistingBackend(Backend):
    """Clusters you run: pgbench runs here against the configured hosts."""

    name = "existing"

    def __init__(self, config: Mapping):
        super().__init__(config)
        self.settings = validate_section(config)

    def node_sizes(self) -> list[str]:
        """Any name: what a size means is up to the endpoints of each combination."""
        sizes = {key.split("-")[1] for key in self.settings["combinations"] if "-" in key}
        return sorted(sizes) or ["small", "large"]

    def check_rows(self, rows) -> list[str]:
        return check_endpoints(self.settings, rows)

    @contextmanager
    def cluster(self, row, workdir) -> Iterator[Cluster]:
        combo = row.infra_key
        entry = self.settings["combinations"].get(combo)
        if entry is None:
            raise BackendError(f"{CONFIG_SOURCE}: existing.combinations.{combo}: no endpoints")
        table = self.settings["table"]
        yield YsqlCluster(
            endpoints_of(entry),
            row,
            LocalRunner(table, self.settings["psql"]),
            table=table,
            sharding=self.settings["sharding"],
            record={"backend": "existing", "combination": combo},
            pgbench=self.settings["pgbench"],
        )
