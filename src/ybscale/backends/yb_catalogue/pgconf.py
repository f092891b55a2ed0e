"""A YSQL setting's value as YugabyteDB 2024.2's PostgreSQL 11 takes it from its configuration file.

`--ysql_pg_conf_csv` puts each setting in the tserver's ysql_pg.conf (quoted by PostgreSQL's
rules: infra's `pg_conf_value`), and the server parses the value by the setting's type in its
GUC tables (`yb_catalogue`'s ``ysql_setting_types``), as PostgreSQL 11's guc.c does
(`parse_and_validate_value`); a value it refuses stops YSQL from starting:

- bool (`parse_bool`, src/backend/utils/adt/bool.c): any case, ``true``, ``false``, ``yes``,
  ``no`` or a leading part of one (``t``, ``tr``, ``y``, ``f``, ``n``...), ``on``, ``off``,
  ``1``, ``0``; no white space;
- integer (`parse_int`): ``strtol`` in base 0 (decimal, octal after a leading 0, hexadecimal
  after 0x), within int32, then optionally white space and, for a setting with a unit, a unit
  of its kind (memory: B, kB, MB, GB, TB; time: ms, s, min, h, d; case counts) converted to
  the setting's own unit (dividing truncates), again within int32; no fraction (PostgreSQL 12
  took those); then within the setting's min and max;
- real (`parse_real`): ``strtod`` of the whole value (white space after it allowed), no unit
  (PostgreSQL 12 added them), no overflow or underflow; within min and max;
- enum: one of its options, any case (`config_enum_lookup_by_name`, pg_strcasecmp);
- string: anything (what a setting's check hook refuses, e.g. an unknown time zone, is not
  modelled: the server says so at start, and the rows read every setting back).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ybscale.backends.yb_catalogue.gflags import _strtod

_C_SPACE = " \t\n\v\f\r"
BOOL_WORDS = ("true", "false", "yes", "no")  # a leading part of one is taken
MEMORY_UNITS = {"TB": 1024**4, "GB": 1024**3, "MB": 1024**2, "kB": 1024, "B": 1}
TIME_UNITS = {"d": 86_400_000, "h": 3_600_000, "min": 60_000, "s": 1000, "ms": 1}
# a setting's own unit (ysql_setting_types' "unit") in bytes or milliseconds
BASE_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "8kB": 8192, "8kB-xlog": 8192,
              "ms": 1, "s": 1000, "min": 60_000}  # fmt: skip
INT32 = (-(2**31), 2**31 - 1)
_STRTOL = re.compile(rf"[{_C_SPACE}]*([-+]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def parses_bool(text: str) -> bool:
    """Whether PostgreSQL's parse_bool takes `text`."""
    folded = text.lower()
    if folded in ("1", "0", "on", "off"):
        return True
    return bool(folded) and folded[0] not in "o" and any(w.startswith(folded) for w in BOOL_WORDS)


def _strtol(text: str) -> tuple[int, str] | None:
    """`strtol(text, &end, 0)`: (its value, what follows), None when it reads no digit. A
    0x with no hexadecimal digit after it reads as the 0."""
    match = _STRTOL.match(text)
    if not match:
        return None
    digits = match[2]
    if digits[:2] in ("0x", "0X"):
        value = int(digits, 16)
    elif digits.startswith("0"):
        value = int(digits, 8)
    else:
        value = int(digits)
    return (-value if match[1] == "-" else value), text[match.end() :]


def integer_error(text: str, entry: Mapping) -> str | None:
    """Why PostgreSQL 11's parse_int and range check refuse `text` for an integer setting of
    `entry` (min, max, unit), None when they take it."""
    read = _strtol(text)
    if read is None:
        return f"{text!r} is not an integer (PostgreSQL 11 takes no fraction)"
    value, rest = read
    if not INT32[0] <= value <= INT32[1]:
        return f"{text!r} exceeds the integer range"
    if re.match(r"\.\d", rest):  # strtol stops at the point: what follows is no unit
        return f"{text!r} is not an integer (PostgreSQL 11 takes no fraction)"
    rest = rest.lstrip(_C_SPACE)
    unit = entry.get("unit")
    if rest:
        if unit is None:
            return f"{text!r}: this setting takes no unit"
        given = rest.rstrip(_C_SPACE)
        kinds = MEMORY_UNITS if unit in ("B", "kB", "MB", "8kB", "8kB-xlog") else TIME_UNITS
        if given not in kinds or any(c in _C_SPACE for c in given):
            names = ", ".join(kinds)
            return f"{text!r}: not a unit of this setting (valid units: {names}; case counts)"
        scale, base = kinds[given], BASE_UNITS[unit]
        if scale >= base:
            value = value * scale // base
        else:  # C's integer division: towards zero
            value = (abs(value) // (base // scale)) * (1 if value >= 0 else -1)
        if not INT32[0] <= value <= INT32[1]:
            return f"{text!r} exceeds the integer range once in the setting's unit ({unit})"
    if not entry["min"] <= value <= entry["max"]:
        own = f" {unit}" if unit else ""
        return (
            f"{text!r} ({value:,}{own}) is outside the valid range {entry['min']:,} .. "
            f"{entry['max']:,}{own}"
        )
    return None


def real_error(text: str, entry: Mapping) -> str | None:
    """Why PostgreSQL 11's parse_real and range check refuse `text`, None when they take it."""
    value = _strtod(text.rstrip(_C_SPACE))
    if value is None or not text.strip(_C_SPACE):
        return f"{text!r} is not a number (PostgreSQL 11 takes no unit on a real setting)"
    if not math.isnan(value) and not entry["min"] <= value <= entry["max"]:
        return f"{text!r} is outside the valid range {entry['min']:g} .. {entry['max']:g}"
    return None


def value_error(text: str, entry: Mapping | None) -> str | None:
    """Why YSQL would refuse `text` for a setting of `entry` (a ``ysql_setting_types`` entry;
    None: its type is not recorded, nothing checked), None when it takes it."""
    if entry is None or entry["type"] == "string":
        return None
    if entry["type"] == "bool":
        if parses_bool(text):
            return None
        return (
            f"{text!r} is not a boolean as PostgreSQL reads one (on, off, true, false, yes, no, "
            "1, 0)"
        )
    if entry["type"] == "enum":
        if text.lower() in (o.lower() for o in entry["options"]):
            return None
        return f"{text!r} is not one of {', '.join(o for o in entry['options'] if o)}"
    if entry["type"] == "integer":
        return integer_error(text, entry)
    return real_error(text, entry)
