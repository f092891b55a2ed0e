"""ybscale: designed scalability experiments on distributed SQL databases."""

from os import environ as _environ
from pathlib import Path as _Path

__version__ = "0.1.0"


def cache_dir() -> _Path:
    """What is built once and reused by every clone (.ci/pulumi.sh's engine, the charts' script
    bundle, the schema passes of `validation`): YBSCALE_CACHE, else ~/.cache/ybscale."""
    return _Path(_environ.get("YBSCALE_CACHE") or _Path.home() / ".cache" / "ybscale")
