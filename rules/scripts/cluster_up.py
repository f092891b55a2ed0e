"""cluster_up rule: bring one combination's stack up (see ybscale.backends.gcp.clusters.job)."""

from ybscale.backends.gcp.clusters import job

job(snakemake, "up")  # noqa: F821 - injected by Snakemake's script directive
