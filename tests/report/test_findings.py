"""Findings page: written from the results, only active effects, numbers equal to effects.csv."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from designs import seed_design
from docutils.core import publish_parts

from ybscale.analysis.analyze import analyze
from ybscale.analysis.study_files import StudyFiles
from ybscale.design.factorial import load_design
from ybscale.report.design_report import design_rst
from ybscale.report.findings import write_findings

NUMBER = r"(-?[\d,]+(?:\.\d+)?k?)"


def parse_number(text: str) -> float:
    """Inverse of the display form: '31.7k' -> 31700, '1,234' -> 1234."""
    text = text.replace(",", "")
    return float(text[:-1]) * 1000 if text.endswith("k") else float(text)


def display_tolerance(text: str) -> float:
    """Half a unit of the last displayed digit."""
    if text.endswith("k"):
        return 50.0
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10**-decimals


@pytest.fixture
def study(tmp_path):
    """A synthetic study: workload (B) -12k, nodes (C) +3k, AD +2k, the rest noise; one outlier."""
    design = seed_design()
    signs = design.sign_table()
    rng = np.random.default_rng(3)
    y = 30_000 - 6_000 * signs["B"] + 1_500 * signs["C"] + rng.normal(0, 150, len(signs))
    y += 1_000 * signs["A"] * signs["D"]
    y.iloc[6] += 2_500  # run07 stands out
    results = tmp_path / "results"
    edge = signs.index.isin(["run02", "run07"])  # their best count is their largest
    ceilings = signs[list(design.letters)].assign(
        response=y, empirical_clients=4, empirical_lower_bound=edge
    )
    read = signs["B"] == -1  # the client saturates read rows, node1 the write rows
    ceilings = ceilings.assign(
        bottleneck=np.where(read, "client", "node1"),
        bottleneck_utilisation=np.where(read, 0.93, 0.99),
        bottleneck_cpu_ms_per_transaction=np.where(read, 0.1, 0.61),
        host_utilisation=np.where(signs.index.isin(["run03", "run04"]), 0.99, 0.6),
    )
    ceilings.reset_index().to_csv(results.mkdir() or results / "ceilings.csv", index=False)
    analyze(design, ceilings.reset_index(), "response", results, charts=False)
    for run in design.run_ids:
        (results / "runs" / run).mkdir(parents=True)
        curve = pd.DataFrame(
            {"clients": [1, 4], "tps": [1.0, 2.0], "tps_spread_pct": [2.0, 4.0], "repetitions": 3}
        )
        curve.to_csv(results / "runs" / run / "throughput.csv", index=False)
        meta = {
            "measurement": {
                "clients": [1, 4],
                **{"repetitions": 3, "max_repetitions": 5, "precision": 0.03, "seconds": 3},
                **{"skip_seconds": 1, "sweep": "adaptive"},
                "max_clients": 4 if run == "run07" else 16,
            },
            "row": {"dataset_rows": 1000},
            "applied": {"backend": "local", "cpu": {"node1": {"mechanism": "cgroup2", "cpus": 1}}},
            "started": "2026-01-01T00:00:00Z",
            "finished": "2026-01-01T00:02:00Z",
        }
        (results / "runs" / run / "measurement.json").write_text(json.dumps(meta))
    out = results / "findings.md"
    rst = results / "report" / "findings.rst"
    text = write_findings(design, StudyFiles.under(results, design.run_ids), out, rst)
    return design, results, text, rst.read_text()


def test_active_effects_in_words_with_numbers_equal_to_effects_csv(study):
    design, results, text, _ = study
    effects = pd.read_csv(results / "effects.csv")
    active = effects[effects["active"]]
    assert set(active["term"]) >= {"B", "C", "AD"}
    items = re.findall(r"^\d+\. (.*)$", text, flags=re.M)
    assert len(items) == len(active)
    for item, (_, row) in zip(items, active.iterrows(), strict=True):  # same order
        match = re.search(rf"by {NUMBER} tps \[{NUMBER}, {NUMBER}\]; ([\d.]+) %", item)
        assert match, item
        size, lo, hi, pct = match.groups()
        magnitude = abs(row["effect"])
        bounds = sorted(abs(v) for v in (row["ci_low"], row["ci_high"]))
        assert parse_number(size) == pytest.approx(magnitude, abs=display_tolerance(size))
        assert parse_number(lo) == pytest.approx(bounds[0], abs=display_tolerance(lo))
        assert parse_number(hi) == pytest.approx(bounds[1], abs=display_tolerance(hi))
        assert float(pct) == pytest.approx(row["variation_pct"], abs=0.05)
    assert items[0].startswith("**workload** write instead of read (B) lowers the ceiling")
    nodes = next(i for i in items if i.startswith("**nodes**"))
    assert "5 instead of 3 (C) raises" in nodes
    ad = next(i for i in items if "(AD)" in i)
    assert ad.startswith("the interaction **operation_size × isolation** (AD), both at their first")
    assert "No other main effect or two-factor interaction shares this column" in ad
    # aliases and what cannot be separated
    assert "B = AF = CE = ABCEF" in items[0]
    assert "cannot separate workload (B), operation_size × node_size (AF) and nodes ×" in items[0]


def test_the_response_says_how_counts_were_measured(study):
    _, _, text, _ = study
    assert "ceiling of each row, the **empirical** ceiling" in text
    assert (
        "[1, 4] (adaptive sweep: one repetition per count, doubling past the grid up to 16 "
        "clients while the best is at its edge, until a larger count is significantly below the "
        "best, then, in turns, 3 to 5 "
        "repetitions until the 95 % CI is within ±3 % for the counts not significantly below the "
        "best; "
        "3 s each, the first 1 s not counted), with pgbench on the **local** backend over 1,000 "
        "rows." in " ".join(text.split())
    )


def test_rows_flagged_as_lower_bounds_are_named_with_the_edge_they_reached(study):
    _, _, text, _ = study
    assert (
        "**Ceilings at the edge.** 2 of 16 rows reached their largest throughput at the largest "
        "client count they measured: their ceiling is a lower bound (run02 at 4, run07 at 4 = "
        "max_clients)." in " ".join(text.split())
    )


def test_each_rows_bottleneck_and_what_the_active_factors_changed_in_it(study):
    _, _, text, _ = study
    flat = " ".join(text.split())
    assert "run01 client 93 %, run02 client 93 %, run03 node1 99 %" in flat
    assert "8 of 16 rows are client-bound" in flat
    assert "In 2 of 16 rows the machine itself was at least 95 % busy" in flat
    assert "other work included; run03, run04)" in flat
    assert (
        "**workload** write instead of read (B): bottleneck at read: client 8 of 8 rows; at "
        "write: node1 8 of 8 rows; CPU time per transaction at the bottleneck ×6.1" in flat
    )
    assert "(C): bottleneck at 3: client 4, node1 4 of 8 rows; at 5: client 4, node1 4" in flat


def test_effects_within_the_noise_are_not_findings(study):
    _, results, text, _ = study
    effects = pd.read_csv(results / "effects.csv")
    quiet = effects[~effects["active"]]
    for _, row in quiet.iterrows():
        assert not re.search(rf"\({row['term']}\) (raises|lowers)", text)
    assert f"The other {len(quiet)} columns" in text


def test_noise_outliers_backend_and_next_steps(study):
    _, results, text, _ = study
    outliers = pd.read_csv(results / "outliers.csv")
    assert list(outliers["run"]) == ["run07"]
    assert "PSE = " in text
    assert "spread by 3.0 % (median" in text
    for run in outliers["run"]:
        assert run in text.split("**Outliers.**")[1].split("**")[0]
    assert "2 of 16 rows reached" in text  # the rows flagged as lower bounds, not all at 4
    assert "adding a node adds no CPU" in text
    assert "``ybscale next`` proposes" in text and "full fold-over" in text
    assert "Replications needed" in text


def test_the_design_page_states_each_clusters_replication_factor(tmp_path):
    """Issue 46 item 5, left open (issue 59): the design page names the replication factor
    each cluster ran with, as its rows' measurement.json recorded it (gcp: the cluster's
    masters); the page reads it from the rows' folders, which the design_page rule passes."""
    from ybscale.report.design_report import main as design_page
    from ybscale.report.design_report import replication_factors

    design = seed_design()
    runs = design.all_run_ids
    shared = {run: f"nodes{1 if i % 2 else 3}-small-rep" for i, run in enumerate(runs)}
    folders = []
    for i, run in enumerate(runs):
        folder = tmp_path / "runs" / run
        folder.mkdir(parents=True)
        rf = 1 if i % 2 else 3
        applied = {"backend": "gcp", "replication_factor": rf} if i else {"backend": "gcp"}
        (folder / "measurement.json").write_text(json.dumps({"run": run, "applied": applied}))
        folders.append(folder)
    rf = replication_factors(folders)
    assert runs[0] not in rf and rf[runs[1]] == 1 and rf[runs[2]] == 3
    page = design_rst(design, clusters=shared, rf=rf)
    assert "* ``nodes1-small-rep`` (RF 1): " in page
    assert "* ``nodes3-small-rep`` (RF 3 (not recorded for every run)): " in page
    own = design_rst(design, clusters={r: r for r in runs}, rf=rf)
    assert f"Replication factor (each run's measurement.json): RF not recorded: {runs[0]}" in own
    assert f"RF 1: {runs[1]}, {runs[3]}" in own
    plain = design_rst(design, clusters=shared)  # no measurements: nothing said of RF
    assert "* ``nodes1-small-rep``: " in plain and "(RF " not in plain
    # the rule's command: the record's clusters, the runs' folders after the options
    record = tmp_path / "design.json"
    effects = tmp_path / "effects.csv"
    pd.DataFrame({"term": ["A"], "effect": [1.0]}).to_csv(effects, index=False)
    from ybscale.design.record import build

    record.write_text(json.dumps(build(design, "gcp", shared, "random", 0)))
    out = tmp_path / "design.rst"
    assert design_page(["--design", str(record), "--effects", str(effects), "--out", str(out),
                        *map(str, folders)]) == 0  # fmt: skip
    assert "* ``nodes1-small-rep`` (RF 1): " in out.read_text()


