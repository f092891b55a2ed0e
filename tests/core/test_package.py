"""The package stands on its own: a wheel installed outside the checkout, used from elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO, shipped_config

CHECK = """
import yaml
import ybscale, ybscale_infra
from ybscale import settings, study
from ybscale.backends.gcp import stacks
for name in ("config", "design", "gcp", "existing"):
    assert settings.schema(name)["type"] == "object", name
assert stacks._infra().ClusterArgs
loaded = study.load(yaml.safe_load(open({config!r})))
print(ybscale.__file__, ybscale_infra.__file__, len(loaded.rows), sep="\\n")
"""


def test_wheel_installed_elsewhere_works_from_another_directory(tmp_path):
    wheels, site, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    source = tmp_path / "source"  # built from a copy: the build leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "src", "infra"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("ybscale-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    config = shipped_config()
    config.update(design=str(REPO / "config" / "design.yaml"), workloads=str(REPO / "workloads"))
    (elsewhere / "config.yaml").write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [sys.executable, "-c", CHECK.format(config=str(elsewhere / "config.yaml"))],
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    package, infra, rows = out.stdout.split()
    assert Path(package).is_relative_to(site) and Path(infra).is_relative_to(site)
    assert rows == "16"


PARSE_IMPORTS = """
import sys, yaml
from ybscale import study
from ybscale.backends.gcp import clusters, plan  # what backends/gcp/rules.smk imports
config = yaml.safe_load(open("config/config.yaml"))
loaded = study.load(config)
plan.previous_in_slot(loaded.rows, {**loaded.settings, "backend": "gcp"})
heavy = ("pandas", "scipy", "altair", "statsmodels")
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_what_the_workflow_parses_imports_no_analysis_library():
    """`snakemake -n` parses the study (study.load, the gcp plan): pandas, scipy, altair,
    statsmodels (seconds of imports) stay for the jobs that analyse."""
    out = subprocess.run(
        [sys.executable, "-c", PARSE_IMPORTS], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
