"""Pulumi Automation API driver: one stack per cluster (a combination's, or a replicate's).

`auto` (the `pulumi.automation` module by default) is a parameter everywhere so that tests can
pass a fake: the Pulumi CLI is needed only for real runs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from importlib import metadata
from pathlib import Path

from ybscale.backends import yb_catalogue
from ybscale.backends.base import BackendError, alive
from ybscale.backends.gcp.config import load_generators, load_generators_bound
from ybscale.config_sources import source_of
from ybscale.design.row import ClusterShape
from ybscale.files import write_json

EXPIRY_FORMAT = "%Y%m%dt%H%Mz"  # GCP label values: lowercase, no colons
COMBO = re.compile(r"^nodes(?P<nodes>\d+)-(?P<size>[a-z0-9_]+)-repl(?P<repl>[a-z0-9_]+)$")


def _auto(auto):
    if auto is not None:
        return auto
    import pulumi.automation

    return pulumi.automation


def _infra():
    import ybscale_infra  # installed with the package (infra/ybscale_infra)

    return ybscale_infra


def program_of(settings: Mapping, program: Callable | None = None) -> tuple[Callable, bool]:
    """(the inline Pulumi program, whether it is the real GCE one): `program` when a caller
    passes one, else `gcp.program` (module:function), else infra/'s YugabyteCluster."""
    if program is not None:
        return program, False
    if settings.get("program"):
        module, _, function = settings["program"].partition(":")
        return getattr(importlib.import_module(module), function), False
    return _infra().program, True


SPLITTING = "enable_automatic_tablet_splitting"  # a flag of yb-master and yb-tserver
# the memory split yugabyted and YugabyteDB Anywhere deploy (the flag's default, false, gives
# the tserver 85 % of RAM and PostgreSQL none): a bool flag of both servers, read by
# MasterTServerParseFlagsAndInit (src/yb/tserver/server_main_util.cc), which both call
MEMORY_FOR_YSQL = "use_memory_defaults_optimized_for_ysql"
# flags both servers take (yb_catalogue lists them for yb-master and yb-tserver, from the
# v2024.2 reference pages, and routes such a flag to both) that size a server's memory in bytes
# or in shares of its VM's RAM: a row sets them for its tservers, whose machine type is its node
# size, and the dry run checks them there (`limits`); the masters run on
# gcp.machine_types.master and keep their own defaults (a 6 GiB block cache sized for a tserver
# is more than a master's whole memory limit, 0.15 x 8 GiB on an n2-standard-2)
TSERVER_ONLY = frozenset({
    "memory_limit_hard_bytes", "default_memory_limit_to_ram_ratio",
    "db_block_cache_size_bytes", "db_block_cache_size_percentage",
    "tablet_overhead_size_percentage",
})  # fmt: skip


def split_server_settings(server: Mapping[str, str], release: str) -> tuple[dict, dict, dict]:
    """server.* knobs -> (yb-master flags, yb-tserver flags, YSQL settings for
    --ysql_pg_conf_csv), by the flag lists of the release's series (yb_catalogue; checked at dry
    run by GcpBackend.check_rows)."""
    series = yb_catalogue.series_of(release) or ""
    return yb_catalogue.split_server_settings(server, series)


def server_flags(settings: Mapping, server: Mapping[str, str]) -> tuple[dict, dict, dict]:
    """What each server of a cluster is told: (yb-master flags, yb-tserver flags, YSQL
    settings), the row's server.* knobs split by `split_server_settings`, those sizing a
    server's memory to the tservers only (`TSERVER_ONLY`), with ybscale's own defaults where no
    knob sets them: automatic tablet splitting off (unless gcp.yugabyte.tablet_splitting) and
    use_memory_defaults_optimized_for_ysql=true, on masters and tservers alike. The stack's
    argument and every row's record of its cluster."""
    master_flags, flags, pg_conf = split_server_settings(server, settings["yugabyte"]["version"])
    master_flags = {k: v for k, v in master_flags.items() if k not in TSERVER_ONLY}
    for own in (master_flags, flags):
        if not settings["yugabyte"].get("tablet_splitting", False):
            # the pre-split tablets stay put while rows measure (YugabyteDB splits
            # automatically by default)
            own.setdefault(SPLITTING, "false")
        own.setdefault(MEMORY_FOR_YSQL, "true")
    return dict(sorted(master_flags.items())), dict(sorted(flags.items())), pg_conf


