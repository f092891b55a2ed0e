"""Files written whole or not at all: a reader (a job, a concurrent run) never sees half; and
the tables a user gives a command, read with an error naming the file."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def write_whole(path: Path, text: str) -> None:
    """`text` into `path` through a temporary file of this process renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def write_json(path: Path, record: Mapping) -> None:
    """`record` as indented JSON (values JSON lacks as their str), written whole."""
    write_whole(path, json.dumps(record, indent=2, default=str) + "\n")


def write_csv(path: Path, rows: Iterable[Mapping], columns: Sequence[str] | None = None) -> None:
    """`rows` as CSV with a header, written whole: `columns` in that order (default: every key
    in the order the rows first name it); a missing, None or NaN value is an empty field, as
    pandas writes it (so pandas reads it back as NaN)."""
    rows = list(rows)
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(_field(row.get(column)) for column in columns)
    write_whole(path, out.getvalue())


def _field(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def publish(paths: Iterable[Path], into: Path) -> list[Path]:
    """Move each of `paths` into the folder `into` under its own name (a rename: a reader sees
    the old file or the new one); the published paths."""
    into.mkdir(parents=True, exist_ok=True)
    published = []
    for path in map(Path, paths):
        os.replace(path, into / path.name)
        published.append(into / path.name)
    return published


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m ybscale.files publish --into DIR FILE...` (the effects rule)."""
    import argparse

    parser = argparse.ArgumentParser(prog="ybscale.files", description=main.__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)
    pub = sub.add_parser("publish", help="move staged files into a folder")
    pub.add_argument("--into", required=True, type=Path)
    pub.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in publish(args.files, args.into):
        print(f"published {path}")
    return 0


class TableError(ValueError):
    """A table that is missing or is not CSV; the message names the file."""


def read_table(path: Path, **options):
    """The CSV file `path` as a pandas DataFrame (`options`: pandas.read_csv's); TableError
    ``<path>: no such file`` or ``<path>: cannot read CSV: ...``."""
    import pandas as pd  # lazily: the Snakefile imports this module at parse time

    if not Path(path).is_file():
        raise TableError(f"{path}: no such file")
    try:
        return pd.read_csv(path, **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise TableError(f"{path}: cannot read CSV: {exc}") from None


if __name__ == "__main__":
    sys.exit(main())
