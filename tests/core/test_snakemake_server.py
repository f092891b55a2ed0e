"""The tests' Snakemake (snakemake_server.py) is `python -m snakemake` started by a fork: the
same exit codes, output, working folder and environment, and a run past its timeout is
killed with whatever it started."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from importlib.metadata import version

import pytest
from conftest import SNAKEMAKE, snakemake
from snakemake_server import SnakemakeServer

MOMENT = re.compile(r"\s*(Date:|Workflow ID:|\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]$)")
SNAKEFILE = """
import os, sys
rule all:
    output: "out.txt"
    shell: "echo $MARK {workflow.basedir} > {output}; echo job-said-hello >&2"

rule fails:
    shell: "exit 3"

rule sleeps:
    shell: "sleep 60"
"""


@pytest.fixture
def workflow(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    return tmp_path


def test_a_forked_run_sees_its_folder_and_environment_and_says_what_a_fresh_one_does(workflow):
    mark = uuid.uuid4().hex
    env = {**os.environ, "MARK": mark}
    assert SNAKEMAKE.serves(env)
    out = snakemake(workflow, env=env)
    assert out.returncode == 0, out.stderr
    assert (workflow / "out.txt").read_text().split() == [mark, str(workflow)]
    assert "job-said-hello" in out.stderr and "1 of 1 steps (100%) done" in out.stderr
    again = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "-n", "fails"],
        cwd=workflow, capture_output=True, text=True,
    )  # fmt: skip
    forked = snakemake(workflow, "-n", "fails")

    def plan(out):  # without the lines of the moment (dates, times, a fresh workflow id)
        return [x for x in out.stdout.splitlines() if not MOMENT.match(x)]

    assert forked.returncode == again.returncode == 0
    assert plan(forked) == plan(again) and "rule fails:" in forked.stdout


def test_a_failing_run_returns_snakemakes_exit_code_and_a_quick_one_its_output(workflow):
    out = snakemake(workflow, "fails")
    assert out.returncode == 1 and "Error in rule fails" in out.stderr
    for _ in range(3):  # replies that come at once are read one by one
        out = snakemake(workflow, "--version")
        assert (out.returncode, out.stdout.strip()) == (0, version("snakemake"))


def test_a_run_past_its_timeout_is_killed_with_its_jobs(workflow):
    mark = uuid.uuid4().hex
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        snakemake(workflow, "sleeps", env={**os.environ, "MARK": mark}, timeout=5)
    assert time.monotonic() - started < 30
    assert "rule sleeps" in caught.value.stderr
    time.sleep(0.5)
    left = []
    for proc in os.listdir("/proc"):
        try:
            environ = open(f"/proc/{proc}/environ", "rb").read()
        except OSError:
            continue
        if f"MARK={mark}".encode() in environ.split(b"\0"):
            left.append(proc)
    assert left == []
    assert snakemake(workflow, "-n", "fails").returncode == 0  # the server serves on


def test_the_server_keeps_no_marker_a_test_set_before_it_started(workflow, monkeypatch):
    """A test that marks its environment and then looks for processes carrying the mark
    must not find the server, which outlives the test."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv("YBSCALE_TEST_MARK", mark)
    server = SnakemakeServer()
    try:
        out = server.run(workflow, ["--cores", "1", "-n", "fails"], 60, None)
        assert out.returncode == 0, out.stderr
        environ = open(f"/proc/{server.proc.pid}/environ", "rb").read().split(b"\0")
        assert f"YBSCALE_TEST_MARK={mark}".encode() not in environ
        assert b"PATH=" + os.environ["PATH"].encode() in environ
    finally:
        server.close()
    assert server.proc is None
