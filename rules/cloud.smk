# gcp backend: one Pulumi stack per infrastructure combination (included when backend == gcp).
# Rows sharing a combination share its cluster; stacks come up in parallel; a cluster is
# destroyed once every row that needs it is measured (and by destroy_all in `onerror:`).
import json
import os
import sys

from ybscale.backends.gcp import validate_section
from ybscale.plan import format_plan, plan

GCP = validate_section(config)  # config/config.yaml: gcp.<field> errors at parse time
# the rules' CLI reads the config as Snakemake resolved it (--config overrides included)
CLOUD_CONFIG = "results/clusters/config.json"
os.makedirs("results/clusters", exist_ok=True)
with open(CLOUD_CONFIG, "w") as _fh:
    json.dump(config, _fh, indent=2, default=str)
# plan before spending: on every invocation, on stderr (stdout stays clean for --dag etc.)
print(format_plan(plan(DESIGN, config)), file=sys.stderr)


rule cluster_up:
    """Bring up the stack of one combination (pulumi up, wait until ready), write endpoints."""
    output:
        temp("results/clusters/{combo}/endpoints.json"),
    log:
        "results/logs/cluster_up/{combo}.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        config=CLOUD_CONFIG,
    shell:
        "python -m ybscale.backends.gcp up --combo {wildcards.combo}"
        " --config {params.config} --out {output} > {log} 2>&1"


rule cluster_down:
    """Destroy the stack of one combination once every row that uses it is measured."""
    input:
        endpoints="results/clusters/{combo}/endpoints.json",
        rows=lambda wildcards: expand(
            "results/runs/{run}/throughput.csv", run=runs_of(wildcards.combo)
        ),
    output:
        "results/clusters/{combo}/destroyed.json",
    log:
        "results/logs/cluster_down/{combo}.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        config=CLOUD_CONFIG,
    shell:
        "python -m ybscale.backends.gcp down --combo {wildcards.combo}"
        " --config {params.config} --out {output} > {log} 2>&1"
