"""ANOVA with pooling, residual diagnostics and outliers against published / hand numbers."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from designs import seed_design

from ybscale.analysis.analyze import read_responses
from ybscale.analysis.anova import ANOVA_COLUMNS, RESIDUAL_COLUMNS, fit_anova, outliers
from ybscale.design.factorial import design_from_dict

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "stats"
FACTORS = {x: {"name": f"f{x}", "levels": ["-", "+"]} for x in "ABCD"}


def _fit(spec: dict, csv: str, response=None, **kwargs):
    design = design_from_dict(spec, csv)
    responses = read_responses(DATA / csv, design, response)
    return design, fit_anova(design, responses[responses.attrs["response"]], **kwargs)


def test_montgomery_example_6_2_pooled_anova():
    """Lenth keeps A, C, D, AC, AD: Montgomery's reduced-model ANOVA (Example 6.2)."""
    _, result = _fit({"factors": FACTORS}, "montgomery_ex6_2.csv")
    table = result.table.set_index("term")
    assert list(result.table.columns) == ANOVA_COLUMNS
    assert set(result.pooled) == {"B", "AB", "BC", "ABC", "BD", "ABD", "CD", "ACD", "BCD", "ABCD"}
    published = {"A": 1870.56, "C": 390.06, "D": 855.56, "AC": 1314.06, "AD": 1105.56}
    for term, ss in published.items():
        assert table.loc[term, "sum_sq"] == pytest.approx(ss, abs=0.01)
        assert not table.loc[term, "pooled"]
        assert table.loc[term, "F"] == pytest.approx(ss / (195.13 / 10), rel=1e-3)
    assert table.loc["residual", "df"] == 10
    assert table.loc["residual", "sum_sq"] == pytest.approx(195.13, abs=0.01)
    assert table.loc["B", "pooled"] and math.isnan(table.loc["B", "F"])
    assert table.loc["B", "sum_sq"] == pytest.approx(16 * (3.125 / 2) ** 2)
    kept = table[~table["pooled"]]
    assert kept["sum_sq"].sum() == pytest.approx(5730.94, abs=0.01)  # published SS total


def test_jain_replicated_anova_has_pure_error():
    spec = {
        "factors": {
            "A": {"name": "memory", "levels": [4, 16]},
            "B": {"name": "cache", "levels": [1, 2]},
        },
        "replications": 3,
    }
    _, result = _fit(spec, "jain_ch18_memory_cache.csv")
    table = result.table.set_index("term")
    assert result.pooled == []
    assert table.loc["residual", "df"] == 8
    assert table.loc["residual", "mean_sq"] == pytest.approx(102 / 8)
    for term, ss in {"A": 5547, "B": 1083, "AB": 300}.items():
        assert table.loc[term, "F"] == pytest.approx(ss / 12.75)
    # F(1, 8) = 23.53 for AB: p = 0.00127 (F tables: F[0.99; 1, 8] = 11.26, F[0.999; 1, 8] = 25.4)
    assert 0.001 < table.loc["AB", "p_value"] < 0.01
    res = result.residuals
    assert list(res.columns) == RESIDUAL_COLUMNS
    # residuals = y - row mean: row 3 (A-, B+; mean 24) replicate 3 is 19 -> -5
    row3 = res[(res["row"] == 3) & (res["replicate"] == 3)].iloc[0]
    assert row3["run"] == "run11" and row3["residual"] == pytest.approx(-5)
    # internally studentized: e / sqrt(MSE (1 - h)), h = 1/3
    assert row3["standardized"] == pytest.approx(-5 / math.sqrt(12.75 * (2 / 3)))
    assert list(res["order"]) == list(range(1, 13))
    assert outliers(res).empty


def test_nothing_active_pools_everything():
    """Montgomery Problem 8.1: no effect beyond Lenth's ME (22.59): all 7 terms pooled."""
    spec = {"factors": FACTORS, "generators": {"D": "ABC"}}
    _, result = _fit(spec, "montgomery_prob8_1.csv")
    table = result.table.set_index("term")
    assert table.loc[result.pooled, "pooled"].all() and len(result.pooled) == 7
    assert table["F"].isna().all()
    assert table.loc["residual", "df"] == 7
    assert table.loc["residual", "sum_sq"] == pytest.approx(448.0)  # published Cor Total


