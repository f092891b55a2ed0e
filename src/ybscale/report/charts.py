"""Altair charts for the scalability study, each saved as offline (inline) HTML and as SVG.

Chart builders are pure (DataFrames in, altair chart out); ``save`` and the ``*_charts``
writers do the I/O. ``python -m ybscale.report.charts throughput|analysis ...`` renders from
results/.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import vl_convert as vlc
from altair.utils._importers import vl_version_for_vl_convert
from altair.utils.html import INLINE_HTML_TEMPLATE, spec_to_html
from scipy.special import ndtri  # the normal quantile (scipy.stats.norm.ppf)

from ybscale import cache_dir
from ybscale.analysis.multiplicity import chart_note, family_rule
from ybscale.analysis.responses import read_responses
from ybscale.analysis.terms import BLOCK_TERM, ERROR_TERM, of_response
from ybscale.analysis.usl import usl as usl_curve
from ybscale.design.factorial import load_design
from ybscale.files import write_whole

NOT_EFFECTS = {"I", "mean", "intercept", "Intercept", "(Intercept)", "error"}
ACTIVE_COLOR = alt.Scale(domain=[True, False], range=["#d62728", "#4c78a8"])
OUTLIER_COLOR = ACTIVE_COLOR
TILT_0 = alt.Axis(labelAngle=0)
NO_ZERO = alt.Scale(zero=False)
PANEL = {"width": 180, "height": 130}


# ---------------------------------------------------------------------------- saving


class _InlineTemplate:
    """altair's inline HTML template with vl-convert's JavaScript bundle built once per
    process (``chart.save(inline=True)`` builds it again for every chart)."""

    def render(self, **kwargs) -> str:
        return INLINE_HTML_TEMPLATE.render(vegaembed_script=_javascript_bundle(), **kwargs)


@cache
def _javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script (vl-convert takes a second or more to
    build it), kept in the user's cache under the versions it was built from."""
    vl_version = vl_version_for_vl_convert()
    path = cache_dir() / "vl-convert" / f"{vlc.__version__}-{vl_version}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    bundle = vlc.javascript_bundle(vl_version=vl_version)
    try:
        write_whole(path, bundle)
    except OSError:  # no writable cache: built again next time
        pass
    return bundle


def save(chart: alt.TopLevelMixin, stem: Path | str) -> list[Path]:
    """Write ``stem.html`` (JavaScript inlined, works offline) and ``stem.svg``, both from one
    validated spec."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    html, svg = stem.with_suffix(".html"), stem.with_suffix(".svg")
    # every measured point goes in (a study's later rounds pass altair's 5,000-row guard:
    # 48 rows' curves with each node's CPU); nothing is sampled away
    with alt.data_transformers.disable_max_rows():
        spec = chart.to_dict()
    versions = (alt.VEGA_VERSION, alt.VEGAEMBED_VERSION, alt.VEGALITE_VERSION)
    page = spec_to_html(spec, "vega-lite", *versions, template=_InlineTemplate())
    html.write_text(page, encoding="utf-8")
    svg.write_text(vlc.vegalite_to_svg(spec), encoding="utf-8")
    return [html, svg]


# ---------------------------------------------------------------------------- helpers


def _as_bool(series: pd.Series) -> pd.Series:
    """Booleans from bool/int/str ("True", "false", "1") columns; missing -> False."""
    if series.dtype == bool:
        return series
    text = series.astype("string").str.strip().str.lower()
    return text.isin(["true", "1", "yes", "y"]).fillna(False).astype(bool)


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _treatment(row: pd.Series, letters: Sequence[str]) -> str:
    """Yates treatment label: lower-case letters at +1, ``(1)`` when all are at -1."""
    high = [x.lower() for x in letters if _finite(row.get(x)) and float(row[x]) > 0]
    return "".join(high) or "(1)"


def _panel_labels(
    runs: Sequence[str], ceilings: pd.DataFrame | None, levels: dict | None = None
) -> dict[str, str]:
    """Facet header per run: its factor names and levels, lines split by ``|``.

    Without the levels (``{run: {name: level}}``, e.g. from measurement.json) the header falls
    back to the Yates treatment code: ``run01 (1)``, ``run02 a``...
    """
    if levels:
        return {r: _levels_label(r, levels.get(r)) for r in runs}
    if ceilings is None or "run" not in ceilings:
        return {r: r for r in runs}
    letters = [c for c in ceilings.columns if len(c) == 1 and c.isupper()]
    by_run = ceilings.drop_duplicates("run").set_index("run")
    return {
        r: f"{r} {_treatment(by_run.loc[r], letters)}" if r in by_run.index and letters else r
        for r in runs
    }


def _levels_label(run: str, levels: dict | None, per_line: int = 2) -> str:
    """``run01|operation_size 1, workload read|...``: two factors per header line."""
    if not levels:
        return run
    parts = [f"{name} {value}" for name, value in levels.items()]
    lines = [", ".join(parts[i : i + per_line]) for i in range(0, len(parts), per_line)]
    return "|".join([run, *lines])


def run_dirs(runs: Path | str | Sequence[Path | str]) -> list[Path]:
    """The run folders to draw: exactly those given, or every folder under a results/runs
    directory (a folder left over from an earlier design is drawn only in that case)."""
    if isinstance(runs, (str, Path)):
        return sorted(p for p in Path(runs).iterdir() if p.is_dir())
    return [Path(p) for p in runs]


def read_levels(runs: Path | str | Sequence[Path | str]) -> dict[str, dict]:
    """Run -> its factor levels, from each run folder's measurement.json that has them."""
    out = {}
    for folder in run_dirs(runs):
        path = folder / "measurement.json"
        levels = (
            json.loads(path.read_text(encoding="utf-8")).get("levels") if path.is_file() else None
        )
        if levels:
            out[folder.name] = levels
    return out


