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


SST = "sst_bytes_per_tserver"  # YugabyteDB: each tserver's SST bytes of the table (ysql.py)


def loads_text(measurements: Mapping[str, Mapping]) -> str:
    """One clause per dataset size and how it came to be (loaded, kept): its rows, how many
    times, in how many seconds (least–most), at how many rows per second, and its size on the
    largest node (PostgreSQL: the table and its index; YugabyteDB: its SST files)."""
    groups: dict[tuple, list[tuple[str, Mapping]]] = {}
    for run, m in sorted(measurements.items()):
        d = m.get("applied", {}).get("dataset")
        if d:
            groups.setdefault((d["rows"], d["how"]), []).append((run, d))
    items = []
    for (rows, how), found in sorted(groups.items()):
        runs = ", ".join(run for run, _ in found)
        seconds = [d["seconds"] for _, d in found]
        rates = [d["rows_per_second"] for _, d in found if d.get("rows_per_second")]
        sizes = [max(d["bytes_per_node"].values()) for _, d in found if d.get("bytes_per_node")]
        ssts = [max(d[SST].values()) for _, d in found if d.get(SST)]
        form = ",.0f" if max(seconds) >= 1000 else ".3g"  # an hour's load in seconds, not 3.6e+03
        text = f"{rows:,} rows {how} {_times(len(found))}({runs}) in {_span(seconds, 's', form)}"
        text += f", {_span(rates, 'rows/s', ',.0f')}" if rates else ""
        text += f", {_size(max(sizes))} on the largest node" if sizes else ""
        text += (
            f", {_size(max(ssts))} of SST files on the largest tserver after a flush (compressed)"
            if ssts
            else ""
        )
        items.append(text)
    return "; ".join(items)


def _times(n: int) -> str:
    return "once " if n == 1 else f"{n} times "


def _span(values: list, unit: str, form: str = ".3g") -> str:
    low, high = min(values), max(values)
    return f"{low:{form}} {unit}" if low == high else f"{low:{form}}–{high:{form}} {unit}"


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
                f"{len(s)} {how} in {_span(list(s), 's', '.2f')} (median {np.median(s):.2f} s)"
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
