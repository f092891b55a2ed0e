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


def test_a_generator_busiest_below_saturation_is_not_the_bottleneck_and_auto_is_told():
    """One definition with auto's (`generators.client_bound`); the rows auto grew, and those
    still client-bound at its bound, named."""
    import pandas as pd

    from ybscale.report.bottlenecks import generator_text

    rows = pd.DataFrame(
        {
            "run": ["run01", "run02", "run03"],
            "bottleneck": ["client0", "client", "client1"],
            "bottleneck_utilisation": [0.97, 0.45, 0.99],
        }
    )
    growth = {
        "run01": {"bound": 2, "bound_reached": False,
                  "grown": [{"clients": 8, "generators": 1, "to": 2}]},
        "run03": {"bound": 2, "bound_reached": True,
                  "grown": [{"clients": 4, "generators": 1, "to": 2}]},
    }  # fmt: skip
    text = generator_text(rows, growth)
    assert text.startswith("2 of 3 rows are client-bound")
    assert "(run01 client0, run03 client1)" in text
    assert "There auto had reached its bound (run03 with all 2 load generators)" in text
    # how to raise it, on either backend that grows
    assert "(more logins in existing.load_generators; gcp.load_generators_max)" in text
    assert "Load generators added by auto where they were the bottleneck (run01 1 → 2 at 8 " in text
    assert "run03 1 → 2 at 4 clients)" in text
    assert generator_text(rows.iloc[[1]]).startswith("0 of 1 rows are client-bound")
