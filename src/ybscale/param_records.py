"""How Snakemake compares a job's params with the ones recorded for its outputs.

With pandas installed, Snakemake serialises every param through a function that imports pandas
first, in case the param is a DataFrame (`PersistenceBase._serialize_param`). That import is about
a third of a bare Snakemake start-up, paid by every run and dry run of a workflow whose rules have
params. A param can only be a DataFrame, Series or Index once pandas is imported: until then the
builtin serialiser, which that function hands every other value to, gives the same records.
"""

from __future__ import annotations

import sys


def compare_params_without_importing_pandas() -> bool:
    """Serialise params through pandas only once pandas is imported, else with Snakemake's
    builtin serialiser: the same records, without importing pandas for a workflow that does not.

    True when done; False, changing nothing, on a Snakemake without this class and these three
    members (the comparison then stays Snakemake's own, only slower)."""
    from snakemake import persistence

    base = getattr(persistence, "PersistenceBase", None)
    builtin = getattr(base, "_serialize_param_builtin", None)
    with_pandas = getattr(base, "_serialize_param_pandas", None)
    chooser = getattr(base, "_serialize_param", None)
    if not (callable(builtin) and callable(with_pandas) and isinstance(chooser, property)):
        return False

    def chooser_now(self):  # a DataFrame param means pandas is imported already
        if "pandas" in sys.modules:
            return self._serialize_param_pandas
        return self._serialize_param_builtin

    base._serialize_param = property(chooser_now)
    return True
