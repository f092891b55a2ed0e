"""`ybscale` command: each subcommand is the `main(argv)` of one module."""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "analyze": (
        "ybscale.analysis.analyze",
        "effects, ANOVA, diagnostics and charts of a responses table",
    ),
    "usl": ("ybscale.analysis.usl", "fit the Universal Scalability Law to one throughput curve"),
    "plan": ("ybscale.backends.gcp.plan", "clusters, VM-hours, cost and wall time of a gcp study"),
    "reap": ("ybscale.backends.gcp.reap", "destroy this study's expired gcp stacks"),
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


TRACEBACK_ENV = "YBSCALE_TRACEBACK"  # set (to anything): an error ends in its traceback
# errors in what a user gave (a file, a value); any other is a fault of ybscale's own
USER_ERRORS = (ValueError, LookupError, OSError)


def error_line(exc: BaseException) -> str:
    """An error as one line (its lines joined); a file's error names the file
    (``results/x.csv: No such file or directory``)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = "; ".join(line.strip() for line in text.splitlines() if line.strip())
    return text or type(exc).__name__


def _is_yaml_error(exc: BaseException) -> bool:
    yaml = sys.modules.get("yaml")
    return yaml is not None and isinstance(exc, yaml.YAMLError)


if __name__ == "__main__":
    sys.exit(main())
