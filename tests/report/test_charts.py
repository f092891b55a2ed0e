"""Charts: specs render to PNG, saved HTML is offline, interaction titles mark aliasing."""

import itertools
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import vl_convert as vlc
from altair.utils._importers import vl_version_for_vl_convert
from conftest import shipped_config
from designs import seed_design

from ybscale.analysis.usl import usl as usl_curve
from ybscale.report import charts

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = [1, 2, 4, 8, 16, 32]
USL = ["usl_sigma", "usl_kappa", "usl_lambda"]


@pytest.fixture(scope="module")
def design():
    return seed_design()


@pytest.fixture(scope="module")
def ceilings(design):
    """ceilings.csv-like table: signs, empirical ceiling, USL parameters, response."""
    table = design.sign_table().reset_index()
    i = np.arange(len(table))
    lam = 100 + 20 * table["B"] + 30 * table["C"]
    table = table.assign(
        usl_sigma=0.05 + 0.01 * i, usl_kappa=0.001 * (i % 4), usl_lambda=lam.astype(float)
    )
    table.loc[3, "usl_sigma"] = np.nan  # a failed fit: no curve for that run
    peak = [usl_curve(CLIENTS, *row) for row in table[USL].to_numpy()]
    table["empirical_tps"] = [np.nanmax(p) if np.isfinite(p).any() else 400.0 for p in peak]
    table["empirical_clients"] = [
        CLIENTS[int(np.nanargmax(p))] if np.isfinite(p).any() else 32 for p in peak
    ]
    return table.assign(response=table["empirical_tps"])


@pytest.fixture(scope="module")
def curves(ceilings):
    frames = []
    for row in ceilings.itertuples():
        sigma = 0.1 if np.isnan(row.usl_sigma) else row.usl_sigma
        tps = usl_curve(CLIENTS, sigma, row.usl_kappa, row.usl_lambda)
        frames.append(
            pd.DataFrame(
                {"run": row.run, "clients": CLIENTS, "tps": tps}
                | {"tps_min": tps * 0.95, "tps_max": tps * 1.05}
            )
        )
    return pd.concat(frames, ignore_index=True)


def _effects(design, method="lenth", pse=3.0):
    terms = [term for term, _ in design.alias_groups()]
    effect = np.linspace(-4.0, 4.0, len(terms))
    effect[0], effect[2] = 40.0, -25.0
    crit = 2.57 if method == "lenth" else 2.31
    return pd.DataFrame(
        {
            "term": terms,
            "alias": [design.alias_string(t) for t in terms],
            "effect": effect,
            "std_error": pse,
            "standardized": effect / pse,
            "me": crit * pse,
            "sme": 5.22 * pse if method == "lenth" else np.nan,
            "active": np.abs(effect) > crit * pse,
            "method": method,
            "model": "additive",
        }
    )


@pytest.fixture(scope="module")
def effects(design):
    return _effects(design)


@pytest.fixture(scope="module")
def residuals(ceilings):
    rng = np.random.default_rng(7)
    resid = rng.normal(0, 5, len(ceilings))
    std = resid / resid.std()
    std[5] = 3.4
    return pd.DataFrame(
        {
            "run": ceilings["run"],
            "row": ceilings["row"],
            "replicate": 1,
            "observed": ceilings["response"],
            "fitted": ceilings["response"] - resid,
            "residual": resid,
            "standardized": std,
            "order": np.arange(1, len(ceilings) + 1),
            "outlier": np.where(np.abs(std) > 3, "True", "False"),  # as read back from CSV
        }
    )


