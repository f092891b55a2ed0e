"""Measuring rule: one design row on its cluster (see ybscale.measure.bench.measure_job)."""

from ybscale.measure.bench import measure_job

measure_job(snakemake)  # noqa: F821 - injected by Snakemake's script directive
