"""`gcp` backend: YugabyteDB VMs on Google Compute Engine, one Pulumi stack per combination
(backend.py measures, stacks.py drives Pulumi, clusters.py is the rules' up/down, plan.py the
cost plan, reap.py the clean-up of expired stacks)."""

from ybscale.backends.gcp.backend import GcpBackend

__all__ = ["GcpBackend"]