def _header() -> alt.Header:
    """Facet headers on several lines (labels split at ``|``)."""
    return alt.Header(labelExpr="split(datum.value, '|')", labelLimit=0, labelFontSize=10)


# ---------------------------------------------------------------------------- throughput


def _usl_grid(usl: pd.DataFrame | None, curves: pd.DataFrame, points: int = 60) -> pd.DataFrame:
    """USL curve per run on a grid over that run's measured client range."""
    cols = ["usl_sigma", "usl_kappa", "usl_lambda"]
    if usl is None or not set(cols + ["run"]) <= set(usl.columns):
        return pd.DataFrame(columns=["run", "clients", "tps"])
    frames = []
    for _, fit in usl.drop_duplicates("run").iterrows():
        measured = curves.loc[curves["run"] == fit["run"], "clients"]
        if measured.empty or not all(_finite(fit[c]) for c in cols):
            continue
        lo, hi = float(measured.min()), float(measured.max())
        grid = np.geomspace(max(lo, 1e-9), hi, points) if lo > 0 else np.linspace(lo, hi, points)
        tps = usl_curve(grid, *(float(fit[c]) for c in cols))
        frames.append(pd.DataFrame({"run": fit["run"], "clients": grid, "tps": tps}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run"])


def _utilisation_data(curves: pd.DataFrame) -> pd.DataFrame:
    """Long table of each measured resource's utilisation (throughput.csv's util_* columns)."""
    cols = [c for c in curves.columns if c.startswith("util_")]
    if not cols:
        return pd.DataFrame(columns=["run", "clients", "resource", "util"])
    long = curves.melt(["run", "clients"], cols, var_name="resource", value_name="util")
    long["resource"] = long["resource"].str.removeprefix("util_")
    return long.dropna(subset=["util"]).assign(kind="util")


def _throughput_data(curves, usl, ceilings, levels: dict | None = None) -> pd.DataFrame:
    """One long table (kind = measured | usl | ceiling | util) so the layers share one facet."""
    measured = curves[["run", "clients", "tps", "tps_min", "tps_max"]].assign(kind="measured")
    fitted = _usl_grid(usl, curves).assign(kind="usl")
    parts = [measured, fitted, _utilisation_data(curves)]
    if ceilings is not None and {"empirical_tps", "empirical_clients"} <= set(ceilings.columns):
        ceiling = ceilings[["run", "empirical_clients", "empirical_tps"]].rename(
            columns={"empirical_clients": "clients", "empirical_tps": "tps"}
        )
        parts.append(ceiling.dropna().assign(kind="ceiling"))
    data = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    labels = _panel_labels(sorted(data["run"].unique()), ceilings, levels)
    return data.assign(panel=data["run"].map(labels))


def throughput_chart(
    curves: pd.DataFrame,
    usl: pd.DataFrame | None,
    ceilings: pd.DataFrame | None,
    columns: int = 4,
    levels: dict | None = None,
) -> alt.FacetChart:
    """Throughput vs clients per run: medians with min-max bars, USL fit, ceiling marked; each
    resource's CPU utilisation on a second axis (right) when the rows recorded it."""
    data = _throughput_data(curves, usl, ceilings, levels)
    log_x = bool((data["clients"] > 0).all())
    x = alt.X(
        "clients:Q",
        title="clients",
        scale=alt.Scale(type="log", base=2) if log_x else alt.Scale(zero=False),
    )
    y = alt.Y("tps:Q", title="throughput (tps)")
    tip = ["run:N", "clients:Q", alt.Tooltip("tps:Q", format=",.1f")]
    base = alt.Chart().encode(x=x)
    measured = base.transform_filter(alt.datum.kind == "measured")
    bars = measured.mark_rule(color="#4c78a8").encode(y="tps_min:Q", y2="tps_max:Q")
    points = measured.mark_point(filled=True, color="#4c78a8", size=25).encode(
        y=y,
        tooltip=tip + [alt.Tooltip("tps_min:Q", format=",.1f"), "tps_max:Q"],
    )
    line = (
        base.transform_filter(alt.datum.kind == "usl")
        .mark_line(color="#f58518", strokeDash=[4, 2])
        .encode(y=y)
    )
    ceiling = base.transform_filter(alt.datum.kind == "ceiling")
    rule = ceiling.mark_rule(color="#d62728", opacity=0.5)
    star = ceiling.mark_point(shape="diamond", filled=True, size=90, color="#d62728").encode(
        y=y, tooltip=tip
    )
    layer = alt.layer(bars, points, line, rule, star)
    subtitle = (
        "points: mean tps, bars: min-max over repetitions, dashed: USL fit, red: empirical ceiling"
    )
    if (data["kind"] == "util").any():
        util = (
            base.transform_filter(alt.datum.kind == "util")
            .mark_line(strokeWidth=1, opacity=0.6, point=alt.OverlayMarkDef(size=12))
            .encode(
                y=alt.Y(
                    "util:Q",
                    title="CPU utilisation",
                    scale=alt.Scale(domain=[0, 1.05]),
                    axis=alt.Axis(format="%", orient="right"),
                ),
                color=alt.Color("resource:N", title="CPU of", scale=alt.Scale(scheme="tableau10")),
                tooltip=["run:N", "clients:Q", "resource:N", alt.Tooltip("util:Q", format=".0%")],
            )
        )
        layer = alt.layer(layer, util).resolve_scale(y="independent")
        subtitle += "; thin lines (right axis): CPU utilisation per node, client and host"
    return _panels(
        layer.properties(**PANEL), data, columns, "Throughput vs clients per run", subtitle
    )


def _panels(chart, data: pd.DataFrame, columns: int, title: str, subtitle: str):
    """One panel per run (headers: its factor levels), each with its own y scale."""
    return (
        chart.facet(
            data=data,
            facet=alt.Facet("panel:N", title=None, sort=alt.SortField("run"), header=_header()),
            columns=columns,
        )
        .resolve_scale(y="independent")
        .properties(title=alt.TitleParams(title, subtitle=subtitle))
    )


def read_curves(runs: Path | str | Sequence[Path | str]) -> pd.DataFrame:
    """Each run folder's throughput.csv, concatenated, with a ``run`` column."""
    frames = [
        pd.read_csv(folder / "throughput.csv").assign(run=folder.name)
        for folder in run_dirs(runs)
        if (folder / "throughput.csv").is_file()
    ]
    if not frames:
        raise FileNotFoundError(f"no throughput.csv in {runs}")
    return pd.concat(frames, ignore_index=True)


def throughput_charts(
    runs: Path | str | Sequence[Path | str] | pd.DataFrame,
    ceilings: Path | str | pd.DataFrame | None,
    out_dir: Path | str | None = None,
    *,
    throughput: Path | str | None = None,
    per_second: Path | str | None = None,
) -> list[Path]:
    """The throughput chart (and, from run folders, the per-second chart) as HTML + SVG.

    ``runs``: the run folders (or results/runs, or a curves table). Outputs: ``throughput`` and
    ``per_second`` paths (their .svg/.html siblings are written), else in ``out_dir``."""
    curves = runs if isinstance(runs, pd.DataFrame) else read_curves(runs)
    levels = None if isinstance(runs, pd.DataFrame) else read_levels(runs)
    if ceilings is not None and not isinstance(ceilings, pd.DataFrame):
        ceilings = pd.read_csv(ceilings)
    throughput = Path(throughput) if throughput else Path(out_dir) / "throughput.svg"
    chart = throughput_chart(curves, ceilings, ceilings, levels=levels)
    paths = save(chart, throughput.with_suffix(""))
    if not isinstance(runs, pd.DataFrame):
        per_second = Path(per_second) if per_second else Path(out_dir) / "per_second.svg"
        seconds = read_per_second(runs)
        paths += save(per_second_chart(seconds, levels), per_second.with_suffix(""))
    return paths


# ---------------------------------------------------------------------------- per second


def read_per_second(runs: Path | str | Sequence[Path | str]) -> pd.DataFrame:
    """Each run folder's per_second.csv (`measure.per_second`: run, clients, repetition, second,
    tps), concatenated; a folder without one is left out."""
    frames = [
        pd.read_csv(folder / "per_second.csv")
        for folder in run_dirs(runs)
        if (folder / "per_second.csv").is_file()
    ]
    columns = ["run", "clients", "repetition", "second", "tps"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def per_second_chart(
    seconds: pd.DataFrame, levels: dict | None = None, columns: int = 4
) -> alt.FacetChart:
    """Small multiples: per-second tps of every repetition, one line per client count."""
    labels = _panel_labels(sorted(seconds["run"].unique()), None, levels)
    data = seconds.assign(
        panel=seconds["run"].map(labels),
        series=seconds["clients"].astype(str)
        + " clients, rep "
        + seconds["repetition"].astype(str),
    )
    chart = (
        alt.Chart()
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("second:Q", title="second of the repetition"),
            y=alt.Y("tps:Q", title="tps (per second)"),
            color=alt.Color("clients:O", title="clients", scale=alt.Scale(scheme="viridis")),
            detail="series:N",
            tooltip=["run:N", "clients:O", "repetition:O", "second:Q", alt.Tooltip("tps:Q")],
        )
        .properties(**PANEL)
    )
    return _panels(
        chart,
        data,
        columns,
        "Throughput second by second, per run",
        "one line per client count and repetition (pgbench's per-transaction log per second, "
        "all nodes added up; the first second holds start-up): look for warm-up, stalls, drops",
    )


# ---------------------------------------------------------------------------- effects


def _effect_rows(effects: pd.DataFrame) -> pd.DataFrame:
    """Effects without intercept/error lines, with a display label and a boolean ``active``."""
    rows = effects.loc[~effects["term"].astype(str).isin(NOT_EFFECTS)].copy()
    rows["label"] = rows["alias"].fillna(rows["term"]) if "alias" in rows else rows["term"]
    rows["active"] = _as_bool(rows["active"]) if "active" in rows else False
    rows["abs_effect"] = rows["effect"].abs()
    return rows


def _first(rows: pd.DataFrame, col: str) -> float:
    """First non-missing value of a column (NaN when absent)."""
    values = rows[col].dropna() if col in rows else pd.Series([], dtype=float)
    return float(values.iloc[0]) if not values.empty else math.nan


def _method(rows: pd.DataFrame) -> str:
    methods = rows["method"].dropna().astype(str) if "method" in rows else pd.Series([], dtype=str)
    return methods.iloc[0].lower() if not methods.empty else ""


def _pareto_scale(rows: pd.DataFrame) -> tuple[pd.Series, str, list[tuple[str, float]]]:
    """Bar values, axis title and reference lines (label, position) for the Pareto chart."""
    se = _first(rows, "std_error")
    if not (_finite(se) and se > 0):
        return rows["abs_effect"], "|effect|  (no error estimate)", []
    std = rows["standardized"] if "standardized" in rows else rows["effect"] / se
    values = std.fillna(rows["effect"] / se).abs()
    me, sme = _first(rows, "me") / se, _first(rows, "sme") / se
    if _method(rows) == "lenth":
        refs = [(name, v) for name, v in (("ME", me), ("SME", sme)) if _finite(v)]
        return values, "|effect| / PSE  (Lenth)", refs
    refs = [("t crit", me)] if _finite(me) else []
    found = family_rule(rows)
    cut = _first(rows, "me_adjusted") / se
    if found and found[0] != "none" and _finite(cut):
        refs = [("t crit, one column", me), (f"{found[0]} cut", cut)]
    return values, "|t|  (effect / std. error)", refs


def _noise_scale(rows: pd.DataFrame) -> float:
    """The measurement-noise band on the Pareto chart's scale (NaN when not known)."""
    noise = _first(rows, "noise")
    if not _finite(noise):
        return math.nan
    se = _first(rows, "std_error")
    return noise / se if _finite(se) and se > 0 else noise


def pareto_chart(effects: pd.DataFrame) -> alt.LayerChart:
    """Horizontal bars of |standardized effect| sorted by size, with ME/SME or t reference lines.

    A grey band from 0 to the propagated measurement noise (column ``noise``) shows which
    effects run-to-run scatter alone could produce.
    """
    rows = _effect_rows(effects)
    values, title, refs = _pareto_scale(rows)
    rows = rows.assign(value=values)
    layers = []
    noise = _noise_scale(rows)
    if _finite(noise):
        band = pd.DataFrame({"start": [0.0], "end": [noise], "line": ["measurement noise"]})
        layers.append(
            alt.Chart(band)
            .mark_rect(color="#bbbbbb", opacity=0.35)
            .encode(x="start:Q", x2="end:Q", tooltip=["line:N", alt.Tooltip("end:Q", format=".3g")])
        )
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("value:Q", title=title),
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=360)),
            color=alt.Color("active:N", scale=ACTIVE_COLOR, title="active"),
            tooltip=["term:N", "label:N", alt.Tooltip("effect:Q", format=".4g"), "value:Q"],
        )
    )
    layers.append(bars)
    if _finite(noise):
        refs = [*refs, ("noise", noise)]
    if refs:
        ref = pd.DataFrame(refs, columns=["line", "value"])
        rule = alt.Chart(ref).mark_rule(strokeDash=[5, 3], color="black")
        text = alt.Chart(ref).mark_text(align="left", dx=3, dy=-6, baseline="bottom")
        layers += [
            rule.encode(x="value:Q", tooltip=["line:N", "value:Q"]),
            text.encode(x="value:Q", y=alt.value(0), text="line:N"),
        ]
    method = _method(rows) or "none"
    return alt.layer(*layers).properties(
        width=420,
        height=alt.Step(20),
        title=alt.TitleParams("Pareto chart of effects", subtitle=_subtitle(rows, method)),
    )


