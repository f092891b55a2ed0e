rule measure:
    """Measure one design row on its own cluster: pgbench at every client count."""
    input:
        script=workload_script,
        code=MEASURE_CODE,
        cluster=cluster_endpoints,
    output:
        throughput=report(
            "results/runs/{run}/throughput.csv",
            caption="../report/measurement.rst",
            category="2. Measurements",
            subcategory="{run}",
        ),
        repetitions="results/runs/{run}/repetitions.csv",
        measurement=report(
            "results/runs/{run}/measurement.json",
            caption="../report/measurement.rst",
            category="2. Measurements",
            subcategory="{run}",
        ),
    log:
        "results/logs/measure/{run}.log",
    conda:
        "../envs/ybscale.yaml"
    resources:
        bench=1,
    params:
        levels=lambda wildcards: row_levels(wildcards.run),
        measurement=config["measurement"],
        backend=backend_settings(),
    script:
        "scripts/measure.py"


rule ceiling:
    """Empirical ceiling and Universal Scalability Law fit of one row."""
    input:
        "results/runs/{run}/throughput.csv",
    output:
        "results/runs/{run}/ceiling.json",
    log:
        "results/logs/ceiling/{run}.log",
    conda:
        "../envs/ybscale.yaml"
    shell:
        "python -m ybscale.ceiling fit --run {wildcards.run} --throughput {input}"
        " --out {output} > {log} 2>&1"
