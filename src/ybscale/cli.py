"""`ybscale` command: each subcommand is the `main(argv)` of one module."""

from __future__ import annotations

import importlib
import os
import sys

from ybscale.errors import TRACEBACK_ENV, error_line
from ybscale.registry import VERBS

COMMANDS = {
    "analyze": (
        "ybscale.report.analyze",
        "effects, ANOVA, diagnostics and charts of a responses table",
    ),
    "usl": ("ybscale.analysis.usl", "fit the Universal Scalability Law to one throughput curve"),
    "plan": ("ybscale.plan", "clusters, VM-hours, cost and strata of a study; --detect: power"),
    "design": (
        "ybscale.design.factorial",
        "write the sign table, aliases and resolution of a design",
    ),
    "next": (
        "ybscale.design.followup",
        "the fold-over follow-up design that de-aliases active effects",
    ),
    "compare": (
        "ybscale.analysis.compare",
        "do two studies of the same design agree? (effects.csv)",
    ),
}


# a backend's own verbs, as it registers them (ybscale.registry.VERBS)
COMMANDS.update({verb: (module, help_) for verb, (_, module, help_) in VERBS.items()})


def usage() -> str:
    lines = ["usage: ybscale COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<8} {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"ybscale: unknown command {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    try:
        return module.main(argv[1:]) or 0
    except Exception as exc:  # what a command did not word itself: one line all the same
        if os.environ.get(TRACEBACK_ENV):
            raise
        text = error_line(exc)
        if not isinstance(exc, USER_ERRORS) and not _is_yaml_error(exc):
            text = f"{type(exc).__name__}: {text} (a fault of ybscale: {TRACEBACK_ENV}=1 shows it)"
        print(f"ybscale {argv[0]}: {text}", file=sys.stderr)
        return 1


# errors in what a user gave (a file, a value); any other is a fault of ybscale's own
USER_ERRORS = (ValueError, LookupError, OSError)


def _is_yaml_error(exc: BaseException) -> bool:
    yaml = sys.modules.get("yaml")
    return yaml is not None and isinstance(exc, yaml.YAMLError)


if __name__ == "__main__":
    sys.exit(main())
