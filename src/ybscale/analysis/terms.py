"""Names of the lines of the effects and ANOVA tables that are not factor effects (read by the
charts and the findings without the analysis' own imports)."""

ERROR_TERM = "error"  # the residual line: the noise the effects are judged against
BLOCK_TERM = "block"  # the replicate blocks' line
RESIDUAL = "residual"  # the ANOVA's error line within clusters (or the only one)
WHOLE_ERROR = "whole-plot error"  # the ANOVA's error line between clusters (split plot)

# the effects, ANOVA, residuals and outliers tables hold one block of lines per response
# (analysis.responses), named in this column; the first is the study's main response
RESPONSE = "response"


def response_names(table) -> list[str]:
    """The responses of a table in their order ([] when it has no response column)."""
    if RESPONSE not in getattr(table, "columns", ()):
        return []
    return list(dict.fromkeys(str(name) for name in table[RESPONSE]))


def of_response(table, name: str | None = None):
    """The lines of one response (the first when `name` is None); a table without a response
    column as it is. ValueError naming the responses when `name` is not one of them."""
    names = response_names(table)
    if not names:
        return table
    if name is None:
        name = names[0]
    if name not in names:
        raise ValueError(f"no response {name!r} (the table has {', '.join(names)})")
    return table[table[RESPONSE].astype(str) == name].reset_index(drop=True)


# analysis.responses -> the ceilings.csv column analysed (ybscale.analysis.ceiling.collect)
RESPONSE_COLUMNS = {
    "ceiling": "ceiling",
    "throughput_per_dollar": "throughput_per_dollar",
    "latency": "latency_at_load_ms",
}


# each response (effects.csv's `response`, ceilings.csv's column) in words: what, unit, whether
# more is better, and the word for better and for worse (price/h: the price per hour of the
# row's cluster in the unit of its price_basis, USD unless analysis.prices is relative)
RESPONSE_WORDS = {
    "ceiling": ("the ceiling", "tps", True, "faster", "slower"),
    "response": ("the ceiling", "tps", True, "faster", "slower"),
    "throughput_per_dollar": (
        "throughput per dollar",
        "tps per price/h",
        True,
        "cheaper",
        "dearer",
    ),
    "latency_at_load_ms": ("latency at the reference load", "ms", False, "quicker", "laggier"),
}


def response_words(name: str) -> tuple[str, str, bool, str, str]:
    """(what, unit, more is better, better, worse) of response `name`; a response without
    words of its own is named by itself, more being better."""
    return RESPONSE_WORDS.get(name, (name, "", True, f"higher {name}", f"lower {name}"))