def flags_asked(master_flags: Mapping, tserver_flags: Mapping, pg_conf: Mapping) -> dict:
    """server -> flag -> the value its command line gives it beyond its addresses
    (`server_flags`' three parts: the YSQL settings as the one --ysql_pg_conf_csv the
    tserver gets): what `reach.flags_reported` checks the servers run with."""
    tserver = dict(tserver_flags)
    if pg_conf:
        tserver["ysql_pg_conf_csv"] = _infra().startup.pg_conf_csv(pg_conf)
    return {"yb-master": dict(master_flags), "yb-tserver": tserver}


def study_prefix(settings: Mapping) -> str:
    """What every stack name of this study begins with: <name>-<study_id>-."""
    return f"{settings['name']}-{settings['study_id']}-"


GCE_NAME_MAX = 63  # characters of a Compute Engine resource name
VM_SUFFIX_MAX = len("-tserver-99")  # the longest suffix the infra program adds to a stack name


def stack_name(combo: str, settings: Mapping) -> str:
    """<name>-<study_id>-<cluster>; a cluster label too long for its VMs' names (a design with
    many cluster or server factors) is cut and ends in 6 hex digits of its hash instead."""
    prefix = study_prefix(settings)
    room = GCE_NAME_MAX - VM_SUFFIX_MAX - len(prefix)
    if len(combo) <= room:
        return prefix + combo
    digest = hashlib.sha256(combo.encode()).hexdigest()[:6]
    return prefix + combo[: max(room - len(digest) - 1, 0)].rstrip("-") + "-" + digest


def expiry_label(when: dt.datetime) -> str:
    """20261122t2300z (UTC)."""
    return when.astimezone(dt.UTC).strftime(EXPIRY_FORMAT)


def parse_expiry(value: str) -> dt.datetime:
    """Inverse of expiry_label; unix epoch seconds are accepted too."""
    if value.isdigit():
        return dt.datetime.fromtimestamp(int(value), dt.UTC)
    return dt.datetime.strptime(value, EXPIRY_FORMAT).replace(tzinfo=dt.UTC)


def shape_of(combo: str) -> ClusterShape:
    """The shape a seed-style combination id names (nodes3-small-reploff); the pipeline passes
    the shape resolved from the design instead, which also covers server settings."""
    match = COMBO.match(combo)
    if not match:
        raise ValueError(
            f"{combo!r} is not a combination id like nodes3-small-reploff: pass its shape"
        )
    if match["repl"] not in ("on", "off"):
        raise ValueError(f"{combo}: replication level must be on or off, got {match['repl']!r}")
    return ClusterShape(int(match["nodes"]), match["size"], match["repl"] == "on")


@dataclasses.dataclass(frozen=True)
class ClusterMachines:
    """One cluster's VMs: a tserver per node, a master per copy (the replication factor: 1, or
    every node with replication on) and its load generators (gcp.load_generators), with their
    machine types. `loadgens_max`: how many load generators `auto` may grow to (the same as
    `loadgens` when they are fixed)."""

    tservers: int
    masters: int
    tserver_type: str
    master_type: str
    loadgen_type: str
    loadgens: int = 1
    loadgens_max: int = 1

    def counts(self, bound: bool = False) -> dict[str, int]:
        """Machine type -> how many VMs of it (`bound`: with as many load generators as `auto`
        may grow to)."""
        out: dict[str, int] = {}
        for machine, n in (
            (self.tserver_type, self.tservers),
            (self.master_type, self.masters),
            (self.loadgen_type, self.loadgens_max if bound else self.loadgens),
        ):
            out[machine] = out.get(machine, 0) + n
        return out


def cluster_machines(shape: ClusterShape, settings: Mapping, combo: str) -> ClusterMachines:
    """The VMs of a cluster of this shape, machine types from gcp.machine_types (`settings`:
    the gcp section); ValueError naming the field when the node size has none."""
    types = settings["machine_types"]
    if shape.node_size not in types:
        where = source_of("gcp.machine_types")
        raise ValueError(f"{where}.{shape.node_size}: missing (for {combo})")
    return ClusterMachines(
        tservers=shape.nodes,
        masters=shape.nodes if shape.replication else 1,
        tserver_type=types[shape.node_size],
        master_type=types["master"],
        loadgen_type=types["loadgen"],
        loadgens=load_generators(settings, shape.nodes, types[shape.node_size]),
        loadgens_max=load_generators_bound(settings, shape.nodes, types[shape.node_size]),
    )


