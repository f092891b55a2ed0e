"""Backends: where the cluster for a design row comes from."""

from __future__ import annotations

from collections.abc import Mapping

from ybscale.backends.base import Backend, BackendError


def get_backend(config: Mapping) -> Backend:
    """The backend named by `config["backend"]` (local | gcp | existing)."""
    name = config["backend"]
    if name == "local":
        from ybscale.backends.local import LocalBackend

        return LocalBackend(config)
    if name == "gcp":
        from ybscale.backends.gcp import GcpBackend

        return GcpBackend(config)
    if name == "existing":
        from ybscale.backends.existing import ExistingBackend

        return ExistingBackend(config)
    raise BackendError(f"config: backend: unknown backend {name!r} (local | gcp | existing)")