def test_rst_copy_renders_without_docutils_warnings(study):
    design, _, _, rst = study
    for source in (rst, design_rst(design)):
        parts = publish_parts(source, writer="html", settings_overrides={"halt_level": 2})
        assert "<ol" in parts["body"] or "<table" in parts["body"]
    html = publish_parts(rst, writer="html")["body"]
    assert "|effect|" in html  # the pipes of |effect| are text, not a substitution


def test_design_page_is_written_from_the_design(tmp_path):
    design = seed_design()
    text = design_rst(design)
    assert "I = ABF = BCE = ACEF" in text and "Resolution III" in text
    assert "generated E = BC" in text and "**B = AF = CE**" in text
    other = tmp_path / "d.yaml"
    other.write_text(
        "factors:\n"
        "  A: {name: rows, levels: [1, 100]}\n"
        "  B: {name: workload, levels: [read, write]}\n"
        "  C: {name: isolation, levels: [read committed, serializable]}\n"
        "  D: {name: sync, levels: ['off', 'on']}\n"
        "  E: {name: buffers, levels: [64MB, 1GB]}\n"
        "generators: {E: ABCD}\n"
    )
    text = design_rst(load_design(other))
    assert "I = ABCDE" in text and "Resolution 5" in text
    assert "sync" in text and "1GB" in text and "share a column" not in text


