rule measure:
    """Measure one design row on its cluster, pgbench at every client count: an attempt that
    records ok or failed in status.json, so the cluster is released either way."""
    input:
        cluster=cluster_endpoints,
        settings=SETTINGS_INPUT,
    output:
        status="results/runs/{run}/status.json",
        staged=temp(directory("results/runs/{run}/staged")),
    log:
        "results/logs/measure/{run}.log",
    priority: lambda wildcards: PRIORITY["measure"][STUDY.row(wildcards.run).run]
    conda:
        "../envs/ybscale.yaml"
    resources:
        # one benchmark at a time on this machine; gcp rows run on their cluster's own load
        # generator (one row per cluster at a time, by a lock), so they take no slot here
        bench=1 if BACKEND.loads_here else 0,
    params:
        # what the measurement depends on, by content (measuring_params), and its fingerprint,
        # which the attempt records (a measured row needs no cluster: cluster_endpoints)
        row=lambda wildcards: json.dumps(row_of(wildcards.run)),
        script=lambda wildcards: measuring_params(wildcards.run)["script"],
        code=MEASURE_CODE,
        measurement=json.dumps(MEASURING),
        backend=BACKEND.measuring_settings(SETTINGS),
        fingerprint=lambda wildcards: measured_as(wildcards.run),
        endpoints=lambda wildcards: endpoints_of(wildcards.run),
    shell:
        "python -m ybscale.backends.lifecycle measure --run {wildcards.run} --row {params.row:q}"
        " --measurement {params.measurement:q} --settings {input.settings}"
        " --endpoints {params.endpoints} --status {output.status} --staged {output.staged}"
        " --fingerprint {params.fingerprint}"
        " --log {log}"


rule publish:
    """Publish a row's measurements once its cluster is released, or fail with its error."""
    input:
        status="results/runs/{run}/status.json",
        staged="results/runs/{run}/staged",
        released=cluster_released,
    output:
        throughput=report(
            "results/runs/{run}/throughput.csv",
            caption="../report/measurement.rst",
            category="2. Measurements",
            subcategory="{run}",
        ),
        repetitions="results/runs/{run}/repetitions.csv",
        per_second="results/runs/{run}/per_second.csv",  # nodes added up: the chart's
        measurement=report(
            "results/runs/{run}/measurement.json",
            caption="../report/measurement.rst",
            category="2. Measurements",
            subcategory="{run}",
        ),
    log:
        "results/logs/publish/{run}.log",
    conda:
        "../envs/ybscale.yaml"
    resources:
        bench=ALONE,  # measurement.alone: not beside a measurement on this machine
    shell:
        "python -m ybscale.measure.attempt publish --run {wildcards.run} --status {input.status}"
        " --staged {input.staged} --out results/runs/{wildcards.run} > {log} 2>&1"


rule ceiling:
    """Empirical ceiling, Universal Scalability Law fit, bottleneck and latency of one row."""
    input:
        throughput="results/runs/{run}/throughput.csv",
        repetitions="results/runs/{run}/repetitions.csv",
    output:
        "results/runs/{run}/ceiling.json",
    log:
        "results/logs/ceiling/{run}.log",
    conda:
        "../envs/ybscale.yaml"
    resources:
        bench=ALONE,  # measurement.alone: not beside a measurement on this machine
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
        slo=(
            f"--latency-slo-ms {ANALYSIS['latency_slo_ms']}"
            if ANALYSIS["latency_slo_ms"] is not None
            else ""
        ),
        latency=(
            f"--latency-load {shlex.quote(json.dumps(dict(ANALYSIS['latency_load'])))}"
            f" --latency-percentile {ANALYSIS['latency_percentile']}"
            if "latency" in ANALYSIS["responses"]
            else ""
        ),
    shell:
        "python -m ybscale.analysis.ceiling fit --run {wildcards.run} --throughput {input.throughput}"
        " --repetitions {input.repetitions} {params.slo} {params.latency} --out {output} > {log} 2>&1"


rule run_order:
    """The order rows were actually measured in (start, end), next to the planned one."""
    input:
        design=final_record,
        measurements=lambda wildcards: expand(
            "results/runs/{run}/measurement.json", run=final_runs()
        ),
    output:
        "results/run_order.csv",
    log:
        "results/logs/run_order.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
    shell:
        "python -m ybscale.design.order --design {input.design} --out {output}"
        " {input.measurements} > {log} 2>&1"


rule block:
    """One block of a design in blocks, measured and published (`snakemake --cores 4 block
    --config block=2`: one block per invocation, e.g. one a day); results/effects.csv analyses
    the study once every block is measured."""
    input:
        lambda wildcards: expand(
            "results/runs/{run}/throughput.csv",
            run=sorted(runs_of_block(DESIGN, config.get("block"))),
        ),
