"""`gcp` backend: YugabyteDB VMs on Google Compute Engine, one Pulumi stack per cluster: an
infrastructure combination's, and a replicate's with gcp.cluster_per_replicate (`cluster_label`).

Clusters are brought up and destroyed by the cluster_up / cluster_down rules (rules/cluster.smk)
through `GcpBackend.up` / `down` (`clusters.py`, which drives `stacks.py`); `measure` reads the
endpoints they wrote and runs pgbench on the load-generator VM over SSH.

    python -m ybscale.backends.gcp.clusters up --combo C --out results/clusters/C/endpoints.json
    python -m ybscale.backends.gcp.clusters down --combo C --out results/clusters/C/released.json

Where those files live is the rules' choice: `ClusterFiles` is handed the folder.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ybscale.backends import ssh, yb_catalogue
from ybscale.backends.base import (
    Backend,
    BackendError,
    Cluster,
    Endpoint,
    cluster_label,
    settings_by_source,
)
from ybscale.backends.gcp.balancer import load_balancer_idle
from ybscale.backends.gcp.config import gcp_section as validate_section
from ybscale.backends.loadgen import LoadgenRunner, ssh_session
from ybscale.backends.machine_cpu import MachineCpu
from ybscale.backends.ysql import YsqlCluster, master_problems
from ybscale.design.row import Row

READY_FILE = "/var/lib/ybscale/ready"  # the load generator's startup script writes it last


@dataclass(frozen=True)
class ClusterFiles:
    """What the pipeline keeps of one combination's cluster, in the folder the rules name
    (``results/clusters/<label>``): endpoints, released marker, row lock, host keys."""

    folder: Path

    @classmethod
    def of(cls, clusters: Path | str, combo: str) -> ClusterFiles:
        return cls(Path(clusters) / combo)

    @property
    def combination(self) -> str:
        return self.folder.name

    @property
    def endpoints(self) -> Path:
        return self.folder / "endpoints.json"

    @property
    def released(self) -> Path:
        """The marker `cluster_down` writes once the stack is destroyed."""
        return self.folder / "released.json"

    @property
    def known_hosts(self) -> Path:
        """Host keys of this cluster's incarnation (removed by up/down: new VMs, new keys)."""
        return self.folder / "known_hosts"

    @contextmanager
    def lock(self) -> Iterator[None]:
        """One row at a time per cluster (its single load generator); rows of different
        clusters run in parallel. An flock on ``measure.lock``, released on exit."""
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "measure.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def forget(self) -> None:
        """Remove what is known of a cluster that no longer exists (endpoints, host keys), so
        the next run brings it up again instead of SSHing into deleted VMs."""
        self.endpoints.unlink(missing_ok=True)
        self.known_hosts.unlink(missing_ok=True)

    def load(self) -> dict:
        """endpoints.json of a live cluster; BackendError when missing or already destroyed."""
        path = self.endpoints
        if not path.exists():
            raise BackendError(
                f"{path}: missing; the cluster_up rule (python -m ybscale.backends.gcp.clusters up "
                f"--combo {self.combination}) brings this cluster up"
            )
        endpoints = json.loads(path.read_text())
        gone = self.released
        if gone.exists() and json.loads(gone.read_text()).get("destroyed", "") >= endpoints.get(
            "created", ""
        ):
            raise BackendError(
                f"{path}: the cluster was destroyed since ({gone}); bring it up again"
            )
        return endpoints


def ssh_host(endpoints: Mapping, settings: Mapping, known_hosts: Path) -> ssh.SshHost:
    """How to reach the load generator: its public IP, or its name through an IAP tunnel."""
    proxy = None
    host = endpoints["loadgen_ip"]
    if endpoints.get("ssh_access", settings["ssh_access"]) == "iap":
        host = endpoints["loadgen_name"]
        proxy = (
            f"gcloud compute start-iap-tunnel %h %p --listen-on-stdin "
            f"--project={endpoints['project']} --zone={endpoints['zone']} --verbosity=warning"
        )
    return ssh.SshHost(
        host=host,
        port=int(endpoints.get("ssh_port", 22)),
        user=endpoints["ssh_user"],
        key=Path(settings["ssh_key"]),
        known_hosts=known_hosts,
        proxy_command=proxy,
        control_path=ssh.control_path(),
    )


