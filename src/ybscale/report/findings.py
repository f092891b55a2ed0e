"""What the study found, in words: results/findings.md and the first page of the report.

Written from the results, never from fixed text: the response and how it was measured
(each row's ``measurement.json``), the active effects in order with size, 95 % interval and share of
variation in terms of the factor names and levels (``effects.csv``), the aliases of each and what
the design cannot separate (the design), the noise and the outlier rows (``outliers.csv``), what
the backend cannot show, and the follow-up ``ybscale next`` and ``ybscale plan --detect`` propose.
Only effects flagged ``active`` are presented as findings.

``python -m ybscale.report.findings --design D --effects E --ceilings C --outliers O --out F.md
--rst F.rst RUN_DIR ...``: the exact paths the rule names, and exactly its rows' folders (the
report includes the .rst copy).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd

from ybscale.analysis import multiplicity as mult
from ybscale.analysis import power, recommend, sensitivity
from ybscale.analysis.centre import Centre, fit_centre
from ybscale.analysis.study_files import StudyFiles
from ybscale.analysis.terms import (
    BLOCK_TERM,
    ERROR_TERM,
    RESPONSE,
    of_response,
    response_names,
    response_words,
)
from ybscale.design import followup, strata
from ybscale.design.factorial import Design, load_design
from ybscale.design.record import clusters_of
from ybscale.measure.measuring import MeasuringProtocol
from ybscale.report import bottlenecks, strata_text
from ybscale.report.anova_text import split_plot_text
from ybscale.report.dataset_text import dataset_text
from ybscale.report.verdicts_text import (
    ended_text,
    negligible,
    relevant_text,
    verdict_blocks,
    verdict_cell,
)

DETECT = "10%"


# ---------------------------------------------------------------------------- numbers, words


def number(x: float, model: str = "additive", scale: float | None = None) -> str:
    """Display form: ``31.7k`` from 10 000, ``1,234`` from 100, else 3 significant digits.

    ``scale`` picks the form by another magnitude (an interval written like its effect)."""
    if model == "multiplicative":
        return f"{x:.3g}"
    a = abs(x if scale is None else scale)
    if a >= 10_000:
        return f"{x / 1000:,.1f}k"
    if a >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _names(design: Design) -> dict[str, str]:
    return {f.letter: f.name for f in design.factors}


def word_name(design: Design, word: str) -> str:
    """``"AF"`` -> ``"operation_size × node_size"``."""
    names = _names(design)
    return " × ".join(names[x] for x in word.lstrip("-"))


def _size(
    effect: float, low: float, high: float, model: str, what: str = "the ceiling", unit="tps"
) -> str:
    """``"lowers the ceiling by 9,711 tps [8,064, 11,358]"`` (interval of the magnitude);
    `what` and `unit` name another response."""
    if model == "multiplicative" and effect < 0:  # a ratio below 1: say by how much it divides
        return (
            f"divides {what} by {number(10**-effect, model)} "
            f"[{number(10**-high, model)}, {number(10**-low, model)}]"
        )
    if model == "multiplicative":
        return f"multiplies {what} by {_ratio(effect, low, high)}"
    verb = "raises" if effect > 0 else "lowers"
    lo, hi = sorted((low, high)) if effect > 0 else sorted((-high, -low))
    size = abs(effect)
    unit = f" {unit}" if unit else ""
    return (
        f"{verb} {what} by {number(size)}{unit} "
        f"[{number(lo, scale=size)}, {number(hi, scale=size)}]"
    )


def _ratio(effect: float, low: float, high: float) -> str:
    """A log10 effect as its ratio with the interval: ``1.85 [1.43, 2.38]``."""
    model = "multiplicative"
    return f"{number(10**effect, model)} [{number(10**low, model)}, {number(10**high, model)}]"


def effect_sentence(
    design: Design, row: pd.Series, share: bool = True, what="the ceiling", unit="tps"
) -> str:
    """One active effect in plain words, with factor names and levels (and its share of the
    variation unless `share` is False); `what` and `unit` name the response."""
    term, model = str(row["term"]), str(row["model"])
    bounds = (float(row["effect"]), float(row["ci_low"]), float(row["ci_high"]))
    size = _size(*bounds, model, what, unit)
    if share:
        size += f"; {float(row['variation_pct']):.1f} % of the variation"
    if len(term) == 1:
        f = design.factor(term)
        what = f"**{f.name}** {f.levels[1]} instead of {f.levels[0]} ({term})"
        return f"{what} {size}."
    fs = [design.factor(x) for x in term]
    names = " × ".join(f.name for f in fs)
    if len(fs) == 2:
        same = (
            f"both at their first level ({fs[0].levels[0]}, {fs[1].levels[0]}) or both at their "
            f"second ({fs[0].levels[1]}, {fs[1].levels[1]}) instead of mixed"
        )
    else:
        same = f"the product of the signs of {', '.join(f.name for f in fs)} +1 instead of -1"
    return f"the interaction **{names}** ({term}), {same}, {size}."


def alias_sentence(design: Design, row: pd.Series) -> str:
    """The term's alias string and the interpretations the design cannot separate."""
    term = str(row["term"])
    members = [m.lstrip("-") for m in str(row["alias"]).split(" = ")]
    low = [m for m in members if len(m) <= 2]
    high = len(members) - len(low)
    text = f"Aliases: {' = '.join(members)}."
    folds = {f.letter for f in design.factors if f.fold}
    others = [m for m in low if m != term]
    if not others:
        text += (
            f" No other main effect or two-factor interaction shares this column: read it as "
            f"{word_name(design, term)}"
            + (f" (assuming the {high} higher-order interactions are negligible)." if high else ".")
        )
        return text
    readings = [
        ("the fold (original vs follow-up rows)" if set(m) <= folds else word_name(design, m))
        + f" ({m})"
        for m in low
    ]
    text += (
        " The design cannot separate "
        + ", ".join(readings[:-1])
        + f" and {readings[-1]}: the estimate is their sum, any of them may be responsible."
    )
    return text


# ---------------------------------------------------------------------------- summary table

SUMMARY_HEADER = ("effect", "estimate [95 % interval]", "share of variation", "aliases")


def _term_words(design: Design, term: str) -> str:
    """A column in level words: ``node_size large instead of small (F)``."""
    if len(term) == 1:
        f = design.factor(term)
        return f"{f.name} {f.levels[1]} instead of {f.levels[0]} ({term})"
    if len(term) == 2:
        return (
            f"{word_name(design, term)} ({term}): both at the first or both at the second "
            "level instead of mixed"
        )
    return f"{word_name(design, term)} ({term}): product of the signs +1 instead of -1"


def _short_name(design: Design, term: str) -> str:
    """``F (node_size)``, ``AB (operation_size × workload)``: a column in the verdicts."""
    return f"{term} ({word_name(design, term)})"


