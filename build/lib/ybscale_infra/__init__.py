"""Pulumi program pieces for the ybscale gcp backend."""

from ybscale_infra.cluster import (
    IAP_RANGE,
    ClusterArgs,
    YugabyteCluster,
    export_lifecycle,
    label_value,
    program,
)

__all__ = [
    "IAP_RANGE",
    "ClusterArgs",
    "YugabyteCluster",
    "export_lifecycle",
    "label_value",
    "program",
]
