"""The package's stages import only downward (docs/ARCHITECTURE.md "Stages"): every import,
function-level ones included, goes from a stage to itself or to one before it."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the order of docs/ARCHITECTURE.md: each stage may import the ones before it
STAGES = ("core", "design", "measure", "backends", "analysis", "report", "top")
TOP = {"ybscale.study", "ybscale.plan", "ybscale.cli"}  # the study as a whole and its verbs
FOLDERS = {"design", "measure", "backends", "analysis", "report"}


def graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (bench/import_graph: every import statement,
    at module level or inside a function)."""
    found = runpy.run_path(str(ROOT / "bench" / "import_graph"))["graph"]()
    return {m: set(deps) for m, deps in found.items()}


def stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FOLDERS:
        return parts[1]
    return "top" if module in TOP else "core"


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import from a stage to a later one, as 'module -> dependency (stage -> stage)'."""
    return [
        f"{m} -> {d} ({stage(m)} -> {stage(d)})"
        for m, deps in sorted(edges.items())
        for d in sorted(deps)
        if STAGES.index(stage(d)) > STAGES.index(stage(m))
    ]


def test_stages_import_only_downward():
    assert upward(graph()) == []


def test_the_architecture_document_states_the_order():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert " → ".join(STAGES) in text


def test_function_level_imports_are_seen():
    """graph() reads imports inside functions too (a lazy import is still an arrow)."""
    deps = graph()["ybscale.settings"]
    assert "ybscale.registry" in deps  # imported inside settings.load


# the stage loops this test was written against (one arrow of each, as they were on ce00f13)
LOOPS = [
    ("ybscale.design.strata", "ybscale.analysis.effects"),  # design <-> analysis
    ("ybscale.design.power", "ybscale.report.study_files"),  # design <-> report
    ("ybscale.design.row", "ybscale.measure.workload"),  # design <-> measure
    ("ybscale.measure.pgbench", "ybscale.backends.base"),  # backends <-> measure
    ("ybscale.design.strata", "ybscale.backends"),  # backends <-> design
    ("ybscale.settings", "ybscale.backends"),  # backends <-> settings
    ("ybscale.analysis.analyze", "ybscale.report.charts"),  # analysis <-> report
]


@pytest.mark.parametrize(("module", "dependency"), LOOPS)
def test_each_former_loop_would_fail(module, dependency):
    edges = graph()
    edges.setdefault(module, set()).add(dependency)
    assert any(line.startswith(f"{module} -> {dependency} ") for line in upward(edges))


def test_a_local_study_needs_no_cloud_package():
    """Pulumi and the GCP provider are the gcp extra: loading and checking a local study (what
    the Snakefile does at parse time) imports neither."""
    import subprocess
    import sys

    code = (
        "import sys, yaml; from ybscale import study; "
        "study.load(yaml.safe_load(open('config/config.yaml'))); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_gcp')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_tests_follow_the_stages_and_only_the_shipped_studys_tests_read_its_design():
    """A test lives in its stage's folder (`pipeline/`: the product's commands on whole
    studies, the top stage); unit tests build their designs with tests/designs.py, so editing
    the user's config/design.yaml changes only the tests of the shipped study."""
    tests = ROOT / "tests"
    files = list(tests.rglob("test_*.py"))
    assert not [p.name for p in files if p.parent == tests]
    folders = {p.parent.name for p in files}
    assert folders == {*STAGES[:-1], "pipeline"}
    # the checkout's own file (a copied workflow's is a pipeline test's, on the shipped study)
    shipped = {"test_package.py", "test_gcp_profile.py"}  # the shipped config and design
    reads = re.compile(r"(ROOT|REPO|parents\[\d\]) / " + '"config" / "design[.]yaml"')
    readers = {p.name for p in files if reads.search(p.read_text())}
    assert readers <= shipped, readers - shipped
