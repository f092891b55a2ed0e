"""`up` / `down` one cluster's stack: the cloud lifecycle (`GcpBackend.up`/`down`, run by
rules/cluster.smk). A cluster is a combination's (and, with gcp.cluster_per_replicate, a
replicate's: ``<combination>-r<k>``).

This module drives `stacks` (Pulumi) and hands the gcp backend's readiness check to it.

    python -m ybscale.backends.gcp.clusters up --combo C --config config/config.yaml --out ...
    python -m ybscale.backends.gcp.clusters down --combo C --config config/config.yaml --out ...
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from ybscale.backends.base import BackendError
from ybscale.backends.gcp import capacity, stacks
from ybscale.backends.gcp.config import gcp_section
from ybscale.backends.gcp.files import ClusterFiles
from ybscale.backends.gcp.names import cluster_label
from ybscale.backends.gcp.plan import format_plan, plan, together_over_quota
from ybscale.backends.gcp.reach import wait_ready
from ybscale.config_sources import file_sources, source_of, sources_in_use
from ybscale.design.factorial import load_design
from ybscale.design.row import Row, resolve_rows
from ybscale.files import write_json
from ybscale.settings import load as load_settings


def _overrides(items: list[str]) -> dict:
    """``--set a.b=value`` items as a nested mapping (values read as YAML)."""
    out: dict = {}
    for item in items:
        key, _, value = item.partition("=")
        target = out
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = yaml.safe_load(value)
    return out


def _load_config(path: str, overrides: list[str]) -> dict:
    """The config file with the ``--set`` overrides on top."""
    from snakemake.utils import update_config

    config = yaml.safe_load(Path(path).read_text()) or {}
    update_config(config, _overrides(overrides))
    return config


# the gcp settings that define a cluster (its stack, VMs and software); prices, slots, plan
# estimates and timeouts do not: changing them re-provisions nothing
DEFINES_A_CLUSTER = (
    "project", "name", "region", "zone", "fallback_zone", "image", "disk_size_gb", "disk_type",
    "subnet_cidr", "yugabyte", "pg_client_version", "ssh_access", "ssh_source_cidr", "ssh_user",
    "ssh_key", "owner", "study_id", "ttl_hours", "state_url", "program",
)  # fmt: skip


def definition(settings: Mapping, row: Row) -> dict:
    """What defines the cluster `row` runs on: its combination's shape, server settings, machine
    types and the gcp settings in DEFINES_A_CLUSTER (the cluster rules' params)."""
    gcp = settings["gcp"]
    types = gcp["machine_types"]
    return {
        "combination": row.combination,
        "shape": dataclasses.asdict(row.cluster),
        "server": dict(row.server),
        "machine_types": {k: types[k] for k in (row.cluster.node_size, "master", "loadgen")},
        **{key: gcp[key] for key in DEFINES_A_CLUSTER},
        # only when set: a study measured before gcp.load_generators keeps its clusters
        **({"load_generators": gcp["load_generators"]} if gcp["load_generators"] != 1 else {}),
    }


def up(
    combo: str,
    config: Mapping,
    out: Path,
    *,
    design: str | None = None,
    serial_logs: Path | None = None,
) -> None:
    """pulumi up the stack of cluster `combo`, wait until it is ready, write its endpoints to
    `out`; BackendError or ValueError saying why not (the stack destroyed first)."""
    files = ClusterFiles(out.parent)
    stacks.install_signal_handlers()  # SIGTERM/SIGHUP: cancel pulumi, destroy, then exit
    settings = gcp_section(config)
    loaded = load_settings({**config, "backend": "gcp"})
    the_design = load_design(design or loaded["design"])
    rows = resolve_rows(the_design, loaded)
    labels = {r.run: cluster_label(r, settings["cluster_per_replicate"]) for r in rows}
    on_it = [r for r in rows if labels[r.run] == combo]
    if not on_it:
        raise ValueError(
            f"{the_design.source}: no row runs on cluster {combo!r} "
            f"(clusters: {', '.join(sorted(set(labels.values())))})"
        )
    # this cluster's need against the quotas now (those of the real GCE program's VMs: a
    # gcp.program stand-in, e.g. the loopback rehearsal's, creates none)
    own = plan(rows, loaded, [combo], quotas=not settings["program"])
    print(format_plan(own))
    over = own.over_quota()
    if over and not settings["allow_over_quota"]:
        raise BackendError(
            f"cluster {combo} not brought up: it needs more than the quota leaves free: "
            + "; ".join(over)
            + f" ({own.quota_note}). Raise the quota (console: IAM & Admin > Quotas), free it, "
            f"lower the need (gcp.machine_types) or set {source_of('gcp.allow_over_quota')} to "
            "true to try anyway"
        )
    together = together_needs_over_quota(rows, loaded, own, combo, out.parent.parent)
    if together and not settings["allow_over_quota"]:
        raise BackendError(
            f"cluster {combo} not brought up: the study's clusters alive together need more "
            "than the quota leaves free (each cluster_up checking only its own need lets two "
            "that start at once both pass, and the second fail mid-creation): "
            + "; ".join(together)
            + f" ({own.quota_note}). Raise the quota, lower gcp.max_clusters or the need "
            f"(gcp.machine_types), or set {source_of('gcp.allow_over_quota')} to true to try "
            "anyway"
        )
    row = on_it[0]  # the combination's shape
    files.known_hosts.unlink(missing_ok=True)
    files.grown.unlink(missing_ok=True)  # `auto` starts again from its starting count
    capacity.up_with_fallback(
        stacks.up,
        combo,
        settings,
        out=out,
        ready=lambda endpoints, s: wait_ready(endpoints, s, files.known_hosts, row),
        shape=row.cluster,
        server=row.server,
        serial_logs=serial_logs,
    )


def together_needs_over_quota(rows, loaded: Mapping, own, combo: str, clusters: Path) -> list:
    """`plan.together_over_quota` for the whole study with the quotas `own` (this cluster's
    plan) read: the clusters under `clusters` (results/clusters) with a released record are
    done, those with endpoints live; `combo` is neither (it is being brought up). [] when the
    quotas were not read."""
    if own.quotas is None:
        return []
    whole = dataclasses.replace(plan(rows, loaded), quotas=own.quotas)
    labels = [c.cluster for c in whole.clusters if c.cluster != combo]
    files = {label: ClusterFiles.of(clusters, label) for label in labels}
    done = {label for label, f in files.items() if f.released.exists()}
    live = {label for label, f in files.items() if f.endpoints.exists() and label not in done}
    return together_over_quota(whole, live, done)


def grow(combo: str, config: Mapping, files: ClusterFiles, endpoints: Mapping, loadgens: int,
         row: Row) -> dict:  # fmt: skip
    """One more load generator for the live cluster `combo` (gcp.load_generators: auto): its
    stack updated to `loadgens` generators (`stacks.grow`: an `up` that only adds; a failure
    leaves the stack to cluster_down), then the wait for it as at bring-up (`wait_ready`:
    every generator's startup finished, the cluster answering); the new endpoints, kept in
    `files.grown` for the cluster's later rows. BackendError naming the generator and the
    count."""
    settings = gcp_section(config)
    grown = stacks.grow(combo, settings, endpoints, loadgens, shape=row.cluster,
                        server=row.server)  # fmt: skip
    names = grown.get("loadgen_names") or []
    name = names[loadgens - 1] if len(names) >= loadgens else f"load generator {loadgens}"
    try:
        wait_ready(grown, settings, files.known_hosts, row)
    except BackendError as exc:
        raise BackendError(f"{name} ({loadgens} load generators) not ready: {exc}") from exc
    write_json(files.grown, grown)
    return grown


def down(combo: str, config: Mapping, out: Path) -> dict:
    """Destroy the stack of cluster `combo`, write the marker `out`; what was destroyed."""
    stacks.install_signal_handlers()
    settings = gcp_section(config)
    existed = stacks.destroy(combo, settings, out=out)  # forgets endpoints, host keys
    return {"stack": stacks.stack_name(combo, settings), "existed": existed,
            "destroyed": dt.datetime.now(dt.UTC).isoformat()}  # fmt: skip


def run(
    action: str,
    combo: str,
    config: Mapping,
    out: Path,
    *,
    design: str | None = None,
    serial_logs: Path | None = None,
) -> int:
    """`up` or `down` by hand: an exit code, the error printed."""
    try:
        if action == "up":
            up(combo, config, out, design=design, serial_logs=serial_logs)
        else:
            down(combo, config, out)
    except (BackendError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc}); what was brought up has been destroyed", file=sys.stderr)
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    """`up` / `down` one cluster's stack by hand (the rules go through `GcpBackend`)."""
    parser = argparse.ArgumentParser(prog="python -m ybscale.backends.gcp.clusters")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--combo", required=True, help="e.g. nodes3-small-reploff")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--design", default=None, help="design file (default: config's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="endpoints.json (up) / released.json (down), in the cluster's folder",
    )
    parser.add_argument("--serial-logs", type=Path, help="up: VM boot logs kept on failure")
    args = parser.parse_args(argv)
    config = _load_config(args.config, args.set)
    with sources_in_use(file_sources([args.config], _overrides(args.set))):  # errors name them
        return run(args.action, args.combo, config, args.out, design=args.design,
                   serial_logs=args.serial_logs)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
