"""A yb-master / yb-tserver flag's value as gflags reads it from the command line.

YugabyteDB's servers parse `--name=value` with gflags, whose `FlagValue::ParseFrom`
(gflags/gflags src/gflags.cc, commit 04c8ce76) takes, by the flag's C++ type:

- bool: one of 1, t, true, y, yes or 0, f, false, n, no (any case, `strcasecmp`), nothing else:
  `--flag=on` makes the server exit at start;
- string: anything;
- int32, int64: `strtoll`, base 16 after a leading `0x`/`0X` (a leading 0 is *not* octal),
  the whole value consumed, no overflow (`errno`), an int32 within its range;
- uint32, uint64: the same with `strtoull`, after spaces, and refused when it then starts
  with `-`; a uint32 within its range;
- double: `strtod`, the whole value consumed, no overflow or underflow (`errno`);
- an empty value only for a string.

`parses` is that grammar; `flag_text` writes a design's value the way the flag's type takes it
(a boolean as true/false, whatever spelling the design used: PostgreSQL's on/off included).
"""

from __future__ import annotations

import math
import re
import sys

TYPES = ("bool", "int32", "uint32", "int64", "uint64", "double", "string")
TRUE = ("1", "t", "true", "y", "yes")  # gflags.cc, FlagValue::ParseFrom: kTrue
FALSE = ("0", "f", "false", "n", "no")  # kFalse
# PostgreSQL's spelling of a boolean (ybscale's own for YAML booleans, `knobs.setting_text`)
# that no gflags boolean takes: written as true/false for a boolean flag
POSTGRES_ONLY = {"on": "true", "off": "false"}

_C_SPACE = " \t\n\v\f\r"  # isspace() in the C locale: what strtoll/strtod skip first
_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_DECIMAL = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_HEX = r"0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][-+]?\d+)?"
_STRTOD = re.compile(
    rf"[{_C_SPACE}]*([-+]?)(?:({_HEX})|({_DECIMAL})|(inf(?:inity)?)|(nan(?:\([0-9A-Za-z_]*\))?))",
    re.IGNORECASE,
)


def _strtoll(text: str, base: int, unsigned: bool) -> int | None:
    """`strtoll` / `strtoull` over the whole of `text`: its value, or None when it stops
    before the end or overflows (`errno` ERANGE)."""
    match = re.fullmatch(
        rf"[{_C_SPACE}]*([-+]?)" + (r"(?:0[xX])?([0-9a-fA-F]+)" if base == 16 else r"(\d+)"),
        text,
    )
    if not match:
        return None
    magnitude = int(match[2], base)
    if unsigned:  # strtoull negates a leading '-' modulo 2**64; ERANGE past ULLONG_MAX
        if magnitude > 2**64 - 1:
            return None
        return (-magnitude) % 2**64 if match[1] == "-" else magnitude
    value = -magnitude if match[1] == "-" else magnitude
    low, high = _INT_RANGES["int64"]
    return value if low <= value <= high else None


def _strtod(text: str) -> float | None:
    """`strtod` over the whole of `text`: its value, or None when it stops before the end or
    sets ERANGE (overflow to infinity, underflow below the smallest normal double)."""
    match = _STRTOD.fullmatch(text)
    if not match:
        return None
    sign = -1.0 if match[1] == "-" else 1.0
    if match[4] or match[5]:
        return sign * (math.inf if match[4] else math.nan)
    try:
        value = float.fromhex(match[2]) if match[2] else float(match[3])
    except OverflowError:
        return None
    if math.isinf(value):
        return None
    significand = re.split(r"[pP]", match[2][2:])[0] if match[2] else re.split(r"[eE]", match[3])[0]
    if (value == 0 and significand.strip("0.")) or 0 < abs(value) < sys.float_info.min:
        return None  # underflow: glibc sets ERANGE for a result below the normal doubles
    return sign * value


def parses(kind: str, text: str) -> bool:
    """Whether gflags takes `text` for a flag of C++ type `kind` (`TYPES`)."""
    if kind == "bool":
        return text.lower() in TRUE + FALSE
    if kind == "string":
        return True
    if text == "":  # empty-string is only allowed for string type
        return False
    if kind == "double":
        return _strtod(text) is not None
    base = 16 if text[:2] in ("0x", "0X") else 10
    unsigned = kind.startswith("u")
    if unsigned and text.lstrip(" ").startswith("-"):
        return False
    value = _strtoll(text, base, unsigned)
    low, high = _INT_RANGES[kind]
    return value is not None and low <= value <= high


def flag_text(value: object, kind: str | None) -> str:
    """A design's value for a flag of C++ type `kind` as its server takes it: a boolean as
    `true`/`false` (from any of gflags' spellings, or PostgreSQL's on/off); any other type as
    written, once gflags' grammar for it takes it (ValueError saying what the type takes).
    `kind` None (a flag whose type the catalogue does not record): on/off, which gflags takes
    for no type but a string, as true/false; anything else as written."""
    text = str(value)
    folded = text.strip().lower()
    if kind is None:
        return POSTGRES_ONLY.get(folded, text)
    if kind == "bool":
        if folded in TRUE or folded in FALSE:
            return "true" if folded in TRUE else "false"
        if folded in POSTGRES_ONLY:
            return POSTGRES_ONLY[folded]
        raise ValueError(
            f"{text!r} is not a boolean as gflags reads one ({', '.join(TRUE)} or "
            f"{', '.join(FALSE)}; on and off are written true and false)"
        )
    if not parses(kind, text):
        what = {
            "double": "a floating-point number (strtod)",
            "int32": "a 32-bit integer",
            "int64": "a 64-bit integer",
            "uint32": "an unsigned 32-bit integer",
            "uint64": "an unsigned 64-bit integer",
        }[kind]
        raise ValueError(f"{text!r} is not {what} as gflags reads one")
    return text
