"""The knob vocabulary: what a design factor (or a default) can set, for every backend.

A knob is ``<kind>.<name>``:

- ``cluster.nodes`` (integer >= 1), ``cluster.node_size`` (a key of the backend's size table),
  ``cluster.replication`` (off | on);
- ``server.<setting>``: a server setting applied when the cluster starts;
- ``session.<setting>``: a setting of every benchmark session (``PGOPTIONS``);
- ``workload.script`` (a script of the workloads folder) and ``workload.<var>`` (a pgbench
  ``-D`` variable the script uses; ``workload.rows``, the rows per transaction of the shipped
  scripts, an integer >= 1);
- ``workload.distribution``: how the read script draws its keys: ``uniform`` over every
  loaded key, or ``zipfian`` (pgbench's bounded Zipfian, parameter ZIPFIAN_S) or
  ``zipfian <s>``; given to the script as the number it draws with (0: uniform, else s);
- ``dataset.rows``: rows loaded before measuring; ``dataset.value_bytes``: the size of each
  loaded row's value (default 32, an md5 in hex, as before the knob; at most 1 MiB).

The seed study's factor names are shorthands for their knob (``SHORTHANDS``).
"""

from __future__ import annotations

import math
import re

from ybscale.errors import UserError

KINDS = ("cluster", "server", "session", "workload", "dataset")
CLUSTER_KNOBS = ("nodes", "node_size", "replication")
DATASET_KNOBS = ("rows", "value_bytes")
# knobs whose values are counts (integers >= 1), checked at dry run
COUNTS = ("cluster.nodes", "dataset.rows")
WORKLOAD_COUNTS = ("workload.rows",)  # pgbench -D variables of the shipped scripts
DISTRIBUTION = "workload.distribution"
# random_zipfian's parameter for `zipfian` alone, and the range pgbench 13+ accepts
# (PostgreSQL 15 pgbench.c: MIN_ZIPFIAN_PARAM .. MAX_ZIPFIAN_PARAM)
ZIPFIAN_S, ZIPFIAN_RANGE = 1.1, (1.001, 1000.0)
# the knobs that need a cluster of their own: rows differing in them never share one
INFRA_KINDS = ("cluster", "server")

SHORTHANDS = {
    "nodes": "cluster.nodes",
    "node_size": "cluster.node_size",
    "replication": "cluster.replication",
    "workload": "workload.script",
    "operation_size": "workload.rows",
    "isolation": "session.default_transaction_isolation",
}

ISOLATION = "default_transaction_isolation"
ISOLATION_ALIASES = {"snapshot": "repeatable read"}
ISOLATION_LEVELS = ("read uncommitted", "read committed", "repeatable read", "serializable")

_KNOB = re.compile(r"^(cluster|server|session|workload|dataset)\.([a-z_][a-z0-9_.]*)$")


class KnobError(UserError):
    """An unknown knob or a level it cannot take; the message names the file and field."""


def parse(knob: str) -> tuple[str, str]:
    """``"server.work_mem"`` -> ``("server", "work_mem")``; KnobError for anything else."""
    match = _KNOB.match(str(knob))
    if not match:
        raise KnobError(
            f"unknown knob {knob!r}: expected one of {', '.join(k + '.<name>' for k in KINDS)}"
        )
    kind, name = match.groups()
    if kind == "cluster" and name not in CLUSTER_KNOBS:
        raise KnobError(f"unknown knob {knob!r}: cluster knobs are {', '.join(CLUSTER_KNOBS)}")
    if kind == "dataset" and name not in DATASET_KNOBS:
        raise KnobError(f"unknown knob {knob!r}: dataset knobs are {', '.join(DATASET_KNOBS)}")
    return kind, name


def knob_of(name: str, sets: str | None) -> str:
    """The knob a factor sets: its ``sets:`` field, else the shorthand of its name."""
    if sets:
        return sets
    if name in SHORTHANDS:
        return SHORTHANDS[name]
    raise KnobError(
        f"factor {name!r} says nothing about what it sets: add `sets: <knob>` "
        f"(e.g. server.work_mem, session.enable_seqscan, workload.rows) or use one of the "
        f"names {', '.join(sorted(SHORTHANDS))}"
    )


def on_off(value: object) -> bool:
    """``cluster.replication``: off | on (YAML booleans accepted); ValueError otherwise."""
    text = str(value).strip().lower()
    if text in ("on", "true", "yes"):
        return True
    if text in ("off", "false", "no"):
        return False
    raise ValueError(f"{value!r} is not off or on")


def positive_int(value: object) -> int:
    """An integer >= 1 (``3`` or ``"3"``; not 3.5, not true); ValueError otherwise."""
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value!r} is not a positive integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a positive integer") from None
    if number < 1:
        raise ValueError(f"{value!r} is not a positive integer")
    return number


def setting_text(value: object) -> str:
    """A server or session setting's value as PostgreSQL reads it (YAML booleans as on/off).
    A backend whose server reads another grammar rewrites it: gcp writes a yb-master /
    yb-tserver flag's boolean as true/false (`backends.yb_catalogue.gflags.flag_text`)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def isolation_text(value: object) -> str:
    """An isolation level as PostgreSQL spells it (``snapshot`` is repeatable read)."""
    text = str(value).strip().lower().replace("_", " ")
    return ISOLATION_ALIASES.get(text, text)


def distribution_parameter(value: object) -> str:
    """``workload.distribution``: uniform -> "0"; zipfian -> ZIPFIAN_S; ``zipfian <s>`` -> s,
    within ZIPFIAN_RANGE; ValueError saying what is wrong."""
    words = str(value).split() if isinstance(value, str) else []
    if words == ["uniform"]:
        return "0"
    if words[:1] == ["zipfian"] and len(words) <= 2:
        try:
            s = float(words[1]) if len(words) == 2 else ZIPFIAN_S
        except ValueError:
            s = math.nan
        low, high = ZIPFIAN_RANGE
        if low <= s <= high:
            return repr(s)
        raise ValueError(f"{value!r}: the Zipfian parameter must be from {low:g} to {high:g}")
    raise ValueError(f"{value!r} is not a distribution: uniform, zipfian or zipfian <s>")
