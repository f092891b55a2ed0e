"""`ybscale analyze`: reading responses, output files, and clear errors on malformed input."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from designs import seed_design

from ybscale.analysis.analyze import AnalysisPaths, ResponsesError, analyze, main, read_responses
from ybscale.design.factorial import design_from_dict
from ybscale.report.analyze import main as verb  # `ybscale analyze`: the findings too

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "stats"
HALF = {
    "factors": {
        "A": {"name": "temperature", "levels": ["low", "high"]},
        "B": {"name": "pressure", "levels": [10, 20]},
        "C": {"name": "concentration", "levels": ["-", "+"]},
        "D": {"name": "stirring_rate", "levels": ["-", "+"]},
    },
    "generators": {"D": "ABC"},
    "replications": 1,
}
# Montgomery Example 8.1 in standard order: (1) ad bd ab cd ac bc abcd
RATES = [45, 100, 45, 65, 75, 60, 80, 96]


@pytest.fixture
def design_file(tmp_path) -> Path:
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump(HALF))
    return path


def _write(tmp_path, text: str, name: str = "responses.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def findings_of(out: Path) -> str:
    """`ybscale analyze --out` wrote the findings in the words of what the table holds:
    nothing of a measurement, a throughput or its clusters (issue 60)."""
    text = " ".join((out / "findings.md").read_text().split())
    assert text.startswith("Findings ===")
    for measured in ("tps", "pgbench", "client count", "Measuring time", "throughput", "cluster"):
        assert measured not in text, measured
    return text


def _by_run(rates=RATES) -> str:
    return "run,rate\n" + "".join(f"run{i:02d},{y}\n" for i, y in enumerate(rates, start=1))


def test_analyze_writes_outputs(tmp_path, design_file, capsys):
    responses = _write(tmp_path, _by_run())
    out = tmp_path / "out"
    code = main(
        ["--design", str(design_file), "--responses", str(responses), "--out", str(out)]
        + ["--no-charts"]
    )
    assert code == 0
    for name in ("effects", "anova", "residuals", "outliers"):
        assert (out / f"{name}.csv").is_file()
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    assert effects.loc["A", "effect"] == pytest.approx(19.0)
    assert effects.loc["AC", "effect"] == pytest.approx(-18.5)
    assert not (out / "charts").exists()
    assert "effects.csv" in capsys.readouterr().out


def test_analyze_function_returns_tables(tmp_path):
    design = design_from_dict(HALF)
    responses = pd.DataFrame({"rate": RATES}, index=pd.Index(design.run_ids, name="run"))
    tables = analyze(design, responses, "rate", tmp_path, charts=False, model="multiplicative")
    assert set(tables) == {"effects", "anova", "residuals", "outliers"}
    assert set(tables["effects"]["model"]) == {"multiplicative"}


def test_every_output_goes_exactly_where_it_is_named(tmp_path):
    """The rule names each file: nothing is written anywhere else (no folder layout assumed)."""
    from ybscale.report.charts import AnalysisChartPaths

    design = design_from_dict(HALF)
    responses = pd.DataFrame({"rate": RATES}, index=pd.Index(design.run_ids, name="run"))
    charts = AnalysisChartPaths(
        tmp_path / "a" / "p.svg", tmp_path / "b" / "hn.svg", tmp_path / "ix", tmp_path / "res"
    )
    tables = tmp_path / "t"
    paths = AnalysisPaths(
        tables / "e.csv", tables / "an.csv", tables / "r.csv", tables / "o.csv", charts
    )
    analyze(design, responses, "rate", paths)
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert {"t/e.csv", "t/an.csv", "t/r.csv", "t/o.csv", "a/p.svg", "b/hn.svg"} <= written
    assert "ix/interaction_AB.svg" in written and "res/residuals_qq.svg" in written
    assert {w.split("/")[0] for w in written} == {"t", "a", "b", "ix", "res"}
    assert pd.read_csv(tables / "e.csv")["term"].iloc[0] != "error"


def test_responses_by_level_labels_in_any_order(tmp_path):
    design = design_from_dict(HALF)
    lines = ["stirring_rate,concentration,pressure,temperature,rate"]
    rows = list(design.sign_table().iterrows())
    for _, s in reversed(rows):
        labels = [design.factor(x).level(s[x]) for x in "DCBA"]
        lines.append(",".join(map(str, labels)) + f",{RATES[int(s['row']) - 1]}")
    frame = read_responses(_write(tmp_path, "\n".join(lines) + "\n"), design)
    assert frame.attrs["response"] == "rate"
    assert list(frame.index) == design.run_ids
    assert list(frame["rate"]) == RATES


def test_seed_table_matched_by_base_signs():
    """Table 3 lists A slowest; the seed design has A fastest (Yates)."""
    design = seed_design()
    frame = read_responses(DATA / "seed_table5.csv", design, "throughput_ceiling")
    # Yates run02 is A+ B- C- D-: seed run 9 (2985); run16 is all + : seed run 16 (878)
    assert frame.loc["run02", "seed_run"] == 9 and frame.loc["run02", "throughput_ceiling"] == 2985
    assert frame.loc["run16", "seed_run"] == 16
    assert frame.loc["run04", "throughput_ceiling"] == 2931  # seed run 13


def test_replicates_by_column():
    spec = {
        "factors": {
            "A": {"name": "memory", "levels": [4, 16]},
            "B": {"name": "cache", "levels": [1, 2]},
        },
        "replications": 3,
    }
    design = design_from_dict(spec)
    frame = read_responses(DATA / "jain_ch18_memory_cache.csv", design)
    # replicate 2 of row 1 is run05; replicate 3 of row 4 is run12
    assert frame.loc["run05", "mips"] == 18 and frame.loc["run12", "mips"] == 81


def test_ambiguous_response_lists_candidates(tmp_path):
    design = design_from_dict(HALF)
    text = "run,rate,other\n" + "".join(f"run{i:02d},{y},1\n" for i, y in enumerate(RATES, 1))
    path = _write(tmp_path, text)
    with pytest.raises(ResponsesError, match="rate, other"):
        read_responses(path, design)


def _bad_by_factors(change) -> str:
    design = design_from_dict(HALF)
    rows = []
    for _, s in design.sign_table().iterrows():
        rows.append({x: int(s[x]) for x in "ABCD"} | {"rate": RATES[int(s["row"]) - 1]})
    change(rows)
    frame = pd.DataFrame(rows)
    return frame.to_csv(index=False)


MALFORMED = {
    "unknown run id": (_by_run().replace("run05", "run99"), "run99"),
    "missing column": ("run,speed\n" + "run01,1\n", "no response column 'rate'"),
    "non-numeric": (_by_run().replace(",75", ",fast"), "'fast' is not a number"),
    "missing value": (_by_run().replace(",75", ","), "missing value"),
    "duplicated run": (_by_run().replace("run05", "run04"), "duplicates row 4"),
    "duplicated combination": (
        _bad_by_factors(lambda rows: rows.__setitem__(7, dict(rows[0]))),
        "appears more than 1 time",
    ),
    "not in the fraction": (
        _bad_by_factors(lambda rows: rows[0].__setitem__("D", 1)),
        "not in the fraction",
    ),
    "missing combination": (_bad_by_factors(lambda rows: rows.pop()), "missing run(s) run08"),
    "bad sign": (_bad_by_factors(lambda rows: rows[2].__setitem__("B", 2)), "not -1 or +1"),
    "unknown level": (
        "temperature,pressure,concentration,rate\nwarm,10,-,1\n",
        "level 'warm' is not in the design",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_exits_with_file_name(tmp_path, design_file, case):
    text, needle = MALFORMED[case]
    path = _write(tmp_path, text, f"{case.replace(' ', '_')}.csv")
    argv = ["--design", str(design_file), "--responses", str(path), "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--response", "rate", "--no-charts"])
    message = str(exc.value.code)
    assert str(path) in message, message
    assert needle in message, message
    assert "\n" not in message


def test_missing_responses_file(tmp_path, design_file):
    with pytest.raises(SystemExit) as exc:
        main(["--design", str(design_file), "--responses", "nope.csv", "--out", str(tmp_path)])
    assert "nope.csv" in str(exc.value.code)


def test_module_entry_point_has_no_traceback(tmp_path, design_file):
    path = _write(tmp_path, _by_run().replace("run05", "run99"))
    proc = subprocess.run(
        [sys.executable, "-m", "ybscale.analysis.analyze", "--design", str(design_file)]
        + ["--responses", str(path), "--out", str(tmp_path / "out"), "--no-charts"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "run99" in proc.stderr and str(path) in proc.stderr


def test_a_response_that_is_not_positive_leaves_stderr_to_errors(tmp_path, design_file):
    """Issue 60: `ybscale analyze` printed numpy's RuntimeWarnings (a log of zero or less,
    taken to weigh the log scale) when a response column held values that are not positive.
    Example 8.1's rates less 60, some of them negative: the findings, and nothing on stderr;
    forced onto the log scale, one line naming the run, and no warning before it."""
    path = _write(tmp_path, _by_run([y - 60 for y in RATES]))
    base = [sys.executable, "-m", "ybscale.cli", "analyze", "--design", str(design_file)]
    proc = subprocess.run([*base, "--responses", str(path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "some responses are not positive: no log scale" in findings_of(tmp_path / "out")
    proc = subprocess.run([*base, "--responses", str(path), "--out", str(tmp_path / "log"),
                           "--model", "multiplicative", "--no-charts"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr == (f"ybscale analyze: {path}: multiplicative model needs positive "
                           "responses; run01 is -15.0\n")  # fmt: skip


# Montgomery (8th ed.), §7.4, Example 7.2: Example 6.2's sixteen runs measured in two blocks
# with ABCD confounded (block 1, the principal block: (1), ab, ac, bc, ad, bd, cd, abcd), and,
# as the book does to show the blocks' effect, every observation of one block 20 lower. The
# block difference then sits in the ABCD column alone: the other fourteen effects are Example
# 6.2's published ones (A 21.625, C 9.875, D 14.625, AC -18.125, AD 16.625, ...) and the book
# finds the same active set, A, C, D, AC and AD.
FILTRATION = [45, 71, 48, 65, 68, 60, 80, 65, 43, 100, 45, 104, 75, 86, 70, 96]  # (1) a b ab ...
FULL = {"factors": {x: {"name": f"f{x}", "levels": ["-", "+"]} for x in "ABCD"}}


def _blocked(tmp_path, rates, blocks) -> tuple[Path, Path]:
    design = tmp_path / "design.yaml"
    design.write_text(yaml.safe_dump(FULL))
    lines = "".join(
        f"run{i:02d},{b},{y}\n" for i, (b, y) in enumerate(zip(blocks, rates, strict=True), 1)
    )
    return design, _write(tmp_path, "run,block,rate\n" + lines)


def test_an_unreplicated_fraction_in_blocks_takes_the_block_columns_out_of_the_tests(
    tmp_path, capsys
):
    """Issue 47: a `block` column in the responses of an unreplicated design was ignored
    ("blocks: none (completely randomized)") and the column carrying the block differences was
    judged as an effect. Now the columns the blocks are confounded with leave the tests: the
    effects table and the ANOVA have a `block` line naming ABCD with its sum of squares, Lenth
    judges the 14 other columns, and the summary says so."""
    signs = design_from_dict(FULL).model_matrix()
    blocks = [1 if v > 0 else 2 for v in signs["ABCD"]]
    rates = [y - 20 if b == 1 else y for y, b in zip(FILTRATION, blocks, strict=True)]
    design, responses = _blocked(tmp_path, rates, blocks)
    out = tmp_path / "out"
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "blocks: yes, confounded with ABCD: taken out of the effect tests" in printed
    said = findings_of(out)
    assert "The rows were measured in blocks confounded with ABCD" in said
    assert "**fA** + instead of - (A) raises rate by 21.6" in said
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    assert "ABCD" not in effects.index and effects.loc["block", "alias"] == "ABCD"
    published = {"A": 21.625, "B": 3.125, "C": 9.875, "D": 14.625, "AB": 0.125,
                 "AC": -18.125, "AD": 16.625, "BC": 2.375, "BD": -0.375, "CD": -1.125,
                 "ABC": 1.875, "ABD": 4.125, "ACD": -1.625, "BCD": -2.625}  # fmt: skip
    for term, value in published.items():
        assert effects.loc[term, "effect"] == pytest.approx(value), term
    # the block difference: ABCD's 1.375 less 20 (block 1, ABCD = +1, lowered)
    block_effect = 1.375 - 20
    assert effects.loc["block", "sum_sq"] == pytest.approx(16 * (block_effect / 2) ** 2)
    tested = effects.drop(index=["block"])
    assert set(tested.index[tested["active"].astype(bool)]) == {"A", "C", "D", "AC", "AD"}
    assert len(tested) == 14  # Lenth over the fourteen columns left
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    assert "ABCD" not in anova.index
    assert anova.loc["block", "df"] == 1 and anova.loc["block", "alias"] == "ABCD"
    assert anova.loc["block", "sum_sq"] == pytest.approx(16 * (block_effect / 2) ** 2)
    # unblocked, the same data judge ABCD, the block difference, an active effect
    from ybscale.analysis.effects import estimate_effects

    unblocked = design_from_dict(FULL)
    y = pd.Series(rates, index=unblocked.run_ids, dtype=float)
    plain = estimate_effects(unblocked, y).set_index("term")
    assert plain.loc["ABCD", "active"] and plain.loc["ABCD", "effect"] == pytest.approx(-18.625)


def test_blocks_that_are_not_a_regular_blocking_or_hide_a_main_effect_are_refused(tmp_path):
    """Blocks of an unreplicated design must be confounded with whole columns (b − 1 of them)
    and none of a main effect; anything else is refused naming what it found."""
    signs = design_from_dict(FULL).model_matrix()
    irregular = [1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2]
    design, responses = _blocked(tmp_path, FILTRATION, irregular)
    with pytest.raises(SystemExit, match="2 blocks of an unreplicated design must be confounded"):
        main(["--design", str(design), "--responses", str(responses), "--no-charts",
              "--out", str(tmp_path / "o1")])  # fmt: skip
    by_a = [1 if v > 0 else 2 for v in signs["A"]]
    design, responses = _blocked(tmp_path, FILTRATION, by_a)
    with pytest.raises(SystemExit, match="confounded with A: a main effect cannot be told"):
        main(["--design", str(design), "--responses", str(responses), "--no-charts",
              "--out", str(tmp_path / "o2")])  # fmt: skip


def _centred(tmp_path, factors: dict, lines: list[str]) -> tuple[Path, Path]:
    design = tmp_path / "design.yaml"
    design.write_text(yaml.safe_dump({"factors": factors}))
    return design, _write(tmp_path, "\n".join(lines) + "\n")


def test_centre_points_give_pure_error_and_the_curvature_test(tmp_path, capsys):
    """Issue 47, centre points: Montgomery's 2^2 with five centre points (Design and Analysis
    of Experiments, 8th ed., §6.8, the process-yield example: reaction time 30/40 min,
    temperature 150/160 °C, corners 39.3, 40.9, 40.0, 41.5, centres at 35 min and 155 °C
    40.3, 40.5, 40.7, 40.2, 40.6). Published ANOVA: A 2.4025 (F 55.87), B 0.4225 (F 9.83),
    AB 0.0025 (F 0.058), pure quadratic curvature 0.0027 (F 0.063), error 0.1720 on 4 df
    (MS 0.0430): the centre points' pure error tests every line, and there is no curvature."""
    factors = {"A": {"name": "time", "levels": [30, 40]},
               "B": {"name": "temperature", "levels": [150, 160]}}  # fmt: skip
    lines = ["time,temperature,yield", "30,150,39.3", "40,150,40.9", "30,160,40.0",
             "40,160,41.5", *(f"35,155,{y}" for y in (40.3, 40.5, 40.7, 40.2, 40.6))]  # fmt: skip
    design, responses = _centred(tmp_path, factors, lines)
    out = tmp_path / "out"
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive"]) == 0  # fmt: skip
    assert "curvature (centre points): F = 0.0633, p = 0.814: no evidence it bends" in (
        capsys.readouterr().out
    )
    said = findings_of(out)
    assert (
        "**Curvature.** 5 centre run(s) set every factor to the middle of its levels (time "
        "35, temperature 155): their mean yield is 40.5 against 40.4" in said
    )
    assert "No evidence that the response bends between the levels" in said
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    published = {"A": (2.4025, 55.87), "B": (0.4225, 9.83), "AB": (0.0025, 0.058),
                 "curvature": (0.0027, 0.063)}  # fmt: skip
    for term, (ss, f) in published.items():
        assert anova.loc[term, "sum_sq"] == pytest.approx(ss, abs=5e-5), term
        assert round(anova.loc[term, "F"], 3 if f < 1 else 2) == f, term
        assert anova.loc[term, "error"] == "pure error", term
    assert "residual" not in anova.index and "lack of fit" not in anova.index
    assert anova.loc["pure error", "df"] == 4
    assert anova.loc["pure error", "sum_sq"] == pytest.approx(0.1720)
    assert anova.loc["pure error", "mean_sq"] == pytest.approx(0.0430)
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    assert set(effects["method"].dropna()) == {"t"}  # tested against the pure error, 4 df
    assert effects.loc["error", "sum_sq"] == pytest.approx(0.1720)
    # Holm over the three columns (the default) keeps A; each at α alone, as the book: A, B
    assert set(effects.index[effects["active"].astype(bool)]) == {"A"}
    assert main(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive", "--multiplicity", "none"]) == 0  # fmt: skip
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    assert set(effects.index[effects["active"].astype(bool)]) == {"A", "B"}


def test_centre_points_split_the_residual_into_lack_of_fit_and_pure_error(tmp_path):
    """Montgomery (8th ed.), Example 6.6, Table 6.24: the filtration 2^4 (Example 6.2) with
    four centre points (73, 75, 66, 69), the model A, C, D, AC, AD: published pure quadratic
    curvature 1.51 (F 0.081, p 0.7809), residual 243.87 on 13 df, lack of fit 195.12 on 10 df
    (F 1.20, p 0.4942), pure error 48.75 on 3 df, corrected total 5781.20 on 19 df."""
    factors = {x: {"name": f"f{x}", "levels": [-1, 1]} for x in "ABCD"}
    signs = design_from_dict({"factors": factors}).model_matrix()
    lines = ["A,B,C,D,rate"] + [
        ",".join(str(int(signs.loc[run, x])) for x in "ABCD") + f",{y}"
        for run, y in zip(signs.index, FILTRATION, strict=True)
    ] + [f"0,0,0,0,{y}" for y in (73, 75, 66, 69)]  # fmt: skip
    design, responses = _centred(tmp_path, factors, lines)
    out = tmp_path / "out"
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive"]) == 0  # fmt: skip
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    kept = anova[~anova["pooled"].astype(bool) & anova["F"].notna()].index
    assert set(kept) == {"A", "C", "D", "AC", "AD", "curvature", "lack of fit"}
    assert anova.loc[["A", "C", "D", "AC", "AD"], "sum_sq"].sum() == pytest.approx(
        5535.81, abs=0.01
    )
    assert round(anova.loc["curvature", "sum_sq"], 2) == 1.51
    assert round(anova.loc["curvature", "F"], 3) == 0.081
    assert round(anova.loc["curvature", "p_value"], 4) == 0.7809
    assert anova.loc["residual", "df"] == 13  # 195.125 + 48.75 = 243.875, printed 243.87
    assert anova.loc["residual", "sum_sq"] == pytest.approx(243.87, abs=0.006)
    assert anova.loc["lack of fit", "df"] == 10
    assert anova.loc["lack of fit", "sum_sq"] == pytest.approx(195.12, abs=0.006)  # 195.125
    assert round(anova.loc["lack of fit", "F"], 2) == 1.20
    assert round(anova.loc["lack of fit", "p_value"], 4) == 0.4942
    assert (anova.loc["pure error", "df"], anova.loc["pure error", "sum_sq"]) == (3, 48.75)
    total = anova.loc[["A", "C", "D", "AC", "AD", "curvature", "residual"], "sum_sq"].sum()
    assert total == pytest.approx(5781.20, abs=0.01)
    assert "No evidence that the response bends between the levels" in findings_of(out)


def test_a_centre_point_must_centre_every_factor(tmp_path):
    """A factor that has a middle is at its middle on a centre row; one without (categorical
    levels) is held at a level, and then the centre rows must leave a pure error."""
    factors = {"A": {"name": "time", "levels": [30, 40]},
               "B": {"name": "temperature", "levels": [150, 160]}}  # fmt: skip
    lines = ["time,temperature,yield", "30,150,1", "40,150,2", "30,160,3", "40,160,4",
             "35,150,2.5"]  # fmt: skip
    design, responses = _centred(tmp_path, factors, lines)
    with pytest.raises(SystemExit, match="row 5: A at the centre but not B"):
        main(["--design", str(design), "--responses", str(responses), "--no-charts",
              "--out", str(tmp_path / "o")])  # fmt: skip
    factors["B"] = {"name": "catalyst", "levels": ["x", "y"]}
    lines = ["time,catalyst,yield", "30,x,1", "40,x,2", "30,y,3", "40,y,4", "35,x,2.5"]
    design, responses = _centred(tmp_path, factors, lines)
    with pytest.raises(SystemExit, match=r"no pure error: every centre row is alone at its "
                       r"levels \(row 5\)"):  # fmt: skip
        main(["--design", str(design), "--responses", str(responses), "--no-charts",
              "--out", str(tmp_path / "o")])  # fmt: skip
    lines = ["time,catalyst,yield", "30,x,1", "40,x,2", "30,y,3", "40,y,4", "35,35,2.5"]
    design, responses = _centred(tmp_path, factors, lines)
    with pytest.raises(SystemExit, match="row 5: a centre row must give the level of catalyst"):
        main(["--design", str(design), "--responses", str(responses), "--no-charts",
              "--out", str(tmp_path / "o")])  # fmt: skip


# R rsm's worked example of a blocked first-order design (the package's vignette "Response-
# surface illustration", rsm 2.10.6, inst/doc/illus.rmd: `expt3` and its fold-over `expt4`,
# joined by `djoin` into two blocks): a 2^3 in two blocks, each block a half fraction
# (x3 = x1 x2 in block 1, x3 = -x1 x2 in block 2: the blocks are confounded with x1 x2 x3)
# with four centre runs; flour 1.15/1.35 cups, sugar 0.35/0.55, butter 0.15/0.35, the centre
# 1.25, 0.45, 0.25; the rating of each cake as printed there, in its run order.
RSM_FACTORS = {"A": {"name": "flour", "levels": [1.15, 1.35]},
               "B": {"name": "sugar", "levels": [0.35, 0.55]},
               "C": {"name": "butter", "levels": [0.15, 0.35]}}  # fmt: skip
RSM_RUNS = [  # block, flour, sugar, butter, rating
    (1, 1.25, 0.45, 0.25, 26.6), (1, 1.35, 0.35, 0.15, 25.3), (1, 1.35, 0.55, 0.35, 23.7),
    (1, 1.15, 0.55, 0.15, 26.0), (1, 1.25, 0.45, 0.25, 27.8), (1, 1.25, 0.45, 0.25, 26.2),
    (1, 1.15, 0.35, 0.35, 27.3), (1, 1.25, 0.45, 0.25, 27.2),
    (2, 1.15, 0.35, 0.15, 34.0), (2, 1.25, 0.45, 0.25, 35.1), (2, 1.35, 0.55, 0.15, 31.0),
    (2, 1.15, 0.55, 0.35, 34.6), (2, 1.25, 0.45, 0.25, 35.5), (2, 1.25, 0.45, 0.25, 34.9),
    (2, 1.25, 0.45, 0.25, 35.1), (2, 1.35, 0.35, 0.35, 33.3),
]  # fmt: skip


def _rsm_table(tmp_path, runs=RSM_RUNS) -> tuple[Path, Path]:
    lines = ["block,flour,sugar,butter,rating"] + [",".join(map(str, r)) for r in runs]
    return _centred(tmp_path, RSM_FACTORS, lines)


def test_blocks_with_centre_points_reproduce_rsm(tmp_path, capsys):
    """Issue 60: a `block` column with centre rows was analysed as if the centre runs were in
    one block: no curvature, the block sum of squares from the corners alone, and the t tests on
    the centre runs' spread about one mean (the block difference counted as noise).

    rsm's `anal4 = rsm(rating ~ Block + FO(x1, x2, x3), data = djoin(expt3, expt4))` prints:
    x1 -1.07500, x2 -0.57500, x3 0.32500 (coded coefficients, effects twice them), Block2
    7.92500; Block 1 df 251.223; FO(x1, x2, x3) 3 df 12.735; Residuals 11 df 14.313 (MS 1.301),
    Lack of fit 5 df 12.653 (F 9.1464, p 0.008934), Pure error 6 df 1.660 (MS 0.277); x1's
    t -2.6656 (p 0.02197, on the residual's 11 df). ybscale fits every column and the
    curvature after the block and tests each on the pure error within the blocks: rsm's
    residual is ybscale's interactions, curvature, lack of fit and pure error together, and
    its lack of fit the same less the pure error — most of it the curvature the vignette's
    text reads into it ("we have one big first-order effect, but evidence of curvature")."""
    design, responses = _rsm_table(tmp_path)
    out = tmp_path / "out"
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "active on rating (t, holm over 6 columns): A" in printed
    assert "blocks: yes, confounded with ABC: taken out of the effect tests" in printed
    assert "the response bends between the levels" in printed
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    for term, coefficient in {"A": -1.075, "B": -0.575, "C": 0.325}.items():
        assert effects.loc[term, "effect"] == pytest.approx(2 * coefficient), term
    assert round(anova.loc["block", "sum_sq"], 3) == 251.223 and anova.loc["block", "df"] == 1
    assert anova.loc["block", "alias"] == "ABC" and "ABC" not in effects.index
    assert effects.loc["block", "sum_sq"] == pytest.approx(anova.loc["block", "sum_sq"])
    # Block2 7.925: the blocks' means differ by it, over all sixteen runs
    assert anova.loc["block", "sum_sq"] == pytest.approx(16 * (7.925 / 2) ** 2)
    assert round(anova.loc[["A", "B", "C"], "sum_sq"].sum(), 3) == 12.735
    pe = anova.loc["pure error"]
    assert (pe["df"], round(pe["sum_sq"], 3), round(pe["mean_sq"], 3)) == (6, 1.660, 0.277)
    residual = ["AB", "AC", "BC", "curvature", "lack of fit", "pure error"]
    assert anova.loc[residual, "df"].sum() == 11
    assert anova.loc[residual, "sum_sq"].sum() == pytest.approx(14.3125)  # rsm: 14.313
    lack = anova.loc[residual[:-1], "sum_sq"].sum()
    assert lack == pytest.approx(12.6525)  # rsm: 12.653
    assert round(lack / 5 / pe["mean_sq"], 4) == 9.1464
    from scipy import stats

    assert round(float(stats.f.sf(lack / 5 / pe["mean_sq"], 5, 6)), 6) == 0.008934
    ms_residual = anova.loc[residual, "sum_sq"].sum() / 11
    t_x1 = effects.loc["A", "effect"] / 2 / (ms_residual / 8) ** 0.5
    assert round(t_x1, 4) == -2.6656 and round(2 * stats.t.sf(-t_x1, 11), 5) == 0.02197
    # the curvature within the blocks: each block's centre mean against its own corners
    assert anova.loc["curvature", "sum_sq"] == pytest.approx(10.89)
    assert anova.loc["curvature", "p_value"] < 0.001
    # one error for both tables: the pure error within the blocks, on 6 df
    assert set(anova["error"].dropna()) == {"pure error"}
    assert effects.loc["error", "sum_sq"] == pytest.approx(pe["sum_sq"])
    tested = effects.drop(index=["block", "error"])
    assert (tested["df"] == 6).all()
    for term in tested.index:
        assert tested.loc[term, "p_value"] == pytest.approx(anova.loc[term, "p_value"]), term
    assert list(tested.index[tested["active"].astype(bool)]) == ["A"]
    said = findings_of(out)
    assert "**flour** 1.35 instead of 1.15 (A) lowers rating by 2.15" in said
    assert "The blocks are confounded with ABC" in said
    assert (
        "8 centre runs set every factor with a middle to it (flour 1.25, sugar 0.45, "
        "butter 0.25), in every block. Against the corners of their own block, the centre "
        "runs' rating differs by 1.65" in said
    )
    assert "**The response bends between the levels**" in said


def test_a_block_column_with_centre_rows_that_cannot_be_analysed_is_refused(tmp_path):
    """Centre rows in blocks: refused, naming the rows, when a block has none, when a centre
    row's block holds no corner, or when no two centre runs of one block give a pure error."""
    cases = [
        ([r for r in RSM_RUNS if not (r[0] == 2 and r[1:4] == (1.25, 0.45, 0.25))],
         r"block '2' holds no centre row \(centre rows: row 1 in block 1, row 5 in block 1"),
        ([*RSM_RUNS, (3, 1.25, 0.45, 0.25, 30.0)],
         "row 17: a centre row in block '3', which holds no factorial row"),
        ([r for r in RSM_RUNS if r[1:4] != (1.25, 0.45, 0.25) or r[4] in (26.6, 35.5)],
         r"no pure error: every centre row is alone at its levels in its block \(row 1 in "
         r"block 1, row 9 in block 2\)"),
    ]  # fmt: skip
    for i, (runs, message) in enumerate(cases):
        design, responses = _rsm_table(tmp_path, runs)
        with pytest.raises(SystemExit, match=message):
            main(["--design", str(design), "--responses", str(responses), "--no-charts",
                  "--out", str(tmp_path / f"o{i}")])  # fmt: skip


# NIST/SEMATECH e-Handbook of Statistical Methods, 5.4.7.2 "Fractional factorial example": the
# catapult, a 2^(5-1) of resolution V (I = hsble) with four centre runs, in its run order:
# distance (inches); band height 3.25/4.75 in, start angle 0/20°, rubber bands 1/2, arm length
# 0/4 in, stop angle 45/80°. Rubber bands has no middle: runs 7 and 19 are centre runs with one
# band, runs 2 and 13 with two (height 4, start 10, length 2, stop 62). Coded as the handbook
# analyses them ("orthogonally coded columns"): -1/+1, 0 at the centre, bands -1/+1 throughout.
CATAPULT = {
    "factors": {"A": {"name": "height", "levels": [3.25, 4.75]},
                "B": {"name": "start", "levels": [0, 20]},
                "C": {"name": "bands", "levels": [1, 2]},
                "D": {"name": "length", "levels": [0, 4]},
                "E": {"name": "stop", "levels": [45, 80]}},
    "generators": {"E": "ABCD"},
}  # fmt: skip
CATAPULT_RUNS = [  # distance, height, start, bands, length, stop: the handbook's table
    (28.00, 3.25, 0, 1, 0, 80), (99.00, 4, 10, 2, 2, 62), (126.50, 4.75, 20, 2, 4, 80),
    (126.50, 4.75, 0, 2, 4, 45), (45.00, 3.25, 20, 2, 4, 45), (35.00, 4.75, 0, 1, 0, 45),
    (45.00, 4, 10, 1, 2, 62), (28.25, 4.75, 20, 1, 0, 80), (85.00, 4.75, 0, 1, 4, 80),
    (8.00, 3.25, 20, 1, 0, 45), (36.50, 4.75, 20, 1, 4, 45), (33.00, 3.25, 0, 1, 4, 45),
    (84.50, 4, 10, 2, 2, 62), (28.50, 4.75, 20, 2, 0, 45), (33.50, 3.25, 0, 2, 0, 45),
    (36.00, 3.25, 20, 2, 0, 80), (84.00, 4.75, 0, 2, 0, 80), (45.00, 3.25, 20, 1, 4, 80),
    (37.50, 4, 10, 1, 2, 62), (106.00, 3.25, 0, 2, 4, 80),
]  # fmt: skip


def _catapult(tmp_path) -> tuple[Path, Path]:
    design = tmp_path / "design.yaml"
    design.write_text(yaml.safe_dump(CATAPULT))
    lows = [f["levels"][0] for f in CATAPULT["factors"].values()]
    highs = [f["levels"][1] for f in CATAPULT["factors"].values()]
    lines = ["A,B,C,D,E,distance"]
    for distance, *levels in CATAPULT_RUNS:
        coded = [-1 if v == lo else 1 if v == hi else 0
                 for v, lo, hi in zip(levels, lows, highs, strict=True)]  # fmt: skip
        lines.append(",".join(map(str, coded)) + f",{distance}")
    return design, _write(tmp_path, "\n".join(lines) + "\n")


def test_centre_runs_beside_a_factor_without_a_middle_reproduce_nist_catapult(tmp_path, capsys):
    """Issue 60, item 2: centre runs at each level of a factor that has no middle (Minitab's
    and JMP's pseudo-centre points) were refused. The handbook fits every main effect and
    two-factor interaction to the twenty runs, the bands column set at the centre runs too:
    coefficients h 13.4844, s -11.0781, b 19.4125, l 20.1406, e 12.0469, h*s -2.7656,
    h*b 4.6406, h*l 4.7031, h*e 0.1094, s*b -3.1719, s*l -1.1094, s*e 2.6719, b*l 7.6094,
    b*e 2.8281, l*e 3.1406; residual standard error 13.28 on 4 df (standard errors 3.3196, and
    2.9691 for b and the intercept; h t 4.062, p 0.01532). Its reduced model (h, s, b, l, e,
    b*l): model 22148.55 on 6 df, total error 2106.99 on 13 df, lack of fit 1973.74 on 11,
    pure error 133.25 on 2 (MS 66.6), lack of fit F 2.69, p 0.3018. On ln(distance), main
    effects only: h 0.25735, s -0.24174, b 0.34880, l 0.39437, e 0.26273; total error 0.61896
    on 14 df, lack of fit 0.58980 on 12, pure error 0.02916 on 2, F 3.371, p 0.2514.

    ybscale fits the same columns and the curvature (the centre runs against the corners at
    their own number of bands) and tests each on the pure error of the centre pairs: the
    handbook's residual is ybscale's curvature, lack of fit and pure error together. Each
    column on its own (--multiplicity none) finds the handbook's five main effects, b*l near."""
    design, responses = _catapult(tmp_path)
    out = tmp_path / "out"
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive", "--multiplicity", "none"]) == 0  # fmt: skip
    assert "no evidence it bends" in capsys.readouterr().out
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    published = {"A": 13.4844, "B": -11.0781, "C": 19.4125, "D": 20.1406, "E": 12.0469,
                 "AB": -2.7656, "AC": 4.6406, "AD": 4.7031, "AE": 0.1094, "BC": -3.1719,
                 "BD": -1.1094, "BE": 2.6719, "CD": 7.6094, "CE": 2.8281, "DE": 3.1406}  # fmt: skip
    for term, coefficient in published.items():
        assert round(effects.loc[term, "effect"] / 2, 4) == coefficient, term
    rest = ["curvature", "lack of fit", "pure error"]
    assert anova.loc[rest, "df"].sum() == 4
    s_e = (anova.loc[rest, "sum_sq"].sum() / 4) ** 0.5
    assert round(s_e, 2) == 13.28
    assert (round(s_e / 4, 4), round(s_e / 20**0.5, 4)) == (3.3196, 2.9691)
    from scipy import stats

    t_h = effects.loc["A", "effect"] / 2 / (s_e / 4)
    assert round(t_h, 3) == 4.062 and round(2 * stats.t.sf(t_h, 4), 5) == 0.01532
    model = ["A", "B", "C", "D", "E", "CD"]
    assert round(anova.loc[model, "sum_sq"].sum(), 2) == 22148.55
    error = anova.drop(index=model)
    assert error["df"].sum() == 13 and round(error["sum_sq"].sum(), 2) == 2106.99
    pe = anova.loc["pure error"]
    assert (pe["df"], pe["sum_sq"], round(pe["mean_sq"], 1)) == (2, 133.25, 66.6)
    lack = error["sum_sq"].sum() - pe["sum_sq"]
    assert round(lack, 2) == 1973.74
    assert round(lack / 11 / pe["mean_sq"], 2) == 2.69
    assert round(float(stats.f.sf(lack / 11 / pe["mean_sq"], 11, 2)), 4) == 0.3018
    # the bands column is estimated from all twenty runs, the others from the sixteen corners
    assert effects.loc["C", "std_error"] == pytest.approx(2 * (pe["mean_sq"] / 20) ** 0.5)
    assert effects.loc["A", "std_error"] == pytest.approx(2 * (pe["mean_sq"] / 16) ** 0.5)
    assert set(anova["error"].dropna()) == {"pure error"} and (effects["df"].dropna() == 2).all()
    tested = effects.drop(index=["error"])
    assert set(tested.index[tested["active"].astype(bool)]) == {"A", "B", "C", "D", "E"}
    assert 0.05 < tested.loc["CD", "p_value"] < 0.10  # the handbook's b*l: p 0.0836 there
    said = findings_of(out)
    assert "at each level of bands, which has no middle" in said
    assert "at bands 1: the 2 centre runs' mean 41.2 against 37.3 over its 8 corners" in said
    assert "at bands 2: the 2 centre runs' mean 91.8 against 73.2 over its 8 corners" in said
    assert "no evidence it bends between the numeric levels" in said
    # ln(distance): ybscale's log scale is log10, its effects twice the coefficients
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "multiplicative"]) == 0  # fmt: skip
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    ln10 = 2.302585092994046
    for term, coefficient in {"A": 0.25735, "B": -0.24174, "C": 0.34880, "D": 0.39437,
                              "E": 0.26273}.items():  # fmt: skip
        assert round(effects.loc[term, "effect"] / 2 * ln10, 5) == coefficient, term
    error = anova.drop(index=["A", "B", "C", "D", "E"])
    assert error["df"].sum() == 14
    assert round(error["sum_sq"].sum() * ln10**2, 5) == 0.61896
    pe = anova.loc["pure error"]
    assert round(pe["sum_sq"] * ln10**2, 5) == 0.02916
    lack = error["sum_sq"].sum() - pe["sum_sq"]
    assert round(lack * ln10**2, 5) == 0.58980
    assert round(lack / 12 / pe["mean_sq"], 3) == 3.371
    assert round(float(stats.f.sf(lack / 12 / pe["mean_sq"], 12, 2)), 4) == 0.2514


