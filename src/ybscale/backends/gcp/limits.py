"""What a tserver VM of a machine type takes, by YugabyteDB's own rules: its memory limit, its
block cache beside its memtables, its YSQL connections; and the checks of a design against
them, at `snakemake -n` (`GcpBackend.check_rows`) and in `ybscale plan` (`tserver_line`).

The rules, as YugabyteDB's source states them. No checkout of the pinned tag (gcp.yugabyte.
version, 2024.2.1.0-b185) could be fetched here (the repository is 1.23 GB: yb_catalogue's
`how_read` says the same), so each file was read from the stored yugabyte/yugabyte-db sources
at the commit named: server_main_util.cc at c624a4f6 (the commit yb_catalogue/2024.2.json
records for it), mem_tracker.cc at 0004c260, tablet_memory_manager.cc at 0030e653,
size_literals.h at 010a1110, pg_wrapper.cc at 00201312 and initdb.c at 55782d56 and 06cd4073
(the same probe at both). The last two are later than 2024.2 (initdb.c of the PostgreSQL 15
base, 2024.2 has PostgreSQL 11's): a paid run's rows record what the tservers report.

- Memory limit (src/yb/util/mem_tracker.cc, `MemTracker::CreateRootTracker`):
  `--memory_limit_hard_bytes` when above 0 (-1: no limit), else
  `--default_memory_limit_to_ram_ratio` x the RAM `Env::GetTotalRAMBytes` reports.
- That ratio's default (src/yb/tserver/server_main_util.cc at c624a4f6, `AdjustMemoryLimits
  IfNeeded`, which yb-master and yb-tserver both run): with
  `--use_memory_defaults_optimized_for_ysql` (ybscale sets it on both servers,
  `stacks.MEMORY_FOR_YSQL`) a tserver takes 0.45 of RAM up to 4_GB, 0.48 up to 8_GB, 0.57 up to
  16_GB, 0.60 above (`_GB`: 2^30 bytes, src/yb/util/size_literals.h); without it 0.85
  (`GetLegacyMemoryValues`). The v2024.2 yb-tserver reference page's "Memory division flags"
  table gives the same split (docs/content/v2024.2/reference/configuration/yb-tserver.md at
  036c49a3).
- Block cache (src/yb/tserver/tablet_memory_manager.cc, `GetTargetBlockCacheSize`):
  `--db_block_cache_size_bytes` (-1: a percentage of the memory limit, -2: no cache), the
  percentage `--db_block_cache_size_percentage` (32 with the YSQL defaults, 50 without, -1000
  and -3 their markers), which must lie in (0, 100]: a tserver outside it stops at start
  (`CHECK`). Its memtables: `--global_memstore_size_percentage` (10) of the memory limit, at most
  `--global_memstore_size_mb_max` MiB (2048; 0: no cap), `ConfigureBackgroundTask`. The cache
  is a child of the root tracker: a cache larger than the limit less the memtables leaves
  nothing for writes, which the tserver throttles from `--memory_limit_soft_percentage` (85) of
  its limit, or the kernel kills it.
- YSQL connections (src/yb/yql/pgwrapper/pg_wrapper.cc: `ysql_max_connections`, a PG flag, 0 =
  unset, "Postgres will dynamically determine a platform-specific value"; the flag, when set,
  is appended to ysql_pg.conf after `--ysql_pg_conf_csv`'s settings and wins over a
  `max_connections` there, `WritePostgresConfig`). Unset, the value is the one the tserver's
  local initdb wrote (src/postgres/src/bin/initdb/initdb.c, `test_config_settings`: "For
  YugaByte we try larger number of connections (300) first", trial_conns 300, 100, 50, 40, 30,
  20, each with 10 shared buffers per connection, the first that `postgres --check` accepts).
  That probe asks the kernel for shared memory, not for the node's RAM: 300 x 10 buffers of
  8 kB (24 MB) passes on every Linux Compute Engine image (POSIX shared memory, no SysV
  SHMMAX cap since Linux 3.16), so a tserver takes 300 connections whatever its machine type.
  The v2024.2 yb-tserver reference page puts it as "the highest number of connections the
  system can support, from a minimum of 50 to a maximum of 300 (per node)". Each row reads
  every tserver's `SHOW max_connections` before it measures (`connections_in_effect`).
  pgbench connects as `yugabyte`, a superuser: superuser_reserved_connections are open to it,
  so its clients may take all max_connections; pgbench -c N holds exactly N (its setup
  connection is closed before the clients connect: PostgreSQL 15's pgbench with
  max_connections = 4 runs -c 4 and refuses -c 5, "sorry, too many clients already").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ybscale.backends.yb_catalogue.gflags import flag_text
from ybscale.config_sources import source_of

GIB = 2**30
MIB = 2**20
# tablet_memory_manager.cc
USE_PERCENTAGE, CACHE_DISABLED = -1, -2  # DB_CACHE_SIZE_USE_PERCENTAGE, _CACHE_DISABLED
RECOMMENDED, OLD_DEFAULT = -1000, -3  # USE_RECOMMENDED_MEMORY_VALUE, DB_CACHE_SIZE_USE_DEFAULT
MEMSTORE_PERCENTAGE, MEMSTORE_MB_MAX = 10, 2048  # global_memstore_size_percentage, _mb_max
# server_main_util.cc: the tserver's default_memory_limit_to_ram_ratio with the YSQL defaults,
# by total RAM (`_GB` of size_literals.h: 2^30 bytes); legacy (the flag false): 0.85
YSQL_RATIOS = ((4 * GIB, 0.45), (8 * GIB, 0.48), (16 * GIB, 0.57), (math.inf, 0.60))
LEGACY_RATIO = 0.85
YSQL_CACHE_PERCENTAGE, LEGACY_CACHE_PERCENTAGE = 32, 50  # a tserver's block cache default
# initdb.c test_config_settings: the first trial that passes on a Linux VM (module docstring)
DEFAULT_MAX_CONNECTIONS = 300
INITDB = "src/postgres/src/bin/initdb/initdb.c"
MEMORY_FOR_YSQL = "use_memory_defaults_optimized_for_ysql"  # as stacks.MEMORY_FOR_YSQL

# GiB of memory per vCPU of Compute Engine's predefined machine types, by series and class
# (Google's machine-family pages; Compute Engine's "GB" of memory is 2^30 bytes); a custom type
# names its memory in MiB (n2-custom-6-23040, custom-2-7680, n2-custom-2-16384-ext)
GIB_PER_VCPU = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "n2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "n2d": {"standard": 4, "highmem": 8, "highcpu": 1},
    "e2": {"standard": 4, "highmem": 8, "highcpu": 1},
    "t2d": {"standard": 4},
    "t2a": {"standard": 4},
    "c2": {"standard": 4},
    "c2d": {"standard": 4, "highmem": 8, "highcpu": 2},
    "c3": {"standard": 4, "highmem": 8, "highcpu": 2},
    "c3d": {"standard": 4, "highmem": 8, "highcpu": 2},
    "n4": {"standard": 4, "highmem": 8, "highcpu": 2},
    "c4": {"standard": 3.75, "highmem": 7.75, "highcpu": 2},
}
SHARED_CORE_GIB = {"e2-micro": 1, "e2-small": 2, "e2-medium": 4, "f1-micro": 0.6, "g1-small": 1.7}
_PREDEFINED = re.compile(r"^([a-z0-9]+)-(standard|highmem|highcpu)-(\d+)(?:-lssd)?$")
_CUSTOM = re.compile(r"custom-(\d+)-(\d+)(?:-ext)?$")


def machine_memory(machine_type: str) -> int | None:
    """Bytes of memory of a Compute Engine machine type (n2-standard-2: 8 GiB), None when this
    table does not know it (a bare-metal or memory-optimised series)."""
    if machine_type in SHARED_CORE_GIB:
        return round(SHARED_CORE_GIB[machine_type] * GIB)
    custom = _CUSTOM.search(machine_type)
    if custom:
        return int(custom[2]) * MIB
    found = _PREDEFINED.match(machine_type)
    if not found:
        return None
    per_vcpu = GIB_PER_VCPU.get(found[1], {}).get(found[2])
    return None if per_vcpu is None else round(per_vcpu * int(found[3]) * GIB)


def _number(value: object) -> float | None:
    """A flag's value as gflags reads a number (0x: hexadecimal), None when it is not one (the
    catalogue's check names that)."""
    text = str(value).strip()
    try:
        if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", text):
            return int(text, 16)
        return int(text) if re.fullmatch(r"[-+]?\d+", text) else float(text)
    except ValueError:
        return None


