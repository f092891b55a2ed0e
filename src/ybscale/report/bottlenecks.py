"""What saturates at each ceiling, and what each active factor changed in it (findings text).

Reads the `bottleneck*` columns of ceilings.csv (from each row's ceiling.json): the resource
with the largest service demand D = U/X at the ceiling's client count, its utilisation U and
its CPU milliseconds per transaction (Jain ch. 33, operational laws).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ybscale.design.factorial import Design
from ybscale.measure.generators import SATURATED, client_bound

OUTSIDE_NOTABLE = 0.10  # share of the machine other processes took: named in the findings
HOST_SATURATED = 0.95  # the machine's busy share above which the host, not a quota, limited


def generator_bound(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows whose generators are the bottleneck at the ceiling (`client_bound`: the
    definition `auto` grows by)."""
    utilisation = rows.get("bottleneck_utilisation", pd.Series(math.nan, index=rows.index))
    bound = [client_bound(b, u) for b, u in zip(rows["bottleneck"], utilisation, strict=True)]
    return rows[bound]


def generator_text(rows: pd.DataFrame, growth: Mapping[str, Mapping] | None = None) -> str:
    """How many rows are client-bound, naming each one's generator (empty-handed: none);
    with `auto` (`growth`: each run's measurement.json `load_generator_growth`), the rows
    where generators were added and those still client-bound at the bound."""
    growth = growth or {}
    grew = [
        f"{run} {g['grown'][0]['generators']} → {g['grown'][-1]['to']} at "
        + ", ".join(str(step["clients"]) for step in g["grown"])
        + " clients"
        for run, g in growth.items()
        if g.get("grown")
    ]
    added = (
        f" Load generators added by auto where they were the bottleneck ({'; '.join(grew)})."
        if grew
        else ""
    )
    bound = generator_bound(rows)
    share = f"{100 * SATURATED:.0f} %"
    if bound.empty:
        return (
            f"0 of {len(rows)} rows are client-bound (no load generator is the busiest at "
            f"{share} or more of its CPUs)." + added
        )
    named = ", ".join(f"{r.run} {r.bottleneck}" for r in bound.itertuples())
    at_bound = [
        f"{r.run} with all {growth[r.run]['bound']}"
        for r in bound.itertuples()
        if growth.get(r.run, {}).get("bound_reached")
    ]
    bound_words = (
        f" There auto had reached its bound ({', '.join(at_bound)} load generators): raise it "
        "(more logins in existing.load_generators; gcp.load_generators_max)."
        if at_bound
        else ""
    )
    return (
        f"{len(bound)} of {len(rows)} rows are client-bound: a load generator is the busiest, "
        f"at {share} or more of its CPUs ({named}); there the study measured its client, not "
        "the cluster: more load generators (existing.load_generators, gcp.load_generators) "
        "split the clients." + bound_words + added
    )


def _spread(rows: pd.DataFrame) -> str:
    """'client 6, node1 2 of 8 rows': how often each resource is the bottleneck."""
    counts = Counter(rows["bottleneck"]).most_common()
    return ", ".join(f"{name} {n}" for name, n in counts) + f" of {len(rows)} rows"


def _geometric_mean(values: pd.Series) -> float:
    x = values.to_numpy(float)
    x = x[np.isfinite(x) & (x > 0)]
    return float(np.exp(np.log(x).mean())) if len(x) else math.nan


CPU_KNOBS = ("cluster.nodes", "cluster.node_size")  # knobs that change the CPU a study may use
# knobs that change how much data the reads are spread over
DATA_KNOBS = ("dataset.rows", "dataset.value_bytes")


