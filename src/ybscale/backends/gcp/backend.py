"""`gcp` backend: YugabyteDB VMs on Google Compute Engine, one Pulumi stack per cluster: an
infrastructure combination's, and a replicate's with gcp.cluster_per_replicate (`cluster_label`).

Clusters are brought up and destroyed by the cluster_up / cluster_down rules (rules/cluster.smk)
through `GcpBackend.up` / `down` (`clusters.py`, which drives `stacks.py`); `measure` reads the
endpoints they wrote and runs pgbench on the load-generator VM over SSH.

    python -m ybscale.backends.gcp.clusters up --combo C --out results/clusters/C/endpoints.json
    python -m ybscale.backends.gcp.clusters down --combo C --out results/clusters/C/released.json

Where those files live is the rules' choice: `files.ClusterFiles` is handed the folder;
`reach` says how the cluster is reached over SSH.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ybscale.backends import yb_catalogue
from ybscale.backends.base import (
    Backend,
    BackendError,
    Cluster,
    settings_by_source,
)
from ybscale.backends.gcp.balancer import flush_table, load_balancer_idle
from ybscale.backends.gcp.config import (
    bound_errors,
    disk_errors,
    load_generators_bound,
    replication_errors,
)
from ybscale.backends.gcp.config import gcp_section as validate_section
from ybscale.backends.gcp.files import ClusterFiles
from ybscale.backends.gcp.names import cluster_label
from ybscale.backends.gcp.reach import (
    flags_reported,
    generator_hosts,
    masters_health,
    node_hosts,
    ssh_host,
    tserver_endpoints,
)
from ybscale.backends.loadgen import LoadgenRunner, ssh_session
from ybscale.backends.machine_cpu import MachineCpu
from ybscale.backends.ysql import TSERVER_WEB_PORT, YsqlCluster, generator_readers
from ybscale.config_sources import source_of


class GcpBackend(Backend):
    """One Pulumi stack per cluster: `up` provisions it and waits until it is ready, `measure`
    runs pgbench on its load generator over SSH, `down` destroys it."""

    name = "gcp"
    modules = (
        "backends/gcp/backend.py",
        "backends/gcp/reach.py",
        "backends/gcp/balancer.py",
        "backends/ysql.py",
        "backends/ssh.py",
        "backends/machine_cpu.py",
        "backends/loadgen.py",
    )
    rules = str(Path(__file__).with_name("rules.smk"))  # the plan, printed before spending
    loads_here = False  # pgbench runs on each cluster's own load generator

    def __init__(self, config: Mapping, clusters: Path | None = None):
        super().__init__(config, clusters)
        self.settings = validate_section(config)

    @classmethod
    def section(cls, config: Mapping):
        return validate_section(config)

    @classmethod
    def measuring_settings(cls, settings: Mapping) -> dict:
        """How the dataset is laid out, and how far `auto` may grow the load generators
        (gcp.load_generators_max, when set); prices, slots and the stacks' settings are not (a
        cluster's definition reaches a row through its endpoints)."""
        gcp = settings["gcp"]
        bound = gcp.get("load_generators_max")
        return {"table_sharding": gcp["table_sharding"],
                **({"load_generators_max": bound} if bound is not None else {})}  # fmt: skip

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

    @classmethod
    def hourly_price(cls, settings: Mapping, row) -> dict:
        """The cluster's VMs at gcp.prices.<region>.vm_hour, as `ybscale plan` prices them
        (`plan.hourly_price`)."""
        from ybscale.backends.gcp.plan import hourly_price

        return hourly_price(settings, row)

    @staticmethod
    def report_text(applied) -> list[str]:
        """The findings' sentence on the replication factor each row ran with (its cluster's
        masters, recorded from the stack), and that it moved with the node count when it did."""
        rows: dict[int, list[str]] = {}
        clusters: dict[int, set] = {}
        for a in applied:
            rf = a.get("replication_factor")
            if rf is None:
                continue
            rows.setdefault(int(rf), []).append(a.get("cluster") or "?")
            clusters.setdefault(int(rf), set()).add(a.get("cluster") or "?")
        if not rows:
            return []
        parts = [
            f"RF {rf}: {len(rows[rf])} row{'s' if len(rows[rf]) > 1 else ''} on "
            + ", ".join(sorted(clusters[rf]))
            for rf in sorted(rows)
        ]
        moved = len([rf for rf in rows if rf > 1]) > 1
        return [
            "**Replication factor.** Each row's cluster had as many yb-masters as its "
            "replication factor (1 with cluster.replication off, the node count with it on): "
            + "; ".join(parts)
            + "."
            + (
                " With replication on the RF moved with the node count, so the nodes effect "
                "among those rows includes the RF's (more copies per write)."
                if moved
                else ""
            )
        ]

    def node_sizes(self) -> list[str]:
        """Keys of `gcp.machine_types` that are tserver sizes (not master or loadgen)."""
        return sorted(set(self.settings["machine_types"]) - {"master", "loadgen"})

    def check_rows(self, rows) -> list[str]:
        """Sizes against `gcp.machine_types`; server.* names and flag values against the
        pinned YugabyteDB series (yb_catalogue); VM names against GCE's length limit; an even
        replication factor (`replication_errors`); a Persistent Disk on a machine series that
        takes Hyperdisk only (`disk_errors`); a dataset estimated larger than a tserver's disk
        (`plan.dataset_errors`); the sweep's largest client count against each tserver's YSQL
        connections and a block cache against its memory (`limits`)."""
        from ybscale.backends.gcp.limits import block_cache_errors, connection_errors
        from ybscale.backends.gcp.plan import dataset_errors
        from ybscale.backends.gcp.stacks import vm_name_errors

        server = settings_by_source(rows, "server")
        release = self.settings["yugabyte"]["version"]
        per_replicate = self.settings["cluster_per_replicate"]
        tservers = {cluster_label(row, per_replicate): row.cluster.nodes for row in rows}
        types = self.settings["machine_types"]
        shapes = {
            cluster_label(row, per_replicate): (row.cluster.nodes, types[row.cluster.node_size])
            for row in rows
            if row.cluster.node_size in types  # a missing size is its own error
        }
        k = self.settings["load_generators"]
        too_many = [
            f"{source_of('gcp.load_generators')}: {k} load generators, but {label} has "
            f"{n} tserver(s): each generator drives whole tservers, at most one per tserver"
            for label, n in sorted(tservers.items())
            if k != "auto" and k > n
        ]
        return (
            super().check_rows(rows)
            + yb_catalogue.server_setting_errors(server, release)
            + vm_name_errors(self.settings, tservers)
            + too_many
            + bound_errors(self.settings, shapes)
            + replication_errors(rows)
            + disk_errors(
                self.settings, [r.cluster.node_size for r in rows] + ["master", "loadgen"]
            )
            + dataset_errors(rows, self.settings)
            + connection_errors(rows, self.config["measurement"])
            + block_cache_errors(rows, self.settings)
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
        """The row's cluster, driven by its load generators: with gcp.load_generators: auto
        as many as its earlier rows grew to (`ClusterFiles.with_growth`), and up to
        gcp.load_generators_max by `add_generator`, which adds a VM to the stack then
        (`clusters.grow`)."""
        from ybscale.backends.gcp.limits import clients_per_tserver, connections_in_effect
        from ybscale.backends.gcp.stacks import flags_asked, server_flags
        from ybscale.measure.measuring import MeasuringProtocol

        files = ClusterFiles(folder)
        endpoints = files.with_growth(dict(endpoints))
        hosts = generator_hosts(endpoints, self.settings, files.known_hosts)
        master_flags, tserver_flags, ysql_pg_conf = server_flags(self.settings, row.server)
        host = hosts[0]  # psql, yb-admin and the tservers' CPU go through the first
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
            # one list, grown in place as `auto` adds VMs (the row's record holds it)
            "load_generator_names": list(
                endpoints.get("loadgen_names") or [endpoints.get("loadgen_name")]
            ),
            "min_cpu_platform": endpoints.get("min_cpu_platform"),
            "cpu_platforms": endpoints.get("cpu_platforms"),
            # what the stack told each server beyond its addresses (the row's server.* knobs
            # and ybscale's defaults, as `stacks.cluster_args` passed them)
            "server_flags": {
                "yb-master": master_flags,
                "yb-tserver": tserver_flags,
                "ysql_pg_conf": ysql_pg_conf,
            },
        }
        timeout = self.settings["balancer_timeout"]
        runners = [LoadgenRunner(h) for h in hosts]
        tserver_ssh_port = int(endpoints.get("tserver_ssh_port", 22))  # the VMs' sshd
        with contextlib.ExitStack() as stack:
            stack.enter_context(files.lock())
            for h in hosts:
                stack.enter_context(ssh_session(h))
            readers = generator_readers(runners)
            cpu = stack.enter_context(
                MachineCpu(readers, node_hosts(host, nodes, tserver_ssh_port))
            )
            auto = self.settings["load_generators"] == "auto"
            tserver_type = self.settings["machine_types"][row.cluster.node_size]
            bound = load_generators_bound(self.settings, len(nodes), tserver_type)
            grown = [endpoints]  # the cluster's endpoints as its load generators grow

            def join(k: int) -> LoadgenRunner:
                """Generator k + 1 (0-based k): its VM added to the stack, reached over SSH."""
                from ybscale.backends.gcp import clusters

                grown[0] = clusters.grow(files.combination, self.config, files, grown[0],
                                         k + 1, row)  # fmt: skip
                new = ssh_host(grown[0], self.settings, files.known_hosts, k)
                stack.enter_context(ssh_session(new))
                names = record["load_generator_names"]
                names[:] = grown[0].get("loadgen_names") or names
                return LoadgenRunner(new)

            spare = [functools.partial(join, k) for k in range(len(hosts), bound)] if auto else []
            cluster = YsqlCluster(
                nodes,
                row,
                runners[0],
                generators=runners,
                table="kv",
                sharding=self.settings["table_sharding"],
                record=record,
                health=masters_health(host, endpoints),
                settle=load_balancer_idle(host, endpoints, timeout) if timeout else None,
                flush=flush_table(host, endpoints, nodes[0].dbname, "kv"),
                cpu=cpu,
                spare=spare,
                auto=auto,
                web_port=int(endpoints.get("tserver_web_port", TSERVER_WEB_PORT)),
                loaders=self.settings["loaders"],
                chunk_rows=self.settings["load_chunk_rows"],
                # what every master and tserver says it runs with (its /api/v1/varz), read
                # with the settings in effect before the row measures
                read_back={"server_flags_reported": functools.partial(
                    flags_reported, host, endpoints,
                    flags_asked(master_flags, tserver_flags, ysql_pg_conf),
                    yb_catalogue.series_of(self.settings["yugabyte"]["version"]))},
            )  # fmt: skip
            # every tserver's connection limit, against the most clients the sweep gives one
            largest = MeasuringProtocol.of(self.config.get("measurement") or {}).largest_count()
            cluster.read_back["ysql_max_connections_in_effect"] = functools.partial(
                connections_in_effect, cluster, clients_per_tserver(largest, len(nodes))
            )
            if ysql_pg_conf:  # and the YSQL settings as every tserver's YSQL reports them
                cluster.read_back["ysql_settings_in_effect"] = functools.partial(
                    cluster.settings_in_effect, ysql_pg_conf
                )
            yield cluster
