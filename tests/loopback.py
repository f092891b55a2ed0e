"""The gcp path on this machine: a cloud-free Pulumi program whose stack outputs point at servers
on loopback addresses (`gcp.program: loopback:program`), and the site it points at.

The site (`loopback_site`): per cluster, one PostgreSQL server standing in for its tservers,
listening on one loopback address per tserver (127.0.<nodes>.<i>, all on the same YSQL port, as
tservers on separate VMs are; one database behind all of them, as in YugabyteDB), carrying
YugabyteDB's views and functions from the release catalogue
(`yb_catalogue.stubs.stub_sql`: yb_servers(), version(), the isolation function, ...); a
master's `/api/v1/masters` answered on port 7000 of a 127.9.*.* address; a yb-admin stand-in
saying the load balancer is idle (`yb_admin` output); the load generator is the `sshd` fixture on
127.0.0.1, where pgbench and psql run; a second sshd on every tserver address stands in for the
tserver VMs' (their CPU is read there, through the load generator). The program authorizes the
study's key there, as a VM's metadata does, and registers component resources only (the
cluster, one per tserver and one per load generator): `pulumi up` and `destroy` are real, no
cloud provider is involved.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SITE_ENV = "YBSCALE_LOOPBACK"  # the site file the program reads
SERIES = "2024.2"  # config/config.yaml pins 2024.2.1.0


def tserver_ips(nodes: int) -> list[str]:
    return [f"127.0.{nodes}.{i + 1}" for i in range(nodes)]


def program():
    """The Pulumi program: the real program's config and lifecycle outputs, no cloud."""
    import pulumi
    from ybscale_infra import ClusterArgs, export_lifecycle

    config = pulumi.Config("ybscale")
    args = ClusterArgs(**config.require_object("cluster"))
    export_lifecycle(args)
    site = json.loads(Path(os.environ[SITE_ENV]).read_text())
    ips = site["tservers"][str(args.nodes)]
    keys = Path(site["authorized_keys"])
    if args.ssh_public_key not in keys.read_text():  # what the VM metadata's ssh-keys does
        with keys.open("a") as fh:
            fh.write(args.ssh_public_key + "\n")
    cluster = pulumi.ComponentResource("ybscale:loopback:Cluster", config.require("name"))
    for i in range(len(ips)):
        pulumi.ComponentResource(
            "ybscale:loopback:TServer", f"tserver-{i}", opts=pulumi.ResourceOptions(parent=cluster)
        )
    # the load generators: the site's sshd on 127.0.0.1, then those a test added to the site
    # file (`generators`: [address, port] each), as many as gcp.load_generators asks; one
    # resource each, named as the real program names their VMs (an `up` from k to k + 1
    # generators creates one resource, `stacks.grow`)
    generators = [["127.0.0.1", site["ssh_port"]], *site.get("generators", [])]
    generators = generators[: args.load_generators]
    if len(generators) < args.load_generators:
        raise ValueError(f"the loopback site has {len(generators)} load generators")
    for i in range(args.load_generators):
        pulumi.ComponentResource(
            "ybscale:loopback:LoadGenerator", "loadgen" + (f"-{i}" if i else ""),
            opts=pulumi.ResourceOptions(parent=cluster),
        )  # fmt: skip
    outputs = {
        "tserver_ips": ips,
        "master_addresses": f"{site['master_ip']}:7100",
        # the site's VMs booted by their startup scripts (a site of stacks alone has none)
        **(boot_cluster(args, config.require("name"), site) if "boot" in site else {}),
        "loadgen_ip": "127.0.0.1",
        "loadgen_name": "loopback-loadgen",
        "loadgen_ips": [address for address, _ in generators],
        "loadgen_names": ["loopback-loadgen"]
        + [f"loopback-loadgen-{i}" for i in range(1, len(generators))],
        "loadgen_ssh_ports": [port for _, port in generators],
        "ysql_port": site["ysql_port"],
        "ssh_port": site["ssh_port"],
        "tserver_ssh_port": site["tserver_ssh_port"],
        "ready_file": site["ready_file"],
        "yb_admin": site["yb_admin"],
        "zone": args.zone,
        "ssh_access": args.ssh_access,
        "ssh_user": site["ssh_user"],
        "replication_factor": args.replication_factor,
    }
    for key, value in outputs.items():
        pulumi.export(key, value)


