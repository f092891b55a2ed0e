"""Universal Scalability Law fit: recovery of known parameters, flags, CLI."""

import math

import numpy as np
import pytest

from ybscale.analysis.usl import fit_usl, main, usl

N = np.array([1, 2, 4, 8, 16, 32, 64], dtype=float)


def _usl(n, sigma, kappa, lam):
    """Written out independently of ybscale.analysis.usl."""
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def test_recovers_known_parameters_with_noise():
    # σ is the weakly identified parameter: with 1% noise on 7 points its standard error is
    # ~3-5%, so the 5% tolerance holds for about 80% of seeds (seed 0 is one of them);
    # the 3 standard error check below is the seed-independent one.
    rng = np.random.default_rng(0)
    tps = _usl(N, 0.05, 0.002, 1000.0) * (1 + 0.01 * rng.standard_normal(N.size))
    fit = fit_usl(N, tps)
    assert abs(fit.sigma - 0.05) < 3 * fit.sigma_se
    assert abs(fit.kappa - 0.002) < 3 * fit.kappa_se
    assert fit.sigma == pytest.approx(0.05, rel=0.05)
    assert fit.kappa == pytest.approx(0.002, rel=0.05)
    assert fit.lam == pytest.approx(1000.0, rel=0.05)
    # N* = sqrt((1 - 0.05) / 0.002) = sqrt(475) = 21.79
    assert fit.n_star == pytest.approx(math.sqrt(475), rel=0.05)
    assert fit.x_n_star == pytest.approx(_usl(math.sqrt(475), 0.05, 0.002, 1000.0), rel=0.05)
    assert fit.r2 > 0.99
    assert fit.flags == []
    assert fit.n_points == 7
    assert all(se > 0 and math.isfinite(se) for se in (fit.sigma_se, fit.kappa_se, fit.lam_se))
    assert usl(8, fit.sigma, fit.kappa, fit.lam) == pytest.approx(
        _usl(8, fit.sigma, fit.kappa, fit.lam)
    )


def test_no_coherency_gives_infinite_peak():
    fit = fit_usl(N, _usl(N, 0.05, 0.0, 1000.0))
    assert fit.kappa == 0.0
    assert math.isinf(fit.n_star)
    assert fit.x_n_star == pytest.approx(1000.0 / 0.05, rel=1e-3)  # limit λ/σ
    assert "extrapolated" in fit.flags


def test_linear_scaling_has_infinite_throughput_limit():
    fit = fit_usl(N, 100.0 * N)
    assert fit.sigma == 0.0 and fit.kappa == 0.0
    assert math.isinf(fit.n_star) and math.isinf(fit.x_n_star)


def test_three_points_flag_few_points():
    n = np.array([1.0, 2.0, 4.0])
    fit = fit_usl(n, _usl(n, 0.05, 0.002, 1000.0))
    assert "few_points" in fit.flags
    assert "fit_failed" not in fit.flags


@pytest.mark.parametrize("count", [1, 2])
def test_one_or_two_points_do_not_raise(count):
    fit = fit_usl(N[:count], _usl(N[:count], 0.05, 0.002, 1000.0))
    assert {"few_points", "fit_failed"} <= set(fit.flags)
    assert math.isnan(fit.n_star)
    assert fit.lam == pytest.approx(1000.0)


def test_peak_beyond_measured_range_is_extrapolated():
    # N* = sqrt(0.99 / 1e-5) = 314.6, far beyond 64
    fit = fit_usl(N, _usl(N, 0.01, 1e-5, 500.0))
    assert fit.n_star == pytest.approx(math.sqrt(0.99 / 1e-5), rel=0.01)
    assert "extrapolated" in fit.flags


def test_poor_fit_flag():
    tps = np.array([100.0, 900.0, 150.0, 1000.0, 120.0, 950.0, 130.0])
    assert "poor_fit" in fit_usl(N, tps).flags


def test_cli_prints_peak_and_flags(tmp_path, capsys):
    path = tmp_path / "throughput.csv"
    lines = ["clients,tps"] + [f"{n:g},{_usl(n, 0.05, 0.002, 1000.0):.3f}" for n in N]
    path.write_text("\n".join(lines) + "\n")
    assert main(["--input", str(path)]) == 0
    out = capsys.readouterr().out
    assert "N*" in out and "flags  = none" in out
    n_star_line = next(line for line in out.splitlines() if line.startswith("N*"))
    assert float(n_star_line.split("=")[1]) == pytest.approx(math.sqrt(475), rel=1e-3)


def test_cli_custom_columns_and_flags(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("c,x\n1,100\n2,190\n4,340\n")
    main(["--input", str(path), "--clients-column", "c", "--tps-column", "x"])
    assert "few_points" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text, needle",
    [
        ("clients,latency\n1,2\n2,3\n", "missing column 'tps'"),
        ("clients,tps\n1,100\n2,abc\n", "column 'tps' line 3"),
        ("clients,tps\n1,100\n", "at least 2 points"),
    ],
)
def test_cli_errors_name_file_and_column(tmp_path, text, needle):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(["--input", str(path)])
    assert str(path) in str(exc.value.code) and needle in str(exc.value.code)


def test_cli_missing_file(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["--input", str(tmp_path / "nope.csv")])
    assert "nope.csv" in str(exc.value.code)


def test_superlinear_data_fitted_with_negative_sigma():
    # X(2)/X(1) = 2 / (1 + σ + 2κ) > 2 when σ < -2κ: throughput per client rises at first
    n = np.array([1, 2, 3, 4, 6, 8, 12, 16], dtype=float)
    tps = _usl(n, -0.2, 0.01, 1000.0)
    fit = fit_usl(n, tps)
    assert fit.sigma == pytest.approx(-0.2, rel=1e-3)
    assert fit.kappa == pytest.approx(0.01, rel=1e-3)
    assert "superlinear" in fit.flags and "poor_fit" not in fit.flags
    assert fit.n_star == pytest.approx(math.sqrt(1.2 / 0.01), rel=1e-3)
    assert fit.r2 > 0.999


def test_sublinear_data_is_not_flagged_superlinear():
    fit = fit_usl(N, _usl(N, 0.05, 0.002, 1000.0))
    assert "superlinear" not in fit.flags
