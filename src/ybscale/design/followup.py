"""Fold-over follow-up designs (Montgomery ch. 8; R FrF2's ``fold.design``).

A fold-over runs the design again with the signs of some factors reversed: all of them (full
fold-over) or one (single-factor fold-over). The combined design (original + follow-up) is again a
regular fraction, written here as a design with one more, **fold** factor (level -1: the original
rows, +1: the follow-up rows). For a generator ``X = s·W`` whose word ``XW`` contains an odd number
of folded letters, the follow-up half has ``X = -s·W``, so the combined design has ``X = -s·W·G``
(G the fold letter); the other generators are unchanged. The fold is the slowest base factor, so
the combined design's first rows are exactly the original rows, in the same order and with the
same run ids: the pipeline measures only the follow-up rows.

``ybscale next --analysis results/ --out config/design-foldover.yaml`` proposes the fold-over that
separates the most pairs of low-order terms (main effects, two-factor interactions) that the
active effects' alias strings confound.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pandas as pd
import yaml

from ybscale.design.factorial import Design, DesignError, Factor, load_design
from ybscale.errors import error_line
from ybscale.files import read_table

FULL = "full"
FOLD_NAME = "fold"
FOLD_LEVELS = ("original", "foldover")


def _fold_letter(design: Design) -> str:
    last = max(design.letters)
    if last == "Z":
        raise DesignError(f"{design.source}: factors: no letter left for the fold factor")
    return chr(ord(last) + 1)


def _folded(design: Design, columns: str | Sequence[str]) -> set[str]:
    """The letters whose signs the follow-up reverses."""
    if isinstance(columns, str) and columns == FULL:
        return {f.letter for f in design.factors if not f.fold}
    letters = {c.strip().upper() for c in ([columns] if isinstance(columns, str) else columns)}
    unknown = sorted(letters - set(design.letters))
    if unknown or not letters:
        raise DesignError(
            f"{design.source}: fold columns {sorted(letters)}: unknown factor(s) {unknown}; "
            f"factors are {', '.join(design.letters)}"
        )
    return letters


def fold(design: Design, columns: str | Sequence[str] = FULL) -> Design:
    """The combined design: original rows (fold -1) then the fold-over rows (fold +1)."""
    if design.replications != 1:
        raise DesignError(
            f"{design.source}: replications: fold-over is defined here for unreplicated designs "
            f"(got {design.replications}); fold the single replicate, then replicate"
        )
    folded = _folded(design, columns)
    g = _fold_letter(design)
    generators = {}
    for letter, text in design.generators.items():
        sign, rhs = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
        if len(folded & set(rhs + letter)) % 2:
            sign, rhs = -sign, rhs + g
        generators[letter] = ("-" if sign < 0 else "") + "".join(sorted(rhs))
    which = "all factors" if columns == FULL else ", ".join(sorted(folded))
    fold_factor = Factor(
        letter=g,
        name=_unique_name(design, FOLD_NAME),
        levels=FOLD_LEVELS,
        description=f"original rows (-1) or fold-over rows with the signs of {which} reversed (+1)",
        fold=True,
    )
    return Design(
        factors=(*design.factors, fold_factor),
        generators=generators,
        replications=1,
        source=f"fold-over of {design.source} ({which})",
    )


def _unique_name(design: Design, name: str) -> str:
    names = {f.name for f in design.factors}
    i, out = 1, name
    while out in names:
        i += 1
        out = f"{name}{i}"
    return out


def followup_rows(combined: Design) -> list[str]:
    """Run ids of the rows a combined design adds (fold at +1)."""
    letter = next(f.letter for f in combined.factors if f.fold)
    table = combined.sign_table()
    return table.index[table[letter] > 0].tolist()


def treatment_factors(design: Design) -> list[str]:
    return [f.letter for f in design.factors if not f.fold]


def _group_of(design: Design) -> dict[str, str]:
    """Word (letters, sign dropped) -> term of its alias group."""
    return {m.lstrip("-"): term for term, members in design.alias_groups() for m in members}


def confounded_pairs(design: Design, terms: Sequence[str], order: int = 2) -> list[tuple]:
    """Pairs of treatment words of length <= order that share the alias group of ``terms``."""
    folds = {f.letter for f in design.factors if f.fold}
    out = []
    groups = dict(design.alias_groups())
    for term in terms:
        low = [
            m.lstrip("-")
            for m in groups.get(term, [])
            if len(m.lstrip("-")) <= order and not folds & set(m)
        ]
        out += [(term, a, b) for a, b in combinations(low, 2)]
    return out


@dataclass(frozen=True)
class Proposal:
    """A fold-over and what it separates."""

    columns: str  # "full" or one letter
    combined: Design
    separated: list[tuple]  # (term, a, b) pairs the combined design separates
    remaining: list[tuple]  # pairs it still confounds

    @property
    def label(self) -> str:
        return "full fold-over" if self.columns == FULL else f"fold-over on factor {self.columns}"


def evaluate(design: Design, columns: str, pairs: Sequence[tuple]) -> Proposal:
    combined = fold(design, columns)
    group = _group_of(combined)
    sep = [p for p in pairs if group[p[1]] != group[p[2]]]
    rest = [p for p in pairs if group[p[1]] == group[p[2]]]
    return Proposal(columns, combined, sep, rest)


def propose(design: Design, active_terms: Sequence[str]) -> tuple[list[tuple], list[Proposal]]:
    """Confounded pairs of the active terms, and every candidate fold-over, best first.

    Best: separates the most pairs; ties go to the full fold-over (it also clears every main
    effect of two-factor interactions), then to the earlier letter.
    """
    pairs = confounded_pairs(design, active_terms)
    candidates = [FULL, *treatment_factors(design)]
    proposals = [evaluate(design, c, pairs) for c in candidates]
    proposals.sort(key=lambda p: (-len(p.separated), p.columns != FULL, p.columns))
    return pairs, proposals


def read_effects(path: Path, response: str | None = None) -> pd.DataFrame:
    """An analysis's effects.csv, the lines of one response (analysis.responses: `response`,
    else the first, the main one); ValueError naming the file (and a column it lacks, or the
    responses it has)."""
    effects = read_table(path)
    missing = [c for c in ("term", "active") if c not in effects.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    if "response" not in effects.columns:
        if response is not None:
            raise ValueError(f"{path}: one response only (no response column): omit --response")
        return effects
    names = list(dict.fromkeys(effects["response"].astype(str)))
    response = names[0] if response is None else response
    if response not in names:
        raise ValueError(f"{path}: no response {response!r} (it has {', '.join(names)})")
    return effects[effects["response"].astype(str) == response].reset_index(drop=True)


def active_terms(effects: pd.DataFrame) -> list[str]:
    """Terms flagged active in an effects table, largest first."""
    rows = effects[effects["term"].astype(str) != "error"]
    flags = rows["active"].astype(str).str.lower().isin(["true", "1"])
    return rows.loc[flags, "term"].astype(str).tolist()


# ---------------------------------------------------------------------------- writing


def design_yaml(original_path: str | Path, combined: Design, note: str) -> str:
    """The combined design as YAML: the original factor entries as written, plus the fold."""
    with open(original_path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    factors = dict(data["factors"])
    for f in combined.factors:
        if f.fold:
            factors[f.letter] = {
                "name": f.name,
                "levels": list(f.levels),
                "description": f.description,
                "fold": True,
            }
    out = {
        "factors": factors,
        "generators": dict(combined.generators),
        "replications": combined.replications,
    }
    head = "\n".join(f"# {line}" for line in note.splitlines())
    return head + "\n" + yaml.safe_dump(out, sort_keys=False, allow_unicode=True)


ROMAN = {3: "III", 4: "IV", 5: "V", 6: "VI", 7: "VII", 8: "VIII"}


def resolution_text(design: Design) -> str:
    """``"resolution IV"`` (``"full factorial"`` without generators)."""
    res = design.resolution
    return "full factorial" if math.isinf(res) else f"resolution {ROMAN.get(res, res)}"


def describe(design: Design, pairs: list[tuple], best: Proposal) -> str:
    """What the follow-up does, in words (also the header of the written YAML)."""
    combined = best.combined
    new = followup_rows(combined)
    lines = [
        f"Follow-up to {design.source}: {best.label}, {len(new)} new rows "
        f"({new[0]}..{new[-1]}); rows {design.run_ids[0]}..{design.run_ids[-1]} are the original "
        "rows, reused as measured.",
        f"Combined design: {combined.n_rows} rows, generators "
        + ", ".join(f"{k} = {v}" for k, v in combined.generators.items())
        + f", defining relation {combined.defining_relation_string()}, "
        + f"{resolution_text(combined)}.",
    ]
    if pairs:
        lines.append(
            "Separates: "
            + (", ".join(f"{a} from {b}" for _, a, b in best.separated) or "nothing")
            + "."
        )
        if best.remaining:
            lines.append(
                "Still confounded: "
                + ", ".join(f"{a} with {b}" for _, a, b in best.remaining)
                + "."
            )
    else:
        lines.append(
            "No active effect shares its alias string with another main effect or two-factor "
            "interaction: a fold-over would not change the interpretation; replicate instead "
            "(ybscale plan --detect) to detect smaller effects."
        )
    return "\n".join(lines)


def _analysis_design(analysis: Path, design_arg: str | None) -> Path:
    if design_arg:
        return Path(design_arg)
    summary = analysis / "design" / "design.json"
    if summary.is_file():
        source = json.loads(summary.read_text(encoding="utf-8")).get("source")
        if source and Path(source).is_file():
            return Path(source)
    return Path("config/design.yaml")


def main(argv: list[str] | None = None) -> int:
    """``ybscale next --analysis results/ --out config/design-foldover.yaml``."""
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(prog="ybscale next", description=cli_description(__doc__))
    parser.add_argument("--analysis", default="results", type=Path, help="results directory")
    parser.add_argument("--design", default=None, help="design YAML (default: the analysed one)")
    parser.add_argument("--out", default=None, help="write the combined design YAML here")
    parser.add_argument("--fold", default=None, help="force: 'full' or one factor letter")
    parser.add_argument(
        "--response",
        default=None,
        help="follow up on this response of effects.csv (default: the first, the main one)",
    )
    args = parser.parse_args(argv)
    effects_path = args.analysis / "effects.csv"
    try:
        design_path = _analysis_design(args.analysis, args.design)
        design = load_design(design_path)
        effects = read_effects(effects_path, args.response)
        active = active_terms(effects)
        pairs, proposals = propose(design, active)
        if args.fold:
            forced = FULL if args.fold.lower() == FULL else args.fold.upper()
            best = evaluate(design, forced, pairs)
        else:
            best = proposals[0]
    except (OSError, KeyError, ValueError) as exc:
        print(f"ybscale next: {error_line(exc)}", file=sys.stderr)
        return 1
    text = describe(design, pairs, best)
    print(f"Active effects: {', '.join(active) or 'none'}")
    print(text)
    for p in proposals[1:]:
        print(f"  alternative: {p.label} separates {len(p.separated)} of {len(pairs)} pairs")
    if args.out:
        note = text + f"\nRun: snakemake --cores 4 results/effects.csv --config design={args.out}"
        model = str(effects["model"].iloc[0]) if "model" in effects.columns and len(effects) else ""
        if model in ("additive", "multiplicative"):  # the earlier study's scale, carried over
            note += f" analysis.model={model}"
            print(
                f"scale: this study's {model} one; to read the follow-up on it (a study of the "
                f"same system), add --config analysis.model={model}"
            )
        Path(args.out).write_text(design_yaml(design_path, best.combined, note), encoding="utf-8")
        load_design(args.out)  # what was written is a valid design
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
