"""A zone out of capacity: one more bring-up in `gcp.fallback_zone` (same region).

Compute Engine refuses a VM when the zone has no hardware left for it (a stockout, not a
quota): the operation fails with code ZONE_RESOURCE_POOL_EXHAUSTED (or
ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS) and the message "The zone 'projects/P/zones/Z' does
not have enough resources available to fulfill the request." followed by "Try a different zone,
or try again later." or "'(resource type:compute)'."; the Terraform provider behind pulumi-gcp
reports it as "Error waiting for instance to create: <that message>". A quota error ("Quota
'CPUS' exceeded") is not one: another zone of the region draws on the same quota.

A zone without the pinned CPU platform (gcp.min_cpu_platform) refuses the VM too, for good:
"Error 400: Invalid value for field 'resource.minCpuPlatform': 'Intel Haswell'. CPU platform
unavailable in requested zone. Valid options for this zone are: Intel Skylake, Intel
Broadwell., invalid" (the Terraform provider's report, poseidon/typhoon#438). It is retried in
gcp.fallback_zone the same way; with none, the error names the platform, the zone and what it
offers.
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


PLATFORM_REFUSED = re.compile(
    r"minCpuPlatform'?: '(?P<platform>[^']+)'\. CPU platform unavailable in requested zone\."
    r"(?: Valid options for this zone are: (?P<valid>[^.]*)\.)?"
)


def platform_refused(error: BaseException | str) -> tuple[str, str] | None:
    """(the platform, what the zone offers) when an error says the zone lacks the CPU platform
    asked for; None otherwise."""
    match = PLATFORM_REFUSED.search(" ".join(str(error).split()))
    return (match["platform"], match["valid"] or "") if match else None


def up_with_fallback(
    up: Callable[..., dict], combo: str, settings: Mapping, *, log=print, **kwargs
) -> dict:
    """`up(combo, settings, **kwargs)` in gcp.zone; when it fails because the zone is
    out of capacity or lacks the CPU platform (the failed stack is destroyed by `up` first),
    once more in gcp.fallback_zone. A refused platform with no fallback zone is raised naming
    the platform and the zone; any other failure as it is."""
    zone, fallback = settings["zone"], settings.get("fallback_zone")
    try:
        return up(combo, settings, **kwargs)
    except BackendError as exc:
        refused = platform_refused(exc)
        if refused and not fallback:
            platform, valid = refused
            raise BackendError(
                f"{combo}: zone {zone} does not offer CPU platform {platform} "
                "(gcp.min_cpu_platform)"
                + (f"; it offers {valid}" if valid else "")
                + ": set gcp.fallback_zone to a zone that does, another gcp.zone, or "
                "gcp.min_cpu_platform to one it offers (null: any)"
            ) from exc
        if not fallback or not (refused or zone_exhausted(exc)):
            raise
        why = f"does not offer CPU platform {refused[0]}" if refused else "is out of capacity"
        log(f"{combo}: zone {zone} {why}; once more in {fallback} (gcp.fallback_zone)")
    return up(combo, {**settings, "zone": fallback}, **kwargs)
