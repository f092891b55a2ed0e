"""Backends: where the cluster for a design row comes from."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ybscale.backends.base import Backend, BackendError


def get_backend(config: Mapping, clusters: Path | None = None) -> Backend:
    """The backend named by `config["backend"]` (local | gcp | existing); `clusters` (gcp):
    the folder of every combination's files, as the rules name it."""
    name = config["backend"]
    if name == "local":
        from ybscale.backends.local import LocalBackend

        return LocalBackend(config)
    if name == "gcp":
        from ybscale.backends.gcp.backend import GcpBackend

        return GcpBackend(config, clusters)
    if name == "existing":
        from ybscale.backends.existing.backend import ExistingBackend

        return ExistingBackend(config)
    raise BackendError(f"config: backend: unknown backend {name!r} (local | gcp | existing)")
