"""Per-node CPU limits on one machine: cgroup v2, else cgroup v1 CFS quota, else CPU affinity.

With a cgroup each group's CPU time is counted too (v2 `cpu.stat` usage_usec; v1 the cpuacct
controller's `cpuacct.usage`, in the cpu group when the two are mounted together, else in a
twin group under the cpuacct hierarchy), and an unlimited group counts the load generator.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MECHANISMS = ("cgroup2", "cgroup1", "affinity", "none")


@dataclass
class CpuLimits:
    """Creates one CPU limit per node and removes them all again."""

    group: str  # unique name of this cluster's group
    mechanism: str = "auto"
    largest: float = 1.0  # largest CPU setting: affinity gives it every core
    period_ms: float = 100  # CFS bandwidth period: the quota is cpus x period in each period
    chosen: str = ""
    warning: str | None = None
    _dirs: list[Path] = field(default_factory=list)
    _quotas: dict[Path, tuple[int, int]] = field(default_factory=dict)  # group -> (quota, period)
    _usage: dict[str, Path] = field(default_factory=dict)  # name -> its CPU time counter file

    def __post_init__(self) -> None:
        order = MECHANISMS if self.mechanism == "auto" else (self.mechanism,)
        for name in order:
            if name == "none" or _AVAILABLE[name]():
                self.chosen = name
                break
        else:
            self.chosen = "none"
        if self.chosen == "none":
            self.warning = (
                f"no CPU limit mechanism usable here (asked: {self.mechanism}); node_size levels "
                "were NOT applied and small/large nodes ran with the same CPU"
            )

    def to_dict(self) -> dict:
        """What another process needs to read, lift and remove these groups (`restore`)."""
        return {
            "group": self.group,
            "mechanism": self.chosen,
            "largest": self.largest,
            "period_ms": self.period_ms,
            "warning": self.warning,
            "dirs": [str(p) for p in self._dirs],
            "quotas": {str(p): list(q) for p, q in self._quotas.items()},
            "usage": {name: str(p) for name, p in self._usage.items()},
        }

    @classmethod
    def restore(cls, state: Mapping) -> CpuLimits:
        """The groups `to_dict` described, as made by the process that brought them up."""
        limits = cls(state["group"], "none", state["largest"], state["period_ms"])
        limits.chosen = state["mechanism"]
        limits.warning = state["warning"]
        limits._dirs = [Path(p) for p in state["dirs"]]
        limits._quotas = {Path(p): (int(q), int(t)) for p, (q, t) in state["quotas"].items()}
        limits._usage = {name: Path(p) for name, p in state["usage"].items()}
        return limits

    def prefix(self, node: str, cpus: float, memory: int | None = None) -> tuple[list[str], dict]:
        """Command prefix that starts a process under the limit, and a record of what applies;
        with `memory` (bytes) also under that memory limit, page cache included (cgroup v2
        `memory.max`, v1 `memory.limit_in_bytes`), read back into the record."""
        argv, record = self._cpu_prefix(node, cpus)
        if memory is None:
            return argv, record
        path, knob = self._memory_group(node)
        (path / knob).write_text(f"{memory}\n")
        record["memory_bytes"] = int((path / knob).read_text().strip())
        record["memory_path"] = str(path)
        if path.parent.parent == _cgroup2_base():  # v2: the cpu group itself
            return argv, record
        return argv[:2] + [f'echo $$ > "{path}/cgroup.procs" && ' + argv[2]] + argv[3:], record

    def _memory_group(self, node: str) -> tuple[Path, str]:
        """The group that holds `node`'s memory limit, and the file that sets it; BackendError
        (a ValueError) when neither cgroup version offers one: the limit is never dropped
        silently."""
        if self.chosen == "cgroup2":
            base = _cgroup2_base()
            for parent in (base.parent, base, base / self.group):
                (parent / "cgroup.subtree_control").write_text("+memory\n")
            return base / self.group / node, "memory.max"
        memory = CGROUP_ROOT / "memory"
        if self.chosen == "cgroup1" and (memory / "memory.limit_in_bytes").exists():
            return self._make(memory / "ybscale" / self.group / node), "memory.limit_in_bytes"
        raise ValueError(
            f"no memory cgroup usable here (CPU mechanism {self.chosen}): a node's memory limit "
            "(local.memory) cannot be applied"
        )

    def _cpu_prefix(self, node: str, cpus: float) -> tuple[list[str], dict]:
        period = int(self.period_ms * 1000)
        quota = max(1000, int(cpus * period))  # the kernel's smallest quota is 1 ms
        record = {"cpus": cpus, "period_us": period, "quota_us": quota}
        if self.chosen == "cgroup2":
            path = self._make(_cgroup2_base() / self.group / node)
            (path / "cpu.max").write_text(f"{quota} {period}\n")
            self._quotas[path] = (quota, period)
            self._usage[node] = path / "cpu.stat"
            return _enter(path), {"mechanism": "cgroup2", **record, "path": str(path)}
        if self.chosen == "cgroup1":
            path = self._make(CGROUP_ROOT / "cpu" / "ybscale" / self.group / node)
            (path / "cpu.cfs_period_us").write_text(f"{period}\n")
            (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            self._quotas[path] = (quota, period)
            return _enter(path, *self._cpuacct(node, path)), {
                "mechanism": "cgroup1",
                **record,
                "path": str(path),
            }
        if self.chosen == "affinity":
            cores = sorted(os.sched_getaffinity(0))
            keep = cores[: max(1, min(len(cores), round(cpus / self.largest * len(cores))))]
            return (
                ["taskset", "-c", ",".join(map(str, keep))],
                {"mechanism": "affinity", "cpus": cpus, "cores": keep},
            )
        return [], {"mechanism": "none", "cpus": cpus, "warning": self.warning}

    def counted(self, name: str) -> list[str]:
        """Command prefix that starts a process with no quota, its CPU time counted under
        `name` (the load generator); [] without a cgroup mechanism. With cgroup v1 and cpuacct
        mounted apart it joins a cpuacct group only, so its scheduling stays as it was; else
        (v2, or cpu and cpuacct mounted together) a cpu group of its own under this cluster's."""
        if self.chosen == "cgroup2":
            path = self._make(_cgroup2_base() / self.group / name)
            self._usage[name] = path / "cpu.stat"
            return _enter(path)
        if self.chosen == "cgroup1":
            cpu = CGROUP_ROOT / "cpu"
            if (cpu / "cpuacct.usage").exists():
                path = self._make(cpu / "ybscale" / self.group / name)
                self._usage[name] = path / "cpuacct.usage"
                return _enter(path)
            try:
                twin = self._make(CGROUP_ROOT / "cpuacct" / "ybscale" / self.group / name)
            except OSError:
                return []
            self._usage[name] = twin / "cpuacct.usage"
            return _enter(twin)
        return []

    def _cpuacct(self, name: str, path: Path) -> list[Path]:
        """cgroup v1: where `name`'s CPU time is counted; the twin group under the cpuacct
        hierarchy to enter as well when cpuacct is mounted apart from cpu."""
        if (path / "cpuacct.usage").exists():
            self._usage[name] = path / "cpuacct.usage"
            return []
        try:
            twin = self._make(CGROUP_ROOT / "cpuacct" / "ybscale" / self.group / name)
        except OSError:
            return []  # no accounting: this name's CPU time stays unknown
        self._usage[name] = twin / "cpuacct.usage"
        return [twin]

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds each counted group (node or load generator) has used so far."""
        return {name: _usage_seconds(path) for name, path in self._usage.items()}

    @contextmanager
    def lifted(self) -> Iterator[None]:
        """No quota while the block runs (loading data, not measuring); every group's quota is
        written back afterwards, also when the block raises. Affinity stays as it is."""
        for path, (_, period) in self._quotas.items():
            self._write_quota(path, "max", period)
        try:
            yield
        finally:
            for path, (quota, period) in self._quotas.items():
                self._write_quota(path, str(quota), period)

    def lift(self) -> None:
        """No quota from now on, in every group that still exists (a cluster shutting down:
        nothing is measured any more)."""
        for path, (_, period) in self._quotas.items():
            try:
                self._write_quota(path, "max", period)
            except OSError:
                pass

    def _write_quota(self, path: Path, quota: str, period: int) -> None:
        if self.chosen == "cgroup2":
            (path / "cpu.max").write_text(f"{quota} {period}\n")
        else:  # cgroup1: -1 is no limit
            (path / "cpu.cfs_quota_us").write_text(("-1" if quota == "max" else quota) + "\n")

    def _make(self, path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        self._dirs.append(path)
        return path

    def cleanup(self) -> None:
        """Remove the groups this object created (their processes must have exited)."""
        for path in reversed(self._dirs):
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        for parent in {p.parent for p in self._dirs}:
            try:
                parent.rmdir()
            except OSError:
                pass
        self._dirs.clear()
        self._quotas.clear()
        self._usage.clear()


GROUP_NAME = re.compile(r"(\d+)-[0-9a-f]{8}")  # CpuLimits.group as the local backend names it


def reap_orphan_groups(alive: Callable[[int], bool]) -> list[str]:
    """Remove the CPU groups of clusters whose process died before it could (e.g. killed -9).

    Only empty groups can be removed; a group still holding a process stays."""
    reaped = []
    bases = (CGROUP_ROOT / "cpu" / "ybscale", CGROUP_ROOT / "cpuacct" / "ybscale",
             CGROUP_ROOT / "memory" / "ybscale", _cgroup2_base())  # fmt: skip
    for base in bases:
        for group in base.glob("*-*"):
            match = GROUP_NAME.fullmatch(group.name)
            if not match or alive(int(match[1])):
                continue
            try:
                for node in [d for d in group.iterdir() if d.is_dir()]:
                    node.rmdir()
                group.rmdir()
            except OSError:
                continue
            reaped.append(str(group))
    return reaped


def _enter(*paths: Path) -> list[str]:
    """`sh -c` that moves itself into the groups, then execs the rest of the command line."""
    moves = " && ".join(f'echo $$ > "{path}/cgroup.procs"' for path in paths)
    return ["sh", "-c", f'{moves} && exec "$@"', "cpu-limit"]


def _usage_seconds(path: Path) -> float:
    """A group's CPU time so far: cpuacct.usage (ns) or cpu.stat's usage_usec (v2)."""
    text = path.read_text()
    if path.name == "cpuacct.usage":
        return int(text) / 1e9
    fields = dict(line.split() for line in text.splitlines() if line.strip())
    return int(fields["usage_usec"]) / 1e6


def _cgroup2_base() -> Path:
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return CGROUP_ROOT / "ybscale"
    return CGROUP_ROOT / "unified" / "ybscale"


def _cgroup2_usable() -> bool:
    base = _cgroup2_base()
    try:
        if "cpu" not in (base.parent / "cgroup.controllers").read_text().split():
            return False
        base.mkdir(exist_ok=True)
        (base.parent / "cgroup.subtree_control").write_text("+cpu\n")
        probe = base / f"probe-{os.getpid()}"
        probe.mkdir(exist_ok=True)
        ok = (probe / "cpu.max").exists()
        probe.rmdir()
        (base / "cgroup.subtree_control").write_text("+cpu\n")
        return ok
    except OSError:
        return False


def _cgroup1_usable() -> bool:
    probe = CGROUP_ROOT / "cpu" / "ybscale" / f"probe-{os.getpid()}"
    try:
        probe.mkdir(parents=True, exist_ok=True)
        (probe / "cpu.cfs_quota_us").write_text("-1\n")
        probe.rmdir()
        return True
    except OSError:
        return False


def _affinity_usable() -> bool:
    return shutil.which("taskset") is not None and len(os.sched_getaffinity(0)) > 1


_AVAILABLE = {
    "cgroup2": _cgroup2_usable,
    "cgroup1": _cgroup1_usable,
    "affinity": _affinity_usable,
}
