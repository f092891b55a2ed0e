"""The README sequence on the tiny config: the study, then the report, findings first and rendered.

The session's shared tiny study (conftest.tiny_study, also read by test_report_layout.py) ran
`snakemake --cores 2 --configfile config/test.yaml`, then `snakemake --report report.html
--configfile config/test.yaml`, on real PostgreSQL with its own RAM data root; the report is
opened in headless Chromium.
"""

from __future__ import annotations

import html as htmllib
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, data_root_of, failed, planned, servers_under
from test_findings import NUMBER, display_tolerance, parse_number

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no name resolves
]


def _workflow_description(html: str) -> str:
    """The report's first page (Snakemake embeds it as a JS string in #workflow-desc)."""
    match = re.search(
        r'<script id="workflow-desc">\s*var workflow_desc = (".*?");\s*</script>', html, re.S
    )
    assert match, "no workflow description in report.html"
    return htmllib.unescape(re.sub(r"<[^>]+>", "", json.loads(match.group(1))))


def test_report_builds_right_after_the_study(tiny_study):
    assert tiny_study.report.returncode == 0, failed(tiny_study.report)
    assert (tiny_study.work / "report.html").stat().st_size > 100_000
    assert servers_under(tiny_study.root) == []


def test_findings_page_first_with_the_numbers_of_effects_csv(tiny_study):
    work = tiny_study.work
    page = _workflow_description((work / "report.html").read_text(encoding="utf-8"))
    heads = ("Findings\nVerdicts.", "Design\nThe design file", "Measurement\n", "Analysis\n")
    sections = [page.find(s) for s in heads]
    assert -1 not in sections and sections == sorted(sections), sections
    findings = page[sections[0] : sections[1]]
    assert findings.split()[:2] == ["Findings", "Verdicts."]  # the verdicts lead (issue 57)
    assert findings.index("Verdicts.") < findings.index("The effects that stand out")
    # a column per response (analysis.responses' default: the ceiling, throughput per dollar)
    assert findings.index("the ceiling [95 % interval]") < findings.index("Response.")
    assert findings.index("throughput per dollar [95 % interval]") < findings.index("Response.")
    effects = pd.read_csv(work / "results/effects.csv")
    effects = effects[effects["response"] == "ceiling"]  # the prose's: the main response
    active = effects[effects["active"].astype(bool)]
    sizes = re.findall(
        rf"(raises|lowers|multiplies|divides) the ceiling by {NUMBER}(?: tps)? "
        rf"\[{NUMBER}, {NUMBER}\]; ([\d.]+) % of the variation",
        findings,
    )
    assert len(sizes) == len(active) > 0
    log = set(effects["model"]) == {"multiplicative"}  # analysis.model auto chose the log scale
    for (verb, size, lo, hi, pct), (_, row) in zip(sizes, active.iterrows(), strict=True):
        up = row["effect"] > 0
        assert verb == ({True: "multiplies", False: "divides"} if log else
                        {True: "raises", False: "lowers"})[up]  # fmt: skip
        if log:  # a ratio: 10^effect, or its inverse when it divides
            sign = 1 if up else -1
            row = row.copy()
            for c in ("effect", "ci_low", "ci_high"):
                row[c] = 10 ** (sign * row[c])
        assert parse_number(size) == pytest.approx(abs(row["effect"]), abs=display_tolerance(size))
        bounds = sorted(abs(v) for v in (row["ci_low"], row["ci_high"]))
        assert parse_number(lo) == pytest.approx(bounds[0], abs=display_tolerance(lo))
        assert parse_number(hi) == pytest.approx(bounds[1], abs=display_tolerance(hi))
        assert float(pct) == pytest.approx(row["variation_pct"], abs=0.05)
        assert row["alias"] in findings
    # the same text as results/findings.md
    md = (work / "results/findings.md").read_text(encoding="utf-8")
    for sentence in re.findall(r"the ceiling by [^;\n]+;", md):  # within one paragraph
        assert sentence in findings
    # the design part is written from the design
    assert "I = ABF = BCE = ACEF" in page and "generated E = BC" in page


def _chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed (setup.sh installs the Debian package chromium)")
    return exe


def run_chromium(page: Path, profile: Path, *args: str, budget_ms: int = 15000) -> str:
    """Headless Chromium on `page` with its own profile and `args` (--dump-dom, --screenshot=,
    --window-size=); its stdout."""
    out = subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _dump_dom(page: Path, profile: Path) -> str:
    return run_chromium(page, profile, "--dump-dom")


