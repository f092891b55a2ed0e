"""A table of responses, one line per design run, read against its design (`read_responses`).

The responses CSV has one line per design run, identified either by a ``run`` column (run01, ...)
or by factor columns: letters (A, B, ...) holding -1/+1 (or -/+), or factor names holding level
labels (operation_size = 1, workload = read). Base factors are required; generated factors, when
present, must agree with the design. An optional ``replicate`` column picks the replicate; without
it, repeated combinations are taken as replicates 1, 2, ... in file order (which only names the
runs: a completely randomized analysis does not depend on it). A ``block`` column (or the column
named by ``block``, e.g. ``replicate``) says which block each run was measured in: the result's
``block`` column, which the analysis takes out of the error. Blocking by replicate needs an
explicit ``replicate`` column: file order is no record of how the runs were blocked. Lines
starting with # are comments.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ybscale.files import TableError, read_table

_PLUS = {"1", "+1", "+", "1.0", "+1.0"}
_MINUS = {"-1", "-", "-1.0"}


class ResponsesError(ValueError):
    """A malformed responses table; the message names the file and the row or column."""


# ---------------------------------------------------------------------------- reading


def _read_csv(path: Path) -> pd.DataFrame:
    """All cells as stripped strings ('' when empty)."""
    try:
        frame = read_table(path, dtype=str, keep_default_na=False, comment="#")
    except TableError as exc:
        raise ResponsesError(str(exc)) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.columns.duplicated().any():
        dup = frame.columns[frame.columns.duplicated()][0]
        raise ResponsesError(f"{path}: column '{dup}' appears twice")
    if frame.empty:
        raise ResponsesError(f"{path}: no data rows")
    return frame.apply(lambda col: col.str.strip())


def _id_columns(frame: pd.DataFrame, design) -> list[str]:
    """Columns that identify a run (run, row, replicate, factor letters and names)."""
    names = {"run", "row", "replicate"} | set(design.letters) | {f.name for f in design.factors}
    return [c for c in frame.columns if c in names]


def _run_number(value: str) -> int | None:
    """'run07' or 'run7' -> 7."""
    match = re.fullmatch(r"run0*(\d+)", value.strip(), flags=re.IGNORECASE)
    return int(match.group(1)) if match else None


def _runs_by_id(frame: pd.DataFrame, design, path: Path) -> list[str]:
    """Design run ids from a `run` column."""
    runs = design.run_ids
    out = []
    for i, value in enumerate(frame["run"], start=1):
        number = _run_number(value)
        if number is None or not 1 <= number <= len(runs):
            raise ResponsesError(
                f"{path}: row {i}, column 'run': unknown run id {value!r} "
                f"(the design has {runs[0]} .. {runs[-1]})"
            )
        out.append(runs[number - 1])
    return out


def _sign(value: str, letter: str, path: Path, i: int) -> int:
    """'+1'/'1'/'+' -> 1, '-1'/'-' -> -1."""
    if value in _PLUS:
        return 1
    if value in _MINUS:
        return -1
    raise ResponsesError(f"{path}: row {i}, column '{letter}': {value!r} is not -1 or +1")


def _same_label(value: str, label: object) -> bool:
    """Cell text equals a level label (numbers compared as numbers)."""
    if value == str(label):
        return True
    try:
        return float(value) == float(label)
    except (TypeError, ValueError):
        return False


def _level_sign(value: str, factor, path: Path, i: int) -> int:
    """Sign of a level label of a factor."""
    for sign, label in ((-1, factor.levels[0]), (1, factor.levels[1])):
        if _same_label(value, label):
            return sign
    levels = ", ".join(repr(str(v)) for v in factor.levels)
    raise ResponsesError(
        f"{path}: row {i}, column '{factor.name}': level {value!r} is not in the design "
        f"(levels: {levels})"
    )


def _row_signs(frame: pd.DataFrame, design, path: Path) -> list[dict[str, int]]:
    """Per line: letter -> sign, from letter columns or factor-name columns."""
    out = []
    for i, (_, line) in enumerate(frame.iterrows(), start=1):
        signs: dict[str, int] = {}
        for f in design.factors:
            if f.letter in frame.columns:
                signs[f.letter] = _sign(line[f.letter], f.letter, path, i)
            elif f.name in frame.columns:
                signs[f.letter] = _level_sign(line[f.name], f, path, i)
        out.append(signs)
    return out


def _check_base_columns(frame: pd.DataFrame, design, path: Path) -> None:
    missing = [
        f"{f.letter} ({f.name})"
        for f in design.factors
        if f.letter in design.base and f.letter not in frame.columns and f.name not in frame.columns
    ]
    if missing:
        raise ResponsesError(
            f"{path}: no 'run' column and no column for base factor(s) {', '.join(missing)}"
        )


def _replicates(frame: pd.DataFrame, design, path: Path) -> list[int | None]:
    """The replicate column as ints, or None per line when absent."""
    if "replicate" not in frame.columns:
        return [None] * len(frame)
    out = []
    for i, value in enumerate(frame["replicate"], start=1):
        if not value.isdigit() or not 1 <= int(value) <= design.replications:
            raise ResponsesError(
                f"{path}: row {i}, column 'replicate': {value!r} is not a replicate "
                f"1..{design.replications}"
            )
        out.append(int(value))
    return out


def _runs_by_factors(frame: pd.DataFrame, design, path: Path) -> list[str]:
    """Design run ids from factor columns (and the optional replicate column)."""
    _check_base_columns(frame, design, path)
    table = design.sign_table()
    row_of = {
        tuple(int(s[b]) for b in design.base): int(s["row"])
        for _, s in table[table["replicate"] == 1].iterrows()
    }
    expected = {int(s["row"]): s for _, s in table[table["replicate"] == 1].iterrows()}
    reps = _replicates(frame, design, path)
    seen: dict[int, int] = {}
    out = []
    lines = zip(_row_signs(frame, design, path), reps, strict=True)
    for i, (signs, rep) in enumerate(lines, start=1):
        row = row_of[tuple(signs[b] for b in design.base)]
        for letter, sign in signs.items():
            if expected[row][letter] != sign:
                raise ResponsesError(
                    f"{path}: row {i}: combination {_describe(signs)} is not in the fraction "
                    f"({letter} must be {int(expected[row][letter]):+d} here)"
                )
        rep = rep if rep is not None else seen.get(row, 0) + 1
        seen[row] = max(seen.get(row, 0), rep)
        if rep > design.replications:
            raise ResponsesError(
                f"{path}: row {i}: combination {_describe(signs)} appears more than "
                f"{design.replications} time(s)"
            )
        out.append(design.run_ids[(rep - 1) * design.n_rows + row - 1])
    return out


def _describe(signs: dict[str, int]) -> str:
    return " ".join(f"{k}={v:+d}" for k, v in sorted(signs.items()))


def _check_coverage(runs: list[str], design, path: Path) -> None:
    """Every design run exactly once."""
    seen: dict[str, int] = {}
    for i, run in enumerate(runs, start=1):
        if run in seen:
            raise ResponsesError(
                f"{path}: row {i}: run {run} ({_describe(design.signs(run))}) duplicates "
                f"row {seen[run]}"
            )
        seen[run] = i
    missing = [r for r in design.run_ids if r not in seen]
    if missing:
        shown = ", ".join(f"{r} ({_describe(design.signs(r))})" for r in missing[:4])
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        raise ResponsesError(f"{path}: missing run(s) {shown}{more}")


def _check_run_signs(frame: pd.DataFrame, runs: list[str], design, path: Path) -> None:
    """With a run column, factor columns present must agree with the design."""
    lines = zip(runs, _row_signs(frame, design, path), strict=True)
    for i, (run, signs) in enumerate(lines, start=1):
        want = design.signs(run)
        for letter, sign in signs.items():
            if want[letter] != sign:
                raise ResponsesError(
                    f"{path}: row {i}: {run} has {letter}={want[letter]:+d} in the design, "
                    f"the file says {sign:+d}"
                )


def _numeric(frame: pd.DataFrame, column: str, path: Path) -> pd.Series:
    """A response column as floats; missing or non-numeric cells are errors."""
    for i, value in enumerate(frame[column], start=1):
        if value == "":
            raise ResponsesError(f"{path}: row {i}, column '{column}': missing value")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise ResponsesError(f"{path}: row {i}, column '{column}': {value!r} is not a number")
    return frame[column].astype(float)


def _pick_response(frame: pd.DataFrame, ids: list[str], response: str | None, path: Path) -> str:
    """The response column: the one asked for, or the only numeric non-identifying one."""
    if response is not None:
        if response not in frame.columns:
            found = ", ".join(c for c in frame.columns if c not in ids) or "none"
            raise ResponsesError(f"{path}: no response column '{response}' (found: {found})")
        return response
    candidates = [
        c
        for c in frame.columns
        if c not in ids and pd.to_numeric(frame[c], errors="coerce").notna().any()
    ]
    if len(candidates) != 1:
        listed = ", ".join(candidates) or "none"
        raise ResponsesError(
            f"{path}: cannot tell the response column; pass --response (numeric columns: {listed})"
        )
    return candidates[0]


def _block_column(frame: pd.DataFrame, block: str | None, path: Path) -> str | None:
    """The column holding each run's block: `block` when named, else ``block`` if present."""
    if block is None and "block" not in frame.columns:
        return None
    block = "block" if block is None else block
    if block not in frame.columns:
        hint = ""
        if block == "replicate":
            hint = (
                " (replicates as blocks need the replicate of every line: without a replicate "
                "column repeated combinations are only numbered in file order)"
            )
        raise ResponsesError(f"{path}: no block column '{block}'{hint}")
    if (frame[block] == "").any():
        line = int((frame[block] == "").to_numpy().argmax()) + 1
        raise ResponsesError(f"{path}: row {line}, column '{block}': no block given")
    return block