def cluster_args(
    combo: str,
    settings: Mapping,
    now: dt.datetime,
    public_key: str,
    shape: ClusterShape | None = None,
    server: Mapping[str, str] | None = None,
):
    """ClusterArgs of one combination: its shape and server settings (server.* knobs)."""
    machines = cluster_machines(shape or shape_of(combo), settings, combo)
    master_flags, flags, pg_conf = server_flags(settings, server or {})
    expiry = now + dt.timedelta(hours=settings["ttl_hours"])
    return _infra().ClusterArgs(
        nodes=machines.tservers,
        replication_factor=machines.masters,
        machine_type=machines.tserver_type,
        master_flags=master_flags,
        tserver_flags=flags,
        ysql_pg_conf=pg_conf,
        master_machine_type=machines.master_type,
        loadgen_machine_type=machines.loadgen_type,
        load_generators=machines.loadgens,
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
        yugabyte_sha256=settings["yugabyte"].get("sha256"),
        pg_client_version=settings["pg_client_version"],
        max_run_seconds=round(settings["ttl_hours"] * 3600),
        min_cpu_platform=settings["min_cpu_platform"],
        labels={
            "project": settings["name"],
            "stack": stack_name(combo, settings),
            "owner": settings["owner"],
            "study": settings["study_id"],
            "expiry": expiry_label(expiry),
        },
    )


def pulumi_command(auto=None):
    """The engine on PATH as the Automation API runs it, one per process and engine: making
    one runs `pulumi version`, which each workspace would otherwise repeat."""
    return _command(_auto(auto), shutil.which("pulumi"))


@cache
def _command(auto, engine: str | None):
    return auto.PulumiCommand()


def workspace_kwargs(settings: Mapping, auto=None) -> dict:
    """Project settings with the configured state backend; a self-managed backend (file://,
    gs://, s3://, ...) needs a passphrase: no secrets are stored, so an empty one is used unless
    PULUMI_CONFIG_PASSPHRASE is set."""
    auto = _auto(auto)
    url = settings["state_url"]
    if url.startswith("file://"):
        Path(url[len("file://") :]).mkdir(parents=True, exist_ok=True)
    env = {"PULUMI_SKIP_UPDATE_CHECK": "true"}
    if "PULUMI_CONFIG_PASSPHRASE" not in os.environ:
        env["PULUMI_CONFIG_PASSPHRASE"] = ""
    return {
        "project_settings": auto.ProjectSettings(
            name=settings["name"], runtime="python", backend=auto.ProjectBackend(url=url)
        ),
        "env_vars": env,
        "pulumi_command": pulumi_command(auto),
    }


@contextmanager
def workspace(settings: Mapping, auto=None) -> Iterator[dict]:
    """`workspace_kwargs` with a work folder of our own, removed on exit: without one the
    Automation API makes an `automation-*` folder in the temp directory for every workspace
    (each inline-program stack, each listing) and never removes it."""
    with tempfile.TemporaryDirectory(prefix="ybscale-pulumi-") as work_dir:
        yield {"work_dir": work_dir, **workspace_kwargs(settings, auto)}


def pulumi_children() -> list[int]:
    """Pids of the Pulumi CLI processes this process started (Automation API subprocesses)."""
    me, found = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        fields = rest.split()
        if comm.startswith("pulumi") and int(fields[1]) == me and fields[0] != "Z":
            found.append(int(proc.name))
    return found


def interrupt_pulumi(sig: int = signal.SIGINT) -> list[int]:
    """Ask running Pulumi CLI children to cancel (SIGINT once = graceful: in-flight operations
    finish and the state is written; a second SIGINT would abort without saving)."""
    pids = pulumi_children()
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


def wait_pulumi(timeout: float, log=print) -> bool:
    """Wait until no Pulumi CLI child runs (a cancelled `up` still finishes in-flight creates)."""
    deadline = time.monotonic() + timeout
    while pulumi_children():
        if time.monotonic() >= deadline:
            log(f"pulumi still running after {timeout:.0f}s: {pulumi_children()}")
            return False
        time.sleep(0.5)
    return True


