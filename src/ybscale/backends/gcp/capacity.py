"""A zone out of capacity: one more bring-up in `gcp.fallback_zone` (same region).

Compute Engine refuses a VM when the zone has no hardware left for it (a stockout, not a
quota): the operation fails with code ZONE_RESOURCE_POOL_EXHAUSTED (or
ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS) and the message "The zone 'projects/P/zones/Z' does
not have enough resources available to fulfill the request." followed by "Try a different zone,
or try again later." or "'(resource type:compute)'."; the Terraform provider behind pulumi-gcp
reports it as "Error waiting for instance to create: <that message>". A quota error ("Quota
'CPUS' exceeded") is not one: another zone of the region draws on the same quota.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ybscale.backends.base import BackendError

EXHAUSTED = re.compile(
    r"ZONE_RESOURCE_POOL_EXHAUSTED"
    r"|does not have enough resources available to fulfill the request"
)


def zone_exhausted(error: BaseException | str) -> bool:
    """Whether an error (its text, wrapped lines joined) says the zone is out of capacity."""
    return bool(EXHAUSTED.search(" ".join(str(error).split())))


def up_with_fallback(
    up: Callable[..., dict], combo: str, settings: Mapping, *, log=print, **kwargs
) -> dict:
    """`up(combo, settings, **kwargs)` in gcp.zone; when it fails because the zone is
    out of capacity (the failed stack is destroyed by `up` first), once more in
    gcp.fallback_zone. Any other failure, or none configured, is raised as it is."""
    try:
        return up(combo, settings, **kwargs)
    except BackendError as exc:
        fallback = settings.get("fallback_zone")
        if not fallback or not zone_exhausted(exc):
            raise
        log(f"{combo}: zone {settings['zone']} is out of capacity; once more in {fallback} "
            "(gcp.fallback_zone)")  # fmt: skip
    return up(combo, {**settings, "zone": fallback}, **kwargs)