def _subtitle(rows: pd.DataFrame, method: str) -> list[str]:
    """The significance method, and the multiplicity rule when a replicated family was tested."""
    note = chart_note(rows)
    return [f"significance method: {method}"] + ([note] if note else [])


def half_normal_data(effects: pd.DataFrame) -> pd.DataFrame:
    """Sorted |effect| with half-normal quantiles Phi^-1(0.5 + 0.5 (i - 0.5) / m)."""
    rows = _effect_rows(effects).dropna(subset=["abs_effect"]).sort_values("abs_effect")
    m = len(rows)
    i = np.arange(1, m + 1)
    return rows.assign(quantile=ndtri(0.5 + 0.5 * (i - 0.5) / m)).reset_index(drop=True)


def half_normal_chart(effects: pd.DataFrame) -> alt.LayerChart | alt.HConcatChart:
    """Half-normal plot of |effect|; active effects labelled, PSE line when available; one
    plot per error stratum when the columns were judged in two (ybscale.design.strata)."""
    strata = effects["stratum"].dropna() if "stratum" in effects else pd.Series(dtype=str)
    split = [s for s in ("whole-plot", "sub-plot") if s in set(strata)]
    if len(split) == 2:
        return alt.hconcat(
            *(
                _half_normal_one(effects[effects["stratum"] == s], f"Half-normal plot, {s} columns")
                for s in split
            )
        )
    return _half_normal_one(effects, "Half-normal plot of effects")