def release_lock(stack, log=print) -> None:
    """Drop the lock an interrupted `pulumi up` left behind (once no Pulumi process runs).

    Python closes the CLI's output pipe when the interrupt unwinds the Automation API call; the
    CLI may then die on the broken pipe before it releases the stack's lock, and refresh and
    destroy would refuse to run. `pulumi cancel` removes a file backend's lock files."""
    try:
        stack.cancel()
        log(f"{stack.name}: released the lock of the interrupted update")
    except Exception as exc:  # the Automation API raises its own error types
        log(f"{stack.name}: no lock to release ({str(exc).strip()[-200:]})")


def stale_locks(name: str, settings: Mapping) -> list[Path]:
    """Lock files of stack `name` that no engine process holds: in a file:// state, taken on
    this host by a process that is gone (SIGKILL, OOM, a closed laptop). Other state backends
    cannot be judged from here: none."""
    url = settings["state_url"]
    if not url.startswith("file://"):
        return []
    found = []
    for path in (Path(url[len("file://") :]) / ".pulumi" / "locks").rglob("*.json"):
        if path.parent.name != name:
            continue
        try:
            lock = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if lock.get("hostname") == socket.gethostname() and not alive(int(lock["pid"])):
            found.append(path)
    return found


def install_signal_handlers() -> None:
    """SIGTERM/SIGHUP (Snakemake, a closed terminal) cancel a running `pulumi up` gracefully and
    raise KeyboardInterrupt once, so the except/finally blocks destroy what was created.
    Ctrl-C reaches the Pulumi CLI from the terminal itself (same process group)."""
    fired = []

    def handler(signum, frame):
        if fired:  # the teardown that follows must not be interrupted by a repeat
            return
        fired.append(signum)
        interrupt_pulumi()
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


@contextmanager
def engine_cancelled_on_signals() -> Iterator[None]:
    """While the engine runs in a process whose own SIGTERM/SIGHUP handler does not tell it
    (the measuring job's, `lifecycle.interrupt_on_signals`): the first such signal asks the
    engine to cancel gracefully, then the handler in place runs (none: KeyboardInterrupt).
    Ctrl-C reaches the engine from the terminal itself. Outside the main thread (no signal
    handlers there), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    fired: list[int] = []

    def handler(signum, frame):
        if not fired:
            fired.append(signum)
            interrupt_pulumi()
        previous = before[signum]
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in before:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, previous in before.items():
            signal.signal(sig, previous)


def teardown(stack, log=print) -> None:
    """Destroy the stack's resources, refreshing them first in the same engine run (VMs
    deleted behind its back are then seen as gone). An interrupted `up` leaves pending creates
    that `destroy` would skip (the resources would be left running): when the state holds
    pending operations, or cannot be read, a refresh with --clear-pending-creates runs first.
    show_secrets False: the summary the Automation API reads after each (unused here) then
    needs no key derived from the passphrase, about 0.2 CPU-s per call."""
    if pending_operations(stack, log):
        try:
            stack.refresh(clear_pending_creates=True, on_output=log, show_secrets=False)
        except Exception as exc:  # destroy anyway: it still removes everything recorded
            log(f"{stack.name}: refresh --clear-pending-creates failed ({exc}); destroying anyway")
    stack.destroy(refresh=True, on_output=log, show_secrets=False)


def pending_operations(stack, log=print) -> list:
    """The operations an interrupted engine left in the stack's state (`pulumi stack export`);
    one unknown entry when the state cannot be read."""
    try:
        state = engine_json(stack.workspace, "stack", "export", "--stack", stack.name)
        return list(state.get("deployment", {}).get("pending_operations") or [])
    except Exception as exc:
        log(f"{stack.name}: its state could not be read ({exc}); refreshing before destroy")
        return [{"unknown": str(exc)}]


def vm_name_errors(settings: Mapping, tservers: Mapping[str, int]) -> list[str]:
    """A line per cluster (label -> its tservers) whose longest VM name, <stack>-tserver-<n>,
    is longer than Compute Engine allows even with the label cut (`stack_name`): gcp.name
    and gcp.study_id leave it no room; found at dry run, not by a failed `pulumi up`."""
    errors = []
    for label, nodes in sorted(tservers.items()):
        longest = f"{stack_name(label, settings)}-tserver-{nodes - 1}"
        if len(longest) > GCE_NAME_MAX:
            errors.append(
                f"{source_of('gcp.name')}, gcp.study_id: VM name {longest} has "
                f"{len(longest)} characters, Compute Engine allows {GCE_NAME_MAX}: shorten "
                "gcp.name or set a shorter gcp.study_id"
            )
    return errors


def vm_names(name: str, args) -> list[str]:
    """The instance names the infra program gives a stack's VMs."""
    return (
        [f"{name}-master-{i}" for i in range(args.replication_factor)]
        + [f"{name}-tserver-{i}" for i in range(args.nodes)]
        + [f"{name}-loadgen"]
        + [f"{name}-loadgen-{i}" for i in range(1, args.load_generators)]
    )