@pytest.fixture(scope="module")
def specs(design, ceilings, curves, effects, residuals):
    """Every chart once, keyed by name."""
    out = {
        "throughput": charts.throughput_chart(curves, ceilings, ceilings),
        "pareto": charts.pareto_chart(effects),
        "pareto_t": charts.pareto_chart(_effects(design, method="t")),
        "half_normal": charts.half_normal_chart(effects),
    }
    out |= {f"interaction_{k}": v for k, v in charts.interaction_charts(design, ceilings).items()}
    out |= {f"residuals_{k}": v for k, v in charts.residual_charts(residuals).items()}
    return out


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def test_every_spec_renders_to_png(specs, design):
    pairs = ["".join(p) for p in itertools.combinations(design.base, 2)]
    assert {f"interaction_{p}" for p in pairs} <= set(specs)
    for name, chart in specs.items():
        width, height = _png_size(vlc.vegalite_to_png(chart.to_json()))
        assert 250 <= width <= 3000 and 200 <= height <= 3000, (name, width, height)


def test_throughput_panels_and_usl(curves, ceilings):
    data = charts._throughput_data(curves, ceilings, ceilings)
    assert set(data["kind"]) == {"measured", "usl", "ceiling"}
    assert data.loc[data["kind"] == "usl", "run"].nunique() == len(ceilings) - 1  # NaN fit skipped
    usl = data[data["kind"] == "usl"]
    assert usl["clients"].min() == pytest.approx(1) and usl["clients"].max() == pytest.approx(32)
    assert set(data["panel"]) >= {"run01 ef", "run16 abcdef"}  # Yates treatment labels


def test_usl_formula():
    assert usl_curve(1, 0.1, 0.01, 50.0) == pytest.approx(50.0)
    assert usl_curve(10, 0.1, 0.0, 1.0) == pytest.approx(10 / 1.9)


def test_pareto_reference_lines(design, effects):
    rows = charts._effect_rows(effects)
    values, title, refs = charts._pareto_scale(rows)
    assert "Lenth" in title and dict(refs) == pytest.approx({"ME": 2.57, "SME": 5.22})
    assert values.max() == pytest.approx(40 / 3)
    _, title, refs = charts._pareto_scale(charts._effect_rows(_effects(design, method="t")))
    assert refs == [("t crit", pytest.approx(2.31))]
    no_error = effects.assign(std_error=np.nan, standardized=np.nan)
    values, title, refs = charts._pareto_scale(charts._effect_rows(no_error))
    assert refs == [] and values.max() == pytest.approx(40.0)
    vlc.vegalite_to_svg(charts.pareto_chart(no_error).to_json())


def test_half_normal_quantiles(effects):
    data = charts.half_normal_data(effects)
    m = len(data)
    assert data["abs_effect"].is_monotonic_increasing
    assert data["quantile"].iloc[0] == pytest.approx(0.041789, abs=1e-5)  # Phi^-1(0.5 + 0.25/15)
    assert data["quantile"].iloc[-1] == pytest.approx(2.128045, abs=1e-5)
    assert m == 15 and list(data.loc[data["active"], "term"]) == ["F", "A"]


def test_interaction_titles_mark_aliasing(design, specs):
    title = {k: specs[f"interaction_{k}"].to_dict()["title"] for k in ("AB", "BC", "AC")}
    assert "confounded with F node_size" in title["AB"]["text"]
    assert "confounded with E replication" in title["BC"]["text"]
    assert "confounded" not in title["AC"]["text"]
    assert "EF" in title["AC"]["subtitle"][0]
    assert charts.confounded_with_main(design, "BA") == ["F"]


def test_interaction_means(design, ceilings):
    means = charts.interaction_data(design, ceilings.set_index("run"), "response", "A", "C")
    assert len(means) == 4 and set(means["x_level"]) == {"1", "100"}
    expected = ceilings.loc[(ceilings["A"] > 0) & (ceilings["C"] > 0), "response"].mean()
    got = means.loc[(means["A"] > 0) & (means["C"] > 0), "mean"].item()
    assert got == pytest.approx(expected)


def test_residual_qq(residuals):
    qq = charts.qq_data(residuals)
    assert qq["standardized"].is_monotonic_increasing
    assert qq["theoretical"].sum() == pytest.approx(0, abs=1e-9)
    assert qq["outlier"].sum() == 1


