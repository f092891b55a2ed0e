"""Several responses from one study (analysis.responses): throughput per dollar priced by hand,
each response analysed on its own, the findings side by side."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from test_plan import CONFIG, RATES

from ybscale import registry, study
from ybscale.analysis.analyze import analyze
from ybscale.analysis.ceiling import collect
from ybscale.analysis.study_files import StudyFiles
from ybscale.backends.base import Backend
from ybscale.design.factorial import design_from_dict
from ybscale.report.findings import write_findings
from ybscale.settings import SettingsError

LOCAL = {**CONFIG, "backend": "local"}
LOCAL.pop("gcp")


def ceiling_files(folder, runs) -> list:
    """A ceiling.json per run: the empirical ceiling 1000 + 100 i tps, interval ±5 %."""
    files = []
    for i, run in enumerate(runs):
        tps = 1000.0 + 100 * i
        data = {
            "run": run,
            "empirical": {"tps": tps, "clients": 8, "ci_low": 0.95 * tps, "ci_high": 1.05 * tps},
            "usl": {},
        }
        path = folder / f"{run}.json"
        path.write_text(json.dumps(data))
        files.append(path)
    return files


def shape(loaded, run) -> tuple[int, str, bool]:
    levels = loaded.row(run).levels
    return int(levels["nodes"]), str(levels["node_size"]), levels["replication"] == "on"


def by_hand_local_quota(nodes, size, replicated):
    return nodes * {"small": 0.25, "large": 0.5}[size] * 1.0  # local.cpu's defaults, 1 per vCPU


def by_hand_node_hour(nodes, size, replicated):
    return nodes * {"small": 0.3, "large": 0.7}[size]


def by_hand_gcp(nodes, size, replicated):
    """tservers at their machine type's price, masters (every node with replication, else one)
    at n2-standard-2's; the load generator (e2-standard-4) not counted."""
    vm = RATES["vm_hour"]
    tserver = vm[{"small": "n2-standard-2", "large": "n2-standard-4"}[size]]
    return nodes * tserver + (nodes if replicated else 1) * vm["n2-standard-2"]


CASES = {
    "local-vcpu-quota": (LOCAL, by_hand_local_quota, "vCPU of the quota"),
    "local-node-hour": (
        {**LOCAL, "analysis": {"prices": {"node_hour": {"small": 0.3, "large": 0.7}}}},
        by_hand_node_hour,
        "analysis.prices.node_hour",
    ),
    "gcp": (CONFIG, by_hand_gcp, "e2-standard-4"),
}


@pytest.mark.parametrize("case", CASES)
def test_throughput_per_dollar_is_the_ceiling_over_the_clusters_price_by_hand(tmp_path, case):
    """Every row of ceilings.csv: its price per hour equals the hand-computed price of its
    cluster, throughput per dollar (and its interval) the ceiling's divided by it, and the row
    says how the price was obtained."""
    config, by_hand, said = CASES[case]
    loaded = study.load(config)
    runs = loaded.design.run_ids
    prices = study.hourly_prices(loaded.settings, loaded.rows)
    table = collect(config["design"], ceiling_files(tmp_path, runs), "empirical", prices)
    table = table.set_index("run")
    assert sorted(table.index) == sorted(runs)
    hourly = {run: by_hand(*shape(loaded, run)) for run in runs}
    assert len(set(hourly.values())) > 2  # the design moves the price
    for run in runs:
        line = table.loc[run]
        assert line["price_per_hour"] == pytest.approx(hourly[run], rel=1e-12)
        for end in ("", "_ci_low", "_ci_high"):
            want = line[f"empirical{'_tps' if not end else end}"] / hourly[run]
            assert line[f"throughput_per_dollar{end}"] == pytest.approx(want, rel=1e-12)
        assert said in line["price_basis"]
        if case == "gcp":
            assert "excluded" in line["price_basis"]
    assert (table["ceiling"] == table["empirical_tps"]).all()


