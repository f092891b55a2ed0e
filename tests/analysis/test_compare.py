"""`ybscale compare`: two results folders with known estimates give the expected table."""

import functools
import json

import numpy as np
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
    # E: -8.5 (active at ME) and -4.6 (not): each covers the other, so they agree
    assert table.loc["E", ["active_a", "active_b", "agree"]].tolist() == [True, False, True]
    assert table["agree"].all() and not table["differ"].any()
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("AGREE: beyond SME A {B−, A−, F+}, B {B−, A−, F+}")
    assert "active at ME A {B−, A−, F+, E−}, B {B−, A−, F+} (different sets)" in line
    assert "5 of 5 columns agree; each interval covers the other's estimate in 5 of 5" in line


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
    assert cli(["compare", str(a), str(b)]) == 2  # two scales, nothing to analyse again
    err = capsys.readouterr().err
    assert "is on the additive scale" in err and "design/design.json, " in err
    assert cli(["compare", str(a), str(tmp_path / "nowhere")]) == 2
    assert "effects.csv: no such file" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["defining_relation", "n_rows"])
def test_two_designs_are_refused(tmp_path, capsys, key):
    same = {"factors": [], "defining_relation": "I = ABF", "n_rows": 16}
    a = _study(tmp_path / "a", [-3, -2, 2, -1, 0.1], 0.5, 1, design=same)
    b = _study(tmp_path / "b", [-3, -2, 2, -1, 0.1], 0.5, 1, design={**same, key: "other"})
    assert cli(["compare", str(a), str(b)]) == 2
    assert f"not the same design ({key} differs)" in capsys.readouterr().err


# ------------------------------------------------ verdicts that follow the estimates (issue 35)

NAMES = ("temperature", "pressure", "concentration", "stirring_rate")
FOUR = {"factors": {x: {"name": n, "levels": [-1, 1]} for x, n in zip("ABCD", NAMES, strict=True)}}
SYSTEM = {"A": 20.0, "B": -12.0, "AC": 8.0}  # effects (high − low) of the simulated system


@functools.cache
def _design(replications: int):
    from ybscale.design.factorial import design_from_dict

    return design_from_dict({**FOUR, "replications": replications})


def _simulated(rng, replications=1, scale=1.0, sigma=2.0):
    """A study's effects (as compare reads effects.csv): estimate_effects of
    100 + Σ effect/2·x + N(0, σ²) on a 2^4."""
    from ybscale.analysis.compare import effects_frame
    from ybscale.analysis.effects import estimate_effects

    design = _design(replications)
    x = design.model_matrix().astype(float)
    y = 100 + sum(scale * e / 2 * x[t] for t, e in SYSTEM.items())
    return effects_frame(estimate_effects(design, y + rng.normal(0, sigma, len(y))))


def _verdicts(pairs, rng) -> int:
    """How many of 200 simulated pairs compare AGREE."""
    from ybscale.analysis.compare import agrees, compare

    return sum(
        agrees(compare(_simulated(rng, **pairs[0]), _simulated(rng, **pairs[1])))
        for _ in range(200)
    )


@pytest.mark.parametrize("replications_b", [1, 2])
def test_the_same_system_twice_agrees_in_90_percent(replications_b):
    """Two independent studies of one system (unreplicated twice: Lenth; unreplicated and
    replicated twice: Lenth against t tests): AGREE in at least 90 % of 200 seeds."""
    rng = np.random.default_rng(35 + replications_b)
    pairs = ({}, {"replications": replications_b})
    agree = _verdicts(pairs, rng)
    print(f"AGREE in {agree} of 200")
    assert agree >= 180


def test_effects_ten_times_apart_disagree_in_95_percent():
    """The same active columns with the same signs, ten times larger in study B (beyond each
    other's intervals): DISAGREE in at least 95 % of 200 seeds."""
    rng = np.random.default_rng(350)
    agree = _verdicts(({}, {"scale": 10.0}), rng)
    print(f"AGREE in {agree} of 200")
    assert agree <= 10