def save_serial_output(name: str, args, settings: Mapping, logdir: Path, log=print) -> list[Path]:
    """Each VM's serial console (its startup script's output) into logdir, before a failed
    bring-up destroys the VMs; what cannot be read is logged, never raised."""
    import shutil
    import subprocess

    gcloud = shutil.which("gcloud")
    if gcloud is None:
        log(f"{name}: gcloud not found, serial console output not saved")
        return []
    saved = []
    logdir.mkdir(parents=True, exist_ok=True)
    for vm in vm_names(name, args):
        argv = [gcloud, "compute", "instances", "get-serial-port-output", vm,
                f"--zone={args.zone}", f"--project={settings['project']}"]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log(f"{vm}: serial console not read: {exc}")
            continue
        if done.returncode != 0:
            log(f"{vm}: serial console not read: {done.stderr.strip()[-300:]}")
            continue
        path = logdir / f"{vm}.serial.log"
        path.write_text(done.stdout)
        saved.append(path)
    log(f"{name}: serial console output of {len(saved)} VM(s) saved in {logdir}")
    return saved


def configure(stack, settings: Mapping, name: str, args, auto) -> None:
    """The stack's config: where (project, region, zone), its name, its ClusterArgs and expiry
    (what the program reads)."""
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


# what an `up` adding a load generator may do to a resource: create it (the new VM), update it
# in place (the tservers' SSH firewall lets the new generator in), or leave it as it is
GROWTH_OPS = ("same", "create", "update")
VM_TYPE = "gcp:compute/instance:Instance"  # never updated by a growth (a VM may be stopped)


def growth_problems(events: list[tuple[str, str, str]]) -> list[str]:
    """What an `up` adding a load generator must not do, from its steps (op, resource type,
    urn): replace or delete anything, or update a VM."""
    return [
        f"{op} {urn}"
        for op, typ, urn in events
        if op not in GROWTH_OPS or (op == "update" and typ == VM_TYPE)
    ]


def growth_args(
    combo: str,
    settings: Mapping,
    endpoints: Mapping,
    loadgens: int,
    public_key: str,
    shape: ClusterShape | None = None,
    server: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
):
    """The ClusterArgs of a live cluster (its `endpoints`, as `up` wrote them) with `loadgens`
    load generators: those of its bring-up (its creation time, so the same expiry; its zone,
    gcp.fallback_zone's if it came up there), the count changed. A generator added `now` gets
    a max_run_duration of what is left of the others' (ClusterArgs.loadgen_run_seconds; those
    already there keep theirs), so Compute Engine deletes it with them; BackendError when less
    than 30 s are left."""
    where = {**settings, "zone": endpoints.get("zone") or settings["zone"]}
    created = dt.datetime.fromisoformat(endpoints["created"])
    args = cluster_args(combo, {**where, "load_generators": loadgens}, created, public_key,
                        shape, server)  # fmt: skip
    ran = ((now or dt.datetime.now(dt.UTC)) - created).total_seconds()
    left = int(args.max_run_seconds - ran)
    if left < 30:
        raise BackendError(
            f"{args.labels['stack']}: its VMs are deleted in {max(left, 0)} s "
            f"(gcp.ttl_hours after {endpoints['created']}): no load generator added"
        )
    before = list(endpoints.get("loadgen_run_seconds") or [])  # a stack from before: all full
    before += [args.max_run_seconds] * (loadgens - 1 - len(before))
    return dataclasses.replace(args, loadgen_run_seconds=[*before[: loadgens - 1], left])


