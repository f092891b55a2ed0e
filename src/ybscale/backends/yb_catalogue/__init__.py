"""What each supported YugabyteDB release series defines that ybscale uses, read from its source.

One JSON file per series (``<series>.json``): the YSQL views and functions the code queries (their
columns, argument and result types) and the yb-tserver / yb-master flags the code and the infra
set, each with the release tag and the source paths (and commits) it was read from, and the
yb-tserver flag names ``server.*`` knobs are checked against. ``regenerate.py`` rebuilds a file
from a yugabyte-db checkout at the tag; ``stubs.stub_sql`` (its own module, which reads
the catalogue through `load`) turns one into stand-ins a plain PostgreSQL server can carry (tests).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

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


def ysql_settings(series: str) -> frozenset[str]:
    """YSQL (PostgreSQL) setting names of `series`."""
    return frozenset(load(series)["ysql_setting_names"])


def split_server_settings(server: Mapping[str, str], series: str) -> tuple[dict, dict]:
    """server.* knobs -> (yb-tserver flags, YSQL settings for --ysql_pg_conf_csv): a name on the
    series' yb-tserver flag list is a flag, any other name a YSQL setting."""
    flags = tserver_flags(series)
    return (
        {k: v for k, v in sorted(server.items()) if k in flags},
        {k: v for k, v in sorted(server.items()) if k not in flags},
    )


def server_setting_errors(server: Mapping[str, Mapping[str, str]], release: str) -> list[str]:
    """One line per server.* name that is neither a yb-tserver flag nor a YSQL setting of the
    release's series (yb-tserver exits on an unknown flag, YSQL on an unknown setting).
    server: name -> {value: where it came from}; release: gcp.yugabyte.version."""
    if not server:
        return []
    series = series_of(release) or "(none)"
    if series not in SUPPORTED:
        return [
            f"{source_of('gcp.yugabyte.version')}: {release}: server.* knobs cannot be "
            f"checked: no catalogue for series {series} (supported: {', '.join(SUPPORTED)})"
        ]
    known = tserver_flags(series) | ysql_settings(series)
    return [
        f"{next(iter(values.values()))}: server.{name}: neither a yb-tserver flag nor a YSQL "
        f"setting of YugabyteDB {series} (src/ybscale/backends/yb_catalogue/{series}.json)"
        for name, values in sorted(server.items())
        if name not in known
    ]