def _assert_offline(html: Path):
    text = html.read_text(encoding="utf-8")
    assert "vegaEmbed" in text
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.IGNORECASE)
    assert "cdn.jsdelivr" not in text


def test_analysis_charts_written_offline(tmp_path, design, ceilings, effects, residuals):
    where = charts.AnalysisChartPaths.under(tmp_path)
    paths = charts.analysis_charts(design, ceilings, "response", effects, residuals, where)
    names = {p.relative_to(tmp_path).as_posix() for p in paths}
    stems = ["pareto", "half_normal", "interactions/interaction_AB", "interactions/interaction_CD"]
    stems += [f"residuals/residuals_{n}" for n in ("qq", "fitted", "order")]
    for stem in stems:
        assert {f"{stem}.html", f"{stem}.svg"} <= names
    assert len(list((tmp_path / "interactions").glob("*.html"))) == 6  # C(4, 2) base pairs
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    _assert_offline(tmp_path / "pareto.html")
    svg = (tmp_path / "interactions" / "interaction_AB.svg").read_text()
    assert svg.lstrip().startswith("<svg")


def test_the_script_bundle_is_built_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    """Built by vl-convert into YBSCALE_CACHE under its versions, then read from there: a
    marker written over the cached file is what the next process's page carries."""
    monkeypatch.setenv("YBSCALE_CACHE", str(tmp_path / "cache"))
    charts._javascript_bundle.cache_clear()  # what a new process starts with
    built = charts._javascript_bundle()
    cached = list((tmp_path / "cache" / "vl-convert").iterdir())
    assert [p.name for p in cached] == [f"{vlc.__version__}-{vl_version_for_vl_convert()}.js"]
    assert cached[0].read_text(encoding="utf-8") == built and "vegaEmbed" in built
    cached[0].write_text("/* the cached bundle */", encoding="utf-8")
    charts._javascript_bundle.cache_clear()
    page = charts._InlineTemplate().render(spec="{}", embed_options="{}", output_div="vis")
    charts._javascript_bundle.cache_clear()  # later tests build or read their own
    assert "/* the cached bundle */" in page and "vegaEmbed(" in page


