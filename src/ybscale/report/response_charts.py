"""The responses side by side (analysis.responses): a panel per response, each column's
estimate on that response's own scale (a ratio on the log scale, the response's unit on the
additive), in the order of the main response. With verdicts (effects.csv's ``verdict``), each
column's simultaneous interval it was judged on, coloured by its verdict (matters, undecided,
negligible), over a band at ± analysis.relevant: what the findings open on, drawn; two studies
of one system colour a column at the noise's margin alike. Without them, the 95 % interval,
active columns in red.

``python -m ybscale.report.response_charts --effects E --out results/charts/responses.svg``
(the .html beside it); in a study, the ``charts`` rule draws it with the others
(``ybscale.report.study_charts``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import altair as alt
import pandas as pd

from ybscale.analysis.terms import of_response, response_names, response_words
from ybscale.analysis.verdicts import MATTERS, NEGLIGIBLE, UNDECIDED, UNTESTED
from ybscale.report.charts import ACTIVE_COLOR, NOT_EFFECTS, save

VERDICT_COLOR = alt.Scale(
    domain=[MATTERS, UNDECIDED, NEGLIGIBLE, UNTESTED],
    range=["#d62728", "#ff7f0e", "#4c78a8", "#9d9d9d"],
)


def response_rows(effects: pd.DataFrame, name: str) -> pd.DataFrame:
    """One response's columns: its estimate and interval as the panel draws them (ratios on the
    log scale: 10^effect, where 1 is no change; else the effect itself, 0 no change)."""
    rows = of_response(effects, name)
    rows = rows[~rows["term"].astype(str).isin(NOT_EFFECTS | {"block"})].copy()
    rows["active"] = rows["active"].astype(str).str.lower().isin(["true", "1"])
    ratio = rows["model"].astype(str).eq("multiplicative")
    judged = "verdict" in rows and rows["verdict"].notna().any()
    for column in ("effect", "ci_low", "ci_high", *(("verdict_low", "verdict_high")
                                                     if judged else ())):  # fmt: skip
        values = rows[column].astype(float)
        rows[f"shown_{column}"] = values.where(~ratio, 10**values)
    if judged:
        rows["verdict"] = rows["verdict"].fillna(UNTESTED).astype(str)
    rows["label"] = rows["term"].astype(str)  # the alias string is in the tooltip
    rows["aliases"] = rows["alias"].fillna(rows["term"]) if "alias" in rows else rows["term"]
    rows["scale"] = ratio.map({True: "ratio (log scale)", False: "difference"})
    return rows


def _panel(rows: pd.DataFrame, name: str, order: list[str]) -> alt.LayerChart:
    what, unit, *_ = response_words(name)
    ratio = bool((rows["scale"] == "ratio (log scale)").all())
    axis = "× (high level / low level)" if ratio else f"effect ({unit})" if unit else "effect"
    scale = alt.Scale(type="log" if ratio else "linear", zero=False)
    x = alt.X("shown_effect:Q", title=axis, scale=scale)
    y = alt.Y("label:N", sort=order, title="column")
    base = alt.Chart(rows)
    judged = "shown_verdict_low" in rows
    low, high = ("shown_verdict_low", "shown_verdict_high") if judged else ("shown_ci_low",
                 "shown_ci_high")  # fmt: skip
    color = (
        alt.Color("verdict:N", scale=VERDICT_COLOR, title="verdict")
        if judged
        else alt.Color("active:N", scale=ACTIVE_COLOR, title="active")
    )
    interval = base.mark_rule(strokeWidth=2).encode(
        x=alt.X(f"{low}:Q", title=axis, scale=scale), x2=f"{high}:Q", y=y, color=color
    )
    tooltip = [
        "term:N",
        "aliases:N",
        alt.Tooltip("shown_effect:Q", title="estimate", format=".3g"),
        alt.Tooltip("shown_ci_low:Q", title="95 % low", format=".3g"),
        alt.Tooltip("shown_ci_high:Q", title="95 % high", format=".3g"),
        "scale:N",
    ]
    if judged:
        tooltip[2:2] = [
            "verdict:N",
            alt.Tooltip("shown_verdict_low:Q", title="simultaneous low", format=".3g"),
            alt.Tooltip("shown_verdict_high:Q", title="simultaneous high", format=".3g"),
        ]
    point = base.mark_point(filled=True, size=50).encode(x=x, y=y, color=color, tooltip=tooltip)
    none = alt.Chart(pd.DataFrame({"x": [1.0 if ratio else 0.0]}))
    rule = none.mark_rule(color="black", strokeDash=[4, 3]).encode(x="x:Q")
    layers = [rule, interval, point]
    subtitle = "estimate, 95 % interval; dashed: no change"
    if judged:
        given = str(rows["relevant_given"].iloc[0]) if "relevant_given" in rows else "relevant"
        relevant = float(rows["relevant"].iloc[0])  # on the analysed scale: 1 / x .. x as ratios
        edges = (10**-relevant, 10**relevant) if ratio else (-relevant, relevant)
        band = pd.DataFrame({"low": [edges[0]], "high": [edges[1]]})
        layers.insert(0, alt.Chart(band).mark_rect(color="#bbbbbb", opacity=0.45).encode(
            x=alt.X("low:Q", scale=scale), x2="high:Q"))  # fmt: skip
        subtitle = [
            "estimate, the simultaneous interval",
            "its verdict was judged on",
            f"shaded: within ±{given} (analysis.relevant)",
            "dashed: no change",
        ]
    return alt.layer(*layers).properties(
        width=220, height=alt.Step(18), title=alt.TitleParams(what, subtitle=subtitle)
    )


def responses_chart(effects: pd.DataFrame) -> alt.HConcatChart:
    """A panel per response, the columns in the order of the main response's |effect|."""
    names = response_names(effects) or [None]
    main = response_rows(effects, names[0])
    order = main.assign(size=main["effect"].abs()).sort_values("size", ascending=False)
    order = order["label"].astype(str).tolist()
    panels = [_panel(response_rows(effects, name), name or "response", order) for name in names]
    return alt.hconcat(*panels).properties(
        title=alt.TitleParams(
            "Every response's effects side by side",
            subtitle="a panel per response of analysis.responses, each on its own scale",
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ybscale.report.response_charts", description=__doc__)
    parser.add_argument("--effects", required=True, type=Path, help="effects.csv")
    parser.add_argument("--out", required=True, type=Path, help="the chart (.svg; .html beside)")
    args = parser.parse_args(argv)
    save(responses_chart(pd.read_csv(args.effects)), args.out.with_suffix(""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
