"""`local` backend: a real multi-node PostgreSQL cluster on this machine, one per row."""

from ybscale.backends.local.cluster import LocalBackend, find_bindir

__all__ = ["LocalBackend", "find_bindir"]