def grow(
    combo: str,
    settings: Mapping,
    endpoints: Mapping,
    loadgens: int,
    *,
    auto=None,
    log: Callable[[str], object] = print,
    program: Callable | None = None,
    interrupt_wait: float = 600,
    shape: ClusterShape | None = None,
    server: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
) -> dict:
    """Update the live stack of cluster `combo` (its `endpoints`, as `up` wrote them) to
    `loadgens` load generators `now` (by default: now); the endpoints with the stack's new
    outputs.

    The program gets the arguments of the cluster's bring-up (`growth_args`: the same expiry
    labels and outputs), the one count changed. A preview first: unless every step only
    creates a resource or updates one that is not a VM in place (`growth_problems`), nothing
    is changed. Then `up`, without the refresh a bring-up runs. A failure never destroys the
    stack (cluster_down releases it): a BackendError naming the stack, the generator and the
    count; an interruption waits for the engine and releases the stack's lock before it is
    raised."""
    from ybscale.backends import ssh

    auto = _auto(auto)
    name = endpoints.get("stack") or stack_name(combo, settings)
    where = {**settings, "zone": endpoints.get("zone") or settings["zone"]}
    public_key = ssh.ensure_keypair(Path(settings["ssh_key"])).read_text().strip()
    args = growth_args(combo, settings, endpoints, loadgens, public_key, shape, server, now)
    program, cloud = program_of(settings, program)
    what = f"{name}: load generator {vm_names(name, args)[-1]} ({loadgens} load generators)"
    with workspace(settings, auto) as kwargs:
        try:
            stack = auto.select_stack(
                stack_name=name,
                project_name=settings["name"],
                program=program,
                opts=auto.LocalWorkspaceOptions(**kwargs),
            )
        except auto.StackNotFoundError as exc:
            raise BackendError(f"{what} not added: the stack does not exist") from exc
        try:
            configure(stack, where, name, args, auto)
            if cloud:
                stack.workspace.install_plugin("gcp", "v" + metadata.version("pulumi-gcp"))
            steps: list[tuple[str, str, str]] = []

            def step(event) -> None:
                pre = getattr(event, "resource_pre_event", None)
                if pre is not None:
                    meta = pre.metadata
                    steps.append((str(getattr(meta.op, "value", meta.op)), meta.type, meta.urn))

            with engine_cancelled_on_signals():
                stack.preview(on_event=step)
                refused = growth_problems(steps)
                if refused:
                    raise BackendError("the update would " + "; ".join(refused))
                result = stack.up(on_output=log, show_secrets=False)
            done = [(str(getattr(op, "value", op)), "", "")
                    for op in (result.summary.resource_changes or {})]  # fmt: skip
            if growth_problems(done):
                raise BackendError(f"the update did {result.summary.resource_changes}")
        except BaseException as exc:
            if not isinstance(exc, Exception):  # interrupted: the stack's lock released
                log(f"{what}: interrupted ({exc!r}); the stack is left for cluster_down")
                if wait_pulumi(interrupt_wait, log):
                    release_lock(stack, log)
                raise
            log(f"{what} not added ({exc}); the stack is left for cluster_down")
            raise BackendError(f"{what} not added: {exc}") from exc
        outputs = {k: getattr(v, "value", v) for k, v in result.outputs.items()}
    log(f"{what}: added")
    return {**endpoints, **outputs}


