"""`ybscale analyze`: the analysis of any responses table (`ybscale.analysis.analyze`) with its
charts (`ybscale.report.charts`), the report stage composing the two."""

from __future__ import annotations

import sys

from ybscale.analysis import analyze
from ybscale.report.charts import AnalysisChartPaths


def main(argv: list[str] | None = None) -> int:
    """`ybscale analyze ...` (see `ybscale.analysis.analyze.main`), charts drawn unless
    `--no-charts`."""
    return analyze.main(argv, charts=AnalysisChartPaths)


if __name__ == "__main__":
    sys.exit(main())
