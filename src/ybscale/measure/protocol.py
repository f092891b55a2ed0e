"""What measures a row, by content: a digest of the measuring code and of each workload script;
and what analyses a study: the package's version and a digest of the analysing code.

The measuring rule takes these as params, so a row re-runs when what measures it really changed
(an edited module, an edited script), not when a checkout or a fresh clone touched the files.
The analysis, findings and report rules take `analysis_code()` as a param: a changed ybscale
re-analyses the study (no `-R analyze` after an upgrade) and re-measures nothing.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

# modules every backend measures through; plus the backend's own (`Backend.modules`)
COMMON_MODULES = (
    "measure/bench.py",
    "measure/pgbench.py",
    "measure/precision.py",
    "measure/adaptive.py",
    "measure/measuring.py",
    "measure/latency.py",
    "measure/generators.py",
    "measure/utilisation.py",
    "design/workload.py",
    "measure/per_second.py",
    "design/row.py",
    "design/knobs.py",
    "backends/base.py",
)


def _digest(chunks) -> str:
    h = hashlib.sha256()
    for name, data in chunks:
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def code_digest(backend: str) -> str:
    """Digest of the modules that measure a row on `backend`."""
    package = resources.files("ybscale")
    from ybscale.registry import backend_class

    names = COMMON_MODULES + backend_class(backend).modules
    return _digest((name, package.joinpath(name).read_bytes()) for name in names)


# what the analysis, findings and report rules run (`python -m ybscale.analysis...`,
# `ybscale.report...`, `ybscale.files publish`): these packages whole (data files included),
# and the modules they read a design, a config or a table through
ANALYSIS_PACKAGES = ("analysis", "report", "design")
ANALYSIS_MODULES = (
    "__init__.py",  # the version
    "files.py",
    "errors.py",
    "config_sources.py",
    "validation.py",
)


def _files_under(folder, prefix: str):
    """(name, content) of every file under a package folder, sorted, compiled files aside."""
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        name = f"{prefix}/{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _files_under(entry, name)
        elif not entry.name.endswith((".pyc", ".pyo")):
            yield name, entry.read_bytes()


def analysis_code() -> str:
    """``ybscale VERSION DIGEST``: the package's version and a digest of the code that
    analyses a study and writes its findings, charts and report (ANALYSIS_PACKAGES,
    ANALYSIS_MODULES); never the measuring code's (`code_digest`)."""
    import ybscale

    package = resources.files("ybscale")
    chunks = [chunk for name in ANALYSIS_PACKAGES for chunk in _files_under(package / name, name)]
    chunks += [(name, package.joinpath(name).read_bytes()) for name in ANALYSIS_MODULES]
    return f"ybscale {ybscale.__version__} {_digest(chunks)}"


def file_digest(path: str | Path) -> str:
    """Digest of one file's content (a workload script)."""
    return _digest([("", Path(path).read_bytes())])
