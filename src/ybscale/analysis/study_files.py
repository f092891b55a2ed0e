"""The files of a measured and analysed study that the findings, `ybscale next` and
`ybscale plan --detect` read: named by the rules (exact paths), or found under a results
folder by the user-facing commands."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StudyFiles:
    """Effects, ceilings, outliers and ANOVA tables, and the folder of every row of the design."""

    effects: Path
    ceilings: Path
    outliers: Path
    runs: dict[str, Path]  # run id -> folder with measurement.json, throughput.csv, ...
    anova: Path | None = None  # anova.csv (its strata), when the caller has one
    rounds: Path | None = None  # the final round's decision (ybscale.analysis.rounds), if any

    @classmethod
    def from_paths(cls, effects, ceilings, outliers, runs: Iterable, anova=None) -> StudyFiles:
        """Exact paths as a rule names them; `runs`: the row folders (results/runs/<run>)."""
        folders = [Path(r) for r in runs]
        return cls(Path(effects), Path(ceilings), Path(outliers), {p.name: p for p in folders},
                   Path(anova) if anova else None)  # fmt: skip

    @classmethod
    def under(cls, results: Path | str, run_ids: Iterable[str]) -> StudyFiles:
        """What the rules write under `results` for the design's rows (for the commands a user
        points at a results folder); rows of another design in that folder are not read."""
        root = Path(results)
        return cls.from_paths(
            root / "effects.csv",
            root / "ceilings.csv",
            root / "outliers.csv",
            (root / "runs" / run for run in run_ids),
            root / "anova.csv",
        )

    def describe(self) -> str:
        return str(self.effects.parent)
