from ybscale.order import planned_order, priorities

# the order rows are measured in: drawn from measurement.seed, one block per replicate
RUN_PLAN = planned_order(
    DESIGN.sign_table(),
    config["measurement"].get("order", "random"),
    config["measurement"].get("seed", 0),
)
RUN_PRIORITY = priorities(RUN_PLAN)


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
    priority: lambda wildcards: RUN_PRIORITY[known_run(wildcards.run)]
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
        throughput="results/runs/{run}/throughput.csv",
        repetitions="results/runs/{run}/repetitions.csv",
    output:
        "results/runs/{run}/ceiling.json",
    log:
        "results/logs/ceiling/{run}.log",
    conda:
        "../envs/ybscale.yaml"
    shell:
        "python -m ybscale.ceiling fit --run {wildcards.run} --throughput {input.throughput}"
        " --repetitions {input.repetitions} --out {output} > {log} 2>&1"


rule run_order:
    """The order rows were actually measured in (start, end), next to the planned one."""
    input:
        design=config["design"],
        measurements=expand("results/runs/{run}/measurement.json", run=RUNS),
    output:
        "results/run_order.csv",
    log:
        "results/logs/run_order.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        order=config["measurement"].get("order", "random"),
        seed=config["measurement"].get("seed", 0),
    shell:
        "python -m ybscale.order --design {input.design} --order {params.order}"
        " --seed {params.seed} --out {output} {input.measurements} > {log} 2>&1"
