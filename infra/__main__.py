"""Pulumi entry point for `pulumi up` run by hand in infra/ (the pipeline uses stacks.py).

Set the cluster with `pulumi config set --path ybscale:cluster.nodes 3` etc., or let
`python -m ybscale.backends.gcp.clusters up` drive it through the Automation API.
"""

from ybscale_infra import program

program()
