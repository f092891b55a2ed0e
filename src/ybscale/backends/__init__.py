"""Backends: where the cluster for a design row comes from.

`BACKENDS` is the one table of them: the rules, the settings loader, the measuring code's digest
and the findings ask the class it names (`backend_class`) instead of testing names. A backend is
one package (`backends/<name>/`) whose class says its config section, its modules, whether its
clusters are shared by a combination's rows (and brought up by rules of its own), the settings
that change a measurement, its report text and its clean-up after a failed workflow.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path

from ybscale.backends.base import Backend, BackendError

BACKENDS = {
    "local": "ybscale.backends.local:LocalBackend",
    "gcp": "ybscale.backends.gcp:GcpBackend",
    "existing": "ybscale.backends.existing:ExistingBackend",
}


def backend_class(name: str) -> type[Backend]:
    """The class of backend `name`; BackendError naming the known ones."""
    if name not in BACKENDS:
        raise BackendError(f"config: backend: unknown backend {name!r} ({' | '.join(BACKENDS)})")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(config: Mapping, clusters: Path | None = None) -> Backend:
    """The backend named by `config["backend"]`; `clusters` (shared clusters): the folder of
    every combination's files, as the rules name it."""
    return backend_class(config["backend"])(config, clusters)
