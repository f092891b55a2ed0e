"""cluster_down rule: release one cluster (see ybscale.backends.lifecycle.down_job)."""

from ybscale.backends.lifecycle import down_job

down_job(snakemake)  # noqa: F821 - injected by Snakemake's script directive
