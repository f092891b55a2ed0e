"""The `gcp:` section of the config: validated by its schema, then checked across fields and
completed (owner, study_id, state_url)."""

from __future__ import annotations

import getpass
import hashlib
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ybscale.config_sources import source_of
from ybscale.settings import Frozen, SettingsError, freeze, section


def gcp_section(config: Mapping) -> Frozen:
    """The `gcp:` section validated, with defaults and the derived values filled in: owner,
    study_id (see `study_id`), state_url (absolute, outside results/)."""
    settings = section(config, "gcp")
    if settings["ssh_access"] == "public" and not settings["ssh_source_cidr"]:
        raise SettingsError(
            f"{source_of('gcp.ssh_access')}: gcp.ssh_source_cidr: required with ssh_access: public "
            "(your address, e.g. 203.0.113.7/32), or use ssh_access: iap"
        )
    if not settings["zone"].startswith(settings["region"] + "-"):
        raise SettingsError(
            f"{source_of('gcp.zone')}: {settings['zone']} is not in gcp.region {settings['region']}"
        )
    fallback = settings["fallback_zone"]
    if fallback is not None and (
        not fallback.startswith(settings["region"] + "-") or fallback == settings["zone"]
    ):
        raise SettingsError(
            f"{source_of('gcp.fallback_zone')}: {fallback} must be another zone of gcp.region "
            f"{settings['region']} than gcp.zone {settings['zone']}"
        )
    settings["owner"] = settings["owner"] or getpass.getuser()
    settings["study_id"] = settings["study_id"] or study_id(settings["owner"])
    if not settings["state_url"]:
        settings["state_url"] = default_state_url()
    return freeze(settings)


def study_id(owner: str, directory: Path | None = None) -> str:
    """8 hex digits of sha256(owner, the study directory's absolute path; default: the working
    directory, where Snakemake and `ybscale` run): the same study finds its stacks again (after
    `rm -rf results` too), a study in another directory or of another owner has its own."""
    where = Path(directory or Path.cwd()).resolve()
    return hashlib.sha256(f"{owner}\0{where}".encode()).hexdigest()[:8]


def default_state_url() -> str:
    """Pulumi state outside results/ (an `rm -rf results` must not forget running clusters):
    file://$XDG_STATE_HOME/ybscale/pulumi-state, by default ~/.local/state/ybscale/pulumi-state."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return "file://" + str(Path(base).resolve() / "ybscale" / "pulumi-state")


TSERVER_VCPUS_PER_GENERATOR_VCPU = 2  # gcp.load_generators: auto (a planning rule, not a measure)


def vcpus(machine_type: str) -> float:
    """vCPUs of a machine type: n2-standard-4 -> 4, n2-custom-6-23040 -> 6, e2-medium -> 2,
    c3-standard-8-lssd -> 8 (a type with Local SSD attached: `-lssd` after the vCPUs)."""
    custom = re.search(r"custom-(\d+)-\d+", machine_type)
    if custom:
        return int(custom[1])
    tail = re.search(r"-(\d+)(?:-lssd)?$", machine_type)
    if tail:
        return int(tail[1])
    if machine_type in ("e2-micro", "e2-small", "e2-medium"):
        return 2  # shared-core: quota counts 2 vCPUs
    raise ValueError(f"{source_of('gcp.machine_types')}: cannot tell the vCPUs of {machine_type}")


def load_generators(settings: Mapping, tservers: int, tserver_type: str) -> int:
    """Load-generator VMs of a cluster of `tservers` (`settings`: the gcp section):
    gcp.load_generators, or with `auto` the tservers' vCPUs over
    TSERVER_VCPUS_PER_GENERATOR_VCPU x the load generator's, rounded up, 1 to `tservers`."""
    wanted = settings["load_generators"]
    if wanted != "auto":
        return int(wanted)
    loadgen = vcpus(settings["machine_types"]["loadgen"])
    need = tservers * vcpus(tserver_type) / (TSERVER_VCPUS_PER_GENERATOR_VCPU * loadgen)
    return max(1, min(tservers, math.ceil(need)))


def load_generators_bound(settings: Mapping, tservers: int, tserver_type: str) -> int:
    """How many load-generator VMs a cluster of `tservers` may grow to: with `auto`,
    gcp.load_generators_max (default: the tserver count), never more than the tservers; else
    the fixed count (`load_generators`)."""
    start = load_generators(settings, tservers, tserver_type)
    if settings["load_generators"] != "auto":
        return start
    return max(start, min(tservers, settings.get("load_generators_max") or tservers))


