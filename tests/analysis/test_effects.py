"""Effects, allocation of variation, Lenth and t intervals against published / hand numbers."""

import math
from pathlib import Path

import pandas as pd
import pytest
from designs import seed_design

from ybscale.analysis.analyze import read_responses
from ybscale.analysis.effects import COLUMNS, estimate_effects, lenth
from ybscale.design.factorial import design_from_dict

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "stats"

MONTGOMERY_FACTORS = {
    "A": {"name": "temperature", "levels": ["-", "+"]},
    "B": {"name": "pressure", "levels": ["-", "+"]},
    "C": {"name": "concentration", "levels": ["-", "+"]},
    "D": {"name": "stirring_rate", "levels": ["-", "+"]},
}
HALF_FRACTION = {"factors": MONTGOMERY_FACTORS, "generators": {"D": "ABC"}, "replications": 1}
FULL_2_4 = {"factors": MONTGOMERY_FACTORS, "replications": 1}
JAIN_2_2_R3 = {
    "factors": {
        "A": {"name": "memory", "levels": [4, 16]},
        "B": {"name": "cache", "levels": [1, 2]},
    },
    "replications": 3,
}


def _effects(spec: dict, csv: str, **kwargs) -> pd.DataFrame:
    design = design_from_dict(spec, csv)
    responses = read_responses(DATA / csv, design)
    return estimate_effects(design, responses[responses.attrs["response"]], **kwargs)


