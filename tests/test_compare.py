"""`ybscale compare`: two results folders with known estimates give the expected table."""

import json

import pandas as pd
import pytest

from ybscale.cli import main as cli

TERMS = ["B", "A", "F", "E", "C"]


def _study(folder, effects, me, sme, model="additive", design=None):
    """A results folder whose effects.csv holds these estimates (Lenth: effect ± ME)."""
    folder.mkdir(parents=True)
    rows = [
        {
            "term": t,
            "effect": e,
            "ci_low": e - me,
            "ci_high": e + me,
            "active": abs(e) > me,
            "active_sme": abs(e) > sme,
            "model": model,
        }
        for t, e in zip(TERMS, effects, strict=True)
    ]
    pd.DataFrame(rows).to_csv(folder / "effects.csv", index=False)
    if design is not None:
        (folder / "design").mkdir()
        (folder / "design" / "design.json").write_text(json.dumps(design))
    return folder


def test_two_studies_that_agree_beyond_sme(tmp_path, capsys):
    a = _study(tmp_path / "a", [-32.9, -26.4, 23.5, -8.5, 2.8], me=5.0, sme=10.0)
    b = _study(tmp_path / "b", [-33.3, -27.2, 23.5, -4.6, 0.4], me=5.0, sme=10.0)
    out = tmp_path / "cmp.csv"
    assert cli(["compare", str(a), str(b), "--out", str(out)]) == 0
    table = pd.read_csv(out).set_index("term")
    assert list(table.index) == TERMS
    assert table.loc["B", ["effect_a", "effect_b"]].tolist() == [-32.9, -33.3]
    assert table["a_covers_b"].tolist() == [True, True, True, True, True]
    assert table.loc["E", ["active_a", "active_b", "agree"]].tolist() == [True, False, False]
    assert table.loc[["B", "A", "F", "C"], "agree"].all()
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("AGREE: beyond SME A {B−, A−, F+}, B {B−, A−, F+}")
    assert "active at ME A {B−, A−, F+, E−}, B {B−, A−, F+} (different sets)" in line
    assert "4 of 5 columns agree; each interval covers the other's estimate in 5 of 5" in line


def test_a_sign_flip_beyond_sme_disagrees(tmp_path, capsys):
    a = _study(tmp_path / "a", [-32.9, -26.4, 23.5, -8.5, 2.8], me=5.0, sme=10.0)
    b = _study(tmp_path / "b", [-33.3, -27.2, -23.5, -8.0, 0.4], me=5.0, sme=10.0)
    assert cli(["compare", str(a), str(b)]) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("DISAGREE: beyond SME A {B−, A−, F+}, B {B−, A−, F−}")
    assert "(same set)" in line and "4 of 5 columns agree" in line
    assert "covers the other's estimate in 4 of 5" in line


def test_different_scales_or_designs_are_refused(tmp_path, capsys):
    a = _study(tmp_path / "a", [-3, -2, 2, -1, 0.1], me=0.5, sme=1, design={"n": 1})
    b = _study(tmp_path / "b", [-3, -2, 2, -1, 0.1], me=0.5, sme=1, model="multiplicative")
    assert cli(["compare", str(a), str(b)]) == 2
    assert "not comparable" in capsys.readouterr().err
    assert cli(["compare", str(a), str(tmp_path / "nowhere")]) == 2
    assert "effects.csv: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["defining_relation", "n_rows"])
def test_two_designs_are_refused(tmp_path, capsys, key):
    same = {"factors": [], "defining_relation": "I = ABF", "n_rows": 16}
    a = _study(tmp_path / "a", [-3, -2, 2, -1, 0.1], 0.5, 1, design=same)
    b = _study(tmp_path / "b", [-3, -2, 2, -1, 0.1], 0.5, 1, design={**same, key: "other"})
    assert cli(["compare", str(a), str(b)]) == 2
    assert f"not the same design ({key} differs)" in capsys.readouterr().err
