# gcp backend: one Pulumi stack per infrastructure combination (included when backend == gcp).
# Rows sharing a combination share its cluster; a cluster is destroyed once every row that needs
# it is measured (and by destroy_all in `onerror:`). Nothing here runs at parse time.
from ybscale.backends.gcp.plan import format_plan, plan, previous_in_slot
from ybscale.settings import write_json

# at most gcp.max_clusters clusters live: each slot brings its next cluster up only after it
# destroyed the previous one (a resource cannot span up -> measure -> down; a chain can)
PREVIOUS_IN_SLOT = previous_in_slot(STUDY.rows, SETTINGS)


def previous_destroyed(wildcards):
    before = PREVIOUS_IN_SLOT[wildcards.combo]
    return [] if before is None else f"{CLUSTERS}/{before}/destroyed.json"


onstart:
    # plan before spending, once per real run (not on -n, --lint, --report or --dag)
    print(format_plan(plan(STUDY.rows, SETTINGS)), file=sys.stderr)


rule cloud_settings:
    """The settings as Snakemake resolved them (--config included), for the cluster CLI."""
    output:
        f"{CLUSTERS}/settings.json",
    params:
        settings=SETTINGS,
    run:
        write_json(output[0], params.settings)


rule cluster_up:
    """Bring up the stack of one combination (pulumi up, wait until ready), write endpoints."""
    input:
        settings=f"{CLUSTERS}/settings.json",
        previous=previous_destroyed,
    output:
        temp(f"{CLUSTERS}/{{combo}}/endpoints.json"),
    log:
        "results/logs/cluster_up/{combo}.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        serial_logs="results/logs/cluster_up",
    shell:
        "python -m ybscale.backends.gcp.clusters up --combo {wildcards.combo}"
        " --config {input.settings} --out {output} --serial-logs {params.serial_logs}"
        " > {log} 2>&1"


rule cluster_down:
    """Destroy the stack of one combination once every row that uses it is measured."""
    input:
        settings=f"{CLUSTERS}/settings.json",
        endpoints=f"{CLUSTERS}/{{combo}}/endpoints.json",
        rows=lambda wildcards: expand(
            "results/runs/{run}/throughput.csv", run=runs_of(wildcards.combo)
        ),
    output:
        f"{CLUSTERS}/{{combo}}/destroyed.json",
    log:
        "results/logs/cluster_down/{combo}.log",
    conda:
        "../envs/ybscale.yaml"
    shell:
        "python -m ybscale.backends.gcp.clusters down --combo {wildcards.combo}"
        " --config {input.settings} --out {output} > {log} 2>&1"