def _half_normal_one(effects: pd.DataFrame, title: str) -> alt.LayerChart:
    data = half_normal_data(effects)
    x = alt.X("quantile:Q", title="half-normal quantile")
    y = alt.Y("abs_effect:Q", title="|effect|")
    points = (
        alt.Chart(data)
        .mark_point(filled=True, size=50)
        .encode(
            x=x,
            y=y,
            color=alt.Color("active:N", scale=ACTIVE_COLOR, title="active"),
            tooltip=["term:N", "label:N", alt.Tooltip("effect:Q", format=".4g")],
        )
    )
    labels = (
        alt.Chart(data)
        .transform_filter(alt.datum.active)
        .mark_text(align="right", dx=-6, dy=-4)
        .encode(x=x, y=y, text="term:N")
    )
    layers = [points, labels]
    se = data["std_error"].dropna() if "std_error" in data else pd.Series(dtype=float)
    if not se.empty and float(se.iloc[0]) > 0 and not data.empty:
        q = float(data["quantile"].max())
        ref = pd.DataFrame({"quantile": [0.0, q], "abs_effect": [0.0, float(se.iloc[0]) * q]})
        layers.insert(0, alt.Chart(ref).mark_line(color="gray", strokeDash=[4, 3]).encode(x=x, y=y))
    return alt.layer(*layers).properties(
        width=420,
        height=320,
        title=alt.TitleParams(
            title,
            subtitle=[
                "dashed: |effect| expected from noise (slope = PSE / std. error)"
                if len(layers) > 2
                else "no error estimate: look for effects that break away from the line of small "
                "ones",
                *([chart_note(data)] if chart_note(data) else []),
            ],
        ),
    )