DOWNLOAD_HOST = "https://software.yugabyte.com"  # config/config.yaml's gcp.yugabyte.url
STATE_ENV = "YBSCALE_LOOPBACK_STATE"  # the study's state folder (gcp.state_url's path)


def boot_cluster(args, name: str, site: dict) -> dict:
    """The cluster's masters and tservers booted by their own startup scripts, as the real
    program renders them (`ClusterArgs.boots`), each a stand-in VM (tests/vm_boot.py) that
    answers on a loopback address: a master on an address of its own (port 7000, as on its
    VM), a tserver on the site's address for it, its web port one of the stack's own (two
    clusters of one size may be alive together). The download host's name resolves to the
    site's (the script's URL otherwise as written). A VM lives while its stack's state file
    does. Not on preview (`pulumi.runtime.is_dry_run`); the load generators are the site's
    sshd (their script installs PostgreSQL from the internet). Returns the stack outputs
    that point at the booted servers."""
    import pulumi
    import vm_boot

    boot = site["boot"]
    folder = Path(boot["folder"]) / name
    folder.mkdir(parents=True, exist_ok=True)
    places = folder / "addresses.json"
    vms = [b for b in args.boots(name) if b.role != "loadgen"]
    masters = [b for b in vms if b.role == "master"]
    if places.exists():  # an `up` again (a load generator added): the same addresses
        where = json.loads(places.read_text())
    else:
        servers = [_masters_server() for _ in masters]  # free addresses with port 7000
        where = {"masters": [s.server_address[0] for s in servers],
                 "tserver_web_port": _port_free_on(site["tservers"][str(args.nodes)]),
                 # the cluster's data (the yb-admin stand-in's flush_table reads it there)
                 "ysql": f"{site['tservers'][str(args.nodes)][0]}:{site['ysql_port']}"}  # fmt: skip
        for server in servers:
            server.server_close()
        places.write_text(json.dumps(where))
    outputs = {
        "master_addresses": ",".join(f"{ip}:7100" for ip in where["masters"]),
        "tserver_web_port": where["tserver_web_port"],
    }
    if pulumi.runtime.is_dry_run():
        return outputs
    if STATE_ENV not in os.environ:
        raise RuntimeError(f"{STATE_ENV}: the study's state folder (its VMs live while their "
                           "stack's state file does) is not set")  # fmt: skip
    state = Path(os.environ[STATE_ENV]) / ".pulumi" / "stacks" / pulumi.get_project()
    tservers = iter(site["tservers"][str(args.nodes)])
    first = site["tservers"][str(args.nodes)][0]
    addresses = iter(where["masters"])
    for vm in vms:
        address = next(addresses if vm.role == "master" else tservers)
        stand_in = vm_boot.Vm(
            name=vm.name, root=str(folder / vm.name), address=address,
            web_port={"yb-master": 7000, "yb-tserver": where["tserver_web_port"]},
            alive=str(state / f"{pulumi.get_stack()}.json"), postgres=boot["postgres"],
            postgresql_conf_sample=boot["sample"],
            # the first tserver holds the cluster's data (its PostgreSQL's counters)
            ysql=f"{address}:{site['ysql_port']}" if address == first else "",
            flushed=str(folder / "flushed.json"),  # what yb-admin flush_table flushed
        )  # fmt: skip
        Path(stand_in.root).mkdir(exist_ok=True)
        done = vm_boot.boot(vm.script.replace(DOWNLOAD_HOST, boot["download"]), stand_in)
        if done.returncode != 0:  # as on Compute Engine: the VM is up, its servers are not
            log = (Path(stand_in.root) / "startup.log").read_text()[-2000:]
            pulumi.log.warn(f"{vm.name}: startup script exited {done.returncode}: {log}")
    return outputs


