"""The whole study through Snakemake on real PostgreSQL: results, staleness, clean-up.

Every test reads the session's shared tiny study (conftest.tiny_study) or changes its own copy
of it (tiny_study_copy)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import INTERRUPTIBLE, data_root_of, failed, planned, servers_under
from conftest import tiny_snakemake as snakemake

from ybscale.backends.local.cluster import reap_orphans


def test_tiny_study_end_to_end(tiny_study):
    work, root = tiny_study.work, tiny_study.root
    ceilings = pd.read_csv(work / "results/ceilings.csv")
    assert len(ceilings) == 16
    assert (ceilings["empirical_tps"] > 0).all()
    assert set(ceilings["empirical_clients"]) <= {1, 2}
    effects = pd.read_csv(work / "results/effects.csv")
    assert list(dict.fromkeys(effects["response"])) == ["ceiling", "throughput_per_dollar"]
    effects = effects[effects["response"] == "ceiling"]  # the main response's lines
    assert len(effects) == 15
    assert {"term", "alias", "effect", "coefficient", "sum_sq", "variation_pct"} <= set(effects)
    assert effects["variation_pct"].sum() == pytest.approx(100, abs=1e-6)
    # each effect is arithmetic on the measured responses: recompute one from ceilings.csv, on
    # the scale the analysis chose and recorded (multiplicative: log10 of the response)
    a = effects.set_index("term").loc["A", "effect"]
    scale = effects["model"].iloc[0]
    assert scale in {"additive", "multiplicative"}
    y = np.log10(ceilings["response"]) if scale == "multiplicative" else ceilings["response"]
    means = y.groupby(ceilings["A"]).mean()
    assert a == pytest.approx(means[1] - means[-1])
    run07 = pd.read_csv(work / "results/runs/run07/throughput.csv")
    assert list(run07["clients"]) == [1, 2]
    assert (run07["transactions"] > 0).all()
    assert (work / "results/runs/run07/pgbench-logs").is_dir()
    per_second = pd.read_csv(work / "results/runs/run07/per_second.csv")  # what the chart draws
    assert list(per_second) == ["run", "clients", "repetition", "second", "tps"]
    assert set(per_second["run"]) == {"run07"} and (per_second["tps"] >= 0).all()
    progress = (work / "results/logs/measure/run07.log").read_text()
    assert "repetition 1: " in progress and "no interval yet" in progress  # one repetition
    assert "±inf" not in progress
    assert servers_under(root) == []


def test_report_is_one_offline_file_with_every_chart_and_caption(tiny_study):
    work = tiny_study.work
    assert tiny_study.report.returncode == 0, failed(tiny_study.report)
    html = (work / "report.html").read_text()
    for chart in [
        "pareto.svg",
        "half_normal.svg",
        "throughput.svg",
        "interaction_AB.svg",
        "residuals_qq.svg",
        "effects.csv",
        "anova.csv",
        "sign_table.csv",
    ]:
        assert chart in html, chart
    for caption in sorted((work / "report").glob("*.rst")):
        if caption.name == "workflow.rst":
            continue
        phrase = caption_phrase(caption.read_text())
        assert phrase in html, f"{caption.name}: {phrase!r} is not in the report"
    assert not re.search(r"<script[^>]+src=[\"']https?://", html)


def caption_phrase(text: str) -> str:
    """The longest run of plain words in a caption (no markup, no template): what any
    rendering of the caption must contain verbatim."""
    text = re.sub(r"\{[%{#].*?[%}#]\}", "\n", text)
    runs = re.findall(r"[A-Za-z][A-Za-z ,;]{20,}[A-Za-z]", text)
    return max(runs, key=len)


def test_nothing_changed_nothing_runs(tiny_study):
    """The study was run by its mission command (`results/effects.csv`, conftest): `all` (the
    default target, every output) then has nothing left to do. Comparing every
    job's params with the recorded ones imports no pandas (ybscale.param_records); the
    settings and the design passed their schemas in the first dry run, so the second does not
    import jsonschema (ybscale.validation)."""
    out = snakemake(tiny_study.work, "-n", "all")
    assert "Nothing to be done" in out.stdout + out.stderr
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}  # `python -X importtime`
    out = snakemake(tiny_study.work, "-n", "all", env=env)
    assert "Nothing to be done" in out.stdout + out.stderr
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in out.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "snakemake.persistence" in imported and "ybscale.param_records" in imported
    assert "pandas" not in imported
    assert "ybscale.validation" in imported and "jsonschema" not in imported


def test_params_go_through_pandas_exactly_when_pandas_is_imported(monkeypatch):
    """A DataFrame param means pandas is imported: then Snakemake's own pandas path, else its
    builtin serialiser (ybscale.param_records)."""
    from snakemake.persistence import PersistenceBase

    from ybscale.param_records import compare_params_without_importing_pandas

    assert compare_params_without_importing_pandas()
    chooser = PersistenceBase._serialize_param.fget
    record = type("Record", (), {"_serialize_param_pandas": "pandas", "_serialize_param_builtin":
                                 "builtin"})()  # fmt: skip
    assert chooser(record) == "pandas"  # this process has pandas
    monkeypatch.delitem(sys.modules, "pandas")
    assert chooser(record) == "builtin"


def test_a_touch_reruns_nothing_an_analysis_edit_reanalyses_a_measuring_edit_remeasures(
    tiny_study_copy,
):
    """What a checkout or a fresh clone does to the files (new times, same content) re-runs
    nothing; an edit of the analysing code (a new ybscale: issue 58) re-runs the analysis,
    findings and report rules and measures nothing; then an edit of the code that measures
    re-measures every row. All on the copy's own package (PYTHONPATH), one copy: each dry run
    comes after the one before (nothing runs)."""
    work = tiny_study_copy
    env = {**os.environ, "PYTHONPATH": str(work / "src")}
    for path in [*(work / "src").rglob("*.py"), *(work / "workloads").glob("*.sql")]:
        path.touch()
    for path in (work / "rules").glob("*"):
        path.touch()
    assert planned(work, "results/effects.csv", env=env) == {}
    findings = work / "src" / "ybscale" / "report" / "findings.py"
    findings.write_text(findings.read_text() + "# an edit\n")
    jobs = planned(work, "results/effects.csv", env=env)
    analysis = {"ceilings", "analyze", "charts", "findings", "design_page", "effects"}
    assert analysis <= set(jobs), jobs
    assert jobs["ceiling"] == {f"run{i:02d}" for i in range(1, 17)}  # each row's fit
    assert not {"measure", "publish", "cluster_up", "cluster_down", "design"} & set(jobs), jobs
    bench = work / "src" / "ybscale" / "measure" / "bench.py"
    bench.write_text(bench.read_text() + "# an edit\n")
    assert planned(work, "results/effects.csv", env=env)["measure"] == {
        f"run{i:02d}" for i in range(1, 17)
    }


def test_a_changed_level_and_a_changed_workload_rerun_exactly_their_rows(tiny_study_copy):
    """Two edits, one dry run: isolation's +1 level (factor D) and the read script. Exactly the
    rows at D = +1 or reading (B = -1) are planned, 12 of 16: an edit that re-ran every row, the
    wrong half or none of its own would plan another set."""
    work = tiny_study_copy
    design = work / "config" / "design.yaml"
    original = design.read_text()
    changed = original.replace(
        '["read committed", "repeatable read"]', '["read committed", "serializable"]'
    )
    assert changed != original
    design.write_text(changed)
    script = work / "workloads" / "read.sql"
    script.write_text(script.read_text() + "-- edited\n")
    jobs = planned(work, "results/effects.csv")
    signs = pd.read_csv(work / "results/design/sign_table.csv")
    expected = set(signs.loc[(signs["D"] == 1) | (signs["B"] == -1), "run"])
    assert len(expected) == 12
    assert jobs["measure"] == expected


def test_forcing_one_row_plans_only_that_row(tiny_study):
    jobs = planned(tiny_study.work, "-f", "results/runs/run07/throughput.csv")
    assert jobs["measure"] == {"run07"}


def test_failed_findings_leave_the_effects_in_place(tiny_study_copy):
    """The findings are a rule of their own: when they fail, effects.csv stays as it was."""
    work = tiny_study_copy
    effects = (work / "results/effects.csv").read_bytes()
    meta = work / "results/runs/run01/measurement.json"
    stat = meta.stat()
    meta.write_text("{")  # unreadable, with its old time: only the forced findings job runs
    os.utime(meta, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    out = snakemake(work, "-f", "results/findings.md", check=False)
    assert out.returncode != 0, failed(out)
    assert "rule findings" in out.stdout + out.stderr
    assert not (work / "results/findings.md").exists()
    assert (work / "results/effects.csv").read_bytes() == effects


def test_unknown_row_is_a_clear_error(tiny_study):
    out = snakemake(tiny_study.work, "-n", "results/runs/run99/throughput.csv", check=False)
    assert out.returncode != 0
    assert "no design row 'run99'" in out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("keep_going", [False, True])
def test_a_failed_row_releases_its_cluster_with_and_without_keep_going(tiny_study_copy, keep_going):
    """Issue 20: a row that fails is released by its own cluster_down job before the
    workflow ends (released.json is written by that job only), with -k and without; then its
    publish fails naming the row and its log, and the next run measures it again. The same run
    checks what a failing row leaves: its log says why, no throughput, no server."""
    work = tiny_study_copy
    root = data_root_of(work)
    signs = pd.read_csv(work / "results/design/sign_table.csv").set_index("run")
    read, write = signs.index[signs["B"] < 0][0], signs.index[signs["B"] > 0][0]
    started = time.time()
    targets = [f"results/runs/{run}/throughput.csv" for run in (read, write)]
    script = work / "workloads/read.sql"
    original = script.read_text()
    script.write_text("SELECT * FROM no_such_table WHERE k < :rows;\n")
    args = ["-k"] if keep_going else []
    out = snakemake(work, *args, "-f", *targets, check=False)
    script.write_text(original)
    output = out.stdout + out.stderr
    assert out.returncode != 0, output[-3000:]
    released = work / f"results/clusters/{read}/released.json"
    assert released.stat().st_mtime > started, output[-3000:]
    assert json.loads(released.read_text())["stopped"], released.read_text()
    assert output.index(f"cluster={read}") < output.index("Error in rule publish")
    assert f"{read}: the measurement failed: " in output and "no_such_table" in output
    assert f"(log: results/logs/measure/{read}.log)" in output
    assert not (work / f"results/runs/{read}/status.json").exists()  # measured again next run
    log = (work / f"results/logs/measure/{read}.log").read_text()
    assert "FAILED" in log and "no_such_table" in log
    assert not (work / f"results/runs/{read}/throughput.csv").exists()
    if keep_going:  # the other row went on and was published
        assert (work / f"results/runs/{write}/throughput.csv").stat().st_mtime > started
    assert servers_under(root) == []
    assert planned(work, "results/effects.csv")["measure"] == {read}


@pytest.mark.slow
def test_a_cluster_the_targets_leave_up_is_released_when_the_run_succeeds(tiny_study_copy):
    """A target that needs no cluster_down (the cluster's endpoints) ends with nothing up."""
    work = tiny_study_copy
    root = data_root_of(work)
    out = snakemake(work, "results/clusters/run05/endpoints.json")
    assert "run05: released (left up by this run)" in out.stdout + out.stderr
    assert servers_under(root) == []
    assert not (work / "results/clusters/run05/endpoints.json").exists()


HOME = r"/ybscale-(\d+-[0-9a-f]{8})/"  # a local cluster's folder (LocalBackend.up)


def first_and_last_planned(work) -> tuple[str, str]:
    """The runs measured first and last in the planned order (results/run_order.csv)."""
    order = pd.read_csv(work / "results/run_order.csv").sort_values("planned")
    return order["run"].iloc[0], order["run"].iloc[-1]


def wait_until_measuring(proc: subprocess.Popen, log: Path) -> None:
    """Until a row's measuring log shows a repetition, the workflow `proc` still running."""
    deadline = time.monotonic() + 180
    while not (log.is_file() and "repetition" in log.read_text()):
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "no measurement started"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["Ctrl-C", "SIGTERM"])
def test_an_interrupted_run_stops_the_clusters_up_between_jobs(tiny_study_copy, how):
    """One cluster is up and idle between jobs (a target brought it up; nothing measures on it)
    while another row is measured. Ctrl-C (SIGINT to every process of the terminal) or SIGTERM
    to Snakemake alone (it lets the running job finish) stops both: `onerror:` releases what
    the endpoints say is up, and the servers this workflow owns. Ctrl-C lands inside the
    measurement (a longer one: more client counts, repetitions and seconds), which is
    interrupted: its attempt is not a result."""
    work = tiny_study_copy
    root = data_root_of(work)
    idle, measured = first_and_last_planned(work)  # cluster_up of `idle` runs first
    log = work / f"results/logs/measure/{measured}.log"
    log.unlink()
    config = "config/test.yaml"
    if how == "Ctrl-C":
        config = "config/long.yaml"
        long = yaml.safe_load((work / "config" / "test.yaml").read_text())
        long["measurement"].update(clients=[1, 2, 4], max_clients=4, repetitions=5, seconds=2)
        (work / config).write_text(yaml.safe_dump(long))
    proc = subprocess.Popen(
        [*INTERRUPTIBLE, sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
         config, "-f", f"results/clusters/{idle}/endpoints.json",
         f"results/runs/{measured}/throughput.csv"],
        cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_until_measuring(proc, log)
        assert (work / f"results/clusters/{idle}/endpoints.json").exists()
        homes = {home for s in servers_under(root) for home in re.findall(HOME, s)}
        assert len(homes) == 2, servers_under(root)  # two clusters up
        if how == "Ctrl-C":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = proc.stdout.read()
    assert servers_under(root) == [], output[-3000:]
    assert not list(Path(root).glob("ybscale-*/node*"))
    assert f"{idle}: released (left up by this run)" in output, output[-3000:]
    status = work / f"results/runs/{measured}/status.json"
    if how == "SIGTERM":  # graceful: the running attempt finished, nothing new started
        assert json.loads(status.read_text())["status"] == "ok"
    else:  # the row was really interrupted: its status was removed when it started, never written
        assert "KeyboardInterrupt" in output, output[-3000:]
        assert not status.exists(), output[-3000:]


@pytest.mark.slow
def test_after_a_hard_kill_mid_measure_the_plain_command_resumes_the_study(tiny_study_copy):
    """kill -9 of Snakemake's process group while a row measures (the OOM killer, a closed
    laptop) leaves its servers running, Snakemake's locks and the row's incomplete outputs. The
    plain command then stops those servers as it starts, before it takes the locks, and
    completes the study: no --unlock, no --rerun-incomplete to know."""
    work = tiny_study_copy
    root = data_root_of(work)
    _, run = first_and_last_planned(work)
    log = work / f"results/logs/measure/{run}.log"
    log.unlink()
    command = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile"]
    command += ["config/test.yaml", "-f", f"results/runs/{run}/throughput.csv"]  # measured again
    proc = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        wait_until_measuring(proc, log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the workflow and its jobs: no clean-up runs
        proc.wait()
    left = {home for s in servers_under(root) for home in re.findall(HOME, s)}
    try:
        assert len(left) == 1, servers_under(root)  # the row's cluster, still serving
        assert list((work / ".snakemake/locks").glob("*.lock"))  # the killed run's locks
        again = snakemake(work, check=False, timeout=900)  # what a user types
    finally:
        reap_orphans(root)  # whatever the run left (none, unless it failed)
    assert again.returncode == 0, failed(again)
    output = again.stdout + again.stderr
    assert f"ybscale-{left.pop()}: servers stopped" in output, output[-3000:]
    assert ".snakemake/locks: removed" in output, output[-3000:]
    assert json.loads((work / f"results/runs/{run}/status.json").read_text())["status"] == "ok"
    assert servers_under(root) == []
    assert planned(work) == {}  # the study is complete: nothing left to run
