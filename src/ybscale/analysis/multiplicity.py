"""Multiplicity control over the family of columns a replicated design tests.

A replicated 2^(k-p) design tests every estimable column (one per alias group: aliases count
once) with a t test. With m columns each tested at α, about α·m are flagged by chance alone when
no factor matters. The adjusted p-values (statsmodels ``multipletests``) keep that in hand:

* ``holm`` (default): Holm's step-down; the chance of one or more false findings among the m
  columns (family-wise error rate) is at most α.
* ``bh``: Benjamini–Hochberg; on average at most a share α of the active columns are false
  (false discovery rate), more power than Holm when several effects are real.
* ``none``: each column at α on its own; about α·m false findings expected when nothing is real.

A column is active when its adjusted p-value is below α. Both rules are monotone in the raw p, so
the decision is a cut on |effect| (``cut_p``: the raw p at which the rule stops).
"""

from __future__ import annotations

import gc

import numpy as np

RULES = ("holm", "bh", "none")
DEFAULT = "holm"
_METHOD = {"holm": "holm", "bh": "fdr_bh"}
NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg", "none": "no adjustment"}


def check_rule(rule: str) -> str:
    """The rule, or ValueError naming the allowed ones."""
    if rule not in RULES:
        raise ValueError(f"multiplicity must be one of {', '.join(RULES)}, got {rule!r}")
    return rule


def adjust(p_values, rule: str = DEFAULT) -> np.ndarray:
    """Adjusted p-values over the family (NaN entries are not in the family and stay NaN)."""
    p = np.asarray(p_values, dtype=float)
    out = p.copy()
    finite = np.isfinite(p)
    if check_rule(rule) == "none" or not finite.any():
        return out
    from statsmodels.stats.multitest import multipletests  # imports scipy.stats: when adjusting

    gc.freeze()  # statsmodels' Holm runs gc.collect(): over the frozen heap it is ~free
    try:
        out[finite] = multipletests(p[finite], method=_METHOD[rule])[1]
    finally:
        gc.unfreeze()
    return out


def cut_p(p_adjusted, rule: str, alpha: float) -> float:
    """The raw p at which the rule separates active from not active columns (from `adjust`).

    Active columns have raw p <= the cut and the others more: Holm after k rejections tests the
    next at α/(m−k); Benjamini–Hochberg with k rejections has cut k·α/m (α/m when k = 0)."""
    p = np.asarray(p_adjusted, dtype=float)
    p = p[np.isfinite(p)]
    m = len(p)
    if check_rule(rule) == "none" or m == 0:
        return alpha
    k = int((p < alpha).sum())
    if rule == "holm":
        return alpha / max(m - k, 1)
    return max(k, 1) * alpha / m


def column_alpha(alpha: float, rule: str, columns: int) -> float:
    """The level one real effect must clear when the others are zero: α/m under Holm and
    Benjamini–Hochberg (their first step), α without adjustment. Power computed at it is exact
    for a lone effect and a lower bound when several are real (later steps are easier)."""
    return alpha if check_rule(rule) == "none" else alpha / max(columns, 1)


def allowance(rule: str, columns: int, alpha: float) -> str:
    """What the rule allows in false findings over `columns` tests, in words."""
    pct = f"{100 * alpha:g} %"
    if check_rule(rule) == "holm":
        return (
            f"the chance that even one of the {columns} columns is flagged active while its "
            f"effect is zero is at most {pct} (family-wise error rate)"
        )
    if rule == "bh":
        return (
            f"on average at most {pct} of the active columns are false findings (false "
            f"discovery rate over {columns} columns)"
        )
    return (
        f"each of the {columns} columns is tested at α = {alpha:g} on its own: about "
        f"{alpha * columns:.1f} columns are expected to be flagged active by chance alone when "
        "no factor has any effect"
    )