def buffers_text(rows: pd.DataFrame, design: Design, active: Sequence[str]) -> list[str]:
    """Where the reads were served from at each row's ceiling (ceilings.csv `buffer_hit_ratio`,
    `buffer_reads_per_tx` and, where measured, `disk_bytes_per_tx`; ybscale.measure.buffers),
    and for each factor that changes the data's size, the two levels' mean of each, saying
    when its effect (`active`: the active columns) is within the noise; [] when no row
    recorded them."""
    if "buffer_hit_ratio" not in rows:
        return []
    got = rows[pd.to_numeric(rows["buffer_hit_ratio"], errors="coerce").notna()]
    if got.empty:
        return []
    disk = "disk_bytes_per_tx" in got and bool(
        pd.to_numeric(got["disk_bytes_per_tx"], errors="coerce").notna().all()
    )
    each = ", ".join(
        f"{r.run} {100 * r.buffer_hit_ratio:.1f} % ({r.buffer_reads_per_tx:.2f}"
        + (f"; {r.disk_bytes_per_tx / 1024:.2f} kB" if disk else "")
        + ")"
        for r in got.itertuples()
    )
    from_disk = (
        " and the kilobytes per transaction their reads brought from the disk (the servers' "
        "/proc/<pid>/io `read_bytes`, read-ahead included; a block the buffers missed that "
        "brought none came from the page cache)"
        if disk
        else ""
    )
    lines = [
        "**Where reads were served.** At each row's ceiling, the share of the blocks the "
        "servers looked for that their own buffers held, and in brackets the blocks per "
        "transaction they had to ask the operating system for instead (its page cache or the "
        f"disk){from_disk}; `buffer_*` and `disk_read_bytes` in repetitions.csv: {each}."
    ]
    for factor in design.factors:
        term = factor.letter
        if factor.knob not in DATA_KNOBS or term not in got:
            continue
        sides = [got[got[term] == level] for level in (-1, 1)]
        if any(side.empty for side in sides):
            continue
        hit = [100 * side["buffer_hit_ratio"].mean() for side in sides]
        reads = [side["buffer_reads_per_tx"].mean() for side in sides]
        kb = [side["disk_bytes_per_tx"].mean() / 1024 for side in sides] if disk else []
        disk_words = (
            f", and brought {kb[1]:.2f} kB from the disk instead of {kb[0]:.2f} kB" if kb else ""
        )
        lines.append(
            f"With **{factor.name}** at {factor.levels[1]} instead of {factor.levels[0]} "
            f"({term}), the buffers held {hit[1]:.1f} % of the blocks instead of {hit[0]:.1f} "
            f"% and each transaction read {reads[1]:.2f} blocks from the operating system "
            f"instead of {reads[0]:.2f}{disk_words} (means over the rows at each level)"
            + ("." if term in active else "; its effect on the response is within the noise.")
        )
        lines += _by_other_factor(got, design, factor, active, disk)
    return lines


def _by_other_factor(got: pd.DataFrame, design: Design, data, active, disk: bool) -> list[str]:
    """For each active two-factor interaction of the data factor `data` with another factor:
    where the larger data's reads were served at each of the other factor's levels."""
    lines = []
    for term in active:
        if len(term) != 2 or data.letter not in term:
            continue
        other = design.factor(term.replace(data.letter, ""))
        if other.letter not in got:
            continue
        large = got[got[data.letter] == 1]
        cells = []
        for sign in (-1, 1):
            side = large[large[other.letter] == sign]
            if side.empty:
                return lines
            kb = f", {side['disk_bytes_per_tx'].mean() / 1024:.2f} kB from the disk" if disk else ""
            cells.append(
                f"at {other.name} {other.level(sign)} the buffers held "
                f"{100 * side['buffer_hit_ratio'].mean():.1f} % and each transaction read "
                f"{side['buffer_reads_per_tx'].mean():.2f} blocks from the operating system{kb}"
            )
        lines.append(
            f"The interaction {term} ({data.name} × {other.name}) is active: with "
            f"**{data.name}** at {data.levels[1]}, {'; '.join(cells)} (means over those rows)."
        )
    return lines


def interference_text(
    rows: pd.DataFrame,
    design: Design | None = None,
    active: Sequence[str] = (),
    unsettled: Sequence[str] = (),
) -> list[str]:
    """The runs set aside as disturbed and measured again, the rows that kept a disturbed one
    at the bound (`measurement.remeasure`), and the rows where processes other than the
    study's took a notable share of the machine at the ceiling (`outside_utilisation`, local);
    [] when none did or it was not measured. When most rows kept a disturbed run the machine
    was never quiet: the active main effects of factors that change the study's CPU are named
    as possible artefacts of the neighbour."""
    sentences = set_aside_text(rows, design, active, unsettled) + outside_text(rows)
    return ["**Interference.** " + " ".join(sentences)] if sentences else []