def test_findings_lead_with_a_table_of_the_active_effects(study):
    """The page opens on the verdicts (issue 57), then a table: one row per active effect, in
    level words, with the numbers of effects.csv (estimate, 95 % interval, share of variation)
    and the alias string."""
    _, results, text, rst = study
    body = text.split("\n", 2)[2].lstrip()  # after the title
    paragraphs = body.split("\n\n")
    assert paragraphs[0].startswith("**Verdicts.** Each column matters")
    at = next(i for i, p in enumerate(paragraphs) if p.startswith("The effects that stand out"))
    lead, table = paragraphs[at : at + 2]
    assert lead.startswith("The effects that stand out from the noise")
    lines = table.splitlines()
    assert lines[0] == "| effect | estimate [95 % interval] | share of variation | aliases |"
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[2:]]
    effects = pd.read_csv(results / "effects.csv")
    # a column told from zero but negligible against analysis.relevant is said after the
    # table, not in it: at the noise's margin it stands out in one study and not the next
    active = effects[effects["active"] & (effects["verdict"] != "negligible")]
    small = effects[effects["active"] & (effects["verdict"] == "negligible")]
    assert len(rows) == len(active) and len(small) > 0, (rows, small)
    for (words, estimate, share, aliases), (_, row) in zip(rows, active.iterrows(), strict=True):
        assert words.endswith(f"({row['term']})") or f"({row['term']}):" in words
        match = re.fullmatch(rf"(raises|lowers) by {NUMBER} tps \[{NUMBER}, {NUMBER}\]", estimate)
        assert match, estimate
        assert match.group(1) == ("raises" if row["effect"] > 0 else "lowers")
        bounds = sorted(abs(v) for v in (row["ci_low"], row["ci_high"]))
        for shown, value in zip(match.groups()[1:], (abs(row["effect"]), *bounds), strict=True):
            assert parse_number(shown) == pytest.approx(value, abs=display_tolerance(shown))
        assert float(share.rstrip(" %")) == pytest.approx(row["variation_pct"], abs=0.05)
        assert aliases == row["alias"].replace("-", "")
    assert rows[0][0] == "workload write instead of read (B)"
    note = paragraphs[at + 2]
    assert note.startswith("Told from the noise but negligible (inside ±20 %"), note
    for _, row in small.iterrows():
        term = str(row["term"])
        said = re.search(rf"{term} \([^)]+\) (raises|lowers) the ceiling by {NUMBER} tps", note)
        assert said and said.group(1) == ("raises" if row["effect"] > 0 else "lowers"), note
        assert parse_number(said.group(2)) == pytest.approx(
            abs(row["effect"]), abs=display_tolerance(said.group(2))
        )
    assert "AD (operation_size × isolation)" in note
    # the table comes before the prose, in the report's copy too
    html = publish_parts(rst, writer="html", settings_overrides={"halt_level": 2})["body"]
    assert html.index("<table") < html.index("Response.")
    matters = int((effects["verdict"] == "matters").sum())
    assert html.count("<tr>") == len(active) + 1 + (matters + 1 if matters else 0)


