"""Issue 49: how far a neighbour may have moved each effect (ybscale.analysis.disturbance),
checked against hand arithmetic on a 2^2 (effects as Montgomery §6.2 defines them: the mean at +
minus the mean at −, so each run weighs ±1/2)."""

import math

import pandas as pd
import pytest
from designs import design

from ybscale.analysis import disturbance

RUNS = ["run01", "run02", "run03", "run04"]  # Yates order: (−,−), (+,−), (−,+), (+,+)
Y = pd.Series([100.0, 200.0, 300.0, 400.0], index=RUNS)
# run01 kept a disturbed run beside a neighbour taking 20 % of the machine, run04 50 %; run02
# took 30 % but was measured again until quiet (kept_disturbed 0): it moves by nothing
CEILINGS = pd.DataFrame({"run": RUNS, "kept_disturbed": [1, 0, 0, 2],
                         "outside_utilisation": [0.2, 0.3, 0.0, 0.5]})  # fmt: skip


def _effects(model: str) -> pd.DataFrame:
    """Effects of Y (A 100, B 200, AB 0 on the additive scale) with made-up margins."""
    return pd.DataFrame({"term": ["B", "A", "AB"], "effect": [200.0, 100.0, 0.0],
                         "ci_low": [150.0, 5.0, -50.0], "ci_high": [250.0, 195.0, 50.0],
                         "active": [True, True, False], "model": model})  # fmt: skip


def test_the_rows_kept_disturbed_are_the_only_ones_that_move():
    assert disturbance.shares(CEILINGS).tolist() == [0.2, 0.0, 0.0, 0.5]
    assert disturbance.shares(CEILINGS.drop(columns="kept_disturbed")).tolist() == [0.0] * 4


def test_a_neighbour_may_have_lowered_each_disturbed_row_by_the_cpu_it_took():
    """run01 up to 100 / 0.8 = 125 (+25), run04 up to 400 / 0.5 = 800 (+400): A moves down by
    ½·25 (run01 is at A −) and up by ½·400 (run04 at A +); AB has both runs at +."""
    out = disturbance.widen(_effects("additive"), design("AB"), Y, disturbance.shares(CEILINGS),
                            "ceiling").set_index("term")  # fmt: skip
    assert out.loc["A", ["disturbance_down", "disturbance_up"]].tolist() == [12.5, 200.0]
    assert out.loc["B", ["disturbance_down", "disturbance_up"]].tolist() == [12.5, 200.0]
    assert out.loc["AB", ["disturbance_down", "disturbance_up"]].tolist() == [0.0, 212.5]
    assert out.loc["A", ["disturbance_low", "disturbance_high"]].tolist() == [-7.5, 395.0]
    # B stays active however far it moved; A's widened interval reaches zero
    assert out["established"].tolist() == [True, False, False]


def test_on_the_log_scale_each_row_moves_by_log10_of_one_over_one_minus_the_share():
    out = disturbance.widen(_effects("multiplicative"), design("AB"), Y,
                            disturbance.shares(CEILINGS), "ceiling").set_index("term")  # fmt: skip
    assert out.loc["A", "disturbance_down"] == pytest.approx(-math.log10(0.8) / 2, rel=1e-12)
    assert out.loc["A", "disturbance_up"] == pytest.approx(math.log10(2) / 2, rel=1e-12)


def test_latency_moves_the_other_way():
    """A neighbour raises latency: the quiet value is down to y·(1 − u): run01 −20, run04 −200."""
    out = disturbance.widen(_effects("additive"), design("AB"), Y, disturbance.shares(CEILINGS),
                            "latency_at_load_ms").set_index("term")  # fmt: skip
    assert out.loc["A", ["disturbance_down", "disturbance_up"]].tolist() == [100.0, 10.0]


def test_a_quiet_study_moves_nothing():
    quiet = CEILINGS.assign(kept_disturbed=0)
    out = disturbance.widen(_effects("additive"), design("AB"), Y, disturbance.shares(quiet),
                            "ceiling")  # fmt: skip
    assert (out["disturbance_down"] == 0).all() and (out["disturbance_up"] == 0).all()
    assert out["established"].tolist() == out["active"].tolist()
    assert not disturbance.disturbed(out)