def _aliases(row: pd.Series) -> str:
    return " = ".join(m.lstrip("-") for m in str(row["alias"]).split(" = "))


def summary_table(
    design: Design,
    terms: pd.DataFrame,
    responses: Responses | None = None,
    what: str = "the ceiling",
    unit: str = "tps",
) -> list:
    """The active effects as a short table, largest first, for the top of the findings page.

    One row per active column: the effect in level words, the estimate with its 95 % interval
    in the prose's words ("lowers by 7,088 tps [4,164, 10,011]", "divides by 12.4 [5.93, 25.9]"),
    its share of the variation and its alias string. Without an active column, one sentence
    saying so. With several `responses` (analysis.responses), one row per column active on any
    of them and a column per response: its estimate with its interval, or "—" where the column
    is not active on it."""
    if responses is not None and len(responses.names) > 1:
        return responses.summary(design)
    active = terms[terms["active"]]
    if active.empty:
        return [
            f"**No effect stands out from the noise**: none of the {len(terms)} columns can be "
            "told from zero (see *Active effects* below)."
        ]
    small = active[active.apply(negligible, axis=1)]
    note = small_text(design, [(str(r["term"]), [(r, what, unit)]) for _, r in small.iterrows()],
                      relevant_text(terms))  # fmt: skip
    active = active.drop(small.index)
    if active.empty:
        return [
            f"**No effect that matters stands out from the noise**: of the {len(terms)} "
            f"columns, only negligible ones can be told from zero. {note}"
        ]
    rows = []
    doubtful = unsettled(terms)
    for _, row in active.iterrows():
        bounds = (float(row[c]) for c in ("effect", "ci_low", "ci_high"))
        estimate = _size(*bounds, str(row["model"]), what, unit).replace(f" {what}", "", 1)
        if str(row["term"]) in doubtful:
            estimate += f" ({MAYBE_NEIGHBOUR})"
        share = f"{float(row['variation_pct']):.1f} %"
        rows.append((_term_words(design, str(row["term"])), estimate, share, _aliases(row)))
    lead = "The effects that stand out from the noise, largest first:"
    return [lead, ("table", [SUMMARY_HEADER, *rows]), *([note] if note else [])]


def small_text(design: Design, small: list[tuple[str, list]], size: str) -> str:
    """The columns told from zero that are negligible wherever they are (inside ±`size` on
    every response on which they stand out): said in one sentence after the summary table, not
    in it, so a column at the noise's margin reads the same in two studies of one system
    (here told from zero, there not: negligible in both). `small`: (term, [(row, what, unit)
    of each response it stands out on])."""
    if not small:
        return ""
    items = []
    for term, where in small:
        sizes = []
        for row, what, unit in where:
            bounds = (float(row[c]) for c in ("effect", "ci_low", "ci_high"))
            sizes.append(_size(*bounds, str(row["model"]), what, unit))
        items.append(f"{_short_name(design, term)} {' and '.join(sizes)}")
    return (
        f"Told from the noise but negligible (inside ±{size}, analysis.relevant, wherever "
        f"{'it stands' if len(items) == 1 else 'they stand'} out; see *Verdicts*): "
        + "; ".join(items)
        + "."
    )


# ---------------------------------------------------------------------------- several responses


@dataclass
class Responses:
    """Every response's effects (effects.csv with its ``response`` column) and their words."""

    effects: pd.DataFrame
    latency_load: str = ""  # the latency response's percentile and reference load, in words

    @property
    def names(self) -> list[str]:
        return response_names(self.effects)

    def words(self, name: str) -> tuple[str, str, bool, str, str]:
        what, unit, more, good, bad = response_words(name)
        if name == "latency_at_load_ms" and self.latency_load:
            what = f"latency ({self.latency_load})"
        return what, unit, more, good, bad

    def terms(self, name: str) -> pd.DataFrame:
        table = of_response(self.effects, name)  # the columns tested as effects
        table = table[~table["term"].astype(str).isin([ERROR_TERM, BLOCK_TERM])].copy()
        table["active"] = table["active"].astype(str).str.lower().isin(["true", "1"])
        return table.set_index(table["term"].astype(str))

    def summary(self, design: Design) -> list:
        tables = {name: self.terms(name) for name in self.names}
        main = tables[self.names[0]]
        active = [t for t in main.index if any(tables[n].loc[t, "active"] for n in tables)]

        def matters(t: str) -> bool:  # active on a response, and not negligible there
            return any(tables[n].loc[t, "active"] and not negligible(tables[n].loc[t])
                       for n in tables)  # fmt: skip

        mattering = [t for t in active if matters(t)]
        small = [
            (t, [(tables[n].loc[t], *self.words(n)[:2]) for n in tables
                 if tables[n].loc[t, "active"]])
            for t in active if t not in mattering
        ]  # fmt: skip
        note = small_text(design, small, relevant_text(main))
        if active and not mattering:
            return [
                f"**No effect that matters stands out from the noise** on any of the "
                f"{len(tables)} responses: of the {len(main)} columns, only negligible ones can "
                f"be told from zero. {note}"
            ]
        active = mattering
        if not active:
            return [
                f"**No effect stands out from the noise** on any of the {len(tables)} responses "
                f"({', '.join(self.words(n)[0] for n in tables)}): none of the {len(main)} "
                "columns can be told from zero (see *Active effects* below)."
            ]
        header = (
            "effect",
            *(f"{self.words(n)[0]} [95 % interval]" for n in tables),
            "aliases",
        )
        rows = []
        doubtful = {name: unsettled(table.reset_index(drop=True)) for name, table in tables.items()}
        for term in active:
            cells = []
            for name, table in tables.items():
                row = table.loc[term]
                what, unit = self.words(name)[:2]
                bounds = (float(row[c]) for c in ("effect", "ci_low", "ci_high"))
                text = _size(*bounds, str(row["model"]), what, unit).replace(f" {what}", "", 1)
                text += f" ({MAYBE_NEIGHBOUR})" if term in doubtful[name] else ""
                text += " (negligible)" if negligible(row) else ""
                cells.append(text if row["active"] else verdict_cell(row, unit))
            rows.append((_term_words(design, term), *cells, _aliases(main.loc[term])))
        lead = (
            "The effects that stand out from the noise on any response, largest first on "
            f"{self.words(self.names[0])[0]} (where a column is not active on a response, its "
            "verdict there, negligible or undecided, with the simultaneous interval it was "
            "judged on, as in *Verdicts*):"
        )
        return [lead, ("table", [header, *rows]), *([note] if note else [])]

    def describe(self, ceilings: pd.DataFrame) -> list[str]:
        """Which responses were analysed and how each was obtained: the prices used (every
        row's is in ceilings.csv, ``price_basis``) and the latency's reference load."""
        if len(self.names) < 2:
            return []
        parts = []
        for i, name in enumerate(self.names):
            what = self.words(name)[0]
            text = f"{what}{' (the main one)' if i == 0 else ''}"
            if name == "throughput_per_dollar" and "price_per_hour" in ceilings:
                price = ceilings["price_per_hour"].astype(float)
                basis = str(ceilings["price_basis"].iloc[0])
                text += (
                    ": the ceiling divided by the price per hour of the row's cluster, from "
                    f"{number(float(price.min()))} to {number(float(price.max()))} over the "
                    f"rows (ceilings.csv, price_basis; e.g. {ceilings['run'].iloc[0]}: {basis})"
                )
            elif name == "latency_at_load_ms" and self.latency_load:
                text += (
                    f": {self.latency_load}, in ms (lower is better; a share of the ceiling is "
                    "the smallest client count whose mean throughput reaches it; each row's "
                    "count in ceilings.csv, latency_at_load_clients)"
                )
            parts.append(text)
        return [
            f"**Responses.** {len(parts)} responses of the same rows, each analysed on its own "
            "(its own scale, multiplicity family and error strata): " + "; ".join(parts) + "."
        ]

    def opposite(self, design: Design) -> list[str]:
        """One sentence per column that makes one response better and not another, every
        estimate with its interval and what it comes to ("node_size large instead of small
        multiplies the ceiling by 1.85 [1.43, 2.38] and throughput per dollar by 0.93 [0.72,
        1.20]: faster, not cheaper"). A response's direction counts where the column is active
        on it and not negligible there (its verdict); an estimate within the noise or negligible
        is *not* better, whichever its sign: so two studies of one system, one estimate a
        little above 1 and the other a little below, say the same."""
        tables = {name: self.terms(name) for name in self.names}
        out = []
        for term in tables[self.names[0]].index:
            rows = {n: t.loc[term] for n, t in tables.items() if term in t.index}
            if not any(r["active"] for r in rows.values()):
                continue
            sign = {n: (float(r["effect"]) > 0) == self.words(n)[2] for n, r in rows.items()}
            counts = {n: bool(r["active"]) and not negligible(r) for n, r in rows.items()}
            better = {n: sign[n] and counts[n] for n in rows}
            if all(better.values()) or not any(better.values()):
                continue
            parts, verdicts = [], []
            models = {str(r["model"]) for r in rows.values()}
            for name, row in rows.items():
                what, unit, _, good, bad = self.words(name)
                bounds = (float(row[c]) for c in ("effect", "ci_low", "ci_high"))
                if str(row["model"]) == "multiplicative":
                    parts.append(f"{what} by {_ratio(*bounds)}")
                    if len(models) > 1:
                        parts[-1] = "multiplies " + parts[-1]
                else:
                    parts.append(_size(*bounds, "additive", what, unit))
                if counts[name]:
                    verdicts.append(good if better[name] else bad)
                else:
                    verdicts.append(f"not {good}")
            verb = "multiplies " if models == {"multiplicative"} else ""
            words = _term_words(design, term)
            out.append(f"{words} {verb}{' and '.join(parts)}: {', '.join(verdicts)}.")
        if not out:
            return []
        return [
            "**Trade-offs.** Columns that make one response better and not another (each "
            "estimate with its 95 % interval; one within the noise, or negligible, is called "
            "*not* better):",
            ("ul", out),
        ]


