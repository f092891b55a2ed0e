"""What a reader sees of the report in a browser window: the findings on opening, nothing cut off.

The tiny study's report (conftest's shared `tiny_study`) is opened in headless Chromium at three
window sizes.
A script injected into a copy of report.html (tests/data/report_layout.js) measures the rendered
page with getBoundingClientRect(): the landing page at scroll position 0 and scrolled to its end,
then every result that opens inside the report (the charts), as its button opens it. Screenshots
at 1440×900 go to the test's temporary folder (printed with -s) for a person to look at.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from conftest import REPO
from test_report import run_chromium, with_script

# browser windows (the page's view is smaller: Chromium's frame takes its share, as on a desktop)
WINDOWS = [(1280, 720), (1440, 900), (1920, 1080)]
SCREENSHOT_WINDOW = (1440, 900)
PROBE = (REPO / "tests" / "data" / "report_layout.js").read_text(encoding="utf-8")
CHARTS = ("throughput", "per_second", "pareto", "half_normal", "interaction_", "residuals_")
PX = 1.0  # sub-pixel rounding of layout boxes

# opens one result at load, as its button does (for a screenshot of that page)
OPEN_RESULT = """
<script>
window.addEventListener("load", () => {
  const key = Object.keys(results).find(k => k.endsWith("%s"));
  const poll = setInterval(() => {
    if (!document.querySelector("#app").children.length) return;
    app.setView({content: "img", contentPath: results[key].data_uri, resultPath: key});
    clearInterval(poll);
  }, 100);
});
</script>
"""


def _chromium_run(page: Path, profile: Path, window: tuple[int, int], *args: str) -> str:
    return run_chromium(
        page, profile, f"--window-size={window[0]},{window[1]}", *args, budget_ms=30000
    )


@pytest.fixture(scope="module")
def layout_dir(tiny_study, tmp_path_factory) -> Path:
    work, report = tiny_study.work, tiny_study.report
    assert report.returncode == 0, report.stderr[-3000:]
    folder = tmp_path_factory.mktemp("report-layout")
    html = (work / "report.html").read_text(encoding="utf-8")
    (folder / "probe.html").write_text(with_script(html, f"<script>{PROBE}</script>"), "utf-8")
    (folder / "report.html").write_text(html, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def layouts(layout_dir) -> dict[tuple[int, int], dict]:
    """Per window size: the measured boxes (see tests/data/report_layout.js)."""
    found = {}
    for window in WINDOWS:
        profile = layout_dir / f"profile-{window[0]}"
        dom = _chromium_run(layout_dir / "probe.html", profile, window, "--dump-dom")
        match = re.search(r'<pre id="layout">(\{.*?)</pre>', dom, re.S)
        assert match, f"{window}: the page did not finish rendering (no measurements)"
        found[window] = json.loads(match.group(1).replace("&amp;", "&"))
    print("\nreport layout:", json.dumps({f"{w}x{h}": v for (w, h), v in found.items()}))
    return found


def _inside(box: dict, view: dict) -> bool:
    return (
        box["top"] >= view["top"] - PX
        and box["bottom"] <= view["bottom"] + PX
        and box["left"] >= view["left"] - PX
        and box["right"] <= view["right"] + PX
    )


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_the_report_opens_on_its_title_and_the_findings(layouts, window):
    landing = layouts[window]["landing"]
    view = landing["view"]
    assert landing["heading"]["text"] == "ybscale: a designed scalability study"
    assert _inside(landing["heading"], view), (landing["heading"], view)
    first = landing["findingsFirstLine"]
    assert first is not None, "no Findings section on the landing page"
    assert _inside(first, view), (first, view)


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_scrolling_the_landing_page_reaches_its_last_line(layouts, window):
    landing = layouts[window]["landing"]
    assert _inside(landing["lastLine"], landing["viewAtEnd"]), landing["lastLine"]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_every_chart_opens_at_its_top_and_scrolls_to_its_end(layouts, window):
    pages = layouts[window]["pages"]
    for chart in CHARTS:
        assert any(chart in key for key in pages), f"{chart}: not among the report's pages"
    for key, page in pages.items():
        first, view = page["first"], page["view"]
        # its top left corner is in the view when it opens, its bottom right once scrolled
        assert first["top"] >= view["top"] - PX and first["left"] >= view["left"] - PX, (key, page)
        assert first["top"] < view["bottom"] and first["left"] < view["right"], (key, page)
        end, at_end = page["end"], page["viewAtEnd"]
        assert end["bottom"] <= at_end["bottom"] + PX, (key, page)
        assert end["right"] <= at_end["right"] + PX, (key, page)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_screenshots_of_the_landing_page_and_a_chart(layout_dir):
    """For a person to look at (the paths are printed): the landing page and the throughput
    panels at 1440×900."""
    shots = {"landing": layout_dir / "report.html"}
    chart = layout_dir / "throughput.html"
    html = (layout_dir / "report.html").read_text(encoding="utf-8")
    chart.write_text(with_script(html, OPEN_RESULT % "throughput.svg"), encoding="utf-8")
    shots["throughput"] = chart
    for name, page in shots.items():
        png = layout_dir / f"{name}-{SCREENSHOT_WINDOW[0]}x{SCREENSHOT_WINDOW[1]}.png"
        profile = layout_dir / f"profile-shot-{name}"
        _chromium_run(page, profile, SCREENSHOT_WINDOW, f"--screenshot={png}")
        assert _png_size(png) == SCREENSHOT_WINDOW
        print(f"\nscreenshot: {png}")