def test_a_price_missing_from_the_table_names_the_field():
    config = {**LOCAL, "analysis": {"prices": {"node_hour": {"small": 0.3}}}}
    loaded = study.load(config)
    with pytest.raises(ValueError, match=r"analysis\.prices\.node_hour\.large: missing"):
        study.hourly_prices(loaded.settings, loaded.rows)
    rates = {**RATES, "vm_hour": {"n2-standard-2": 0.1}}
    loaded = study.load({**CONFIG, "gcp": {**CONFIG["gcp"], "prices": {"us-central1": rates}}})
    with pytest.raises(ValueError, match=r"gcp\.prices\.us-central1\.vm_hour\.n2-standard-4"):
        study.hourly_prices(loaded.settings, loaded.rows)


class PricedBackend(Backend):
    """A backend of its own name that prices its clusters itself (flat 2.5 per node)."""

    name = "priced"

    @classmethod
    def hourly_price(cls, settings, row) -> dict:
        price = 2.5 * row.cluster.nodes
        return {"price_per_hour": price, "price_basis": f"priced: {row.cluster.nodes} x 2.5"}


class QuotaBackend(Backend):
    """A backend of its own name with a CPU quota: priced by the shared per-vCPU rule."""

    name = "quota"

    @classmethod
    def cpu_quota(cls, settings, row) -> tuple[float, str]:
        return 3.0, f"quota.cpu.{row.cluster.node_size}"


def test_a_backend_prices_its_rows_through_its_own_class(monkeypatch):
    """hourly_prices asks the class registered under the config's backend name, never a table
    of names: a new backend prices its rows by its own method, or by the base class's rule
    per vCPU of the quota it states."""
    loaded = study.load(LOCAL)
    monkeypatch.setitem(registry.BACKENDS, "priced", f"{__name__}:PricedBackend")
    monkeypatch.setitem(registry.BACKENDS, "quota", f"{__name__}:QuotaBackend")
    prices = study.hourly_prices({**loaded.settings, "backend": "priced"}, loaded.rows)
    assert prices == {
        row.run: {
            "price_per_hour": 2.5 * row.cluster.nodes,
            "price_basis": f"priced: {row.cluster.nodes} x 2.5",
        }
        for row in loaded.rows
    }
    prices = study.hourly_prices({**loaded.settings, "backend": "quota"}, loaded.rows)
    for row in loaded.rows:
        n, size = row.cluster.nodes, row.cluster.node_size
        assert prices[row.run]["price_per_hour"] == pytest.approx(3.0 * n)
        assert f"{n} nodes x 3 vCPU (quota.cpu.{size})" in prices[row.run]["price_basis"]


def test_responses_are_checked_by_the_schema_and_default_to_ceiling_and_per_dollar():
    assert list(study.load(LOCAL).settings["analysis"]["responses"]) == [
        "ceiling",
        "throughput_per_dollar",
    ]
    with pytest.raises(SettingsError, match="analysis.responses"):
        study.load({**LOCAL, "analysis": {"responses": ["ceiling", "cost"]}})
    with pytest.raises(SettingsError, match=r"analysis\.latency_load\.clients: 3 is not one"):
        study.load(
            {**LOCAL, "analysis": {"responses": ["latency"], "latency_load": {"clients": 3}}}
        )


# ---------------------------------------------------------------------------- side by side


# a replicated 2^3 (its factors in a seed study's names)
TWO_BY_THREE = {
    "factors": {
        "A": {"name": "node_size", "levels": ["small", "large"]},
        "B": {"name": "workload", "levels": ["read", "write"]},
        "C": {"name": "nodes", "levels": [3, 5]},
    },
    "replications": 2,
}