# ---------------------------------------------------------------------------- interactions


def confounded_with_main(design, word: str) -> list[str]:
    """Main-effect letters in the alias group of a two-factor interaction ``word``."""
    target = "".join(sorted(word))
    for _term, members in design.alias_groups():
        if target in ("".join(sorted(m)) for m in members):
            return [m for m in members if len(m) == 1]
    return []


def _response_column(responses: pd.DataFrame, response: str) -> str:
    return response if response in responses.columns else "response"


def interaction_data(design, responses: pd.DataFrame, response: str, x: str, y: str):
    """Mean response at each of the four (x, y) level combinations."""
    signs = design.sign_table()[[x, y]]
    frame = responses.set_index("run") if "run" in responses.columns else responses
    col = _response_column(frame, response)
    joined = signs.join(frame[[col]], how="inner")
    means = joined.groupby([x, y], as_index=False)[col].mean().rename(columns={col: "mean"})
    factors = {f.letter: f for f in design.factors}
    for letter, out in ((x, "x_level"), (y, "y_level")):
        low, high = factors[letter].levels
        means[out] = np.where(means[letter] > 0, str(high), str(low))
    return means


def interaction_title(design, x: str, y: str) -> alt.TitleParams:
    """Title naming both factors; marks a two-factor interaction aliased with a main effect."""
    names = {f.letter: f.name for f in design.factors}
    lv = {f.letter: f"{f.levels[0]} → {f.levels[1]}" for f in design.factors}
    text = f"{names[x]} ({lv[x]}) × {names[y]} ({lv[y]}): interaction {x}{y}"
    subtitle = [f"aliases: {design.alias_string(x + y)}"]
    mains = confounded_with_main(design, x + y)
    if mains:
        text += " (confounded with " + ", ".join(f"{m} {names[m]}" for m in mains) + ")"
        subtitle.append(
            f"note: the {x}{y} interaction cannot be separated from the main effect of "
            + " / ".join(mains)
        )
    return alt.TitleParams(text, subtitle=subtitle)


