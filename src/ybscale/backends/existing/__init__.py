"""`existing` backend: SQL endpoints you already run (nothing is created or destroyed)."""

from ybscale.backends.existing.backend import ExistingBackend

__all__ = ["ExistingBackend"]