def _prediction(best: recommend.Best, responses: Responses) -> str:
    """``node_size large, nodes 5: predicted 20.1k tps [18.9k, 21.4k], observed 20.3k (run03)``"""
    what, unit = responses.words(best.response)[:2]
    unit = f" {unit}" if unit else ""
    levels = ", ".join(f"{k} {v}" for k, v in best.levels.items())
    size = best.predicted
    rows = ", ".join(best.rows)
    return (
        f"{what}: {levels}, predicted {number(best.predicted)}{unit} "
        f"[{number(best.low, scale=size)}, {number(best.high, scale=size)}] from its active "
        f"columns ({', '.join(best.terms) or 'none: the mean'}), observed "
        f"{number(best.observed, scale=size)} (mean of {rows})"
    )


def recommendation_section(study: Study) -> list:
    """The best combination inside the design for each response, and on what it rests."""
    if study.responses is None:
        return []
    found = recommend.best_by_response(study.design, study.ceilings, study.responses.effects)
    if not found:
        return []
    items = [_prediction(best, study.responses) for best in found]
    within = recommend.best_buy_within(
        study.design, study.ceilings, study.responses.effects, study.latency_slo_ms
    )
    if within is not None:
        money, latency = within
        items.append(
            f"most throughput per dollar with {study.responses.words(latency.response)[0]} "
            f"predicted within {study.latency_slo_ms:g} ms (analysis.latency_slo_ms): "
            f"{_prediction(money, study.responses)}; its latency predicted "
            f"{number(latency.predicted)} ms [{number(latency.low, scale=latency.predicted)}, "
            f"{number(latency.high, scale=latency.predicted)}]"
        )
    factors = ", ".join(
        study.design.factor(x).name for x in recommend.active_factors(study.responses.effects)
    )
    return [
        "**Best in the design, per response** (a *prediction inside the design region*: only "
        f"the factors active and not negligible on some response are set ({factors}), only "
        "level combinations the design measured are candidates, each predicted from that "
        "response's active effects that are not negligible, with a 95 % interval, next to what "
        "its rows measured):",
        ("ul", items),
    ]


# ---------------------------------------------------------------------------- the study


@dataclass
class Study:
    """Everything the findings read from the study's files."""

    design: Design
    effects: pd.DataFrame
    outliers: pd.DataFrame
    ceilings: pd.DataFrame
    measurements: dict[str, dict]
    curves: dict[str, pd.DataFrame]
    alpha: float
    ceiling: str
    anova: pd.DataFrame = field(default_factory=pd.DataFrame)
    # every response's effects (analysis.responses); `effects` is the main one's
    responses: Responses | None = None
    latency_slo_ms: float | None = None  # the latency target of the best buy
    # the centre runs' lines of ceilings.csv (design.yaml `center_points`), apart from
    # `ceilings`, which holds the factorial runs only
    centre: pd.DataFrame = field(default_factory=pd.DataFrame)
    # run -> its repetitions' `reset` and `reset_s` (repetitions.csv), where it recorded them
    resets: dict[str, pd.DataFrame] = field(default_factory=dict)
    # the main response in words (`ybscale.analysis.terms.response_words`): a study's ceiling
    what: str = "the ceiling"
    unit: str = "tps"
    # a table `ybscale analyze` read (its path), which nothing here measured; None: a study
    table: str | None = None

    @property
    def measured(self) -> bool:
        """Whether the rows were measured by the study (else a table analysed as given)."""
        return self.table is None

    @property
    def unit_words(self) -> str:
        """`` tps`` (with its space), '' for a response without a unit."""
        return f" {self.unit}" if self.unit else ""


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.is_file() else pd.DataFrame()