def interaction_chart(design, responses: pd.DataFrame, response: str, x: str, y: str):
    """Interaction plot for base factors x, y: one line per level of y."""
    data = interaction_data(design, responses, response, x, y)
    factors = {f.letter: f for f in design.factors}
    names = {k: f.name for k, f in factors.items()}
    x_order = [str(v) for v in factors[x].levels]
    y_order = [str(v) for v in factors[y].levels]
    chart = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=60, filled=True))
        .encode(
            x=alt.X("x_level:N", title=f"{x} {names[x]}", sort=x_order, axis=TILT_0),
            y=alt.Y("mean:Q", title=f"mean {response}", scale=alt.Scale(zero=False)),
            color=alt.Color("y_level:N", title=f"{y} {names[y]}", sort=y_order),
            tooltip=["x_level:N", "y_level:N", alt.Tooltip("mean:Q", format=",.4g")],
        )
    )
    return chart.properties(width=260, height=220, title=interaction_title(design, x, y))


def interaction_charts(design, responses: pd.DataFrame, response: str = "response") -> dict:
    """Interaction plot for every pair of base factors, keyed by the pair ("AB", "AC", ...)."""
    return {
        x + y: interaction_chart(design, responses, response, x, y)
        for x, y in itertools.combinations(design.base, 2)
    }


