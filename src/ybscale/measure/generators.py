"""Several load generators driving one cluster: their clocks, their start, their share.

A count's clients are split over k load generators, each driving the nodes assigned to it
(`assign`: node i to generator i mod k, so every node keeps the same share of the clients).
Their per-transaction logs are stamped by their own clocks, so each generator's clock offset
(its clock minus this machine's, the reference) is measured over its SSH connection
(`ClockOffset.estimate`: the exchange with the shortest round trip, Cristian's method, its
uncertainty half that round trip) and the logs are reduced on the reference clock
(`ybscale.measure.latency.reduce_logs(..., offsets)`): one time base, one per-second series.

All generators start their pgbench at one agreed instant (`at_instant`: the command waits on
its own machine until the instant in that machine's clock, prints when it started, then runs
pgbench), launched `LEAD` seconds ahead; the spread of the starts on the reference clock is the
measured skew of the barrier (`skew`). One generator runs as it always has: no barrier.

The generators are the bottleneck at a count (`client_bound`, the one definition: the
measuring sweep's growth and the findings both ask it) when the resource with the largest
service demand there is a generator and it is at least `SATURATED` busy. With `auto`
(`Growth`), a client-bound count adds a generator, up to a bound, and is measured again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

LEAD = 1.0  # seconds between launching the generators' commands and their agreed start
MARK = "ybscale-start-ns"  # the line the barrier writes to stderr just before pgbench starts
_MARK = re.compile(rf"^{MARK} (\d+)\n?", re.M)
GENERATOR = re.compile(r"^client\d*$")  # a load generator: `client`, or `client0`... of several
# a generator this busy (its CPU time over the cores its pgbench threads can use), and the
# busiest resource, limits the count; low, as a generator starved by a busy machine reads less
SATURATED = 0.5


@dataclass(frozen=True)
class ClockOffset:
    """A generator's clock minus the reference clock (seconds) and the bound on its error
    (half the round trip of the exchange it came from)."""

    offset_s: float
    uncertainty_s: float
    samples: int = 1

    @classmethod
    def estimate(cls, samples: Sequence[tuple[float, float, float]]) -> ClockOffset:
        """From (sent, remote clock, received) exchanges, all in seconds: the one with the
        shortest round trip; the remote reading is taken to be at its midpoint."""
        if not samples:
            raise ValueError("no clock samples")
        sent, remote, received = min(samples, key=lambda s: s[2] - s[0])
        return cls(remote - (sent + received) / 2, (received - sent) / 2, len(samples))

    def to_dict(self) -> dict:
        return {"clock_offset_s": self.offset_s, "clock_offset_uncertainty_s": self.uncertainty_s,
                "clock_samples": self.samples}  # fmt: skip


SAME_CLOCK = ClockOffset(0.0, 0.0, 0)  # a generator on this machine


def names(generators: int) -> list[str]:
    """The load generators' resource names: `client` for one (as ever), `client0`... else."""
    return ["client"] if generators == 1 else [f"client{g}" for g in range(generators)]


def assign(targets: int, generators: int) -> list[int]:
    """The generator of each target (node): node i to generator i mod k."""
    if generators < 1:
        raise ValueError(f"at least one load generator, got {generators}")
    return [i % generators for i in range(targets)]


