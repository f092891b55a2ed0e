"""Schema validation (jsonschema, Draft 2020-12) that remembers what passed.

Every Snakemake start validates the config and the design. A pass is a pure function of the
schema, the data and jsonschema's version, so it is recorded as an empty file named by their
hash under ``cache_dir()/valid``: a no-op dry run of an unchanged study does not import
jsonschema at all. Failures are never recorded; data that is not plain JSON (a tuple, a date)
is always validated.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import metadata

from ybscale import cache_dir


def schema_errors(schema: Mapping, data: object) -> list:
    """jsonschema's errors for `data` against `schema`, sorted by where they are; [] at once
    when this schema and this data passed before."""
    mark = _pass_mark(schema, data)
    if mark is not None and mark.exists():
        return []
    from jsonschema import Draft202012Validator

    errors = sorted(
        Draft202012Validator(schema).iter_errors(data),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    if not errors and mark is not None:
        try:
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.touch()
        except OSError:  # a read-only cache: validate every time
            pass
    return errors


def _pass_mark(schema: Mapping, data: object):
    """The file recording that `data` passed `schema`, or None when `data` is not plain JSON
    (json.dumps would not tell a tuple from a list, which jsonschema does)."""
    if not (_plain(schema) and _plain(data)):
        return None
    text = json.dumps([_jsonschema_version(), schema, data], sort_keys=True)
    return cache_dir() / "valid" / hashlib.sha256(text.encode()).hexdigest()


@cache
def _jsonschema_version() -> str:
    """Looked up once per process (the config and the design are both validated)."""
    return metadata.version("jsonschema")


def _plain(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, str | int | float)


EXPLAINED = ("type", "enum", "pattern", "minimum", "maximum", "exclusiveMinimum", "minItems")
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)[.;]\s")  # not at "e.g. " or "i.e. "


def explained(err) -> str:
    """jsonschema's message for `err`, with the first sentence of the field's description when
    the value had the wrong form (what a field holds, e.g. "letter -> product of base factor
    letters, e.g. E: BC"), so the error says what to write instead."""
    description = err.schema.get("description") if isinstance(err.schema, Mapping) else None
    if err.validator not in EXPLAINED or not description:
        return err.message
    text = " ".join(str(description).split())
    end = _SENTENCE_END.search(text)
    return f"{err.message} ({text[: end.start() if end else len(text)].rstrip('.')})"
