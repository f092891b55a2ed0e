# ybscale: a designed scalability study, from config/design.yaml to effects and a report.


configfile: "config/config.yaml"


# settings errors name the file (or --config) a value came from
from ybscale import config_sources

config_sources.use_sources(config_sources.snakemake_sources(workflow))


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/design.smk"
include: "rules/measure.smk"
include: "rules/analysis.smk"


# a backend whose clusters are shared brings them up by rules of its own
if BACKEND.rules:

    include: BACKEND.rules


rule all:
    """The whole study: design, measurements, effects, charts and findings (what the report shows)."""
    default_target: True
    input:
        rules.design.output,
        rules.effects.output,
        rules.effect_charts.output,
        rules.throughput_chart.output,
        rules.findings.output,


onerror:
    BACKEND.on_error(SETTINGS, STUDY.clusters, CLUSTERS)