def split(total: int, parts: int) -> list[int]:
    """Spread `total` clients (or threads) evenly over `parts` targets, largest shares first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def threads(shares: Sequence[int], generator_of: Sequence[int], cores: Sequence[int]) -> list[int]:
    """pgbench -j of each target's pgbench (0: the target gets no client): each generator's
    cores spread over the targets it drives, at least one thread per pgbench started."""
    out = [0] * len(shares)
    for g, g_cores in enumerate(cores):
        mine = [i for i, owner in enumerate(generator_of) if owner == g]
        clients = sum(shares[i] for i in mine)
        spread = split(min(clients, g_cores), len(mine)) if mine else []
        for i, t in zip(mine, spread, strict=True):
            out[i] = max(1, t) if shares[i] else 0
    return out


def at_instant(argv: Sequence[str], start_ns: int) -> list[str]:
    """`argv` run at epoch nanosecond `start_ns` of the clock where it runs: a POSIX shell
    sleeps until then (`date +%s%N`, GNU date), writes `MARK <ns>` to stderr and execs it."""
    script = (
        f"t={int(start_ns)}; d=$((t - $(date +%s%N))); "
        'if [ "$d" -gt 0 ]; then sleep "$((d / 1000000000)).$(printf %09d $((d % 1000000000)))"; '
        f'fi; echo "{MARK} $(date +%s%N)" >&2; exec "$@"'
    )
    return ["sh", "-c", script, "ybscale-barrier", *argv]


def started(stderr: str | None) -> tuple[float | None, str]:
    """(the epoch second the barrier let pgbench start, by the clock where it ran; the stderr
    without the barrier's line); None without one."""
    if not stderr:
        return None, stderr or ""
    found = _MARK.search(stderr)
    if not found:
        return None, stderr
    return int(found.group(1)) / 1e9, stderr[: found.start()] + stderr[found.end() :]


def skew(starts: Sequence[float]) -> float:
    """Seconds between the first and the last start on the reference clock (NaN with fewer
    than two)."""
    starts = [s for s in starts if s is not None and math.isfinite(s)]
    return max(starts) - min(starts) if len(starts) >= 2 else math.nan


def is_generator(resource: str) -> bool:
    """A load generator's resource name (`client`, `client0`...), not a node's or `host`."""
    return bool(GENERATOR.fullmatch(str(resource)))


def client_bound(bottleneck: str, utilisation: float) -> bool:
    """The generators are the bottleneck: the resource with the largest service demand
    (`ybscale.measure.utilisation.bottleneck`) is a load generator at `SATURATED` or more of
    its CPUs. Both conditions: with two generators one may be 70 % busy while a node is at
    100 %, and a generator busiest at 30 % limits nothing (latency, locks do)."""
    try:
        utilisation = float(utilisation)
    except (TypeError, ValueError):
        return False
    return is_generator(bottleneck) and math.isfinite(utilisation) and utilisation >= SATURATED


@dataclass
class Growth:
    """`auto`'s decision after each count: add a generator while the generators are the
    bottleneck (`client_bound`) and fewer than `bound` drive the cluster. `bound` None: the
    generators are fixed (no `auto`), nothing grows. What happened goes to the row's record:
    each growth (`grown`: the count, k before and after, the generators' utilisations) and
    each client-bound count at the bound (`at_bound`)."""

    bound: int | None
    start: int = 1
    grown: list[dict] = field(default_factory=list)
    at_bound: list[dict] = field(default_factory=list)

    def add(self, clients: int, k: int, line: Mapping) -> bool:
        """Whether a generator is added after `clients` measured with `k` generators (`line`:
        its throughput line, with `bottleneck`, `bottleneck_util` and `util_*`)."""
        if self.bound is None:
            return False
        if not client_bound(line.get("bottleneck", ""), line.get("bottleneck_util", math.nan)):
            return False
        seen = {
            "clients": clients,
            "generators": k,
            "bottleneck": line["bottleneck"],
            "utilisation": {
                name[5:]: float(u)
                for name, u in line.items()
                if name.startswith("util_") and is_generator(name[5:])
            },
        }
        if k < self.bound:
            self.grown.append({**seen, "to": k + 1})
            return True
        self.at_bound.append(seen)
        return False

    def record(self) -> dict:
        """The row's record of `auto` (measurement.json's `load_generator_growth`)."""
        return {
            "auto": self.bound is not None,
            "start": self.start,
            "bound": self.bound,
            "grown": self.grown,
            "bound_reached": bool(self.at_bound),
            "client_bound_at_bound": self.at_bound,
        }