def _at_middle(cell: str, factor) -> bool:
    """Whether a factor-name cell holds the factor's middle: the arithmetic middle of its two
    numeric levels, or the design's (`ybscale.design.factorial.middle`: rounded for integer
    levels, as a study measures it)."""
    from ybscale.design.factorial import middle

    mid, _ = middle(factor)
    try:
        value = float(cell)
        low, high = (float(v) for v in factor.levels)
    except (TypeError, ValueError):
        return False
    return mid is not None and (value == (low + high) / 2 or value == float(mid))


def _centre_cell(line, f, columns, path: Path, i: int) -> int | None:
    """A factor's cell on a line: 0 at its middle, -1/+1 at a level, None when the line does
    not give the factor (a generated factor left out)."""
    if f.letter in columns:
        cell = str(line[f.letter]).strip()
        if cell in ("0", "0.0", "+0", "-0"):
            return 0
        return _sign(cell, f.letter, path, i) if cell in _PLUS | _MINUS else None
    if f.name in columns:
        cell = str(line[f.name]).strip()
        if _at_middle(cell, f):
            return 0
        for sign, label in ((-1, f.levels[0]), (1, f.levels[1])):
            if _same_label(cell, label):
                return sign
    return None


def _center_lines(frame: pd.DataFrame, design, path: Path) -> list[dict[str, int] | None]:
    """Per line: None for a factorial line, or a centre line's signs (letter -> 0 at the
    middle; -1/+1 for a factor with no middle, `ybscale.design.factorial.middle`, which a
    centre run holds at one of its levels, as Minitab and JMP cross centre points with a
    categorical factor). A line is a centre line when some factor sits at its middle; then
    every factor with a middle must, and every factor without one must be at a level. Anything
    else is refused naming the row."""
    from ybscale.design.factorial import middle

    flat = {f.letter for f in design.factors if middle(f)[0] is None}
    out: list[dict[str, int] | None] = []
    for i, (_, line) in enumerate(frame.iterrows(), start=1):
        at = {f.letter: _centre_cell(line, f, frame.columns, path, i) for f in design.factors}
        named = _run_number(line["run"]) if "run" in frame.columns else None
        if all(v is None for v in at.values()) and named is not None and design.center_points:
            ids = design.all_run_ids  # a line named by its run id alone: the design's levels
            if 1 <= named <= len(ids) and design.is_center(ids[named - 1]):
                out.append(design.signs(ids[named - 1]))
                continue
        if not any(v == 0 for v in at.values()):
            out.append(None)  # a factorial line (read and checked as one)
            continue
        off = [k for k, v in at.items() if v != 0 and k not in flat and v is not None]
        if off:
            centred = ", ".join(k for k, v in at.items() if v == 0)
            raise ResponsesError(
                f"{path}: row {i}: {centred} at the centre but not {', '.join(off)}: a centre "
                "point sets every factor that has a middle to the middle of its numeric levels "
                "(only a factor without one, such as read/write or 1/2 bands, is held at one of "
                "its levels)"
            )
        middled = [design.factor(k).name for k, v in at.items() if v == 0 and k in flat]
        if middled:
            raise ResponsesError(f"{path}: row {i}: {', '.join(middled)} has no middle (its "
                                 "levels are not numbers with one between them): a centre "
                                 "run holds it at one of its levels")  # fmt: skip
        missing = [design.factor(k).name for k, v in at.items() if v is None and k in flat]
        if missing:
            raise ResponsesError(f"{path}: row {i}: a centre row must give the level of "
                                 f"{', '.join(missing)} (it has no middle)")  # fmt: skip
        out.append({k: (0 if v is None else v) for k, v in at.items()})
    return out


