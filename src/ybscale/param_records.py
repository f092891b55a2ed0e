"""How Snakemake compares a job's params with the ones recorded for its outputs.

With pandas installed, Snakemake serialises every param through a function that imports pandas
first, in case the param is a DataFrame (`PersistenceBase._serialize_param`). That import is about a
third of a bare Snakemake start-up, paid by every run and dry run of a workflow whose rules have
params. This workflow's params are strings, numbers, lists and dicts, which that function hands
to Snakemake's builtin serialiser unchanged: the records and the comparison stay the same.
"""

from __future__ import annotations


def compare_params_as_builtins() -> bool:
    """Serialise params with Snakemake's builtin serialiser, without importing pandas.

    True when done; False, changing nothing, on a Snakemake without this class and these two
    members (the comparison then stays Snakemake's own, only slower)."""
    from snakemake import persistence

    base = getattr(persistence, "PersistenceBase", None)
    builtin = getattr(base, "_serialize_param_builtin", None)
    chooser = getattr(base, "_serialize_param", None)
    if not callable(builtin) or not isinstance(chooser, property):
        return False
    base._serialize_param = property(lambda self: self._serialize_param_builtin)
    return True
