"""`ybscale reap`: destroy this study's Pulumi stacks whose expiry has passed (run in the study's
directory: its stacks carry its `gcp.study_id`); `--all-studies`: every expired stack of the
project."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None, auto=None) -> int:
    from ybscale.backends.gcp import stacks
    from ybscale.backends.gcp.config import gcp_section as validate_section
    from ybscale.config_sources import file_sources, read_yaml_file, sources_in_use
    from ybscale.errors import error_line
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(prog="ybscale reap", description=cli_description(__doc__))
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--dry-run", action="store_true", help="list what would be destroyed")
    parser.add_argument(
        "--all-studies",
        action="store_true",
        help="every expired stack of the project, other studies' included",
    )
    parser.add_argument(
        "--clusters",
        default="results/clusters",
        type=Path,
        help="the study's cluster files (their endpoints are invalidated)",
    )
    args = parser.parse_args(argv)
    try:
        config = read_yaml_file(args.config) or {}
        with sources_in_use(file_sources([args.config])):  # errors name --config's file
            settings = validate_section(config)
            expired = stacks.reap(settings, auto=auto, dry_run=args.dry_run,
                                  clusters=args.clusters, every_study=args.all_studies)  # fmt: skip
    except Exception as exc:  # the Automation API raises its own error types
        print(f"ybscale reap: {error_line(exc)}", file=sys.stderr)
        return 1
    verb = "would destroy" if args.dry_run else "destroyed"
    print(f"reap: {verb} {len(expired)} expired stack(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
