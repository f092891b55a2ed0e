"""Names of gcp clusters: a combination's label cut to what Compute Engine's names allow."""

from __future__ import annotations

import hashlib

from ybscale.backends import base
from ybscale.design.row import Row


def resource_name(key: str) -> str:
    """`key` if at most 44 characters, else its first 35 and a digest of the whole: stack and
    VM names are limited (GCP: 63 characters in all)."""
    if len(key) <= 44:
        return key
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    return f"{key[:35].rstrip('-')}-{digest}"


def cluster_label(row: Row, per_replicate: bool) -> str:
    """`base.cluster_label` cut to a name part (`resource_name`)."""
    return resource_name(base.cluster_label(row, per_replicate))