# opens charts of the report one after the other as a reader would (the view a result's button
# opens) and records the size the browser decoded each at; polls, since React renders the app
# asynchronously
SHOW_CHARTS = """
<script>
window.addEventListener("load", () => {
  const names = %s;
  let asked = null;
  const poll = setInterval(() => {
    if (!document.querySelector("#app").children.length) return;
    if (!names.length) { clearInterval(poll); return; }
    const key = Object.keys(results).find(k => k.endsWith(names[0]));
    if (asked !== key) {
      app.setView({content: "img", contentPath: results[key].data_uri, resultPath: key});
      asked = key;
      return;
    }
    const img = [...document.querySelectorAll("#app img")].find(
      i => i.src === results[key].data_uri);
    if (img && img.complete) {
      document.body.dataset[names[0].replace(/\\W/g, "_")] =
        img.naturalWidth + "x" + img.naturalHeight;
      names.shift();
    }
  }, 200);
});
</script>
"""


def with_script(html: str, script: str) -> str:
    """The report with a script before its last </body> (the others are inside JS strings)."""
    head, _, tail = html.rpartition("</body>")
    return head + script + "</body>" + tail


@pytest.mark.slow
def test_report_renders_offline_in_headless_chromium(tiny_study, tmp_path):
    report = tiny_study.work / "report.html"
    html = report.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)
    dom = _dump_dom(report, tmp_path / "profile1")
    text = " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", dom)).split())
    first = [text.find(s) for s in ("Findings Verdicts.", "Design The design file", "Backend:")]
    assert -1 not in first and first == sorted(first), first  # the landing page: findings first
    assert "instead of" in text and "of the variation" in text
    charts = ["pareto.svg", "throughput.svg", "per_second.svg"]
    page = tmp_path / "show-charts.html"
    page.write_text(with_script(html, SHOW_CHARTS % json.dumps(charts)), encoding="utf-8")
    dom = _dump_dom(page, tmp_path / "profile-charts")  # one browser opens the three in turn
    for chart in charts:
        size = re.search(rf'data-{chart.replace(".", "_")}="(\d+)x(\d+)"', dom)
        assert size, f"{chart}: not shown"
        assert int(size.group(1)) > 200 and int(size.group(2)) > 150, (chart, size.group(0))


def test_next_foldover_reuses_the_measured_rows(tiny_study, tmp_path):
    """`ybscale next` writes the combined design; the pipeline would measure only the new rows."""
    work, foldover = tiny_study.work, tmp_path / "design-foldover.yaml"
    out = subprocess.run(
        [sys.executable, "-m", "ybscale.cli", "next", "--analysis", "results"]
        + ["--out", str(foldover)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    jobs = planned(work, "results/effects.csv", "--config", f"design={foldover}")
    assert jobs["measure"] == {f"run{i}" for i in range(17, 33)}


def readme_commands() -> list[str]:
    """The README's "in this order:" block, one command per line, comments dropped."""
    text = (REPO / "README.md").read_text()
    block = text.split("in this order:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_readme_commands_work_in_the_documented_order(tiny_study_copy):
    """Every command the README documents after the quick start, as written, in its order
    (snakemake lines on the tiny config, in a copy: it re-measures a row and re-runs the study)."""
    work = tiny_study_copy
    root = data_root_of(work)
    (work / "report.html").unlink()  # the shared study's: the commands must write their own
    commands = readme_commands()
    assert len(commands) >= 8
    bindir = Path(sys.executable).parent
    for command in commands:
        argv = shlex.split(command.replace(".venv/bin/", f"{bindir}/"))
        if argv[0].endswith("snakemake") and "--configfile" not in argv:
            argv += ["--configfile", "config/test.yaml"]
        out = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, f"{command}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        if "--detect" in argv:
            assert "Replications needed" in out.stdout or "Not reachable" in out.stdout
        if "design=config/design-foldover.yaml" in argv:
            blocks = re.split(r"\n(?=rule )", out.stdout)
            measured = {
                re.search(r"wildcards: run=(run\d+)", b).group(1)
                for b in blocks
                if b.startswith("rule measure:")
            }
            assert measured and all(int(run[3:]) > 16 for run in measured), measured
    assert (work / "report.html").is_file() and (work / "out" / "effects.csv").is_file()
    assert (work / "config" / "design-foldover.yaml").is_file()
    assert servers_under(root) == []
