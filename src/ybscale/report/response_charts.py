"""The responses side by side (analysis.responses): a panel per response, each column's
estimate with its 95 % interval on that response's own scale (a ratio on the log scale, the
response's unit on the additive), active columns in red, in the order of the main response.

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
from ybscale.report.charts import ACTIVE_COLOR, NOT_EFFECTS, save


def response_rows(effects: pd.DataFrame, name: str) -> pd.DataFrame:
    """One response's columns: its estimate and interval as the panel draws them (ratios on the
    log scale: 10^effect, where 1 is no change; else the effect itself, 0 no change)."""
    rows = of_response(effects, name)
    rows = rows[~rows["term"].astype(str).isin(NOT_EFFECTS | {"block"})].copy()
    rows["active"] = rows["active"].astype(str).str.lower().isin(["true", "1"])
    ratio = rows["model"].astype(str).eq("multiplicative")
    for column in ("effect", "ci_low", "ci_high"):
        values = rows[column].astype(float)
        rows[f"shown_{column}"] = values.where(~ratio, 10**values)
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
    interval = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("shown_ci_low:Q", title=axis, scale=scale),
        x2="shown_ci_high:Q",
        y=y,
        color=alt.Color("active:N", scale=ACTIVE_COLOR, title="active"),
    )
    point = base.mark_point(filled=True, size=50).encode(
        x=x,
        y=y,
        color=alt.Color("active:N", scale=ACTIVE_COLOR, title="active"),
        tooltip=[
            "term:N",
            "aliases:N",
            alt.Tooltip("shown_effect:Q", title="estimate", format=".3g"),
            alt.Tooltip("shown_ci_low:Q", title="95 % low", format=".3g"),
            alt.Tooltip("shown_ci_high:Q", title="95 % high", format=".3g"),
            "scale:N",
        ],
    )
    none = alt.Chart(pd.DataFrame({"x": [1.0 if ratio else 0.0]}))
    rule = none.mark_rule(color="black", strokeDash=[4, 3]).encode(x="x:Q")
    return alt.layer(rule, interval, point).properties(
        width=220,
        height=alt.Step(18),
        title=alt.TitleParams(what, subtitle="estimate, 95 % interval; dashed: no change"),
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