def up(
    combo: str,
    settings: Mapping,
    *,
    out: Path | None = None,
    auto=None,
    now: dt.datetime | None = None,
    ready: Callable[[dict, Mapping], None] | None = None,
    log: Callable[[str], object] = print,
    program: Callable | None = None,
    interrupt_wait: float = 600,
    shape: ClusterShape | None = None,
    server: Mapping[str, str] | None = None,
    serial_logs: Path | None = None,
) -> dict:
    """Create or update the combination's stack, wait for `ready`, write and return endpoints.

    Any failure or interruption (up or ready; KeyboardInterrupt, SIGTERM with
    install_signal_handlers) destroys the stack before the error is raised. `program`: the
    inline Pulumi program (default: `program_of(settings)`; tests pass a cloud-free one).
    `shape` and `server`: the combination as the design resolves it (see `cluster_args`).
    `serial_logs`: where the VMs' boot logs are kept when a real bring-up fails.
    """
    from ybscale.backends import ssh

    auto = _auto(auto)
    now = now or dt.datetime.now(dt.UTC)
    if not settings.get("project"):
        raise ValueError(f"{source_of('gcp.project')}: set your GCP project id")
    public_key = ssh.ensure_keypair(Path(settings["ssh_key"])).read_text().strip()
    args = cluster_args(combo, settings, now, public_key, shape, server)
    name = stack_name(combo, settings)
    program, cloud = program_of(settings, program)
    with workspace(settings, auto) as kwargs:  # the stack's work folder, removed after
        stack = auto.create_or_select_stack(
            stack_name=name,
            project_name=settings["name"],
            program=program,
            opts=auto.LocalWorkspaceOptions(**kwargs),
        )
        configure(stack, settings, name, args, auto)
        try:
            if cloud:
                stack.workspace.install_plugin("gcp", "v" + metadata.version("pulumi-gcp"))
            # refresh first: VMs that max_run_duration deleted are then seen as gone and created
            # again, instead of "no changes" for a stack whose VMs no longer exist
            result = stack.up(on_output=log, refresh=True, show_secrets=False)  # see teardown
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
        except BaseException as exc:
            interrupted = not isinstance(exc, Exception)
            log(f"{name}: bring-up {'interrupted' if interrupted else 'failed'} ({exc!r}); "
                "destroying the stack")  # fmt: skip
            try:
                if wait_pulumi(interrupt_wait, log) and interrupted:
                    release_lock(stack, log)
                if cloud and serial_logs:  # real VMs: keep their boot logs first
                    save_serial_output(name, args, settings, serial_logs / name, log)
                teardown(stack, log)
                stack.workspace.remove_stack(name)
                log(f"{name}: destroyed and removed")
            except BaseException as inner:  # keep the first error; reap can retry later
                log(f"{name}: destroy after failure failed too: {inner!r}; run `ybscale reap`")
            if interrupted:
                raise
            raise BackendError(f"{name}: bring-up failed: {exc}") from exc
    if out is not None:
        write_json(out, endpoints)
    return endpoints


def destroy(
    combo: str, settings: Mapping, *, out: Path | None = None, auto=None, log=print, now=None,
    program: Callable | None = None,
) -> bool:  # fmt: skip
    """Destroy the combination's stack and remove it; False when there was no such stack.
    `out` (released.json) sits in the cluster's folder: what it knew of the cluster goes."""
    name = stack_name(combo, settings)
    clusters = Path(out).parent.parent if out is not None else None
    gone = destroy_stack(name, settings, auto=auto, log=log, program=program, clusters=clusters)
    if out is not None:
        now = now or dt.datetime.now(dt.UTC)
        write_json(out, {"stack": name, "destroyed": now.isoformat(), "existed": gone})
    return gone


def destroy_stack(
    name: str,
    settings: Mapping,
    *,
    auto=None,
    log=print,
    program: Callable | None = None,
    clusters: Path | None = None,
) -> bool:
    """Destroy (`teardown`) and remove one stack; when it is this
    study's, its endpoints under `clusters` (the folder of every combination's files) are
    invalidated first, whatever happens next."""
    from ybscale.backends.gcp.files import ClusterFiles

    auto = _auto(auto)
    prefix = study_prefix(settings)
    if name.startswith(prefix) and clusters is not None and clusters.is_dir():
        for label in (folder.name for folder in clusters.iterdir() if folder.is_dir()):
            if stack_name(label, settings) == name:  # a cut label: by its name, not the tail
                ClusterFiles.of(clusters, label).forget()
    with workspace(settings, auto) as kwargs:
        try:
            stack = auto.select_stack(
                stack_name=name,
                project_name=settings["name"],
                program=program_of(settings, program)[0],
                opts=auto.LocalWorkspaceOptions(**kwargs),
            )
        except auto.StackNotFoundError:
            log(f"{name}: no such stack, nothing to destroy")
            return False
        if stale_locks(name, settings):  # an engine killed mid-update left its lock
            release_lock(stack, log)
        teardown(stack, log)
        stack.workspace.remove_stack(name)
    log(f"{name}: destroyed")
    return True