def two_responses(tmp_path, ceiling_ratio=2.0, price_ratio=3.0, slo_ms=None):
    """A replicated 2^3 whose factor A (node_size) multiplies the ceiling by `ceiling_ratio`
    and the cluster's price by `price_ratio`: throughput per dollar by their quotient."""
    design = design_from_dict(TWO_BY_THREE)
    signs = design.sign_table()
    rng = np.random.default_rng(11)
    a = (signs["A"] + 1) / 2  # 0 small, 1 large
    ceiling = 10_000 * ceiling_ratio**a * 0.8 ** ((signs["B"] + 1) / 2)
    ceiling *= np.exp(rng.normal(0, 0.02, len(signs)))
    price = 1.0 * price_ratio**a
    results = tmp_path / "results"
    results.mkdir(parents=True)
    table = signs[list(design.letters)].assign(
        response=ceiling,
        ceiling=ceiling,
        price_per_hour=price,
        price_basis="by hand",
        throughput_per_dollar=ceiling / price,
        # large nodes halve the latency at the reference load
        latency_at_load_ms=10.0 * 0.5**a * np.exp(rng.normal(0, 0.02, len(signs))),
        latency_at_load="p95 at 8 clients",
    )
    table = table.reset_index()
    table.to_csv(results / "ceilings.csv", index=False)
    names = ["ceiling", "throughput_per_dollar"] + (["latency_at_load_ms"] if slo_ms else [])
    tables = analyze(design, table, names, results, model="multiplicative")
    curve = "clients,tps,tps_spread_pct,repetitions\n1,1.0,1.0,1\n"  # what the noise reads
    for folder in (results / "runs" / run for run in design.run_ids):
        folder.mkdir(parents=True)
        (folder / "throughput.csv").write_text(curve)
        (folder / "measurement.json").write_text("{}")
    files = StudyFiles.under(results, design.run_ids)
    text = write_findings(design, files, results / "f.md", latency_slo_ms=slo_ms)
    return design, tables, text


def test_each_response_has_its_own_analysis_in_effects_and_anova(tmp_path):
    _, tables, _ = two_responses(tmp_path)
    effects = pd.read_csv(tmp_path / "results" / "effects.csv")
    anova = pd.read_csv(tmp_path / "results" / "anova.csv")
    assert list(dict.fromkeys(effects["response"])) == ["ceiling", "throughput_per_dollar"]
    assert list(dict.fromkeys(anova["response"])) == ["ceiling", "throughput_per_dollar"]
    a = effects[effects["term"] == "A"].set_index("response")
    # log10 effects: A's ratio on each response, with its own interval
    assert 10 ** a.loc["ceiling", "effect"] == pytest.approx(2.0, rel=0.05)
    assert 10 ** a.loc["throughput_per_dollar", "effect"] == pytest.approx(2 / 3, rel=0.05)
    assert a["active"].all()
    b = effects[effects["term"] == "B"].set_index("response")
    assert 10 ** b.loc["throughput_per_dollar", "effect"] == pytest.approx(0.8, rel=0.05)