def _by_term(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index("term")


def test_montgomery_example_8_1_published_effects():
    table = _by_term(_effects(HALF_FRACTION, "montgomery_ex8_1.csv"))
    published = {"A": 19.00, "B": 1.50, "C": 14.00, "D": 16.50, "AB": -1.00, "AC": -18.50}
    published["AD"] = 19.00
    for term, value in published.items():
        assert table.loc[term, "effect"] == pytest.approx(value, abs=1e-9), term
        assert table.loc[term, "coefficient"] == pytest.approx(value / 2, abs=1e-9), term
    assert table.loc["AB", "alias"] == "AB = CD"
    assert table.loc["D", "alias"] == "D = ABC"


def test_columns_and_sort_order():
    table = _effects(HALF_FRACTION, "montgomery_ex8_1.csv")
    assert list(table.columns) == COLUMNS
    assert list(table["effect"].abs()) == sorted(table["effect"].abs(), reverse=True)
    assert set(table["method"]) == {"lenth"} and set(table["model"]) == {"additive"}


def test_montgomery_problem_8_1_published_lenth_and_contribution():
    """Design-Expert output in Montgomery's solutions manual (Problem 8.1)."""
    table = _by_term(_effects(HALF_FRACTION, "montgomery_prob8_1.csv"))
    published = {"A": -12, "B": -1, "C": 4, "D": -1, "AB": 6, "AC": -1, "AD": -5}
    for term, value in published.items():
        assert table.loc[term, "effect"] == pytest.approx(value, abs=1e-9)
    contribution = {"A": 64.2857, "B": 0.446429, "C": 7.14286, "AB": 16.0714, "AD": 11.1607}
    for term, value in contribution.items():
        assert table.loc[term, "variation_pct"] == pytest.approx(value, rel=1e-5)
    # Lenth's own t(m/3) margins as Design-Expert prints them (its t quantile at d = 7/3 df
    # differs in the 5th digit; agree to 1e-4) ...
    info = lenth(table["effect"].to_numpy())
    assert info["me_t"] == pytest.approx(22.5856, rel=1e-4)
    assert info["sme_t"] == pytest.approx(54.0516, rel=1e-4)
    # ... and the table's, the one rule: Ye & Hamada's critical values for 7 columns (IER 2.30,
    # EER 4.87 at α = 0.05, their Table 1) times the same PSE (22.5856 / t(0.975, 7/3) = 6.0)
    pse = table["std_error"].iloc[0]
    assert pse == pytest.approx(6.0, rel=1e-4)
    assert round(table["me"].iloc[0] / pse, 2) == 2.30
    assert round(table["sme"].iloc[0] / pse, 2) == 4.87
    assert not table["active"].any()  # A, the largest (12), is within ME 13.8


def test_lenth_by_hand_montgomery_example_6_2():
    """PSE from the published 2^4 effects, median taken by hand on the sorted list."""
    table = _by_term(_effects(FULL_2_4, "montgomery_ex6_2.csv"))
    published = {"A": 21.625, "B": 3.125, "C": 9.875, "D": 14.625, "AC": -18.125, "AD": 16.625}
    for term, value in published.items():
        assert table.loc[term, "effect"] == pytest.approx(value, abs=1e-9)
    # |effects| sorted: .125 .375 1.125 1.375 1.625 1.875 2.375 [2.625] 3.125 4.125 9.875
    # 14.625 16.625 18.125 21.625 -> median 2.625, s0 = 3.9375, 2.5 s0 = 9.84375;
    # the 10 below it: median (1.625 + 1.875) / 2 = 1.75 -> PSE = 2.625.
    pse = 1.5 * 1.75
    assert table["std_error"].iloc[0] == pytest.approx(pse)
    # Lenth's own margins, d = 15 / 3 = 5: t(0.975, 5) = 2.5706 and t(gamma, 5) = 5.2186,
    # gamma = (1 + .95^(1/15))/2; the table's: Ye & Hamada's IER 2.16 for m = 15 and the
    # simulated EER (lenth_critical.csv; the published table is tested there)
    info = lenth(table["effect"].to_numpy())
    assert info["me_t"] == pytest.approx(2.5706 * pse, abs=1e-3)
    assert info["sme_t"] == pytest.approx(5.2186 * pse, abs=2e-3)
    assert round(table["me"].iloc[0] / pse, 2) == 2.16
    assert round(table["sme"].iloc[0] / pse, 2) == 4.23
    # the published active set either way (Montgomery, Example 6.2: A, C, D, AC, AD)
    active = set(table.index[table["active"]])
    assert active == {"A", "C", "D", "AC", "AD"}
    assert set(table.index[table["active_sme"]]) == {"A", "D", "AC", "AD"}


def test_lenth_function_drops_large_contrasts_from_pse():
    info = lenth([10.0, -1.0, 2.0, -3.0, 4.0, 50.0, 1.0], alpha=0.05)
    # |c| sorted 1 1 2 [3] 4 10 50: s0 = 4.5, cut 11.25 drops 50; median of 1 1 2 3 4 10 = 2.5
    assert info["s0"] == pytest.approx(4.5)
    assert info["pse"] == pytest.approx(3.75)
    assert info["d"] == pytest.approx(7 / 3)


def test_jain_ch18_replicated_intervals():
    table = _by_term(_effects(JAIN_2_2_R3, "jain_ch18_memory_cache.csv", alpha=0.10))
    for term, q in {"A": 21.5, "B": 9.5, "AB": 5.0}.items():
        assert table.loc[term, "coefficient"] == pytest.approx(q)
        assert table.loc[term, "effect"] == pytest.approx(2 * q)
    for term, ss in {"A": 5547, "B": 1083, "AB": 300, "error": 102}.items():
        assert table.loc[term, "sum_sq"] == pytest.approx(ss)
        assert table.loc[term, "variation_pct"] == pytest.approx(100 * ss / 7032)
    s_e = math.sqrt(102 / (4 * 2))  # 3.5707 (Jain: 3.57)
    s_q = s_e / math.sqrt(4 * 3)  # 1.0308 (Jain: 1.03)
    half = 1.8595 * s_q  # t[0.95; 8] = 1.8595 (Jain: 1.86)
    assert s_e == pytest.approx(3.57, abs=0.005) and s_q == pytest.approx(1.03, abs=0.005)
    assert table.loc["A", "std_error"] == pytest.approx(2 * s_q)
    # effect scale = 2 q: qA in (21.5 - 1.917, 21.5 + 1.917) = (19.58, 23.42)
    assert table.loc["A", "ci_low"] / 2 == pytest.approx(21.5 - half, abs=1e-3)
    assert table.loc["A", "ci_high"] / 2 == pytest.approx(21.5 + half, abs=1e-3)
    assert table.loc["A", "ci_low"] / 2 == pytest.approx(19.58, abs=0.01)
    assert table.loc["AB", "ci_low"] / 2 == pytest.approx(5 - half, abs=1e-3)
    assert table.loc["A", "me"] == pytest.approx(2 * half, abs=2e-3)
    assert math.isnan(table.loc["A", "sme"])
    assert table.loc[["A", "B", "AB"], "active"].all()
    assert set(table["method"].dropna()) == {"t"}
    assert list(table.index)[-1] == "error"


def test_multiplicative_model_uses_log10():
    design = design_from_dict(
        {"factors": {"A": {"name": "a", "levels": [0, 1]}, "B": {"name": "b", "levels": [0, 1]}}}
    )
    # y = 100 * 2^[A+] * 3^[B+]: on log10, effect A = log10 2, B = log10 3, AB = 0
    y = pd.Series([100.0, 200.0, 300.0, 600.0], index=design.run_ids)
    table = _by_term(estimate_effects(design, y, model="multiplicative"))
    assert table.loc["A", "effect"] == pytest.approx(0.30103, abs=1e-5)
    assert table.loc["B", "effect"] == pytest.approx(0.47712, abs=1e-5)
    assert table.loc["AB", "effect"] == pytest.approx(0.0, abs=1e-12)
    assert set(table["model"]) == {"multiplicative"}
    with pytest.raises(ValueError, match="positive"):
        estimate_effects(design, y - 200, model="multiplicative")


def test_missing_and_unknown_runs_are_errors():
    design = design_from_dict(HALF_FRACTION)
    y = pd.Series(range(8), index=design.run_ids, dtype=float)
    with pytest.raises(ValueError, match="run08"):
        estimate_effects(design, y.drop("run08"))
    with pytest.raises(ValueError, match="run99"):
        estimate_effects(design, pd.concat([y, pd.Series({"run99": 1.0})]))


# Seed study, Table 5 throughput ceilings; signs A..F of its Table 3 (runs 1..16, A slowest).
SEED_Y = [3561, 3568, 3479, 3489, 2846, 2789, 2847, 2753, 2985, 2922, 2931, 2953, 2931, 1033, 994]
SEED_Y = [*SEED_Y, 878]


def _seed_effects() -> pd.DataFrame:
    design = seed_design()
    responses = read_responses(DATA / "seed_table5.csv", design, "throughput_ceiling")
    return _by_term(estimate_effects(design, responses["throughput_ceiling"]))


def test_seed_table5_effects_by_hand():
    table = _seed_effects()
    y = dict(enumerate(SEED_Y, start=1))  # seed run number -> ceiling

    def effect(plus_runs):
        minus_runs = [r for r in y if r not in plus_runs]
        return (sum(y[r] for r in plus_runs) - sum(y[r] for r in minus_runs)) / 8

    # + runs read off Table 3 for each column (E = BC, F = AB; AD = A*D)
    # A: (2985+2922+2931+2953+2931+1033+994+878 - 25332) / 8 = (17627 - 25332) / 8
    assert (17627 - 25332) / 8 == -963.125
    hand = {
        "A": effect([9, 10, 11, 12, 13, 14, 15, 16]),
        "B": effect([5, 6, 7, 8, 13, 14, 15, 16]),
        "C": effect([3, 4, 7, 8, 11, 12, 15, 16]),
        "D": effect([2, 4, 6, 8, 10, 12, 14, 16]),
        "E": effect([1, 2, 7, 8, 9, 10, 15, 16]),
        "F": effect([1, 2, 3, 4, 13, 14, 15, 16]),
        "AD": effect([1, 3, 5, 7, 10, 12, 14, 16]),
    }
    assert hand == {
        "A": -963.125,
        "B": -1102.125,
        "C": -288.875,
        "D": -273.625,
        "E": -242.875,
        "F": -386.625,
        "AD": -240.125,
    }
    for term, value in hand.items():
        assert table.loc[term, "effect"] == pytest.approx(value, abs=1e-9), term
    # the seed design names E's group by E, F's by F (E = BC, F = AB)
    assert table.loc["F", "alias"].startswith("F = AB")


def test_seed_table5_lenth_and_ranking():
    table = _seed_effects()
    ranked = list(table.index)
    assert ranked[:3] == ["B", "A", "F"]
    # sorted |effects|: 207.125 217.125 225.625 229.125 237.625 239.875 240.125 [242.875] ...
    # s0 = 1.5 * 242.875 = 364.3125; cut 910.78 drops A and B; median of the other 13 = 240.125
    pse = 1.5 * 240.125
    assert table["std_error"].iloc[0] == pytest.approx(pse)
    assert lenth(table["effect"].to_numpy())["me_t"] == pytest.approx(2.5706 * pse, abs=0.1)
    assert round(table["me"].iloc[0] / pse, 2) == 2.16  # Ye & Hamada, m = 15
    assert set(table.index[table["active"]]) == {"A", "B"}
    assert not table["active_sme"].any()
    # the seed concluded C and D matter most and F least; its own numbers say otherwise
    assert not table.loc["C", "active"] and not table.loc["D", "active"]
    assert abs(table.loc["F", "effect"]) > abs(table.loc["C", "effect"])


def _two_factor(r: int):
    factors = {"A": {"name": "a", "levels": [0, 1]}, "B": {"name": "b", "levels": [0, 1]}}
    return design_from_dict({"factors": factors, "replications": r})


def test_effects_smaller_than_measurement_noise_are_marked():
    design = _two_factor(1)
    # A: +10 (large), B: +1, AB: 0; every response measured with standard error 2
    y = pd.Series([100.0, 110.0, 101.0, 111.0], index=design.run_ids)
    se = pd.Series(2.0, index=design.run_ids)
    table = _by_term(estimate_effects(design, y, noise_se=se))
    band = 1.959964 * (2 / 4) * math.sqrt(4 * 2.0**2)  # z · (2/n) · sqrt(Σ se²) = 3.92
    assert table["noise"].iloc[0] == pytest.approx(band, rel=1e-5)
    assert not table.loc["A", "below_noise"]
    assert table.loc["B", "below_noise"] and table.loc["AB", "below_noise"]
    quiet = _by_term(estimate_effects(design, y, noise_se=se / 10))
    assert not quiet.loc["B", "below_noise"]
    assert not _by_term(estimate_effects(design, y))["below_noise"].any()  # no noise given


def test_blocks_are_taken_out_of_pure_error():
    from ybscale.analysis.anova import fit_anova

    design = _two_factor(2)
    base = [100.0, 110.0, 101.0, 111.0]
    # replicate 2 measured later on a machine 20 tps slower, plus a little scatter
    later = [b - 20 + d for b, d in zip(base, [1, -1, -1, 1], strict=True)]
    y = pd.Series(base + later, index=design.run_ids)
    plain = estimate_effects(design, y)
    blocked = estimate_effects(design, y, blocks=True)
    assert plain.attrs["df_error"] == 4 and blocked.attrs["df_error"] == 3
    assert blocked.attrs["ss_block"] == pytest.approx(4 * 2 * 10.0**2)
    # cell differences 19, 21, 21, 19: SSE = Σ d²/2 = 802, of which 800 is the block
    assert plain.attrs["sse"] == pytest.approx(802.0)
    assert blocked.attrs["sse"] == pytest.approx(2.0)
    assert blocked.attrs["s_e"] < plain.attrs["s_e"] / 5
    assert "block" in set(blocked["term"])
    table = fit_anova(design, y, blocks=True).table.set_index("term")
    assert table.loc["block", "df"] == 1
    assert table.loc["block", "sum_sq"] == pytest.approx(800.0)
    assert table.loc["residual", "df"] == 3
    assert table.loc["residual", "sum_sq"] == pytest.approx(blocked.attrs["sse"])


def test_residual_order_follows_the_executed_order():
    from ybscale.analysis.anova import fit_anova

    design = _two_factor(2)
    y = pd.Series([100.0, 110, 101, 111, 99, 108, 100, 112], index=design.run_ids)
    order = pd.Series(range(8, 0, -1), index=design.run_ids)
    res = fit_anova(design, y, order=order).residuals.set_index("run")
    assert res["order"].tolist() == list(range(8, 0, -1))
    with pytest.raises(ValueError, match="run order"):
        fit_anova(design, y, order=order.iloc[:3])


def test_one_lenth_rule_whether_or_not_runs_share_clusters():
    """Issue 47: a design whose runs shared clusters was judged stratum by stratum with the
    simulated critical values, the same design on fresh clusters with Lenth's t(0.975, m/3):
    for 7 columns 3.76 PSE against 2.30. Both now use Ye & Hamada's (2000) critical values
    for m columns (their Table 1, α = 0.05, m = 7: IER 2.30, EER 4.87): seven effects of a
    2^3 (the pilot-plant example's of Box, Hunter & Hunter, Statistics for Experimenters,
    2nd ed., ch. 5: T 23, C −5, K 1.5, TC 1.5, TK 10, CK 0, TCK 0.5, used here as numbers)
    get the same ME and SME as a single table and as a stratum of seven columns."""
    from ybscale.analysis.strata import stratum_lenth

    effects = [23.0, -5.0, 1.5, 1.5, 10.0, 0.0, 0.5]
    info = lenth(effects)
    # |effects| sorted 0 .5 1.5 [1.5] 5 10 23: s0 = 2.25, cut 5.625 keeps 0 .5 1.5 1.5 5
    assert info["pse"] == pytest.approx(1.5 * 1.5)
    assert (round(info["ier"], 2), round(info["eer"], 2)) == (2.30, 4.87)
    assert info["me_t"] == pytest.approx(3.7641 * info["pse"], abs=1e-3)  # Lenth's own
    stratum = stratum_lenth(effects)
    assert (stratum["me"], stratum["sme"]) == (info["me"], info["sme"])
    assert list(stratum["active"]) == [True, False, False, False, True, False, False]
    assert abs(effects[1]) < info["me"] < abs(effects[4])  # C (5) just within 5.17, TK out
