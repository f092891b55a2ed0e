"""The tests' one design factory: designs built in memory or written to a test's folder, so
that editing the user's study (config/design.yaml) never changes a unit test. Only the tests of
the shipped study (its pipeline, its package) read config/design.yaml.

- `design(letters, generators, replications)`: a 2^(k-p) with placeholder names and levels;
- `SEED_STUDY`: the seed study's 2^(6-2) (../shared/seeds/000, as the project first shipped it:
  six factors with names, knobs and levels, E = BC, F = AB), a dict to copy and change;
- `seed_design(**changes)` builds it, `seed_design_file(folder, **changes)` writes it,
  `seed_design_path()` is it written once per process (for configs naming a file).
"""

from __future__ import annotations

import atexit
import copy
import functools
import shutil
import tempfile
from pathlib import Path

import yaml

from ybscale.design.factorial import Design, design_from_dict

SEED_STUDY = {
    "factors": {
        "A": {"name": "operation_size", "sets": "workload.rows", "levels": [1, 100]},
        "B": {"name": "workload", "sets": "workload.script", "levels": ["read", "write"]},
        "C": {"name": "nodes", "sets": "cluster.nodes", "levels": [3, 5]},
        "D": {
            "name": "isolation",
            "sets": "session.default_transaction_isolation",
            "levels": ["read committed", "repeatable read"],
        },
        "E": {"name": "replication", "sets": "cluster.replication", "levels": ["off", "on"]},
        "F": {"name": "node_size", "sets": "cluster.node_size", "levels": ["small", "large"]},
    },
    "generators": {"E": "BC", "F": "AB"},
    "replications": 1,
}


def design(
    letters: str = "ABC",
    generators: dict[str, str] | None = None,
    replications: int = 1,
    levels=("low", "high"),
) -> Design:
    """A validated in-memory 2^(k-p): factors `letters` named factor_a, factor_b, … at
    `levels`."""
    factors = {x: {"name": f"factor_{x.lower()}", "levels": list(levels)} for x in letters}
    data = {"factors": factors, "generators": dict(generators or {}), "replications": replications}
    return design_from_dict(data)


def seed_study(**changes) -> dict:
    """A fresh copy of `SEED_STUDY` with top-level keys replaced (e.g. replications=2)."""
    return {**copy.deepcopy(SEED_STUDY), **changes}


def seed_design(**changes) -> Design:
    return design_from_dict(seed_study(**changes))


def write_design(folder: Path, data: dict, name: str = "design.yaml") -> Path:
    """`data` as a design YAML in `folder`; its path."""
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def seed_design_file(folder: Path, name: str = "design.yaml", **changes) -> Path:
    """The seed study (with `changes`) written to folder/name."""
    return write_design(folder, seed_study(**changes), name)


@functools.cache
def seed_design_path() -> Path:
    """The seed study written once per test process to a folder of its own (removed at exit):
    for configs that name a design file."""
    folder = Path(tempfile.mkdtemp(prefix="ybscale-seed-design-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return seed_design_file(folder)
