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