def test_seed_run13_is_flagged_as_outlier():
    """Seed Table 5 run 13 (2931 with A+ B+ C- D-; runs 14-16 are ~1000) -> Yates run04."""
    design = seed_design()
    responses = read_responses(DATA / "seed_table5.csv", design, "throughput_ceiling")
    result = fit_anova(design, responses["throughput_ceiling"])
    assert sorted(result.pooled) == sorted(set(design.terms) - {"A", "B"})
    flagged = outliers(result.residuals)
    assert list(flagged["run"]) == ["run04"]
    row = flagged.iloc[0]
    assert row["observed"] == 2931
    assert design.signs("run04") == {"A": 1, "B": 1, "C": -1, "D": -1, "E": -1, "F": 1}
    # fitted = mean + (A + B) / 2 with A = -963.125, B = -1102.125;
    # mean = (A- sum 25332 + A+ sum 17627) / 16 = 2684.9375 -> fitted 1652.3125
    fitted = (25332 + 17627) / 16 + (-963.125 - 1102.125) / 2
    assert row["fitted"] == pytest.approx(fitted)
    assert row["bonferroni_p"] < 0.05


def test_spike_is_flagged_and_clean_runs_are_not():
    design = design_from_dict({"factors": FACTORS})
    signs = design.sign_table()
    rng = np.random.default_rng(7)
    y = 100 + 20 * signs["A"] + 10 * signs["B"] + rng.normal(0, 1, 16)
    y.iloc[9] += 25
    flagged = outliers(fit_anova(design, y).residuals)
    assert list(flagged["run"]) == ["run10"]


def test_saturated_without_pooling_has_nan_tests():
    """Nothing to pool into an error: F and p are NaN, residual df 0. An unreplicated 2^2 has
    three columns, too few for Lenth (none judged, none pooled: issue 47's one rule)."""
    design = design_from_dict({"factors": {"A": FACTORS["A"], "B": FACTORS["B"]}})
    # effects A = 40, B = 20, AB = 10
    y = pd.Series([15.0, 45.0, 25.0, 75.0], index=design.run_ids)
    result = fit_anova(design, y)
    assert result.pooled == []
    table = result.table.set_index("term")
    assert table.loc["residual", "df"] == 0 and table[["F", "p_value"]].isna().all().all()
    # force the no-pooling path through a replicated design with zero pure error
    rep = design_from_dict({"factors": {"A": FACTORS["A"], "B": FACTORS["B"]}, "replications": 2})
    result = fit_anova(rep, pd.Series([15.0, 45.0, 25.0, 75.0] * 2, index=rep.run_ids))
    table = result.table.set_index("term")
    assert table.loc["residual", "sum_sq"] == pytest.approx(0.0, abs=1e-9)
    assert table.loc["residual", "df"] == 4
    assert not result.residuals["outlier"].any()


@pytest.mark.parametrize("replications", [1, 2])
def test_external_residuals_match_statsmodels_refit_per_run(replications):
    """The deletion identity gives what outlier_test's leave-one-out refits give (pooled
    unreplicated model and full replicated model with blocks)."""
    from ybscale.analysis.anova import _fit, externally_studentized, pooled_terms

    design = design_from_dict({"factors": FACTORS, "replications": replications})
    x = design.model_matrix()
    rng = np.random.default_rng(11)
    y = 50 + 8 * x["A"] - 5 * x["AC"] + rng.normal(0, 2, design.n_runs)
    y.iloc[5] += 9
    blocks = replications > 1
    kept = [t for t in design.terms if t not in pooled_terms(design, y)]
    fit = _fit(design, y, kept, blocks)
    external, bonf = externally_studentized(fit, fit.get_influence())
    refit = fit.outlier_test(method="bonf")
    assert np.allclose(external, refit["student_resid"])
    assert np.allclose(bonf, refit["bonf(p)"])
    residuals = fit_anova(design, y, blocks=blocks).residuals
    assert np.allclose(residuals["studentized_external"], refit["student_resid"])


