"""cluster_up rule: bring one cluster up (see ybscale.backends.lifecycle.up_job)."""

from ybscale.backends.lifecycle import up_job

up_job(snakemake)  # noqa: F821 - injected by Snakemake's script directive
