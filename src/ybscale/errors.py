"""Errors every stage may raise or catch, and how a command words one: below them all."""


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
