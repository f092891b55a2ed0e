"""Measuring rule: one design row on its own cluster (see ybscale.bench.measure_job)."""

from ybscale.bench import measure_job

measure_job(snakemake)  # noqa: F821 - injected by Snakemake's script directive
