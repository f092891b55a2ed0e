"""analysis.relevant read and checked without the analysis' libraries (the Snakefile checks it at
parse time): the smallest effect that matters, a share ("20%") or an amount in the response's
unit. Its use, the verdicts, is ybscale.analysis.verdicts."""

from __future__ import annotations

import math
import re

_SHARE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*%\s*$")


class RelevantError(ValueError):
    """analysis.relevant is neither a share ("10%") nor a positive amount."""


def parse_relevant(value) -> tuple[str, float]:
    """("share", 0.10) for "10%", ("amount", 500.0) for 500; RelevantError otherwise."""
    if isinstance(value, bool):
        raise RelevantError(f"analysis.relevant: a share such as '10%' or an amount, got {value!r}")
    if isinstance(value, (int, float)):
        if not value > 0 or not math.isfinite(value):
            raise RelevantError(f"analysis.relevant: must be positive, got {value!r}")
        return "amount", float(value)
    found = _SHARE.match(str(value))
    if not found or not 0 < float(found.group(1)) < 1000:
        raise RelevantError(
            f"analysis.relevant: a share such as '10%' (between 0 and 1000 %) or a positive "
            f"amount in the response's unit, got {value!r}"
        )
    return "share", float(found.group(1)) / 100.0


def relevant_words(value) -> str:
    """How the findings name it: "10 %" or "500"."""
    kind, size = parse_relevant(value)
    return f"{100 * size:g} %" if kind == "share" else f"{size:g}"
