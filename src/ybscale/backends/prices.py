"""A cluster's price per hour (`Backend.hourly_price`), kept apart from the backend classes'
measuring modules: a change of price rule re-measures no row (`protocol.code_digest`)."""

from __future__ import annotations

from collections.abc import Mapping

from ybscale.config_sources import source_of
from ybscale.design.row import Row


def money(x: float) -> str:
    """A price as the price bases write it (4 significant digits)."""
    return f"{x:.4g}"


def user_price(settings: Mapping, row: Row, quota: tuple[float, str] | None) -> dict:
    """A price per hour from analysis.prices: node_hour[node size] when given, else vcpu_hour
    per vCPU (`quota`: the vCPUs per node and the field that sets them; None: per node)."""
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
            f"{money(float(table[shape.node_size]))} = {money(price)} per hour"
        )
        return {"price_per_hour": price, "price_basis": basis}
    rate = float(prices.get("vcpu_hour", 1.0))
    if quota is None:
        price = shape.nodes * rate
        basis = (
            f"analysis.prices.vcpu_hour {money(rate)} per node (no CPU quota known): "
            f"{shape.nodes} nodes = {money(price)} per hour"
        )
    else:
        cpus_per_node, field_name = quota
        price = shape.nodes * cpus_per_node * rate
        basis = (
            f"analysis.prices.vcpu_hour {money(rate)} per vCPU of the quota: {shape.nodes} "
            f"nodes x {cpus_per_node:g} vCPU ({field_name}) = {money(price)} per hour"
        )
    if rate == 1.0:  # the schema's default
        basis += " (1 is the default: a relative price unless set in USD)"
    return {"price_per_hour": price, "price_basis": basis}
