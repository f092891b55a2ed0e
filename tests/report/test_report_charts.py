"""Charts a reader expects: factor names and levels in titles, per-second throughput panels."""

from __future__ import annotations

import json
import shutil
import struct

import pandas as pd
import pytest
import vl_convert as vlc
from conftest import REPO
from designs import seed_design

from ybscale.files import write_csv
from ybscale.measure.per_second import COLUMNS as PER_SECOND_COLUMNS
from ybscale.measure.per_second import per_second
from ybscale.report import charts

PGBENCH = REPO / "tests" / "data" / "pgbench"


@pytest.fixture
def runs(tmp_path):
    """Two runs with real pgbench 15 aggregate logs (two threads each) and their levels."""
    design = seed_design()
    root = tmp_path / "runs"
    for run in ("run01", "run02"):
        logs = root / run / "pgbench-logs"
        logs.mkdir(parents=True)
        for src in sorted(PGBENCH.glob("pg15_read_5s_agg.3953*")):
            suffix = src.name.split("agg")[1]  # .3953 or .3953.1
            shutil.copy(src, logs / f"c004_r1_node1{suffix}")
        shutil.copy(PGBENCH / "pg15_read_agg.3063", logs / "c004_r2_node2.3063")
        (logs / "c004_r1_node1.stdout").write_text("not a log\n")
        pd.DataFrame({"clients": [4], "tps": [1.0], "tps_min": [1.0], "tps_max": [1.0]}).to_csv(
            root / run / "throughput.csv", index=False
        )
        pd.DataFrame({"clients": [4, 4], "repetition": [1, 2]}).to_csv(
            root / run / "repetitions.csv", index=False
        )
        meta = {"levels": design.levels(run)}
        (root / run / "measurement.json").write_text(json.dumps(meta))
        # what the measuring job derives once from the logs
        lines = per_second(root / run / "repetitions.csv")
        write_csv(root / run / "per_second.csv", lines, PER_SECOND_COLUMNS)
    return root


def _png_ok(chart) -> None:
    png = vlc.vegalite_to_png(chart.to_json())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 300 and height > 200


def test_per_second_series_add_up_threads_and_nodes(runs):
    one = pd.DataFrame(per_second(runs / "run01" / "repetitions.csv"))
    assert set(one["repetition"]) == {1, 2} and set(one["run"]) == {"run01"}
    one = one[one["repetition"] == 1].sort_values("second")
    # first interval of the two threads: 4005 + 3926 transactions
    assert one["tps"].iloc[0] == 4005 + 3926
    assert one["tps"].iloc[1] == 20846 + 20383
    assert list(one["second"])[:3] == [0, 1, 2]
    data = charts.read_per_second(runs)  # what the chart draws: every row's per_second.csv
    assert set(data["run"]) == {"run01", "run02"} and set(data["clients"]) == {4}
    assert len(data) == 2 * len(per_second(runs / "run02" / "repetitions.csv"))


def test_a_repetition_without_its_log_is_an_error_naming_it(runs):
    for path in (runs / "run01" / "pgbench-logs").glob("c004_r2_*"):
        path.unlink()
    with pytest.raises(FileNotFoundError, match=r"run01/repetitions.csv: 4 clients, repetition 2"):
        per_second(runs / "run01" / "repetitions.csv")


def test_per_second_chart_has_a_panel_per_run_named_by_levels(runs):
    levels = charts.read_levels(runs)
    chart = charts.per_second_chart(charts.read_per_second(runs), levels)
    spec = chart.to_dict()
    panels = set(chart.data["panel"])
    assert "run01|isolation read committed, node_size large|nodes 3, operation_size 1|" in (
        sorted(panels)[0] + "|"
    )
    assert "split(datum.value, '|')" in json.dumps(spec)
    _png_ok(chart)


def test_throughput_panels_named_by_factor_levels_not_treatment_codes(runs, tmp_path):
    paths = charts.throughput_charts(runs, None, tmp_path / "charts")
    names = {p.name for p in paths}
    assert {"throughput.svg", "per_second.svg", "per_second.html"} <= names
    svg = (tmp_path / "charts" / "throughput.svg").read_text()
    assert "workload read" in svg and "replication on" in svg
    assert "run01 ef" not in svg


def test_interaction_titles_name_factors_and_levels():
    design = seed_design()
    title = charts.interaction_title(design, "A", "B")
    assert title.text.startswith("operation_size (1 → 100) × workload (read → write)")
    assert "confounded with F node_size" in title.text