def test_findings_without_an_active_effect_say_so_first(study):
    design, results, _, _ = study
    effects = pd.read_csv(results / "effects.csv").assign(active=False)
    effects.to_csv(results / "effects.csv", index=False)
    text = write_findings(
        design, StudyFiles.under(results, design.run_ids), results / "quiet.md", None
    )
    paragraphs = text.split("\n", 2)[2].lstrip().split("\n\n")
    assert paragraphs[0].startswith("**Verdicts.**")
    first = next(p for p in paragraphs if p.startswith("**No effect"))
    assert first.startswith("**No effect stands out from the noise**: none of the 15 columns")
    assert text.index("**No effect") < text.index("**Active effects**")
    assert "| effect |" not in text


@pytest.mark.parametrize("blocked", [True, False])
def test_the_noise_says_whether_replicates_were_blocks(tmp_path, blocked):
    """A replicated 2^3: the findings say the replicates were blocks only when the analysis
    took blocks out of the error (a block per replicate), else that they are pure replication."""
    from ybscale.design.factorial import design_from_dict

    design = design_from_dict(
        {
            "factors": {
                "A": {"name": "nodes", "levels": [3, 5]},
                "B": {"name": "workload", "levels": ["read", "write"]},
                "C": {"name": "node_size", "levels": ["small", "large"]},
            },
            "replications": 2,
        }
    )
    signs = design.sign_table()
    rng = np.random.default_rng(7)
    y = 20_000 + 3_000 * signs["A"] + 500 * signs["replicate"] + rng.normal(0, 200, len(signs))
    results = tmp_path / "results"
    results.mkdir()
    ceilings = signs[list(design.letters)].assign(response=y).reset_index()
    ceilings.to_csv(results / "ceilings.csv", index=False)
    blocks = signs["replicate"] if blocked else None
    analyze(design, ceilings, "response", results, blocks=blocks)
    said = _findings_words(design, results, design.run_ids)
    assert ("The replicates were blocks" in said) is blocked
    assert ("The replicates are pure replication" in said) is not blocked