def _flag(server: Mapping[str, object], name: str) -> float | None:
    return _number(server[name]) if name in server else None


@dataclass(frozen=True)
class TserverMemory:
    """A tserver's memory on its VM as YugabyteDB sizes it (the module docstring's rules):
    `ram` the machine type's memory, `limit` the tserver's (None: -1, no limit), `ratio` the
    share of RAM it came from (None when memory_limit_hard_bytes set it), `cache` its block
    cache (0: none), `memtables` their bound, `cache_field` the server.* knob that sized the
    cache (None: the default percentage), `problem` why the tserver would not start."""

    machine_type: str
    ram: int
    limit: int | None
    ratio: float | None
    cache: int
    memtables: int
    cache_field: str | None = None
    ysql_defaults: bool = True
    problem: str = ""

    @classmethod
    def of(cls, machine_type: str, server: Mapping[str, object]) -> TserverMemory | None:
        """The tserver's memory on `machine_type` with the row's server.* knobs; None when the
        machine type's memory is not known (`machine_memory`)."""
        ram = machine_memory(machine_type)
        if ram is None:
            return None
        try:  # ybscale's default, unless a knob says otherwise (stacks.server_flags)
            ysql = flag_text(server.get(MEMORY_FOR_YSQL, "true"), "bool") == "true"
        except ValueError:  # not a boolean: yb_catalogue.server_setting_errors names it
            ysql = True
        hard = _flag(server, "memory_limit_hard_bytes") or 0
        ratio = _flag(server, "default_memory_limit_to_ram_ratio")
        if ratio is None or ratio == RECOMMENDED:
            ratio = next(r for top, r in YSQL_RATIOS if ram <= top) if ysql else LEGACY_RATIO
        if hard > 0:
            limit, ratio = int(hard), None
        else:
            limit = None if hard == -1 else int(ram * ratio)
        base = ram if limit is None else limit
        # global_memstore_size_*: not in the catalogue's flag lists, so never a knob's
        memtables = min(int(base * MEMSTORE_PERCENTAGE / 100), MEMSTORE_MB_MAX * MIB)
        size = _flag(server, "db_block_cache_size_bytes")
        percentage = _flag(server, "db_block_cache_size_percentage")
        default = YSQL_CACHE_PERCENTAGE if ysql else LEGACY_CACHE_PERCENTAGE
        field, problem = None, ""
        if size is not None and size not in (USE_PERCENTAGE, CACHE_DISABLED):
            cache, field = int(size), "db_block_cache_size_bytes"
            if size < 0:
                problem = (
                    f"{int(size)} is neither a size in bytes nor -1 (a percentage) or -2 (none)"
                )
        elif size == CACHE_DISABLED:
            cache, field = 0, "db_block_cache_size_bytes"
        else:
            if percentage is None or percentage in (RECOMMENDED, OLD_DEFAULT):
                percentage = default
            else:
                field = "db_block_cache_size_percentage"
            if not 0 < percentage <= 100:
                problem = (
                    f"{percentage:g} is not a percentage in (0, 100], and the tserver stops at "
                    "start on one (tablet_memory_manager.cc, GetTargetBlockCacheSize: CHECK)"
                )
            cache = int(base * percentage / 100)
        return cls(machine_type, ram, limit, ratio, cache, memtables, field, ysql, problem)

    @property
    def room(self) -> int:
        """The most the block cache may take: the memory limit (the RAM without one) less the
        memtables' bound."""
        return (self.ram if self.limit is None else self.limit) - self.memtables

    def limit_text(self) -> str:
        """How the memory limit was reached, in words."""
        if self.limit is None:
            return "no memory limit (memory_limit_hard_bytes -1)"
        if self.ratio is None:
            return f"a memory limit of {gib(self.limit)} (memory_limit_hard_bytes)"
        why = (
            "default_memory_limit_to_ram_ratio with use_memory_defaults_optimized_for_ysql"
            if self.ysql_defaults
            else "default_memory_limit_to_ram_ratio"
        )
        return (
            f"a memory limit of {gib(self.limit)} = {self.ratio:g} x {gib(self.ram)} of RAM "
            f"({why}, src/yb/tserver/server_main_util.cc)"
        )


