"""One resolved design row: every knob's value, from the design's factors and the defaults.

``resolve_rows(design, config)`` checks every level and default (file and field named in the
error) and returns one ``Row`` per run. Backends, the plan and the measuring code read rows,
never factor names. Backend-specific checks (size tables, server catalogues) are the backend's
``check_rows``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ybscale.config_sources import CONFIG_SOURCE, source_of
from ybscale.design import knobs, workload
from ybscale.errors import UserError


class RowError(UserError):
    """Levels or defaults no row can run with; one line per problem, each naming file and field."""


@dataclass(frozen=True)
class ClusterShape:
    """What needs a cluster of its own: size, shape and replication."""

    nodes: int
    node_size: str
    replication: bool


@dataclass(frozen=True)
class Row:
    """Everything a backend needs to run one design row."""

    run: str
    cluster: ClusterShape
    server: dict[str, str]  # server setting -> value, applied when the cluster starts
    session: dict[str, str]  # session setting -> value, applied to every benchmark session
    script: str  # workload script name (workloads/<script>.sql)
    script_path: str
    variables: dict[str, str]  # pgbench -D variables the script uses
    dataset_rows: int
    read_only: bool  # the script changes nothing: it may run on replicas
    levels: dict[str, object] = field(default_factory=dict)  # factor name -> level label
    sources: dict[str, str] = field(default_factory=dict)  # knob -> "file: field" it came from
    replicate: int = 1  # which replicate of its design row (1 .. design.replications)
    dataset_value_bytes: int = workload.VALUE_BYTES  # each loaded row's value (dataset.value_bytes)

    @property
    def kind(self) -> str:
        """``read`` for a read-only script, else ``write``."""
        return "read" if self.read_only else "write"

    @property
    def isolation(self) -> str:
        """The isolation level of the row's sessions, as PostgreSQL spells it."""
        return self.session.get(knobs.ISOLATION, "read committed")

    @property
    def combination(self) -> str:
        """The infrastructure combination: rows with equal keys share a cluster."""
        return combination_key(self.cluster, self.server)

    def source(self, knob: str) -> str:
        """Where a knob's value came from (``config/design.yaml: factors.C.levels[1]``)."""
        return self.sources.get(knob) or source_of(f"defaults.{knob}")

    def to_dict(self) -> dict:
        """Plain JSON (measurement.json)."""
        return asdict(self)

    def params(self) -> dict:
        """What the measuring rule depends on: everything but where the values came from, so a
        combined design (fold-over) that keeps a row's knobs reuses its measurement. The
        replicate only when it is not the first (a backend may give it a cluster of its own), the
        value size only when it is not the default (rows measured before the knob keep theirs)."""
        data = self.to_dict()
        del data["sources"]
        if data["replicate"] == 1:
            del data["replicate"]
        if data["dataset_value_bytes"] == workload.VALUE_BYTES:
            del data["dataset_value_bytes"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> Row:
        return cls(**{**data, "cluster": ClusterShape(**data["cluster"])})


def combination_key(cluster: ClusterShape, server: Mapping[str, str]) -> str:
    """``nodes3-small-reploff`` plus each server setting (lower case, words joined by dashes);
    a backend whose names are limited cuts it (gcp: `backends.gcp.names`)."""
    parts = [
        f"nodes{cluster.nodes}",
        cluster.node_size,
        "replon" if cluster.replication else "reploff",
    ]
    parts += [f"{name}-{value}" for name, value in sorted(server.items())]
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


# --------------------------------------------------------------------------- resolution


def _where_default(kind: str, name: str) -> str:
    return source_of(f"defaults.{kind}.{name}")


def _convert(knob: str, value: object) -> object:
    """A knob's value in its own type; ValueError saying what is wrong."""
    kind, name = knobs.parse(knob)
    if knob in knobs.COUNTS:
        return knobs.positive_int(value)
    if knob == "dataset.value_bytes":
        size = knobs.positive_int(value)
        if size > workload.MAX_VALUE_BYTES:
            raise ValueError(
                f"{size} bytes per value is above the largest, {workload.MAX_VALUE_BYTES} (1 MiB)"
            )
        return size
    if knob in knobs.WORKLOAD_COUNTS:  # a pgbench -D value, a count all the same
        return str(knobs.positive_int(value))
    if knob == knobs.DISTRIBUTION:  # a pgbench -D value: 0 or random_zipfian's parameter
        return knobs.distribution_parameter(value)
    if knob == "cluster.replication":
        return knobs.on_off(value)
    if knob == "cluster.node_size" or knob == "workload.script":
        if not isinstance(value, str) or not value:
            raise ValueError(f"{value!r} is not a name")
        return value
    if kind in ("server", "session"):
        if isinstance(value, (list, dict)) or value is None:
            raise ValueError(f"{value!r} is not a setting value")
        if knob == f"session.{knobs.ISOLATION}":
            level = knobs.isolation_text(value)
            if level not in knobs.ISOLATION_LEVELS:
                raise ValueError(
                    f"{value!r} is not an isolation level "
                    f"({', '.join(knobs.ISOLATION_LEVELS)}, or snapshot)"
                )
            return level
        return knobs.setting_text(value)
    # workload.<var>: a pgbench -D value
    if isinstance(value, (bool, list, dict)) or value is None:
        raise ValueError(f"{value!r} is not a pgbench variable value (a number or a word)")
    return str(value)


def _knob_values(design, defaults: Mapping) -> tuple[dict, dict, list[str]]:
    """(knob -> default value, factor letter -> (knob, converted levels), errors)."""
    errors: list[str] = []
    base: dict[str, object] = {}
    for kind in knobs.KINDS:
        for name, value in (defaults.get(kind) or {}).items():
            knob, where = f"{kind}.{name}", _where_default(kind, name)
            try:
                knobs.parse(knob)
                base[knob] = _convert(knob, value)
            except ValueError as exc:
                errors.append(f"{where}: {exc}")
    # the read script's key distribution, uniform unless a default or a factor says otherwise
    base.setdefault(knobs.DISTRIBUTION, knobs.distribution_parameter("uniform"))
    by_factor = {}
    for f in design.factors:
        if f.fold:  # analysed, never applied
            continue
        try:
            knob = f.knob
        except knobs.KnobError as exc:
            errors.append(f"{design.source}: factors.{f.letter}.name: {exc}")
            continue
        converted = []
        for i, value in enumerate(f.levels):
            try:
                converted.append(_convert(knob, value))
            except ValueError as exc:
                errors.append(f"{design.source}: factors.{f.letter}.levels[{i}]: {knob}: {exc}")
        by_factor[f.letter] = (knob, converted)
    for knob in ("cluster.nodes", "cluster.node_size", "cluster.replication", "workload.script"):
        if knob not in base and knob not in {k for k, _ in by_factor.values()}:
            kind, name = knob.split(".")
            errors.append(f"{_where_default(kind, name)}: missing (no factor sets {knob})")
    if "dataset.rows" not in base and "dataset.rows" not in {k for k, _ in by_factor.values()}:
        errors.append(f"{_where_default('dataset', 'rows')}: missing (no factor sets it)")
    return base, by_factor, errors


def _check_scripts(design, by_factor: Mapping, base: Mapping, workloads_dir: Path) -> list[str]:
    """Every script exists and gets every variable it uses; every variable a factor sets is used
    by a script of the design (with the script a factor too, the rows of a script that does not
    read it run alike at both levels: the factor's effect there is zero, an interaction)."""
    errors = []
    script_knob = [(letter, lv) for letter, (k, lv) in by_factor.items() if k == "workload.script"]
    if script_knob:
        letter, names = script_knob[0]
        where = [f"{design.source}: factors.{letter}.levels[{i}]" for i in range(len(names))]
    else:
        names, where = [base.get("workload.script")], [_where_default("workload", "script")]
    factor_vars = {
        k.split(".", 1)[1]: letter
        for letter, (k, _) in by_factor.items()
        if k.startswith("workload.") and k != "workload.script"
    }
    default_vars = {k.split(".", 1)[1] for k in base if k.startswith("workload.")} - {"script"}
    paths, used_by_some = [], set()
    for name, field_where in zip(names, where, strict=True):
        if name is None:
            continue
        path = workload.script_path(workloads_dir, name)
        if not path.is_file():
            have = ", ".join(workload.available(workloads_dir)) or "none"
            errors.append(f"{field_where}: workload.script: no script {path} (scripts: {have})")
            continue
        used = workload.variables_used(path.read_text())
        paths.append(str(path))
        used_by_some |= used
        provided = (
            set(workload.HARNESS_VARIABLES)
            | set(workload.DATASET_VARIABLES)
            | set(factor_vars)
            | default_vars
        )
        for var in sorted(used - provided):
            errors.append(
                f"{path}: uses :{var}, which no factor and no default "
                f"({CONFIG_SOURCE}: defaults.workload.{var}) sets"
            )
        clash = used & set(factor_vars) & set(workload.HARNESS_VARIABLES)
        errors += [f"{path}: :{var} is set by the harness" for var in sorted(clash)]
    for var, letter in sorted(factor_vars.items()):
        if paths and var not in used_by_some:
            errors.append(
                f"{design.source}: factors.{letter}.sets: workload.{var}: no script of the "
                f"design uses :{var} ({', '.join(paths)})"
            )
    return errors


def resolve_rows(design, config: Mapping) -> list[Row]:
    """One Row per run of the design (`config` as settings.load returns it); RowError listing
    every bad level or default."""
    defaults = config["defaults"]
    workloads_dir = Path(config["workloads"])
    base, by_factor, errors = _knob_values(design, defaults)
    if not errors:
        errors += _check_scripts(design, by_factor, base, workloads_dir)
    if errors:
        raise RowError("\n".join(errors))
    middles = {}  # letter -> its middle in the knob's own type (centre runs)
    for letter, middle in design.center_levels.items():
        try:
            middles[letter] = _convert(by_factor[letter][0], middle)
        except ValueError as exc:
            errors.append(f"{design.source}: center_points: factors.{letter}: {exc}")
    if errors:
        raise RowError("\n".join(errors))
    rows = []
    for run in design.all_run_ids:
        signs = design.signs(run)
        values, sources, labels = dict(base), {}, {}
        for f in design.factors:
            if f.fold:
                continue
            knob, converted = by_factor[f.letter]
            if signs[f.letter] == 0:  # a centre run: the middle of the two levels
                values[knob] = middles[f.letter]
                sources[knob] = f"{design.source}: center_points (factors.{f.letter}'s middle)"
                labels[f.name] = design.center_levels[f.letter]
                continue
            index = 0 if signs[f.letter] < 0 else 1
            values[knob] = converted[index]
            sources[knob] = f"{design.source}: factors.{f.letter}.levels[{index}]"
            labels[f.name] = f.levels[index]
        replicate = design.replicate(run)
        rows.append(_row(run, replicate, values, sources, labels, workloads_dir, by_factor))
    return rows


def _row(run, replicate, values, sources, labels, workloads_dir, by_factor) -> Row:
    def of(kind: str) -> dict[str, str]:
        return {
            k.split(".", 1)[1]: v for k, v in sorted(values.items()) if k.startswith(kind + ".")
        }

    script = values["workload.script"]
    path = workload.script_path(workloads_dir, script)
    text = path.read_text()
    used = workload.variables_used(text)
    variables = {k: v for k, v in of("workload").items() if k != "script" and k in used}
    value_bytes = values.get("dataset.value_bytes", workload.VALUE_BYTES)
    if "value_bytes" in used:
        variables["value_bytes"] = str(value_bytes)
    return Row(
        run=run,
        cluster=ClusterShape(
            nodes=values["cluster.nodes"],
            node_size=values["cluster.node_size"],
            replication=values["cluster.replication"],
        ),
        server=of("server"),
        session=of("session"),
        script=script,
        script_path=str(path),
        variables=variables,
        dataset_rows=values["dataset.rows"],
        dataset_value_bytes=value_bytes,
        read_only=workload.read_only(text),
        levels=dict(sorted(labels.items())),
        sources=sources,
        replicate=replicate,
    )
