"""Replications needed to detect an effect of a given size, from the study's own noise.

In a two-level design with N = n_rows·r runs an effect is a difference of two means of N/2 runs,
so its standard error is 2σ/√N (σ: the standard deviation of one run's response). An effect δ is
found by the two-sided t test at level α with power

    1 − β = P(|T| > t(1−α/2, ν)),  T ~ noncentral t(ν, δ√N / (2σ))

(scipy's ``nct``; Montgomery's operating characteristic curves use the equivalent noncentral
F(1, ν, Nδ²/(4σ²))). ν is the pure-error df n_rows·(r−1) for r ≥ 2; with r = 1 there is no pure
error and the test is Lenth's with the one rule's critical value (Ye & Hamada's IER for
m = n_rows−1 columns, `lenth_critical`): ν is the df whose t quantile is that value
(`lenth_critical.equivalent_df`; about 13 for m = 15, where Lenth's own approximation says
5). Replicated designs adjust for the m columns tested (``analysis.multiplicity``): the planner
then asks for the level a lone effect must clear, α/m under holm and bh (their first step; a
lower bound on the power when several effects are real), α under none.

σ comes from the study itself, in this order: the replicate (pure) error when the design was
replicated (effects.csv ``method = t``: std_error = 2σ/√N), else Lenth's pseudo standard error of
the effects (``method = lenth``: PSE estimates 2σ/√N from the small effects; it includes every
small real effect, so it is conservative), else nothing. The spread of the repetitions inside a row
is printed next to it: it is measurement noise only, a lower bound for σ, since rows differ by more
than their repetitions do (each row gets its own cluster).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import nctdtr, stdtrit  # scipy.stats' own t and noncentral t, fast

from ybscale.analysis import multiplicity as mult
from ybscale.analysis.ceiling import full_repetitions
from ybscale.analysis.study_files import StudyFiles
from ybscale.analysis.terms import RESPONSE_COLUMNS, of_response, response_words
from ybscale.design.strata import SUB, WHOLE, stratified

POWER = 0.8
MAX_REPLICATIONS = 64


@dataclass(frozen=True)
class Noise:
    """σ of one run's response and where it came from."""

    sigma: float
    source: str  # "replicate error" | "Lenth's PSE"
    runs: int  # N of the analysed study
    mean: float  # grand mean of the analysed response (on the model's scale)
    model: str = "additive"
    repetition_sigma: float = math.nan  # within-row spread, lower bound


def error_df(n_rows: int, r: int, alpha: float = 0.05) -> float:
    """Degrees of freedom of the test: pure error for r >= 2; for r = 1 Lenth's test by the one
    rule, the df whose t quantile is the IER critical value of the n_rows − 1 columns (NaN
    with fewer than MIN_COLUMNS of them: not tested)."""
    from ybscale.analysis.lenth_critical import equivalent_df
    from ybscale.design.strata import MIN_COLUMNS

    if r >= 2:
        return n_rows * (r - 1)
    return equivalent_df(n_rows - 1, alpha) if n_rows - 1 >= MIN_COLUMNS else math.nan


def power(delta: float, sigma: float, n_runs: int, df: float, alpha: float = 0.05) -> float:
    """Power of the two-sided t test of an effect delta with N runs and df error df (0 for df
    NaN: a column no test judges)."""
    if math.isnan(df):
        return 0.0
    if not (sigma > 0 and df > 0):
        raise ValueError(f"need sigma > 0 and df > 0, got sigma={sigma}, df={df}")
    ncp = abs(delta) * math.sqrt(n_runs) / (2.0 * sigma)
    crit = stdtrit(df, 1.0 - alpha / 2.0)
    return float((1.0 - nctdtr(df, ncp, crit)) + nctdtr(df, ncp, -crit))


