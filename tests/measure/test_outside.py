"""What took the machine besides the study (ybscale.measure.outside, issue 58): a /proc tree in
the kernel's own formats (proc(5): /proc/stat's cpu line, /proc/[pid]/stat's fields after the
parenthesised comm, /proc/[pid]/cgroup, NUL-separated cmdline), read before and after a window."""

from __future__ import annotations

import math
import os

import pytest

from ybscale.measure import outside
from ybscale.measure.bench import disturbed

HZ = outside.USER_HZ


def stat_line(
    pid: int, comm: str, ticks: int, session: int, flags: int = 4194304, state: str = "S"
) -> str:
    """A /proc/[pid]/stat line as this machine's kernel writes it (a `cat` process's, with
    pid, comm, state, session, flags and utime/stime changed; utime + stime = `ticks`)."""
    return (
        f"{pid} ({comm}) {state} 1 {pid} {session} 0 -1 {flags} 97 0 0 0 {ticks - ticks // 2} "
        f"{ticks // 2} 0 0 20 0 1 0 984018 3133440 394 18446744073709551615 0 0 0 0 0 0 0 0 0"
    )


def proc_tree(root, ticks: dict[str, int], steal: int, softirq: int):
    """/proc with /proc/stat and six processes: a kernel thread, a node of the study's group,
    a Snakemake job of this session, a neighbour whose comm holds a space and a parenthesis,
    a node's backend that has exited (a zombie: the kernel shows it in the root cgroup, with
    the flags a zombie had here, 0x40810C, PF_EXITING among them), and this process itself
    (never counted: it is the measuring job)."""
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(
        f"cpu  152749 0 38537 1735691 1410 7 {softirq} {steal} 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\n"
    )
    me = os.getsid(0)
    procs = {
        "11": ("kworker/1:2-events", ticks["kworker"], 0, 0x00200000, "0::/\n", b""),
        "12": ("postgres", ticks["node"], me, 4194304, "1:cpu:/ybscale/grp/node0\n", b"pg\0"),
        "13": ("python3", ticks["job"], me, 4194304, "0::/\n", b"python\0-m\0snakemake\0"),
        "14": ("my (odd) tool", ticks["neighbour"], me + 1, 4194304, "0::/\n", b"tool\0"),
        "15": ("postgres", ticks["ended"], me, 0x40810C, "1:cpu:/\n0::/\n", b""),
        str(os.getpid()): ("pytest", 10_000, me, 4194304, "0::/\n", b"pytest\0"),
    }
    for pid, (comm, used, session, flags, cgroup, cmdline) in procs.items():
        d = root / pid
        d.mkdir(exist_ok=True)
        state = "Z" if pid == "15" else "S"
        (d / "stat").write_text(stat_line(int(pid), comm, used, session, flags, state) + "\n")
        (d / "cgroup").write_text(cgroup)
        (d / "cmdline").write_bytes(cmdline)
    return root


def test_each_label_is_what_took_the_machine_and_the_study_groups_are_left_out(tmp_path):
    before = outside.readings("grp", proc_tree(
        tmp_path / "proc",
        {"kworker": 100, "node": 500, "job": 50, "neighbour": 0, "ended": 0}, 10, 20
    ))  # fmt: skip
    after = outside.readings("grp", proc_tree(
        tmp_path / "proc",
        {"kworker": 160, "node": 900, "job": 70, "neighbour": 200, "ended": 300}, 30, 60
    ))  # fmt: skip
    # 2 s on 2 CPUs: 4 CPU-seconds; the neighbour's 200 ticks are 2 s, half the machine
    by = outside.shares(before, after, 2.0, 2.0)
    assert by == pytest.approx({"my (odd) tool": 0.5, "kernel kworker": 0.15, "interrupts": 0.1,
                                "steal": 0.05, "study python3": 0.05})  # fmt: skip
    assert list(by)[0] == "my (odd) tool"  # largest first
    # the study's: its node, this job, and the backend that ended (its CPU was its group's)
    assert not any("postgres" in label or "pytest" in label for label in by)
    assert outside.own(by) == pytest.approx(0.15)  # its jobs' 5 % and the interrupts' 10 %
    assert outside.words(by, most=2) == "my (odd) tool 50 %, kernel kworker 15 %"


def test_the_study_own_work_does_not_set_a_run_aside_and_a_neighbour_is_named():
    by = {"study python3": 0.3, "stress": 0.08}
    # others 38 % of the machine, 30 of it the study's own jobs: 8 %, within outside_max 0.1
    assert disturbed({"outside": 0.38, "own": 0.3}, 0.1, by) == ""
    by = {"study python3": 0.05, "stress": 0.25, "kernel kcompactd": 0.02}
    why = disturbed({"outside": 0.32, "own": 0.05}, 0.1, by)
    assert why == (
        "others took 27 % of the machine: stress 25 %, kernel kcompactd 2 % "
        "(measurement.outside_max 0.1)"
    )
    assert disturbed({"outside": math.nan}, 0.1, by) == ""  # not measured: not disturbed
    # what no label accounts for (processes begun and ended within the run) is said, not hidden
    by = {"interrupts": 0.04, "bash": 0.02}
    why = disturbed({"outside": 0.19, "own": 0.04}, 0.1, by)
    assert why == (
        "others took 15 % of the machine: unnamed (processes begun and ended within the run) "
        "13 %, bash 2 % (measurement.outside_max 0.1)"
    )


def test_this_machine_is_read(tmp_path):
    """The real /proc: the steal and interrupt counters and at least one other process."""
    got = outside.readings(None)
    assert {"other:steal", "other:interrupts"} <= set(got)
    assert any(k.startswith("other:kernel ") or not k.startswith("other:st") for k in got)
    assert all(v >= 0 for v in got.values())
