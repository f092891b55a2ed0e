"""Lenth's critical values (ybscale.analysis.lenth_critical) against the published table and
against a fresh simulation: precise to 0.1 %."""

import csv

import pytest

from ybscale.analysis.lenth_critical import TABLE, critical, simulate


def _lines():
    with TABLE.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(
    ("m", "ier", "eer"),
    [(7, 2.30, 4.87), (15, 2.16, None)],
)
def test_the_table_gives_ye_and_hamadas_published_values(m, ier, eer):
    """Ye, K. Q. & Hamada, M. (2000), Critical values of the Lenth method for unreplicated
    factorial designs, J. Quality Technology 32(1), 57-66 (also Wu & Hamada, Experiments, 2nd
    ed., Appendix H): α = 0.05, IER 2.30 and EER 4.87 for 7 effects (a 2^3 or a 2^(4-1)), IER
    2.16 for 15 (a 2^4): the table's values round to the published two digits."""
    found = critical(m, 0.05)
    assert round(found[0], 2) == ier
    if eer is not None:
        assert round(found[1], 2) == eer


def test_every_tabulated_value_is_precise_to_a_tenth_of_a_percent():
    lines = _lines()
    assert {(int(r["m"]), float(r["alpha"])) for r in lines} == {
        (m, a) for m in range(4, 128) for a in (0.01, 0.05, 0.10)
    }
    for r in lines:
        for q in ("ier", "eer"):
            # two standard errors of the simulation within 0.1 % of the value
            assert 2 * float(r[f"{q}_se"]) <= 0.001 * float(r[q]), (r["m"], r["alpha"], q)
        assert float(r["eer"]) > float(r["ier"]) > 0


def test_an_independent_simulation_lands_on_the_table():
    """Another seed, drawn now: the table's m = 7 values within three standard errors of the
    difference (the table is this code's output, not numbers typed in)."""
    (fresh,) = simulate(7, (0.05,), seed=1, target=0.001)
    (line,) = [r for r in _lines() if r["m"] == "7" and float(r["alpha"]) == 0.05]
    for q in ("ier", "eer"):
        se = (fresh[f"{q}_se"] ** 2 + float(line[f"{q}_se"]) ** 2) ** 0.5
        assert abs(fresh[q] - float(line[q])) <= 3 * se, q


def test_an_alpha_outside_the_table_is_simulated_to_the_same_precision():
    ier, eer = critical(31, 0.2)
    ier10, eer10 = critical(31, 0.10)
    assert ier < ier10 and eer < eer10
    (line,) = simulate(31, (0.2,))
    assert (ier, eer) == (line["ier"], line["eer"])  # seeded: the same numbers every time
    assert line["ier_se"] <= 0.0005 * ier and line["eer_se"] <= 0.0005 * eer