def duration(seconds: float) -> str:
    """A time as a reader takes it in: '40 s', '12 min', '3.4 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def effect_alpha(alpha: float, rule: str, n_rows: int, r: int) -> float:
    """The level one effect is tested at: Lenth's per-column α for r = 1, else the rule's."""
    return alpha if r < 2 else mult.column_alpha(alpha, rule, n_rows - 1)


def replications_needed(
    delta: float,
    sigma: float,
    n_rows: int,
    alpha: float = 0.05,
    target: float = POWER,
    max_r: int = MAX_REPLICATIONS,
    rule: str = "none",
) -> tuple[int | None, float]:
    """Smallest r (1..max_r) whose power reaches target, and that power (None if none does);
    `rule` is the multiplicity adjustment of replicated designs (r >= 2)."""
    best = math.nan
    for r in range(1, max_r + 1):
        level = effect_alpha(alpha, rule, n_rows, r)
        best = power(delta, sigma, n_rows * r, error_df(n_rows, r, alpha), level)
        if best >= target:
            return r, best
    return None, best


def parse_size(
    text: str, mean: float, model: str, what: str = "the ceiling", unit: str = "tps"
) -> tuple[float, str]:
    """``"10%"`` -> 10 % of the mean response; ``"500"`` -> 500 (`unit`, tps for the ceiling);
    on the model's scale."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not match:
        raise ValueError(f"--detect: {text!r} is not a size like 10% or 500 ({unit})")
    value, pct = float(match.group(1)), bool(match.group(2))
    if value <= 0:
        raise ValueError(f"--detect: the effect size must be positive, got {text!r}")
    if model == "multiplicative":
        ratio = 1 + value / 100 if pct else 1 + value / (10**mean)
        return math.log10(ratio), f"×{ratio:.3g} (log10 {math.log10(ratio):.4g})"
    delta = value / 100 * mean if pct else value
    amount = f"{delta:,.0f} {unit}" if abs(delta) >= 100 else f"{delta:.3g} {unit}"
    amount = amount.rstrip()
    label = f"{value:g} % of the mean of {what} = {amount}" if pct else amount
    return delta, label


def _repetition_sigma(runs: dict[str, Path], ceilings: pd.DataFrame) -> float:
    """Pooled standard deviation of the repetitions at each row's ceiling client count."""
    variances, dfs = [], []
    for _, row in ceilings.iterrows():
        folder = runs.get(str(row["run"]))
        path = folder / "repetitions.csv" if folder is not None else None
        if path is None or not path.is_file() or "empirical_clients" not in row:
            continue
        reps = pd.read_csv(path)
        reps = reps[full_repetitions(reps)]  # the economy sweep's probes rank counts only
        tps = reps.loc[reps["clients"] == row["empirical_clients"], "tps"]
        if len(tps) >= 2:
            variances.append(float(tps.var(ddof=1)) * (len(tps) - 1))
            dfs.append(len(tps) - 1)
    return math.sqrt(sum(variances) / sum(dfs)) if dfs else math.nan


def study_noise(files: StudyFiles, response: str | None = None) -> Noise:
    """σ of one run of `response` (the main one when None) from the effects table, and its
    mean from the ceilings table."""
    effects = of_response(pd.read_csv(files.effects), response)
    terms = effects[effects["term"].astype(str) != "error"]
    ceilings = pd.read_csv(files.ceilings)
    n = len(ceilings)
    model = str(terms["model"].iloc[0]) if "model" in terms else "additive"
    name = str(effects["response"].iloc[0]) if "response" in effects else "response"
    y = ceilings[name if name in ceilings else "response"].astype(float)
    mean = float(np.log10(y).mean() if model == "multiplicative" else y.mean())
    se = float(terms["std_error"].dropna().iloc[0]) if terms["std_error"].notna().any() else 0.0
    where = ""
    if stratified(terms):  # each stratum has its σ: size for the noisier one, not the first row's
        by = terms[terms["stratum"].isin([WHOLE, SUB])].groupby("stratum")["std_error"].max()
        se, where = float(by.max()), f" of the {by.idxmax()} stratum (the noisier)"
    method = str(terms["method"].iloc[0])
    if not se > 0:
        raise ValueError(
            f"{files.effects}: no noise estimate (std_error {se}); "
            "replicate the design or check the effects table"
        )
    source = ("replicate error" if method == "t" else "Lenth's PSE") + where
    rep = _repetition_sigma(files.runs, ceilings)
    return Noise(se * math.sqrt(n) / 2.0, source, n, mean, model, rep)


