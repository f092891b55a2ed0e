"""Pulumi Automation API driver: one stack per infrastructure combination.

`auto` (the `pulumi.automation` module by default) is a parameter everywhere so that tests can
pass a fake: the Pulumi CLI is needed only for real runs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

from ybscale.backends.base import BackendError

INFRA_DIR = Path(__file__).resolve().parents[2] / "infra"
EXPIRY_FORMAT = "%Y%m%dt%H%Mz"  # GCP label values: lowercase, no colons
COMBO = re.compile(r"^nodes(?P<nodes>\d+)-(?P<size>[a-z0-9_]+)-repl(?P<repl>[a-z0-9_]+)$")


def _auto(auto):
    if auto is not None:
        return auto
    import pulumi.automation

    return pulumi.automation


def _infra():
    if str(INFRA_DIR) not in sys.path:
        sys.path.insert(0, str(INFRA_DIR))
    import ybscale_infra

    return ybscale_infra


def stack_name(combo: str, settings: Mapping) -> str:
    return f"{settings['name']}-{combo}"


def expiry_label(when: dt.datetime) -> str:
    """20261122t2300z (UTC)."""
    return when.astimezone(dt.UTC).strftime(EXPIRY_FORMAT)


def parse_expiry(value: str) -> dt.datetime:
    """Inverse of expiry_label; unix epoch seconds are accepted too."""
    if value.isdigit():
        return dt.datetime.fromtimestamp(int(value), dt.UTC)
    return dt.datetime.strptime(value, EXPIRY_FORMAT).replace(tzinfo=dt.UTC)


def cluster_args(combo: str, settings: Mapping, now: dt.datetime, public_key: str):
    """ClusterArgs of one combination (nodes, node_size, replication parsed from its id)."""
    match = COMBO.match(combo)
    if not match:
        raise ValueError(f"{combo!r} is not a combination id like nodes3-small-reploff")
    nodes, size, repl = int(match["nodes"]), match["size"], match["repl"]
    types = settings["machine_types"]
    if size not in types:
        raise ValueError(f"config/config.yaml: gcp.machine_types.{size}: missing (for {combo})")
    if repl not in ("on", "off"):
        raise ValueError(f"{combo}: replication level must be on or off, got {repl!r}")
    expiry = now + dt.timedelta(hours=settings["ttl_hours"])
    return _infra().ClusterArgs(
        nodes=nodes,
        replication_factor=nodes if repl == "on" else 1,
        machine_type=types[size],
        master_machine_type=types["master"],
        loadgen_machine_type=types["loadgen"],
        zone=settings["zone"],
        image=settings["image"],
        disk_size_gb=settings["disk_size_gb"],
        disk_type=settings["disk_type"],
        subnet_cidr=settings["subnet_cidr"],
        ssh_access=settings["ssh_access"],
        ssh_source_cidr=settings["ssh_source_cidr"],
        ssh_user=settings["ssh_user"],
        ssh_public_key=public_key,
        yugabyte_version=settings["yugabyte"]["version"],
        yugabyte_url=settings["yugabyte"]["url"],
        pg_client_version=settings["pg_client_version"],
        max_run_seconds=round(settings["ttl_hours"] * 3600),
        labels={
            "project": settings["name"],
            "stack": stack_name(combo, settings),
            "owner": settings["owner"],
            "expiry": expiry_label(expiry),
        },
    )


def workspace_kwargs(settings: Mapping, auto=None) -> dict:
    """Project settings with the configured state backend; a file backend needs a passphrase
    (no secrets are stored, so an empty one is used unless PULUMI_CONFIG_PASSPHRASE is set)."""
    auto = _auto(auto)
    url = settings["state_url"]
    if url.startswith("file://"):
        Path(url[len("file://") :]).mkdir(parents=True, exist_ok=True)
    env = {"PULUMI_SKIP_UPDATE_CHECK": "true"}
    if "PULUMI_CONFIG_PASSPHRASE" not in os.environ and url.startswith("file://"):
        env["PULUMI_CONFIG_PASSPHRASE"] = ""
    return {
        "project_settings": auto.ProjectSettings(
            name=settings["name"], runtime="python", backend=auto.ProjectBackend(url=url)
        ),
        "env_vars": env,
    }


def workspace_options(settings: Mapping, auto=None):
    auto = _auto(auto)
    return auto.LocalWorkspaceOptions(**workspace_kwargs(settings, auto))


def _write_json(path: Path, data: Mapping) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def up(
    combo: str,
    settings: Mapping,
    *,
    out: Path | None = None,
    auto=None,
    now: dt.datetime | None = None,
    ready: Callable[[dict, Mapping], None] | None = None,
    log: Callable[[str], object] = print,
) -> dict:
    """Create or update the combination's stack, wait for `ready`, write and return endpoints.

    Any failure (up or ready) destroys the stack before the error is raised.
    """
    from ybscale.backends import ssh

    auto = _auto(auto)
    now = now or dt.datetime.now(dt.UTC)
    if not settings.get("project"):
        raise ValueError("config/config.yaml: gcp.project: set your GCP project id")
    public_key = ssh.ensure_keypair(Path(settings["ssh_key"])).read_text().strip()
    args = cluster_args(combo, settings, now, public_key)
    name = stack_name(combo, settings)
    stack = auto.create_or_select_stack(
        stack_name=name,
        project_name=settings["name"],
        program=_infra().program,
        opts=workspace_options(settings, auto),
    )
    stack.set_all_config(
        {
            "gcp:project": auto.ConfigValue(settings["project"]),
            "gcp:region": auto.ConfigValue(settings["region"]),
            "gcp:zone": auto.ConfigValue(settings["zone"]),
            "ybscale:name": auto.ConfigValue(name),
            "ybscale:cluster": auto.ConfigValue(json.dumps(dataclasses.asdict(args))),
            "ybscale:expiry": auto.ConfigValue(args.labels["expiry"]),
        }
    )
    try:
        stack.workspace.install_plugin("gcp", "v" + metadata.version("pulumi-gcp"))
        result = stack.up(on_output=log)
        outputs = {k: getattr(v, "value", v) for k, v in result.outputs.items()}
        endpoints = {
            **outputs,
            "combination": combo,
            "stack": name,
            "project": settings["project"],
            "machine_type": args.machine_type,
            "yugabyte_version": args.yugabyte_version,
            "state_url": settings["state_url"],
            "created": now.isoformat(),
            "expiry": args.labels["expiry"],
        }
        if ready is not None:
            ready(endpoints, settings)
    except Exception as exc:
        log(f"{name}: bring-up failed ({exc}); destroying the stack")
        try:
            stack.destroy(on_output=log)
        except Exception as inner:  # keep the first error; sweep can retry later
            log(f"{name}: destroy after failure failed too: {inner}")
        raise BackendError(f"{name}: bring-up failed: {exc}") from exc
    if out is not None:
        _write_json(out, endpoints)
    return endpoints


def destroy(
    combo: str, settings: Mapping, *, out: Path | None = None, auto=None, log=print, now=None
) -> bool:
    """Destroy the combination's stack and remove it; False when there was no such stack."""
    name = stack_name(combo, settings)
    gone = destroy_stack(name, settings, auto=auto, log=log)
    if out is not None:
        now = now or dt.datetime.now(dt.UTC)
        _write_json(out, {"stack": name, "destroyed": now.isoformat(), "existed": gone})
    return gone


