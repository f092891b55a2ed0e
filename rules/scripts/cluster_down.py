"""cluster_down rule: destroy one combination's stack (see ybscale.backends.gcp.clusters.job)."""

from ybscale.backends.gcp.clusters import job

job(snakemake, "down")  # noqa: F821 - injected by Snakemake's script directive
