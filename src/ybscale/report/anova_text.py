"""The findings' paragraph on the ANOVA's error strata, read from anova.csv (no model fitted)."""

from __future__ import annotations

import pandas as pd

from ybscale.analysis.terms import RESIDUAL, WHOLE_ERROR
from ybscale.design.strata import SUB, WHOLE


def split_plot_text(table: pd.DataFrame, alpha: float = 0.05) -> list[str]:
    """The findings' **ANOVA by stratum** paragraph from anova.csv ([] with one stratum): each
    stratum's error and the columns its F test finds, or why the stratum is not F-tested."""
    if "stratum" not in table.columns or not (table["stratum"] == WHOLE).any():
        return []
    parts = []
    for stratum, error in ((WHOLE, WHOLE_ERROR), (SUB, RESIDUAL)):
        line = table[(table["term"] == error) & (table["stratum"] == stratum)].iloc[0]
        terms = table[(table["stratum"] == stratum) & (table["term"] != error)]
        what = "clusters within whole-plot combinations" if stratum == WHOLE else "within clusters"
        df = int(line["df"])
        if df < 1:
            parts.append(
                f"the {len(terms)} {stratum} column(s) are not F-tested: their error ({error}, "
                f"{what}) has no degrees of freedom; Lenth within the stratum judges them"
            )
            continue
        p = terms["p_adjusted"].where(terms["p_adjusted"].notna(), terms["p_value"])
        found = terms.loc[p.astype(float) < alpha, "term"].tolist()
        parts.append(
            f"the {stratum} columns against the {error} ({what}, {df} df, mean square "
            f"{float(line['mean_sq']):.4g}): {', '.join(found) or 'none'} below α = {alpha:g}"
        )
    return [
        "**ANOVA by stratum** (split plot, `anova.csv`; F tests as the expected mean squares "
        "ask): " + "; ".join(parts) + "."
    ]