def test_the_design_page_names_the_blocks_and_what_they_are_confounded_with():
    """Issue 47: a design in blocks: the design page gives the block generators, the columns
    the blocks are confounded with and each block's size."""
    from ybscale.design.factorial import design_from_dict
    from ybscale.report.design_report import design_rst

    factors = {x: {"name": f"f{x}", "levels": [-1, 1]} for x in "ABCDE"}
    text = design_rst(design_from_dict({"factors": factors, "blocks": 4,
                                        "block_generators": ["ADE", "BCE"]}))  # fmt: skip
    assert "* Blocks: 4, measured one after the other" in text
    assert "block 1: 8 rows, block 2: 8 rows, block 3: 8 rows, block 4: 8 rows" in text
    assert "block generators ADE, BCE: the blocks are confounded with **ADE**; **BCE**; " \
        "**ABCD**" in text  # fmt: skip


def test_the_findings_name_the_rows_a_neighbour_disturbed():
    """Issue 49: the rows where processes other than the study's took at least 10 % of the
    machine at the ceiling are named with their share; quiet rows are not."""
    import pandas as pd

    from ybscale.report.bottlenecks import interference_text

    rows = pd.DataFrame({"run": ["run01", "run02", "run03", "run04"],
                         "outside_utilisation": [0.02, 0.46, 0.11, -0.003]})  # fmt: skip
    (text,) = interference_text(rows)
    assert (
        "at least 10 % of the machine at the ceiling of 2 of 4 rows (run02 46 %, run03 11 %;"
        in text
    )
    assert "median over all rows 6 %" in text
    assert interference_text(rows.assign(outside_utilisation=0.01)) == []
    assert interference_text(rows.drop(columns=["outside_utilisation"])) == []


@pytest.mark.parametrize("bends", [True, False])
def test_the_findings_say_whether_the_response_bends_between_the_levels(tmp_path, bends):
    """Issue 47, centre points: the findings compare the centre runs' mean ceiling with the
    factorial runs' (its 95 % interval from the centre runs' spread), give the ANOVA's
    curvature F and p and say in words whether the response bends; the noise is the centre
    runs' pure error; the design page says how many centre runs and where."""
    from ybscale.design.factorial import design_from_dict

    design = design_from_dict(
        {
            "factors": {
                "A": {"name": "operation_size", "levels": [1, 100]},
                "B": {"name": "nodes", "levels": [3, 5]},
                "C": {"name": "clients_cap", "sets": "server.max_connections", "levels": [50, 150]},
            },
            "center_points": 4,
        }
    )
    table = design.measured_table()
    corners = 20_000 + 3_000 * table["B"] + 1_000 * table["A"]
    centre = [21_000, 21_100, 20_900, 21_050] if bends else [20_050, 19_950, 20_000, 20_020]
    y = list(corners.iloc[: design.n_runs] + [40, -30, 10, -20, 25, -15, 5, -5]) + centre
    results = tmp_path / "results"
    results.mkdir()
    ceilings = table.assign(response=y).reset_index()
    ceilings.to_csv(results / "ceilings.csv", index=False)
    from ybscale.analysis.responses import read_responses

    responses = read_responses(results / "ceilings.csv", design, "response")
    analyze(design, responses, "response", results, model="additive")
    said = _findings_words(design, results, design.all_run_ids)
    assert "**Curvature.** 4 centre run(s) set every factor to the middle of its levels" in said
    assert "(operation_size 51, nodes 4, clients_cap 100)" in said
    assert "95 % interval" in said and "curvature F = " in said
    assert ("**The response bends between the levels**" in said) is bends
    assert ("No evidence that the response bends" in said) is not bends
    assert "pure error of the 4 centre runs" in said
    assert "8 runs and 4 centre runs" in said
    page = design_rst(design)
    assert "* Centre points: 4 runs (run09 .. run12) with every factor at the middle" in page
    assert "(operation_size 51, nodes 4, clients_cap 100)" in page


