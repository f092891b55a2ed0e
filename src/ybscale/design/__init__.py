"""The experiment: the design as data (sign table, aliases), knobs, rows, order, strata, power."""