# ------------------------------------------------------------------ split plot (issue 19)

SPLIT = {"factors": {f: {"name": f.lower(), "levels": [0, 1]} for f in "ABCD"}}


def _split_plot(replications: int):
    """2^4 with A, B on the cluster (whole plot) and C, D within it: a cluster per (A, B) and
    replicate, 4 runs each."""
    from ybscale.design.strata import column_strata

    design = design_from_dict({**SPLIT, "replications": replications}, "split")
    signs = design.sign_table()
    clusters = {r: f"A{s['A']}B{s['B']}r{s['replicate']}" for r, s in signs.iterrows()}
    return design, signs, clusters, column_strata(design, clusters)


def _generated(design, signs, clusters, rng, a=0.0, c=0.0, sigma_whole=3.0):
    """50 + a/2·A + c/2·C + a cluster's shift (σ_whole) + a run's noise (σ = 1)."""
    shift = {k: rng.normal(0, sigma_whole) for k in sorted(set(clusters.values()))}
    y = [
        50 + a / 2 * signs.loc[r, "A"] + c / 2 * signs.loc[r, "C"] + shift[clusters[r]]
        + rng.normal()
        for r in signs.index
    ]  # fmt: skip
    return pd.Series(y, index=design.run_ids)


def test_split_plot_anova_tests_each_stratum_against_its_own_error():
    """σ_whole = 3·σ: a moderate whole-plot effect (A, 2.5) is not significant against the
    whole-plot error (8 df) while the naive pooled test (pure error, 30 df) calls it so; a
    sub-plot effect (C, 1.5) is found against the residual within clusters and missed by the
    naive test. The F tests equal the hand formulas and MixedLM's t² (REML, balanced)."""
    from ybscale.analysis.effects import estimate_effects
    from ybscale.analysis.strata import judge, mixed
    from ybscale.analysis.terms import WHOLE_ERROR
    from ybscale.report.anova_text import split_plot_text

    design, signs, clusters, strata = _split_plot(3)
    y = _generated(design, signs, clusters, np.random.default_rng(3), a=2.5, c=1.5)
    split = fit_anova(design, y, blocks=True, clusters=clusters).table.set_index("term")
    naive = fit_anova(design, y, blocks=True).table.set_index("term")
    assert naive.loc["A", "p_value"] < 0.05 < split.loc["A", "p_value"]
    assert split.loc["C", "p_value"] < 0.05 < naive.loc["C", "p_value"]
    # by hand: 12 clusters of 4; whole-plot error = between-cluster SS less A, B, AB's SS
    means = y.groupby(pd.Series(clusters)).mean()
    between = 4 * ((means - y.mean()) ** 2).sum()
    ss = {t: len(y) * (y @ signs[list(t)].prod(axis=1) / len(y)) ** 2 for t in ("A", "B", "AB")}
    ms_whole = (between - sum(ss.values())) / (12 - 1 - 3)
    assert split.loc[WHOLE_ERROR, "df"] == 8
    assert split.loc[WHOLE_ERROR, "mean_sq"] == pytest.approx(ms_whole)
    assert split.loc["A", "F"] == pytest.approx(ss["A"] / ms_whole)
    within = ((y - y.groupby(pd.Series(clusters)).transform("mean")) ** 2).sum()
    sub = [t for t, s in strata.items() if s == "sub-plot"]
    x = design.model_matrix()
    ss_sub = sum(len(y) * (y @ x[t] / len(y)) ** 2 for t in sub)
    assert split.loc["residual", "df"] == 48 - 12 - 12
    assert split.loc["residual", "mean_sq"] == pytest.approx((within - ss_sub) / 24)
    assert split.loc["A", "error"] == WHOLE_ERROR and split.loc["C", "error"] == "residual"
    effects = mixed(judge(estimate_effects(design, y, blocks=True), strata), design, y,
                    clusters, strata).set_index("term")  # fmt: skip
    for term in ("A", "B", "C", "AC", "CD"):
        t = effects.loc[term, "effect"] / effects.loc[term, "std_error"]
        assert split.loc[term, "F"] == pytest.approx(t**2, rel=1e-3)  # REML tolerance
    text = " ".join(split_plot_text(split.reset_index()))
    assert "whole-plot columns against the whole-plot error" in text and "8 df" in text
    assert "none below α = 0.05" in text and ": C below α = 0.05" in text


