"""Replication planner: published sample sizes, an independent formula, a simulation."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO
from designs import seed_design, seed_design_path
from scipy import stats
from statsmodels.stats.power import TTestIndPower

from ybscale import study
from ybscale.analysis.effects import estimate_effects
from ybscale.analysis.power import effect_alpha, error_df, parse_size, power, replications_needed
from ybscale.backends.gcp.plan import plan
from ybscale.design.factorial import Design, Factor
from ybscale.design.row import resolve_rows
from ybscale.plan import main as plan_main


@pytest.mark.parametrize(("d", "n"), [(0.8, 26), (0.5, 64), (0.2, 394)])
def test_one_factor_design_matches_cohens_two_sample_table(d, n):
    # a 2^1 design replicated r times is the two-sample t test with r runs per group.
    # Cohen (1988) Table 2.4.1, alpha = .05 two-sided, power .80: d = .8 -> 26, .5 -> 64,
    # .2 -> 393 (394 by the exact noncentral t, as statsmodels and G*Power give)
    r, reached = replications_needed(d, 1.0, n_rows=2, max_r=500)
    assert r == n
    assert reached >= 0.8
    assert np.ceil(TTestIndPower().solve_power(d, alpha=0.05, power=0.8)) == n


def test_power_equals_montgomerys_noncentral_f():
    # Montgomery's OC curves: F(1, df, lambda) with lambda = N delta^2 / (4 sigma^2)
    for n_rows, r, delta, sigma in [(16, 2, 500.0, 800.0), (8, 3, 1.0, 1.0), (32, 2, 0.3, 1.0)]:
        n, df = n_rows * r, error_df(n_rows, r)
        lam = n * delta**2 / (4 * sigma**2)
        expected = stats.ncf.sf(stats.f.ppf(0.95, 1, df), 1, df, lam)
        assert power(delta, sigma, n, df) == pytest.approx(expected, rel=1e-6)


def test_power_matches_the_pipelines_own_t_test_by_simulation():
    # 2^3 design, 2 replications, effect of A = 1.2 sigma: how often does estimate_effects
    # (method t, Holm over the 7 columns by default) flag A active? That frequency is the power
    # the planner promises: the t test at alpha / 7, Holm's first step.
    factors = tuple(Factor(x, f"f{x}", (-1, 1)) for x in "ABC")
    design = Design(factors=factors, replications=2)
    a = design.sign_table()["A"].to_numpy()
    rng = np.random.default_rng(7)
    sims = 400
    hits = 0
    for _ in range(sims):
        y = pd.Series(100 + 0.6 * a + rng.normal(0, 1, len(a)), index=design.run_ids)
        effects = estimate_effects(design, y).set_index("term")
        hits += bool(effects.loc["A", "active"])
    level = effect_alpha(0.05, "holm", design.n_rows, 2)
    assert level == pytest.approx(0.05 / 7)
    expected = power(1.2, 1.0, design.n_runs, error_df(design.n_rows, 2), level)
    assert hits / sims == pytest.approx(expected, abs=0.07)


def test_sizes_in_percent_or_tps():
    assert parse_size("10%", 20_000, "additive")[0] == pytest.approx(2_000)
    assert parse_size("500", 20_000, "additive")[0] == 500
    assert parse_size("10%", 4.0, "multiplicative")[0] == pytest.approx(np.log10(1.1))
    with pytest.raises(ValueError, match="--detect"):
        parse_size("ten", 1, "additive")


def _results(tmp_path, design, effect, **columns):
    """A results folder with effects.csv (every term; Lenth, additive) and ceilings.csv."""
    results = tmp_path / "results"
    results.mkdir()
    table = {"term": design.terms, "effect": effect, **columns}
    pd.DataFrame({**table, "method": "lenth", "model": "additive"}).to_csv(
        results / "effects.csv", index=False
    )
    pd.DataFrame({"run": design.run_ids, "response": 20_000.0}).to_csv(
        results / "ceilings.csv", index=False
    )
    return results


def test_plan_detect_prints_replications_from_the_studys_noise(tmp_path, capsys):
    design = seed_design()
    # an unreplicated study: Lenth's PSE = 400 tps with N = 16 -> sigma = 400 * 4 / 2 = 800
    results = _results(tmp_path, design, np.linspace(-1000, 1000, 15), std_error=400.0)
    (results / "runs" / "run01").mkdir(parents=True)
    (results / "runs" / "run01" / "measurement.json").write_text(
        json.dumps({"started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z"})
    )
    # a row left over from an earlier, larger design: not one of this design's rows, not read
    (results / "runs" / "run99").mkdir(parents=True)
    (results / "runs" / "run99" / "measurement.json").write_text(
        json.dumps({"started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T05:00:00Z"})
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"design: {seed_design_path()}\nbackend: local\n"
        f"workloads: {REPO / 'workloads'}\nmeasurement: {{clients: [1]}}\n"
    )
    code = plan_main(["--config", str(config), "--detect", "10%", "--analysis", str(results)])
    out = capsys.readouterr().out
    assert code == 0
    expected, _ = replications_needed(2_000.0, 800.0, 16)
    assert f"Replications needed: {expected} " in out
    assert "sigma of one run = 800 tps from Lenth's PSE" in out
    minutes = expected * 16  # one-minute rows
    assert f"about {minutes} min of measurement at the measured 60 s per row" in out, out
    assert "gcp:" not in out  # no cost on the local backend
    config.write_text(config.read_text().replace("backend: local", "backend: gcp"))
    assert plan_main(["--config", str(config), "--detect", "10%", "--analysis", str(results)]) == 0
    out = capsys.readouterr().out
    loaded = study.load(yaml.safe_load(config.read_text()))
    replicated = replace(loaded.design, replications=expected)
    cost = plan(resolve_rows(replicated, loaded.settings), loaded.settings)
    assert len(cost.row_seconds) == 16 * expected
    assert f"gcp: {cost.vm_hours():.1f} VM-hours, estimated USD {cost.cost():.2f}" in out


def test_plan_detect_sizes_the_response_asked_for_on_its_own_noise_and_mean(tmp_path, capsys):
    """Two responses of one unreplicated study (effects.csv's `response` column): the ceiling
    (mean 20,000 tps, Lenth's PSE 400 -> sigma 800) and throughput per dollar (mean 40, PSE 2 ->
    sigma 4). `--response throughput_per_dollar` sizes 10 % of 40 = 4 against sigma 4, in the
    response's own unit; without it, the first; an unknown one is named with those there are."""
    design = seed_design()
    results = tmp_path / "results"
    results.mkdir()
    effect = np.linspace(-1, 1, 15)
    lines = [
        {"term": term, "effect": e * scale, "std_error": se, "response": name}
        for name, scale, se in (("ceiling", 1000, 400.0), ("throughput_per_dollar", 2, 2.0))
        for term, e in zip(design.terms, effect, strict=True)
    ]
    table = pd.DataFrame(lines).assign(method="lenth", model="additive")
    table.to_csv(results / "effects.csv", index=False)
    ceilings = {"run": design.run_ids, "response": 20_000.0, "ceiling": 20_000.0}
    pd.DataFrame({**ceilings, "throughput_per_dollar": 40.0}).to_csv(
        results / "ceilings.csv", index=False
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"design: {seed_design_path()}\nbackend: local\n"
        f"workloads: {REPO / 'workloads'}\nmeasurement: {{clients: [1]}}\n"
    )
    args = ["--config", str(config), "--detect", "10%", "--analysis", str(results)]
    assert plan_main([*args, "--response", "throughput_per_dollar"]) == 0
    out = capsys.readouterr().out
    assert "10 % of the mean of throughput per dollar = 4 tps per price/h" in out, out
    assert "sigma of one run = 4 tps per price/h from Lenth's PSE" in out, out
    expected, _ = replications_needed(4.0, 4.0, 16, rule="holm")  # the default multiplicity
    assert f"Replications needed: {expected} " in out
    assert plan_main(args) == 0  # the first response: the ceiling
    out = capsys.readouterr().out
    assert "10 % of the mean of the ceiling = 2,000 tps" in out and "= 800 tps" in out, out
    assert plan_main([*args, "--response", "latency"]) == 1
    err = capsys.readouterr().err
    assert "no response 'latency_at_load_ms' (the table has ceiling, throughput_per_dollar)" in err


def test_plan_detect_sizes_a_split_plot_on_its_noisier_stratum(tmp_path):
    """A split plot's effects.csv lists its largest effect in the sub-plot stratum (standard
    error 100) and the whole-plot columns with 400: the headline σ of one run is the whole-plot
    stratum's, 400 · √16 / 2 = 800 (not the first line's 200); each stratum's line its own."""
    from ybscale.analysis.power import detect_lines, study_noise
    from ybscale.analysis.study_files import StudyFiles

    design = seed_design()
    results = _results(
        tmp_path, design, np.linspace(1000, -1000, 15),
        std_error=[100.0] + [400.0] * 14, stratum=["sub-plot"] + ["whole-plot"] * 14,
    )  # fmt: skip
    noise = study_noise(StudyFiles.under(results, design.run_ids))
    assert noise.sigma == pytest.approx(800.0)
    assert noise.source == "Lenth's PSE of the whole-plot stratum (the noisier)"
    lines = detect_lines(results / "effects.csv", design, 2_000.0, 0.05, " tps")
    assert any("whole-plot columns: sigma of one run 800 tps" in line for line in lines)
    assert any("sub-plot columns: sigma of one run 200 tps" in line for line in lines)