# ---------------------------------------------------------------------------- residuals


def _residual_rows(residuals: pd.DataFrame) -> pd.DataFrame:
    rows = residuals.copy()
    rows["outlier"] = _as_bool(rows["outlier"]) if "outlier" in rows else False
    if "order" not in rows:
        rows["order"] = np.arange(1, len(rows) + 1)
    return rows


def qq_data(residuals: pd.DataFrame) -> pd.DataFrame:
    """Sorted standardized residuals against normal quantiles (Blom positions)."""
    rows = _residual_rows(residuals).dropna(subset=["standardized"])
    rows = rows.sort_values("standardized").reset_index(drop=True)
    n = len(rows)
    i = np.arange(1, n + 1)
    return rows.assign(theoretical=ndtri((i - 0.375) / (n + 0.25)) if n else [])


def _residual_points(data: pd.DataFrame, x: alt.X, y: alt.Y) -> alt.LayerChart:
    """Residual points, outliers red and labelled with their run."""
    tips = [c for c in ("run", "observed", "fitted", "residual", "standardized") if c in data]
    points = (
        alt.Chart(data)
        .mark_point(filled=True)
        .encode(
            x=x,
            y=y,
            color=alt.Color("outlier:N", scale=OUTLIER_COLOR, title="outlier"),
            size=alt.condition(alt.datum.outlier, alt.value(110), alt.value(50)),
            tooltip=tips,
        )
    )
    labels = (
        alt.Chart(data)
        .transform_filter(alt.datum.outlier)
        .mark_text(align="left", dx=7, color="#d62728")
        .encode(x=x, y=y, text="run:N")
    )
    return alt.layer(points, labels)


def _zero_rule() -> alt.Chart:
    return alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="gray").encode(y="y:Q")


def residual_charts(residuals: pd.DataFrame) -> dict[str, alt.LayerChart]:
    """Normal Q-Q, residual vs fitted and residual vs run order; outliers highlighted."""
    qq = qq_data(residuals)
    rows = _residual_rows(residuals)
    size = {"width": 320, "height": 260}
    lim = float(np.nanmax(np.abs(qq[["theoretical", "standardized"]].to_numpy()))) if len(qq) else 2
    diag = pd.DataFrame({"theoretical": [-lim, lim], "standardized": [-lim, lim]})
    qq_x = alt.X("theoretical:Q", title="theoretical normal quantile")
    qq_y = alt.Y("standardized:Q", title="standardized residual")
    qq_chart = alt.layer(
        alt.Chart(diag).mark_line(color="gray", strokeDash=[4, 3]).encode(x=qq_x, y=qq_y),
        _residual_points(qq, qq_x, qq_y),
    ).properties(title="Normal Q-Q plot of standardized residuals", **size)
    res_y = alt.Y("residual:Q", title="residual")
    fitted = alt.layer(
        _zero_rule(),
        _residual_points(rows, alt.X("fitted:Q", title="fitted", scale=NO_ZERO), res_y),
    ).properties(title="Residuals vs fitted values", **size)
    order_x = alt.X("order:Q", title="run order")
    order = alt.layer(
        _zero_rule(),
        alt.Chart(rows).mark_line(color="lightgray").encode(x=order_x, y=res_y),
        _residual_points(rows, order_x, res_y),
    ).properties(title="Residuals vs run order", **size)
    return {"qq": qq_chart, "fitted": fitted, "order": order}


# ---------------------------------------------------------------------------- writers


@dataclass(frozen=True)
class AnalysisChartPaths:
    """Where the analysis charts go: two .svg files (an .html beside each) and two folders
    (``interaction_<XY>``, ``residuals_{qq,fitted,order}``), as the effects rule names them."""

    pareto: Path
    half_normal: Path
    interactions: Path
    residuals: Path

    @classmethod
    def under(cls, folder: Path | str) -> AnalysisChartPaths:
        """The layout the rules use, inside `folder` (for the CLI and the tests)."""
        folder = Path(folder)
        return cls(
            folder / "pareto.svg",
            folder / "half_normal.svg",
            folder / "interactions",
            folder / "residuals",
        )

    def draw(self, design, responses, response, effects, residuals) -> list[Path]:
        """The analysis charts of an analysis' tables, here (`effects_charts`)."""
        return effects_charts(design, responses, response, effects, residuals, self)


