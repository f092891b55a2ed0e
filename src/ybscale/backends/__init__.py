"""Backends: where the cluster for a design row comes from.

`ybscale.registry.BACKENDS` is the one table of them: the rules, the settings loader, the
measuring code's digest and the findings ask the class it names (`backend_class`) instead of
testing names. A backend is one package (`backends/<name>/`) whose class says its config
section, its modules, whether its clusters are shared by a combination's rows (and brought up by
rules of its own), the settings that change a measurement, its clusters' price per hour
(`hourly_price`), its report text and its clean-up after a failed workflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ybscale.backends.base import Backend
from ybscale.registry import BACKENDS, backend_class

__all__ = ["BACKENDS", "backend_class", "get_backend"]


def get_backend(config: Mapping, clusters: Path | None = None) -> Backend:
    """The backend named by `config["backend"]`; `clusters` (shared clusters): the folder of
    every combination's files, as the rules name it."""
    return backend_class(config["backend"])(config, clusters)
