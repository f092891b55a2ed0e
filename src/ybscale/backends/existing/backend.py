"""`existing` backend: measure SQL endpoints you already run (nothing is created or destroyed),
from this machine or from the host `existing.load_generator` names (over SSH).

Caution: the dataset table (`existing.table`, default ybscale_kv) and its sequence
`<table>_new_key` are dropped, re-created and reloaded before client counts. Point it at a
database and table name nothing else uses.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ybscale.backends import ssh
from ybscale.backends.base import Backend, BackendError, Cluster, Endpoint
from ybscale.backends.loadgen import LoadgenRunner, ssh_session
from ybscale.backends.machine_cpu import MachineCpu
from ybscale.backends.ysql import LocalRunner, YsqlCluster, generator_readers, password_env
from ybscale.config_sources import source_of
from ybscale.design.row import Row
from ybscale.settings import section


def validate_section(config: Mapping) -> dict:
    """The `existing:` section, validated, with defaults."""
    return section(config, "existing")


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


def node_hosts(login: Mapping | None, endpoints: Sequence[Endpoint]) -> dict[str, ssh.SshHost]:
    """Each endpoint's host by endpoint name, logged in on with `existing.ssh` (none without)."""
    if not login:
        return {}
    return {
        ep.role: ssh.SshHost(
            host=ep.host,
            user=login["user"],
            key=Path(login["key"]).expanduser(),
            known_hosts=Path(login["known_hosts"]).expanduser(),
            port=int(login["port"]),
            control_path=ssh.control_path(ep.role),
        )
        for ep in endpoints
    }


def load_generator(login: Mapping, tag: str = "") -> ssh.SshHost:
    """The `existing.load_generator` host (or one of `existing.load_generators`), with a
    connection of this process's own."""
    return ssh.SshHost(
        host=login["host"],
        user=login["user"],
        key=Path(login["key"]).expanduser(),
        known_hosts=Path(login["known_hosts"]).expanduser(),
        port=int(login["port"]),
        control_path=ssh.control_path(tag),
    )


def logins(settings: Mapping) -> list[Mapping]:
    """The load generators' SSH logins: `existing.load_generators`, or the one
    `existing.load_generator`; none when pgbench runs on this machine."""
    if settings.get("load_generators"):
        return list(settings["load_generators"])
    return [settings["load_generator"]] if settings.get("load_generator") else []


GROWN = "load_generators.json"  # in a cluster's folder: how many generators `auto` reached


def generator_errors(settings: Mapping, rows: Sequence[Row]) -> list[str]:
    """`existing.load_generators` beside `existing.load_generator`, `auto` without two logins
    to grow through, or more generators than the hosts of a combination a row is measured on
    (each generator drives whole hosts)."""
    errors = []
    if settings.get("load_generators_auto") and len(settings.get("load_generators") or []) < 2:
        errors.append(
            f"{source_of('existing.load_generators_auto')}: existing.load_generators_auto needs "
            f"at least two logins in existing.load_generators to add from (it has "
            f"{len(settings.get('load_generators') or [])}): auto starts with the first and "
            "adds the next while the generators are the bottleneck"
        )
    if settings.get("load_generators") and settings.get("load_generator"):
        errors.append(
            f"{source_of('existing.load_generators')}: existing.load_generators and "
            "existing.load_generator are both set; list every generator in load_generators"
        )
    if any(login is None for login in settings.get("load_generators") or []):
        errors.append(f"{source_of('existing.load_generators')}: an entry is null, not a login")
    k = len(logins(settings))
    for combo in sorted({row.combination for row in rows}):
        entry = settings["combinations"].get(combo)
        if entry and k > len(entry["hosts"]):
            errors.append(
                f"{source_of('existing.load_generators')}: {k} load generators, but "
                f"existing.combinations.{combo} has {len(entry['hosts'])} host(s): each "
                "generator drives whole hosts, at most one generator per host"
            )
    return errors


def check_endpoints(settings: Mapping, rows: Sequence[Row]) -> list[str]:
    """Rows whose combination has no endpoints, or whose server settings differ from the
    settings the combination's endpoints declare (`server:`), one line per problem."""
    combos = settings["combinations"]
    missing: dict[str, list[str]] = {}
    errors = []
    for row in rows:
        entry = combos.get(row.combination)
        if entry is None:
            missing.setdefault(row.combination, []).append(row.run)
        elif dict(entry.get("server") or {}) != row.server:
            errors.append(
                f"{source_of(f'existing.combinations.{row.combination}.server')}: declares "
                f"{dict(entry.get('server') or {})}, its rows need {row.server}"
            )
    errors += [
        f"{source_of('existing.combinations')}.{combo}: no endpoints; "
        f"rows {', '.join(runs)} need them"
        for combo, runs in sorted(missing.items())
    ]
    return sorted(set(errors))


def _endpoint_key(entry: Mapping | None, combination: str) -> str:
    if not entry:
        return combination
    return json.dumps([entry.get("hosts"), entry.get("port"), entry.get("database")])


def _grown_to(path: Path, pool: int) -> int:
    """`auto`'s starting count: what the cluster's earlier rows grew to (1 at first)."""
    try:
        return max(1, min(pool, int(json.loads(path.read_text())["load_generators"])))
    except (OSError, ValueError, KeyError, TypeError):
        return 1