def set_aside_text(
    rows: pd.DataFrame, design: Design | None, active: Sequence[str], unsettled: Sequence[str] = ()
) -> list[str]:
    if "set_aside" not in rows:
        return []
    by_run = rows.set_index("run")
    aside = by_run["set_aside"].fillna(0).astype(int)
    kept = by_run["kept_disturbed"].fillna(0).astype(int)
    if not aside.sum() and not kept.sum():
        return []
    lines = []
    if aside.sum():
        each = ", ".join(f"{run} {n}" for run, n in aside[aside > 0].items())
        lines.append(
            f"{aside.sum()} runs were set aside and measured again because "
            "processes other than the study's took more of the machine than "
            f"measurement.outside_max during them ({each}; repetitions.csv `set_aside` says "
            "how much and what took it, `outside_by` for every run; their logs are kept under "
            "pgbench-logs/set-aside-*); the ceilings read only "
            "the runs kept."
        )
    if kept.sum():
        named = kept[kept > 0]
        lines.append(
            f"{len(named)} of {len(kept)} rows kept a disturbed run after measurement.remeasure "
            f"tries ({', '.join(named.index)}; `disturbed` in repetitions.csv): their ceilings "
            "may be lower than a quiet machine's."
        )
        lines.append(
            "Every effect's interval is widened by how far the neighbour may have moved it "
            "(effects.csv `disturbance_low`/`disturbance_high`: in each such row the quiet "
            "machine's ceiling taken as up to the measured one / (1 − the share of the machine "
            "the neighbour took at the ceiling), as if throughput followed the CPU the study "
            "got; a neighbour can cost more than that). "
            + (
                f"Active, but not beyond that reach, so maybe the neighbour's artefacts: "
                f"{', '.join(unsettled)}."
                if unsettled
                else "Every active effect stays active however far it may have moved it."
            )
        )
        if 2 * len(named) >= len(kept) and design is not None:
            suspect = [
                f"{design.factor(t).name} ({t})"
                for t in active
                if len(t) == 1 and t in design.letters and design.factor(t).knob in CPU_KNOBS
            ]
            lines.append(
                "The machine was never quiet: in most rows no run was free of the neighbour. "
                + (
                    f"The effects of {', '.join(suspect)} change the CPU the study may use and "
                    "may be the neighbour's artefacts (a larger quota cannot help on a full "
                    "machine): measure them again on a quiet one."
                    if suspect
                    else "No active main effect changes the CPU the study may use."
                )
            )
    return lines


def outside_text(rows: pd.DataFrame) -> list[str]:
    """The rows where others took at least OUTSIDE_NOTABLE of the machine at the ceiling."""
    if "outside_utilisation" not in rows:
        return []
    outside = rows.set_index("run")["outside_utilisation"].astype(float).dropna()
    if outside.empty:
        return []
    notable = outside[outside >= OUTSIDE_NOTABLE].sort_values(ascending=False)
    if notable.empty:
        return []
    each = ", ".join(f"{run} {100 * share:.0f} %" for run, share in notable.items())
    return [
        f"Processes other than the study's (its servers, pgbench, the "
        f"measuring job) took at least {100 * OUTSIDE_NOTABLE:.0f} % of the machine at the "
        f"ceiling of {len(notable)} of {len(outside)} rows ({each}; median over all rows "
        f"{100 * outside.median():.0f} %): their ceilings may be lower than on a quiet machine "
        "(`outside_utilisation` in ceilings.csv, `util_outside` per repetition)."
    ]


def bottleneck_text(
    design: Design,
    ceilings: pd.DataFrame,
    active: list[str],
    unsettled: Sequence[str] = (),
    growth: Mapping[str, Mapping] | None = None,
) -> list[str]:
    """A paragraph naming each row's bottleneck at its ceiling, one per active main effect
    saying how it moved; [] when the rows recorded no utilisation. `growth`: `auto`'s record
    by run (`generator_text`)."""
    if "bottleneck" not in ceilings:
        return []
    rows = ceilings[ceilings["bottleneck"].fillna("").astype(str) != ""]
    if rows.empty:
        return []
    each = ", ".join(
        f"{r.run} {r.bottleneck} {100 * r.bottleneck_utilisation:.0f} %" for r in rows.itertuples()
    )
    lines = [
        "**What saturates.** At each row's ceiling, the resource with the largest service "
        "demand D = U/X (U: its CPU time over the counted seconds per CPU it may use; "
        f"operational laws, Jain ch. 33) and its utilisation: {each}. "
        + generator_text(rows, growth)
    ]
    if "host_utilisation" in rows:
        busy = rows.loc[rows["host_utilisation"] >= HOST_SATURATED, "run"].astype(str).tolist()
        if busy:
            lines.append(
                f"In {len(busy)} of {len(rows)} rows the machine itself was at least "
                f"{100 * HOST_SATURATED:.0f} % busy at the ceiling (host: every process on it, "
                f"other work included; {', '.join(busy)}): there a busiest resource below 100 % "
                "of its CPUs was held back by the machine, not by its own quota."
            )
    lines += interference_text(rows, design, active, unsettled)
    lines += buffers_text(rows, design, active)
    items = []
    for term in active:
        if len(term) != 1 or term not in rows:
            continue
        factor = design.factor(term)
        low, high = rows[rows[term] == -1], rows[rows[term] == 1]
        if low.empty or high.empty:
            continue
        ratio = _geometric_mean(high["bottleneck_cpu_ms_per_transaction"]) / _geometric_mean(
            low["bottleneck_cpu_ms_per_transaction"]
        )
        items.append(
            f"**{factor.name}** {factor.levels[1]} instead of {factor.levels[0]} ({term}): "
            f"bottleneck at {factor.levels[0]}: {_spread(low)}; at {factor.levels[1]}: "
            f"{_spread(high)}; CPU time per transaction at the bottleneck ×{ratio:.2g} "
            "(geometric means over the rows)"
        )
    if items:
        lines.append("Per active factor: " + "; ".join(items) + ".")
    return lines
