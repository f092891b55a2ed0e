"""Two-level fractional factorial designs 2^(k-p): sign table, defining relation, aliases.

The design file (``config/design.yaml``, schema ``ybscale/schemas/design.schema.yaml``) gives the
factors (letter -> name and two levels, in the order (level at -1, level at +1)), generators
(``E: BC`` means column E = B * C; ``E: -BC`` means E = -B * C) and replications.

Words (effects) are written with their letters in alphabetical order (``"ABF"``); a word with a
negative sign is written with a leading minus (``"-ABCE"``). Words are sorted by (length, letters).
A full factorial (no generators) has an empty defining relation and ``resolution == math.inf``.

Run ``python -m ybscale.design.factorial config/design.yaml results/design`` to write
``sign_table.csv``,
``aliases.csv`` and ``design.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from ybscale import settings
from ybscale.config_sources import FileError, read_yaml_file
from ybscale.design import knobs
from ybscale.errors import UserError
from ybscale.validation import explained, schema_errors

# A signed word: (sign, letters). The identity I is (1, frozenset()).
Word = tuple[int, frozenset]


class DesignError(UserError):
    """An invalid design; the message names the file and the field."""


def _fail(source: str, field_path: str, message: str) -> DesignError:
    return DesignError(f"{source}: {field_path}: {message}")


# --------------------------------------------------------------------------- word algebra


def _mul(a: Word, b: Word) -> Word:
    """Product of two signed words (letters squared cancel)."""
    return a[0] * b[0], a[1] ^ b[1]


def _letters(word: Word) -> str:
    return "".join(sorted(word[1]))


def _fmt(word: Word) -> str:
    """``"-ABC"`` style; the identity is ``"I"``."""
    text = _letters(word) or "I"
    return ("-" if word[0] < 0 else "") + text


def _key(word: Word) -> tuple[int, str]:
    """Sort key: (length, letters), sign ignored."""
    return len(word[1]), _letters(word)


def _parse_generator(text: str) -> tuple[int, str]:
    """``"-ABC"`` -> (-1, "ABC")."""
    text = text.strip().upper()
    if text.startswith("-"):
        return -1, text[1:]
    return 1, text.lstrip("+")


def _yates_words(base: list[str]) -> list[frozenset]:
    """Non-empty base words in Yates order: A, B, AB, C, AC, BC, ABC, ..."""
    return [
        frozenset(b for j, b in enumerate(base) if i >> j & 1) for i in range(1, 2 ** len(base))
    ]


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class Factor:
    """One two-level factor; ``levels`` is (level at -1, level at +1)."""

    letter: str
    name: str
    levels: tuple
    description: str = ""
    sets: str | None = None  # the knob it sets (None: the shorthand of its name)
    fold: bool = False  # the fold-over column (original vs follow-up rows): analysed, never applied

    @property
    def knob(self) -> str:
        """The knob this factor sets, e.g. ``cluster.nodes`` (see ``ybscale.design.knobs``)."""
        return knobs.knob_of(self.name, self.sets)

    def level(self, sign: int) -> object:
        """Level label for a sign (-1 or +1)."""
        return self.levels[0] if sign < 0 else self.levels[1]


@dataclass(frozen=True)
class Design:
    """A 2^(k-p) design; validated on construction (raises DesignError)."""

    factors: tuple[Factor, ...]
    generators: dict[str, str] = field(default_factory=dict)
    replications: int = 1
    source: str = "<memory>"
    blocks: int = 1  # an unreplicated design measured in 2, 4, 8 ... blocks
    block_generators: tuple[str, ...] = ()  # the blocks' defining words (chosen when empty)
    # runs at the middle of every factor's two levels, after the rest: this many in each block,
    # at each combination of the levels of the factors without a middle (`center_held`)
    center_points: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "factors", tuple(sorted(self.factors, key=lambda f: f.letter)))
        gens = {k: v.strip().upper() for k, v in sorted(self.generators.items())}
        object.__setattr__(self, "generators", gens)
        words = tuple("".join(sorted(w.strip().upper())) for w in self.block_generators)
        object.__setattr__(self, "block_generators", words)
        _check(self)
        _check_block_shape(self)
        if self.blocks > 1 and not self.block_generators:
            object.__setattr__(self, "block_generators", choose_block_generators(self))
        _check_blocks(self)
        _check_center(self)

    # ---- basic shape

    @property
    def letters(self) -> list[str]:
        """All factor letters, sorted."""
        return [f.letter for f in self.factors]

    @property
    def base(self) -> list[str]:
        """Letters that are not generated, in order."""
        return [f.letter for f in self.factors if f.letter not in self.generators]

    @property
    def n_rows(self) -> int:
        """Rows of one replicate: 2 ** len(base)."""
        return 2 ** len(self.base)

    @property
    def n_runs(self) -> int:
        """Rows times replications."""
        return self.n_rows * self.replications

    @property
    def run_ids(self) -> list[str]:
        """The factorial runs ``run01`` ... zero padded to at least two digits (as wide as
        the centre runs' ids need); the centre runs are `center_run_ids`."""
        width = max(2, len(str(self.n_runs + self.n_center)))
        return [f"run{i:0{width}d}" for i in range(1, self.n_runs + 1)]

    @cached_property
    def center_held(self) -> list[str]:
        """The letters of the factors without a middle (`middle`: levels that are not numbers,
        or integers with none between them), which the centre runs hold at each of their
        levels, as Minitab and JMP cross centre points with a categorical factor; [] without
        `center_points`."""
        if not self.center_points:
            return []
        return [f.letter for f in self.factors if middle(f)[0] is None]

    @property
    def n_center(self) -> int:
        """How many centre runs: `center_points` in each block, at each combination of the
        levels of the `center_held` factors (Minitab: 2^Q times as many for Q of them)."""
        return self.center_points * 2 ** len(self.center_held) * max(self.blocks, 1)

    @property
    def center_run_ids(self) -> list[str]:
        """The centre runs' ids, numbered after the factorial runs (run17 .. run20 for a
        2^4 with four centre points); [] without `center_points`."""
        width = max(2, len(str(self.n_runs + self.n_center)))
        total = self.n_runs + self.n_center
        return [f"run{i:0{width}d}" for i in range(self.n_runs + 1, total + 1)]

    @cached_property
    def _center_placement(self) -> list[tuple[int, dict[str, int]]]:
        """(block, letter -> 0 or the held factor's sign) of each centre run, in run order:
        block by block, in each every combination of the held factors' levels (Yates order)
        `center_points` times."""
        held = self.center_held
        out = []
        for block in range(1, max(self.blocks, 1) + 1):
            for i in range(2 ** len(held)):
                signs = dict.fromkeys(self.letters, 0)
                signs.update({x: 1 if i >> j & 1 else -1 for j, x in enumerate(held)})
                out += [(block, signs)] * self.center_points
        return out

    @property
    def all_run_ids(self) -> list[str]:
        """Every run measured: the factorial runs, then the centre runs."""
        return self.run_ids + self.center_run_ids

    def is_center(self, run: str) -> bool:
        """Whether `run` is a centre run."""
        return run in self.center_run_ids

    @cached_property
    def center_levels(self) -> dict[str, object]:
        """Letter -> the middle of its two levels (`center_points`; {} without): the
        arithmetic middle, rounded when both levels are integers; the `center_held` factors,
        which have none, are left out."""
        if not self.center_points:
            return {}
        return {f.letter: middle(f)[0] for f in self.factors if f.letter not in self.center_held}

    def factor(self, letter: str) -> Factor:
        """The factor with this letter."""
        for f in self.factors:
            if f.letter == letter:
                return f
        raise KeyError(letter)

    # ---- sign table

    @cached_property
    def _column_lists(self) -> dict[str, list[int]]:
        """Letter -> +-1 column over one replicate (Yates order); computed once (frozen)."""
        cols = {
            b: [1 if (i >> j) & 1 else -1 for i in range(self.n_rows)]
            for j, b in enumerate(self.base)
        }
        for letter, text in self.generators.items():
            sign, rhs = _parse_generator(text)
            col = [sign] * self.n_rows
            for r in rhs:
                col = [x * y for x, y in zip(col, cols[r], strict=True)]
            cols[letter] = col
        return cols

    def sign_table(self) -> pd.DataFrame:
        """Index ``run``; columns ``row``, ``replicate`` and one +-1 int column per letter."""
        return self._sign_table.copy()

    @cached_property
    def _sign_table(self) -> pd.DataFrame:
        import pandas as pd  # lazily: the workflow's parse needs only `signs`

        cols = self._column_lists
        reps = self.replications
        data = {
            "row": list(range(1, self.n_rows + 1)) * reps,
            "replicate": [r for r in range(1, reps + 1) for _ in range(self.n_rows)],
        }
        for letter in self.letters:
            data[letter] = cols[letter] * reps
        table = pd.DataFrame(data, index=pd.Index(self.run_ids, name="run"))
        return table.astype("int64")

    def signs(self, run: str) -> dict[str, int]:
        """Letter -> +1/-1 for one run (a centre run: 0 for every letter with a middle, the
        level's sign for a `center_held` one)."""
        if self.is_center(run):
            return dict(self._center_placement[self.center_run_ids.index(run)][1])
        if run not in self.run_ids:
            raise KeyError(run)
        index = (self.run_ids.index(run)) % self.n_rows
        cols = self._column_lists
        return {letter: cols[letter][index] for letter in self.letters}

    def replicate(self, run: str) -> int:
        """Which replicate (1 ..) a run is of its design row (the sign table's ``replicate``);
        a centre run: the replicate (block) it is measured with (`center_blocks`)."""
        if self.is_center(run):
            return self.center_blocks[self.center_run_ids.index(run)]
        if run not in self.run_ids:
            raise KeyError(run)
        return self.run_ids.index(run) // self.n_rows + 1

    def levels(self, run: str) -> dict[str, object]:
        """Factor name -> level label for one run, keys sorted (block columns left out); a
        centre run: every factor at its middle (`center_levels`)."""
        signs = self.signs(run)
        if self.is_center(run):
            named = {
                f.name: self.center_levels[f.letter] if signs[f.letter] == 0
                else f.level(signs[f.letter])
                for f in self.factors if not f.fold
            }  # fmt: skip
            return dict(sorted(named.items()))
        named = {f.name: f.level(signs[f.letter]) for f in self.factors if not f.fold}
        return dict(sorted(named.items()))

    @property
    def center_blocks(self) -> list[int]:
        """The block of the run order each centre run is measured in: its design block
        (`blocks:`), else the replicates round robin, so each replicate holds its share."""
        if self.blocks > 1:
            return [block for block, _ in self._center_placement]
        return [i % self.replications + 1 for i in range(self.n_center)]

    def measured_table(self) -> pd.DataFrame:
        """The sign table and, after it, one line per centre run: ``row`` 0, ``replicate``
        its block (`center_blocks`), every letter 0 but a `center_held` one's sign (what
        ceilings.csv carries)."""
        import pandas as pd

        table = self.sign_table()
        if not self.center_points:
            return table
        signs = pd.DataFrame([s for _, s in self._center_placement], columns=self.letters)
        centre = pd.DataFrame(
            {"row": 0, "replicate": self.center_blocks, **signs.to_dict("list")},
            index=pd.Index(self.center_run_ids, name="run"),
        )
        return pd.concat([table, centre]).astype("int64")

    # ---- defining relation, aliases

    def _defining_words(self) -> list[Word]:
        """All products of generator words (the subgroup without I), sorted."""
        gens: list[Word] = []
        for letter, text in self.generators.items():
            sign, rhs = _parse_generator(text)
            gens.append((sign, frozenset(rhs) | {letter}))
        words = []
        for n in range(1, len(gens) + 1):
            for combo in combinations(gens, n):
                word: Word = (1, frozenset())
                for g in combo:
                    word = _mul(word, g)
                words.append(word)
        return sorted(words, key=_key)

    def defining_relation(self) -> list[str]:
        """Words of the defining relation without ``I``, e.g. ``["ABF", "BCE", "ACEF"]``."""
        return [_fmt(w) for w in self._defining_words()]

    def defining_relation_string(self) -> str:
        """``"I = ABF = BCE = ACEF"`` (just ``"I"`` for a full factorial)."""
        return " = ".join(["I", *self.defining_relation()])

    @property
    def headline(self) -> str:
        """``2^(6-2) design, 16 runs, I = ..., resolution 3``: what the design commands print."""
        k, p = len(self.factors), len(self.generators)
        centre = f" and {self.n_center} centre runs" if self.center_points else ""
        return (
            f"2^({k}-{p}) design, {self.n_runs} runs{centre}, "
            f"{self.defining_relation_string()}, resolution {self.resolution}"
        )

    @property
    def resolution(self) -> int | float:
        """Length of the shortest defining word; ``math.inf`` for a full factorial."""
        words = self._defining_words()
        return min(len(w[1]) for w in words) if words else math.inf

    def _groups(self) -> list[tuple[str, list[str]]]:
        return [(term, list(members)) for term, members in self._alias_group_list]

    @cached_property
    def _alias_group_list(self) -> list[tuple[str, list[str]]]:
        subgroup = [(1, frozenset()), *self._defining_words()]
        groups = []
        for base_word in _yates_words(self.base):
            coset = sorted((_mul((1, base_word), d) for d in subgroup), key=_key)
            term_sign = coset[0][0]
            # signs relative to the term: term = s * member
            members = [_fmt((w[0] * term_sign, w[1])) for w in coset]
            groups.append((members[0], members))
        return groups

    def alias_groups(self) -> list[tuple[str, list[str]]]:
        """One (term, members) per estimable column, in Yates order of the base words.

        Members are sorted by (length, letters) and carry their sign relative to the term
        (``"-BCDE"`` when the term column equals minus the BCDE column); term = members[0].
        """
        return self._groups()

    @property
    def terms(self) -> list[str]:
        """Estimable terms (one per alias group), Yates order."""
        return [term for term, _ in self._groups()]

    def alias_string(self, term: str) -> str:
        """``"A = BF = CEF = ABCE"``; ``term`` may be any member of the group."""
        wanted = "".join(sorted(term.strip().lstrip("-").upper()))
        if wanted not in self._alias_strings:
            raise KeyError(f"{term!r} is not an estimable effect of {self.source}")
        return self._alias_strings[wanted]

    @cached_property
    def _alias_strings(self) -> dict[str, str]:
        """Every member's letters -> its group's alias string."""
        return {
            m.lstrip("-"): " = ".join(members)
            for _, members in self._alias_group_list
            for m in members
        }

    def model_matrix(self) -> pd.DataFrame:
        """Index ``run``; one +-1 column per estimable term (product of its letters)."""
        return self._model_matrix.copy()

    @cached_property
    def _model_matrix(self) -> pd.DataFrame:
        import pandas as pd

        table = self.sign_table()
        out = {}
        for term in self.terms:
            col = pd.Series(1, index=table.index, dtype="int64")
            for letter in term:
                col = col * table[letter]
            out[term] = col
        return pd.DataFrame(out, index=table.index)

    # ---- blocks (an unreplicated design in 2^q blocks, Montgomery §7.4-7.6)

    def block_words(self) -> list[str]:
        """The 2^q − 1 words the blocks are confounded with: every product of the block
        generators (each an effect column, `alias_string` names its group)."""
        return sorted(_products(self.block_generators), key=lambda w: (len(w), w))

    @cached_property
    def row_blocks(self) -> list[int]:
        """The block (1 ..) of each row of the sign table, in row order: the block holding row
        1 (every base factor low) is block 1, the principal block; [] without blocks."""
        if self.blocks <= 1:
            return []
        cols = self._column_lists
        signs = []
        for word in self.block_generators:
            col = [1] * self.n_rows
            for letter in word:
                col = [x * y for x, y in zip(col, cols[letter], strict=True)]
            signs.append(col)
        return [
            1 + sum((1 << j) for j, col in enumerate(signs) if col[i] != col[0])
            for i in range(self.n_rows)
        ]

    def block_labels(self) -> dict[str, int]:
        """run -> its block ({} without blocks), the centre runs' too (`center_blocks`)."""
        if self.blocks <= 1:
            return {}
        labels = {run: self.row_blocks[i % self.n_rows] for i, run in enumerate(self.run_ids)}
        return labels | dict(zip(self.center_run_ids, self.center_blocks, strict=True))


def _products(words) -> list[str]:
    """Every product of one or more of `words` (letters squared cancel; "" is the identity)."""
    gens = [frozenset(w) for w in words]
    out = []
    for n in range(1, len(gens) + 1):
        for combo in combinations(gens, n):
            word: frozenset = frozenset()
            for g in combo:
                word = word ^ g
            out.append("".join(sorted(word)))
    return out


def _span_groups(design: Design, words) -> list[str] | None:
    """The alias groups of every product of `words` (letters), or None when a product is the
    identity (or in the defining relation): the words are not independent."""
    groups = []
    for word in _products(words):
        try:
            groups.append(design.alias_string(word) if word else "")
        except KeyError:
            return None
        if not word:
            return None
    return groups if len(set(groups)) == len(groups) else None


def choose_block_generators(design: Design) -> tuple[str, ...]:
    """The q = log2(blocks) block generators chosen as FrF2 and the textbooks choose them:
    no block column aliased with a main effect, then as few aliased with a two-factor
    interaction as possible, then the highest-order words (Montgomery: a 2^4 in two blocks
    confounds ABCD), ties broken alphabetically. DesignError when every choice confounds a
    main effect (too many blocks for the runs)."""
    q = design.blocks.bit_length() - 1
    bit = {letter: 1 << i for i, letter in enumerate(design.letters)}
    group_of, traits = {}, []  # a word's letters as bits -> its alias group; per group
    for i, (_, members) in enumerate(design.alias_groups()):
        words = [m.lstrip("-") for m in members]
        for w in words:
            group_of[sum(bit[x] for x in w)] = i
        lengths = [len(w) for w in words]  # (holds a main effect, a 2fi, its shortest word)
        traits.append((1 in lengths, 2 in lengths, min(lengths)))
    terms = design.terms
    candidates = [i for i, t in enumerate(traits) if not t[0]]
    masks = {i: sum(bit[x] for x in terms[i]) for i in candidates}
    best, best_key = None, None
    for combo in combinations(candidates, q):  # bits: far cheaper than words, at parse time
        span = []
        for n in range(1, q + 1):
            for sub in combinations(combo, n):
                mask = 0
                for i in sub:
                    mask ^= masks[i]
                span.append(group_of.get(mask))
        if None in span or len(set(span)) != len(span) or any(traits[g][0] for g in span):
            continue
        key = (sum(traits[g][1] for g in span), -sum(traits[g][2] for g in span),
               tuple(terms[i] for i in combo))  # fmt: skip
        if best_key is None or key < best_key:
            best, best_key = key[2], key
    if best is None:
        raise _fail(design.source, "blocks", f"{design.blocks} blocks of {design.n_rows} runs "
                    "confound a main effect whatever the block generators")  # fmt: skip
    return tuple(best)


# --------------------------------------------------------------------------- validation


def _number(value: object) -> int | float | None:
    """A level as a number (an int when it is one), None when it is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def middle(factor: Factor) -> tuple[object, str]:
    """(the middle of a factor's two levels, '') or (None, why it has none): the arithmetic
    middle of two numbers, rounded (half up) when both are integers, and then strictly between
    them."""
    low, high = (_number(v) for v in factor.levels)
    if low is None or high is None:
        return None, (
            f"levels {list(factor.levels)!r} are not both numbers: a categorical factor has no "
            "middle"
        )
    if isinstance(low, int) and isinstance(high, int):
        middle = math.floor((low + high) / 2 + 0.5)
        if not min(low, high) < middle < max(low, high):
            return None, f"no integer strictly between its levels {low} and {high}"
        return middle, ""
    return (low + high) / 2, ""


def _check_center(design: Design) -> None:
    """center_points: a count >= 0 (in each block, at each level of a factor without a
    middle); some factor with a middle; one replicate; no fold-over column."""
    src, n = design.source, design.center_points
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _fail(src, "center_points", f"must be an integer >= 0, got {n!r}")
    if not n:
        return
    if len(design.center_held) == len(design.factors):
        why = "; ".join(f"factors.{f.letter} ({f.name}): {middle(f)[1]}" for f in design.factors)
        raise _fail(src, "center_points", f"no factor has a middle, so there is no centre: {why}")
    if n < 2 and (design.blocks > 1 or design.center_held):
        names = [design.factor(x).name for x in design.center_held]
        where = "block" if design.blocks > 1 else (
            f"level of {names[0]}" if len(names) == 1
            else f"combination of the levels of {', '.join(names[:-1])} and {names[-1]}"
        )  # fmt: skip
        raise _fail(src, "center_points", f"{n} in each {where} leaves no pure error (the "
                    "spread of centre runs at the same levels of one block, which tests the "
                    "effects and the curvature): 2 or more")  # fmt: skip
    if design.replications > 1:
        raise _fail(src, "center_points", "with replications > 1 is not supported yet (each "
                    "replicate is a block, and the blocked analysis has no curvature test yet): "
                    "the centre runs are the replication")  # fmt: skip
    for f in design.factors:
        if f.fold:
            raise _fail(src, "center_points", f"factors.{f.letter} ({f.name}) is a fold-over "
                        "column, which has no middle")  # fmt: skip


def _check_block_shape(design: Design) -> None:
    """blocks: a power of two, one replicate, at least two runs a block."""
    src, b = design.source, design.blocks
    if b == 1:
        if design.block_generators:
            raise _fail(src, "block_generators", "given without blocks (blocks: 2, 4, 8, ...)")
        return
    if b < 1 or b & (b - 1):
        raise _fail(src, "blocks", f"must be a power of two (2, 4, 8, ...), got {b}")
    if design.replications > 1:
        raise _fail(src, "blocks", "with replications > 1 each replicate is already a block "
                    "(measured one after the other): blocks are for one replicate")  # fmt: skip
    if b >= design.n_rows:
        raise _fail(src, "blocks", f"{b} blocks of {design.n_rows} runs leave a block of one run")


def _check_blocks(design: Design) -> None:
    """block_generators: as many as the blocks need, independent words of the design's
    letters whose products alias no main effect."""
    src, b = design.source, design.blocks
    if b == 1:
        return
    q = b.bit_length() - 1
    if len(design.block_generators) != q:
        raise _fail(src, "block_generators", f"{b} blocks need {q} generator(s), "
                    f"got {len(design.block_generators)}")  # fmt: skip
    for word in design.block_generators:
        unknown = sorted(set(word) - set(design.letters))
        if unknown or len(word) < 2:
            raise _fail(src, "block_generators", f"{word!r} is not an interaction of the "
                        "design's factors")  # fmt: skip
    groups = _span_groups(design, design.block_generators)
    if groups is None:
        named = ", ".join(design.block_generators)
        raise _fail(src, "block_generators", f"{named}: not independent (a product of them "
                    "is the identity or another of them)")  # fmt: skip
    mains = [g for g in groups if any(len(m.lstrip("-")) == 1 for m in g.split(" = "))]
    if mains:
        raise _fail(src, "block_generators", "the blocks would be confounded with "
                    f"{'; '.join(mains)}: a main effect cannot be told from them")  # fmt: skip


def _check(design: Design) -> None:
    """Semantic checks beyond the JSON schema."""
    src = design.source
    _check_factors(design.factors, src)
    if not isinstance(design.replications, int) or isinstance(design.replications, bool):
        raise _fail(src, "replications", f"must be an integer >= 1, got {design.replications!r}")
    if design.replications < 1:
        raise _fail(src, "replications", f"must be an integer >= 1, got {design.replications}")
    _check_generators(design, src)
    _check_columns(design, src)


def _check_factors(factors: tuple[Factor, ...], src: str) -> None:
    if not factors:
        raise _fail(src, "factors", "at least one factor is required")
    seen_letters: set[str] = set()
    seen_names: dict[str, str] = {}
    seen_knobs: dict[str, str] = {}
    for f in factors:
        where = f"factors.{f.letter}"
        if not (isinstance(f.letter, str) and len(f.letter) == 1 and "A" <= f.letter <= "Z"):
            raise _fail(src, "factors", f"factor letter {f.letter!r} is not a single A-Z letter")
        if f.letter in seen_letters:
            raise _fail(src, where, f"duplicate factor letter {f.letter!r}")
        seen_letters.add(f.letter)
        if f.name in seen_names:
            raise _fail(
                src,
                f"{where}.name",
                f"duplicate factor name {f.name!r} (also {seen_names[f.name]})",
            )
        seen_names[f.name] = where
        if len(f.levels) != 2:
            raise _fail(
                src, f"{where}.levels", f"needs exactly 2 levels, got {len(f.levels)}: {f.levels!r}"
            )
        if f.levels[0] == f.levels[1]:
            raise _fail(src, f"{where}.levels", f"duplicate level label {f.levels[0]!r}")
        if f.fold or not f.sets and f.name not in knobs.SHORTHANDS:
            continue  # fine for analysis; measuring it needs `sets:` (ybscale.design.row says so)
        field_name = f"{where}.sets" if f.sets else f"{where}.name"
        try:
            knob = f.knob
            knobs.parse(knob)
        except knobs.KnobError as exc:
            raise _fail(src, field_name, str(exc)) from None
        if knob in seen_knobs:
            raise _fail(
                src,
                field_name,
                f"sets {knob}, which {seen_knobs[knob]} sets too: one knob, one factor",
            )
        seen_knobs[knob] = where


def _check_generators(design: Design, src: str) -> None:
    letters = set(design.letters)
    rhs_of = {k: _parse_generator(v)[1] for k, v in design.generators.items()}
    for letter, text in design.generators.items():
        where = f"generators.{letter}"
        if letter not in letters:
            raise _fail(src, where, f"generated factor {letter!r} is not declared in factors")
        users = [k for k, rhs in rhs_of.items() if letter in rhs]
        if users:
            raise _fail(
                src,
                where,
                f"{letter!r} is a base factor (used in generators.{users[0]}: "
                f"{design.generators[users[0]]!r}) and cannot be generated",
            )
        rhs = rhs_of[letter]
        for r in rhs:
            if r not in letters:
                raise _fail(src, where, f"unknown factor {r!r} in {text!r}")
        if len(set(rhs)) != len(rhs):
            raise _fail(src, where, f"repeated letter in {text!r}")
        if len(rhs) < 2:
            raise _fail(src, where, f"needs at least 2 base factors, got {text!r}")


def _check_columns(design: Design, src: str) -> None:
    """No two factor columns may be equal (or opposite): they could not be separated."""
    cols = design._column_lists
    for a, b in combinations(design.letters, 2):
        neg = [-x for x in cols[b]]
        if cols[a] == cols[b] or cols[a] == neg:
            gen = b if b in design.generators else a
            raise _fail(
                src,
                f"generators.{gen}",
                f"makes column {b} identical to column {a} (up to sign); "
                f"{a} and {b} would be completely confounded",
            )


def _validate_schema(data: object, source: str) -> None:
    errors = schema_errors(settings.schema("design"), data)
    if errors:
        lines = _renamed_keys(data, source)
        for err in errors:
            where = ".".join(str(p) for p in err.absolute_path) or "<top level>"
            lines.append(f"{source}: {where}: {explained(err)}")
        raise DesignError("\n".join(lines))


def _renamed_keys(data: object, source: str) -> list[str]:
    """Errors for keys an older version wrote: a fold-over design's `block: true` is `fold`."""
    factors = data.get("factors") if isinstance(data, dict) else None
    return [
        f"{source}: factors.{letter}.block: renamed to `fold` (the fold-over column "
        "`ybscale next` writes; `block` is the replicate block of the run order): write fold: true"
        for letter, spec in (factors.items() if isinstance(factors, dict) else ())
        if isinstance(spec, dict) and "block" in spec
    ]


def design_from_dict(data: object, source: str = "<memory>") -> Design:
    """Build a Design from parsed YAML, validating schema and semantics (defaults filled)."""
    _validate_schema(data, source)
    data = settings.fill_defaults(settings.schema("design"), dict(data))
    factors = tuple(
        Factor(
            letter=str(letter),
            name=spec["name"],
            levels=tuple(spec["levels"]),
            description=spec.get("description", ""),
            sets=spec.get("sets"),
            fold=bool(spec.get("fold", False)),
        )
        for letter, spec in data["factors"].items()
    )
    return Design(
        factors=factors,
        generators={str(k): v for k, v in (data.get("generators") or {}).items()},
        replications=data["replications"],
        source=source,
        blocks=int(data.get("blocks", 1)),
        block_generators=tuple(data.get("block_generators") or ()),
        center_points=int(data.get("center_points", 0)),
    )


def design_from_record(record: dict, source: str = "<memory>") -> Design:
    """The Design a design record holds (`design_dict`'s fields: results/design/design.json),
    validated as the YAML it came from."""
    factors = {}
    for f in record["factors"]:
        spec = {"name": f["name"], "levels": list(f["levels"])}
        if f.get("description"):
            spec["description"] = f["description"]
        if f.get("sets") is not None:
            spec["sets"] = f["sets"]
        if f.get("fold"):
            spec["fold"] = True
        factors[f["letter"]] = spec
    data = {"factors": factors, "replications": record["replications"]}
    if record.get("generators"):
        data["generators"] = dict(record["generators"])
    if record.get("blocks", 1) > 1:
        data["blocks"] = record["blocks"]
        data["block_generators"] = list(record["block_generators"])
    if record.get("center_points", 0) > 0:
        data["center_points"] = record["center_points"]
    design = design_from_dict(data, source)
    return dataclasses.replace(design, source=record.get("source", source))


def load_design(path: str | Path) -> Design:
    """Read, validate and build the design in ``path``: a design YAML, or the design record a
    study's design rule wrote (``.json``: `ybscale.design.record`)."""
    source = str(path)
    if source.endswith(".json"):
        try:
            return design_from_record(json.loads(Path(path).read_text(encoding="utf-8")), source)
        except OSError as exc:
            raise DesignError(f"{source}: <file>: cannot read: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise DesignError(f"{source}: <file>: not a design record: {exc}") from exc
    try:
        data = read_yaml_file(path)
    except FileError as exc:
        raise DesignError(str(exc)) from None
    return design_from_dict(data, str(path))


# --------------------------------------------------------------------------- outputs


def design_dict(design: Design) -> dict:
    """JSON-ready description of the design."""
    res = design.resolution
    return {
        "source": design.source,
        "factors": [
            {
                "letter": f.letter,
                "name": f.name,
                "levels": list(f.levels),
                "description": f.description,
                "sets": f.sets or knobs.SHORTHANDS.get(f.name),  # None: analysed only
                "generated": f.letter in design.generators,
                **({"fold": True} if f.fold else {}),
            }
            for f in design.factors
        ],
        "base": design.base,
        "generators": dict(design.generators),
        "defining_relation": design.defining_relation_string(),
        "defining_words": design.defining_relation(),
        "resolution": None if math.isinf(res) else res,
        "n_rows": design.n_rows,
        "replications": design.replications,
        "n_runs": design.n_runs,
        "aliases": [{"term": t, "members": m} for t, m in design.alias_groups()],
        **(
            {
                "blocks": design.blocks,
                "block_generators": list(design.block_generators),
                "block_aliases": [design.alias_string(w) for w in design.block_words()],
                "row_blocks": design.row_blocks,
            }
            if design.blocks > 1
            else {}
        ),  # fmt: skip
        **(
            {
                "center_points": design.center_points,
                "center_runs": design.center_run_ids,
                "center_levels": {
                    f.name: design.center_levels[f.letter]
                    for f in design.factors
                    if f.letter in design.center_levels
                },
                # the factors without a middle, held at each of their levels, and where each
                # centre run is: its block and those factors' levels
                "center_held": [design.factor(x).name for x in design.center_held],
                "center_placement": {
                    run: {
                        **({"block": block} if design.blocks > 1 else {}),
                        **{
                            design.factor(x).name: design.factor(x).level(signs[x])
                            for x in design.center_held
                        },
                    }
                    for run, (block, signs) in zip(
                        design.center_run_ids, design._center_placement, strict=True
                    )
                },
            }
            if design.center_points
            else {}
        ),  # fmt: skip
    }


def write_design_outputs(
    design: Design,
    out_dir: str | Path | None = None,
    content: dict | None = None,
    **paths: str | Path,
) -> dict[str, Path]:
    """Write the sign table, alias table and design summary (`content`, by default
    `design_dict`; the design rule's is the study's record): to the paths given as
    ``sign_table=``, ``aliases=``, ``summary=``, else as sign_table.csv, aliases.csv and
    design.json in ``out_dir``."""
    import pandas as pd

    names = {"sign_table": "sign_table.csv", "aliases": "aliases.csv", "summary": "design.json"}
    paths = {key: Path(paths.get(key) or Path(out_dir) / name) for key, name in names.items()}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    table = design.measured_table()  # the centre runs (all letters 0) after the rest
    for f in design.factors:
        table[f.name] = [
            design.center_levels[f.letter] if s == 0 else f.level(s) for s in table[f.letter]
        ]
    table.to_csv(paths["sign_table"])

    aliases = pd.DataFrame(
        [(t, design.alias_string(t)) for t in design.terms], columns=["term", "alias"]
    )
    aliases.to_csv(paths["aliases"], index=False)
    with open(paths["summary"], "w", encoding="utf-8") as fh:
        json.dump(content or design_dict(design), fh, indent=2)
        fh.write("\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    """``python -m ybscale.design.factorial DESIGN.yaml OUT_DIR``, or each output named."""
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(
        prog="ybscale.design.factorial", description=cli_description(__doc__)
    )
    parser.add_argument("design", help="design YAML file")
    parser.add_argument("out_dir", nargs="?", help="folder for all three (or name each one)")
    parser.add_argument("--sign-table", help="sign table CSV")
    parser.add_argument("--aliases", help="alias table CSV")
    parser.add_argument("--summary", help="design summary JSON")
    parser.add_argument("--backend", help="the backend the rows run on (with --clusters)")
    parser.add_argument("--clusters", nargs="*", metavar="RUN=CLUSTER", help="shared clusters")
    args = parser.parse_args(argv)
    named = {"sign_table": args.sign_table, "aliases": args.aliases, "summary": args.summary}
    if args.out_dir is None and not all(named.values()):
        parser.error("give OUT_DIR or all of --sign-table, --aliases, --summary")
    if args.clusters is not None and not args.backend:
        parser.error("--clusters needs --backend (the strata note names the backend)")
    try:
        design = load_design(args.design)
    except DesignError as exc:
        print(exc, file=sys.stderr)
        return 1
    content = None
    if args.clusters is not None:  # the error strata of the rows as the backend runs them
        from ybscale.design.strata import describe, parse_clusters

        try:
            clusters = parse_clusters(args.clusters)
        except ValueError as exc:
            print(f"ybscale design: {exc}", file=sys.stderr)
            return 2
        content = {**design_dict(design), "strata": describe(design, clusters, args.backend)}
    write_design_outputs(design, args.out_dir, content, **named)
    print(design.headline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