def keep_family(table, tested, alpha: float):
    """An effects table after some columns were judged by another test (error strata: Lenth
    or MixedLM per stratum, ybscale.design.strata): the family is the columns still judged by the
    replicate t test (`tested`, a boolean mask); their p-values are adjusted again over that
    family, the others' p columns emptied (their ``active`` is their stratum's)."""
    from scipy import stats

    has_p = table["p_value"].notna()
    left = has_p & ~tested
    if not left.any():
        return table
    out = table.copy()
    rule = str(out.loc[has_p, "multiplicity"].iloc[0])
    t_rows = has_p & table["method"].eq("t")
    out.loc[left, ["p_value", "p_adjusted", "me_adjusted"]] = np.nan
    out.loc[left, "multiplicity"] = "none"
    family = t_rows & tested
    if family.any():
        adjusted = adjust(out.loc[family, "p_value"], rule)
        cut = cut_p(adjusted, rule, alpha)
        df = float(table.attrs["df_error"])
        out.loc[family, "p_adjusted"] = adjusted
        out.loc[family, "me_adjusted"] = out.loc[family, "std_error"] * stats.t.isf(cut / 2, df)
        out.loc[family, "active"] = adjusted < alpha
    out.attrs["columns"] = int(family.sum())
    return out


# ---------------------------------------------------------------------------- words for a table


def _family(terms):
    """The rows of an effects table tested by the replicate t test (finite p_value)."""
    if "p_value" not in terms or "multiplicity" not in terms:
        return terms.iloc[0:0]
    return terms[terms["p_value"].notna() & terms["method"].eq("t")]


def family_rule(terms) -> tuple[str, int] | None:
    """(rule, columns) of the table's t-tested family, None when it has none."""
    family = _family(terms)
    return (str(family["multiplicity"].iloc[0]), len(family)) if len(family) else None


def rule_text(terms, alpha: float, error: str = "the replicate error") -> str | None:
    """How a replicated study's columns were judged, for the findings (None: no t family);
    `error` names what they were tested on (the centre runs' pure error)."""
    found = family_rule(terms)
    if found is None:
        return None
    rule, m = found
    family = _family(terms)
    error = (
        "its error stratum (MixedLM, the cluster a random effect)"
        if "stratum" in family and family["stratum"].eq("whole-plot").any()
        else error
    )
    if rule == "none":
        return (
            f"t test on {error} at α = {alpha:g}, each of the {m} columns on its own "
            "(no multiplicity adjustment): active when its 95 % interval excludes 0"
        )
    return (
        f"t test on {error}; p-values adjusted by {NAMES[rule]} over the {m} "
        f"columns the design estimates (aliases counted once): active when the adjusted p < "
        f"{alpha:g}; the intervals are each column's own"
    )


def family_text(terms, alpha: float) -> list[str]:
    """The findings' paragraph on multiplicity: what the rule allows, and the columns below α
    before the adjustment that it does not count as findings."""
    found = family_rule(terms)
    if found is None:
        return []
    rule, m = found
    words = allowance(rule, m, alpha)
    text = f"**Multiplicity.** {words[0].upper()}{words[1:]}."
    family = _family(terms)
    raw = family[(family["p_value"] < alpha) & ~family["active"].astype(bool)]
    if rule != "none" and len(raw):
        text += (
            f" {len(raw)} more column(s) had p < {alpha:g} before the adjustment "
            f"({', '.join(raw['term'].astype(str))}); with {m} columns about {alpha * m:.1f} "
            "such are expected by chance alone, so they are not findings."
        )
    if rule == "none":
        text += " Set analysis.multiplicity to holm or bh to control this."
    return [text]


def chart_note(rows) -> str | None:
    """``"active: Holm-adjusted p < α over 127 columns"`` for the effects charts."""
    found = family_rule(rows)
    if found is None:
        return None
    rule, m = found
    if rule == "none":
        return f"active: p < α, each of {m} columns alone (no multiplicity adjustment)"
    return f"active: {NAMES[rule]}-adjusted p < α over {m} columns"
