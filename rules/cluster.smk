# Every backend's clusters, one lifecycle: cluster_up -> the rows measured on it (measure)
# -> cluster_down, keyed by the cluster label each row runs on (CLUSTER_OF). A cluster is
# released once every row on it was attempted, measured or failed; its rows' measurements are
# published after that (rules/measure.smk). Nothing here starts anything at parse time.


rule cluster_up:
    """Bring one cluster up and write how to reach it (or why it did not come up)."""
    input:
        previous=previous_released,
        settings=SETTINGS_INPUT,
    output:
        temp(f"{CLUSTERS}/{{cluster}}/endpoints.json"),
    log:
        "results/logs/cluster_up/{cluster}.log",
    priority: lambda wildcards: PRIORITY["up"][wildcards.cluster]
    conda:
        "../envs/ybscale.yaml"
    resources:
        # servers started on this machine: never while a benchmark runs
        bench=1 if BACKEND.runs_here else 0,
    params:
        cluster=definition_of,
    shell:
        "python -m ybscale.backends.lifecycle up --settings {input.settings}"
        " --cluster {wildcards.cluster} --definition {params.cluster:q}"
        " --out {output} --log {log}"


rule cluster_down:
    """Release one cluster once every row on it was attempted (measured or failed)."""
    input:
        endpoints=f"{CLUSTERS}/{{cluster}}/endpoints.json",
        attempts=lambda wildcards: expand(
            "results/runs/{run}/status.json", run=CLUSTER_RUNS[wildcards.cluster]
        ),
        settings=SETTINGS_INPUT,
    output:
        f"{CLUSTERS}/{{cluster}}/released.json",
    log:
        "results/logs/cluster_down/{cluster}.log",
    priority: lambda wildcards: PRIORITY["down"][wildcards.cluster]
    conda:
        "../envs/ybscale.yaml"
    resources:
        bench=1 if BACKEND.runs_here else 0,
    shell:
        "python -m ybscale.backends.lifecycle down --settings {input.settings}"
        " --cluster {wildcards.cluster} --endpoints {input.endpoints}"
        " --out {output} --log {log}"