def test_split_plot_anova_holds_its_level_where_the_pooled_test_does_not():
    """No effect, σ_whole = 3·σ, 100 simulations: the whole-plot columns' F test against the
    whole-plot error rejects at about α; against the pooled pure error (blocks by replicate)
    it rejects far more often."""
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    from ybscale.analysis.anova import split_plot_table

    design, signs, clusters, strata = _split_plot(3)
    x = design.model_matrix().astype(float).rename(columns=lambda t: f"t_{t}")
    x["rep"] = signs["replicate"].astype(str)
    pooled = "y ~ " + " + ".join(x.columns[:-1]) + " + C(rep)"
    rng = np.random.default_rng(19)
    split_hits = naive_hits = 0
    for _ in range(100):
        y = _generated(design, signs, clusters, rng)
        table = split_plot_table(design, y, clusters, strata).set_index("term")
        split_hits += int((table.loc[["A", "B", "AB"], "p_value"] < 0.05).sum())
        lm = anova_lm(smf.ols(pooled, data=x.assign(y=y.to_numpy())).fit(), typ=1)
        naive_hits += int((lm.loc[["t_A", "t_B", "t_AB"], "PR(>F)"] < 0.05).sum())
    print(f"whole-plot nulls rejected: split {split_hits / 300:.3f}, pooled {naive_hits / 300:.3f}")
    assert 0.02 <= split_hits / 300 <= 0.09
    assert naive_hits / 300 > 0.2


def test_unreplicated_split_plot_tests_no_stratum_and_says_why():
    """The seed design on gcp (8 clusters of 2, 7 whole-plot columns): neither stratum has
    error df, so nothing is F-tested (and nothing pooled across strata); the findings say so."""
    from ybscale.analysis.terms import WHOLE_ERROR
    from ybscale.design.strata import column_strata
    from ybscale.report.anova_text import split_plot_text

    design = seed_design()
    signs = design.sign_table()
    clusters = {r: "".join(f"{s[x]:+d}" for x in "ABCEF") for r, s in signs.iterrows()}
    assert len(set(clusters.values())) == 8
    y = pd.Series(np.random.default_rng(5).normal(100, 10, 16), index=design.run_ids)
    result = fit_anova(design, y, clusters=clusters)
    table = result.table.set_index("term")
    assert table.loc[WHOLE_ERROR, "df"] == 0 and table.loc["residual", "df"] == 0
    assert table["F"].isna().all() and not table["pooled"].any() and result.pooled == []
    strata = column_strata(design, clusters)
    assert (table.loc[list(strata), "stratum"] == pd.Series(strata)).all()
    text = " ".join(split_plot_text(result.table))
    assert "7 whole-plot column(s) are not F-tested" in text
    assert "8 sub-plot column(s) are not F-tested" in text
    single = fit_anova(design, y).table  # one stratum (local): the pooled table as before
    assert split_plot_text(single) == [] and set(single["stratum"]) == {"single"}


# ------------------------------------------------- blocks only where runs were blocked (issue 35)


def _analyze_cli(tmp_path, spec: dict, data: Path, *extra: str):
    """`ybscale analyze --out` on a published table: (anova, effects) by term; the findings
    written too, in the table's words."""
    import yaml

    from ybscale.report.analyze import main

    tmp_path.mkdir(parents=True, exist_ok=True)
    design = tmp_path / "design.yaml"
    design.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    args = ["--design", str(design), "--responses", str(data), "--out", str(out), "--no-charts"]
    assert main([*args, *extra]) == 0
    said = " ".join((out / "findings.md").read_text().split())
    assert "**Active effects**" in said and "tps" not in said and "pgbench" not in said
    read = (pd.read_csv(out / f"{name}.csv").set_index("term") for name in ("anova", "effects"))
    return tuple(read)


