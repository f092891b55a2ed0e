"""`YugabyteCluster`: one YugabyteDB cluster on GCE for one infrastructure combination.

A private VPC (no auto subnets) with Cloud NAT for outbound downloads, dedicated yb-master VMs
(as many as the replication factor), one yb-tserver VM per node and one load-generator VM.
Database VMs have no public IP; database/RPC ports are open only inside the subnetwork.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from ybscale_infra import startup

IAP_RANGE = "35.235.240.0/20"  # Google's Identity-Aware Proxy TCP forwarding range
DB_PORTS = ["5433", "7000", "7100", "9000", "9100", "12000", "13000"]
DB_TAG = "ybscale-db"
LOADGEN_TAG = "ybscale-loadgen"
# labels that never change for a stack: the only ones written into create-only fields
FIXED_LABELS = ("project", "stack", "study")
_FIRST_HOST = 10  # GCE reserves .0, .1 and the last two addresses; leave room below .10


def label_value(value: object) -> str:
    """A GCP label value: lowercase letters, digits, '_' and '-', at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]", "-", str(value).lower())[:63]


@dataclass(frozen=True)
class VmBoot:
    """One VM of a cluster as it boots: its name, role (master, tserver, loadgen), internal
    address, startup script and max_run_duration (None: the cluster's)."""

    name: str
    role: str
    ip: str
    script: str
    run_seconds: int | None = None


@dataclass(frozen=True)
class ClusterArgs:
    """Everything one cluster needs. `replication_factor` = masters (1, or nodes when on)."""

    nodes: int
    replication_factor: int
    machine_type: str  # tservers (from node_size)
    zone: str
    ssh_user: str
    ssh_public_key: str
    labels: dict[str, str] = field(default_factory=dict)
    master_machine_type: str = "n2-standard-2"
    loadgen_machine_type: str = "e2-standard-4"
    load_generators: int = 1  # load-generator VMs, at most one per tserver
    image: str = "ubuntu-os-cloud/ubuntu-2204-lts"
    disk_size_gb: int = 50
    disk_type: str = "pd-ssd"
    subnet_cidr: str = "10.42.0.0/24"
    ssh_access: str = "iap"  # iap: no public IP anywhere | public: loadgen gets one
    ssh_source_cidr: str | None = None  # required when ssh_access == "public"
    yugabyte_version: str = "2024.2.1.0-b185"
    yugabyte_url: str = (
        "https://software.yugabyte.com/releases/{release}/yugabyte-{version}-linux-x86_64.tar.gz"
    )
    yugabyte_sha256: str | None = None  # None: checked against the published <url>.sha
    pg_client_version: int = 16
    max_run_seconds: int = 8 * 3600  # Compute Engine deletes each VM after this, no sweep needed
    # each load generator's own bound where it is not max_run_seconds: one added to a live
    # cluster (gcp.load_generators: auto) is deleted when the VMs brought up with it are
    loadgen_run_seconds: list[int] = field(default_factory=list)
    master_flags: dict[str, str] = field(default_factory=dict)  # server.* knobs: yb-master flags
    tserver_flags: dict[str, str] = field(default_factory=dict)  # server.* knobs: yb-tserver flags
    ysql_pg_conf: dict[str, str] = field(default_factory=dict)  # server.* knobs: YSQL settings
    # masters and tservers (E2, the load generator's family, takes no minimum CPU platform)
    min_cpu_platform: str | None = None

    def __post_init__(self) -> None:
        if self.replication_factor not in (1, self.nodes):
            raise ValueError(
                f"replication_factor must be 1 or nodes ({self.nodes}), "
                f"got {self.replication_factor}"
            )
        if self.ssh_access not in ("iap", "public"):
            raise ValueError(f"ssh_access must be iap or public, got {self.ssh_access!r}")
        if self.ssh_access == "public":
            if not self.ssh_source_cidr:
                raise ValueError("ssh_access public needs ssh_source_cidr (e.g. your IP/32)")
            if ipaddress.ip_network(self.ssh_source_cidr, strict=False).prefixlen == 0:
                raise ValueError(f"ssh_source_cidr {self.ssh_source_cidr} opens SSH to everyone")
        if not 30 <= self.max_run_seconds <= 120 * 86400:
            raise ValueError(
                f"max_run_seconds must be 30 s to 120 days, got {self.max_run_seconds}"
            )
        for i, seconds in enumerate(self.loadgen_run_seconds):
            if not 30 <= seconds <= self.max_run_seconds:
                raise ValueError(
                    f"loadgen_run_seconds[{i}] must be 30 s to max_run_seconds "
                    f"({self.max_run_seconds}), got {seconds}"
                )
        if not 1 <= self.load_generators <= self.nodes:
            raise ValueError(
                f"load_generators must be 1 to nodes ({self.nodes}), got {self.load_generators}"
            )
        if len(self.host_ips()) < self.load_generators + self.nodes + self.replication_factor:
            raise ValueError(f"subnet {self.subnet_cidr} is too small for this cluster")

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    def host_ips(self) -> list[str]:
        """Usable static internal addresses of the subnetwork, in order."""
        hosts = list(ipaddress.ip_network(self.subnet_cidr).hosts())
        return [str(h) for h in hosts[_FIRST_HOST - 1 : -2]]

    def master_ips(self) -> list[str]:
        return self.host_ips()[: self.replication_factor]

    def tserver_ips(self) -> list[str]:
        return self.host_ips()[self.replication_factor : self.replication_factor + self.nodes]

    def loadgen_ips(self) -> list[str]:
        first = self.replication_factor + self.nodes
        return self.host_ips()[first : first + self.load_generators]

    def loadgen_ip(self) -> str:
        return self.loadgen_ips()[0]

    def loadgen_run_seconds_of(self, i: int) -> int:
        """Load generator `i`'s max_run_duration: its own (loadgen_run_seconds), else the
        cluster's."""
        own = self.loadgen_run_seconds
        return own[i] if i < len(own) else self.max_run_seconds

    def boots(self, name: str) -> list[VmBoot]:
        """Every VM of cluster `name` with the startup script it boots with: masters, tservers,
        then load generators (the first `<name>-loadgen`, the others `<name>-loadgen-<i>`).
        The one rendering of the scripts: the program's and the loopback rehearsal's."""
        url = startup.download_url(self.yugabyte_url, self.yugabyte_version)
        masters = self.master_ips()
        common = {"version": self.yugabyte_version, "url": url, "sha256": self.yugabyte_sha256}
        return [
            *(
                VmBoot(f"{name}-master-{i}", "master", ip, startup.master_script(
                    ip=ip, master_ips=masters, replication_factor=self.replication_factor,
                    zone=self.zone, flags=self.master_flags, **common))
                for i, ip in enumerate(masters)
            ),
            *(
                VmBoot(f"{name}-tserver-{i}", "tserver", ip, startup.tserver_script(
                    ip=ip, master_ips=masters, zone=self.zone, flags=self.tserver_flags,
                    pg_conf=self.ysql_pg_conf, **common))
                for i, ip in enumerate(self.tserver_ips())
            ),
            *(
                VmBoot(name + "-loadgen" + (f"-{i}" if i else ""), "loadgen", ip,
                       startup.loadgen_script(self.pg_client_version,
                                              yugabyte=(self.yugabyte_version, url,
                                                        self.yugabyte_sha256)),  # yb-admin
                       self.loadgen_run_seconds_of(i))
                for i, ip in enumerate(self.loadgen_ips())
            ),
        ]  # fmt: skip

    @property
    def ssh_source_ranges(self) -> list[str]:
        """Where SSH to the load generator may come from."""
        return [self.ssh_source_cidr] if self.ssh_access == "public" else [IAP_RANGE]


