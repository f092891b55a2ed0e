# ybscale: a designed scalability study, from config/design.yaml to effects and a report.


configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/design.smk"
include: "rules/measure.smk"
include: "rules/analysis.smk"


if BACKEND == "gcp":

    include: "rules/cloud.smk"


rule all:
    default_target: True
    input:
        "results/effects.csv",
        "results/design/sign_table.csv",
        "results/charts/throughput.svg",


onerror:
    if BACKEND == "gcp":
        from ybscale.backends.gcp.stacks import destroy_all

        destroy_all(SETTINGS, STUDY.combinations, CLUSTERS)
