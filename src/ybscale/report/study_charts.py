"""Every chart of a study, drawn in one job (the `charts` rule): the throughput against clients
and second by second for every row, the analysis charts (Pareto, half-normal, interactions,
residuals) and a panel per response. One process pays altair's import and vl-convert's
JavaScript engine once, where a job per chart paid them three times (about 1.6 CPU-seconds
each on a 2-core machine: `docs/NOTEBOOK.md`, "The test suite's time").

``python -m ybscale.report.study_charts --design D --ceilings C --effects E --residuals R
--pareto P.svg --half-normal H.svg --interactions DIR --residual-charts DIR --responses S.svg
--throughput T.svg --per-second PS.svg RUN_DIR ...``: the paths the rule names, and exactly
its runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ybscale.report.charts import AnalysisChartPaths, draw_analysis_charts, save, throughput_charts
from ybscale.report.response_charts import responses_chart


def draw_study_charts(
    design: Path, ceilings: Path, effects: Path, residuals: Path, runs: Sequence[Path],
    analysis: AnalysisChartPaths, responses: Path, throughput: Path, per_second: Path,
) -> list[Path]:  # fmt: skip
    """The study's charts from the files the pipeline wrote, where the arguments say; every
    path written (an .svg and an .html beside it for each chart)."""
    paths = throughput_charts(runs, ceilings, throughput=throughput, per_second=per_second)
    # the main response's (ceilings.csv's `response` column: the first of analysis.responses)
    paths += draw_analysis_charts(design, ceilings, "response", effects, residuals, analysis)
    paths += save(responses_chart(pd.read_csv(effects)), Path(responses).with_suffix(""))
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ybscale.report.study_charts", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (results/runs/<run>)")
    parser.add_argument("--design", required=True, type=Path, help="design record")
    parser.add_argument("--ceilings", required=True, type=Path, help="ceilings.csv")
    parser.add_argument("--effects", required=True, type=Path, help="effects.csv")
    parser.add_argument("--residuals", required=True, type=Path, help="residuals.csv")
    for name in ("pareto", "half-normal", "responses", "throughput", "per-second"):
        parser.add_argument(f"--{name}", required=True, type=Path, help="this chart (.svg)")
    for name in ("interactions", "residual-charts"):
        parser.add_argument(f"--{name}", required=True, type=Path, help="these charts' folder")
    args = parser.parse_args(argv)
    analysis = AnalysisChartPaths(
        args.pareto, args.half_normal, args.interactions, args.residual_charts
    )
    paths = draw_study_charts(
        args.design, args.ceilings, args.effects, args.residuals, args.runs, analysis,
        args.responses, args.throughput, args.per_second,
    )  # fmt: skip
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