def _row_hours(runs: dict[str, Path]) -> float:
    """Mean measured wall time of one row (hours) from measurement.json start/finish times."""
    spans = []
    for folder in runs.values():
        path = folder / "measurement.json"
        if not path.is_file():
            continue
        meta = json.loads(path.read_text(encoding="utf-8"))
        if meta.get("started") and meta.get("finished"):
            start = pd.Timestamp(meta["started"])
            spans.append((pd.Timestamp(meta["finished"]) - start).total_seconds())
    return float(np.mean(spans)) / 3600 if spans else math.nan


def detect(
    text: str, design, config: dict, files: StudyFiles, cost=None, response: str | None = None
) -> str:
    """The `ybscale plan --detect SIZE` report on `response` (the main one when None);
    `cost(replications)` adds a cost line (gcp)."""
    response = RESPONSE_COLUMNS.get(response, response)  # analysis.responses' name or the column
    noise = study_noise(files, response)
    what, unit, *_ = response_words(response or "ceiling")
    alpha = float(config["analysis"]["alpha"])
    rule = config["analysis"].get("multiplicity", mult.DEFAULT)
    delta, label = parse_size(text, noise.mean, noise.model, what, unit)
    r, reached = replications_needed(delta, noise.sigma, design.n_rows, alpha, rule=rule)
    reps = design.replications
    level = effect_alpha(alpha, rule, design.n_rows, reps)
    now = power(delta, noise.sigma, noise.runs, error_df(design.n_rows, reps, alpha), level)
    unit = "" if noise.model == "multiplicative" or not unit else f" {unit}"
    adjusted = (
        f" (replicated: each of the {design.n_rows - 1} columns at alpha/{design.n_rows - 1}, "
        f"the first step of {rule})"
        if rule != "none"
        else ""
    )
    lines = [
        f"Effect to detect: {label}; alpha {alpha:g}{adjusted}, power {POWER:g}, two-sided t test.",
        f"Noise: sigma of one run = {noise.sigma:,.4g}{unit} from {noise.source} "
        f"({noise.runs} runs of {files.describe()})"
        + (
            f"; repetitions inside a row spread by {noise.repetition_sigma:,.4g}{unit} "
            "(measurement noise only, a lower bound)"
            if math.isfinite(noise.repetition_sigma)
            else ""
        )
        + ".",
        f"Power of the study as run ({design.replications} replication(s)): {now:.2f}.",
        *detect_lines(files.effects, design, delta, alpha, unit, response),
    ]
    if r is None:
        lines.append(
            f"Not reachable within {MAX_REPLICATIONS} replications (power {reached:.2f}): "
            "the effect is small against this noise; reduce the noise first."
        )
        return "\n".join(lines)
    runs = r * design.n_rows
    lines.append(
        f"Replications needed: {r} ({runs} runs of {design.n_rows} rows; power {reached:.2f})."
    )
    hours = _row_hours(files.runs)
    if math.isfinite(hours):
        lines.append(
            f"Time: about {duration(runs * hours * 3600)} of measurement at the measured "
            f"{duration(hours * 3600)} per row (the original runs can be kept as replicate 1)."
        )
    if cost is not None:
        lines.append(cost(r))
    return "\n".join(lines)


def detect_lines(
    effects_path, design, delta: float, alpha: float, unit: str = "", response: str | None = None
) -> list[str]:
    """`plan --detect` per stratum: replications to detect `delta` against each stratum's σ."""
    effects = of_response(pd.read_csv(effects_path), response)
    if not stratified(effects):
        return []
    n = design.n_runs
    lines = []
    for stratum in (WHOLE, SUB):
        se = effects.loc[effects["stratum"] == stratum, "std_error"].dropna()
        if se.empty:
            lines.append(f"  {stratum} columns: too few for a noise estimate; not sized.")
            continue
        sigma = float(se.iloc[0]) * math.sqrt(n) / 2.0
        r, reached = replications_needed(delta, sigma, design.n_rows, alpha)
        need = f"{r} replication(s) (power {reached:.2f})" if r else "not reachable"
        lines.append(f"  {stratum} columns: sigma of one run {sigma:,.4g}{unit}; {need}.")
    return [
        "Per error stratum (the study's columns were judged in two strata; the whole-plot "
        "sizing assumes each replicate gets clusters of its own, gcp's default "
        "gcp.cluster_per_replicate, since replicates on the same cluster do not average out "
        "its noise):",
        *lines,
    ]