class Masters(BaseHTTPRequestHandler):
    """yb-master's `/api/v1/masters`: one master, the leader."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps({"masters": [{"role": "LEADER"}]}).encode()
        self.send_response(200 if self.path == "/api/v1/masters" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _port_free_on(ips: list[str]) -> int:
    """A port every address can bind (the YSQL port of every stand-in tserver)."""
    from ybscale.backends.local.cluster import free_port

    tried: list[int] = []
    while True:
        port = free_port(exclude=tried)
        try:
            for ip in ips:
                with socket.socket() as sock:
                    sock.bind((ip, port))
            return port
        except OSError:
            tried.append(port)


def _masters_server() -> ThreadingHTTPServer:
    """The master's web endpoint on port 7000 (where the readiness check asks) of a loopback
    address no other rehearsal holds."""
    for _ in range(100):
        ip = f"127.9.{random.randrange(256)}.{random.randrange(1, 255)}"
        try:
            return ThreadingHTTPServer((ip, 7000), Masters)
        except OSError:
            continue
    raise RuntimeError("no loopback address has port 7000 free")


# A stand-in machine of at most one CPU: a CPU group with a CFS quota of q CPU (the sshd of a
# load generator and everything its sessions start, or a cluster's server), shown over SSH as
# one CPU running at q of this machine's speed: `nproc` says 1 and `cat /proc/stat` counts the
# group's CPU time over q as busy time (its one `cpu0`), so its utilisation is the share of its
# quota it used and its CPU time per transaction that of a CPU q times as fast. Other commands
# run as they would. The quota is read at every reading: a test may change it.
MACHINE_SCRIPT = """#!/bin/sh
PATH={stubs}:$PATH; export PATH
case "$SSH_ORIGINAL_COMMAND" in *"cat /proc/stat")  # under its `timeout` guard too
  {usage}
  {quota}
  ticks=$((ns * period / quota / 10000000))
  printf 'cpu  %d 0 0 0 0 0 0 0 0 0\ncpu0 %d 0 0 0 0 0 0 0 0 0\n' "$ticks" "$ticks"
  exit 0;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


def machine_group(limits, name: str, cpus: float) -> tuple[list[str], dict]:
    """A stand-in machine's CPU group (`CpuLimits`, cgroup v1 or v2): the command prefix that
    starts a process in it, and where its CPU time and quota are read."""
    prefix, record = limits.prefix(name, cpus)
    if record["mechanism"] not in ("cgroup1", "cgroup2"):
        raise RuntimeError(f"no CPU group here ({record['mechanism']}): no stand-in machine")
    return prefix, {"usage": limits.to_dict()["usage"][name], "group": record["path"],
                    "mechanism": record["mechanism"]}  # fmt: skip


def set_machine_cpus(group: dict, cpus: float) -> None:
    """A stand-in machine's quota changed to `cpus` (its readings follow)."""
    path = Path(group["group"])
    if group["mechanism"] == "cgroup2":
        period = int((path / "cpu.max").read_text().split()[1])
        (path / "cpu.max").write_text(f"{max(1000, int(cpus * period))} {period}\n")
    else:
        period = int((path / "cpu.cfs_period_us").read_text())
        (path / "cpu.cfs_quota_us").write_text(f"{max(1000, int(cpus * period))}\n")


def machine_sshd(folder: Path, addresses: list[str], port: int, name: str, group: dict,
                 prefix=()) -> subprocess.Popen:  # fmt: skip
    """An sshd (conftest.start_sshd, the keys of `folder`) answering as the stand-in machine
    whose CPU group `group` describes (`MACHINE_SCRIPT`), itself started after `prefix`."""
    from conftest import start_sshd

    stubs = folder / f"{name}-bin"
    stubs.mkdir(exist_ok=True)
    (stubs / "nproc").write_text("#!/bin/sh\necho 1\n")
    (stubs / "nproc").chmod(0o755)
    path = Path(group["group"])
    if group["mechanism"] == "cgroup2":
        usage = f"ns=$(( $(awk '/^usage_usec/ {{print $2}}' {group['usage']}) * 1000 ))"
        quota = f"read quota period < {path / 'cpu.max'}"
    else:
        usage = f"ns=$(cat {group['usage']})"
        quota = (f"quota=$(cat {path / 'cpu.cfs_quota_us'}); "
                 f"period=$(cat {path / 'cpu.cfs_period_us'})")  # fmt: skip
    script = folder / f"{name}-machine"
    script.write_text(MACHINE_SCRIPT.format(stubs=stubs, usage=usage, quota=quota))
    script.chmod(0o755)
    return start_sshd(folder, addresses, port, name, f"ForceCommand {script}\n", prefix)