def engine_json(workspace, *args: str):
    """A read-only engine command of `workspace` (`stack output --json`, `stack export`), run
    as the workspace's own methods run theirs, its JSON answer parsed. Without the
    --show-secrets those methods add: it derives a key from the passphrase (about 0.2 CPU-s a
    call) for values that hold no secret here."""
    env = {"PULUMI_HOME": workspace.pulumi_home} if workspace.pulumi_home else {}
    env |= workspace.env_vars
    return json.loads(workspace.pulumi_command.run(list(args), workspace.work_dir, env).stdout)


def list_stacks(settings: Mapping, *, auto=None, every_study: bool = False) -> list[dict]:
    """This study's stacks (`every_study`: every stack of the project): name, study,
    combination (this study's only), expiry, owner, resource count.

    Expiry, owner and study are stack outputs: a fresh workspace cannot read an inline
    program's stack config (Pulumi #5578). A stack without them (its first `up` was
    interrupted) expires ttl_hours after its last update.
    """
    auto = _auto(auto)
    own = study_prefix(settings)
    prefix = settings["name"] + "-" if every_study else own
    found = []
    with workspace(settings, auto) as kwargs:
        ws = auto.LocalWorkspace(**kwargs)
        for summary in ws.list_stacks():
            name = summary.name.rsplit("/", 1)[-1]
            if not name.startswith(prefix):
                continue
            try:
                outputs = engine_json(ws, "stack", "output", "--json", "--stack", name)
            except Exception:
                outputs = {}
            found.append(_stack_info(name, summary, outputs, settings))
    return found


def _stack_info(name: str, summary, outputs: Mapping, settings: Mapping) -> dict:
    own = study_prefix(settings)
    expiry, source = outputs.get("expiry"), "stack output"
    if expiry:
        expiry = parse_expiry(str(expiry))
    elif summary.last_update:
        last = summary.last_update
        last = last if last.tzinfo else last.replace(tzinfo=dt.UTC)
        expiry = last + dt.timedelta(hours=settings["ttl_hours"])
        source = "last update + ttl_hours (no expiry output)"
    else:
        expiry, source = None, "unknown"
    mine = name.startswith(own)
    return {
        "name": name,
        "study": settings["study_id"] if mine else outputs.get("study"),
        "combination": name[len(own) :] if mine else None,
        "expiry": expiry,
        "expiry_source": source,
        "owner": outputs.get("owner"),
        "resource_count": summary.resource_count,
        "last_update": summary.last_update,
    }


def reap(
    settings: Mapping, now: dt.datetime | None = None, *, auto=None, dry_run=False, log=print,
    program: Callable | None = None, clusters: Path | None = None, every_study: bool = False,
) -> list[str]:  # fmt: skip
    """Destroy every stack of this study (`every_study`: of the project) whose expiry has
    passed; return their names. `clusters`: the folder of the study's combination files,
    whose endpoints are invalidated."""
    now = now or dt.datetime.now(dt.UTC)
    expired = []
    for info in list_stacks(settings, auto=auto, every_study=every_study):
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
            destroy_stack(name, settings, auto=auto, log=log, program=program, clusters=clusters)
    return expired


def destroy_all(
    config: Mapping, clusters: Path, *, auto=None, log=print, program=None
) -> list[str]:
    """Destroy this study's stacks (Snakefile `onerror:`), whatever their expiry; errors are
    logged. Only stacks named with this study's id (`gcp.study_id`) are touched: a
    concurrent study's, in the same state backend and project, never are; nor is one whose
    owner output names another user. One without outputs (an interrupted first `up`) is
    this study's by its name. `clusters`: the folder of the combinations' files (their
    endpoints are invalidated)."""
    from ybscale.backends.gcp.config import gcp_section as validate_section

    settings = validate_section(config)
    names = []
    try:
        stacks = list_stacks(settings, auto=auto)
    except Exception as exc:
        log(f"destroy_all: cannot list stacks: {exc}")
        return names
    for info in stacks:
        owner = info["owner"]
        if owner not in (None, settings["owner"]):
            log(f"{info['name']}: owner {owner}, not {settings['owner']}: left alone")
            continue
        try:
            destroy_stack(info["name"], settings, auto=auto, log=log, program=program,
                          clusters=clusters)  # fmt: skip
            names.append(info["name"])
        except Exception as exc:
            log(f"{info['name']}: destroy failed: {exc}; run `ybscale reap` or destroy by hand")
    return names
