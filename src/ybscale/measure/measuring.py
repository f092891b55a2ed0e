"""The measuring protocol as one object: which client counts, how many repetitions of how
long, and when a count is done.

`bench` runs it (`run`, `rule`), the plan times it (`row_seconds`) and the findings describe it
(`describe`), all from the same `measurement:` settings, so the three cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from ybscale import settings
from ybscale.measure import adaptive

if TYPE_CHECKING:  # precision needs numpy: only a measuring job imports it (`rule`), not the
    from ybscale.measure import precision  # plan that backends/gcp/rules.smk reads at parse time

ADAPTIVE_EXTRA_COUNTS = 2  # the adaptive sweep's midpoints around the peak (planning estimate)
ECONOMY_REPETITIONS = 1  # economy: full repetitions of the best probe's count


@dataclass(frozen=True)
class MeasuringProtocol:
    """The `measurement:` settings that decide what is measured (see the config schema)."""

    clients: tuple[int, ...]
    sweep: str
    peak_resolution: float
    max_clients: int | None
    repetitions: int
    max_repetitions: int
    precision: float
    seconds: int
    probe_seconds: int  # economy: the length of a probe (the scan's one short run per count)
    skip_seconds: int
    warmup: int
    outside_max: float | None  # a repetition with more of the machine taken by others: again
    remeasure: int  # most times one repetition is measured again after a disturbed one
    quiet_wait: int  # most seconds one row waits, in all, for quiet before measuring again
    max_tries: int  # pgbench --max-tries: serialization failures retried (and counted)
    timeout: int  # seconds any harness command may take beyond its duration
    order: str  # the rows' order (random from `seed` | standard): the design record's
    seed: int

    @classmethod
    def of(cls, measurement: Mapping) -> MeasuringProtocol:
        """From loaded settings or a row's measurement.json (older ones: schema defaults for
        what they lack). Each setting has one meaning: `max_clients` null is
        `settings.EXTEND_FACTOR` times the grid's largest count, as the settings loader
        derives it."""
        schema = settings.schema("config")["properties"]["measurement"]
        full = settings.fill_defaults(schema, {"clients": [], **settings.thaw(measurement)})
        values = {f.name: full.get(f.name) for f in fields(cls)}
        if values["max_clients"] is None and full["clients"]:
            values["max_clients"] = settings.EXTEND_FACTOR * max(full["clients"])
        return cls(**{**values, "clients": tuple(full["clients"])})

    @property
    def most_repetitions(self) -> int:
        return max(self.repetitions, self.max_repetitions)

    def rule(self, previous: Sequence[float] = ()) -> precision.Sequential:
        """A client count's precision rule, holding its repetitions so far."""
        from ybscale.measure import precision

        rule = precision.Sequential(
            precision=self.precision,
            min_repetitions=self.repetitions,
            max_repetitions=self.most_repetitions,
        )
        rule.values = list(previous)
        return rule

    def run(
        self,
        measure_count: Callable[..., Sequence[float]],
        probe: Callable[[int], float] | None = None,
    ) -> dict[int, list[float]]:
        """The sweep over client counts (`adaptive.sweep` with these settings; the economy
        sweep, `adaptive.economy`, probes with `probe`)."""
        if self.sweep == "economy":
            return adaptive.economy(
                self.clients, probe, measure_count, self.max_clients, ECONOMY_REPETITIONS
            )
        return adaptive.sweep(
            self.clients,
            measure_count,
            self.sweep,
            self.peak_resolution,
            max_clients=self.max_clients,
        )

    def counts_at_most(self) -> int:
        """Client counts a row can measure: the grid, and in the adaptive sweep its midpoints
        (an estimate) and every count the extension can add."""
        if self.sweep == "grid":
            return len(self.clients)
        extension = adaptive.extension_counts(self.clients, self.max_clients)
        midpoints = ADAPTIVE_EXTRA_COUNTS if self.sweep == "adaptive" else 0
        return len(self.clients) + midpoints + len(extension)

    def largest_count(self) -> int:
        """The most clients a row's sweep can run at once: the grid's largest count, and with
        the adaptive and economy sweeps the last count their doubling past the grid can reach
        (`adaptive.extension_counts`, up to `max_clients`: `next_extension`, `next_probe`);
        the adaptive sweep's midpoints lie between counts already measured. 0 without a grid."""
        if not self.clients:
            return 0
        grid = self.sweep == "grid"
        grown = [] if grid else adaptive.extension_counts(self.clients, self.max_clients)
        return max([*self.clients, *grown])

    def row_seconds(
        self,
        loaded_once: bool,
        load_seconds: float,
        per_count_overhead: float,
        restore_share: float = 0.0,
    ) -> float:
        """Wall time of one row at most: per count the warm-up, `max_repetitions` (the
        precision target never met) and `per_count_overhead`; the dataset loaded once
        (`load_seconds`) when `loaded_once` (a read row, or a write row whose repetitions are
        restored: the keys it added deleted), else before every repetition; a restored row's
        restores (`restore_share` above 0: `restore_seconds`). The adaptive sweep's early stop
        is not counted: an upper bound for planning."""
        counts = self.counts_at_most()
        restores = self.restore_seconds(restore_share) if loaded_once else 0.0
        if self.sweep == "economy":  # every count probed, one measured in full
            probes = counts * (self.warmup + self.probe_seconds + per_count_overhead)
            full = ECONOMY_REPETITIONS * self.seconds + self.warmup + per_count_overhead
            reloads = 1 if loaded_once else counts + ECONOMY_REPETITIONS
            return probes + full + reloads * load_seconds + restores
        per_count = self.warmup + self.most_repetitions * self.seconds + per_count_overhead
        reloads = 1 if loaded_once else counts * self.most_repetitions
        return counts * per_count + reloads * load_seconds + restores

    def restores(self) -> int:
        """Restores of a restored row at most: one before every run of pgbench that measures
        (a repetition, an economy probe) but the first, which follows the load."""
        counts = self.counts_at_most()
        runs = (
            counts + ECONOMY_REPETITIONS
            if self.sweep == "economy"
            else counts * (self.most_repetitions)
        )
        return max(runs - 1, 0)

    def restore_seconds(self, share: float) -> float:
        """Seconds a restored row's restores take in all, at most: each deletes what was
        written since the one before (the warm-ups and the runs of pgbench), and is taken to
        take `share` of that writing's time; the last run's rows are never deleted."""
        if share <= 0 or not self.restores():
            return 0.0
        counts = self.counts_at_most()
        if self.sweep == "economy":
            writing = (
                counts * (self.warmup + self.probe_seconds)
                + self.warmup
                + (ECONOMY_REPETITIONS * self.seconds)
            )
        else:
            writing = counts * (self.warmup + self.most_repetitions * self.seconds)
        return share * (writing - self.seconds)

    def logged_seconds(self) -> int:
        """Seconds of the runs of pgbench whose per-transaction logs a row keeps, at most (per
        node: one pgbench each): its repetitions (economy: its probes and its full runs),
        not its warm-ups."""
        counts = self.counts_at_most()
        if self.sweep == "economy":
            return counts * self.probe_seconds + ECONOMY_REPETITIONS * self.seconds
        return counts * self.most_repetitions * self.seconds

    def describe(self) -> str:
        """How the client counts are measured, in words (the findings' Response paragraph)."""
        low, high = self.repetitions, self.most_repetitions
        reps = _count(low, "repetition") if low == high else f"{low} to {high} repetitions"
        # a fixed number of repetitions stops there, whatever the interval
        until = f" until the 95 % CI is within ±{100 * self.precision:g} %" if low < high else ""
        each = f"{self.seconds} s each, {self.counted()}"
        if self.sweep == "economy":
            extend = (
                f", doubling past the grid up to {self.max_clients} clients while the best "
                "probe is at its edge"
                if self.clients and adaptive.extension_counts(self.clients, self.max_clients)
                else ""
            )
            return (
                f"economy sweep: every count probed once for {self.probe_seconds} s "
                f"({self.counted(self.probe_seconds)}), "
                f"ascending until two counts in a row probe below the best{extend}; the best "
                f"probe's count then measured by {_count(ECONOMY_REPETITIONS, 'repetition')} of "
                f"{self.seconds} s ({self.counted()}), the only throughput the ceiling reads"
            )
        if self.sweep != "adaptive":
            return f"every count {reps}{until}; {each}"
        extend = (
            f", doubling past the grid up to {self.max_clients} clients while the best is at its "
            "edge, until a larger count is significantly below the best"
            if self.clients and adaptive.extension_counts(self.clients, self.max_clients)
            else ""  # max_clients at the grid's largest: nothing to extend to
        )
        if high == 1:  # the first scan is every repetition there is
            return f"adaptive sweep: one repetition per count{extend}; {each}"
        return (
            f"adaptive sweep: one repetition per count{extend}, then, in turns, {reps}"
            f"{until} for the counts not significantly below the best; {each}"
        )

    def counted(self, seconds: int | None = None) -> str:
        """Which seconds of a repetition (of `seconds`, default the setting) its throughput
        counts (`bench.steady_throughput`: the per-second logs after `skip_seconds`, else
        pgbench's own figure)."""
        # the per-second logs hold `seconds` intervals
        if self.skip_seconds >= (seconds or self.seconds):
            return (
                f"throughput as pgbench reports it over the whole run (skipping the first "
                f"{self.skip_seconds} s would leave no second to count)"
            )
        if self.skip_seconds == 0:
            return "every second counted"
        return f"the first {self.skip_seconds} s not counted"


def _count(n: int, noun: str) -> str:
    """``1 repetition``, ``3 repetitions``."""
    return f"{n} {noun if n == 1 else noun + 's'}"
