"""Files written whole or not at all: a reader (a job, a concurrent run) never sees half."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
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