def _check_center_blocks(lines: list, blocks: pd.Series | None, path: Path) -> None:
    """Centre rows with a block column: every block holds centre rows and no centre row is in
    a block without factorial rows. Refused naming the rows otherwise."""
    centre = [i for i, x in enumerate(lines) if x is not None]
    if blocks is None or not centre:
        return
    factorial = {str(b) for i, b in enumerate(blocks) if lines[i] is None}
    where: dict[str, list[int]] = {}
    for i in centre:
        where.setdefault(str(blocks.iloc[i]), []).append(i + 1)
    for label, rows in where.items():
        if label not in factorial:
            raise ResponsesError(
                f"{path}: row {rows[0]}: a centre row in block {label!r}, which holds no "
                "factorial row: its curvature cannot be told from the block"
            )
    bare = sorted(factorial - set(where))
    if bare:
        shown = ", ".join(f"row {i + 1} in block {blocks.iloc[i]}" for i in centre)
        raise ResponsesError(
            f"{path}: block {', '.join(repr(b) for b in bare)} holds no centre row (centre "
            f"rows: {shown}): with blocks, every block needs its own centre runs (the "
            "curvature and the pure error are measured within the blocks)"
        )


def _check_pure_error(
    lines: list, runs: list[str], blocks: pd.Series | None, design, path: Path
) -> None:
    """Centre runs in blocks or beside a factor without a middle are tested on the pure error
    (`ybscale.analysis.centre`): runs at one point of one block, two or more (centre runs at
    the same levels, or replicated corners). Refused naming the centre rows when there is
    none."""
    centre = [i for i, x in enumerate(lines) if x is not None]
    held = any(v != 0 for i in centre for v in lines[i].values())
    if not centre or (blocks is None and not held):
        return  # plain centre points: Montgomery §6.8 (one centre run: no curvature test)
    label = (lambda i: str(blocks.iloc[i])) if blocks is not None else (lambda i: "")
    rows = dict(zip(design.run_ids, design.sign_table()["row"], strict=True))
    factorial = [i for i, x in enumerate(lines) if x is None]
    keys = [(label(i), "row", rows[run]) for i, run in zip(factorial, runs, strict=True)]
    keys += [(label(i), "centre", tuple(sorted(lines[i].items()))) for i in centre]
    if len(keys) > len(set(keys)):
        return
    where = " in block {}" if blocks is not None else ""
    alone = ", ".join(f"row {i + 1}" + where.format(label(i)) for i in centre)
    raise ResponsesError(
        f"{path}: no pure error: every centre row is alone at its levels"
        + (" in its block" if blocks is not None else "")
        + f" ({alone}) and no corner is repeated; two or more centre runs at the same levels"
        + (" of one block" if blocks is not None else "")
        + " measure the noise the effects and the curvature are tested against"
    )


