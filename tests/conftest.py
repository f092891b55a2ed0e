"""Shared fixtures: a private RAM data root, and a look at which servers are still running."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def servers_under(root: Path) -> list[str]:
    """Command lines of live (non-zombie) processes whose command line mentions `root`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().split()[2]
        except OSError:
            continue
        if str(root) in cmdline and state != "Z":
            found.append(f"{proc.name}: {cmdline}")
    return found


@pytest.fixture
def data_root():
    """A data root of the test's own on /dev/shm, so checks see only this test's servers."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    root = base / f"ybscale-test-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)
