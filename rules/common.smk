# Shared state and input functions: the study (settings, design, resolved rows) and what each
# row needs. Every level is checked here, at parse time, before any cluster starts.
import functools
import json
import os
import shlex
import sys

from pathlib import Path

from ybscale import study
from ybscale.design import rounds
from ybscale.analysis.terms import RESPONSE_COLUMNS
from ybscale.settings import write_file as write_settings_file

from ybscale.backends import backend_class
from ybscale.backends.base import claim_workflow
from ybscale.errors import user_errors_exit
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
from ybscale.measure.protocol import analysis_code, code_digest, file_digest
from ybscale.param_records import compare_params_without_importing_pandas

# shell rules run `python -m ybscale...` with the environment Snakemake runs in, activated or not
shell.prefix(
    f"set -euo pipefail; PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
)
# Snakemake compares params without importing pandas (param_records)
compare_params_without_importing_pandas()
# a user's error in the config or the design ends the run in its own lines (the file and
# field, one line per problem), never in a traceback (ybscale.errors.user_errors_exit)
with user_errors_exit():
    STUDY = study.load(config, budget=True)
# the clusters this workflow's jobs bring up live no longer than it (local: orphans reaped)
claim_workflow()
SETTINGS = STUDY.settings
config.update(
    SETTINGS
)  # one loader: jobs and the report see the defaults the schema fills
# what the cluster and measuring jobs read (a file named by its content; ancient: a change of
# settings re-runs a job through its params, never through this file's time)
SETTINGS_INPUT = ancient(write_settings_file(SETTINGS))
# the design with every replicate measurement.budget allows: rows later rounds may measure
DESIGN = STUDY.design
# round 0: the design's own replicates; the study's checkpoint adds one per round while a
# column is undecided, up to MOST_REPLICATES (ybscale.design.rounds)
BASE_REPLICATES = STUDY.base_replicates
MOST_REPLICATES = DESIGN.replications
# settings that change no measurement (the budget, the scheduling): not the measuring params
MEASURING = {
    key: value
    for key, value in SETTINGS["measurement"].items()
    if key not in ("budget", "alone")
}
# what the rules know of the backend (backends.BACKENDS)
BACKEND = backend_class(SETTINGS["backend"])
ANALYSIS = SETTINGS["analysis"]
# local (measurement.alone): no other job of the study runs beside a row's measurement or a
# cluster starting or stopping on this machine; each takes the one `bench` slot
ALONE = 1 if BACKEND.loads_here and SETTINGS["measurement"]["alone"] else 0
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
# the package's version and the digest of the code the analysis, findings and report rules run:
# their params, so that a changed ybscale re-analyses the study and re-measures nothing
ANALYSIS_CODE = analysis_code()
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
with user_errors_exit():  # a design the backend cannot order (blocks, centre runs)
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
with user_errors_exit():  # --config block=N the design does not have
    BLOCK_RUNS = (
        None
        if config.get("block") is None
        else set(runs_of_block(DESIGN, config["block"]))
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
    n=r"\d+",
    cluster=r"[A-Za-z0-9_.-]+",


def runs_of_round(n):
    """The runs of round `n`: the first BASE_REPLICATES + n replicates, and the centre runs."""
    return rounds.runs_of(DESIGN, BASE_REPLICATES + int(n))


def final_round():
    """The round the study ends with: the first whose checkpoint decided no more (each round's
    decision waits for its runs: Snakemake measures them first); 0 without a budget."""
    n = 0
    while BASE_REPLICATES + n < MOST_REPLICATES:
        text = Path(checkpoints.round.get(n=n).output[0]).read_text()
        if not text.strip() or not json.loads(text)["more"]:  # empty: `--touch` made it
            break
        n += 1
    return n


def final_runs(wildcards=None):
    """The runs the study's analysis reads: those of its final round."""
    return runs_of_round(final_round())


def final_decision(wildcards=None):
    """The final round's decision file ([] without a budget: no rounds)."""
    if MOST_REPLICATES == BASE_REPLICATES:
        return []
    return f"results/rounds/round{final_round()}.json"


def final_record(wildcards=None):
    """The design record the study's analysis reads: the final round's (its replicates),
    written by the round checkpoint from DESIGN_RECORD; DESIGN_RECORD without rounds."""
    if MOST_REPLICATES == BASE_REPLICATES:
        return DESIGN_RECORD
    return f"results/rounds/round{final_round()}/design.json"


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
        "measurement": MEASURING,
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
