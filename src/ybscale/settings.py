"""The one settings loader: config validated against the package's schemas, defaults filled once.

Every default lives in a schema (``ybscale/schemas/*.schema.yaml``); nothing else in the package
falls back to a value of its own. ``load(config)`` returns the config with every default filled
in and the active backend's section validated, frozen (`Frozen`: a change is a new mapping,
``{**settings, key: value}``); errors name the file (or ``--config``) that gave the field's value
(`ybscale.config_sources`) and the field.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path

from ybscale.config_sources import read_yaml, source_of
from ybscale.errors import UserError
from ybscale.files import write_whole
from ybscale.validation import explained, schema_errors


class SettingsError(UserError):
    """An invalid config; one line per problem, each naming the file and the field."""


def _read_only(self, *args, **kwargs):
    raise TypeError("settings are read-only once loaded: build a new one ({**settings, key: v})")


class Frozen(dict):
    """Loaded settings: a dict (JSON, repr and Snakemake params see a dict) that cannot change."""

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self):  # pickle would fill it item by item: build it whole
        return (Frozen, (dict(self),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class FrozenList(list):
    """A list inside loaded settings (e.g. measurement.clients) that cannot change."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only

    def __reduce__(self):
        return (FrozenList, (list(self),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def freeze(data: object) -> object:
    """`data` with every dict and list, however deep, made read-only."""
    if isinstance(data, Mapping):
        return Frozen({key: freeze(value) for key, value in data.items()})
    if isinstance(data, list | tuple):
        return FrozenList(freeze(value) for value in data)
    return data


def thaw(data: object) -> object:
    """Plain, mutable dicts and lists again (for YAML, or to edit a copy)."""
    if isinstance(data, Mapping):
        return {key: thaw(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [thaw(value) for value in data]
    return data


@cache
def schema(name: str) -> dict:
    """The schema ``<name>.schema.yaml`` shipped with the package (read once; do not modify)."""
    text = resources.files("ybscale").joinpath("schemas", f"{name}.schema.yaml").read_text()
    return read_yaml(text)


def fill_defaults(schema_: Mapping, data: object) -> object:
    """Fill every property's ``default`` into `data`, recursively (objects are created; the
    items of a list by the schema's ``items``)."""
    if isinstance(data, list) and isinstance(schema_.get("items"), Mapping):
        return [fill_defaults(schema_["items"], item) for item in data]
    if not isinstance(data, dict):
        return data
    props = schema_.get("properties", {})
    for key, sub in props.items():
        if key not in data and "default" in sub:
            data[key] = copy.deepcopy(sub["default"])
        elif key not in data and sub.get("type") == "object" and "properties" in sub:
            data[key] = {}
        if key in data:
            data[key] = fill_defaults(sub, data[key])
    extra = schema_.get("additionalProperties")
    if isinstance(extra, Mapping):
        for key in data:
            if key not in props:
                data[key] = fill_defaults(extra, data[key])
    return data


def validated(data: Mapping, name: str, prefix: str = "", source: str | None = None) -> dict:
    """`data` checked against schema `name`, defaults filled; SettingsError naming each field and
    the file it came from (`source`, by default the config layer that set it: `source_of`)."""
    schema_ = schema(name)
    data = thaw(dict(data or {}))
    errors = schema_errors(schema_, data)
    if errors:
        lines = []
        for err in errors:
            where = ".".join([p for p in [prefix] if p] + [str(p) for p in err.absolute_path])
            where = where or "<top level>"
            lines.append(f"{source}: {where}" if source else source_of(where))
            lines[-1] += f": {explained(err)}"
        raise SettingsError("\n".join(lines))
    return fill_defaults(schema_, data)


def section(config: Mapping, name: str) -> dict:
    """A backend's validated section (`<name>.schema.yaml`), defaults filled (mutable: a step
    of load)."""
    return validated(config.get(name) or {}, name, prefix=name)


EXTEND_FACTOR = 4  # measurement.max_clients: null means this many times the grid's largest


def measurement_section(measurement: dict) -> dict:
    """`measurement` with max_clients derived (EXTEND_FACTOR x the largest count when null) and
    checked against the grid."""
    largest = max(measurement["clients"])
    if (
        measurement["sweep"] == "economy"
        and measurement["probe_seconds"] <= measurement["skip_seconds"]
    ):
        raise SettingsError(
            f"{source_of('measurement.probe_seconds')}: {measurement['probe_seconds']} leaves no "
            f"second to count after measurement.skip_seconds ({measurement['skip_seconds']}): "
            "a probe must be longer than the seconds it skips"
        )
    if measurement["max_clients"] is None:
        return {**measurement, "max_clients": EXTEND_FACTOR * largest}
    if measurement["max_clients"] < largest:
        raise SettingsError(
            f"{source_of('measurement.max_clients')}: {measurement['max_clients']} is below "
            f"the largest of measurement.clients ({largest})"
        )
    return measurement


def load(config: Mapping) -> Frozen:
    """The whole config, validated, every default filled, the active backend's section too;
    read-only."""
    from ybscale.registry import backend_class

    out = validated(config, "config")
    out["measurement"] = measurement_section(out["measurement"])
    analysis = out["analysis"]
    if analysis["ceiling"] == "latency_bound" and analysis["latency_slo_ms"] is None:
        raise SettingsError(
            f"{source_of('analysis.latency_slo_ms')}: required with analysis.ceiling: "
            f"latency_bound ({source_of('analysis.ceiling')}; the p95 latency target in ms)"
        )
    from ybscale.relevant import RelevantError, parse_relevant

    try:
        parse_relevant(analysis["relevant"])
    except RelevantError as exc:
        reason = str(exc).split(": ", 1)[1]
        raise SettingsError(f"{source_of('analysis.relevant')}: {reason}") from None
    load = analysis["latency_load"]
    if "latency" in analysis["responses"] and "clients" in load:
        if load["clients"] not in out["measurement"]["clients"]:
            raise SettingsError(
                f"{source_of('analysis.latency_load')}.clients: {load['clients']} is not one of "
                f"measurement.clients {list(out['measurement']['clients'])} (every row must "
                "measure the latency response's reference load)"
            )
    backend = backend_class(out["backend"])
    own = backend.section(out)  # the active backend's section, when it has one of its own
    if own is not None:
        out[backend.name] = own
    return freeze(out)


SETTINGS_FILES = ".snakemake/ybscale/settings"


def write_file(settings: Mapping, folder: str | Path = SETTINGS_FILES) -> str:
    """The loaded settings as a JSON file named by its content, for the jobs that read them (a
    run with other settings writes a file of its own, never this one); its path."""
    plain = thaw(settings)
    bad = _not_json_keys(plain)
    if bad:  # the jobs would read it back as a string: other settings than the workflow's
        raise SettingsError(f"{bad}: a key that is not a string (the jobs read settings as JSON)")
    text = json.dumps(plain, indent=1, sort_keys=True) + "\n"
    path = Path(folder) / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        write_whole(path, text)
    return str(path)


def _not_json_keys(data: object, where: str = "settings") -> str | None:
    """Where the first key that is not a string is (JSON would make it one), or None."""
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                return f"{where}: {key!r}"
            if found := _not_json_keys(value, f"{where}.{key}"):
                return found
    if isinstance(data, list):
        for i, value in enumerate(data):
            if found := _not_json_keys(value, f"{where}[{i}]"):
                return found
    return None


def read_file(path: str | Path) -> Frozen:
    """Settings `write_file` wrote: loaded already, read-only."""
    return freeze(json.loads(Path(path).read_text()))