def destroy_stack(name: str, settings: Mapping, *, auto=None, log=print) -> bool:
    auto = _auto(auto)
    try:
        stack = auto.select_stack(
            stack_name=name,
            project_name=settings["name"],
            program=_infra().program,
            opts=workspace_options(settings, auto),
        )
    except auto.StackNotFoundError:
        log(f"{name}: no such stack, nothing to destroy")
        return False
    stack.destroy(on_output=log)
    stack.workspace.remove_stack(name)
    log(f"{name}: destroyed")
    return True


def list_stacks(settings: Mapping, *, auto=None) -> list[dict]:
    """Stacks of this project: name, combination, expiry (None if unknown), resource count."""
    auto = _auto(auto)
    ws = auto.LocalWorkspace(**workspace_kwargs(settings, auto))
    prefix = settings["name"] + "-"
    found = []
    for summary in ws.list_stacks():
        name = summary.name.rsplit("/", 1)[-1]
        if not name.startswith(prefix):
            continue
        try:
            expiry = parse_expiry(ws.get_config(name, "ybscale:expiry").value)
        except Exception:
            expiry = None
        found.append(
            {
                "name": name,
                "combination": name[len(prefix) :],
                "expiry": expiry,
                "resource_count": summary.resource_count,
                "last_update": summary.last_update,
            }
        )
    return found


def sweep(
    settings: Mapping, now: dt.datetime | None = None, *, auto=None, dry_run=False, log=print
) -> list[str]:
    """Destroy every stack of the project whose expiry has passed; return their names."""
    now = now or dt.datetime.now(dt.UTC)
    expired = []
    for info in list_stacks(settings, auto=auto):
        if info["expiry"] is None:
            log(f"{info['name']}: no expiry recorded, left alone (destroy it by hand)")
        elif info["expiry"] <= now:
            expired.append(info["name"])
        else:
            log(f"{info['name']}: expires {info['expiry']:%Y-%m-%d %H:%M} UTC, kept")
    for name in expired:
        if dry_run:
            log(f"{name}: expired, would be destroyed (--dry-run)")
        else:
            destroy_stack(name, settings, auto=auto, log=log)
    return expired


def destroy_all(config: Mapping, *, auto=None, log=print) -> list[str]:
    """Destroy every stack of the project (Snakefile `onerror:`); errors are logged, not raised."""
    from ybscale.backends.gcp import validate_section

    settings = validate_section(config)
    names = []
    try:
        stacks = list_stacks(settings, auto=auto)
    except Exception as exc:
        log(f"destroy_all: cannot list stacks: {exc}")
        return names
    for info in stacks:
        try:
            destroy_stack(info["name"], settings, auto=auto, log=log)
            names.append(info["name"])
        except Exception as exc:
            log(f"{info['name']}: destroy failed: {exc}; run `ybscale sweep` or destroy by hand")
    return names