class GcpBackend(Backend):
    """One Pulumi stack per cluster: `up` provisions it and waits until it is ready, `measure`
    runs pgbench on its load generator over SSH, `down` destroys it."""

    name = "gcp"
    modules = (
        "backends/gcp/backend.py",
        "backends/ysql.py",
        "backends/ssh.py",
        "backends/machine_cpu.py",
    )
    rules = "rules/cloud.smk"  # the plan, printed before spending
    loads_here = False  # pgbench runs on each cluster's own load generator

    def __init__(self, config: Mapping, clusters: Path | None = None):
        super().__init__(config, clusters)
        self.settings = validate_section(config)

    @classmethod
    def section(cls, config: Mapping):
        return validate_section(config)

    @classmethod
    def measuring_settings(cls, settings: Mapping) -> dict:
        """How the dataset is laid out; prices, slots and the stacks' settings are not (a
        cluster's definition reaches a row through its endpoints)."""
        return {"table_sharding": settings["gcp"]["table_sharding"]}

    @classmethod
    def cluster_labels(cls, settings: Mapping, rows) -> dict[str, str]:
        """A cluster per combination, and per replicate unless gcp.cluster_per_replicate is
        false (`cluster_label`)."""
        per_replicate = validate_section(settings)["cluster_per_replicate"]
        return {row.run: cluster_label(row, per_replicate) for row in rows}

    @classmethod
    def definition(cls, settings: Mapping, rows) -> dict:
        """Its shape, server settings, machine types and the gcp settings that define a
        stack (`clusters.definition`): never prices or slots."""
        from ybscale.backends.gcp.clusters import definition

        return definition(settings, rows[0])

    @classmethod
    def max_clusters(cls, settings: Mapping) -> int:
        return validate_section(settings)["max_clusters"]

    @classmethod
    def slots(cls, settings: Mapping, rows, order) -> dict:
        """The plan's slots (`plan.previous_in_slot`): each cluster to the slot that frees
        first, by the planned time of its rows."""
        from ybscale.backends.gcp.plan import previous_in_slot

        return previous_in_slot(rows, settings)

    @classmethod
    def on_error(cls, settings: Mapping, labels, clusters: Path) -> None:
        from ybscale.backends.gcp.stacks import destroy_all

        destroy_all(settings, clusters)  # this study's stacks, whatever combination

    def node_sizes(self) -> list[str]:
        """Keys of `gcp.machine_types` that are tserver sizes (not master or loadgen)."""
        return sorted(set(self.settings["machine_types"]) - {"master", "loadgen"})

    def check_rows(self, rows) -> list[str]:
        """Sizes against `gcp.machine_types`; server.* names against the flag list and YSQL
        settings of the pinned YugabyteDB series (yb_catalogue); VM names against GCE's
        length limit."""
        from ybscale.backends.gcp.stacks import vm_name_errors

        server = settings_by_source(rows, "server")
        release = self.settings["yugabyte"]["version"]
        per_replicate = self.settings["cluster_per_replicate"]
        tservers = {cluster_label(row, per_replicate): row.cluster.nodes for row in rows}
        return (
            super().check_rows(rows)
            + yb_catalogue.server_setting_errors(server, release)
            + vm_name_errors(self.settings, tservers)
        )

    def up(self, label: str, definition: Mapping, folder: Path) -> dict:
        """pulumi up the cluster's stack, wait until it is ready (VM boot logs kept in
        `folder`/serial when it is not); the stack's outputs."""
        from ybscale.backends.gcp import clusters

        files = ClusterFiles(folder)
        clusters.up(label, self.config, files.endpoints, serial_logs=folder / "serial")
        return json.loads(files.endpoints.read_text())

    def down(self, endpoints: Mapping, folder: Path) -> dict:
        """Destroy the cluster's stack (its endpoints and host keys forgotten)."""
        from ybscale.backends.gcp import clusters

        return clusters.down(
            ClusterFiles(folder).combination, self.config, folder / "released.json"
        )

    @contextmanager
    def cluster(self, row, workdir) -> Iterator[Cluster]:
        """`row` on the cluster the cluster_up rule brought up (gcp clusters are not brought
        up for one row): its endpoints read from the clusters folder."""
        label = cluster_label(row, self.settings["cluster_per_replicate"])
        if self.clusters is None:
            raise BackendError("gcp: the measuring rule passes the clusters folder (params)")
        files = ClusterFiles.of(self.clusters, label)
        with self.measure(row, files.load(), files.folder) as cluster:
            yield cluster

    @contextmanager
    def measure(self, row, endpoints: Mapping, folder: Path) -> Iterator[Cluster]:
        files = ClusterFiles(folder)
        host = ssh_host(endpoints, self.settings, files.known_hosts)
        nodes = tserver_endpoints(endpoints)
        record = {
            "backend": "gcp",
            "combination": row.combination,
            "cluster": files.combination,
            "stack": endpoints.get("stack"),
            "machine_type": endpoints.get("machine_type"),
            "replication_factor": endpoints.get("replication_factor"),
            "masters": len(endpoints["master_addresses"].split(",")),
            "tservers": len(nodes),
            "yugabyte_version": endpoints.get("yugabyte_version"),
            "zone": endpoints.get("zone"),
            "load_generator": endpoints.get("loadgen_name"),
            "min_cpu_platform": endpoints.get("min_cpu_platform"),
            "cpu_platforms": endpoints.get("cpu_platforms"),
        }
        timeout = self.settings["balancer_timeout"]
        runner = LoadgenRunner(host)
        with (
            files.lock(),
            ssh_session(host),
            MachineCpu(runner.proc_stat, node_hosts(host, nodes)) as cpu,
        ):
            yield YsqlCluster(
                nodes,
                row,
                runner,
                table="kv",
                sharding=self.settings["table_sharding"],
                record=record,
                health=masters_health(host, endpoints),
                settle=load_balancer_idle(host, endpoints, timeout) if timeout else None,
                cpu=cpu,
            )


