"""Errors every stage may raise or catch, below them all."""


class BackendError(RuntimeError):
    """A cluster could not be provided or failed while measuring; the message says which."""
