"""What each supported YugabyteDB release series defines that ybscale uses, read from its source.

One JSON file per series (``<series>.json``): the YSQL views and functions the code queries (their
columns, argument and result types) and the yb-tserver / yb-master flags the code and the infra
set, each with the release tag and the source paths (and commits) it was read from, and the
yb-tserver flag names ``server.*`` knobs are checked against. ``regenerate.py`` rebuilds a file
from a yugabyte-db checkout at the tag; ``stubs.stub_sql`` turns one into stand-ins a plain
PostgreSQL server can carry (tests).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

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


# stand-ins for tests (imported last: stubs reads the catalogue through `load`)
from ybscale.backends.yb_catalogue.stubs import stub_sql, tablets_sql  # noqa: E402

__all__ = [
    "SUPPORTED",
    "UnknownSeries",
    "columns",
    "load",
    "series_of",
    "stub_sql",
    "tablets_sql",
    "tserver_flags",
]