def _shuffled(tmp_path, data: Path, seed: int, drop: str | None = None) -> Path:
    """The same table with its lines in another order (and a column dropped)."""
    lines = data.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    header, *rows = [line for line in lines if not line.startswith("#")]
    rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
    table = [header, *rows]
    if drop is not None:
        at = header.split(",").index(drop)
        table = [",".join(c for i, c in enumerate(line.split(",")) if i != at) for line in table]
    path = tmp_path / f"shuffled{seed}.csv"
    path.write_text("\n".join([*comments, *table]) + "\n")
    return path


PLASMA = {
    "factors": {
        x: {"name": n, "levels": [-1, 1]}
        for x, n in zip("ABC", ["gap", "flow", "power"], strict=True)
    },
    "replications": 2,
}


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_montgomery_example_6_1_completely_randomized_whatever_the_row_order(tmp_path, seed):
    """Montgomery (8th ed.) Example 6.1, the plasma etch 2^3 replicated twice in one random
    order: Table 6.6 by the default command, error 18,020.50 on 8 df (no block), F A 18.34,
    C 166.41, AC 41.91, ...; the same F with the file's lines in any order."""
    data = DATA / "montgomery_ex6_1_plasma_etch.csv"
    if seed is not None:
        data = _shuffled(tmp_path, data, seed)
    anova, effects = _analyze_cli(tmp_path, PLASMA, data)
    assert "block" not in anova.index and "block" not in effects.index
    assert anova.loc["residual", "df"] == 8
    assert anova.loc["residual", "sum_sq"] == pytest.approx(18020.50, abs=0.005)
    assert anova.loc["residual", "mean_sq"] == pytest.approx(2252.56, abs=0.005)
    published = {
        "A": (41310.5625, 18.34), "B": (217.5625, 0.10), "AB": (2475.0625, 1.10),
        "C": (374850.0625, 166.41), "AC": (94402.5625, 41.91), "BC": (18.0625, 0.01),
        "ABC": (126.5625, 0.06),
    }  # fmt: skip
    for term, (ss, f) in published.items():
        assert anova.loc[term, "sum_sq"] == pytest.approx(ss, abs=5e-5)
        assert round(anova.loc[term, "F"], 2) == f
        # the effects table's t test is the same test: t² = F on the same 8 df
        assert effects.loc[term, "standardized"] ** 2 == pytest.approx(anova.loc[term, "F"])
        assert effects.loc[term, "p_value"] == pytest.approx(anova.loc[term, "p_value"])
    assert anova["sum_sq"].sum() == pytest.approx(531420.9375)


SECTION_7_2 = {
    "factors": {
        "A": {"name": "concentration", "levels": [15, 25]},
        "B": {"name": "catalyst", "levels": [1, 2]},
    },
    "replications": 3,
}


def _book_f(anova: pd.DataFrame, term: str, published: float) -> None:
    """The book divides SS and MS rounded by hand (208.33 / 4.14 = 50.32; exactly 50.34):
    the published F within 0.1 % (or its last digit)."""
    assert anova.loc[term, "F"] == pytest.approx(published, rel=1e-3, abs=0.005)