def test_the_findings_say_which_runs_were_set_aside_and_when_the_machine_was_never_quiet():
    """Issue 49: runs set aside per row; rows that kept a disturbed run; with most rows
    disturbed, the active main effects of CPU-changing factors named as possible artefacts."""
    import pandas as pd
    from designs import seed_design_path

    from ybscale.design.factorial import load_design
    from ybscale.report.bottlenecks import interference_text

    design = load_design(seed_design_path())
    rows = pd.DataFrame({"run": ["run01", "run02", "run03", "run04"], "set_aside": [2, 0, 1, 0],
                         "kept_disturbed": [0, 0, 0, 0]})  # fmt: skip
    (text,) = interference_text(rows, design, ["B", "F"])
    assert text.startswith("**Interference.** 3 runs were set aside and measured again")
    assert "(run01 2, run03 1;" in text and "never quiet" not in text
    busy = rows.assign(kept_disturbed=[1, 1, 0, 1])
    (text,) = interference_text(busy, design, ["B", "F", "C"])
    assert "3 of 4 rows kept a disturbed run after measurement.remeasure tries " \
        "(run01, run02, run04" in text  # fmt: skip
    assert "The machine was never quiet" in text
    assert "The effects of node_size (F), nodes (C) change the CPU the study may use" in text
    assert "Every effect's interval is widened by how far the neighbour may have moved it" in text
    assert "Every active effect stays active however far it may have moved it." in text
    (text,) = interference_text(busy, design, ["B", "F", "AE"], ["AE"])
    assert "not beyond that reach, so maybe the neighbour's artefacts: AE." in text
    assert interference_text(rows.assign(set_aside=0)) == []


def _findings_words(design, results, runs) -> str:
    """The findings of an analysed `results` folder (every run with a one-line stand-in
    throughput table), their words on one line."""
    for run in runs:
        (results / "runs" / run).mkdir(parents=True)
        pd.DataFrame(
            {"clients": [1], "tps": [1.0], "tps_spread_pct": [1.0], "repetitions": [1]}
        ).to_csv(results / "runs" / run / "throughput.csv", index=False)
        (results / "runs" / run / "measurement.json").write_text("{}")
    text = write_findings(design, StudyFiles.under(results, runs), results / "findings.md")
    return " ".join(text.split())


def test_the_summary_marks_the_effects_a_neighbour_may_have_made_on_every_response():
    """Issue 49: an active column whose widened interval reaches zero (`established` false) is
    marked in the summary table, on the response where it is not established only."""
    from designs import seed_design

    from ybscale.report.findings import Responses

    rows = []
    for name in ("ceiling", "throughput_per_dollar"):
        for term, effect, firm in (("B", -0.9, True), ("AE", 0.13, name == "ceiling")):
            bounds = {"effect": effect, "ci_low": effect - 0.05, "ci_high": effect + 0.05}
            rows.append({"term": term, "alias": term, **bounds, "active": True,
                         "established": firm, "model": "multiplicative", "variation_pct": 1.0,
                         "response": name})  # fmt: skip
    table = Responses(pd.DataFrame(rows)).summary(seed_design())[1][1]
    marked = [[("maybe the neighbour's" in cell) for cell in row[1:3]] for row in table[1:]]
    assert marked == [[False, False], [False, True]]


def test_the_summary_counts_the_columns_tested_as_effects_not_the_block_line():
    """A design in blocks: the block's column is no effect (its line is the block's), so a
    summary where nothing is active counts the other columns (a 2^(5-2) in 2 blocks: 6)."""
    from designs import seed_design

    from ybscale.report.findings import Responses

    rows = [{"term": term, "alias": term, "effect": 1.0, "ci_low": -1.0, "ci_high": 3.0,
             "active": False, "response": "ceiling"}
            for term in ["A", "B", "C", "D", "E", "BE", "block", "error"]]  # fmt: skip
    (line,) = Responses(pd.DataFrame(rows)).summary(seed_design())
    assert "none of the 6 columns can be told from zero" in line, line


