"""The local backend's paragraph in the findings: what a cluster on one machine cannot show."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence


def report_text(applied: Sequence[Mapping]) -> list[str]:
    """The paragraph, with the CPU quotas the rows were granted and, when rows shared
    clusters, how many (from their `applied`)."""
    cpus = []
    for a in applied:
        quotas = [n.get("cpus") for n in (a.get("cpu") or {}).values() if n.get("cpus")]
        if quotas:
            cpus.append(sum(quotas))
    mechanisms = sorted(
        {n.get("mechanism", "?") for a in applied for n in (a.get("cpu") or {}).values()}
    )
    quota = (
        f" The CPU quotas granted per row add up to {min(cpus):g} to {max(cpus):g} CPUs "
        f"({', '.join(mechanisms)}), on a machine with {os.cpu_count()} cores."
        if cpus
        else ""
    )
    labels = [a["cluster"] for a in applied if a.get("cluster")]
    shared = (
        f" The {len(labels)} rows ran on {len(set(labels))} clusters (local.cluster_per: "
        "combination): the rows of a combination shared one, each row's table and key sequence "
        "dropped and loaded anew before it was measured."
        if len(set(labels)) < len(labels)
        else ""
    )
    return [
        "**What the local backend cannot show.** Every node is a PostgreSQL server on this one "
        "machine: the nodes share its cores, memory and disk, so adding a node adds no CPU and "
        "no network hop. The nodes effect measures the coordination cost of more servers "
        "(sharding, quorum replication), not added capacity; node size is a CPU quota, not a "
        "bigger machine; replication is PostgreSQL streaming replication, not a Raft group. "
        "Absolute throughput is not that of a cluster of machines; the effects are the result."
        + quota
        + shared
    ]
