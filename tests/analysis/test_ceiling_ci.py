"""95 % intervals of the ceilings cover the true value in simulations with known noise."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from designs import seed_design_path

from ybscale.analysis.ceiling import empirical_ceiling, main, row_ceiling

CLIENTS = [1, 2, 4, 8, 16, 32]


def _coverage(true: np.ndarray, reps: int, sims: int = 200, noise: float = 0.05) -> float:
    rng = np.random.default_rng(2024)
    hits = 0
    for s in range(sims):
        samples = {
            c: true[i] * (1 + noise * rng.standard_normal(reps)) for i, c in enumerate(CLIENTS)
        }
        ci = empirical_ceiling(samples, n_boot=1000, seed=s)
        hits += ci["ci_low"] <= true.max() <= ci["ci_high"]
    return hits / sims


def test_empirical_interval_covers_a_clear_peak():
    true = np.array([10, 30, 60, 48, 40, 35], float) * 1000
    # binomial sd of a 95 % rate over 200 simulations is 1.5 points: allow about 3 sd
    assert 0.90 <= _coverage(true, reps=5) <= 0.995


def test_empirical_interval_covers_a_flat_top():
    true = np.array([10, 58, 60, 59, 57, 55], float) * 1000
    assert 0.90 <= _coverage(true, reps=5) <= 0.995


def test_usl_interval_covers_the_true_peak():
    n = np.array(CLIENTS + [64], float)
    sigma, kappa, lam = 0.05, 0.002, 1000.0
    true = lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))
    n_star = math.sqrt((1 - sigma) / kappa)
    x_star = lam * n_star / (1 + sigma * (n_star - 1) + kappa * n_star * (n_star - 1))
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(200):
        tps = true * (1 + 0.02 * rng.standard_normal(len(n)))
        data = row_ceiling("run01", pd.DataFrame({"clients": n, "tps": tps}))
        hits += data["usl"]["ci_low"] <= x_star <= data["usl"]["ci_high"]
    assert 0.88 <= hits / 200 <= 1.0


def test_fit_cli_writes_both_intervals(tmp_path):
    reps = pd.DataFrame(
        {"clients": [1, 1, 1, 2, 2, 2, 4, 4, 4], "tps": [10, 11, 9, 20, 21, 19, 15, 14, 16]}
    )
    thr = reps.groupby("clients", as_index=False)["tps"].mean()
    reps.to_csv(tmp_path / "r.csv", index=False)
    thr.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "c.json"
    args = ["fit", "--run", "run01", "--throughput", str(tmp_path / "t.csv")]
    assert main([*args, "--repetitions", str(tmp_path / "r.csv"), "--out", str(out)]) == 0
    emp = json.loads(out.read_text())["empirical"]
    assert emp["clients"] == 2 and emp["tps"] == 20
    assert emp["ci_low"] < 20 < emp["ci_high"]
    assert emp["lower_bound"] is False  # 4 clients, measured above the best, brackets it


def test_a_ceiling_at_the_largest_count_measured_is_a_lower_bound():
    thr = pd.DataFrame({"clients": [1, 2, 4], "tps": [10.0, 19.0, 30.0]})
    assert row_ceiling("run01", thr)["empirical"]["lower_bound"] is True
    thr.loc[2, "tps"] = 15.0
    assert row_ceiling("run01", thr)["empirical"]["lower_bound"] is False


def test_the_bottleneck_recorded_is_the_one_at_the_ceilings_count():
    thr = pd.DataFrame(
        {
            "clients": [1, 2, 4],
            "tps": [10.0, 19.0, 15.0],
            "util_node1": [0.3, 0.95, 0.97],
            "util_client": [0.5, 0.4, 0.3],
            "bottleneck": ["client", "node1", "node1"],
            "bottleneck_util": [0.5, 0.95, 0.97],
            "bound_tps": [20.0, 20.0, 15.5],
            "bottleneck_cpu_ms": [12.5, 12.5, 16.2],
        }
    )
    neck = row_ceiling("run01", thr)["bottleneck"]
    assert neck["resource"] == "node1" and neck["utilisation"] == 0.95
    assert neck["bound_tps"] == 20.0
    assert neck["utilisation_by_resource"] == {"node1": 0.95, "client": 0.4}
    assert row_ceiling("run01", thr[["clients", "tps"]])["bottleneck"] == {}


def test_the_latency_bound_is_the_best_count_within_the_p95_target():
    thr = pd.DataFrame(
        {
            "clients": [1, 2, 4, 8],
            "tps": [10.0, 19.0, 30.0, 33.0],
            "latency_p50_ms": [1.0, 1.1, 1.4, 2.5],
            "latency_p95_ms": [2.0, 2.2, 4.9, 9.0],
            "latency_p99_ms": [3.0, 3.3, 7.0, 15.0],
            "latency_n": [400, 760, 1200, 1320],
        }
    )
    data = row_ceiling("run01", thr, latency_slo_ms=5.0)
    assert data["latency_bound"] == {"slo_ms": 5.0, "tps": 30.0, "clients": 4, "p95_ms": 4.9}
    assert data["latency"] == {"p50_ms": 2.5, "p95_ms": 9.0, "p99_ms": 15.0, "n": 1320}
    assert row_ceiling("run01", thr, latency_slo_ms=1.0)["latency_bound"]["tps"] == "nan"
    assert row_ceiling("run01", thr)["latency_bound"] == {}  # no target, no bound


def test_the_latency_bound_can_be_the_studys_response(tmp_path):

    from ybscale.analysis.ceiling import collect

    thr = pd.DataFrame(
        {"clients": [1, 2], "tps": [10.0, 19.0], "latency_p50_ms": [1.0, 1.5]}
        | {"latency_p95_ms": [2.0, 6.0], "latency_p99_ms": [3.0, 9.0], "latency_n": [40, 76]}
    )
    files = []
    for i in range(1, 17):
        files.append(tmp_path / f"run{i:02d}.json")
        files[-1].write_text(json.dumps(row_ceiling(f"run{i:02d}", thr, latency_slo_ms=5.0)))
    out = collect(str(seed_design_path()), files, "latency_bound")
    assert (out["response"] == 10.0).all() and (out["latency_bound_clients"] == 1).all()
    assert (out["latency_p95_ms"] == 6.0).all()  # at the empirical ceiling (2 clients)
    files[6].write_text(json.dumps(row_ceiling("run07", thr, latency_slo_ms=1.0)))
    with pytest.raises(ValueError, match=r"\['run07'\] met the p95 target"):
        collect(str(seed_design_path()), files, "latency_bound")


def test_the_row_job_reads_its_tables_without_pandas_as_pandas_would(tmp_path):
    """`ceiling fit` (one job per row) reads throughput.csv and repetitions.csv as columns:
    the same values as pandas' read_csv (an empty cell NaN, text stays text), the same
    ceiling.json as from DataFrames, and no pandas import; a ragged line names file and line."""
    import subprocess
    import sys

    from ybscale.analysis.columns import read_columns

    thr = pd.DataFrame(
        {
            "clients": [1, 2, 4],
            "tps": [10.0, 19.0, 15.0],
            "util_node1": [0.3, np.nan, 0.97],
            "bottleneck": ["client", np.nan, "node1"],
            "bottleneck_util": [0.5, np.nan, 0.97],
            "bound_tps": [20.0, np.nan, 15.5],
            "bottleneck_cpu_ms": [12.5, np.nan, 16.2],
        }
    )
    reps = pd.DataFrame({"clients": [1, 1, 2, 2, 4, 4], "tps": [9, 11, 18, 20, 14, 16]})
    thr.to_csv(tmp_path / "t.csv", index=False)
    reps.to_csv(tmp_path / "r.csv", index=False)
    columns = read_columns(tmp_path / "t.csv")
    assert list(columns) == list(thr.columns)
    assert np.array_equal(columns["util_node1"], thr["util_node1"].to_numpy(), equal_nan=True)
    assert list(columns["bottleneck"]) == ["client", "", "node1"]
    from_frames = row_ceiling("run01", pd.read_csv(tmp_path / "t.csv"), reps)
    out = tmp_path / "c.json"
    argv = [sys.executable, "-X", "importtime", "-m", "ybscale.analysis.ceiling", "fit"]
    argv += ["--run", "run01", "--throughput", str(tmp_path / "t.csv")]
    argv += ["--repetitions", str(tmp_path / "r.csv"), "--out", str(out)]
    job = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert json.loads(out.read_text()) == json.loads(json.dumps(from_frames))
    assert json.loads(out.read_text())["bottleneck"]["resource"] == ""  # 2 clients: no name
    imported = {line.rsplit("|", 1)[-1].strip() for line in job.stderr.splitlines()}
    assert "numpy" in imported and "pandas" not in imported
    (tmp_path / "bad.csv").write_text("clients,tps\n1,10\n2\n")
    with pytest.raises(ValueError, match=r"bad.csv: line 3 has 1 fields, not 2"):
        read_columns(tmp_path / "bad.csv")


def test_a_best_count_of_one_repetition_takes_its_interval_from_its_seconds_or_has_none():
    """The economy sweep's single full repetition: the bootstrap draws it from its batch-means
    standard error (Student t, its degrees of freedom); without one, no interval at all rather
    than a point presented as exact."""
    from scipy import stats

    samples = {4: np.array([1000.0]), 8: np.array([600.0])}
    ci = empirical_ceiling(samples, n_boot=20000, single={4: (10.0, 3)})
    half = stats.t.ppf(0.975, 3) * 10.0
    assert ci["tps"] == 1000.0 and ci["clients"] == 4
    assert ci["ci_low"] == pytest.approx(1000 - half, rel=0.01)
    assert ci["ci_high"] == pytest.approx(1000 + half, rel=0.01)
    none = empirical_ceiling(samples)
    assert math.isnan(none["ci_low"]) and math.isnan(none["ci_high"])
