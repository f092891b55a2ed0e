# Shared state and input functions: the study (settings, design, resolved rows) and what each
# row needs. Every level is checked here, at parse time, before any cluster starts.
import os
import shlex
import sys

from ybscale import study

from ybscale.design import strata
from ybscale.backends import backend_class
from ybscale.measure.protocol import code_digest, file_digest

# shell rules run `python -m ybscale...` with the environment Snakemake runs in, activated or not
shell.prefix(
    f"set -euo pipefail; PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
)
STUDY = study.load(config)
SETTINGS = STUDY.settings
config.update(
    SETTINGS
)  # one loader: jobs and the report see the defaults the schema fills
DESIGN = STUDY.design
RUNS = DESIGN.run_ids
# what the rules know of the backend (backends.BACKENDS)
BACKEND = backend_class(SETTINGS["backend"])
ANALYSIS = SETTINGS["analysis"]
CLUSTER_OF = strata.cluster_of(SETTINGS, STUDY.rows)  # run -> the cluster it runs on
# shared clusters: one per combination (gcp: and per replicate)
COMBOS = list(STUDY.clusters)
CLUSTER_ARGS = " ".join(f"{run}={cluster}" for run, cluster in CLUSTER_OF.items())
MEASURE_CODE = code_digest(BACKEND.name)
# shared clusters: one folder per cluster (CLUSTER_OF's labels)
CLUSTERS = "results/clusters"


wildcard_constraints:
    run=r"run\d+",
    combo=r"[A-Za-z0-9_.-]+",


def row_of(run):
    """The resolved row of a run id (plain JSON: the measuring rule's param)."""
    return STUDY.row(run).params()


def runs_of(combo):
    return STUDY.clusters[combo]


def cluster_endpoints(wildcards):
    """Shared clusters: the endpoints of the row's (brought up by cluster_up); otherwise
    nothing (the measuring job brings the row's own cluster up and down)."""
    if not BACKEND.shared_clusters:
        return []
    return f"{CLUSTERS}/{CLUSTER_OF[wildcards.run]}/endpoints.json"


def cluster_released(wildcards):
    """Shared clusters: the row's, destroyed (its measurements are published after);
    otherwise nothing."""
    if not BACKEND.shared_clusters:
        return []
    return f"{CLUSTERS}/{CLUSTER_OF[wildcards.run]}/destroyed.json"
