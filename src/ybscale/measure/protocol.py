"""What measures a row, by content: a digest of the measuring code and of each workload script.

The measuring rule takes these as params, so a row re-runs when what measures it really changed
(an edited module, an edited script), not when a checkout or a fresh clone touched the files.
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


def file_digest(path: str | Path) -> str:
    """Digest of one file's content (a workload script)."""
    return _digest([("", Path(path).read_bytes())])
