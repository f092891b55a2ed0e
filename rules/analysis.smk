rule ceilings:
    """One line per row: signs, both ceilings and the response the effects use."""
    input:
        design=DESIGN_RECORD,
        ceilings=expand("results/runs/{run}/ceiling.json", run=RUNS),
    output:
        report(
            "results/ceilings.csv",
            caption="../report/ceilings.rst",
            category="2. Measurements",
        ),
    log:
        "results/logs/ceilings.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        ceiling=ANALYSIS["ceiling"],
        prices=f"--prices {shlex.quote(PRICES)}" if PRICES else "",
    shell:
        "python -m ybscale.analysis.ceiling collect --design {input.design} --ceiling {params.ceiling}"
        " {params.prices} --out {output} {input.ceilings} > {log} 2>&1"


rule analyze:
    """Effects, allocation of variation, ANOVA, residuals and outliers of the response, staged
    in results/analysis/ for the charts and the findings (the effects rule publishes them).
    """
    input:
        design=DESIGN_RECORD,
        ceilings="results/ceilings.csv",
        run_order="results/run_order.csv",
    output:
        effects=temp(f"{STAGED}/effects.csv"),
        anova=temp(f"{STAGED}/anova.csv"),
        residuals=temp(f"{STAGED}/residuals.csv"),
        outliers=temp(f"{STAGED}/outliers.csv"),
    log:
        "results/logs/analyze.log",
    conda:
        "../envs/ybscale.yaml"
    params:
        alpha=ANALYSIS["alpha"],
        model=ANALYSIS["model"],
        multiplicity=ANALYSIS["multiplicity"],
        responses=" ".join(RESPONSES),
    shell:
        "python -m ybscale.analysis.analyze --design {input.design} --responses {input.ceilings}"
        " --response {params.responses} --alpha {params.alpha} --model {params.model}"
        " --multiplicity {params.multiplicity}"
        " --run-order {input.run_order} --effects {output.effects} --anova {output.anova}"
        " --residuals {output.residuals} --outliers {output.outliers} --no-charts > {log} 2>&1"