def tserver_endpoints(endpoints: Mapping) -> list[Endpoint]:
    """The YSQL endpoint of every tserver of a cluster."""
    port = int(endpoints["ysql_port"])
    return [
        Endpoint(host=ip, port=port, dbname="yugabyte", user="yugabyte", role=f"tserver{i}")
        for i, ip in enumerate(endpoints["tserver_ips"])
    ]


def node_hosts(
    loadgen: ssh.SshHost, nodes: list[Endpoint], port: int = 22
) -> dict[str, ssh.SshHost]:
    """Each tserver VM by endpoint name, reached over SSH through the load generator (its
    private IP; the cluster's firewall lets the load generator in on port 22)."""
    return {ep.role: ssh.through(loadgen, ep.host, port, tag=ep.role) for ep in nodes}


def masters_health(host: ssh.SshHost, endpoints: Mapping):
    """A check of the yb-master Raft group, asked from the load generator: the first master
    that answers `/api/v1/masters` (web port 7000) must list every master as LEADER or
    FOLLOWER, with exactly one leader."""
    masters = [a.rsplit(":", 1)[0] for a in endpoints["master_addresses"].split(",")]

    def health() -> list[str]:
        errors = []
        for ip in masters:
            url = f"http://{ip}:7000/api/v1/masters"
            try:
                answer = ssh.check_output(host, ["curl", "-fsS", "--max-time", "10", url],
                                          timeout=60)  # fmt: skip
            except BackendError as exc:
                errors.append(f"{url}: {exc}")
                continue
            return master_problems(answer, len(masters))
        return ["no master answers: " + "; ".join(errors)]

    return health


def wait_ready(
    endpoints: Mapping,
    settings: Mapping,
    known_hosts: Path,
    row: Row,
    log=print,
    sleep=time.sleep,
) -> None:
    """Wait until the cluster is ready: the VMs' startup finished, every master in the Raft
    group, every tserver registered (yb_servers()) and answering YSQL (YsqlCluster.check).
    `row`: one row of the combination (the cluster it will measure)."""
    host = ssh_host(endpoints, settings, known_hosts)
    cluster = YsqlCluster(
        tserver_endpoints(endpoints), row, LoadgenRunner(host),
        health=masters_health(host, endpoints),
    )  # fmt: skip
    ready_file = endpoints.get("ready_file", READY_FILE)
    deadline = time.monotonic() + settings["ready_timeout"]
    last = ""
    while time.monotonic() < deadline:
        try:
            ssh.check_output(host, ["test", "-f", ready_file], timeout=60)
            cluster.check()
            log(f"{endpoints['stack']}: ready (masters, yb_servers(), YSQL on every tserver)")
            return
        except BackendError as exc:
            last = str(exc)
            sleep(15)
    raise BackendError(
        f"{endpoints['stack']}: not ready after {settings['ready_timeout']}s: {last}"
    )