def _boot_site(root: Path, stack: ExitStack, series: str, compiler: str, bindir: Path) -> dict:
    """The download host (the pinned release's tarball of stand-in servers and its .sha) and
    where the booted VMs live; their servers stopped on exit."""
    import vm_boot

    from ybscale.backends.gcp.config import gcp_section

    # the release the schema pins (gcp.yugabyte.version's default)
    version = gcp_section({"gcp": {"project": "p", "owner": "o"}})["yugabyte"]["version"]
    httpd, release = vm_boot.release_host(root / "download", version, series, compiler,
                                          "127.0.0.1")  # fmt: skip
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stack.callback(httpd.server_close)
    stack.callback(httpd.shutdown)
    vms = root / "vms"
    vms.mkdir()
    stack.callback(vm_boot.stop_vms, vms)
    share = [bindir.parent / "share", Path("/usr/share/postgresql") / bindir.parent.name]
    [sample] = [p / "postgresql.conf.sample" for p in share
                if (p / "postgresql.conf.sample").exists()][:1]  # fmt: skip
    host = release.url.split("/releases/", 1)[0]
    return {"folder": str(vms), "download": host, "postgres": str(bindir / "postgres"),
            "sample": str(sample), "sha256": release.sha256}  # fmt: skip


@contextmanager
def loopback_site(root: Path, sshd, node_counts, settings, series: str = SERIES,
                  cluster_cpus: float | None = None, compiler: str | None = None,
                  ysql: dict | None = None):  # fmt: skip
    """Start the stand-in tservers for each node count in `node_counts` (the study's
    clusters), the master endpoint and the ready marker; write the site file; yield its path.
    Everything started is stopped on exit. `root`: a data root of the test's own (RAM).
    `cluster_cpus`: each cluster's server is a stand-in machine of that many CPUs (at most 1,
    `machine_group`), and its tservers' sshd answers for it (`machine_sshd`): its CPU, not the
    whole machine's, is what the rows read for every tserver (the stand-in of one VM).
    The program boots every master and tserver by its startup script (`boot_cluster`) from a
    download host of the site's (its servers built with `compiler`, default
    `conftest.gflags_compiler`), and the stack outputs point at the booted servers; all
    stopped on exit too."""
    import scans
    from conftest import authorized_keys, start_sshd, stop_sshd

    from ybscale.backends.base import Endpoint
    from ybscale.backends.local import LocalBackend, find_bindir
    from ybscale.backends.local.cluster import Node
    from ybscale.backends.yb_catalogue.stubs import stub_sql
    from ybscale.backends.ysql import LocalRunner

    groups = {n: tserver_ips(n) for n in sorted(set(node_counts))}
    local = LocalBackend(settings)
    bindir, runas = find_bindir(), local.runas()
    template = local.template(root, bindir, runas)
    port = _port_free_on([ip for ips in groups.values() for ip in ips])
    runner = LocalRunner(psql=str(bindir / "psql"))
    home = root / "loopback"  # the servers' user writes their logs here
    home.mkdir()
    local._chown(home)
    with ExitStack() as stack:
        groups_cpu = None
        if cluster_cpus is not None:
            from ybscale.backends.local.cpu import CpuLimits

            groups_cpu = CpuLimits(f"loopback-{os.getpid()}-{random.randrange(10**6)}")
            stack.callback(groups_cpu.cleanup)  # after every server stopped (callbacks: LIFO)
        machines = {}
        masters = _masters_server()
        threading.Thread(target=masters.serve_forever, daemon=True).start()
        stack.callback(masters.server_close)
        stack.callback(masters.shutdown)
        for nodes, ips in groups.items():
            # one server per cluster, listening on every tserver address: one database behind
            # every tserver, as YugabyteDB's tservers serve one database
            node = Node(f"cluster{nodes}", home / f"cluster{nodes}", port, runas, bindir)
            subprocess.run(["cp", "-a", str(template), str(node.datadir)], check=True)
            with open(node.datadir / "pg_hba.conf", "a") as hba:
                hba.write("host all all 127.0.0.0/8 trust\n")
            # the YSQL the tservers' ysql_pg.conf gives (`ysql`: the study's server.* YSQL
            # settings, which the booted tservers' PostgreSQL parsed; one database stands for
            # every tserver's YSQL)
            from ybscale_infra.startup import pg_conf_value

            conf = {name: pg_conf_value(value) for name, value in (ysql or {}).items()}
            # planned as YugabyteDB 2024.2 plans: bitmap scans off, an index path wherever one
            # exists (tests/scans.py); every statement's plan in the server's log
            # (auto_explain), where `scans.logged_whole_scans` finds those that read kv whole
            conf = {**scans.STAND_IN, **conf}
            node.configure("32MB", {"listen_addresses": "'" + ", ".join(ips) + "'", **conf})
            stack.callback(node.stop)
            prefix = []
            if groups_cpu is not None:
                prefix, machines[nodes] = machine_group(groups_cpu, f"cluster{nodes}", cluster_cpus)
            node.start(prefix)
            admin = Endpoint(ips[0], port, "postgres", "postgres")
            runner.psql(admin, "CREATE ROLE yugabyte SUPERUSER LOGIN;\n"
                        "CREATE DATABASE yugabyte OWNER yugabyte;\n", {}, 60)  # fmt: skip
            servers = [f"{ip}:{port}" for ip in ips]
            runner.psql(Endpoint(ips[0], port, "yugabyte", "yugabyte"),
                        stub_sql(series, servers=servers), {}, 60)  # fmt: skip
        # the tserver VMs' sshd (machine CPU is read there, through the load generator): on
        # every tserver address, with the load generator's authorized keys (one study key)
        every_ip = [ip for ips in groups.values() for ip in ips]
        ssh_port = _port_free_on(every_ip)  # after the servers: not their port
        keys = authorized_keys(sshd).parent
        if machines:  # one stand-in machine per cluster: its tservers' sshd answers for it
            for nodes, ips in groups.items():
                proc = machine_sshd(keys, ips, ssh_port, f"tservers{nodes}-sshd", machines[nodes])
                stack.callback(stop_sshd, proc)
        else:
            sshd_proc = start_sshd(keys, every_ip, ssh_port, "tservers-sshd")
            stack.callback(stop_sshd, sshd_proc)
        if compiler is None:
            from conftest import gflags_compiler

            compiler = gflags_compiler()
        boot = _boot_site(root, stack, series, compiler, bindir)
        ready = root / "ready"
        ready.write_text("startup finished\n")
        # yb-admin as the load generator runs it after each reload: it logs its arguments,
        # answers idle as yb-admin prints it (ClusterAdminClient::GetIsLoadBalancerIdle) and
        # flushes a table as the booted cluster's (vm_boot.flush_table); any other command
        # fails, as an unknown one does
        yb_admin = root / "yb-admin"
        yb_admin.write_text(
            f'#!/bin/sh\necho "$*" >> {root / "yb-admin.calls"}\n'
            'case "$3" in\n'
            '  get_is_load_balancer_idle) [ $# -eq 3 ] && echo "Idle = 1";;\n'
            f"  flush_table) exec {sys.executable} {Path(__file__).with_name('vm_boot.py')} "
            f'flush_table {boot["folder"]} {bindir / "psql"} "$@";;\n'
            '  *) echo "yb-admin stand-in: $3: not a command it knows" >&2; exit 1;;\n'
            "esac\n"
        )
        yb_admin.chmod(0o755)
        site = root / "site.json"
        site.write_text(
            json.dumps(
                {
                    "tservers": {str(n): ips for n, ips in groups.items()},
                    "ysql_port": port,
                    "ssh_port": sshd.port,
                    "tserver_ssh_port": ssh_port,
                    "ssh_user": sshd.user,
                    "authorized_keys": str(authorized_keys(sshd)),
                    "ready_file": str(ready),
                    "yb_admin": str(yb_admin),
                    "master_ip": masters.server_address[0],
                    "boot": boot,
                }
            )
        )
        yield site
