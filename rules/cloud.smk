# gcp backend: one Pulumi stack per infrastructure combination (included when backend == gcp).
# Rows sharing a combination share its cluster; a cluster is destroyed once every row that needs
# it is measured (and by destroy_all in `onerror:`). Nothing here runs at parse time.
from ybscale.backends.gcp.clusters import definition
from ybscale.backends.gcp.plan import format_plan, plan, previous_in_slot

# at most gcp.max_clusters clusters live: each slot brings its next cluster up only after it
# destroyed the previous one (a resource cannot span up -> measure -> down; a chain can)
PREVIOUS_IN_SLOT = previous_in_slot(STUDY.rows, SETTINGS)
CLUSTER_DEFINITIONS = {
    combo: definition(SETTINGS, STUDY.row(runs[0]))
    for combo, runs in STUDY.clusters.items()
}


def previous_destroyed(wildcards):
    """The slot's previous cluster: an order, not data (ancient: its time never re-runs this)."""
    before = PREVIOUS_IN_SLOT[wildcards.combo]
    return [] if before is None else ancient(f"{CLUSTERS}/{before}/destroyed.json")


onstart:
    # plan before spending, once per real run (not on -n, --lint, --report or --dag)
    print(format_plan(plan(STUDY.rows, SETTINGS)), file=sys.stderr)


def cluster_of(wildcards):
    """What defines the combination's cluster, and nothing else (a price, analysis.alpha or
    gcp.max_clusters is not): the cluster rules run again only when it changes."""
    return CLUSTER_DEFINITIONS[wildcards.combo]


rule cluster_up:
    """Bring up the stack of one combination (pulumi up, wait until ready), write endpoints."""
    input:
        previous=previous_destroyed,
    output:
        temp(f"{CLUSTERS}/{{combo}}/endpoints.json"),
    log:
        "results/logs/cluster_up/{combo}.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        cluster=cluster_of,
        serial_logs="results/logs/cluster_up",
    script:
        "scripts/cluster_up.py"


rule cluster_down:
    """Destroy the stack of one combination once every row that uses it was attempted
    (measured or failed: its status), so a failed row releases it too."""
    input:
        endpoints=f"{CLUSTERS}/{{combo}}/endpoints.json",
        rows=lambda wildcards: expand(
            "results/runs/{run}/status.json", run=runs_of(wildcards.combo)
        ),
    output:
        f"{CLUSTERS}/{{combo}}/destroyed.json",
    log:
        "results/logs/cluster_down/{combo}.log",
    conda:
        "../envs/ybscale.yaml"
    script:
        "scripts/cluster_down.py"
