# ybscale: a designed scalability study, from config/design.yaml to effects and a report.


configfile: "config/config.yaml"


# settings errors name the file (or --config) a value came from
from ybscale import config_sources

config_sources.use_sources(config_sources.snakemake_sources(workflow))


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/design.smk"
include: "rules/measure.smk"
include: "rules/cluster.smk"
include: "rules/analysis.smk"
include: "rules/report.smk"


# a backend's own rules (gcp: the plan before spending)
if BACKEND.rules:

    include: BACKEND.rules


rule all:
    """The whole study: results/effects.csv is published last, after the design, the charts and
    the findings (what the report shows), so it stands for the study."""
    default_target: True
    input:
        rules.effects.output,


onsuccess:
    # a target that needed no cluster_down (e.g. a cluster's endpoints) leaves nothing up
    release_left(SETTINGS, CLUSTERS, list(CLUSTER_RUNS))


onerror:
    # a failed job, Ctrl-C or SIGTERM: what is still up is released
    clean_up_after_error(SETTINGS, CLUSTERS, list(CLUSTER_RUNS))
