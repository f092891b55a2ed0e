"""The three verdicts (ybscale.analysis.verdicts) by hand arithmetic on a published replicated
2^3: Montgomery, Design and Analysis of Experiments (8th ed., 2013), Example 6.1, the plasma
etch experiment (Table 6.6: error 18,020.50 on 8 df, MS_E 2,252.56; the effects from its sums
of squares, effect = 2·sqrt(SS / 16), signs as Table 6.5 prints them: A −101.625, B 7.375,
AB −24.875, C 306.125, AC −153.625, BC −2.125, ABC 5.625)."""

import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from ybscale.analysis.analyze import main as analyze_main
from ybscale.analysis.verdicts import (
    MATTERS,
    NEGLIGIBLE,
    UNDECIDED,
    RelevantError,
    contradict,
    judge,
    parse_relevant,
    relevant_on_scale,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "stats"
PLASMA_YAML = """\
factors:
  A: {name: gap, levels: [-1, 1]}
  B: {name: flow, levels: [-1, 1]}
  C: {name: power, levels: [-1, 1]}
replications: 2
"""
PUBLISHED = {"A": -101.625, "B": 7.375, "AB": -24.875, "C": 306.125, "AC": -153.625,
             "BC": -2.125, "ABC": 5.625}  # fmt: skip


def _plasma(tmp_path, relevant):
    design = tmp_path / "design.yaml"
    design.write_text(PLASMA_YAML)
    out = tmp_path / f"out{relevant}"
    analyze_main(["--design", str(design), "--responses",
                  str(DATA / "montgomery_ex6_1_plasma_etch.csv"), "--model", "additive",
                  "--relevant", str(relevant), "--out", str(out)])  # fmt: skip
    table = pd.read_csv(out / "effects.csv")
    return table[~table["term"].isin(["error", "block"])].set_index("term")


def test_the_plasma_etch_verdicts_by_hand(tmp_path):
    """se(effect) = sqrt(4 MS_E / 16) = 23.73; the Bonferroni simultaneous half-width over the
    7 columns is t(1 − 0.05/14, 8)·23.73 = 3.584·23.73 = 85.1. Against 100 Å/min: C's
    interval [221, 391] lies beyond 100 (matters); B, BC and ABC lie inside ±100 (negligible);
    A [−187, −17], AB
    and AC reach past 100 on one side only (undecided; A and AC exclude 0). Against 50: no
    column can be negligible (the half-width alone is 85.1), C and AC matter."""
    se = math.sqrt(4 * 2252.5625 / 16)
    half = stats.t.ppf(1 - 0.05 / 14, 8) * se
    assert se == pytest.approx(23.73, abs=0.005) and half == pytest.approx(85.06, abs=0.005)
    table = _plasma(tmp_path, 100)
    for term, effect in PUBLISHED.items():
        assert table.loc[term, "effect"] == pytest.approx(effect)
        assert table.loc[term, "verdict_low"] == pytest.approx(effect - half, abs=1e-6)
        assert table.loc[term, "verdict_high"] == pytest.approx(effect + half, abs=1e-6)
    expected = {"C": MATTERS, "B": NEGLIGIBLE, "BC": NEGLIGIBLE, "ABC": NEGLIGIBLE,
                "A": UNDECIDED, "AB": UNDECIDED, "AC": UNDECIDED}  # fmt: skip
    assert table["verdict"].to_dict() == expected
    assert table["excludes_zero"].to_dict() == {t: t in ("A", "C", "AC") for t in expected}
    assert set(table["relevant"]) == {100.0}
    # AB: to clear 100 its half-width must fall below 100 − 24.875 = 75.125, which takes
    # 16 × (85.06 / 75.125)² = 20.5 runs: three replicates of the 8 rows, 24
    assert table.loc["AB", "runs_to_decide"] == 24
    assert math.ceil(16 * (half / (100 - 24.875)) ** 2 / 8) * 8 == 24
    table = _plasma(tmp_path, 50)
    assert table["verdict"].to_dict() == {
        "C": MATTERS, "AC": MATTERS, "A": UNDECIDED, "B": UNDECIDED, "AB": UNDECIDED,
        "BC": UNDECIDED, "ABC": UNDECIDED}  # fmt: skip


def test_an_unreplicated_column_is_judged_on_lenths_simultaneous_margin():
    """Lenth's columns: the verdict interval is effect ± SME (Ye & Hamada's experiment-wise
    critical value), not ± ME."""
    table = pd.DataFrame({
        "term": ["A", "B", "C", "AB"], "effect": [1.0, 0.05, -0.65, 0.0],
        "std_error": 0.1, "me": 0.2, "sme": 0.3, "method": "lenth", "model": "multiplicative",
        "df": math.nan})  # fmt: skip
    y = pd.Series([1.0, 10.0])
    out = judge(table, y, "100%").set_index("term")  # R = log10(2) = 0.301
    assert out.loc["A", "verdict_low"] == pytest.approx(0.7)
    assert out.loc["A", "verdict"] == MATTERS  # [0.7, 1.3] beyond 0.301
    assert out.loc["B", "verdict"] == UNDECIDED  # [-0.25, 0.35]: 0.35 > 0.301
    assert out.loc["C", "verdict"] == MATTERS  # [-0.95, -0.35] below -0.301
    assert out.loc["AB", "verdict"] == NEGLIGIBLE  # [-0.3, 0.3] inside ±0.301


def test_the_interference_widening_makes_a_column_undecided_never_a_dash():
    """A column a neighbour may have moved past the relevant size is undecided, with its
    widened interval, whatever its estimate (issue 57: node_size printed as "—")."""
    base = {"term": ["F"], "effect": [0.12], "std_error": 0.01, "me": 0.02, "sme": 0.03,
            "method": "lenth", "model": "multiplicative", "df": math.nan}  # fmt: skip
    y = pd.Series([1.0, 10.0])
    quiet = judge(pd.DataFrame(base), y, "10%").iloc[0]
    assert quiet["verdict"] == MATTERS  # [0.09, 0.15] beyond log10(1.1) = 0.0414
    busy = judge(pd.DataFrame(base | {"disturbance_down": 0.07, "disturbance_up": 0.0}), y,
                 "10%").iloc[0]  # fmt: skip
    assert busy["verdict_low"] == pytest.approx(0.02)
    assert busy["verdict"] == UNDECIDED and busy["excludes_zero"]


def test_relevant_is_a_share_or_an_amount_and_refused_otherwise():
    assert parse_relevant("10%") == ("share", 0.10)
    assert parse_relevant(" 20 % ") == ("share", 0.20)
    assert parse_relevant(500) == ("amount", 500.0)
    assert relevant_on_scale("10%", "multiplicative", 123.0) == pytest.approx(math.log10(1.1))
    assert relevant_on_scale("10%", "additive", 2000.0) == pytest.approx(200.0)
    assert relevant_on_scale(200, "multiplicative", 2000.0) == pytest.approx(math.log10(1.1))
    for bad in ("ten", "-5%", 0, -3, True, "0%"):
        with pytest.raises(RelevantError, match="analysis.relevant"):
            parse_relevant(bad)


def test_two_studies_contradict_only_across_matters_and_negligible_or_signs():
    def line(verdict, effect):
        return pd.Series({"verdict": verdict, "effect": effect})

    assert contradict(line(MATTERS, 0.3), line(NEGLIGIBLE, 0.01))
    assert contradict(line(MATTERS, 0.3), line(MATTERS, -0.3))
    assert not contradict(line(MATTERS, 0.3), line(UNDECIDED, 0.05))
    assert not contradict(line(NEGLIGIBLE, 0.0), line(UNDECIDED, 0.2))
    assert not contradict(line(MATTERS, 0.3), line(MATTERS, 0.2))