def test_one_effect_far_apart_disagrees_and_one_on_the_margin_agrees(tmp_path, capsys):
    """+10 against +1000 (no interval covers the other estimate) is not AGREE; an effect just
    beyond SME in one study and just under it in the other, each interval covering the other
    estimate, is not DISAGREE."""
    small = [10, 0.5, -0.4, 0.3, 0.2]
    a = _study(tmp_path / "a", small, me=2.0, sme=4.0)
    b = _study(tmp_path / "b", [1000, 0.5, -0.4, 0.3, 0.2], me=2.0, sme=4.0)
    assert cli(["compare", str(a), str(b)]) == 1
    assert "1 differ beyond their uncertainty" in capsys.readouterr().out
    c = _study(tmp_path / "c", [4.2, 0.5, -0.4, 0.3, 0.2], me=2.0, sme=4.0)
    d = _study(tmp_path / "d", [3.8, 0.6, -0.3, 0.2, 0.1], me=2.0, sme=4.0)
    assert cli(["compare", str(c), str(d)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("AGREE: beyond SME A {B+}, B {none}")


def test_two_half_fractions_of_opposite_sign_are_refused(tmp_path, capsys):
    """D = ABC and D = −ABC analysed by `ybscale analyze --out`: not the same columns (AB is
    AB + CD in one, AB − CD in the other): exit 2, from the design records analyze writes,
    and from the signed aliases of effects.csv where a folder has no record."""
    import shutil

    import yaml

    from ybscale.analysis.analyze import main as analyze_main
    from ybscale.design.factorial import design_from_dict

    folders = []
    for name, generator in (("plus", "ABC"), ("minus", "-ABC")):
        spec = {**FOUR, "generators": {"D": generator}}
        design = design_from_dict(spec)
        x = design.model_matrix().astype(float)
        rates = 50 + 10 * x["A"] - 6 * x["B"] + np.arange(8) % 3
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
        table = pd.DataFrame({"run": design.run_ids, "rate": rates.to_numpy()})
        table.to_csv(tmp_path / f"{name}.csv", index=False)
        out = tmp_path / name / "results"
        args = ["--design", str(tmp_path / f"{name}.yaml"), "--responses",
                str(tmp_path / f"{name}.csv"), "--out", str(out), "--no-charts"]  # fmt: skip
        assert analyze_main(args) == 0
        assert json.loads((out / "design" / "design.json").read_text())["defining_relation"]
        folders.append(out)
    capsys.readouterr()
    assert cli(["compare", *map(str, folders)]) == 2
    assert "not the same design (defining_relation differs)" in capsys.readouterr().err
    shutil.rmtree(folders[1] / "design")
    assert cli(["compare", *map(str, folders)]) == 2
    assert "not the same design: column" in capsys.readouterr().err


def test_two_scales_are_compared_on_the_one_both_studies_choose(tmp_path, capsys):
    """Study A analysed with analysis.model auto (log on multiplicative data), study B on the
    same system forced to additive: compare analyses both responses tables again on the scale
    the rule picks on both together (log), says so, and agrees; without a responses table it
    refuses naming the file."""
    import yaml
    from designs import seed_design, seed_design_file

    from ybscale.analysis.analyze import main as analyze_main

    design = seed_design_file(tmp_path)
    x = seed_design().model_matrix().astype(float)
    rng = np.random.default_rng(45)
    folders = []
    for name, model in (("a", "auto"), ("b", "additive")):
        log_y = 3.5 + 0.45 * x["B"] - 0.3 * x["A"] + 0.1 * x["C"] + rng.normal(0, 0.03, 16)
        table = pd.DataFrame({"run": x.index, "tps": 10 ** log_y.to_numpy()})
        table.to_csv(tmp_path / f"{name}.csv", index=False)
        out = tmp_path / name / "results"
        args = ["--design", str(design), "--responses", str(tmp_path / f"{name}.csv"),
                "--out", str(out), "--no-charts", "--model", model]  # fmt: skip
        assert analyze_main(args) == 0
        assert (out / "responses.csv").read_text() == (tmp_path / f"{name}.csv").read_text()
        folders.append(out)
    models = [pd.read_csv(f / "effects.csv")["model"].iloc[0] for f in folders]
    assert models == ["multiplicative", "additive"]
    capsys.readouterr()
    assert cli(["compare", *map(str, folders), "--out", str(tmp_path / "cmp.csv")]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("AGREE: beyond SME A {B+, A−")
    assert "(multiplicative scale); " in line
    assert f"{folders[0]} chose the log scale, {folders[1]} the additive: both analysed again " \
        "on the log scale, the one both studies' tps choose together" in line  # fmt: skip
    table = pd.read_csv(tmp_path / "cmp.csv").set_index("term")
    assert table.loc["B", "effect_a"] == pytest.approx(0.9, abs=0.05)  # log10 units
    assert yaml.safe_load(design.read_text())["generators"] == {"E": "BC", "F": "AB"}
    (folders[1] / "responses.csv").unlink()
    assert cli(["compare", *map(str, folders)]) == 2
    err = capsys.readouterr().err
    assert "on the multiplicative scale" in err and "which needs" in err
    assert f"{folders[1]}/ceilings.csv or responses.csv (no such file)" in err


def test_a_study_beside_a_neighbour_is_compared_within_what_it_may_have_moved(tmp_path, capsys):
    """Issue 49: B's estimates 12.9 apart disagree (2.5 standard errors each way); when study B
    kept disturbed runs and its neighbour may have moved B's estimate down by 15, the quiet
    value could have been A's: they agree, and the summary names what stays established."""
    a = _study(tmp_path / "a", [-32.9, -26.4, 23.5, -8.5, 2.8], me=5.0, sme=10.0)
    busy = [-20.0, -17.0, 12.0, -8.0, 0.4]
    b = _study(tmp_path / "b", busy, me=5.0, sme=10.0)
    assert cli(["compare", str(a), str(b)]) == 1
    capsys.readouterr()
    effects = pd.read_csv(b / "effects.csv")
    effects["disturbance_down"] = [15.0, 12.0, 0.0, 0.0, 0.0]
    effects["disturbance_up"] = [0.0, 0.0, 14.0, 0.0, 0.0]
    effects["established"] = [True, True, True, False, False]
    effects.to_csv(b / "effects.csv", index=False)
    assert cli(["compare", str(a), str(b)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("AGREE:") and "0 differ beyond their uncertainty" in line
    assert line.endswith("B kept disturbed runs: established beyond what the neighbour may have "
                         "moved A {B−, A−, F+, E−}, B {B−, A−, F+}")  # fmt: skip
    effects["disturbance_down"] = [0.0, 12.0, 0.0, 0.0, 0.0]  # B unmoved: 12.9 apart again
    effects.to_csv(b / "effects.csv", index=False)
    assert cli(["compare", str(a), str(b)]) == 1
