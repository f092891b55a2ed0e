"""`up` / `down` one infrastructure combination's cluster (rules/cloud.smk): the cloud lifecycle.

This module drives `stacks` (Pulumi) and hands the gcp backend's readiness check to it.

    python -m ybscale.backends.gcp.clusters up --combo C --config settings.json --out ...
    python -m ybscale.backends.gcp.clusters down --combo C --config settings.json --out ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ybscale import study
from ybscale.backends.base import BackendError
from ybscale.backends.gcp import capacity, stacks
from ybscale.backends.gcp.backend import ClusterFiles, wait_ready
from ybscale.backends.gcp.plan import format_plan, plan
from ybscale.settings import gcp_section


def _load_config(path: str, overrides: list[str]) -> dict:
    config = yaml.safe_load(Path(path).read_text()) or {}
    for item in overrides:
        key, _, value = item.partition("=")
        target = config
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = yaml.safe_load(value)
    return config


def main(argv: list[str] | None = None) -> int:
    """`up` / `down` one combination's stack (used by rules/cloud.smk)."""
    parser = argparse.ArgumentParser(prog="python -m ybscale.backends.gcp.clusters")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--combo", required=True, help="e.g. nodes3-small-reploff")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--design", default=None, help="design file (default: config's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="endpoints.json (up) / destroyed.json (down), in the combination's cluster folder",
    )
    parser.add_argument("--serial-logs", type=Path, help="up: VM boot logs kept on failure")
    args = parser.parse_args(argv)
    config = _load_config(args.config, args.set)
    files = ClusterFiles(args.out.parent)
    stacks.install_signal_handlers()  # SIGTERM/SIGHUP: cancel pulumi, destroy, then exit
    try:
        settings = gcp_section(config)
        if args.action == "up":
            loaded = study.load({**config, "backend": "gcp"}, args.design)
            print(format_plan(plan(loaded.rows, loaded.settings, [args.combo])))
            if args.combo not in loaded.combinations:
                raise ValueError(
                    f"{loaded.design.source}: no row needs combination {args.combo!r} "
                    f"(combinations: {', '.join(loaded.combinations)})"
                )
            row = loaded.row(loaded.combinations[args.combo][0])  # the combination's shape
            files.known_hosts.unlink(missing_ok=True)
            capacity.up_with_fallback(
                stacks.up,
                args.combo,
                settings,
                out=args.out,
                ready=lambda endpoints, s: wait_ready(endpoints, s, files.known_hosts, row),
                shape=row.cluster,
                server=row.server,
                serial_logs=args.serial_logs,
            )
        else:
            stacks.destroy(args.combo, settings, out=args.out)  # forgets endpoints, host keys
    except (BackendError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc}); what was brought up has been destroyed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