def load_study(
    design: Design,
    files: StudyFiles,
    alpha: float,
    ceiling: str,
    latency_slo_ms: float | None = None,
) -> Study:
    measurements, curves, resets = {}, {}, {}
    for run in design.run_ids:
        folder = files.runs.get(run)
        if folder is None:
            continue
        meta, curve = folder / "measurement.json", folder / "throughput.csv"
        if meta.is_file():
            measurements[run] = json.loads(meta.read_text(encoding="utf-8"))
        if curve.is_file():
            curves[run] = pd.read_csv(curve)
        reps = folder / "repetitions.csv"
        if reps.is_file():
            resets[run] = pd.read_csv(reps, usecols=lambda c: c in ("reset", "reset_s"))
    effects = pd.read_csv(files.effects)
    ceilings = _read_csv(files.ceilings)
    centre = pd.DataFrame()
    if design.blocks > 1 and "run" in ceilings and "block" not in ceilings:
        ceilings = ceilings.assign(block=ceilings["run"].astype(str).map(design.block_labels()))
    if design.center_points and "run" in ceilings:
        at_centre = ceilings["run"].astype(str).isin(design.center_run_ids)
        centre, ceilings = ceilings[at_centre], ceilings[~at_centre].reset_index(drop=True)
    load = ceilings["latency_at_load"].iloc[0] if "latency_at_load" in ceilings else ""
    return Study(
        design=design,
        effects=of_response(effects),
        outliers=of_response(_read_csv(files.outliers)),
        ceilings=ceilings,
        measurements=measurements,
        curves=curves,
        alpha=alpha,
        ceiling=ceiling,
        anova=of_response(_read_csv(files.anova)) if files.anova else pd.DataFrame(),
        responses=Responses(effects, str(load)) if response_names(effects) else None,
        latency_slo_ms=latency_slo_ms,
        centre=centre,
        resets=resets,
    )


def _terms(study: Study) -> pd.DataFrame:
    rows = study.effects[~study.effects["term"].astype(str).isin(["error", BLOCK_TERM])].copy()
    rows["active"] = rows["active"].astype(str).str.lower().isin(["true", "1"])
    return rows


def unsettled(terms: pd.DataFrame) -> list[str]:
    """The active columns a neighbour may have made (ybscale.analysis.disturbance): active,
    but not beyond what it may have moved them (`established` false)."""
    if "established" not in terms.columns:
        return []
    firm = terms["established"].astype(str).str.lower().isin(["true", "1"])
    active = terms["active"].astype(str).str.lower().isin(["true", "1"])
    return [str(t) for t in terms.loc[active & ~firm, "term"]]


MAYBE_NEIGHBOUR = "maybe the neighbour's: see **Interference**"


# ---------------------------------------------------------------------------- sections


def _protocol(m: dict) -> str:
    """How a row's client counts were measured, from measurement.json's settings."""
    return MeasuringProtocol.of(m).describe()


def response_section(study: Study) -> list[str]:
    if not study.measured:
        return table_response_section(study)
    d = study.design
    k, p = len(d.factors), len(d.generators)
    meta = next(iter(study.measurements.values()), {})
    m = meta.get("measurement", {})
    backend = meta.get("applied", {}).get("backend", "?")
    res = followup.resolution_text(d)
    how = {
        "empirical": "the **empirical** ceiling: the largest mean throughput over the client "
        "counts",
        "usl": "the **USL** ceiling X(N*) of the Universal Scalability Law fit",
        "latency_bound": "the **latency-bound** throughput: the largest mean throughput of a "
        "client count whose p95 latency is within the target (analysis.latency_slo_ms)",
    }[study.ceiling]
    # measurement.json: each resolved row's dataset size (a factor may set it)
    sizes = sorted(
        {
            r
            for x in study.measurements.values()
            if isinstance(r := x.get("row", {}).get("dataset_rows"), int)
        }
    )
    text = (
        f"**Response.** The throughput ceiling of each row, {how} "
        f"{m.get('clients', '?')} ({_protocol(m)}), with pgbench on the **{backend}** backend "
        f"over {' or '.join(f'{r:,}' for r in sizes)} rows. "
        if sizes
        else f"**Response.** The throughput ceiling of each row ({how}), backend {backend}. "
    )
    y = study.ceilings["response"] if "response" in study.ceilings else pd.Series(dtype=float)
    runs = f"{d.n_runs} runs" + (f" and {d.n_center} centre runs" if d.center_points else "")
    text += (
        f"Design: 2^({k}-{p}), {res}, {runs}; mean ceiling {number(float(y.mean()))} tps "
        f"(from {number(float(y.min()))} to {number(float(y.max()))})."
        if len(y)
        else f"Design: 2^({k}-{p}), {res}, {runs}."
    )
    timing = measuring_text(pd.concat([study.ceilings, study.centre]), m)  # every row measured
    return [text, timing] if timing else [text]


def table_response_section(study: Study) -> list[str]:
    """The **Response** paragraph of a table `ybscale analyze` read: what it holds, the design,
    the centre runs and blocks, the response's range; nothing of how it was measured."""
    d = study.design
    k, p = len(d.factors), len(d.generators)
    what = study.what
    y = study.ceilings["response"].astype(float)
    runs = f"{len(y)} factorial runs"
    if not study.centre.empty:
        runs += f" and {len(study.centre)} centre runs"
    blocks = study.ceilings["block"].astype(str).nunique() if "block" in study.ceilings else 1
    if blocks > 1:
        runs += f" in {blocks} blocks"
    return [
        f"**Response.** {what[0].upper()}{what[1:]}, as the table {study.table} gives it (measured "
        f"elsewhere: nothing here says how). Design: 2^({k}-{p}), "
        f"{followup.resolution_text(d)}, {runs}; mean {number(float(y.mean()))}"
        f"{study.unit_words} over the factorial runs (from {number(float(y.min()))} to "
        f"{number(float(y.max()))})."
    ]


def measuring_text(ceilings: pd.DataFrame, m: dict) -> str:
    """How long the rows measured (pgbench's seconds, `ceiling.measuring_time`), and what the
    full protocol (the adaptive sweep on the same settings) plans at most."""
    if "measured_seconds" not in ceilings or ceilings["measured_seconds"].isna().all():
        return ""  # older ceilings.csv
    seconds = ceilings["measured_seconds"].astype(float)
    text = (
        f"**Measuring time.** {seconds.sum():,.0f} s of pgbench over the {len(seconds)} rows "
        f"(per row {seconds.min():,.0f} to {seconds.max():,.0f} s"
    )
    probes = ceilings["probes"].fillna(0).astype(int) if "probes" in ceilings else None
    if probes is not None and probes.sum():
        full = ceilings["full_repetitions"].fillna(0).astype(int)
        text += f"; {probes.sum()} probes and {full.sum()} full repetitions"
    text += ")."
    if m.get("sweep") == "economy" and m.get("clients"):
        full_protocol = MeasuringProtocol.of({**m, "sweep": "adaptive"})
        f = full_protocol  # pgbench's seconds only, as measured_seconds counts them
        bound = f.counts_at_most() * f.most_repetitions * f.seconds
        text += (
            " The economy sweep gave no row more than one full repetition: rows differ only "
            "in how many counts were probed before the peak was passed. The full protocol "
            f"(measurement.sweep: adaptive, {full_protocol.most_repetitions} repetitions per "
            f"count near the peak) plans at most {bound:,.0f} s per row, "
            f"{bound * len(seconds):,.0f} s for these rows (`bench/economy` measures both)."
        )
    return text


