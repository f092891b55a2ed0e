"""Multiplicity control over the columns of a replicated 2^(k-p): seeded simulations with a known
truth, the adjusted p-values in the effects and ANOVA tables, and the config field."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import shipped_config
from designs import design as make_design

from ybscale import settings
from ybscale.analysis.anova import fit_anova
from ybscale.analysis.effects import estimate_effects
from ybscale.analysis.multiplicity import family_rule

ALPHA = 0.05
SIMULATIONS = 200
SIGMA = 10.0


# 2^(5-1), resolution V, 3 replicates: 48 runs, 15 columns (31 effects in 15 alias groups),
# 32 error degrees of freedom.
NULL_DESIGN = make_design("ABCDE", {"E": "ABCD"}, 3)
# 2^(4-1), resolution IV, 4 replicates: 32 runs, 7 columns, 24 error degrees of freedom; three
# true effects of 4 standard errors (an effect's standard error is 2σ/√N).
DESIGN = make_design("ABCD", {"D": "ABC"}, 4)
SE = 2 * SIGMA / np.sqrt(DESIGN.n_runs)
TRUE = {"A": 4 * SE, "C": -4 * SE, "AB": 4 * SE}


def _responses(design, rng, truth: dict[str, float]) -> pd.Series:
    """One simulated study: 1000 + Σ effect/2 · column + N(0, σ²) noise per run."""
    x = design.model_matrix()
    y = 1000 + rng.normal(0, SIGMA, design.n_runs)
    for term, effect in truth.items():
        y = y + effect / 2 * x[term].to_numpy()
    return pd.Series(y, index=x.index)


def _active(design, y: pd.Series, rule: str) -> set[str]:
    table = estimate_effects(design, y, alpha=ALPHA, multiplicity=rule)
    return set(table.loc[table["active"].astype(bool), "term"])


def test_holm_keeps_the_chance_of_any_false_finding_at_alpha_without_true_effects():
    rng = np.random.default_rng(20240)
    studies = [_responses(NULL_DESIGN, rng, {}) for _ in range(SIMULATIONS)]
    holm = np.mean([bool(_active(NULL_DESIGN, y, "holm")) for y in studies])
    none = np.mean([bool(_active(NULL_DESIGN, y, "none")) for y in studies])
    print(f"null studies with >= 1 active column of 15: holm {holm:.3f}, none {none:.3f}")
    assert holm <= ALPHA + 0.02
    assert none >= 0.3  # 15 columns each at 5 %: 1 − 0.95^15 ≈ 0.54


def test_bh_keeps_the_false_share_among_active_at_alpha_and_finds_4_se_effects():
    """BH over 200 studies with three true effects: mean false share among the active columns
    <= α + 2 points, and the true effects found in >= 90 % of (study, effect) pairs (Holm
    printed: its first step is Bonferroni's at α/7, so 4 SE is found less often)."""
    rng = np.random.default_rng(20241)
    false_share, found, holm_found = [], dict.fromkeys(TRUE, 0), dict.fromkeys(TRUE, 0)
    for _ in range(SIMULATIONS):
        y = _responses(DESIGN, rng, TRUE)
        active = _active(DESIGN, y, "bh")
        false_share.append(len(active - set(TRUE)) / max(len(active), 1))
        for term in active & set(TRUE):
            found[term] += 1
        for term in _active(DESIGN, y, "holm") & set(TRUE):
            holm_found[term] += 1
    power = {term: n / SIMULATIONS for term, n in found.items()}
    holm = {term: n / SIMULATIONS for term, n in holm_found.items()}
    print(f"BH: mean false share {np.mean(false_share):.3f}; 4-SE effects found {power}")
    print(f"Holm: 4-SE effects found {holm}")
    assert np.mean(false_share) <= ALPHA + 0.02
    assert sum(found.values()) / (SIMULATIONS * len(TRUE)) >= 0.90


def test_aliases_count_once_and_anova_agrees_with_the_effects():
    """2^(10-3) with 3 replicates: 127 columns tested (not the 1023 effects they alias);
    the ANOVA's F tests give the effects' t tests' p-values, adjusted the same way."""
    design = make_design("ABCDEFGHJK", {"H": "ABCDG", "J": "ABEFG", "K": "ACDEF"}, 3)
    x = design.model_matrix()
    rng = np.random.default_rng(7)
    y = pd.Series(1000 + rng.normal(0, SIGMA, design.n_runs) + 40 * x["A"], index=x.index)
    effects = estimate_effects(design, y, alpha=ALPHA, multiplicity="bh")
    assert effects.attrs["columns"] == 127
    terms = effects[effects["term"] != "error"].set_index("term")
    assert len(terms) == 127 and set(terms["multiplicity"]) == {"bh"}
    from statsmodels.stats.multitest import multipletests

    expected = multipletests(terms["p_value"], method="fdr_bh")[1]
    assert np.allclose(terms["p_adjusted"], expected)
    assert (terms["active"] == (terms["p_adjusted"] < ALPHA)).all()
    # the cut on |effect| separates exactly the active columns
    assert (terms["active"] == (terms["effect"].abs() > terms["me_adjusted"])).all()
    anova = fit_anova(design, y, alpha=ALPHA, multiplicity="bh").table.set_index("term")
    assert np.allclose(anova.loc[terms.index, "p_value"], terms["p_value"])
    assert np.allclose(anova.loc[terms.index, "p_adjusted"], terms["p_adjusted"])
    assert np.isnan(anova.loc["residual", "p_adjusted"])


def test_none_flags_what_the_interval_flags():
    rng = np.random.default_rng(3)
    y = _responses(DESIGN, rng, TRUE)
    table = estimate_effects(DESIGN, y, alpha=ALPHA, multiplicity="none")
    terms = table[table["term"] != "error"]
    excludes_zero = (terms["ci_low"] > 0) | (terms["ci_high"] < 0)
    assert (terms["active"] == excludes_zero).all()
    assert np.allclose(terms["p_adjusted"], terms["p_value"])


def test_an_unknown_rule_is_named_in_the_config_error():
    config = shipped_config()
    assert settings.load(config)["analysis"]["multiplicity"] == "holm"
    config["analysis"].pop("multiplicity", None)
    assert settings.load(config)["analysis"]["multiplicity"] == "holm"  # the schema's default
    config["analysis"]["multiplicity"] = "bonferroni"
    with pytest.raises(settings.SettingsError, match=r"config/config.yaml: analysis.multiplicity"):
        settings.load(config)
    with pytest.raises(ValueError, match="holm, bh, none"):
        y = _responses(DESIGN, np.random.default_rng(0), {})
        estimate_effects(DESIGN, y, multiplicity="sidak")


def _study_effects(tmp_path, rule: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The effects table of one simulated study as analyze writes it and the findings read it
    (noise only, 15 columns: some columns fall below α before the adjustment)."""
    y = _responses(NULL_DESIGN, np.random.default_rng(5), {"A": 8 * SE})
    written = estimate_effects(NULL_DESIGN, y, alpha=ALPHA, multiplicity=rule)
    path = tmp_path / f"effects_{rule}.csv"
    written.to_csv(path, index=False)
    return written, pd.read_csv(path)


@pytest.mark.parametrize("rule", ["holm", "bh", "none"])
def test_findings_and_charts_say_the_rule_and_how_many_columns(tmp_path, rule):
    from ybscale.report import charts, findings

    written, effects = _study_effects(tmp_path, rule)
    study = findings.Study(NULL_DESIGN, effects, pd.DataFrame(), pd.DataFrame(), {}, {}, 0.05, "")
    text = findings.render(findings.effects_section(study), "md")
    active = set(written.loc[written["active"].astype(bool), "term"])
    assert "A" in active
    for term in active:
        assert f"({term})" in text  # every active column is a finding
    if rule == "none":
        assert "no multiplicity adjustment" in text
        assert "about 0.8 columns are expected to be flagged active by chance" in text
    else:
        assert f"adjusted by {findings.mult.NAMES[rule]} over the 15 columns" in text
        allows = "at most 5 % (family-wise" if rule == "holm" else "at most 5 % of the active"
        assert allows in text
    raw_only = written[(written["p_value"] < ALPHA) & ~written["active"].astype(bool)]
    for term in raw_only["term"]:
        assert term not in active and f"{term}" in text.split("before the adjustment")[1]
    pareto = charts.pareto_chart(effects).to_dict()
    subtitle = " ".join(pareto["title"]["subtitle"])
    lines = {d["line"] for layer in pareto["layer"] for d in _data(pareto, layer)}
    if rule == "none":
        assert "no multiplicity adjustment" in subtitle and "t crit" in lines
    else:
        assert "over 15 columns" in subtitle and f"{rule} cut" in lines
    half = charts.half_normal_chart(effects).to_dict()
    assert "15 columns" in " ".join(half["title"]["subtitle"])


def test_a_study_with_no_active_column_names_every_column_within_the_noise(tmp_path):
    """Noise only under Holm: no column is a finding, and the findings still name the columns
    that were judged (as they do when some are active), never an empty list."""
    from ybscale.report import findings

    y = _responses(NULL_DESIGN, np.random.default_rng(20240), {})
    effects = estimate_effects(NULL_DESIGN, y, alpha=ALPHA, multiplicity="holm")
    terms = effects[effects["term"] != "error"]
    assert not terms["active"].any()
    study = findings.Study(NULL_DESIGN, effects, pd.DataFrame(), pd.DataFrame(), {}, {}, 0.05, "")
    text = findings.render(findings.effects_section(study), "md")
    assert "None: no effect stands out from the noise" in text
    assert f"All 15 columns ({', '.join(terms['term'])}) are within the noise" in text


def _data(spec: dict, layer: dict) -> list[dict]:
    """The rows of a layer's inline data that name a reference line."""
    name = layer.get("data", {}).get("name")
    return [d for d in spec.get("datasets", {}).get(name, []) if "line" in d]


def test_split_plot_family_is_the_columns_left_to_the_t_test(tmp_path):
    """Replicates reusing clusters that hold A, B, C fixed: the 7 whole-plot columns are judged
    by Lenth among themselves (no p-values), the 8 sub-plot columns keep the t test and form the
    family the adjustment runs over."""
    from ybscale.analysis.analyze import analyze

    design = make_design("ABCD", {}, 2)
    signs = design.sign_table()
    clusters = {run: f"c{s.A}{s.B}{s.C}" for run, s in signs.iterrows()}
    x = design.model_matrix()
    y = 1000 + np.random.default_rng(9).normal(0, SIGMA, design.n_runs) + 30 * x["D"]
    responses = pd.DataFrame({"response": y}, index=x.index)
    tables = analyze(design, responses, "response", tmp_path, charts=False, clusters=clusters)
    effects = tables["effects"]
    terms = effects[effects["term"].isin(design.terms)].set_index("term")
    whole = terms[terms["stratum"] == "whole-plot"]
    sub = terms[terms["stratum"] == "sub-plot"]
    assert len(whole) == 7 and len(sub) == 8
    assert whole["p_value"].isna().all() and set(whole["multiplicity"]) == {"none"}
    from statsmodels.stats.multitest import multipletests

    assert np.allclose(sub["p_adjusted"], multipletests(sub["p_value"], method="holm")[1])
    assert (sub["active"] == (sub["p_adjusted"] < ALPHA)).all()
    assert sub.loc["D", "active"]
    assert family_rule(terms) == ("holm", 8)  # what the findings and charts name
