"""The findings name the load generators when they are the bottleneck (issue 38)."""

from __future__ import annotations


def test_the_findings_name_the_generators_when_they_are_the_bottleneck():
    import pandas as pd

    from ybscale.report.bottlenecks import generator_text

    rows = pd.DataFrame(
        {
            "run": ["run01", "run02", "run03"],
            "bottleneck": ["client1", "tserver0", "client"],
            "bottleneck_utilisation": [0.99, 0.97, 0.98],
        }
    )
    text = generator_text(rows)
    assert text.startswith("2 of 3 rows are client-bound")
    assert "run01 client1, run03 client" in text and "gcp.load_generators" in text
    assert generator_text(rows.iloc[[1]]).startswith("0 of 1 rows are client-bound")