def test_findings_say_a_factor_raises_the_ceiling_and_lowers_throughput_per_dollar(tmp_path):
    """A multiplies the ceiling by 2 and the price by 3: the summary table has a column per
    response, and one sentence says A raises one and lowers the other, each with its
    interval."""
    _, tables, text = two_responses(tmp_path)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| effect |"))
    assert header == (
        "| effect | the ceiling [95 % interval] | throughput per dollar [95 % interval] | aliases |"
    )
    row = next(line for line in lines if line.startswith("| node_size large instead of small"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    ceiling = re.fullmatch(r"multiplies by ([\d.]+) \[([\d.]+), ([\d.]+)\]", cells[1])
    per_dollar = re.fullmatch(r"divides by ([\d.]+) \[([\d.]+), ([\d.]+)\]", cells[2])
    assert ceiling and per_dollar, cells
    assert float(ceiling.group(1)) == pytest.approx(2, rel=0.05)
    assert float(per_dollar.group(1)) == pytest.approx(1.5, rel=0.05)
    said = " ".join(text.split())
    number = r"([\d.]+)"
    sentence = re.search(
        rf"node_size large instead of small \(A\) multiplies the ceiling by {number} "
        rf"\[{number}, {number}\] and throughput per dollar by {number} \[{number}, {number}\]: "
        r"faster, dearer\.",
        said,
    )
    assert sentence, said
    effects = tables["effects"]
    a = effects[effects["term"] == "A"].set_index("response")
    shown = [float(x) for x in sentence.groups()]
    for (ratio, low, high), name in zip(
        (shown[:3], shown[3:]), ("ceiling", "throughput_per_dollar"), strict=True
    ):
        row = a.loc[name]
        assert ratio == pytest.approx(10 ** row["effect"], rel=5e-3)
        assert low == pytest.approx(10 ** row["ci_low"], rel=5e-3)
        assert high == pytest.approx(10 ** row["ci_high"], rel=5e-3)
        assert low < ratio < high


def test_a_response_a_column_does_not_move_is_its_verdict_and_no_trade_off(tmp_path):
    """Price and ceiling both doubled: throughput per dollar unchanged, A not active on it: the
    cell gives its verdict there with its interval (negligible or undecided, never a bare "—",
    which a reader takes for "does not matter" whether or not the study could tell), and no
    trade-off sentence claims otherwise."""
    _, tables, text = two_responses(tmp_path, ceiling_ratio=2.0, price_ratio=2.0)
    row = next(line for line in text.splitlines() if line.startswith("| node_size large"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    effects = tables["effects"]
    a = effects[(effects["term"] == "A") & (effects["response"] == "throughput_per_dollar")]
    verdict = str(a["verdict"].iloc[0])
    assert verdict in ("negligible", "undecided")
    assert re.fullmatch(rf"{verdict}: ×[\d.]+ \[[\d.]+, [\d.]+\]", cells[2]), cells
    said = " ".join(text.split())
    assert "not cheaper" in said or "not clearly cheaper" in said or "Trade-offs" not in said


def best_line(text: str, start: str) -> re.Match:
    """A best-combination item: its levels, prediction with interval, observation and rows."""
    said = " ".join(text.split())
    number = r"([\d.,]+k?)"
    found = re.search(
        rf"\* {start}: ([^:]+?), predicted {number}( [^\[]*)? \[{number}, {number}\] from its "
        rf"active columns \(([^)]*)\), observed {number} \(mean of ([run\d, ]+)\)",
        said,
    )
    assert found, said
    return found


def value(text: str) -> float:
    text = text.replace(",", "")
    return float(text[:-1]) * 1000 if text.endswith("k") else float(text)


def test_the_best_combination_of_each_response_is_a_prediction_with_its_basis(tmp_path):
    """The ceiling is best with large nodes on reads, throughput per dollar with small nodes on
    reads: each predicted from its active effects with an interval, next to what its rows
    measured, and labelled a prediction inside the design region."""
    design, _, text = two_responses(tmp_path)
    said = " ".join(text.split())
    assert "a *prediction inside the design region*" in said
    ceilings = pd.read_csv(tmp_path / "results" / "ceilings.csv").set_index("run")
    for start, levels, truth in (
        ("the ceiling", "node_size large, workload read", 20_000),
        ("throughput per dollar", "node_size small, workload read", 10_000),
    ):
        found = best_line(text, start)
        assert found.group(1) == levels
        predicted, low, high = (value(found.group(i)) for i in (2, 4, 5))
        assert low < predicted < high
        assert predicted == pytest.approx(truth, rel=0.05)
        rows = found.group(8).split(", ")
        assert len(rows) == 4  # nodes at both levels, two replicates
        column = "ceiling" if start == "the ceiling" else "throughput_per_dollar"
        observed = ceilings.loc[rows, column].mean()
        assert value(found.group(7)) == pytest.approx(observed, rel=0.01)
        for run in rows:
            assert design.levels(run)["node_size"] == levels.split(",")[0].split()[1]


def test_the_best_buy_within_a_latency_target(tmp_path):
    """With a latency response and a target only large nodes meet (10 ms small, 5 ms large):
    the most throughput per dollar within it is on large nodes, its latency predicted."""
    _, _, text = two_responses(tmp_path, slo_ms=7.0)
    said = " ".join(text.split())
    assert (
        "most throughput per dollar with latency (p95 at 8 clients) predicted within 7 ms" in said
    )
    found = re.search(
        r"within 7 ms \(analysis.latency_slo_ms\): throughput per dollar: "
        r"(node_size \w+, workload \w+), predicted",
        said,
    )
    assert found and found.group(1) == "node_size large, workload read", said
    latency = re.search(r"its latency predicted ([\d.]+) ms \[([\d.]+), ([\d.]+)\]", said)
    assert latency and float(latency.group(1)) == pytest.approx(5.0, rel=0.05)


# ---------------------------------------------------------------------------- the tiny study


@pytest.mark.slow
def test_the_tiny_study_holds_both_default_responses_and_the_report_opens_on_them(
    tiny_study, tmp_path
):
    """The tiny study through the pipeline: effects.csv and anova.csv hold the ceiling and
    throughput per dollar, each row's price is its quota's by hand, the findings table has a
    column for each, and the report opens on it (a screenshot at 1440x900 for a person)."""
    from test_report import run_chromium

    from ybscale.design.factorial import load_design

    work = tiny_study.work
    results = work / "results"
    effects = pd.read_csv(results / "effects.csv")
    assert list(dict.fromkeys(effects["response"])) == ["ceiling", "throughput_per_dollar"]
    anova = pd.read_csv(results / "anova.csv")
    assert list(dict.fromkeys(anova["response"])) == ["ceiling", "throughput_per_dollar"]
    design = load_design(work / "config" / "design.yaml")
    ceilings = pd.read_csv(results / "ceilings.csv").set_index("run")
    for run in design.run_ids:
        levels = design.levels(run)
        price = by_hand_local_quota(int(levels["nodes"]), str(levels["node_size"]), False)
        line = ceilings.loc[run]
        assert line["price_per_hour"] == pytest.approx(price, rel=1e-12)
        assert line["throughput_per_dollar"] == pytest.approx(line["ceiling"] / price, rel=1e-9)
        assert f"local.cpu.{levels['node_size']}" in line["price_basis"]
    findings = (results / "findings.md").read_text(encoding="utf-8")
    assert "| the ceiling [95 % interval] | throughput per dollar [95 % interval] |" in findings
    assert (results / "charts" / "responses.svg").is_file()
    report = work / "report.html"
    assert "responses.svg" in report.read_text(encoding="utf-8")
    dom = run_chromium(report, tmp_path / "profile", "--window-size=1440,900", "--dump-dom")
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    first = [
        text.find(s)
        for s in (
            "Findings Verdicts. Each column matters",
            "The effects that stand out from the noise on any response",
            "the ceiling [95 % interval]",
            "throughput per dollar [95 % interval]",
            "Response.",
        )
    ]
    assert -1 not in first and first == sorted(first), first
    png = tmp_path / "report-1440x900.png"
    run_chromium(report, tmp_path / "profile-shot", "--window-size=1440,900", f"--screenshot={png}")
    assert png.stat().st_size > 10_000
    print(f"\nscreenshot: {png}")


# ------------------------------------------------------------------ latency, compare and next


def test_latency_at_a_client_count_or_a_fraction_of_the_rows_ceiling(tmp_path):
    """The latency response: the chosen percentile at the reference load, a client count or
    the smallest count reaching a fraction of the row's own ceiling; ceilings.csv says which."""
    from ybscale.analysis.ceiling import row_ceiling

    p95 = np.array([1.0, 2.0, 4.0, 9.0])
    curve = pd.DataFrame({"clients": [1, 2, 4, 8], "tps": [100.0, 190.0, 300.0, 310.0]})
    curve = curve.assign(
        latency_p50_ms=p95 / 2, latency_p95_ms=p95, latency_p99_ms=p95 * 1.5, latency_n=10
    )
    half = row_ceiling("run01", curve, latency_load={"fraction": 0.5})["latency_at_load"]
    assert (half["clients"], half["ms"]) == (2, 2.0)  # 190 is the first to reach 155
    assert half["load"] == "p95 at 50% of the row's ceiling"
    at4 = row_ceiling("run01", curve, latency_load={"clients": 4}, latency_percentile=99)
    assert at4["latency_at_load"] == {
        "percentile": 99,
        "clients": 4,
        "ms": 6.0,
        "load": "p99 at 4 clients",
    }
    missing = row_ceiling("run01", curve, latency_load={"clients": 16})["latency_at_load"]
    assert missing["ms"] == "nan"
    path = tmp_path / "run01.json"
    path.write_text(json.dumps(row_ceiling("run01", curve, latency_load={"clients": 4})))
    design = design_from_dict({"factors": {"A": {"name": "x", "levels": [1, 2]}}})
    record = tmp_path / "design.yaml"
    record.write_text(json.dumps({"factors": {"A": {"name": "x", "levels": [1, 2]}}}))
    other = tmp_path / "run02.json"
    other.write_text(json.dumps(row_ceiling("run02", curve, latency_load={"clients": 4})))
    table = collect(str(record), [path, other], "empirical").set_index("run")
    assert len(design.run_ids) == 2
    assert table.loc["run01", "latency_at_load_ms"] == 4.0
    assert table.loc["run01", "latency_at_load"] == "p95 at 4 clients"
    # a row without the percentile there: the table is refused, saying why
    other.write_text(json.dumps(row_ceiling("run02", curve, latency_load={"clients": 16})))
    with pytest.raises(ValueError, match=r"no latency at the reference load for \['run02'\]"):
        collect(str(record), [path, other], "empirical")


def test_compare_compares_each_response(tmp_path, capsys):
    from ybscale.analysis import compare

    two_responses(tmp_path / "a")
    two_responses(tmp_path / "b")
    code = compare.main([str(tmp_path / "a" / "results"), str(tmp_path / "b" / "results")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.index("response ceiling:") < out.index("response throughput_per_dollar:")
    assert out.count("AGREE:") == 2


def test_next_follows_up_the_response_named(tmp_path, capsys):
    """A is active on the ceiling only, B on both: `ybscale next` follows the main response by
    default and throughput per dollar when named (an unknown one is an error naming those)."""
    from ybscale.design import followup

    design = tmp_path / "design.yaml"
    factors = {**TWO_BY_THREE["factors"], "D": {"name": "replication", "levels": ["off", "on"]}}
    design.write_text(json.dumps({"factors": factors, "generators": {"D": "ABC"}}))
    results = tmp_path / "results"
    results.mkdir()
    pd.DataFrame(
        {
            "term": ["A", "B", "C", "A", "B", "C"],
            "active": [True, True, False, False, True, False],
            "response": ["ceiling"] * 3 + ["throughput_per_dollar"] * 3,
        }
    ).to_csv(results / "effects.csv", index=False)
    base = ["--analysis", str(results), "--design", str(design)]
    assert followup.main(base) == 0
    assert "Active effects: A, B\n" in capsys.readouterr().out
    assert followup.main([*base, "--response", "throughput_per_dollar"]) == 0
    assert "Active effects: B\n" in capsys.readouterr().out
    assert followup.main([*base, "--response", "latency"]) == 1
    error = capsys.readouterr().err
    assert "no response 'latency' (it has ceiling, throughput_per_dollar)" in error


def test_ybscale_analyze_takes_several_response_columns(tmp_path, capsys):
    """`ybscale analyze --response ceiling throughput_per_dollar`: both analysed, each named in
    the tables and in what it prints."""
    from ybscale.analysis import analyze as analyze_cli

    two_responses(tmp_path / "study")
    design = tmp_path / "design.yaml"
    design.write_text(json.dumps(TWO_BY_THREE))
    ceilings = tmp_path / "study" / "results" / "ceilings.csv"
    argv = ["--design", str(design), "--responses", str(ceilings), "--out", str(tmp_path / "out")]
    assert analyze_cli.main([*argv, "--response", "ceiling", "throughput_per_dollar"]) == 0
    out = capsys.readouterr().out
    assert "active on ceiling (t, holm over 7 columns): A, B" in out
    assert "active on throughput_per_dollar (t, holm over 7 columns): A, B" in out
    effects = pd.read_csv(tmp_path / "out" / "effects.csv")
    assert list(dict.fromkeys(effects["response"])) == ["ceiling", "throughput_per_dollar"]


def test_centre_rows_of_ceilings_csv_give_the_curvature_line(tmp_path):
    """Issue 47, centre points in a study: the ceilings rule's table holds the centre runs
    (row 0, every letter 0) after the factorial runs, and the analysis rule's command takes
    them as centre points: the effects from the four corners only, the ANOVA with the
    curvature and pure-error lines. Montgomery's 2^2 with five centre points (8th ed.,
    Example 6.7; here × 100 as tps): corners 39.3, 40.9, 40.0, 41.5, centres 40.3, 40.5,
    40.7, 40.2, 40.6: SS_curvature 0.0027 (× 100²), F = 0.0633 against the pure error on 4 df."""
    from ybscale.analysis import analyze as analyze_module
    from ybscale.design.factorial import design_dict

    design = design_from_dict({"factors": {"A": {"name": "operation_size", "levels": [1, 100]},
                                           "B": {"name": "nodes", "levels": [3, 5]}},
                               "center_points": 5})  # fmt: skip
    record = tmp_path / "design.json"
    record.write_text(json.dumps(design_dict(design)))
    values = [39.3, 40.9, 40.0, 41.5, 40.3, 40.5, 40.7, 40.2, 40.6]
    files = []
    for run, value in zip(design.all_run_ids, values, strict=True):
        tps = 100 * value
        data = {
            "run": run,
            "usl": {},
            "empirical": {"tps": tps, "clients": 8, "ci_low": tps - 5, "ci_high": tps + 5},
        }
        files.append(tmp_path / f"{run}.json")
        files[-1].write_text(json.dumps(data))  # fmt: skip
    table = collect(str(record), files, "empirical")
    assert list(table["run"]) == design.all_run_ids
    centre = table[table["run"].isin(design.center_run_ids)]
    assert (centre[["row", "A", "B"]] == 0).all().all()
    table.to_csv(tmp_path / "ceilings.csv", index=False)
    out = {name: tmp_path / f"{name}.csv" for name in ("effects", "anova", "residuals", "outliers")}
    argv = ["--design", str(record), "--responses", str(tmp_path / "ceilings.csv"),
            "--response", "ceiling", "--model", "additive", "--no-charts"]  # fmt: skip
    for name, path in out.items():
        argv += [f"--{name}", str(path)]
    assert analyze_module.main(argv) == 0
    effects = pd.read_csv(out["effects"]).set_index("term")
    assert effects.loc["A", "effect"] == pytest.approx(155.0)  # the corners only
    anova = pd.read_csv(out["anova"]).set_index("term")
    assert anova.loc["curvature", "sum_sq"] == pytest.approx(0.0027222 * 100**2, rel=1e-4)
    assert anova.loc["curvature", "F"] == pytest.approx(0.0633, abs=1e-4)
    assert anova.loc["pure error", "df"] == 4
    assert anova.loc["pure error", "sum_sq"] == pytest.approx(0.172 * 100**2)