def _center_ids(centers: pd.DataFrame, held: list, design, path: Path) -> list[str]:
    """The centre lines' ids: the design's centre runs a ``run`` column names (run17 ..: a
    study's ceilings.csv, their blocks and levels the design's), else center1, center2 ..."""
    numbers = [_run_number(v) for v in centers["run"]] if "run" in centers.columns else []
    if not design.center_points or not numbers:
        return [f"center{i}" for i in range(1, len(centers) + 1)]
    ids = design.all_run_ids
    out = []
    for i, number in zip(centers.index, numbers, strict=True):
        run = ids[number - 1] if number is not None and 1 <= number <= len(ids) else None
        if run is None or not design.is_center(run):
            raise ResponsesError(
                f"{path}: row {int(i) + 1}, column 'run': a centre line names "
                f"{centers.loc[i, 'run']!r}, which is not a centre run of the design "
                f"({', '.join(design.center_run_ids[:1] + design.center_run_ids[-1:])})"
            )
        given = {k: v for k, v in held[len(out)].items() if k in design.center_held}
        want = {k: v for k, v in design.signs(run).items() if k in design.center_held}
        if given != want:
            levels = ", ".join(f"{design.factor(k).name} {design.factor(k).level(v)}"
                               for k, v in want.items())  # fmt: skip
            raise ResponsesError(f"{path}: row {int(i) + 1}: {run} is the design's centre run "
                                 f"at {levels}; the line holds other levels")  # fmt: skip
        out.append(run)
    if len(set(out)) < len(out):
        raise ResponsesError(f"{path}: a centre run appears twice in the 'run' column")
    return out


