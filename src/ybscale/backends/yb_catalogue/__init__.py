"""What each supported YugabyteDB release series defines that ybscale uses, read from its source.

One JSON file per series (``<series>.json``): the YSQL views and functions the code queries (their
columns, argument and result types) and the yb-tserver / yb-master flags the code and the infra
set, each with the release tag and the source paths (and commits) it was read from, and the
names ``server.*`` knobs are checked against and routed by: the yb-master flags, the yb-tserver
flags and the YSQL settings of the release's PostgreSQL base (with YugabyteDB's own ``yb_*``).
``regenerate.py`` rebuilds a file from a yugabyte-db checkout at the tag; ``stubs.stub_sql`` (its
own module, which reads the catalogue through `load`) turns one into stand-ins a plain PostgreSQL
server can carry (tests).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from ybscale.backends.yb_catalogue import pgconf
from ybscale.backends.yb_catalogue.gflags import flag_text
from ybscale.config_sources import source_of

HERE = Path(__file__).resolve().parent
SUPPORTED = ("2024.2", "2026.1")  # the pinned series, the current stable series
_SERIES = re.compile(r"(?:-YB-|^)(\d+\.\d+)\.\d+")


class UnknownSeries(ValueError):
    """A YugabyteDB release series without a vendored catalogue."""


@cache
def load(series: str) -> dict:
    """The catalogue of `series` (e.g. "2024.2"); UnknownSeries names the supported ones."""
    if series not in SUPPORTED:
        raise UnknownSeries(
            f"no YugabyteDB catalogue for series {series!r}; supported: {', '.join(SUPPORTED)} "
            f"(src/ybscale/backends/yb_catalogue/)"
        )
    return json.loads((HERE / f"{series}.json").read_text())


def series_of(version: str) -> str | None:
    """The release series in a server's version() (`PostgreSQL 11.2-YB-2024.2.1.0-b0 ...`) or in a
    release name (`2024.2.1.0-b185`); None when it names none."""
    match = _SERIES.search(version.strip())
    return match[1] if match else None


def columns(series: str, name: str) -> list[str]:
    """Column names of view `name` (or the OUT columns of function `name`) in `series`; [] when
    the series has no such object."""
    obj = load(series)["objects"].get(name)
    return [column for column, _ in obj.get("columns", [])] if obj else []


def tserver_flags(series: str) -> frozenset[str]:
    """yb-tserver flag names of `series`."""
    return frozenset(load(series)["tserver_flag_names"])


def master_flags(series: str) -> frozenset[str]:
    """yb-master flag names of `series`."""
    return frozenset(load(series)["master_flag_names"])


def ysql_settings(series: str) -> frozenset[str]:
    """YSQL (PostgreSQL) setting names of `series` a configuration file can set, as the
    catalogue spells them and in lower case: PostgreSQL reads setting names without regard to
    case (guc.c, `guc_name_compare`), so `datestyle` is `DateStyle`."""
    names = load(series)["ysql_setting_names"]
    return frozenset(names) | {n.lower() for n in names}


def ysql_settings_not_settable(series: str) -> frozenset[str]:
    """YSQL setting names of `series` no configuration file can set (internal, read-only), in
    either case as `ysql_settings`."""
    names = load(series).get("ysql_setting_names_not_settable", ())
    return frozenset(names) | {n.lower() for n in names}


def not_in_pinned_build(series: str) -> dict[str, dict]:
    """Names of later patches of `series` than its catalogue's build (the documentation's
    "Available in vX.Y.Z or later"): name -> {"reason": ..., where it was read}."""
    return load(series).get("not_in_pinned_build", {})


def ysql_setting_type(series: str, name: str) -> dict | None:
    """The GUC table entry of YSQL setting `name` in `series` (type; an integer's min, max and
    unit; a real's min and max; an enum's options), its name read without regard to case as
    `ysql_settings`; None when the catalogue does not record it."""
    types = load(series).get("ysql_setting_types", {})
    if name in types:
        return types[name]
    folded = {n.lower(): entry for n, entry in types.items()}
    return folded.get(name.lower())


def misnamed_in_docs(series: str) -> dict[str, dict]:
    """Flag names the series' documentation gives that its source defines under another name:
    the docs' name -> {"defined_as": the source's, "reason": ..., where it was read}."""
    return load(series).get("misnamed_in_docs", {})


def flag_type(series: str, name: str) -> str | None:
    """The C++ type of yb-master / yb-tserver flag `name` in `series` (`gflags.TYPES`), None
    when the catalogue does not record it."""
    entry = load(series).get("flag_types", {}).get(name)
    return entry["type"] if entry else None


def split_server_settings(server: Mapping[str, str], series: str) -> tuple[dict, dict, dict]:
    """server.* knobs -> (yb-master flags, yb-tserver flags, YSQL settings for
    --ysql_pg_conf_csv): a name is a flag of each server whose flag list has it (a flag of both
    goes to both), any other name a YSQL setting. A flag's value is written as gflags takes
    its type (`gflags.flag_text`: a boolean as true/false, PostgreSQL's on/off included);
    ValueError for a value its type refuses (`server_setting_errors` said so at dry run)."""
    master, tserver = master_flags(series), tserver_flags(series)
    items = sorted(server.items())
    flags = {k: flag_text(v, flag_type(series, k)) for k, v in items if k in master | tserver}
    return (
        {k: flags[k] for k, _ in items if k in master},
        {k: flags[k] for k, _ in items if k in tserver},
        {k: v for k, v in items if k not in master and k not in tserver},
    )


def server_setting_errors(server: Mapping[str, Mapping[str, str]], release: str) -> list[str]:
    """One line per server.* name that is neither a yb-master or yb-tserver flag nor a YSQL
    setting of the release's series (a server exits on an unknown flag, YSQL on an unknown
    setting; a name only a later patch of the series has says so, with the reason the catalogue
    gives), or that is a YSQL setting no configuration file can set, and per flag value its
    type refuses as gflags reads it (a server exits on it too; `gflags.flag_text`), and per
    YSQL setting value its GUC table entry refuses as PostgreSQL reads ysql_pg.conf (YSQL does
    not start; `pgconf.value_error`, `ysql_setting_type`).
    server: name -> {value: where it came from}; release: gcp.yugabyte.version."""
    if not server:
        return []
    series = series_of(release) or "(none)"
    if series not in SUPPORTED:
        return [
            f"{source_of('gcp.yugabyte.version')}: {release}: server.* knobs cannot be "
            f"checked: no catalogue for series {series} (supported: {', '.join(SUPPORTED)})"
        ]
    known = master_flags(series) | tserver_flags(series) | ysql_settings(series)
    fixed = ysql_settings_not_settable(series)
    where = f"YugabyteDB {series} (src/ybscale/backends/yb_catalogue/{series}.json)"
    later = not_in_pinned_build(series)
    renamed = misnamed_in_docs(series)
    errors = []
    for name, values in sorted(server.items()):
        origin = next(iter(values.values()))
        if name in renamed and name not in known:
            errors.append(
                f"{origin}: server.{name}: {renamed[name]['reason']} (not a flag of {where}; "
                f"{', '.join(renamed[name]['documented_in'])})"
            )
        elif name in later and name not in known:
            errors.append(
                f"{origin}: server.{name}: {name}: {later[name]['reason']} (not a "
                f"{later[name].get('kind', 'flag or setting')} of {where}; "
                f"{later[name].get('documented_in', 'the catalogue')})"
            )
        elif name in fixed:
            errors.append(
                f"{origin}: server.{name}: a YSQL setting of {where} that no configuration file "
                "can set (internal or read-only)"
            )
        elif name not in known:
            errors.append(
                f"{origin}: server.{name}: neither a yb-master or yb-tserver flag nor a YSQL "
                f"setting of {where}"
            )
        elif name in master_flags(series) | tserver_flags(series):
            for value, value_origin in values.items():
                try:
                    flag_text(value, flag_type(series, name))
                except ValueError as exc:
                    kind = flag_type(series, name)
                    errors.append(f"{value_origin}: server.{name}: {exc} ({kind} flag of {where})")
        else:  # a YSQL setting: its value as the tserver's PostgreSQL reads ysql_pg.conf
            entry = ysql_setting_type(series, name)
            for value, value_origin in values.items():
                why = pgconf.value_error(str(value), entry)
                if why:
                    errors.append(
                        f"{value_origin}: server.{name}: {why} ({entry['type']} YSQL setting of "
                        f"{where}: PostgreSQL {load(series)['postgres_base']}'s guc.c; YSQL would "
                        "not start)"
                    )
    return errors
