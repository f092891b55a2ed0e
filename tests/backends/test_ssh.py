"""The SSH runner against a real sshd on 127.0.0.1 (started and stopped by the fixture)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import _free_port

from ybscale.backends import ssh
from ybscale.backends.base import BackendError, Endpoint, PgbenchCommand
from ybscale.measure import pgbench


def test_run_returns_remote_output_and_status(sshd):
    proc = ssh.run(
        sshd,
        ["sh", "-c", 'echo "$GREETING" in $(pwd); echo oops >&2; exit 3'],
        env={"GREETING": "hello world"},
        cwd="/tmp",
        timeout=20,
    )
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert out.strip() == "hello world in /tmp"
    assert err.strip() == "oops"  # LogLevel=ERROR: no "Permanently added" notice
    assert sshd.known_hosts.exists(), "host key recorded under results/"


def test_remote_timeout_kills_the_command(sshd):
    started = time.monotonic()
    proc = ssh.run(sshd, ["sleep", "30"], timeout=1)
    proc.communicate(timeout=30)
    assert proc.returncode == 124
    assert time.monotonic() - started < 15


def test_check_output_and_copies(sshd, tmp_path):
    assert ssh.check_output(sshd, ["cat"], input="via stdin", timeout=20) == "via stdin"
    with pytest.raises(BackendError, match="exited 1"):
        ssh.check_output(sshd, ["false"], timeout=20)
    src = tmp_path / "script.sql"
    src.write_text("SELECT 1;\n")
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    ssh.copy_to(sshd, src, str(remote_dir / "script.sql"))
    (remote_dir / "log.1").write_text("a")
    (remote_dir / "log.2").write_text("b")
    back = tmp_path / "back"
    back.mkdir()
    ssh.copy_back(sshd, str(remote_dir / "log.*"), back)
    assert sorted(p.name for p in back.iterdir()) == ["log.1", "log.2"]
    ssh.copy_back(sshd, str(remote_dir / "script.sql"), tmp_path / "again" / "s.sql")
    assert (tmp_path / "again" / "s.sql").read_text() == "SELECT 1;\n"
    with pytest.raises(BackendError, match="scp"):
        ssh.copy_back(sshd, str(remote_dir / "missing"), tmp_path / "x")


def test_unreachable_host_fails_fast(tmp_path):
    key = tmp_path / "k"
    ssh.ensure_keypair(key)
    host = ssh.SshHost(
        "127.0.0.1",
        "nobody",
        key,
        port=_free_port(),
        connect_timeout=3,
        known_hosts=tmp_path / "kh",
    )
    proc = ssh.run(host, ["true"], timeout=5)
    proc.communicate(timeout=30)
    assert proc.returncode == 255


def test_command_construction(tmp_path):
    host = ssh.SshHost(
        "ybscale-c-loadgen",
        "ybscale",
        tmp_path / "id",
        known_hosts=tmp_path / "kh",
        proxy_command="gcloud compute start-iap-tunnel %h %p --listen-on-stdin --zone=z",
    )
    line = ssh.remote_command(
        ["pgbench", "-f", "my script.sql"],
        env={"PGOPTIONS": r"-c a=read\ committed"},
        cwd="ybscale/run 1",
        timeout=12.2,
    )
    assert line == (
        "mkdir -p 'ybscale/run 1' && cd 'ybscale/run 1' && env "
        "'PGOPTIONS=-c a=read\\ committed' timeout --kill-after=10 13s pgbench -f 'my script.sql'"
    )
    argv = ssh.ssh_argv(host, "true")
    assert argv[0] == "ssh" and argv[-2:] == ["ybscale@ybscale-c-loadgen", "true"]
    opts = set(argv)
    for opt in (
        "BatchMode=yes",
        "StrictHostKeyChecking=accept-new",
        "ConnectTimeout=15",
        f"UserKnownHostsFile={(tmp_path / 'kh').resolve()}",
        "ProxyCommand=gcloud compute start-iap-tunnel %h %p --listen-on-stdin --zone=z",
    ):
        assert opt in opts
    assert argv[argv.index("-i") + 1] == str(tmp_path / "id")


def test_ensure_keypair_is_idempotent(tmp_path):
    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen missing")
    key = tmp_path / "ssh" / "id_ed25519"
    pub = ssh.ensure_keypair(key)
    first = pub.read_text()
    assert first.startswith("ssh-ed25519 ")
    assert ssh.ensure_keypair(key).read_text() == first
    assert oct(key.stat().st_mode & 0o777) == "0o600"


def test_master_connection_is_shared_and_closed(sshd):
    # unix socket paths are limited to ~100 characters: a short folder, not tmp_path
    with tempfile.TemporaryDirectory(prefix="cm", dir="/tmp") as short:
        _master_connection(sshd, Path(short))


def ssh_masters(folder: str | Path, timeout: float = 5) -> list[str]:
    """Master connections still running whose control socket is in `folder` (each listed by
    its command line), after up to `timeout` seconds for closing ones to exit."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for proc in Path("/proc").iterdir():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if cmdline.startswith("ssh ") and f"ControlPath={folder}" in cmdline:
                found.append(cmdline)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _master_connection(sshd, tmp_path):
    host = dataclasses.replace(sshd, control_path=str(tmp_path / "cm-%C"))
    assert ssh.start_master(host)
    sockets = list(tmp_path.glob("cm-*"))
    assert len(sockets) == 1
    proc = ssh.run(host, ["echo", "shared"], timeout=10)
    assert proc.communicate(timeout=30)[0] == "shared\n"
    ssh.stop_master(host)
    deadline = time.monotonic() + 5
    while list(tmp_path.glob("cm-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(tmp_path.glob("cm-*"))
    proc = ssh.run(host, ["echo", "direct"], timeout=10)  # no master: connects by itself
    assert proc.communicate(timeout=30)[0] == "direct\n"


def test_ctrl_c_as_the_master_detaches_closes_it(sshd, monkeypatch):
    """Ctrl-C just after `ssh -f` detached its master (into a session of its own, which the
    terminal's interrupt never reaches): start_master closes it before passing the interrupt
    on, so nothing stays connected (the gcp rehearsal's Ctrl-C test once found one left)."""
    real = subprocess.run

    def interrupted(argv, **kwargs):
        done = real(argv, **kwargs)
        if "-f" in argv:  # the master is up: the interrupt arrives now
            raise KeyboardInterrupt
        return done

    with tempfile.TemporaryDirectory(prefix="cm", dir="/tmp") as short:
        host = dataclasses.replace(sshd, control_path=str(Path(short) / "cm-%C"))
        monkeypatch.setattr(ssh.subprocess, "run", interrupted)
        try:
            with pytest.raises(KeyboardInterrupt):
                ssh.start_master(host)
            monkeypatch.undo()
            assert ssh_masters(short) == []
        finally:  # whatever the test found left
            monkeypatch.undo()
            ssh.stop_master(host)


FAKE_PGBENCH = """#!/bin/sh
# pgbench's stand-in: writes two log files under --log-prefix from the -f script
for a; do case "$a" in --log-prefix=*) p="${a#--log-prefix=}";; esac; done
args="$*"
while [ $# -gt 0 ]; do [ "$1" = -f ] && f="$2"; shift; done
cat "$f" > "$p.77"; echo t2 > "$p.77.1"; echo "$PGOPTIONS"; pwd; echo "$args"
"""


def one_command(tmp_path: Path) -> PgbenchCommand:
    """A repetition's command as bench builds it: the script, the log prefix in the row's log
    folder (its work folder)."""
    workdir = tmp_path / "results" / "runs" / "run01" / "pgbench-logs"
    workdir.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "workloads" / "read.sql"
    script.parent.mkdir(exist_ok=True)
    script.write_text("SELECT 1;\n")
    return PgbenchCommand(
        scripts=(script,),
        endpoint=Endpoint("10.0.0.12", 5433, "yugabyte", "yugabyte", role="tserver1"),
        clients=4,
        threads=2,
        seconds=5,
        variables={"rows": 1000},
        env={"PGOPTIONS": r"-c default_transaction_isolation=read\ committed", "HOME": "/x"},
        workdir=workdir,
        timeout=20,
        log_prefix=workdir / "c004_r1_tserver1",
        progress=1,
        random_seed=11,
    )


def test_one_command_renders_here_and_on_the_load_generator(sshd, tmp_path):
    """Issue 23, 2: the same command as argv on this machine and on the load generator (its
    script uploaded there over the real sshd, paths relative to the login directory)."""
    from ybscale.backends.loadgen import LoadgenRunner

    command = one_command(tmp_path)
    here = pgbench.argv(command, "/usr/lib/postgresql/15/bin/pgbench")
    runner = LoadgenRunner(sshd)
    rdir = runner.remote_dir(command.workdir)
    there = pgbench.argv(runner.remote(command), "pgbench")
    common = ["-n", "-M", "prepared", "-c", "4", "-j", "2", "-T", "5", "--max-tries=10",
              "--progress=1"]  # fmt: skip
    tail = ["-D", "rows=1000", "-h", "10.0.0.12", "-p", "5433", "-U", "yugabyte", "--log",
            "--failures-detailed"]  # fmt: skip
    assert here == ["/usr/lib/postgresql/15/bin/pgbench", *common,
                    "-f", str(tmp_path / "workloads" / "read.sql"), *tail,
                    f"--log-prefix={command.workdir / 'c004_r1_tserver1'}",
                    "--random-seed=11", "yugabyte"]  # fmt: skip
    assert there == ["pgbench", *common, "-f", f"{rdir}/scripts/read.sql", *tail,
                     f"--log-prefix={rdir}/c004_r1_tserver1", "--random-seed=11",
                     "yugabyte"]  # fmt: skip
    assert not Path(rdir).is_absolute()
    assert (Path.home() / rdir / "scripts" / "read.sql").read_text() == "SELECT 1;\n"
    shutil.rmtree(Path.home() / rdir)


def test_loadgen_runner_runs_the_command_and_collects_its_logs(sshd, tmp_path):
    """gcp: a command run on the 'load generator' (here sshd on 127.0.0.1), with the work folder
    relative to the login directory as on the VMs (a `cd` into it before the command once
    doubled every relative path: no script, no logs); only PG* variables travel."""
    from ybscale.backends.loadgen import LoadgenRunner

    fake = tmp_path / "pgbench"
    fake.write_text(FAKE_PGBENCH)
    fake.chmod(0o755)
    runner = LoadgenRunner(sshd)  # remote_root "ybscale": under the login directory
    command = one_command(tmp_path)
    workdir = command.workdir
    # another node's logs beside them (tserver10: a prefix that starts with tserver1's name)
    rdir = Path.home() / runner.remote_dir(workdir)
    rdir.mkdir(parents=True, exist_ok=True)
    (rdir / "c004_r1_tserver10.99").write_text("tserver10's\n")
    proc = runner.popen(command, str(fake))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == r"-c default_transaction_isolation=read\ committed"
    assert lines[1] == str(Path.home())  # the login directory (sshd's user is this one)
    assert lines[2] == " ".join(pgbench.argv(runner.remote(command), fake)[1:])
    assert not list(workdir.glob("c004_r1_tserver1.*")), "logs come back when collected"
    copied = runner.collect(command)
    assert (workdir / "c004_r1_tserver1.77").read_text() == "SELECT 1;\n"
    assert (workdir / "c004_r1_tserver1.77.1").read_text() == "t2\n"
    assert sorted(p.name for p in workdir.iterdir()) == ["c004_r1_tserver1.77",
                                                         "c004_r1_tserver1.77.1"]  # fmt: skip
    assert copied["files"] == 2 and copied["bytes_raw"] == 10 + 3
    assert copied["pgbench_seconds"] == 5 and runner.copied == copied
    # the other node's log neither cleared by this run's start nor copied with its logs
    assert (rdir / "c004_r1_tserver10.99").read_text() == "tserver10's\n"
    # explicit fetch of a single file, named by its local-style path
    (workdir / "c004_r1_tserver1.77").unlink()
    runner.fetch(workdir / "c004_r1_tserver1.77", workdir / "again.77")
    assert (workdir / "again.77").read_text() == "SELECT 1;\n"
    shutil.rmtree(Path.home() / runner.remote_dir(workdir))


def pgbench_log(path: Path, transactions: int, seed: int) -> bytes:
    """A per-transaction log as pgbench 15 writes one at some 20,000 tps (`--log
    --failures-detailed`: client, transaction, latency in us, script, epoch s, us, retries)."""
    import random

    rng = random.Random(seed)
    at, lines = 1_700_000_000.0, []
    for i in range(transactions):
        at += rng.expovariate(20_000)
        latency = int(rng.lognormvariate(7.5, 0.5))
        lines.append(f"{i % 64} {i // 64} {latency} 0 {int(at)} {int(at % 1 * 1e6)} 0\n")
    data = "".join(lines).encode()
    path.write_bytes(data)
    return data


def test_the_logs_come_back_compressed_through_a_throttled_tunnel(sshd, tmp_path):
    """Issue 59, items 4 and 5: a repetition's per-transaction logs come back to this machine
    through a stand-in of the IAP tunnel (tests/tunnel.py: a ProxyCommand carrying at most
    RATE bytes a second this way and counting them, as egress is billed): compressed on the
    load generator, they cross it as about a quarter of their bytes, in less time than their
    raw bytes would take, and come out here as they were written; the record says what was
    sent, which is what the tunnel carried (less the SSH sessions' own few kB)."""
    from tunnel import carried

    from ybscale.backends.loadgen import LoadgenRunner

    rate, counter = 2_000_000, tmp_path / "tunnel"
    relay = Path(__file__).resolve().parents[1] / "tunnel.py"
    host = dataclasses.replace(
        sshd, proxy_command=f"{sys.executable} {relay} {rate} {counter} %h %p"
    )
    runner = LoadgenRunner(host)
    command = one_command(tmp_path)
    rdir = Path.home() / runner.remote_dir(command.workdir)
    rdir.mkdir(parents=True, exist_ok=True)
    written = {
        name: pgbench_log(rdir / name, 100_000, seed)  # two threads' logs, 6.8 MB
        for seed, name in enumerate(("c004_r1_tserver1.4242", "c004_r1_tserver1.4242.1"))
    }
    raw = sum(map(len, written.values()))
    started = time.monotonic()
    copied = runner.collect(command)
    took = time.monotonic() - started
    through = carried(counter)
    try:
        for name, data in written.items():  # as pgbench wrote them, nothing else
            assert (command.workdir / name).read_bytes() == data
        assert sorted(p.name for p in command.workdir.iterdir()) == sorted(written)
        assert copied["bytes_raw"] == raw and copied["files"] == 2
        assert copied["bytes_sent"] <= through <= copied["bytes_sent"] + 100_000
        assert through < raw / 3, (through, raw)  # compressed before it crossed the tunnel
        assert took < raw / rate, (took, raw / rate)  # faster than the raw bytes could come
    finally:
        shutil.rmtree(rdir, ignore_errors=True)


def test_loadgen_facts_are_read_on_the_load_generator(sshd, tmp_path):
    """Issue 9, 4: cores (nproc) and pgbench version of the machine that runs pgbench."""

    from ybscale.backends.loadgen import LoadgenRunner

    fake = tmp_path / "pgbench"
    fake.write_text("#!/bin/sh\necho 'pgbench (PostgreSQL) 16.9'\n")
    fake.chmod(0o755)
    facts = LoadgenRunner(sshd).facts(str(fake))
    assert facts == {
        "cores": len(os.sched_getaffinity(0)),
        "pgbench_version": "pgbench (PostgreSQL) 16.9",
    }
