"""A small CSV (a row's throughput.csv or repetitions.csv) as columns of numpy arrays.

The per-row ceiling job reads two files of a few lines; this is all it needs of a table, and
it spares that job pandas' import (about 0.2 s of CPU in each of a study's rows). A column
whose every non-empty value is a number is a float array (an empty cell is NaN, as pandas
reads it); any other column is an array of its strings.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np


def read_columns(path: Path) -> dict[str, np.ndarray]:
    """Column name -> values of the CSV at `path` (header line first)."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}: line {number} has {len(row)} fields, not {len(header)}")
    return {name: _typed([row[i] for row in body]) for i, name in enumerate(header)}


def _typed(cells: list[str]) -> np.ndarray:
    try:
        return np.array([float(c) if c != "" else np.nan for c in cells], dtype=float)
    except ValueError:
        return np.array(cells, dtype=object)


def row_count(table) -> int:
    """Lines of a table of columns (a dict of arrays or a DataFrame); 0 without columns."""
    names = list(table)
    return len(np.asarray(table[names[0]])) if names else 0


def first_line(table, column: str, value) -> int:
    """Position of the first line whose `column` equals `value` (IndexError when none)."""
    return int(np.flatnonzero(np.asarray(table[column]) == value)[0])
