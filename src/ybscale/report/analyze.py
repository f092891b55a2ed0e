"""`ybscale analyze`: the analysis of any responses table (`ybscale.analysis.analyze`) with its
charts (`ybscale.report.charts`), the report stage composing the two."""

from __future__ import annotations

import sys

from ybscale.analysis import analyze
from ybscale.report.charts import AnalysisChartPaths
from ybscale.report.findings import write_table_findings


def main(argv: list[str] | None = None) -> int:
    """`ybscale analyze ...` (see `ybscale.analysis.analyze.main`), charts drawn unless
    `--no-charts`; with `--out DIR` the findings too (DIR/findings.md)."""
    return analyze.main(argv, charts=AnalysisChartPaths, findings=write_table_findings)


if __name__ == "__main__":
    sys.exit(main())
