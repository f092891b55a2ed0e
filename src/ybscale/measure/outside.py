"""What took the machine's CPU besides the study's resources (issue 58: know the outside).

`utilisation.with_outside` measures *how much* of the machine others used over a run's counted
seconds (the host's busy time less the nodes', the load generators' and the measuring job's).
This module says *what* it was. A reading (`readings`) is CPU seconds since boot, per label:

- ``steal``: the hypervisor ran other guests while this one's CPUs were ready (/proc/stat);
- ``interrupts``: irq and softirq time the kernel did not charge to any process (/proc/stat:
  with IRQ_TIME_ACCOUNTING, e.g. the softirq of loopback traffic);
- ``kernel <name>``: a kernel thread (kworker, kcompactd, jbd2 ...: writeback, compaction);
- ``study <name>``: the study's own work outside its groups — a process of this job's session
  whose command line is Snakemake's or ybscale's (the workflow, another job of the study);
- ``<name>``: any other process (a neighbour), by its command name.

Processes in the study's CPU groups (`group`, the cluster's cgroup) and the measuring job itself
are left out: they are the study's resources. So are processes exiting or exited (zombies): the
kernel moves an exiting task to the root cgroup (seen here: a zombie's /proc/[pid]/cgroup reads
`cpu:/` whatever group it ran in), so a node's backend ending with its connection would carry
its whole CPU time out of the study's group; it was counted in its group while it ran.
Interrupt time (``interrupts``) is counted as the study's own (`own`): on one machine it is
mostly the softirq of the study's loopback traffic, which the kernel charges to no group. A
process that starts and ends inside a window is not seen; what the labels do not account for
stays in the outside share, and a set-aside run calls it unnamed. The share of
a label is its CPU seconds over the window divided by window x the machine's CPUs, as `outside`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

PREFIX = "other:"  # a reading's keys: `other:<label>`, beside the resources' CPU seconds
USER_HZ = 100  # /proc/[pid]/stat and /proc/stat ticks per second
PF_KTHREAD = 0x00200000  # /proc/[pid]/stat flags: a kernel thread
PF_EXITING = 0x00000004  # /proc/[pid]/stat flags: the task is exiting
OWN = ("snakemake", "ybscale")  # the study's own jobs: their command lines name one of these
STUDY = "study "  # the label of the study's own work outside its groups
INTERRUPTS = "interrupts"  # irq and softirq time: on one machine, the study's loopback traffic


def _name(comm: str, kernel: bool) -> str:
    """A command name without what varies between instances: kworker/1:2-events -> kworker,
    kcompactd0 -> kcompactd (kernel threads), as is for processes."""
    if kernel:
        return re.sub(r"\d+$", "", comm.split("/", 1)[0]) or comm
    return comm


def _stat(text: str) -> tuple[str, list[str]]:
    """(comm, the fields after it) of a /proc/[pid]/stat line (comm may hold spaces)."""
    open_, close = text.index("("), text.rindex(")")
    return text[open_ + 1 : close], text[close + 2 :].split()


def readings(group: str | None, proc: Path = Path("/proc")) -> dict[str, float]:
    """CPU seconds since boot per label (`PREFIX` + label): /proc/stat's steal and interrupt
    time, and every process not in the cgroup `group` (its path holds /<group>/) and not this
    one, summed by label. {} where /proc cannot be read."""
    try:
        ticks = [int(v) for v in (proc / "stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return {}
    out = {f"{PREFIX}steal": (ticks[7] if len(ticks) > 7 else 0) / USER_HZ,
           f"{PREFIX}{INTERRUPTS}": sum(ticks[5:7]) / USER_HZ}  # fmt: skip
    me = os.getpid()
    session = os.getsid(0)
    marker = f"/{group}/" if group else None
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            comm, fields = _stat((entry / "stat").read_text())
            if marker and marker in (entry / "cgroup").read_text():
                continue  # the study's node or load generator
            flags, sid = int(fields[6]), int(fields[3])
            if fields[0] in ("Z", "X") or flags & PF_EXITING:
                continue  # exiting: in the root cgroup now, whatever group it ran in
            seconds = (int(fields[11]) + int(fields[12])) / USER_HZ  # utime + stime
            kernel = bool(flags & PF_KTHREAD)
            label = ("kernel " if kernel else "") + _name(comm, kernel)
            if not kernel and sid == session:
                command = (
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
                if any(word in command for word in OWN):
                    label = STUDY + comm
        except (OSError, ValueError, IndexError):
            continue  # gone while read
        if seconds > 0:
            out[PREFIX + label] = out.get(PREFIX + label, 0.0) + seconds
    return out


def shares(
    first: Mapping[str, float], last: Mapping[str, float], seconds: float, cpus: float
) -> dict[str, float]:
    """Each label's share of the machine over the window (CPU seconds / (seconds x cpus)),
    largest first; a process first seen at the end counts from its start (it began within)."""
    if not seconds > 0 or not cpus > 0:
        return {}
    out = {}
    for key, value in last.items():
        if key.startswith(PREFIX):
            used = value - first.get(key, 0.0)
            if used > 0:
                out[key[len(PREFIX) :]] = used / (seconds * cpus)
    return dict(sorted(out.items(), key=lambda item: -item[1]))


def is_own(label: str) -> bool:
    """The study's own work outside its groups: its jobs (`study ...`) and the interrupts."""
    return label.startswith(STUDY) or label == INTERRUPTS


def own(by: Mapping[str, float]) -> float:
    """The share the study's own work took outside its groups (`is_own`)."""
    return sum(share for label, share in by.items() if is_own(label))


def words(by: Mapping[str, float], least: float = 0.01, most: int = 4) -> str:
    """'kernel kworker 12 %, python3 8 %, steal 2 %': the largest labels of at least `least`."""
    named = [f"{label} {100 * share:.0f} %" for label, share in by.items() if share >= least]
    return ", ".join(named[:most])