def gib(nbytes: float) -> str:
    """Bytes in GiB (2^30), two decimals below 10 GiB."""
    value = nbytes / GIB
    return f"{value:.2f} GiB" if value < 10 else f"{value:,.1f} GiB"


@dataclass(frozen=True)
class Connections:
    """The YSQL connections one tserver takes (`limit`) and which setting says so (`field`:
    server.ysql_max_connections or server.max_connections; None: initdb's default)."""

    limit: int
    field: str | None = None

    @classmethod
    def of(cls, server: Mapping[str, object]) -> Connections:
        flag = _flag(server, "ysql_max_connections")
        if flag is not None and flag > 0:  # 0: unset (pg_wrapper.cc)
            return cls(int(flag), "ysql_max_connections")
        setting = _flag(server, "max_connections")  # a YSQL setting, in ysql_pg.conf
        if setting is not None and setting > 0:
            return cls(int(setting), "max_connections")
        return cls(DEFAULT_MAX_CONNECTIONS)

    def text(self) -> str:
        if self.field == "ysql_max_connections":
            return f"{self.limit} YSQL connections per tserver (server.ysql_max_connections)"
        if self.field:
            return f"{self.limit} YSQL connections per tserver (server.max_connections)"
        return (
            f"{self.limit} YSQL connections per tserver (ysql_max_connections unset: the "
            f"tserver's initdb tries 300 first and a Linux VM takes it, {INITDB})"
        )


