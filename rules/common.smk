# Shared state and input functions: the design, its rows and what each row needs.
import os
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

from ybscale.backends.base import Backend
from ybscale.design import load_design

min_version("9.0")

# rules call `python -m ybscale...`: use this interpreter's environment even when not activated
_bin = os.path.dirname(sys.executable)
os.environ.update(PATH=_bin + os.pathsep + os.environ.get("PATH", ""))


validate(config, "../config/schemas/config.schema.yaml")

DESIGN = load_design(config["design"])
RUNS = DESIGN.run_ids
BACKEND = config["backend"]
ANALYSIS = {
    "ceiling": "empirical",
    "model": "additive",
    "alpha": 0.05,
    **config.get("analysis", {}),
}
# the code that measures a row: a change here re-measures every row
MEASURE_CODE = sorted(
    str(p)
    for p in Path(workflow.basedir, "src", "ybscale").rglob("*.py")
    if p.name in {"bench.py", "pgbench.py", "workload.py", "__init__.py", "base.py"}
    or p.parent.name == "backends"
    and p.stem in {BACKEND, "cpu", "ssh", "base"}
)


wildcard_constraints:
    run=r"run\d+",
    combo=r"[A-Za-z0-9_.-]+",


def known_run(run):
    """The run id, or a clear error naming the design file and the valid ids."""
    if run not in RUNS:
        raise ValueError(
            f"{config['design']}: no design row {run!r}; rows are {RUNS[0]}..{RUNS[-1]}"
        )
    return run


def row_levels(run):
    """Factor name -> level of one row, keys sorted: the measuring rule's param."""
    return dict(sorted(DESIGN.levels(known_run(run)).items()))


def infra_key(run):
    """The infrastructure combination of a row (rows with equal keys share a cluster)."""
    return Backend.infra_key(row_levels(run))


COMBOS = sorted({infra_key(run) for run in RUNS})


def runs_of(combo):
    return [run for run in RUNS if infra_key(run) == combo]


def workload_script(wildcards):
    """The pgbench script of this row: a change to it re-measures the rows that use it."""
    levels = row_levels(wildcards.run)
    return f"{config['workloads']}/{levels['workload']}_{levels['operation_size']}.sql"


def cluster_endpoints(wildcards):
    """gcp: the endpoints of the row's cluster (brought up by cluster_up); local: nothing."""
    if BACKEND != "gcp":
        return []
    return f"results/clusters/{infra_key(wildcards.run)}/endpoints.json"


def cluster_teardowns(wildcards):
    """gcp: every cluster destroyed before the analysis; other backends: nothing."""
    if BACKEND != "gcp":
        return []
    return expand("results/clusters/{combo}/destroyed.json", combo=COMBOS)


def backend_settings():
    """The config section of the active backend (a change re-measures every row)."""
    return config.get(BACKEND, {})


if BACKEND == "existing":
    from ybscale.backends.existing import check_endpoints

    check_endpoints(config, DESIGN)