def test_montgomery_section_7_2_blocks_only_when_the_table_says_so(tmp_path):
    """Montgomery (8th ed.): the chemical process 2^2, n = 3. Run in blocks (§7.2, Table 7.2,
    a `block` column): blocks 6.50 on 2 df, error 24.84 on 6 df (MS 4.14), F A 50.32, B 18.12,
    AB 2.01. The same runs completely randomized (§6.2, Table 6.2, no block column): error
    31.34 on 8 df (MS 3.92), F 53.15, 19.13, 2.13."""
    data = DATA / "montgomery_sec7_2_blocks.csv"
    blocked, effects = _analyze_cli(tmp_path / "blocked", SECTION_7_2, data)
    assert blocked.loc["block", "df"] == 2
    assert round(blocked.loc["block", "sum_sq"], 2) == 6.50
    assert blocked.loc["residual", "df"] == 6
    assert round(blocked.loc["residual", "sum_sq"], 2) == 24.83  # 31.3333 − 6.5 (book: 24.84)
    assert round(blocked.loc["residual", "mean_sq"], 2) == 4.14
    for term, (ss, f) in {"A": (208.33, 50.32), "B": (75.00, 18.12), "AB": (8.33, 2.01)}.items():
        assert round(blocked.loc[term, "sum_sq"], 2) == ss
        _book_f(blocked, term, f)
        assert effects.loc[term, "standardized"] ** 2 == pytest.approx(blocked.loc[term, "F"])
    assert effects.loc["block", "sum_sq"] == pytest.approx(6.5)
    plain = _shuffled(tmp_path, data, 3, drop="block")
    randomized, effects = _analyze_cli(tmp_path / "plain", SECTION_7_2, plain)
    assert "block" not in randomized.index
    assert randomized.loc["residual", "df"] == 8
    assert round(randomized.loc["residual", "sum_sq"], 2) == 31.33  # the book rounds 31.34
    assert round(randomized.loc["residual", "mean_sq"], 2) == 3.92
    for term, f in {"A": 53.15, "B": 19.13, "AB": 2.13}.items():
        _book_f(randomized, term, f)


def test_replicates_are_blocks_only_by_an_explicit_column(tmp_path):
    """`--block replicate` with a replicate column blocks by it; without one the replicates
    would be numbered in file order: a clear error instead."""
    data = DATA / "montgomery_sec7_2_blocks.csv"
    text = data.read_text().replace("A,B,block,yield", "A,B,replicate,yield")
    by_replicate = tmp_path / "replicate.csv"
    by_replicate.write_text(text)
    anova, _ = _analyze_cli(tmp_path / "r", SECTION_7_2, by_replicate, "--block", "replicate")
    assert anova.loc["block", "df"] == 2 and round(anova.loc["residual", "mean_sq"], 2) == 4.14
    unblocked, _ = _analyze_cli(tmp_path / "u", SECTION_7_2, by_replicate)
    assert "block" not in unblocked.index and unblocked.loc["residual", "df"] == 8
    plain = _shuffled(tmp_path, data, 4, drop="block")
    with pytest.raises(SystemExit, match="no block column 'replicate'.*file order"):
        _analyze_cli(tmp_path / "p", SECTION_7_2, plain, "--block", "replicate")


def test_replicates_are_blocks_when_the_run_order_kept_them_together(tmp_path):
    """results/run_order.csv: replicate after replicate (the pipeline's plan) -> blocks; one
    order over all runs (a replicate interrupted), or clusters as blocks -> none."""
    from ybscale.analysis.analyze import replicate_blocks

    design = design_from_dict(SECTION_7_2)
    signs = design.sign_table()
    order = pd.DataFrame({"run": signs.index, "replicate": signs["replicate"].to_numpy()})
    order["block"] = order["replicate"]
    path = tmp_path / "run_order.csv"
    order.assign(executed=range(1, 13)).to_csv(path, index=False)
    assert replicate_blocks(path, design).to_dict() == dict(
        zip(signs.index, signs["replicate"].astype(str), strict=True)
    )
    order.assign(executed=[2, 4, 3, 1, 5, 6, 7, 8, 9, 10, 12, 11]).to_csv(path, index=False)
    assert replicate_blocks(path, design) is not None  # within a replicate: any order
    order.assign(executed=list(range(12, 0, -1))).to_csv(path, index=False)
    assert replicate_blocks(path, design) is not None
    order.assign(executed=[1, 2, 3, 9, 4, 5, 6, 7, 8, 10, 11, 12]).to_csv(path, index=False)
    assert replicate_blocks(path, design) is None
    order.assign(executed=range(1, 13), block=["c1"] * 6 + ["c2"] * 6).to_csv(path, index=False)
    assert replicate_blocks(path, design) is None


