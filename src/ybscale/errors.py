"""Errors every stage may raise or catch, and how a command words one: below them all."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

TRACEBACK_ENV = "YBSCALE_TRACEBACK"  # set (to anything): an error ends in its traceback


class UserError(ValueError):
    """An error in what the user gave (a config, a design, an option): the message names the
    file and field, one line per problem. The base of DesignError, RowError, SettingsError..."""


class BackendError(RuntimeError):
    """A cluster could not be provided or failed while measuring; the message says which."""


def error_line(exc: BaseException) -> str:
    """An error as one line (its lines joined); a file's error names the file
    (``results/x.csv: No such file or directory``)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = "; ".join(line.strip() for line in text.splitlines() if line.strip())
    return text or type(exc).__name__


@contextmanager
def user_errors_exit() -> Iterator[None]:
    """A user's error (`UserError`) raised inside ends the process with its lines on stderr,
    one per problem, and status 1, never a traceback (the Snakefile's parse time: `snakemake
    -n` says which file and field, nothing more); YBSCALE_TRACEBACK=1 lets it through."""
    try:
        yield
    except UserError as exc:
        if os.environ.get(TRACEBACK_ENV):
            raise
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        print("\n".join(lines or [type(exc).__name__]), file=sys.stderr)
        sys.exit(1)
