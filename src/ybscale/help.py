"""Words every verb's --help shares (a core module: any stage may import it)."""

from __future__ import annotations


def description(doc: str) -> str:
    """A verb's --help description: its module docstring's first paragraph, whole (argparse
    wraps it again), never cut at the end of its first line."""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())
