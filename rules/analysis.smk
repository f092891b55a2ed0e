rule ceilings:
    """One line per row: signs, both ceilings and the response the effects use."""
    input:
        design=final_record,
        ceilings=lambda wildcards: expand(
            "results/runs/{run}/ceiling.json", run=final_runs()
        ),
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
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
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
        design=final_record,
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
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
        alpha=ANALYSIS["alpha"],
        model=ANALYSIS["model"],
        multiplicity=ANALYSIS["multiplicity"],
        relevant=shlex.quote(str(ANALYSIS["relevant"])),
        responses=" ".join(RESPONSES),
    shell:
        "python -m ybscale.analysis.analyze --design {input.design} --responses {input.ceilings}"
        " --response {params.responses} --alpha {params.alpha} --model {params.model}"
        " --multiplicity {params.multiplicity} --relevant {params.relevant}"
        " --run-order {input.run_order} --effects {output.effects} --anova {output.anova}"
        " --residuals {output.residuals} --outliers {output.outliers} --no-charts > {log} 2>&1"


checkpoint round:
    """The study's checkpoint after round n (ybscale.analysis.rounds): its runs analysed as the
    rules below analyse the study, every column judged against analysis.relevant; another
    replicate of every row while a column is undecided and measurement.budget allows."""
    input:
        design=DESIGN_RECORD,
        ceilings=lambda wildcards: expand(
            "results/runs/{run}/ceiling.json", run=runs_of_round(wildcards.n)
        ),
        measurements=lambda wildcards: expand(
            "results/runs/{run}/measurement.json", run=runs_of_round(wildcards.n)
        ),
    output:
        decided="results/rounds/round{n}.json",
        design="results/rounds/round{n}/design.json",
    log:
        "results/logs/round{n}.log",
    conda:
        "../envs/ybscale.yaml"
    resources:
        bench=ALONE,  # measurement.alone: not beside a measurement on this machine
    params:
        code=ANALYSIS_CODE,  # a changed ybscale re-analyses (protocol.analysis_code)
        replicates=lambda wildcards: BASE_REPLICATES + int(wildcards.n),
        most=MOST_REPLICATES,
        budget=shlex.quote(json.dumps(SETTINGS["measurement"]["budget"])),
        backend=BACKEND.name,
        ceiling=ANALYSIS["ceiling"],
        prices=f"--prices {shlex.quote(PRICES)}" if PRICES else "",
        responses=" ".join(RESPONSES),
        alpha=ANALYSIS["alpha"],
        model=ANALYSIS["model"],
        multiplicity=ANALYSIS["multiplicity"],
        relevant=shlex.quote(str(ANALYSIS["relevant"])),
    shell:
        "python -m ybscale.analysis.rounds --design {input.design} --round {wildcards.n}"
        " --replicates {params.replicates} --most {params.most} --budget {params.budget}"
        " --backend {params.backend} --ceiling {params.ceiling} {params.prices}"
        " --responses {params.responses} --alpha {params.alpha} --model {params.model}"
        " --multiplicity {params.multiplicity} --relevant {params.relevant}"
        " --folder results/rounds/round{wildcards.n} --out {output.decided}"
        " --measurements {input.measurements} --ceilings {input.ceilings} > {log} 2>&1"