def analysis_charts(
    design,
    responses: pd.DataFrame,
    response: str,
    effects: pd.DataFrame,
    residuals: pd.DataFrame | None,
    paths: AnalysisChartPaths,
) -> list[Path]:
    """Write the analysis charts (html + svg) where `paths` says and return the files.

    Both folders are always created, so they can be ``directory()`` outputs."""
    for folder in (paths.interactions, paths.residuals):
        folder.mkdir(parents=True, exist_ok=True)
    charts = {
        paths.pareto.with_suffix(""): pareto_chart(effects),
        paths.half_normal.with_suffix(""): half_normal_chart(effects),
    }
    for pair, chart in interaction_charts(design, responses, response).items():
        charts[paths.interactions / f"interaction_{pair}"] = chart
    if residuals is not None and not residuals.empty:
        for name, chart in residual_charts(residuals).items():
            charts[paths.residuals / f"residuals_{name}"] = chart
    return [path for stem, chart in charts.items() for path in save(chart, stem)]


def effects_charts(design, responses, response, effects, residuals, paths) -> list[Path]:
    """The analysis charts of an effects table (its terms: no error or block line) and its
    residuals, where `paths` (AnalysisChartPaths) says."""
    terms = effects[~effects["term"].isin([ERROR_TERM, BLOCK_TERM])]
    return analysis_charts(design, responses, response, terms, residuals, paths)


def draw_analysis_charts(design, responses, response, effects, residuals, paths) -> list[Path]:
    """The analysis charts from the files the effects rule wrote (design YAML, ceilings.csv,
    effects.csv, residuals.csv), where `paths` says (`ybscale.report.study_charts`)."""
    design = load_design(design)
    table = read_responses(responses, design, response)
    # the main response's (the first of analysis.responses)
    effects, residuals = of_response(pd.read_csv(effects)), of_response(pd.read_csv(residuals))
    return effects_charts(design, table, table.attrs["response"], effects, residuals, paths)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ybscale.report.charts throughput --ceilings C --throughput T.svg
    --per-second P.svg
    RUN_DIR ...`` or ``python -m ybscale.report.charts analysis --design D --responses C --effects E
    --residuals R --pareto P.svg --half-normal H.svg --interactions DIR --residual-charts DIR``:
    the paths the rules name, and exactly their runs."""
    parser = argparse.ArgumentParser(prog="ybscale.report.charts", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    tp = sub.add_parser("throughput", help="throughput vs clients, and per second, per run")
    tp.add_argument("runs", nargs="+", type=Path, help="run folders (results/runs/<run>)")
    tp.add_argument("--ceilings", required=True, type=Path)
    tp.add_argument("--throughput", required=True, type=Path, help="throughput chart (.svg)")
    tp.add_argument("--per-second", required=True, type=Path, help="per-second chart (.svg)")
    an = sub.add_parser("analysis", help="pareto, half-normal, interaction and residual charts")
    an.add_argument("--design", required=True, type=Path, help="design YAML")
    an.add_argument("--responses", required=True, type=Path, help="responses (ceilings.csv)")
    an.add_argument("--response", default=None, help="response column (default: the only one)")
    an.add_argument("--effects", required=True, type=Path, help="effects.csv")
    an.add_argument("--residuals", required=True, type=Path, help="residuals.csv")
    for name in ("pareto", "half-normal", "interactions", "residual-charts"):
        an.add_argument(f"--{name}", required=True, type=Path, help="this chart's path")
    args = parser.parse_args(argv)
    if args.command == "throughput":
        paths = throughput_charts(
            args.runs, args.ceilings, throughput=args.throughput, per_second=args.per_second
        )
    else:
        where = AnalysisChartPaths(
            args.pareto, args.half_normal, args.interactions, args.residual_charts
        )
        paths = draw_analysis_charts(
            args.design, args.responses, args.response, args.effects, args.residuals, where
        )
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