def test_the_findings_explain_a_dataset_size_effect_by_where_its_reads_were_served():
    """Issue 48: each row's hit ratio, OS reads and disk kilobytes per transaction at its
    ceiling, and for an active dataset.rows factor the two levels' means (hand arithmetic:
    hits 99 % and 97 % at 10^5 rows -> 98.0 %; 60 % and 40 % at 10^7 -> 50.0 %)."""
    from ybscale.design.factorial import design_from_dict
    from ybscale.report.bottlenecks import buffers_text

    design = design_from_dict(
        {
            "factors": {
                "A": {"name": "data", "sets": "dataset.rows", "levels": [100000, 10000000]},
                "B": {"name": "workload", "sets": "workload.script", "levels": ["read", "write"]},
            }
        }
    )
    rows = pd.DataFrame(
        {
            "run": ["run01", "run02", "run03", "run04"],
            "A": [-1, 1, -1, 1],
            "B": [-1, -1, 1, 1],
            "buffer_hit_ratio": [0.99, 0.60, 0.97, 0.40],
            "buffer_reads_per_tx": [0.01, 0.5, 0.03, 1.5],
            "disk_bytes_per_tx": [0.0, 4096.0, 0.0, 12288.0],
        }
    )
    (each, level) = buffers_text(rows, design, ["A", "B"])
    (_, _, cells) = buffers_text(rows, design, ["A", "B", "AB"])
    assert cells == (
        "The interaction AB (data × workload) is active: with **data** at 10000000, at workload "
        "read the buffers held 60.0 % and each transaction read 0.50 blocks from the operating "
        "system, 4.00 kB from the disk; at workload write the buffers held 40.0 % and each "
        "transaction read 1.50 blocks from the operating system, 12.00 kB from the disk (means "
        "over those rows)."
    )
    (_, quiet) = buffers_text(rows, design, ["B"])  # A within the noise: its reads still told
    assert quiet.endswith("(means over the rows at each level); its effect on the response is "
                          "within the noise.")  # fmt: skip
    assert "run02 60.0 % (0.50; 4.00 kB)" in each and "run01 99.0 % (0.01; 0.00 kB)" in each
    assert "brought from the disk" in each
    assert level == (
        "With **data** at 10000000 instead of 100000 (A), the buffers held 50.0 % of the blocks "
        "instead of 98.0 % and each transaction read 1.00 blocks from the operating system "
        "instead of 0.02, and brought 8.00 kB from the disk instead of 0.00 kB (means over the "
        "rows at each level)."
    )
    (each, _) = buffers_text(rows.drop(columns=["disk_bytes_per_tx"]), design, ["B"])
    assert "run02 60.0 % (0.50)" in each and "from the disk (" not in each
    assert buffers_text(rows.drop(columns=["buffer_hit_ratio"]), design, ["A"]) == []