@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("blocks", [None, True])
def test_split_plot_effects_and_anova_give_one_test_per_column(tmp_path, reuse, blocks):
    """A replicated split plot analysed as the pipeline does (clusters, its run order): every
    column tested in anova.csv has the same p-value in effects.csv, whether the replicates ran
    on clusters of their own (MixedLM's t against the F tests) or reused their cluster (the
    sub-plot columns on the within-cluster residual, 16 df, not the replicate error less a
    block, 15); a replicate block asked for does not change it (the clusters are the strata)."""
    from ybscale.analysis.analyze import analyze
    from ybscale.design.order import planned_order

    design, signs, clusters, _ = _split_plot(2)
    if reuse:
        clusters = {r: f"A{s['A']}B{s['B']}" for r, s in signs.iterrows()}
    y = _generated(design, signs, clusters, np.random.default_rng(5), a=2.5, c=1.5)
    order = planned_order(signs, "random", 7, clusters)
    order.assign(executed=order["position"]).to_csv(tmp_path / "run_order.csv", index=False)
    tables = analyze(
        design, pd.DataFrame({"y": y}), "y", tmp_path, model="additive", charts=False,
        clusters=clusters, run_order=tmp_path / "run_order.csv", blocks=blocks,
    )  # fmt: skip
    effects, anova = (tables[name].set_index("term") for name in ("effects", "anova"))
    tested = anova.index[anova["p_value"].notna()]
    assert len(tested) == (12 if reuse else 15)
    if reuse:
        assert anova.loc["residual", "df"] == 16
    for term in tested:
        assert effects.loc[term, "p_value"] == pytest.approx(anova.loc[term, "p_value"], rel=1e-4)
    assert "block" not in effects.index and "block" not in anova.index
    # the effects' error lines are the strata's, as the ANOVA has them: none unstratified
    errors = effects.loc[["error"]].set_index("stratum")["sum_sq"].to_dict()
    lines = anova.loc[["whole-plot error", "residual"]].set_index("stratum")["sum_sq"]
    assert errors == pytest.approx(lines.to_dict())
    assert sorted(errors) == ["sub-plot", "whole-plot"]


def test_partial_eta_squared_is_pingouins_np2():
    """Issue 47: beside each ANOVA line its partial η², SS / (SS + SS of its error). Jain's
    replicated 2^2 (ch. 18, memory × cache) against pingouin's own two-way ANOVA of the same
    table (its `np2`, a library this code does not write), and Montgomery's Example 6.2 reduced
    model by hand from the published sums of squares (error 195.13 on 10 df)."""
    import pingouin

    _, result = _fit({"factors": {"A": {"name": "memory", "levels": [4, 16]},
                                  "B": {"name": "cache", "levels": [1, 2]}},
                      "replications": 3}, "jain_ch18_memory_cache.csv")  # fmt: skip
    table = result.table.set_index("term")
    data = pd.read_csv(DATA / "jain_ch18_memory_cache.csv", comment="#")
    theirs = pingouin.anova(data, dv="mips", between=["memory", "cache"], effsize="np2")
    np2 = dict(zip(theirs["Source"], theirs["np2"], strict=True))
    assert table.loc["A", "partial_eta_sq"] == pytest.approx(np2["memory"], rel=1e-9)
    assert table.loc["B", "partial_eta_sq"] == pytest.approx(np2["cache"], rel=1e-9)
    assert table.loc["AB", "partial_eta_sq"] == pytest.approx(np2["memory * cache"], rel=1e-9)
    assert table.loc["A", "partial_eta_sq"] == pytest.approx(5547 / (5547 + 102))
    assert math.isnan(table.loc["residual", "partial_eta_sq"])
    _, result = _fit({"factors": FACTORS}, "montgomery_ex6_2.csv")
    table = result.table.set_index("term")
    assert table.loc["A", "partial_eta_sq"] == pytest.approx(1870.56 / (1870.56 + 195.13),
                                                             abs=1e-5)  # fmt: skip
    assert math.isnan(table.loc["B", "partial_eta_sq"])  # pooled into the error