def centre_of(study: Study) -> Centre | None:
    """The study's centre runs as `ybscale.analysis.centre` takes them (their letters: 0 at
    the middle, the level of a factor without one; their blocks), None without."""
    c = study.centre
    if c.empty or "response" not in c:
        return None
    letters = [x for x in study.design.letters if x in c.columns]
    signs = c[letters].astype(int) if letters else pd.DataFrame(index=c.index)
    blocks = c["block"].astype(str) if "block" in c and "block" in study.ceilings else None
    return Centre(c["response"].astype(float), signs, blocks)


def _curvature_test(study: Study) -> tuple[float, float]:
    """The ANOVA's curvature line: F and p on the analysed scale (NaN without)."""
    anova = study.anova
    curve = anova[anova["term"].astype(str) == "curvature"] if "term" in anova else anova
    f_val = float(curve["F"].iloc[0]) if len(curve) and "F" in curve else math.nan
    p_val = float(curve["p_value"].iloc[0]) if len(curve) and "p_value" in curve else math.nan
    return f_val, p_val


def curvature_section(study: Study) -> list[str]:
    """Whether the response bends between the levels (design.yaml `center_points`,
    Montgomery §6.8): the centre runs' mean against the factorial runs' with its 95 % interval
    (the centre runs' own spread, n_C − 1 df) and the ANOVA's curvature test. Centre runs in
    blocks or beside a factor without a middle: `crossed_curvature`."""
    if study.centre.empty or "response" not in study.centre or "response" not in study.ceilings:
        return []
    centre = centre_of(study)
    if centre is not None and centre.needs_fit():
        return crossed_curvature(study, centre)
    from scipy import stats

    what, unit = study.what, study.unit_words
    yc = study.centre["response"].astype(float)
    yf = study.ceilings["response"].astype(float)
    n_c, n_f = len(yc), len(yf)
    diff = float(yc.mean() - yf.mean())
    middles = _middles(study)
    text = (
        f"**Curvature.** {n_c} centre run(s) set every factor to the middle of its levels "
        f"({middles}): their mean {_bare(what)} is {number(float(yc.mean()))}{unit} against "
        f"{number(float(yf.mean()))}{unit} over the {n_f} factorial runs, a difference of "
        f"{number(diff)}{unit}"
    )
    if n_c >= 2 and float(yc.std(ddof=1)) > 0:
        half = float(stats.t.ppf(0.975, n_c - 1)) * float(yc.std(ddof=1))
        half *= math.sqrt(1 / n_f + 1 / n_c)
        text += f" (95 % interval {number(diff - half)} to {number(diff + half)}{unit})"
    f_val, p_val = _curvature_test(study)
    if math.isfinite(p_val):
        test = f"; curvature F = {f_val:.2f}, p = {p_val:.3g} (on the analysed scale)"
        if p_val < study.alpha:
            text += (
                f"{test}. **The response bends between the levels**: at the centre it is not "
                "the average of the corners, so a straight line between the two levels of a "
                "factor misleads (the centre runs cannot tell which factor bends: measure at "
                "the middle levels one factor at a time to find it)."
            )
        else:
            text += (
                f"{test}. No evidence that the response bends between the levels: at the "
                "centre it is what the corners predict, within the centre runs' noise (which "
                "is not proof that it is straight)."
            )
    else:
        text += (
            ". Too few centre runs (or no spread between them) to test the curvature: "
            "two or more, at different measurements, give the test."
        )
    return [text]


def _middles(study: Study, held=()) -> str:
    """``nodes 4, operation_size 51``: each factor's middle as the study measured it (the
    design's `center_levels`), or, for a table, the arithmetic middle of its levels."""
    out = []
    for f in study.design.factors:
        if f.letter in held:
            continue
        if study.measured and f.letter in study.design.center_levels:
            out.append(f"{f.name} {study.design.center_levels[f.letter]}")
        else:
            low, high = (float(v) for v in f.levels)
            out.append(f"{f.name} {number((low + high) / 2)}")
    return ", ".join(out)


def _bare(what: str) -> str:
    """``the ceiling`` -> ``ceiling``: after a possessive."""
    return what[4:] if what.startswith("the ") else what


def crossed_curvature(study: Study, centre: Centre) -> list[str]:
    """The curvature of centre runs in blocks (each block's centre runs against its own
    corners) or beside a factor without a middle (the centre runs at each of its levels
    against the corners at that level): the estimate with its 95 % interval on the pure error,
    the ANOVA's test, and, at each level of such a factor, whether the response bends there."""
    from scipy import stats

    d = study.design
    what, unit = study.what, study.unit_words
    y = study.ceilings.set_index("run")["response"].astype(float)
    blocks = None
    if centre.blocks is not None:
        blocks = study.ceilings.set_index("run")["block"].astype(str)
    fit = fit_centre(d, y, centre, blocks, _confounded(d, y.index, blocks))
    held = set(centre.held)
    middles = _middles(study, held)
    where = []
    if held:
        names = ", ".join(d.factor(x).name for x in centre.held)
        where.append(f"at each level of {names}, which has no middle")
    if centre.blocks is not None:
        where.append("in every block")
    text = (
        f"**Curvature.** {len(centre)} centre runs set every factor with a middle to it "
        f"({middles}), {' and '.join(where)}. Against the corners "
        + ("of their own block" if centre.blocks is not None else "at the same level")
        + f", the centre runs' {_bare(what)} differs by {number(fit.curvature)}{unit}"
    )
    if fit.df_pe > 0:
        half = float(stats.t.ppf(0.975, fit.df_pe)) * fit.se_curvature
        text += (
            f" (95 % interval {number(fit.curvature - half)} to "
            f"{number(fit.curvature + half)}{unit}, on the pure error's {fit.df_pe} df)"
        )
    f_val, p_val = _curvature_test(study)
    between = "between the numeric levels" if held else "between the levels"
    if math.isfinite(p_val):
        text += f"; curvature F = {f_val:.2f}, p = {p_val:.3g} (on the analysed scale). "
        text += (
            f"**The response bends {between}**: at the centre it is not the average of the "
            "corners, so a straight line between the two levels of a factor misleads."
            if p_val < study.alpha
            else f"No evidence that the response bends {between} (which is not proof that it "
            "is straight)."
        )
    else:
        text += ". No pure error to test the curvature against."
    lines = [text]
    if fit.levels:
        items = []
        for level in fit.levels:
            at = ", ".join(f"{k} {v}" for k, v in level["levels"].items())
            bends = level["p"] < study.alpha
            items.append(
                f"at {at}: the {level['n_center']} centre runs' mean {number(level['center_mean'])}"
                f"{unit} against {number(level['factorial_mean'])}{unit} over its "
                f"{level['n_factorial']} corners, a difference of {number(level['difference'])}"
                f"{unit} (95 % interval {number(level['low'])} to {number(level['high'])}, "
                f"p = {level['p']:.3g}): "
                + (f"**it bends {between}**" if bends else f"no evidence it bends {between}")
            )
        lines += ["At each level of the factor without a middle (on the response as measured; "
                  "the pure error of every centre run):", ("ul", items)]  # fmt: skip
    return lines