def test_throughput_cli(tmp_path, curves, ceilings):
    runs = tmp_path / "runs"
    for run, frame in curves.groupby("run"):
        (runs / run).mkdir(parents=True)
        frame.drop(columns="run").to_csv(runs / run / "throughput.csv", index=False)
    ceilings.to_csv(tmp_path / "ceilings.csv", index=False)
    (runs / "run99").mkdir()  # left over from an earlier, larger design: not named, not drawn
    pd.DataFrame({"clients": [1], "tps": [1e9]}).to_csv(runs / "run99" / "throughput.csv")
    out = tmp_path / "charts"
    named = [str(runs / run) for run in sorted(curves["run"].unique())]
    argv = ["throughput", "--ceilings", str(tmp_path / "ceilings.csv"), *named]
    argv += ["--throughput", str(out / "tp.svg"), "--per-second", str(out / "ps.svg")]
    assert charts.main(argv) == 0
    _assert_offline(out / "tp.html")
    svg = (out / "tp.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "run99" not in svg
    assert (out / "ps.svg").is_file()


@pytest.mark.parametrize("path", sorted((ROOT / "report").glob("*.rst")), ids=lambda p: p.name)
def test_report_text_renders(path):
    """Captions render as Snakemake does (Jinja2, then docutils) without RST warnings."""
    import jinja2
    from docutils.core import publish_parts

    config = shipped_config()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    snakemake = type("Snakemake", (), {"config": config})
    text = env.from_string(path.read_text()).render(snakemake=snakemake, categories={}, files=[])
    html = publish_parts(text, writer="html", settings_overrides={"halt_level": 2})
    assert len(html["html_body"]) > 200


def test_throughput_panels_show_each_resources_utilisation_on_a_second_axis(curves, ceilings):
    util = curves.assign(
        util_node1=np.minimum(1.0, curves["clients"] / 8), util_client=0.2, util_host=np.nan
    )
    data = charts._throughput_data(util, ceilings, ceilings)
    rows = data[data["kind"] == "util"]
    assert set(rows["resource"]) == {"node1", "client"}  # a resource never measured is left out
    assert len(rows) == 2 * len(curves)
    svg = vlc.vegalite_to_svg(charts.throughput_chart(util, ceilings, ceilings).to_json())
    assert "CPU utilisation" in svg and "node1" in svg
    assert "CPU utilisation" not in vlc.vegalite_to_svg(
        charts.throughput_chart(curves, ceilings, ceilings).to_json()
    )


def test_a_chart_of_more_than_altairs_5000_rows_keeps_every_point(tmp_path):
    """A study whose later rounds measured 48 rows drew each row's curve and every node's CPU:
    more data lines than altair's default guard (5,000) allows, and the chart failed. Every
    point goes into the spec, none sampled away."""
    import altair as alt

    n = 6000
    data = pd.DataFrame({"x": np.arange(n), "y": np.sin(np.arange(n) / 50.0)})
    chart = alt.Chart(data).mark_line().encode(x="x:Q", y="y:Q")
    html, svg = charts.save(chart, tmp_path / "big")
    assert svg.read_text().lstrip().startswith("<svg")
    assert len(re.findall(r'"x": ?\d+', html.read_text())) == n


def test_the_responses_chart_draws_each_verdict_on_its_simultaneous_interval():
    """With verdicts, each panel draws the interval a column was judged on (effects.csv's
    verdict_low/high, not its 95 % interval), coloured by its verdict, over a band at
    ± analysis.relevant on the shown scale (×1/1.2 .. ×1.2 for 20 % on the log scale). Two
    studies of one system (2026-12-03, A and B: ADE told from zero in A only, negligible in
    both) colour every column alike."""
    from ybscale.report.response_charts import responses_chart

    relevant = float(np.log10(1.2))

    def study(ade_active: bool) -> dict:
        rows = []
        for name in ("ceiling", "throughput_per_dollar"):
            for term, effect, verdict in (("B", -0.98, "matters"), ("ADE", -0.024, "negligible")):
                rows.append({"term": term, "alias": term, "effect": effect,
                             "ci_low": effect - 0.01, "ci_high": effect + 0.01,
                             "verdict_low": effect - 0.02, "verdict_high": effect + 0.02,
                             "active": term == "B" or ade_active, "verdict": verdict,
                             "relevant": relevant, "relevant_given": "20%",
                             "model": "multiplicative", "response": name})  # fmt: skip
        return responses_chart(pd.DataFrame(rows)).to_dict()

    colours = []
    for spec in (study(True), study(False)):
        panels = spec["hconcat"]
        assert len(panels) == 2
        seen = {}
        for panel in panels:
            band, _, interval, point = panel["layer"]
            assert interval["encoding"]["x"]["field"] == "shown_verdict_low"
            assert interval["encoding"]["x2"]["field"] == "shown_verdict_high"
            assert point["encoding"]["color"]["field"] == "verdict"
            assert "shaded: within ±20% (analysis.relevant)" in panel["title"]["subtitle"]
            data = spec["datasets"][band["data"]["name"]]
            assert data == [{"low": pytest.approx(1 / 1.2), "high": pytest.approx(1.2)}]
            values = spec["datasets"][point["data"]["name"]]
            for v in values:
                assert v["shown_verdict_low"] == pytest.approx(10 ** (v["effect"] - 0.02))
                seen[(v["response"], v["term"])] = v["verdict"]
        colours.append(seen)
    assert colours[0] == colours[1]
    assert colours[0][("ceiling", "ADE")] == "negligible"