def bound_errors(settings: Mapping, clusters: Mapping[str, tuple[int, str]]) -> list[str]:
    """gcp.load_generators_max set without `auto`, or below `auto`'s starting count of a
    cluster (label -> its tservers and their machine type), one line per problem."""
    bound = settings.get("load_generators_max")
    if bound is None:
        return []
    if settings["load_generators"] != "auto":
        return [
            f"{source_of('gcp.load_generators_max')}: only meaningful with gcp.load_generators: "
            f"auto (it is {settings['load_generators']}): remove it, or set auto"
        ]
    return [
        f"{source_of('gcp.load_generators_max')}: {bound}, below the {start} load generators "
        f"auto starts {label} with ({tservers} x {machine}: one generator vCPU per "
        f"{TSERVER_VCPUS_PER_GENERATOR_VCPU} tserver vCPUs); raise it to {start} or more"
        for label, (tservers, machine) in sorted(clusters.items())
        if bound < (start := load_generators(settings, tservers, machine))
    ]


def replication_errors(rows) -> list[str]:
    """One line per node level that gives an even replication factor: with replication on a
    cluster's RF is its tserver count (`cluster_machines`: as many masters), and an even RF
    survives no more failures than the odd one below it while every write waits for one more
    copy (YugabyteDB's fault tolerance: RF 3 or 4 survives one failed node, 5 or 6 two;
    docs.yugabyte.com, architecture/concepts/replication). Names the level and its file."""
    errors = {}
    for row in rows:
        n = row.cluster.nodes
        if row.cluster.replication and n % 2 == 0:
            where = row.source("cluster.nodes")
            errors.setdefault(
                where,
                f"{where}: cluster.nodes: {n} with cluster.replication on "
                f"({row.source('cluster.replication')}) is replication factor {n} on gcp (RF = "
                f"nodes): an even RF survives no more failed nodes than RF {n - 1} and makes "
                "every write wait for one more copy (YugabyteDB: RF 3 or 4 survives one, 5 or "
                "6 two); use an odd node count where replication is on, or replication off",
            )
    return [errors[where] for where in sorted(errors)]


# Machine series whose VMs take Hyperdisk only, no Persistent Disk (pd-standard, pd-balanced,
# pd-ssd), and bare-metal types (`-metal`, C3's included): a pd-* boot disk on one fails
# `pulumi up` after other VMs of the cluster were created. From Compute Engine's disk support
# per series as others record it (nextflow-io/nextflow#6841, 2026: "C4, C4A, C4D, N4, N4A, and
# N4D families do not support pd-balanced disks"; Red Hat OpenShift 4.20 storage docs: no
# Persistent Disk on N4 and C3 bare metal) and Google's series pages (X4, M4, H4D, A4, A4X);
# the first paid run on such a series is what confirms it
HYPERDISK_ONLY = frozenset({"c4", "c4a", "c4d", "n4", "n4a", "n4d", "x4", "m4", "h4d", "a4", "a4x"})


def machine_series(machine_type: str) -> str:
    """n4-standard-8 -> n4, c4a-highcpu-16 -> c4a."""
    return machine_type.split("-", 1)[0].lower()


def disk_errors(settings: Mapping, keys) -> list[str]:
    """One line per machine type the study uses (`keys` of gcp.machine_types: the rows' node
    sizes, master, loadgen) whose series takes no Persistent Disk while gcp.disk_type is one
    (every VM's boot disk is of gcp.disk_type)."""
    disk, types = settings["disk_type"], settings["machine_types"]
    if not disk.startswith("pd-"):
        return []
    return [
        f"{source_of('gcp.machine_types')}.{key}: {types[key]}: the "
        f"{machine_series(types[key]).upper()} series"
        + (" (bare metal)" if types[key].endswith("-metal") else "")
        + " takes Hyperdisk only, no Persistent Disk, "
        f"and every VM's boot disk is {disk} ({source_of('gcp.disk_type')}): choose a machine "
        "type of a series that takes Persistent Disk (N2, N2D, C3, C3D, E2, ...)"
        for key in sorted(set(keys))
        if key in types and hyperdisk_only(types[key])
    ]


def hyperdisk_only(machine_type: str) -> bool:
    """Whether a machine type takes Hyperdisk only (`HYPERDISK_ONLY`, or bare metal)."""
    return machine_series(machine_type) in HYPERDISK_ONLY or machine_type.endswith("-metal")