def _confounded(design, index, blocks) -> list[str]:
    from ybscale.analysis.effects import block_columns

    return block_columns(design, index, blocks) if blocks is not None else []


def effects_section(study: Study) -> list[str]:
    terms = _terms(study)
    active = terms[terms["active"]]
    method = str(terms["method"].iloc[0]) if len(terms) else "?"
    model = str(terms["model"].iloc[0]) if len(terms) else "additive"
    unit = "" if model == "multiplicative" else study.unit_words
    if method == "lenth" and strata.stratified(terms):
        rule = (
            f"Lenth's method at α = {study.alpha:g} within each error stratum (see **Error "
            "strata**): active when |effect| exceeds its stratum's margin of error ME; the "
            "interval is effect ± ME"
        )
    elif method == "lenth":
        rule = (
            f"Lenth's method at α = {study.alpha:g}: active when |effect| exceeds the margin of "
            f"error ME = {number(float(terms['me'].iloc[0]), model)}{unit}; the interval is "
            "effect ± ME"
        )
    else:
        error = "the replicate error"
        if not study.centre.empty:
            error = "the pure error (the centre runs' spread" + (
                ", and the replicates')" if study.design.replications > 1 else ")"
            )
        rule = mult.rule_text(terms, study.alpha, error) or (
            f"t test on the replicate error at α = {study.alpha:g}: active when the 95 % "
            "interval excludes 0"
        )
    lines = [f"**Active effects**, largest first ({rule}; 95 % intervals in brackets)."]
    quiet = ", ".join(terms.loc[~terms["active"], "term"].astype(str))
    if active.empty:
        lines.append(
            "None: no effect stands out from the noise (standard error of an effect "
            f"{_se_words(terms, model, unit)}). All {len(terms)} columns ({quiet}) are within the "
            "noise: the study cannot tell any factor's effect from zero."
        )
        return lines + mult.family_text(terms, study.alpha)
    doubtful = unsettled(terms)
    items = [
        effect_sentence(study.design, row, True, study.what, study.unit)
        + (
            f" ({MAYBE_NEIGHBOUR[0].upper()}{MAYBE_NEIGHBOUR[1:]}.)"
            if row["term"] in doubtful
            else ""
        )
        + (
            f" Negligible against ±{relevant_text(terms)} (analysis.relevant): told from zero, "
            "smaller than the smallest effect that matters."
            if negligible(row)
            else ""
        )
        + " "
        + alias_sentence(study.design, row)
        for _, row in active.iterrows()
    ]
    lines.append(("ol", items))
    if quiet:
        lines.append(
            f"The other {len(terms) - len(active)} columns ({quiet}) are within the noise: this "
            "study cannot tell their effects from zero (which is not evidence that they are zero)."
        )
    return lines + mult.family_text(terms, study.alpha)


def _se_words(terms: pd.DataFrame, model: str, unit: str) -> str:
    """The standard error of an effect: one number, or its range where the columns differ (a
    column the centre runs set is estimated from more runs)."""
    se = terms["std_error"].astype(float)
    if se.max() - se.min() <= 1e-9 * max(abs(se.max()), 1.0):
        return f"{number(float(se.iloc[0]), model)}{unit}"
    return f"{number(float(se.min()), model)} to {number(float(se.max()), model)}{unit}"


def block_words(anova: pd.DataFrame, alpha: float) -> str:
    """What the ANOVA's block line says of the blocks (F and p), '' without one."""
    if anova.empty or "term" not in anova:
        return ""
    line = anova[anova["term"].astype(str) == BLOCK_TERM]
    if line.empty or pd.isna(line["p_value"].iloc[0]):
        return ""
    f, p = float(line["F"].iloc[0]), float(line["p_value"].iloc[0])
    verdict = (
        "the blocks differed beyond the noise: what changed between them (the machine, the "
        "day) was kept out of the effects by the blocking"
        if p < alpha
        else "no difference between the blocks beyond the noise"
    )
    return f" Block line of the ANOVA: F = {f:.3g}, p = {p:.3g}: {verdict}."


def noise_section(study: Study) -> list[str]:
    terms = _terms(study)
    model = str(terms["model"].iloc[0]) if len(terms) else "additive"
    unit = "" if model == "multiplicative" else study.unit_words
    se = float(terms["std_error"].iloc[0]) if len(terms) else math.nan
    centre = centre_of(study)
    if len(terms) and str(terms["method"].iloc[0]) == "lenth":
        noise = (
            f"**Noise.** Unreplicated design: the noise is estimated from the small effects "
            f"(Lenth's pseudo standard error PSE = {number(se, model)}{unit}, the standard error "
            f"of one effect; simultaneous margin SME = {number(float(terms['sme'].iloc[0]), model)}"
            f"{unit})."
        )
        block = study.effects[study.effects["term"].astype(str) == BLOCK_TERM]
        if len(block):  # a design measured in blocks (design.yaml `blocks:`)
            noise += (
                f" The rows were measured in blocks confounded with {block['alias'].iloc[0]}: "
                "those columns estimate the differences between the blocks, not effects, and "
                "are not tested as effects (the `block` line)."
            )
            noise += block_words(study.anova, study.alpha)
    elif centre is not None and centre.needs_fit():
        noise = f"**Noise.** {crossed_noise(study, centre)}: " + _se_words(terms, model, unit)
        noise += "; every column, " + ("the blocks, " if centre.blocks is not None else "")
        noise += "the curvature and the lack of fit are tested against it (nothing pooled)."
        block = study.effects[study.effects["term"].astype(str) == BLOCK_TERM]
        if len(block) and pd.notna(block["alias"].iloc[0]) and str(block["alias"].iloc[0]):
            noise += (
                f" The blocks are confounded with {block['alias'].iloc[0]}: that column "
                "estimates the difference between the blocks, not an effect (the `block` line)."
            )
        noise += block_words(study.anova, study.alpha)
    elif not study.centre.empty and study.design.replications == 1:
        noise = (
            f"**Noise.** Standard error of an effect from the pure error of the "
            f"{len(study.centre)} centre runs (their spread about their mean): "
            f"{number(se, model)}{unit}; every column is tested against it."
        )
    else:
        blocked = BLOCK_TERM in set(study.effects["term"].astype(str))
        noise = (
            f"**Noise.** Standard error of an effect from the replicate (pure) error: "
            f"{number(se, model)}{unit}. "
            + (
                "The replicates were blocks (the run order kept each replicate's rows together), "
                "so the variation between them is taken out of that error (the `block` line)."
                if blocked
                else "The replicates are pure replication (not blocked: completely randomized)."
            )
        )
    spreads = [
        c.loc[c["repetitions"] > 1, "tps_spread_pct"] for c in study.curves.values() if len(c)
    ]
    spreads = pd.concat(spreads) if spreads else pd.Series(dtype=float)
    if len(spreads):
        noise += (
            f" Repetitions of one client count spread by {spreads.median():.1f} % (median "
            f"over rows and client counts; largest {spreads.max():.1f} %)."
        )
    elif study.measured:
        noise += " One repetition per client count: no within-row spread was measured."
    lines = [noise, _outlier_text(study), *_censored_text(study)]
    return lines