def _by_design_runs(tmp_path, spec: dict, runs: dict[str, float], response: str) -> tuple:
    """`spec` written as design.yaml and a table of its runs by run id (as a study's
    ceilings.csv names them)."""
    design = tmp_path / "design.yaml"
    design.write_text(yaml.safe_dump(spec))
    lines = [f"run,{response}"] + [f"{run},{y}" for run, y in runs.items()]
    return design, _write(tmp_path, "\n".join(lines) + "\n")


def test_rsm_from_a_design_with_blocks_and_centre_points(tmp_path):
    """Issue 60: `blocks: 2` with `center_points: 4` in design.yaml was refused. Now four
    centre runs in each block (run09 .. run12 in block 1, the principal block, where
    x1 x2 x3 = -1: rsm's `expt4`; run13 .. run16 in block 2: `expt3`), and the analysis of
    the runs by their ids is the table's (`test_blocks_with_centre_points_reproduce_rsm`)."""
    from ybscale.design.factorial import design_from_dict

    spec = {"factors": RSM_FACTORS, "blocks": 2, "center_points": 4}
    design = design_from_dict(spec)
    assert design.block_generators == ("ABC",)
    lows = [f["levels"][0] for f in RSM_FACTORS.values()]
    runs, centres = {}, {1: [], 2: []}
    for block, *levels, rating in RSM_RUNS:
        if levels == [1.25, 0.45, 0.25]:
            centres[block].append(rating)
            continue
        row = sum(1 << i for i, (v, lo) in enumerate(zip(levels, lows, strict=True)) if v != lo)
        runs[design.run_ids[row]] = rating
    # rsm's block 1 (x3 = x1 x2) is ybscale's block 2, which does not hold row 1
    assert {design.block_labels()[run] for run in runs if runs[run] < 28} == {2}
    runs |= dict(zip(design.center_run_ids, centres[2] + centres[1], strict=True))
    path, responses = _by_design_runs(tmp_path, spec, runs, "rating")
    out = tmp_path / "out"
    assert verb(["--design", str(path), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive"]) == 0  # fmt: skip
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    assert round(anova.loc["block", "sum_sq"], 3) == 251.223
    assert round(anova.loc[["A", "B", "C"], "sum_sq"].sum(), 3) == 12.735
    pe = anova.loc["pure error"]
    assert (pe["df"], round(pe["sum_sq"], 3)) == (6, 1.660)
    residual = ["AB", "AC", "BC", "curvature", "lack of fit", "pure error"]
    assert anova.loc[residual, "sum_sq"].sum() == pytest.approx(14.3125)  # rsm: 14.313
    assert anova.loc[residual[:-1], "sum_sq"].sum() == pytest.approx(12.6525)  # 12.653
    assert round(effects.loc["A", "effect"] / 2, 3) == -1.075
    assert list(effects.index[effects["active"].astype(bool)]) == ["A"]
    said = findings_of(out)
    assert "in every block. Against the corners of their own block" in said


def test_nist_catapult_from_a_design_with_centre_points_beside_a_factor_without_a_middle(
    tmp_path,
):
    """Issue 60: `center_points: 2` on a design whose rubber bands (1 or 2) has no middle was
    refused; now two centre runs at each number of bands (run17, run18 with one band: the
    handbook's runs 7 and 19; run19, run20 with two: its runs 2 and 13), and the analysis of
    the runs by their ids is the table's (`test_centre_runs_beside_a_factor_without_a_middle_
    reproduce_nist_catapult`)."""
    from ybscale.design.factorial import design_from_dict

    spec = {**CATAPULT, "center_points": 2}
    design = design_from_dict(spec)
    assert design.center_held == ["C"] and design.n_center == 4
    lows = [f["levels"][0] for f in CATAPULT["factors"].values()]
    runs, centres = {}, {1: [], 2: []}
    for distance, *levels in CATAPULT_RUNS:
        if levels[0] == 4:  # height at its middle: a centre run
            centres[levels[2]].append(distance)
            continue
        base = levels[:4]  # A .. D; E = ABCD
        row = sum(1 << i for i, (v, lo) in enumerate(zip(base, lows[:4], strict=True)) if v != lo)
        runs[design.run_ids[row]] = distance
    runs |= dict(zip(design.center_run_ids, centres[1] + centres[2], strict=True))
    path, responses = _by_design_runs(tmp_path, spec, runs, "distance")
    out = tmp_path / "out"
    assert verb(["--design", str(path), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive", "--multiplicity", "none"]) == 0  # fmt: skip
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    for term, coefficient in {"A": 13.4844, "B": -11.0781, "C": 19.4125, "D": 20.1406,
                              "E": 12.0469, "CD": 7.6094}.items():  # fmt: skip
        assert round(effects.loc[term, "effect"] / 2, 4) == coefficient, term
    pe = anova.loc["pure error"]
    assert (pe["df"], pe["sum_sq"]) == (2, 133.25)
    s_e = (anova.loc[["curvature", "lack of fit", "pure error"], "sum_sq"].sum() / 4) ** 0.5
    assert round(s_e, 2) == 13.28
    model = ["A", "B", "C", "D", "E", "CD"]
    assert round(anova.drop(index=model)["sum_sq"].sum(), 2) == 2106.99
    assert set(effects.index[effects["active"].astype(bool)]) == {"A", "B", "C", "D", "E"}
    said = findings_of(out)
    assert "at bands 1: the 2 centre runs' mean 41.2" in said


# Stat-Ease's dexpy 0.12 (the Python package of Design-Expert's makers), docs/source/example-
# coffee.rst, "Example: Coffee Taste Test" (commit fa47703, 2017-10-09; the experiment of
# Stat-Ease's Stat-Teaser, September 2016): a 2^(5-1), E = ABCD (the package's
# build_factorial(5, 2**(5-1))), in amount of coffee 2.5/4 oz, grind size 8/10, brew time
# 3.5/4.5 min, grind type burr/blade and beans light/dark, the last two without a middle: two
# centre runs (3.25 oz, 9, 4 min) at each of their four combinations. The response is the mean
# liking (1-9) of a panel of five, the runs as printed (coded -1 burr, light; +1 blade, dark).
COFFEE = {
    "factors": {"A": {"name": "amount", "levels": [2.5, 4]},
                "B": {"name": "grind_size", "levels": [8, 10]},
                "C": {"name": "brew_time", "levels": [3.5, 4.5]},
                "D": {"name": "grind_type", "levels": ["burr", "blade"]},
                "E": {"name": "beans", "levels": ["light", "dark"]}},
    "generators": {"E": "ABCD"},
}  # fmt: skip
COFFEE_RUNS = [  # amount, grind_size, brew_time, grind_type, beans, liking: runs 0 .. 23
    (2.5, 8, 3.5, "burr", "dark", 4.4), (2.5, 8, 3.5, "blade", "light", 2.6),
    (2.5, 8, 4.5, "burr", "light", 2.4), (2.5, 8, 4.5, "blade", "dark", 8.6),
    (2.5, 10, 3.5, "burr", "light", 1.6), (2.5, 10, 3.5, "blade", "dark", 2.8),
    (2.5, 10, 4.5, "burr", "dark", 7.2), (2.5, 10, 4.5, "blade", "light", 3.4),
    (4, 8, 3.5, "burr", "light", 6.8), (4, 8, 3.5, "blade", "dark", 3.4),
    (4, 8, 4.5, "burr", "dark", 3.8), (4, 8, 4.5, "blade", "light", 9.0),
    (4, 10, 3.5, "burr", "dark", 5.2), (4, 10, 3.5, "blade", "light", 3.6),
    (4, 10, 4.5, "burr", "light", 8.2), (4, 10, 4.5, "blade", "dark", 7.0),
    (3.25, 9, 4, "burr", "light", 5.4), (3.25, 9, 4, "burr", "dark", 6.8),
    (3.25, 9, 4, "blade", "light", 3.6), (3.25, 9, 4, "blade", "dark", 5.4),
    (3.25, 9, 4, "burr", "light", 4.8), (3.25, 9, 4, "burr", "dark", 6.2),
    (3.25, 9, 4, "blade", "light", 4.4), (3.25, 9, 4, "blade", "dark", 5.8),
]  # fmt: skip


def test_centre_runs_beside_two_factors_without_a_middle_reproduce_dexpy_coffee(tmp_path, capsys):
    """Issue 60: centre runs at each combination of two factors without a middle (Minitab's
    pseudo-centre points with two text factors). dexpy fits every main effect and two-factor
    interaction to the 24 runs with statsmodels' OLS, the centre runs at their grind type and
    beans: coefficients amount 0.875, grind_size -0.125, brew_time 1.2, grind_type -0.1333,
    beans 0.45, amount:grind_size 0.25, amount:brew_time -0.075, amount:grind_type -0.175,
    amount:beans -1.325, grind_size:brew_time 0.375, grind_size:grind_type -0.725,
    grind_size:beans 0.375, brew_time:grind_type 0.75, brew_time:beans 0.15,
    grind_type:beans 0.0833; standard errors 0.1756, and 0.1434 for grind_type, beans and
    grind_type:beans (estimated from all 24 runs); t and p on the residual's 8 df: amount
    4.9831 (0.0011), brew_time 6.8339 (0.0001), grind_type -0.93 (0.3796), beans 3.1387
    (0.0138), amount:beans -7.5458 (0.0001), grind_size:grind_type -4.1288 (0.0033),
    brew_time:grind_type 4.2712 (0.0027), grind_type:beans 0.5812 (0.5771). Its reduced model
    (amount, brew_time, beans, amount:beans, grind_size:grind_type, brew_time:grind_type):
    standard errors 0.2032 and 0.1659 (beans) on 17 df, t amount 4.3063 (p 0.0005), brew_time
    5.9058, beans 2.7124 (p 0.0148), amount:beans -6.5209, grind_size:grind_type -3.5681
    (p 0.0024), brew_time:grind_type 3.6911 (p 0.0018).

    ybscale fits the same columns and the curvature (the centre runs against the corners at
    their own grind type and beans) and tests each on the pure error of the centre pairs: the
    package's residual is ybscale's curvature, lack of fit and pure error together."""
    from scipy import stats

    design = tmp_path / "design.yaml"
    design.write_text(yaml.safe_dump(COFFEE))
    lines = ["amount,grind_size,brew_time,grind_type,beans,liking"]
    lines += [",".join(map(str, run)) for run in COFFEE_RUNS]
    responses = _write(tmp_path, "\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert verb(["--design", str(design), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive", "--multiplicity", "none"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    published = {"A": 0.875, "B": -0.125, "C": 1.2, "D": -0.1333, "E": 0.45, "AB": 0.25,
                 "AC": -0.075, "AD": -0.175, "AE": -1.325, "BC": 0.375, "BD": -0.725,
                 "BE": 0.375, "CD": 0.75, "CE": 0.15, "DE": 0.0833}  # fmt: skip
    for term, coefficient in published.items():
        assert effects.loc[term, "effect"] / 2 == pytest.approx(coefficient, abs=5e-5), term
    rest = ["curvature", "lack of fit", "pure error"]
    assert anova.loc[rest, "df"].sum() == 8
    s_e = (anova.loc[rest, "sum_sq"].sum() / 8) ** 0.5
    assert (round(s_e / 4, 4), round(s_e / 24**0.5, 4)) == (0.1756, 0.1434)
    t_p = {"A": (4.9831, 0.0011), "C": (6.8339, 0.0001), "D": (-0.93, 0.3796),
           "E": (3.1387, 0.0138), "AE": (-7.5458, 0.0001), "BD": (-4.1288, 0.0033),
           "CD": (4.2712, 0.0027), "DE": (0.5812, 0.5771)}  # fmt: skip
    for term, (t_pub, p_pub) in t_p.items():
        n = 24 if term in ("D", "E", "DE") else 16  # the runs that set the column
        t = effects.loc[term, "effect"] / 2 / (s_e / n**0.5)
        assert (round(t, 4), round(2 * float(stats.t.sf(abs(t), 8)), 4)) == (t_pub, p_pub), term
    # grind type, beans and their interaction from every run, the others from the 16 corners
    pe = anova.loc["pure error"]
    assert pe["df"] == 4  # two centre runs at each of the four combinations
    for term in ("D", "E", "DE"):
        assert effects.loc[term, "std_error"] == pytest.approx(2 * (pe["mean_sq"] / 24) ** 0.5)
    assert effects.loc["A", "std_error"] == pytest.approx(2 * (pe["mean_sq"] / 16) ** 0.5)
    assert set(anova["error"].dropna()) == {"pure error"} and (effects["df"].dropna() == 4).all()
    model = ["A", "C", "E", "AE", "BD", "CD"]
    error = anova.drop(index=model)
    assert error["df"].sum() == 17
    s_r = (error["sum_sq"].sum() / 17) ** 0.5
    assert (round(s_r / 4, 4), round(s_r / 24**0.5, 4)) == (0.2032, 0.1659)
    reduced = {"A": (4.3063, 0.0005), "C": (5.9058, None), "E": (2.7124, 0.0148),
               "AE": (-6.5209, None), "BD": (-3.5681, 0.0024), "CD": (3.6911, 0.0018)}  # fmt: skip
    for term, (t_pub, p_pub) in reduced.items():
        t = effects.loc[term, "effect"] / 2 / (s_r / (24 if term == "E" else 16) ** 0.5)
        assert round(t, 4) == t_pub, term
        if p_pub is not None:
            assert round(2 * float(stats.t.sf(abs(t), 17)), 4) == p_pub, term
    # each column on its own, the six columns dexpy keeps are active on the pure error too
    # (and grind_size:brew_time, grind_size:beans, dexpy's p 0.0652 on its residual)
    tested = effects.drop(index=["error"])
    assert set(tested.index[tested["active"].astype(bool)]) == {*model, "BC", "BE"}
    assert (pe["sum_sq"], round(pe["mean_sq"], 2)) == pytest.approx((0.76, 0.19))
    assert "curvature (centre points): F = 2.53, p = 0.187: no evidence it bends" in printed
    said = findings_of(out)
    assert "at each level of grind_type, beans, which has no middle" in said
    assert ("at grind_type burr, beans light: the 2 centre runs' mean 5.1 against 4.75 over "
            "its 4 corners") in said  # fmt: skip
    assert "no evidence it bends between the numeric levels" in said


def test_dexpy_coffee_from_a_design_with_centre_points_beside_two_factors_without_a_middle(
    tmp_path,
):
    """Issue 60: `center_points: 2` on a design whose grind type and beans have no middle: two
    centre runs at each of their four combinations (run17 .. run24), and the analysis of the
    runs by their ids is the table's (`test_centre_runs_beside_two_factors_without_a_middle_
    reproduce_dexpy_coffee`)."""
    spec = {**COFFEE, "center_points": 2}
    design = design_from_dict(spec)
    assert design.center_held == ["D", "E"] and design.n_center == 8
    lows = [f["levels"][0] for f in COFFEE["factors"].values()]
    runs, centres = {}, {}
    for *levels, liking in COFFEE_RUNS:
        signs = [-1 if v == lo else 1 for v, lo in zip(levels, lows, strict=True)]
        if levels[0] == 3.25:  # amount at its middle: a centre run
            centres.setdefault((signs[3], signs[4]), []).append(liking)
            continue
        row = sum(1 << i for i, s in enumerate(signs[:4]) if s > 0)  # A .. D; E = ABCD
        runs[design.run_ids[row]] = liking
    for run in design.center_run_ids:
        at = design.signs(run)
        runs[run] = centres[(at["D"], at["E"])].pop()
    path, responses = _by_design_runs(tmp_path, spec, runs, "liking")
    out = tmp_path / "out"
    assert verb(["--design", str(path), "--responses", str(responses), "--out", str(out),
                 "--no-charts", "--model", "additive", "--multiplicity", "none"]) == 0  # fmt: skip
    anova = pd.read_csv(out / "anova.csv").set_index("term")
    effects = pd.read_csv(out / "effects.csv").set_index("term")
    for term, coefficient in {"A": 0.875, "C": 1.2, "D": -0.1333, "E": 0.45, "AE": -1.325,
                              "BD": -0.725, "CD": 0.75, "DE": 0.0833}.items():  # fmt: skip
        assert effects.loc[term, "effect"] / 2 == pytest.approx(coefficient, abs=5e-5), term
    s_e = (anova.loc[["curvature", "lack of fit", "pure error"], "sum_sq"].sum() / 8) ** 0.5
    assert (round(s_e / 4, 4), round(s_e / 24**0.5, 4)) == (0.1756, 0.1434)
    assert anova.loc["pure error", "df"] == 4
    assert "at grind_type burr, beans light: the 2 centre runs' mean 5.1" in findings_of(out)
