"""Utilisation and service demand over a repetition's counted seconds (Jain ch. 33).

A resource is a node's CPU (its quota locally, its VM's cores over SSH), the load generator
(`client`), or the whole machine (`host`, /proc/stat: everything running on it). Its
utilisation U is the CPU time it used over the window divided by the window's length times
its capacity (CPUs). The operational laws: the service demand per transaction is D = U / X
(X: the window's throughput); the resource with the largest D is the bottleneck, and 1/D_max
= X / U_max bounds the throughput (what X would be with the bottleneck 100 % busy, the demand
unchanged). `host` includes other processes of the machine, so it is recorded but never named
the bottleneck.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping

# recorded beside the others, never a bottleneck candidate: the whole machine, the measuring
# job's own process, and what neither the study's resources nor its job used (`with_outside`)
# and of that the study's own work outside its groups (`own`: ybscale.measure.outside)
CONTEXT = ("host", "job", "outside", "own")
USER_HZ = 100  # /proc/stat ticks per second (sysconf(_SC_CLK_TCK) on Linux)


def proc_stat_busy(text: str) -> tuple[float, int]:
    """(busy CPU seconds since boot, CPUs) from /proc/stat: the first `cpu` line's ticks but
    idle and iowait (guest time is already inside user and nice)."""
    lines = text.splitlines()
    ticks = [int(v) for v in lines[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    busy = sum(ticks[:8]) - idle
    cpus = sum(1 for line in lines[1:] if line.startswith("cpu") and line[3:4].isdigit())
    return busy / USER_HZ, cpus


STEAL = "steal_"  # a machine's steal time is read as the resource `steal_<machine>`


def proc_stat_steal(text: str) -> float:
    """CPU seconds since boot the hypervisor gave to other guests while this one's were ready
    to run (/proc/stat's first `cpu` line, the eighth value: steal; 0 where the kernel does not
    count it)."""
    ticks = text.splitlines()[0].split()[1:]
    return int(ticks[7]) / USER_HZ if len(ticks) > 7 else 0.0


def host_cpu_seconds() -> float:
    """This machine's busy CPU seconds since boot (/proc/stat)."""
    with open("/proc/stat") as stat:
        return proc_stat_busy(stat.read())[0]


def utilisation(
    before: Mapping[str, float],
    after: Mapping[str, float],
    seconds: float,
    capacity: Mapping[str, float],
) -> dict[str, float]:
    """U per resource: CPU seconds used between the two readings / (seconds x capacity)."""
    out = {}
    capacity = {**{f"{STEAL}{k}": v for k, v in capacity.items()}, **capacity}
    for name in sorted(set(before) & set(after) & set(capacity)):
        if seconds > 0 and capacity[name] > 0:
            out[name] = (after[name] - before[name]) / (seconds * capacity[name])
    return out


def with_outside(util: Mapping[str, float], capacity: Mapping[str, float]) -> dict[str, float]:
    """`util` with ``outside``: the share of the machine's CPUs that processes other than the
    study's used over the window (other work, a neighbour: interference), where every other
    resource runs on the machine `host` measures (local: the nodes' and pgbench's CPU groups and
    the measuring job, `job`): (host CPU time − theirs) / (window × host CPUs). As measured:
    the accounting's tick (10 ms) can make it slightly negative on a quiet machine. Unchanged
    without `host`."""
    if "host" not in util or "host" not in capacity:
        stolen = [u for name, u in util.items() if name.startswith(STEAL)]
        return {**util, "outside": max(stolen)} if stolen else dict(util)
    used = sum(u * capacity[name] for name, u in util.items() if name != "host")
    return {**util, "outside": (util["host"] * capacity["host"] - used) / capacity["host"]}


def resources(util: Mapping[str, float]) -> dict[str, float]:
    """The study's own resources among `util` (nodes, load generators): not the CONTEXT, not a
    machine's steal time."""
    return {k: u for k, u in util.items() if k not in CONTEXT and not k.startswith(STEAL)}


def bottleneck(util: Mapping[str, float], tps: float, capacity: Mapping[str, float]) -> dict:
    """The resource with the largest service demand D = U / X, its U, the bound X / U and its
    CPU milliseconds per transaction (U x capacity / X); NaNs and "" when nothing was measured."""
    candidates = {k: u for k, u in resources(util).items() if math.isfinite(u)}
    if not candidates or not tps > 0:
        return {"bottleneck": "", "bottleneck_util": math.nan, "bound_tps": math.nan,
                "bottleneck_cpu_ms": math.nan}  # fmt: skip
    name = max(candidates, key=candidates.get)
    u = candidates[name]
    return {
        "bottleneck": name,
        "bottleneck_util": u,
        "bound_tps": tps / u if u > 0 else math.inf,
        "bottleneck_cpu_ms": 1000 * u * capacity.get(name, math.nan) / tps,
    }


class Window:
    """CPU readings at the start of the counted seconds (`skip` s after `start`, from a timer
    thread) and at `stop`; `reading()` returns CPU seconds so far per resource."""

    def __init__(self, reading: Callable[[], Mapping[str, float]], skip: float):
        self.reading = reading
        self.skip = skip
        self.first: tuple[float, Mapping[str, float]] | None = None
        self.error: Exception | None = None  # what the first reading raised, in its thread
        self._timer: threading.Timer | None = None

    def _take(self) -> None:
        try:
            self.first = (time.monotonic(), dict(self.reading()))
        except Exception as exc:  # a machine unreadable (a load generator gone): said at stop
            self.error = exc

    def start(self) -> None:
        self._timer = threading.Timer(self.skip, self._take)
        self._timer.daemon = True
        self._timer.start()

    def stop(self, raising: bool = True) -> tuple[float, Mapping, Mapping] | None:
        """(seconds, first reading, last reading); None when the run ended before the first.
        The first reading's error is raised here (unless not `raising`: the run already failed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
        if self.error is not None and raising:
            raise self.error
        if self.first is None:
            return None
        end, last = time.monotonic(), dict(self.reading())
        return end - self.first[0], self.first[1], last
