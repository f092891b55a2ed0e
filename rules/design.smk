rule design:
    """The design record every later job reads (results/design/design.json: the design, each
    run's cluster, the strata, the planned run order), with its sign table and aliases: the one
    rule that reads the design file."""
    input:
        config["design"],
    output:
        sign_table=report(
            "results/design/sign_table.csv",
            caption="../report/design.rst",
            category="1. Design",
        ),
        aliases=report(
            "results/design/aliases.csv",
            caption="../report/design.rst",
            category="1. Design",
        ),
        summary="results/design/design.json",
    log:
        "results/logs/design.log",
    conda:
        "../envs/ybscale.yaml"
    resources:
        bench=ALONE,  # measurement.alone: not beside a measurement on this machine
    params:
        backend=BACKEND.name,
        clusters=CLUSTER_ARGS,
        order=SETTINGS["measurement"]["order"],
        seed=SETTINGS["measurement"]["seed"],
    shell:
        "python -m ybscale.design.record {input} --sign-table {output.sign_table}"
        " --aliases {output.aliases} --record {output.summary} --backend {params.backend}"
        " --order {params.order} --seed {params.seed} --clusters {params.clusters} > {log} 2>&1"