def read_responses(
    path, design, response: str | None = None, block: str | None = None
) -> pd.DataFrame:
    """Responses indexed by the design's run ids (design order), with ``row``, ``replicate``
    (``block`` when the table has one, or `block` names one) and the response column(s); the
    chosen response column is ``result.attrs["response"]``."""
    path = Path(path)
    frame = _read_csv(path)
    block = _block_column(frame, block, path)
    ids = _id_columns(frame, design) + ([block] if block and block != "replicate" else [])
    column = _pick_response(frame, ids, response, path)
    lines = _center_lines(frame, design, path)
    _check_center_blocks(lines, frame[block] if block else None, path)
    centre = pd.Series([x is not None for x in lines], index=frame.index)
    held = [x for x in lines if x is not None]
    centers = frame[centre.to_numpy()]
    frame_blocks = frame[block].reset_index(drop=True) if block else None
    frame = frame[~centre.to_numpy()]
    if "run" in frame.columns:
        runs = _runs_by_id(frame, design, path)
        _check_run_signs(frame, runs, design, path)
    else:
        runs = _runs_by_factors(frame, design, path)
    _check_coverage(runs, design, path)
    _check_pure_error(lines, runs, frame_blocks, design, path)
    values = _numeric(frame, column, path)
    out = frame[[c for c in frame.columns if c not in ids]].copy()
    for c in out.columns:
        out[c] = values if c == column else pd.to_numeric(out[c], errors="coerce")
    out.index = pd.Index(runs, name="run")
    signs = design.sign_table()
    out.insert(0, "replicate", signs.loc[runs, "replicate"].to_numpy())
    out.insert(0, "row", signs.loc[runs, "row"].to_numpy())
    if block is not None:
        out.insert(2, "block", frame[block].to_numpy())
    out = out.loc[design.run_ids]
    out.attrs["response"] = column
    if len(centers):  # centre points: their responses apart (Montgomery §6.8)
        kept = centers[[c for c in centers.columns if c not in ids]].copy()
        for c in kept.columns:
            kept[c] = pd.to_numeric(kept[c], errors="coerce")
        kept[column] = _numeric(centers, column, path).to_numpy()
        kept.index = pd.Index(_center_ids(centers, held, design, path), name="run")
        if block is not None:
            kept.insert(0, "block", centers[block].to_numpy())
        out.attrs["center"] = kept
        # each centre run's letters: 0 at the middle, -1/+1 where a factor has none
        out.attrs["center_signs"] = pd.DataFrame(held, index=kept.index)[design.letters]
    return out
