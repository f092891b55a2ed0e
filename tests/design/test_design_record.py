"""The design record (results/design/design.json): written once by the design rule, and what
every later job reads of the design, its clusters and its run order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from ybscale.design import order, record
from ybscale.design.factorial import design_from_dict, load_design

REPO = Path(__file__).resolve().parents[2]
# a 2^(4-1) with two replicates, a description and a factor with an explicit knob
HALF = {
    "factors": {
        "A": {"name": "nodes", "levels": [3, 5]},
        "B": {"name": "workload", "levels": ["read", "write"], "description": "script"},
        "C": {"name": "work_mem", "sets": "server.work_mem", "levels": ["4MB", "64MB"]},
        "D": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
    },
    "generators": {"D": "-ABC"},
    "replications": 2,
}


def write(tmp_path: Path, clusters=None, how="random", seed=7) -> Path:
    design = design_from_dict(HALF, "half.yaml")
    path = tmp_path / "design.json"
    path.write_text(json.dumps(record.build(design, "gcp", clusters, how, seed)))
    return path


def test_the_record_reads_back_as_the_design(tmp_path):
    design = design_from_dict(HALF, "half.yaml")
    back = load_design(write(tmp_path))
    assert back.defining_relation() == design.defining_relation() == ["-ABCD"]
    assert back.sign_table().equals(design.sign_table())
    assert [f.knob for f in back.factors] == [f.knob for f in design.factors]
    assert [f.description for f in back.factors] == [f.description for f in design.factors]
    assert back.source == "half.yaml"  # errors still name the study's design file


def test_the_record_holds_the_clusters_and_the_planned_order(tmp_path):
    design = design_from_dict(HALF, "half.yaml")
    clusters = {run: f"c{(int(run[3:]) - 1) % 8 // 2}" for run in design.run_ids}
    read = record.read(write(tmp_path, clusters, "random", 7))
    assert read.clusters == clusters and (read.order, read.seed) == ("random", 7)
    planned = order.planned_order(design.sign_table(), "random", 7, clusters)
    assert pd.DataFrame(read.planned)[order.PLANNED_COLUMNS].equals(planned)
    # the order Snakemake's priorities follow is the recorded one
    priorities = order.run_priorities(design, "random", 7, clusters)
    assert sorted(priorities, key=lambda run: -priorities[run]) == list(planned["run"])


def test_the_run_order_job_reads_order_seed_and_clusters_from_the_record(tmp_path):
    path = write(tmp_path, None, "standard", 3)
    runs = tmp_path / "runs"
    measured = []
    for i, run in enumerate(["run02", "run01"]):
        meta = runs / run / "measurement.json"
        meta.parent.mkdir(parents=True)
        meta.write_text(json.dumps({"run": run, "started": f"2026-01-01T00:0{i}:00+00:00",
                                    "finished": f"2026-01-01T00:0{i}:30+00:00"}))  # fmt: skip
        measured.append(str(meta))
    out = tmp_path / "run_order.csv"
    assert order.main(["--design", str(path), "--out", str(out), *measured]) == 0
    table = pd.read_csv(out)
    assert list(table["run"]) == ["run02", "run01"] and list(table["planned"]) == [2, 1]
    assert set(table["order"]) == {"standard"} and set(table["seed"]) == {3}


def test_a_file_that_is_not_a_record_is_named(tmp_path):
    bad = tmp_path / "design.json"
    bad.write_text('{"factors": 3}')
    with pytest.raises(ValueError, match=r"design.json: <file>: not a design record"):
        load_design(bad)


def test_only_the_design_rule_reads_the_design_file():
    """Every later rule reads the record (rules/*.smk name config["design"] once)."""
    text = "".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk")))
    rules = re.split(r"\n(?=rule )", text)
    readers = [r.split(":", 1)[0] for r in rules if 'config["design"]' in r]
    assert readers == ["rule design"]
    assert (
        "--clusters"
        not in text.replace('"--clusters {params.clusters}', "", 1).split("rule design:")[0]
    )


def test_the_design_page_is_written_from_the_record_and_the_effects(tmp_path):
    """The design_page rule's job: each column's stratum from the effects, the clusters from
    the record (the findings job no longer writes it)."""
    from ybscale.report import design_report

    design = design_from_dict(HALF, "half.yaml")
    clusters = {run: f"c{(int(run[3:]) - 1) % 8 // 2}" for run in design.run_ids}
    path = write(tmp_path, clusters)
    effects = tmp_path / "effects.csv"
    pd.DataFrame({"term": ["A", "B"], "stratum": ["whole-plot", "sub-plot"]}).to_csv(effects)
    page = tmp_path / "design.rst"
    assert design_report.main(["--design", str(path), "--effects", str(effects),
                               "--out", str(page)]) == 0  # fmt: skip
    text = page.read_text()
    assert "whole-plot" in text and "sub-plot" in text
    assert all(label in text for label in set(clusters.values()))
    rules = (REPO / "rules" / "report.smk").read_text()
    findings_rule = rules.split("rule findings:")[1].split("\nrule ")[0]
    assert "design.rst" not in findings_rule