class ExistingBackend(Backend):
    """Clusters you run: pgbench runs here, or on `existing.load_generator`, against the
    configured hosts. Priced by the base rule (`Backend.hourly_price`): no CPU quota is
    known, so analysis.prices.vcpu_hour counts per node."""

    name = "existing"
    modules = (
        "backends/existing/backend.py",
        "backends/ysql.py",
        "backends/ssh.py",
        "backends/machine_cpu.py",
        "backends/loadgen.py",
    )

    def __init__(self, config: Mapping, clusters=None):
        super().__init__(config, clusters)
        self.settings = validate_section(config)

    @classmethod
    def section(cls, config: Mapping) -> dict:
        return validate_section(config)

    @classmethod
    def cluster_labels(cls, settings: Mapping, rows) -> dict[str, str]:
        """Combinations pointing at the same endpoints ran on the same cluster: labelled by
        the first combination that uses them."""
        combos = settings.get(cls.name, {}).get("combinations", {})
        keys = {row.run: _endpoint_key(combos.get(row.combination), row.combination)
                for row in rows}  # fmt: skip
        first: dict[str, str] = {}
        for row in rows:
            first.setdefault(keys[row.run], row.combination)
        return {run: first[key] for run, key in keys.items()}

    def node_sizes(self) -> list[str]:
        """Any name: what a size means is up to the endpoints of each combination."""
        sizes = {key.split("-")[1] for key in self.settings["combinations"] if "-" in key}
        return sorted(sizes) or ["small", "large"]

    def check_rows(self, rows) -> list[str]:
        return check_endpoints(self.settings, rows) + generator_errors(self.settings, rows)

    @classmethod
    def definition(cls, settings: Mapping, rows) -> dict:
        """The endpoints the rows' combination names (`existing.combinations`)."""
        combo = rows[0].combination
        entry = validate_section(settings)["combinations"].get(combo)
        return {"combination": combo, "endpoints": dict(entry) if entry else None}

    def up(self, label: str, definition: Mapping, folder: Path) -> dict:
        """Nothing is started: check that every endpoint answers (SELECT 1) where pgbench
        runs (here, or on each load generator, `auto`'s spares included)."""
        combo, entry = definition["combination"], definition["endpoints"]
        if entry is None:
            raise BackendError(f"{source_of('existing.combinations')}.{combo}: no endpoints")
        problems = []
        with ExistingBackend._runners(self.settings, self.settings["table"], {}) as runners:
            for runner in runners:  # from every place pgbench will run
                for endpoint in endpoints_of(entry):
                    try:
                        runner.psql(endpoint, "SELECT 1", password_env(endpoint), 30)
                    except BackendError as exc:
                        where = f" from {runner.where}" if len(runners) > 1 else ""
                        problems.append(f"{endpoint.host}:{endpoint.port}{where}: {exc}")
        if problems:
            raise BackendError(
                f"{source_of('existing.combinations')}.{combo}: not reachable: "
                + "; ".join(problems)
            )
        (Path(folder) / GROWN).unlink(missing_ok=True)  # `auto` starts again from one
        return {"combination": combo, "endpoints": dict(entry)}

    @contextmanager
    def measure(self, row, endpoints: Mapping, folder: Path) -> Iterator[Cluster]:
        """The row's cluster, driven by every load generator, or with
        `existing.load_generators_auto` by as many as the cluster's earlier rows grew to (the
        first alone at first) and the rest spare for `add_generator`."""
        table = self.settings["table"]
        nodes = endpoints_of(endpoints["endpoints"])
        record = {
            "backend": "existing",
            "combination": row.combination,
            "load_generator_host": None,
        }
        auto = bool(self.settings["load_generators_auto"])
        grown = Path(folder) / GROWN
        with ExistingBackend._runners(self.settings, table, record) as runners:
            start = _grown_to(grown, len(runners)) if auto else len(runners)
            used, spare = runners[:start], runners[start:]
            hosts = node_hosts(self.settings["ssh"], nodes)
            with MachineCpu(generator_readers(used), hosts) as cpu:
                cluster = YsqlCluster(
                    nodes,
                    row,
                    runners[0],
                    table=table,
                    sharding=self.settings["sharding"],
                    record=record,
                    pgbench=self.settings["pgbench"],
                    cpu=cpu,
                    generators=used,
                    loaders=self.settings["loaders"],
                    chunk_rows=self.settings["load_chunk_rows"],
                    web_port=self.settings["tserver_web_port"],
                    spare=spare,
                    auto=auto,
                )
                try:
                    yield cluster
                finally:  # the cluster's next row starts from the grown count
                    if auto and len(cluster.generators) > start:
                        grown.write_text(json.dumps({"load_generators": len(cluster.generators)}))

    @staticmethod
    @contextmanager
    def _runners(settings: Mapping, table: str, record: dict):
        """pgbench and psql here, or on each load generator (`existing.load_generator`, or
        `existing.load_generators`) over one SSH connection each; psql on the first."""
        found = logins(settings)
        if not found:
            yield [LocalRunner(table, settings["psql"])]
            return
        hosts = [load_generator(login, f"lg{i}" if i else "") for i, login in enumerate(found)]
        record["load_generator_host"] = f"{hosts[0].login}:{hosts[0].port}"
        if len(hosts) > 1:
            record["load_generator_hosts"] = [f"{h.login}:{h.port}" for h in hosts]
        with contextlib.ExitStack() as sessions:
            for host in hosts:
                sessions.enter_context(ssh_session(host))
            yield [LoadgenRunner(host, table) for host in hosts]

    def down(self, endpoints: Mapping, folder: Path) -> dict:
        """Nothing to release: the endpoints are yours."""
        return {"nothing": "the endpoints are yours"}