def test_the_findings_say_how_each_rows_dataset_came_to_be_and_how_writes_were_undone():
    """Issue 48: each row's load (or the dataset kept from the row before), its size on the
    largest node, and the write repetitions' resets with their seconds (hand arithmetic:
    restored 0.25, 0.50, 0.75 -> median 0.50)."""
    from ybscale.report.dataset_text import dataset_text

    measurements = {
        "run01": {"applied": {"dataset": {"how": "loaded", "rows": 10_000_000, "seconds": 41.5,
                                          "rows_per_second": 240964,
                                          "bytes_per_node": {"node1": 3.3e8, "node2": 3.4e8}}}},
        "run02": {"applied": {"dataset": {"how": "kept", "rows": 10_000_000, "seconds": 0.2,
                                          "rows_per_second": None}}},
        "run03": {"applied": {}},  # a backend that records none
    }  # fmt: skip
    resets = {
        "run01": pd.DataFrame(
            {"reset": [None, "restored", "restored"], "reset_s": [0, 0.25, 0.75]}
        ),
        "run02": pd.DataFrame({"reset": ["restored", "reloaded"], "reset_s": [0.5, 12.0]}),
    }
    (text,) = dataset_text(measurements, resets)
    assert text.startswith(
        "**Dataset.** 10,000,000 rows kept once (run02) in 0.2 s; 10,000,000 rows loaded once "
        "(run01) in 41.5 s, 240,964 rows/s, 340 MB on the largest node."
    )
    twice = {**measurements, "run04": measurements["run01"]}
    twice["run04"] = {
        "applied": {
            "dataset": {
                **twice["run04"]["applied"]["dataset"],
                "seconds": 38.0,
                "rows_per_second": 263158,
            }
        }
    }
    (grouped,) = dataset_text(twice, {})
    assert "loaded 2 times (run01, run04) in 38–41.5 s, 240,964–263,158 rows/s" in grouped
    assert (
        "3 restored in 0.25–0.75 s (median 0.50 s), 1 reloaded in 12.00 s (median 12.00 s)" in text
    )
    assert dataset_text({"run03": measurements["run03"]}, resets) == []
    (reads,) = dataset_text(measurements, {"run01": resets["run01"].assign(reset="")})
    assert "brought back" not in reads
    # YugabyteDB: the table's SST bytes on each tserver, the largest said with what it leaves out
    sst_sizes = {"tserver0": 2.1e10, "tserver1": 2.3e10}
    yb = {"dataset": {"how": "loaded", "rows": 10**9, "seconds": 3600.0,
                      "rows_per_second": 277778, "sst_bytes_per_tserver": sst_sizes}}  # fmt: skip
    (sst,) = dataset_text({"run01": {"applied": yb}}, {})
    assert (
        "1,000,000,000 rows loaded once (run01) in 3,600 s, 277,778 rows/s, 23 GB of SST files "
        "on the largest tserver after a flush (compressed)." in sst
    )


def test_two_studies_reading_a_column_at_the_noise_margin_apart_print_one_list():
    """Two default studies of one system (2026-12-03, A and B, log10 estimates from their
    effects.csv): ADE was told from zero in A (-0.0237, Holm-active) and not in B (-0.0244),
    negligible against ±20 % in both; node_size (F) on throughput per dollar read +0.0065 in A
    and -0.0165 in B, within the noise in both. Both summaries list the same columns, ADE said
    after the table in A only, as negligible; both say F is faster, not cheaper; neither's
    best combination sets isolation (D) for ADE."""
    from ybscale.analysis import recommend
    from ybscale.report.findings import Responses

    def study(ade: float, ade_active: bool, f_tpd: float) -> tuple[list, list]:
        rows = []
        for name in ("ceiling", "throughput_per_dollar"):
            f = 0.307 if name == "ceiling" else f_tpd
            for term, effect, active, verdict in (
                ("B", -0.98, True, "matters"),
                ("F", f, name == "ceiling", "matters" if name == "ceiling" else "negligible"),
                ("ADE", ade, ade_active, "negligible"),
            ):
                rows.append({"term": term, "alias": term, "effect": effect,
                             "ci_low": effect - 0.015, "ci_high": effect + 0.015,
                             "verdict_low": effect - 0.02, "verdict_high": effect + 0.02,
                             "active": active, "verdict": verdict, "relevant_given": "20%",
                             "model": "multiplicative", "variation_pct": 1.0,
                             "response": name})  # fmt: skip
        responses = Responses(pd.DataFrame(rows))
        # the best combination sets only the factors of columns that are not negligible
        assert recommend.active_factors(responses.effects) == ["B", "F"]
        return responses.summary(seed_design()), responses.opposite(seed_design())

    summary_a, trade_a = study(-0.0237, True, 0.0065)
    summary_b, trade_b = study(-0.0244, False, -0.0165)
    listed = [[row[0] for row in summary[1][1][1:]] for summary in (summary_a, summary_b)]
    assert (
        listed[0]
        == listed[1]
        == [
            "workload write instead of read (B)",
            "node_size large instead of small (F)",
        ]
    )
    assert summary_a[2].startswith("Told from the noise but negligible (inside ±20 %")
    assert (
        "ADE (operation_size × isolation × replication) divides the ceiling by 1.06"
        in (summary_a[2])
    )
    assert len(summary_b) == 2  # nothing else to say: ADE within the noise there
    for trade in (trade_a, trade_b):
        (line,) = trade[1][1]
        assert line.startswith("node_size large instead of small (F) multiplies the ceiling by")
        assert line.endswith(": faster, not cheaper."), line
