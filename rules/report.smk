rule charts:
    """Every chart, in one job (altair and vl-convert start once): throughput against clients
    and second by second for every row; Pareto, half-normal, interaction and residual charts;
    a panel per response (analysis.responses), each column's estimate with its interval.
    """
    input:
        design=final_record,
        ceilings="results/ceilings.csv",
        effects=rules.analyze.output.effects,
        residuals=rules.analyze.output.residuals,
        curves=lambda wildcards: expand(
            "results/runs/{run}/throughput.csv", run=final_runs()
        ),
        per_second=lambda wildcards: expand(
            "results/runs/{run}/per_second.csv", run=final_runs()
        ),
        measurements=lambda wildcards: expand(
            "results/runs/{run}/measurement.json", run=final_runs()
        ),
    output:
        throughput=report(
            "results/charts/throughput.svg",
            caption="../report/throughput.rst",
            category="2. Measurements",
        ),
        per_second=report(
            "results/charts/per_second.svg",
            caption="../report/per_second.rst",
            category="2. Measurements",
        ),
        pareto=report(
            "results/charts/pareto.svg",
            caption="../report/pareto.rst",
            category="3. Effects",
        ),
        half_normal=report(
            "results/charts/half_normal.svg",
            caption="../report/half_normal.rst",
            category="3. Effects",
        ),
        interactions=report(
            directory("results/charts/interactions"),
            patterns=["{name}.svg"],
            caption="../report/interactions.rst",
            category="3. Effects",
        ),
        responses=report(
            "results/charts/responses.svg",
            caption="../report/responses.rst",
            category="3. Effects",
        ),
        residual_charts=report(
            directory("results/charts/residuals"),
            patterns=["{name}.svg"],
            caption="../report/residuals.rst",
            category="4. Diagnostics",
        ),
    log:
        "results/logs/charts.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
        runs=lambda wildcards, input: " ".join(
            os.path.dirname(path) for path in input.curves
        ),
    shell:
        "python -m ybscale.report.study_charts --design {input.design}"
        " --ceilings {input.ceilings} --effects {input.effects} --residuals {input.residuals}"
        " --pareto {output.pareto} --half-normal {output.half_normal}"
        " --interactions {output.interactions} --residual-charts {output.residual_charts}"
        " --responses {output.responses} --throughput {output.throughput}"
        " --per-second {output.per_second} {params.runs} > {log} 2>&1"


rule findings:
    """The findings page (the report's first page), from the results."""
    input:
        design=final_record,
        effects=rules.analyze.output.effects,
        ceilings="results/ceilings.csv",
        outliers=rules.analyze.output.outliers,
        anova=rules.analyze.output.anova,
        measurements=lambda wildcards: expand(
            "results/runs/{run}/measurement.json", run=final_runs()
        ),
        curves=lambda wildcards: expand(
            "results/runs/{run}/throughput.csv", run=final_runs()
        ),
        decided=final_decision,
    output:
        findings=report(
            "results/findings.md",
            caption="../report/findings.rst",
            category="0. Findings",
        ),
        findings_page="results/report/findings.rst",
    log:
        "results/logs/findings.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
        alpha=ANALYSIS["alpha"],
        ceiling=ANALYSIS["ceiling"],
        slo=(
            f"--latency-slo-ms {ANALYSIS['latency_slo_ms']}"
            if ANALYSIS["latency_slo_ms"] is not None
            else ""
        ),
        runs=lambda wildcards, input: " ".join(
            os.path.dirname(path) for path in input.curves
        ),
    shell:
        "python -m ybscale.report.findings --design {input.design} --effects {input.effects}"
        " --ceilings {input.ceilings} --outliers {input.outliers} --anova {input.anova}"
        " --alpha {params.alpha} --ceiling {params.ceiling} {params.slo} --out {output.findings}"
        " --rounds {input.decided} --rst {output.findings_page} {params.runs} > {log} 2>&1"


rule design_page:
    """The report's design page: factors, aliases, each column's error stratum, the clusters
    (each with the replication factor its rows' measurement.json records)."""
    input:
        design=final_record,
        effects=rules.analyze.output.effects,
        measurements=lambda wildcards: expand(
            "results/runs/{run}/measurement.json", run=final_runs()
        ),
    output:
        "results/report/design.rst",
    log:
        "results/logs/design_page.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
        runs=lambda wildcards, input: " ".join(
            os.path.dirname(path) for path in input.measurements
        ),
    shell:
        "python -m ybscale.report.design_report --design {input.design}"
        " --effects {input.effects} --out {output} {params.runs} > {log} 2>&1"


rule effects:
    """The study, published: the analysis' tables move into results/ once the design, the
    charts and the findings that read them are written (what `snakemake --report` shows).
    """
    input:
        tables=rules.analyze.output,
        design=rules.design.output,
        charts=rules.charts.output,
        findings=rules.findings.output,
        design_page=rules.design_page.output,
    output:
        effects=report(
            "results/effects.csv",
            caption="../report/effects.rst",
            category="3. Effects",
        ),
        anova=report(
            "results/anova.csv", caption="../report/anova.rst", category="3. Effects"
        ),
        residuals="results/residuals.csv",
        outliers=report(
            "results/outliers.csv",
            caption="../report/outliers.rst",
            category="4. Diagnostics",
        ),
    log:
        "results/logs/effects.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
    shell:
        "python -m ybscale.files publish --into results {input.tables} > {log} 2>&1"
