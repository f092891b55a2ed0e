rule design:
    """Sign table, defining relation, aliases and resolution of the design."""
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
    params:
        backend=BACKEND.name,
        clusters=CLUSTER_ARGS,
    shell:
        "python -m ybscale.design.factorial {input} --sign-table {output.sign_table}"
        " --aliases {output.aliases} --summary {output.summary}"
        " --backend {params.backend} --clusters {params.clusters} > {log} 2>&1"
