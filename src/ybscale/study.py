"""A study: settings, design and resolved rows, every level checked before anything starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ybscale.backends import backend_class, get_backend
from ybscale.design.factorial import Design, load_design
from ybscale.design.row import Row, RowError, resolve_rows
from ybscale.settings import load as load_settings


@dataclass(frozen=True)
class Study:
    """The validated config (defaults filled), the design and one resolved row per run."""

    settings: dict
    design: Design
    rows: list[Row]

    def row(self, run: str) -> Row:
        """The row of a run id; ValueError naming the design file and the valid ids."""
        for row in self.rows:
            if row.run == run:
                return row
        ids = [r.run for r in self.rows]
        raise ValueError(
            f"{self.design.source}: no design row {run!r}; rows are {ids[0]}..{ids[-1]}"
        )

    @property
    def cluster_of(self) -> dict[str, str]:
        """Run id -> the cluster it runs on (`cluster_of`)."""
        return cluster_of(self.settings, self.rows)

    @property
    def clusters(self) -> dict[str, list[str]]:
        """Cluster label -> its runs (rows sharing a cluster), as the backend labels them
        (`Backend.cluster_labels`; gcp: a combination's, per replicate by default)."""
        labels = self.cluster_of
        out: dict[str, list[str]] = {}
        for row in self.rows:
            out.setdefault(labels[row.run], []).append(row.run)
        return dict(sorted(out.items()))


def cluster_of(settings: Mapping, rows) -> dict[str, str]:
    """Run id -> the cluster it ran on (a label; equal labels: the same cluster), as the
    backend tells (`Backend.cluster_labels`)."""
    return backend_class(settings["backend"]).cluster_labels(settings, rows)


def load(config: Mapping, design_path: str | None = None) -> Study:
    """Validate the config, load the design, resolve and check every row on the backend."""
    settings = load_settings(config)
    design = load_design(design_path or settings["design"])
    rows = resolve_rows(design, settings)
    errors = get_backend(settings).check_rows(rows)
    if errors:
        raise RowError("\n".join(errors))
    return Study(settings, design, rows)


# ---------------------------------------------------------------------------- prices


def hourly_prices(settings: Mapping, rows) -> dict[str, dict]:
    """Run id -> ``{"price_per_hour", "price_basis"}``: what the row's cluster costs per hour
    and how that figure was obtained (written into ceilings.csv beside throughput_per_dollar).

    gcp: the prices table `ybscale plan` uses (gcp.prices.<region>.vm_hour), every VM of the
    cluster counted (tservers and masters), the load generator excluded and said so; local and
    existing: analysis.prices.node_hour by node size when given, else analysis.prices.vcpu_hour
    per vCPU of the configured quota (local.cpu; existing has none: per node)."""
    pricer = _PRICERS[settings["backend"]]
    return {row.run: pricer(settings, row) for row in rows}


def _money(x: float) -> str:
    return f"{x:.4g}"


def _user_prices(settings: Mapping, row: Row, cpus_per_node: float | None) -> dict:
    """A price per hour from analysis.prices: node_hour[node size] when given, else vcpu_hour
    per vCPU (`cpus_per_node` of the quota; None: per node)."""
    from ybscale.config_sources import source_of

    prices = settings["analysis"]["prices"]
    shape = row.cluster
    table = prices.get("node_hour") or {}
    if table:
        if shape.node_size not in table:
            raise ValueError(
                f"{source_of('analysis.prices')}.node_hour.{shape.node_size}: missing (the "
                f"price of a node of size {shape.node_size}, for {row.run})"
            )
        price = shape.nodes * float(table[shape.node_size])
        basis = (
            f"analysis.prices.node_hour.{shape.node_size}: {shape.nodes} nodes x "
            f"{_money(float(table[shape.node_size]))} = {_money(price)} per hour"
        )
        return {"price_per_hour": price, "price_basis": basis}
    rate = float(prices.get("vcpu_hour", 1.0))
    if cpus_per_node is None:
        price = shape.nodes * rate
        basis = (
            f"analysis.prices.vcpu_hour {_money(rate)} per node (no CPU quota known): "
            f"{shape.nodes} nodes = {_money(price)} per hour"
        )
    else:
        price = shape.nodes * cpus_per_node * rate
        basis = (
            f"analysis.prices.vcpu_hour {_money(rate)} per vCPU of the quota: {shape.nodes} "
            f"nodes x {cpus_per_node:g} vCPU (local.cpu.{shape.node_size}) = {_money(price)} "
            "per hour"
        )
    if rate == 1.0:  # the schema's default
        basis += " (1 is the default: a relative price unless set in USD)"
    return {"price_per_hour": price, "price_basis": basis}


def _local_price(settings: Mapping, row: Row) -> dict:
    cpus = settings["local"]["cpu"].get(row.cluster.node_size)
    return _user_prices(settings, row, float(cpus) if cpus is not None else None)


def _existing_price(settings: Mapping, row: Row) -> dict:
    return _user_prices(settings, row, None)


def _gcp_price(settings: Mapping, row: Row) -> dict:
    """The cluster's VMs at gcp.prices.<region>.vm_hour (as `ybscale plan` prices them)."""
    from ybscale.backends.gcp.config import gcp_section
    from ybscale.backends.gcp.stacks import cluster_machines
    from ybscale.config_sources import source_of

    gcp = gcp_section(settings)
    region = gcp["region"]
    rates = gcp["prices"].get(region)
    if rates is None:
        raise ValueError(
            f"{source_of('gcp.prices')}.{region}: no prices for region {region}: "
            "throughput_per_dollar needs the cluster's price per hour"
        )
    machines = cluster_machines(row.cluster, gcp, row.run)
    vm_hour = rates.get("vm_hour", {})
    parts, price = [], 0.0
    for what, machine, n in (
        ("tservers", machines.tserver_type, machines.tservers),
        ("masters", machines.master_type, machines.masters),
    ):
        if machine not in vm_hour:
            raise ValueError(
                f"{source_of('gcp.prices')}.{region}.vm_hour.{machine}: missing (the {what} "
                f"of {row.run})"
            )
        price += n * float(vm_hour[machine])
        parts.append(f"{n} x {machine} ({what}) at {_money(float(vm_hour[machine]))}")
    loadgen = vm_hour.get(machines.loadgen_type)
    excluded = f"load generator {machines.loadgen_type}" + (
        f" ({_money(float(loadgen))} per hour)" if loadgen is not None else ""
    )
    basis = (
        f"gcp.prices.{region}.vm_hour, USD: {' + '.join(parts)} = {_money(price)} per hour; "
        f"{excluded} excluded, as are disks, NAT and egress"
    )
    return {"price_per_hour": price, "price_basis": basis}


_PRICERS = {"local": _local_price, "existing": _existing_price, "gcp": _gcp_price}
