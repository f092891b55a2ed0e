"""The backends, by name: the one table of them, below every stage.

A stage that needs *a* backend (the settings loader its config section, the measuring code's
digest its modules, the findings its report text) asks this registry by name and never imports
a backend package itself; each backend is one package (`backends/<name>/`) whose class answers.
A backend's own CLI verbs are registered here too (`ybscale reap` is gcp's), so `ybscale.cli`
routes nothing by backend.
"""

from __future__ import annotations

import importlib
from typing import Any

from ybscale.errors import UserError

BACKENDS = {
    "local": "ybscale.backends.local:LocalBackend",
    "gcp": "ybscale.backends.gcp:GcpBackend",
    "existing": "ybscale.backends.existing:ExistingBackend",
}

# verb -> (backend, module whose main(argv) runs it, help)
VERBS = {
    "reap": ("gcp", "ybscale.backends.gcp.reap", "destroy this study's expired gcp stacks"),
}


class UnknownBackend(UserError):
    """A backend name that is not in BACKENDS (the message names the known ones)."""


def backend_class(name: str) -> Any:
    """The class of backend `name` (a `ybscale.backends.base.Backend`), imported on demand."""
    if name not in BACKENDS:
        raise UnknownBackend(f"config: backend: unknown backend {name!r} ({' | '.join(BACKENDS)})")
    module, _, cls = BACKENDS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("ybscale"):
            raise
        raise UnknownBackend(
            f"config: backend: {name} needs {exc.name}, which is not installed: "
            f'pip install -e ".[{name}]" (or bash setup.sh)'
        ) from exc
