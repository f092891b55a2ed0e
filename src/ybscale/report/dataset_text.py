"""The findings' words on the dataset (issue 48): how each row's dataset came to be (loaded,
or kept from the row before on its cluster), its size on each node, and how every write
repetition was brought back to it (restored: the keys the last one added removed; or
reloaded), with the seconds each took, from measurement.json (`applied.dataset`) and
repetitions.csv (`reset`, `reset_s`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def loads_text(measurements: Mapping[str, Mapping]) -> str:
    """One clause per row: its rows, how they came to be, in how long, its size per node."""
    items = []
    for run, m in sorted(measurements.items()):
        d = m.get("applied", {}).get("dataset")
        if not d:
            continue
        rate = f", {d['rows_per_second']:,} rows/s" if d.get("rows_per_second") else ""
        sizes = list((d.get("bytes_per_node") or {}).values())
        size = f"; {_size(max(sizes))} on its largest node" if sizes else ""
        items.append(f"{run} {d['rows']:,} rows {d['how']} in {d['seconds']:g} s{rate}{size}")
    return "; ".join(items)


def resets_text(resets: Mapping[str, pd.DataFrame]) -> str:
    """How many write repetitions were restored and reloaded, and their seconds (least,
    median, most); '' when no row reset its dataset."""
    found = [r for r in resets.values() if "reset" in r and "reset_s" in r]
    if not found:
        return ""
    lines = pd.concat(found)
    lines = lines[lines["reset"].fillna("").astype(str) != ""]
    parts = []
    for how in ("restored", "reloaded"):
        s = pd.to_numeric(lines.loc[lines["reset"] == how, "reset_s"], errors="coerce").dropna()
        if len(s):
            parts.append(
                f"{len(s)} {how} in {s.min():.2f}–{s.max():.2f} s (median {np.median(s):.2f} s)"
            )
    if not parts:
        return ""
    return "Before each write repetition the dataset was brought back to its loaded rows: " + (
        ", ".join(parts) + " (`reset`, `reset_s` in repetitions.csv)."
    )


def dataset_text(
    measurements: Mapping[str, Mapping], resets: Mapping[str, pd.DataFrame]
) -> list[str]:
    """The findings' **Dataset** paragraph; [] when no row recorded its dataset."""
    loads = loads_text(measurements)
    if not loads:
        return []
    text = f"**Dataset.** {loads}."
    again = resets_text(resets)
    return [f"{text} {again}" if again else text]
