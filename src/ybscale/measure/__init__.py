"""Measuring one row: pgbench commands, the client-count sweep, the precision rule."""