def clients_per_tserver(clients: int, tservers: int) -> int:
    """The most clients one tserver serves: a count's clients split evenly over the tservers,
    one pgbench each, the largest shares first (`measure.generators.split`)."""
    return -(-clients // max(tservers, 1))


def connection_errors(rows: Sequence, measurement: Mapping) -> list[str]:
    """One line per cluster shape (its node count and connection limit) whose largest client
    count (`MeasuringProtocol.largest_count`: the grid, and its doubling up to
    measurement.max_clients) gives a tserver more clients than it takes YSQL connections
    (`Connections`): pgbench would fail there with "sorry, too many clients already", after
    the row's load. Names the field that grows the count, the node level and the limit."""
    from ybscale.measure.measuring import MeasuringProtocol

    protocol = MeasuringProtocol.of(measurement)
    largest = protocol.largest_count()
    grown = protocol.sweep != "grid" and largest > max(protocol.clients, default=0)
    field = "measurement.max_clients" if grown else "measurement.clients"
    how = (
        f"the {protocol.sweep} sweep may grow to {largest:,} clients (measurement.clients "
        f"doubled up to measurement.max_clients {protocol.max_clients:,})"
        if grown
        else f"the sweep runs up to {largest:,} clients"
    )
    errors: dict[tuple, str] = {}
    for row in rows:
        nodes = row.cluster.nodes
        allowed = Connections.of(row.server)
        per = clients_per_tserver(largest, nodes)
        if per <= allowed.limit:
            continue
        limit_where = f" ({row.source('server.' + allowed.field)})" if allowed.field else ""
        most = allowed.limit * nodes
        errors.setdefault(
            (nodes, allowed),
            f"{source_of(field)}: {how}: {per:,} per tserver on {nodes} tservers "
            f"(cluster.nodes {nodes}, {row.source('cluster.nodes')}), more than the "
            f'{allowed.text()}{limit_where}; pgbench would fail there with "sorry, too many '
            f"clients already\" after the row's load: keep the sweep at {most:,} clients or "
            f"fewer ({field}), or set server.ysql_max_connections to {per:,} or more",
        )
    return [errors[key] for key in sorted(errors, key=lambda k: (k[0], k[1].limit))]


def block_cache_errors(rows: Sequence, settings: Mapping) -> list[str]:
    """One line per block-cache setting (server.db_block_cache_size_bytes or
    db_block_cache_size_percentage) and node size whose cache is more than the tserver's memory
    limit on that machine type leaves beside its memtables (`TserverMemory.room`), or that the
    tserver refuses at start; rows on a machine type whose memory is not known are not
    checked (`tserver_line` says so). `settings`: the gcp section."""
    types = settings["machine_types"]
    errors: dict[tuple, str] = {}
    for row in rows:
        if row.cluster.node_size not in types:
            continue  # its own error
        memory = TserverMemory.of(types[row.cluster.node_size], row.server)
        if memory is None or memory.cache_field is None:
            continue
        knob = f"server.{memory.cache_field}"
        value = row.server[memory.cache_field]
        where = f"{row.source(knob)}: {knob}: {value}"
        machine = (
            f"{memory.machine_type}, {gib(memory.ram)} "
            f"({source_of('gcp.machine_types')}.{row.cluster.node_size})"
        )
        if memory.problem:
            line = f"{where}: {memory.problem}"
        elif memory.cache > memory.room:
            line = (
                f"{where}: a block cache of {gib(memory.cache)} on each tserver of "
                f"{machine}, more than the {gib(memory.room)} left beside its memtables "
                f"({gib(memory.memtables)}: global_memstore_size_percentage) by "
                f"{memory.limit_text()}: the tserver would throttle writes or be killed; "
                f"lower it to {memory.room:,} bytes or less, or choose a larger machine type "
                "for this node size"
            )
        else:
            continue
        errors.setdefault((where, memory.machine_type), line)
    return [errors[key] for key in sorted(errors)]


def tserver_line(
    machine_type: str, server: Mapping[str, object], clients: int, tservers: int
) -> str:
    """One cluster's tservers for `ybscale plan`: the largest count's clients per tserver
    against its YSQL connections, its memory limit and block cache."""
    connections = Connections.of(server)
    per = clients_per_tserver(clients, tservers)
    share = f"{per:,} of {connections.limit} YSQL connections" + (
        f" (server.{connections.field})" if connections.field else ""
    )
    memory = TserverMemory.of(machine_type, server)
    if memory is None:
        return f"{share}; memory of {machine_type} not known here: its block cache not checked"
    limit = "no limit" if memory.limit is None else gib(memory.limit)
    return (
        f"{share}; {gib(memory.ram)} RAM, memory limit {limit}, block cache "
        f"{gib(memory.cache)}" + (f" (server.{memory.cache_field})" if memory.cache_field else "")
    )


def connections_in_effect(cluster, clients: int) -> dict[str, int]:
    """Each tserver's `max_connections` as its YSQL reports it (SHOW, read before the row
    measures: the row's record, `ysql_max_connections_in_effect`), which confirms on a real
    cluster the limit the dry run assumed (`Connections`); BackendError naming the tserver when
    one takes fewer than `clients`, the most the row's sweep gives one tserver, before the row
    spends its time on counts that would fail. `cluster`: a `ysql.YsqlCluster`."""
    from ybscale.backends.base import BackendError

    shown = {
        cluster.name(ep): int(cluster.psql("SHOW max_connections;", ep, timeout=30).strip())
        for ep in cluster.endpoints
    }
    short = {name: limit for name, limit in shown.items() if limit < clients}
    if short:
        raise BackendError(
            f"YSQL max_connections {short}: fewer than the {clients} clients the sweep's largest "
            "count gives a tserver (set server.ysql_max_connections, or lower "
            "measurement.max_clients)"
        )
    return shown
