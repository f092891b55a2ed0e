# Shared state and input functions: the study (settings, design, resolved rows) and what each
# row needs. Every level is checked here, at parse time, before any cluster starts.
import functools
import json
import os
import shlex
import sys

from ybscale import study
from ybscale.analysis.terms import RESPONSE_COLUMNS
from ybscale.settings import write_file as write_settings_file

from ybscale.backends import backend_class
from ybscale.backends.base import claim_workflow
from ybscale.backends.lifecycle import (
    clean_up_after_error,
    forced,
    recover_after_kill,
    release_left,
    slot_chain,
    stage_priorities,
)
from ybscale.design.order import run_priorities, runs_of_block
from ybscale.measure import attempt
from ybscale.measure.protocol import code_digest, file_digest
from ybscale.param_records import compare_params_without_importing_pandas

# shell rules run `python -m ybscale...` with the environment Snakemake runs in, activated or not
shell.prefix(
    f"set -euo pipefail; PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
)
# Snakemake compares params without importing pandas (param_records)
compare_params_without_importing_pandas()
STUDY = study.load(config)
# the clusters this workflow's jobs bring up live no longer than it (local: orphans reaped)
claim_workflow()
SETTINGS = STUDY.settings
config.update(
    SETTINGS
)  # one loader: jobs and the report see the defaults the schema fills
# what the cluster and measuring jobs read (a file named by its content; ancient: a change of
# settings re-runs a job through its params, never through this file's time)
SETTINGS_INPUT = ancient(write_settings_file(SETTINGS))
DESIGN = STUDY.design
RUNS = DESIGN.all_run_ids  # the factorial runs, then the centre runs (center_points)
# what the rules know of the backend (backends.BACKENDS)
BACKEND = backend_class(SETTINGS["backend"])
ANALYSIS = SETTINGS["analysis"]
# the ceilings.csv columns analysed, the main one first (analysis.responses)
RESPONSES = [RESPONSE_COLUMNS[name] for name in ANALYSIS["responses"]]
# each row's cluster price per hour and how it was obtained, for throughput per dollar
PRICES = (
    json.dumps(study.hourly_prices(SETTINGS, STUDY.rows), sort_keys=True)
    if "throughput_per_dollar" in ANALYSIS["responses"]
    else ""
)
CLUSTER_OF = STUDY.cluster_of  # run -> the cluster it runs on
CLUSTER_RUNS = STUDY.clusters  # cluster label -> the runs measured on it
CLUSTER_ARGS = " ".join(f"{run}={cluster}" for run, cluster in CLUSTER_OF.items())
MEASURE_CODE = code_digest(BACKEND.name)
# one folder per cluster (CLUSTER_OF's labels)
CLUSTERS = "results/clusters"
# the analysis' tables until the effects rule publishes them into results/
STAGED = "results/analysis"
# the design record, written by the design job: what every later job reads of the design
DESIGN_RECORD = "results/design/design.json"
# what a run killed -9 left (servers, their endpoints, Snakemake's locks) goes before this one
recover_after_kill(SETTINGS, CLUSTERS, list(CLUSTER_RUNS))


# the order rows are measured in: drawn from measurement.seed, one block per replicate
# (per cluster where rows share one)
RUN_PRIORITY = run_priorities(
    DESIGN,
    SETTINGS["measurement"]["order"],
    SETTINGS["measurement"]["seed"],
    CLUSTER_OF,
)
# cluster_down before measure before cluster_up, each stage in the order above
PRIORITY = stage_priorities(RUN_PRIORITY, CLUSTER_OF)
# at most BACKEND.max_clusters clusters live: each slot brings its next cluster up only after
# it released the previous one (a resource cannot span up -> measure -> down; a chain can)
# (with --config block=N, the `block` target's rows alone: its clusters chain among
# themselves, not behind another block's)
BLOCK_RUNS = (
    None if config.get("block") is None else set(runs_of_block(DESIGN, config["block"]))
)
PREVIOUS_IN_SLOT = slot_chain(
    BACKEND,
    SETTINGS,
    [row for row in STUDY.rows if BLOCK_RUNS is None or row.run in BLOCK_RUNS],
    {
        run: label
        for run, label in CLUSTER_OF.items()
        if BLOCK_RUNS is None or run in BLOCK_RUNS
    },
    RUN_PRIORITY,
)
CLUSTER_DEFINITIONS = {
    label: BACKEND.definition(SETTINGS, [STUDY.row(run) for run in runs])
    for label, runs in CLUSTER_RUNS.items()
}


wildcard_constraints:
    run=r"run\d+",
    cluster=r"[A-Za-z0-9_.-]+",


def row_of(run):
    """The resolved row of a run id (plain JSON: the measuring rule's param)."""
    return STUDY.row(run).params()


def cluster_of_run(run):
    """The label of the cluster `run` is measured on (a clear error for an unknown run)."""
    return CLUSTER_OF[STUDY.row(run).run]


@functools.cache  # several params and the input function ask it per job: digest a script once
def measuring_params(run):
    """What a row's measurement depends on: the measure rule's params (by content: a row
    re-runs when its knobs, its script, the measuring code or the measurement settings change,
    never because a checkout touched a file)."""
    return {
        "row": row_of(run),
        "script": file_digest(STUDY.row(run).script_path),
        "code": MEASURE_CODE,
        "measurement": SETTINGS["measurement"],
        "backend": BACKEND.measuring_settings(SETTINGS),  # never prices or the analysis
    }


def measured_as(run):
    """The fingerprint of the row's measuring params, which its attempt records."""
    return attempt.fingerprint(measuring_params(run))


def endpoints_of(run):
    return f"{CLUSTERS}/{cluster_of_run(run)}/endpoints.json"


def cluster_endpoints(wildcards):
    """How the row reaches its cluster (brought up by cluster_up), when the row is to be
    measured: a row measured as it stands now and published needs none, unless it is forced.
    So a cluster brought up again for one row of several (one row forced, a failed row
    re-run) measures that row alone, not its neighbours (Snakemake re-runs every job that
    takes an output of a job it re-runs)."""
    run = wildcards.run
    dag = workflow.dag_settings
    if attempt.is_current(f"results/runs/{run}", measured_as(run)) and not forced(
        run,
        cluster_of_run(run),
        dag.targets,
        dag.forcerun,
        dag.forcetargets,
        dag.forceall,
    ):
        return []
    return endpoints_of(run)


def cluster_released(wildcards):
    """The row's cluster, released: its measurements are published after (an order: ancient,
    so a release for another row of the cluster does not publish this one again)."""
    return ancient(f"{CLUSTERS}/{cluster_of_run(wildcards.run)}/released.json")


def previous_released(wildcards):
    """The slot's previous cluster, released: an order, not data (ancient: its time never
    re-runs this). Only between clusters never released: Snakemake skips the staleness
    checks of every job downstream of one that re-runs, through ancient inputs too, so a chain
    through released clusters would hide their stale rows; re-runs of released clusters are
    ordered by the stages' priorities instead (PRIORITY)."""
    before = PREVIOUS_IN_SLOT.get(
        wildcards.cluster
    )  # none: outside the block asked for
    released = f"{CLUSTERS}/{{}}/released.json"
    if before is None or any(
        os.path.exists(released.format(label)) for label in (wildcards.cluster, before)
    ):
        return []
    return ancient(released.format(before))


def definition_of(wildcards):
    """What defines the cluster, and nothing else (a price, analysis.alpha or the number of
    slots is not), as JSON: the cluster rules run again only when it changes."""
    return json.dumps(CLUSTER_DEFINITIONS[wildcards.cluster], sort_keys=True)