def crossed_noise(study: Study, centre: Centre) -> str:
    """Where the pure error of centre runs in blocks or beside a factor without a middle
    comes from, in words."""
    within = []
    if centre.blocks is not None:
        within.append("within its block")
    if centre.held:
        names = " × ".join(study.design.factor(x).name for x in centre.held)
        within.append(f"at each level of {names}")
    return (
        f"Standard error of an effect from the pure error of the {len(centre)} centre runs "
        f"(each one's spread about the mean of the centre runs {' and '.join(within)})"
    )


def _outlier_text(study: Study) -> str:
    out = study.outliers
    if out.empty:
        return "**Outliers.** No run stood out in the residual analysis."
    items = []
    for _, row in out.iterrows():
        run = str(row["run"])
        levels = ", ".join(f"{k} {v}" for k, v in study.design.levels(run).items())
        items.append(
            f"{run} ({levels}): observed {number(float(row['observed']))}, fitted "
            f"{number(float(row['fitted']))}, standardized residual "
            f"{float(row['standardized']):.2f}"
        )
    check = (
        "check their throughput panels and measurement.json"
        if study.measured
        else f"check these lines of {study.table}"
    )
    return (
        f"**Outliers.** Flagged by the residual analysis ({check} before trusting the "
        "effects): " + "; ".join(items) + "."
    )


def _censored_text(study: Study) -> list[str]:
    """Rows whose ceiling is a lower bound: their best count is the largest they measured."""
    c = study.ceilings
    if c.empty or "empirical_clients" not in c or study.ceiling != "empirical":
        return []
    edge = []
    for _, row in c.iterrows():
        run, clients = str(row["run"]), int(row["empirical_clients"])
        curve = study.curves.get(run, pd.DataFrame({"clients": []}))
        flag = row.get("empirical_lower_bound")  # older ceilings.csv: from the curve
        if flag if pd.api.types.is_bool(flag) else clients == curve["clients"].max():
            limit = study.measurements.get(run, {}).get("measurement", {}).get("max_clients")
            edge.append(f"{run} at {clients}" + (" = max_clients" if limit == clients else ""))
    if not edge:
        return []
    return [
        f"**Ceilings at the edge.** {len(edge)} of {len(c)} rows reached their largest "
        "throughput at the largest client count they measured: their ceiling is a lower bound "
        f"({', '.join(edge)})."
    ]


def _backend(study: Study) -> str:
    applied = [m.get("applied", {}) for m in study.measurements.values()]
    return str(applied[0].get("backend")) if applied else "?"


def backend_section(study: Study) -> list[str]:
    """What the backend the rows were measured on cannot show (its own text)."""
    from ybscale.registry import BACKENDS, backend_class

    applied = [m.get("applied", {}) for m in study.measurements.values()]
    name = applied[0].get("backend") if applied else None
    return backend_class(name).report_text(applied) if name in BACKENDS else []


def next_section(study: Study, files: StudyFiles) -> list[str]:
    active = followup.active_terms(study.effects)
    lines = ["**What to run next.**"]
    items = []
    if study.design.replications == 1 and not any(f.fold for f in study.design.factors):
        pairs, proposals = followup.propose(study.design, active)
        if pairs:
            items.append(
                "``ybscale next`` proposes: "
                + followup.describe(study.design, pairs, proposals[0]).replace("\n", " ")
            )
    found = mult.family_rule(_terms(study))  # the study's rule (replicated), else the default
    rule = found[0] if found else mult.DEFAULT
    if not study.measured:  # a table: no study to plan the replicates of
        return [lines[0], ("ul", items)] if items else []
    try:
        items.append(  # time, no cost
            "``ybscale plan --detect 10%``: "
            + power.detect(
                DETECT,
                study.design,
                {"analysis": {"alpha": study.alpha, "multiplicity": rule}, "backend": None},
                files,
            ).replace("\n", " ")
        )
    except (ValueError, KeyError, OSError) as exc:
        items.append(f"``ybscale plan --detect 10%``: not available ({exc}).")
    if not items:
        return []
    lines.append(("ul", items))
    return lines


def _active_terms(study: Study) -> list[str]:
    terms = _terms(study)
    return [str(t) for t in terms.loc[terms["active"], "term"]] if len(terms) else []


def findings_blocks(
    study: Study, files: StudyFiles, clusters: Mapping[str, str] | None = None
) -> list:
    """The page as blocks: strings are paragraphs, ("ol"|"ul", items) are lists, ("table", rows)
    the summary table; `clusters`: run -> the cluster it ran on (the rules' --clusters)."""
    words = {"what": study.what, "unit": study.unit}
    describe = partial(effect_sentence, study.design, share=False, **words)
    every = study.responses.effects if study.responses else study.effects
    strata_words = strata_text.findings_text(_terms(study), _backend(study), number, clusters)
    if not study.measured and not strata.stratified(_terms(study)) and not clusters:
        strata_words = []  # a table: no clusters to speak of
    return [
        *verdict_blocks(every, partial(_short_name, study.design), ended_text(files)),
        *summary_table(study.design, _terms(study), study.responses, **words),
        *(study.responses.opposite(study.design) if study.responses else []),
        *response_section(study),
        *(study.responses.describe(study.ceilings) if study.responses else []),
        *sensitivity.scale_text(study.effects, describe, study.what, study.unit),
        *effects_section(study),
        *sensitivity.sensitivity_blocks(study.effects, describe),
        *strata_words,
        *split_plot_text(study.anova, study.alpha),
        *noise_section(study),
        *curvature_section(study),
        *bottlenecks.bottleneck_text(
            study.design,
            study.ceilings,
            _active_terms(study),
            unsettled(_terms(study)),
            {
                run: m["load_generator_growth"]
                for run, m in study.measurements.items()
                if "load_generator_growth" in m
            },
        ),
        *dataset_text(study.measurements, study.resets),
        *recommendation_section(study),
        *backend_section(study),
        *next_section(study, files),
    ]