class YugabyteCluster(pulumi.ComponentResource):
    """Network, NAT, firewall, masters, tservers and load generator of one cluster."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("ybscale:gcp:YugabyteCluster", name, None, opts)
        self.args = args
        self.labels = {k: label_value(v) for k, v in args.labels.items()}
        self.resources: list[pulumi.Resource] = []
        self.cpu_platforms: dict[str, pulumi.Output] = {}  # VM name -> CPU platform
        child = pulumi.ResourceOptions(parent=self)
        # create-only fields (a Network's, Subnetwork's or Router's description, a boot disk's
        # initialize_params labels: the provider can set them only when it creates the resource)
        # get only what never changes for a stack; expiry (new at every `up`) and owner go to
        # the instances' labels, which the provider updates in place. Any other value there
        # would rebuild the network and every VM (an empty database) at a second `up`.
        self.fixed_labels = {k: v for k, v in self.labels.items() if k in FIXED_LABELS}
        description = "ybscale " + " ".join(
            f"{k}={v}" for k, v in sorted(self.fixed_labels.items())
        )

        self.network = self._add(
            gcp.compute.Network(
                f"{name}-net",
                name=f"{name}-net",
                auto_create_subnetworks=False,
                description=description,
                opts=child,
            )
        )
        self.subnetwork = self._add(
            gcp.compute.Subnetwork(
                f"{name}-subnet",
                name=f"{name}-subnet",
                network=self.network.id,
                region=args.region,
                ip_cidr_range=args.subnet_cidr,
                private_ip_google_access=True,
                description=description,
                opts=child,
            )
        )
        router = self._add(
            gcp.compute.Router(
                f"{name}-router",
                name=f"{name}-router",
                network=self.network.id,
                region=args.region,
                description=description,
                opts=child,
            )
        )
        self.nat = self._add(
            gcp.compute.RouterNat(
                f"{name}-nat",
                name=f"{name}-nat",
                router=router.name,
                region=args.region,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                opts=child,
            )
        )
        self._firewall(name, "db", DB_PORTS, [args.subnet_cidr], [DB_TAG], description)
        self._firewall(name, "ssh", ["22"], args.ssh_source_ranges, [LOADGEN_TAG], description)
        # DB VMs: SSH through IAP (debugging) and from the load generator, through which the
        # pipeline reads each VM's /proc/stat (ybscale.backends.machine_cpu)
        db_ssh = [IAP_RANGE, *(f"{ip}/32" for ip in args.loadgen_ips())]
        self._firewall(name, "ssh-db", ["22"], db_ssh, [DB_TAG], description)

        boots = args.boots(name)
        instances = {
            boot.name: self._instance(
                boot.name,
                {"master": args.master_machine_type, "tserver": args.machine_type,
                 "loadgen": args.loadgen_machine_type}[boot.role],
                boot.ip,
                [LOADGEN_TAG if boot.role == "loadgen" else DB_TAG],
                boot.script,
                role=boot.role,
                public=boot.role == "loadgen" and args.ssh_access == "public",
                run_seconds=boot.run_seconds,
            )
            for boot in boots
        }  # fmt: skip
        self.masters, self.tservers, self.loadgens = (
            [instances[b.name] for b in boots if b.role == role]
            for role in ("master", "tserver", "loadgen")
        )
        self.loadgen = self.loadgens[0]

        if args.ssh_access == "public":
            hosts = [
                vm.network_interfaces.apply(lambda nics: nics[0].access_configs[0].nat_ip)
                for vm in self.loadgens
            ]
        else:
            hosts = [pulumi.Output.from_input(ip) for ip in args.loadgen_ips()]
        self.outputs = {
            "tserver_ips": args.tserver_ips(),
            "master_addresses": startup.master_addresses(args.master_ips()),
            "loadgen_ip": hosts[0],
            "loadgen_private_ip": args.loadgen_ip(),
            "loadgen_name": self.loadgen.name,
            # every load generator, the first included (gcp.load_generators)
            "loadgen_ips": pulumi.Output.all(*hosts),
            "loadgen_private_ips": args.loadgen_ips(),
            "loadgen_names": pulumi.Output.all(*(vm.name for vm in self.loadgens)),
            "loadgen_run_seconds": [
                args.loadgen_run_seconds_of(i) for i in range(args.load_generators)
            ],
            "ysql_port": startup.YSQL_PORT,
            "zone": args.zone,
            "ssh_access": args.ssh_access,
            "ssh_user": args.ssh_user,
            "replication_factor": args.replication_factor,
            "min_cpu_platform": args.min_cpu_platform,
            "cpu_platforms": self.cpu_platforms,  # each VM's, as Compute Engine reports it
        }
        self.register_outputs(self.outputs)

    def _add(self, resource):
        self.resources.append(resource)
        return resource

    def _firewall(self, name, suffix, ports, sources, tags, description):
        return self._add(
            gcp.compute.Firewall(
                f"{name}-fw-{suffix}",
                name=f"{name}-fw-{suffix}",
                network=self.network.id,
                direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=ports)],
                source_ranges=sources,
                target_tags=tags,
                description=description,
                opts=pulumi.ResourceOptions(parent=self),
            )
        )

    def _instance(
        self, vm_name, machine_type, ip, tags, script, role, public=False, run_seconds=None
    ):
        args = self.args
        labels = {**self.labels, "role": role}
        nic = gcp.compute.InstanceNetworkInterfaceArgs(
            subnetwork=self.subnetwork.id,
            network_ip=ip,
            access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()]
            if public
            else [],
        )
        instance = self._add(
            gcp.compute.Instance(
                vm_name,
                name=vm_name,
                machine_type=machine_type,
                zone=args.zone,
                tags=tags,
                labels=labels,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=args.image,
                        size=args.disk_size_gb,
                        type=args.disk_type,
                        labels={**self.fixed_labels, "role": role},  # create-only: see above
                    )
                ),
                network_interfaces=[nic],
                metadata={
                    "ssh-keys": f"{args.ssh_user}:{args.ssh_public_key.strip()}",
                    "enable-oslogin": "FALSE",
                },
                metadata_startup_script=script,
                min_cpu_platform=args.min_cpu_platform if role != "loadgen" else None,
                allow_stopping_for_update=True,
                # a cloud-side bound that needs no sweep: Compute Engine deletes the VM itself
                scheduling=gcp.compute.InstanceSchedulingArgs(
                    provisioning_model="STANDARD",
                    max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(
                        seconds=run_seconds or args.max_run_seconds
                    ),
                    instance_termination_action="DELETE",
                ),
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[self.nat]
                ),  # downloads need NAT
            )
        )
        self.cpu_platforms[vm_name] = instance.cpu_platform
        return instance


def export_lifecycle(args: ClusterArgs) -> None:
    """Stack outputs `ybscale reap` reads from a fresh workspace (an inline program's stack
    config is not readable there, Pulumi #5578): expiry, owner and study. Exported before any
    resource."""
    pulumi.export("expiry", args.labels.get("expiry"))
    pulumi.export("owner", args.labels.get("owner"))
    pulumi.export("study", args.labels.get("study"))


def program() -> YugabyteCluster:
    """The Pulumi program: config `ybscale:cluster` (an object of ClusterArgs fields)."""
    config = pulumi.Config("ybscale")
    args = ClusterArgs(**config.require_object("cluster"))
    export_lifecycle(args)
    name = config.get("name") or pulumi.get_stack()
    cluster = YugabyteCluster(name, args)
    for key, value in cluster.outputs.items():
        pulumi.export(key, value)
    return cluster
