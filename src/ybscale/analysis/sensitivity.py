"""How much the conclusions depend on choices: the scale, and the margin an effect clears.

The effects table gets, next to the chosen scale's verdict, the verdict on each scale
(``active_additive``, ``active_multiplicative``): an effect active on one scale only is a
property of the scale, not of the system (an interaction that vanishes on the log scale is the
multiplicative structure seen additively). The findings say so in plain words, and split the
active effects into those beyond Lenth's simultaneous margin (SME) and those only beyond the
individual margin (ME), which a second study may well not confirm.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ybscale.analysis import scale as scales

SCALE_WORDS = {"additive": "additive", "multiplicative": "log"}
ACTIVE_ON = {m: f"active_{m}" for m in SCALE_WORDS}
ESTIMATE = ("effect", "ci_low", "ci_high")  # each scale's, as effect_<model> ... in the table


def _flag(values) -> pd.Series:
    return pd.Series(values).astype(str).str.lower().isin(["true", "1"])


def with_other_scale(
    table: pd.DataFrame,
    judged: Callable[[str], pd.DataFrame],
    choice: scales.ScaleChoice,
    y: pd.Series,
) -> pd.DataFrame:
    """`table` (the chosen scale's effects) with the scale columns and each scale's verdict;
    `judged(model)` gives the effects table on a scale."""
    out = scales.annotate(table, choice)
    for model, column in ACTIVE_ON.items():
        if model == choice.model:
            out[column] = out["active"].astype(bool)
            for name in ESTIMATE:
                out[f"{name}_{model}"] = out[name]
        elif model == "multiplicative" and not bool((y > 0).all()):
            out[column] = np.nan  # no log scale for non-positive responses
            for name in ESTIMATE:
                out[f"{name}_{model}"] = np.nan
        else:
            other = judged(model).set_index("term")
            out[column] = out["term"].map(other["active"].astype(bool)).fillna(False).astype(bool)
            for name in ESTIMATE:
                out[f"{name}_{model}"] = out["term"].map(other[name])
    return out


def scale_text(
    effects: pd.DataFrame,
    describe: Callable[[pd.Series], str],
    what: str = "the ceiling",
    unit: str = "tps",
) -> list[str]:
    """The findings' paragraph on the scale: which, why, and how to read the effects;
    `describe(row)` words one effect (the largest active one serves as the example); `what`
    and `unit` name the response."""
    choice = scales.read_choice(effects)
    if choice is None:
        return []
    word = SCALE_WORDS.get(choice.model, choice.model)
    how = "chosen from the data" if choice.choice == scales.AUTO else "set in analysis.model"
    why = f"{how}: {choice.reason}" if choice.choice == scales.AUTO else choice.reason
    text = f"**Scale.** The effects are on the **{word}** scale ({why})."
    if choice.model == "multiplicative":
        text += (
            " On the log scale an effect is a ratio: changing a factor multiplies or divides "
            f"{what} by a factor, whatever the other factors' levels"
        )
        active = effects[_flag(effects["active"]) & (effects["term"].astype(str).str.len() > 0)]
        text += f"; e.g. {describe(active.iloc[0]).rstrip('.')}." if len(active) else "."
    else:
        text += (
            f" On the additive scale an effect is a difference in {unit or _bare(what)}, the same "
            "whatever the other factors' levels."
        )
    if choice.choice == scales.AUTO and scales.uncertain(choice.low, choice.high, choice.ratio):
        text += (
            " **A tie**: λ's interval holds both 0 and 1, so the data do not settle the scale; "
            "the tie rule takes the log scale for a response that spans 3× or more, whatever "
            "the noise, so that a second study of the system reads its effects on the same "
            "scale (an effect active on one scale only is listed under Sensitivity with its "
            "estimate on both)."
        )
    checks = []
    if np.isfinite(choice.normality_p):
        checks.append(f"residual normality p = {choice.normality_p:.2f} (Shapiro–Wilk)")
    if np.isfinite(choice.homoscedasticity_p):
        checks.append(
            f"equal spread at low and high fitted values p = {choice.homoscedasticity_p:.2f} "
            "(Levene)"
        )
    if checks:
        text += " On this scale, the model λ was profiled on: " + "; ".join(checks) + "."
    return [text]


def _bare(what: str) -> str:
    return what[4:] if what.startswith("the ") else what


def on_scale(row: pd.Series, model: str) -> pd.Series | None:
    """The effects-table line `row` as the `model` scale estimated it (None when the table
    holds no estimate on that scale)."""
    names = [f"{name}_{model}" for name in ESTIMATE]
    if not set(names) <= set(row.index) or not all(pd.notna(row[n]) for n in names):
        return None
    out = row.copy()
    for name, column in zip(ESTIMATE, names, strict=True):
        out[name] = float(row[column])
    out["model"] = model
    return out


def one_scale_only(
    effects: pd.DataFrame, describe: Callable[[pd.Series], str] | None = None
) -> list[str]:
    """Sentences for the effects active on one scale only; with `describe` (which words one
    effects line) each says the estimate on both scales."""
    if not set(ACTIVE_ON.values()) <= set(effects.columns):
        return []
    chosen = str(effects["model"].iloc[0])
    out = []
    for _, row in effects.iterrows():
        if any(pd.isna(row[c]) for c in ACTIVE_ON.values()):
            continue  # one scale only (no log of a response that is not positive)
        on = {m for m, c in ACTIVE_ON.items() if _flag([row[c]]).iloc[0]}
        if len(on) != 1:
            continue
        (model,) = on
        term, word = str(row["term"]), SCALE_WORDS[model]
        kind = "interaction" if len(term) > 1 else "effect"
        if model != chosen:
            text = (
                f"{term} is active only on the {word} scale: an artefact of scale, not an "
                f"{kind} of the system (on the chosen scale it is within the noise)."
                if kind == "interaction"
                else f"{term} is active only on the {word} scale: whether it matters depends on "
                "the scale the ceiling is read on."
            )
        else:
            text = (
                f"{term} is active only on the {word} scale (the chosen one): the other scale "
                "hides it."
            )
        out.append(text + both_estimates(row, model, describe))
    return out


def both_estimates(row: pd.Series, active_on: str, describe) -> str:
    """`` On the log scale (active): ... On the additive scale (within the noise): ...``."""
    if describe is None:
        return ""
    parts = []
    for model in (active_on, *(m for m in SCALE_WORDS if m != active_on)):
        line = on_scale(row, model)
        if line is None:
            continue
        state = "active" if model == active_on else "within the noise"
        parts.append(f" On the {SCALE_WORDS[model]} scale ({state}): {describe(line)}")
    return "".join(parts) if len(parts) == 2 else ""


def margin_split(effects: pd.DataFrame) -> list[str]:
    """Active effects beyond the simultaneous margin, and those only beyond ME."""
    terms = effects[effects["term"].astype(str).isin(["error", "block"]) == False]  # noqa: E712
    active = terms[_flag(terms["active"]).to_numpy()]
    if active.empty or str(active["method"].iloc[0]) != "lenth":
        return []
    sure = active[_flag(active["active_sme"]).to_numpy()]["term"].astype(str).tolist()
    maybe = [t for t in active["term"].astype(str) if t not in sure]
    out = []
    if sure:
        out.append(
            f"Beyond the simultaneous margin of error (SME): {', '.join(sure)}: active even "
            "allowing for having looked at every column at once."
        )
    if maybe:
        out.append(
            f"Possibly active (beyond ME, not SME): {', '.join(maybe)}: a second study may not "
            "confirm it."
        )
    return out


def sensitivity_blocks(
    effects: pd.DataFrame, describe: Callable[[pd.Series], str] | None = None
) -> list:
    """The findings' **Sensitivity** paragraph and its list (nothing when there is nothing);
    `describe` words an effect on either scale (one_scale_only)."""
    items = margin_split(effects) + one_scale_only(effects, describe)
    if not items:
        return []
    return ["**Sensitivity.** How much the findings depend on the scale and the margin:",
            ("ul", items)]  # fmt: skip