# ---------------------------------------------------------------------------- rendering

TITLE = "Findings"


def _rst_escape(text: str) -> str:
    """Escape what reStructuredText would read as markup (trailing underscores, pipes)."""
    out = []
    for token in text.split(" "):
        token = token.replace("|", "\\|")
        if token.endswith("_") and not token.endswith("\\_"):
            token = token[:-1] + "\\_"
        out.append(token)
    return " ".join(out)


def _table(cells: list[tuple], fmt: str) -> list[str]:
    """The summary table's lines (its header first): a Markdown pipe table or an rst
    list-table."""
    if fmt == "md":
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in cells]
        return lines[:1] + ["|" + "---|" * len(cells[0])] + lines[1:]
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for r in cells:
        lines += [("   * - " if i == 0 else "     - ") + _rst_escape(c) for i, c in enumerate(r)]
    return lines


def render(blocks: list, fmt: str) -> str:
    """Markdown (``md``) or reStructuredText (``rst``) of the blocks."""
    esc = _rst_escape if fmt == "rst" else (lambda s: s)
    lines = [TITLE, ("-" if fmt == "rst" else "=") * len(TITLE), ""]  # rst: a section
    for block in blocks:
        if isinstance(block, str):
            lines += [esc(block), ""]
            continue
        kind, items = block
        if kind == "table":
            lines += _table(items, fmt) + [""]
            continue
        for i, item in enumerate(items, start=1):
            bullet = f"{i}. " if kind == "ol" else "* "
            lines += [bullet + esc(item), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_findings(
    design: Design,
    files: StudyFiles,
    out: Path | str,
    rst: Path | str | None = None,
    alpha: float = 0.05,
    ceiling: str = "empirical",
    clusters: Mapping[str, str] | None = None,
    latency_slo_ms: float | None = None,
) -> str:
    """Write findings.md (and the .rst copy); returns the Markdown."""
    study = load_study(design, files, alpha, ceiling, latency_slo_ms)
    blocks = findings_blocks(study, files, clusters)
    text = render(blocks, "md")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")
    if rst:
        Path(rst).parent.mkdir(parents=True, exist_ok=True)
        Path(rst).write_text(render(blocks, "rst"), encoding="utf-8")
    return text


def table_study(
    design: Design,
    tables: Mapping[str, pd.DataFrame],
    responses: pd.DataFrame,
    names: list[str],
    table: str,
    alpha: float = 0.05,
) -> Study:
    """The Study of a responses table `ybscale analyze` read (`table`, its path) and the tables
    it wrote (effects, anova, outliers): no measurement, the main response's own words."""
    main_name = names[0]

    def per_response(frame: pd.DataFrame) -> pd.DataFrame:
        if response_names(frame) or len(names) > 1:
            return frame
        return frame.assign(**{RESPONSE: main_name})  # one response: its name, for the words

    effects = per_response(tables["effects"])
    rows = responses.reset_index()
    rows["response"] = rows[main_name].astype(float)
    centre = pd.DataFrame()
    kept = responses.attrs.get("center")
    if kept is not None and len(kept):
        centre = kept.copy()
        signs = responses.attrs.get("center_signs")
        if signs is not None:
            centre = centre.join(signs)
        centre["response"] = centre[main_name].astype(float)
        centre = centre.reset_index()
    labels = design.block_labels()  # a design in blocks (`blocks:`): its centre runs' too
    if labels and "block" not in rows:
        rows["block"] = rows["run"].astype(str).map(labels)
        if not centre.empty and centre["run"].astype(str).isin(labels).all():
            centre["block"] = centre["run"].astype(str).map(labels)
    what, unit = response_words(main_name)[:2]
    return Study(
        design=design,
        effects=of_response(effects),
        outliers=of_response(per_response(tables["outliers"])),
        ceilings=rows,
        measurements={},
        curves={},
        alpha=alpha,
        ceiling="",
        anova=of_response(per_response(tables["anova"])),
        responses=Responses(effects),
        centre=centre,
        what=what,
        unit=unit,
        table=table,
    )


def write_table_findings(
    design: Design,
    tables: Mapping[str, pd.DataFrame],
    responses: pd.DataFrame,
    names: list[str],
    table: str,
    folder: Path | str,
    alpha: float = 0.05,
    clusters: Mapping[str, str] | None = None,
) -> Path:
    """``folder/findings.md`` of a table `ybscale analyze` read: the findings' words for what
    the table holds (the hook `ybscale.report.analyze` hands the analysis)."""
    study = table_study(design, tables, responses, names, table, alpha)
    files = StudyFiles.under(folder, design.run_ids)
    files = dataclasses.replace(files, ceilings=Path(folder) / "responses.csv")
    text = render(findings_blocks(study, files, clusters), "md")
    path = Path(folder) / "findings.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(
        prog="ybscale.report.findings", description=cli_description(__doc__)
    )
    parser.add_argument("runs", nargs="+", type=Path, help="the rows' folders (results/runs/<run>)")
    parser.add_argument("--design", required=True, type=Path)
    parser.add_argument("--effects", required=True, type=Path)
    parser.add_argument("--ceilings", required=True, type=Path)
    parser.add_argument("--outliers", required=True, type=Path)
    parser.add_argument("--anova", default=None, type=Path, help="anova.csv (strata F tests)")
    parser.add_argument(
        "--clusters", nargs="*", metavar="RUN=CLUSTER", help="the clusters (design page)"
    )
    parser.add_argument("--out", required=True, type=Path, help="findings (Markdown)")
    parser.add_argument("--rst", default=None, type=Path, help="reStructuredText copy")
    parser.add_argument("--design-rst", default=None, type=Path, help="design page for the report")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--ceiling", default="empirical")
    parser.add_argument(
        "--rounds", nargs="?", type=Path, help="the final round's decision: what ended the study"
    )
    parser.add_argument(
        "--latency-slo-ms", type=float, default=None, help="the best buy's latency target"
    )
    args = parser.parse_args(argv)
    design = load_design(args.design)
    files = StudyFiles.from_paths(args.effects, args.ceilings, args.outliers, args.runs, args.anova)
    files = dataclasses.replace(files, rounds=args.rounds)
    clusters = clusters_of(args.design, args.clusters)  # given, else the design record's
    text = write_findings(
        design, files, args.out, args.rst, args.alpha, args.ceiling, clusters, args.latency_slo_ms
    )
    if args.design_rst:
        from ybscale.report.design_report import design_rst, replication_factors

        args.design_rst.parent.mkdir(parents=True, exist_ok=True)
        effects = of_response(pd.read_csv(args.effects))
        page = design_rst(design, strata.strata_of_effects(effects), clusters,
                          replication_factors(args.runs))  # fmt: skip
        args.design_rst.write_text(page, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
