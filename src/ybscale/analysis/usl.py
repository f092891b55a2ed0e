"""Universal Scalability Law (Gunther): X(N) = λN / (1 + σ(N−1) + κN(N−1)).

`fit_usl` fits σ (contention), κ (coherency) and λ (throughput of one client) by bounded
non-linear least squares on relative residuals (X − X̂)/X (throughput noise grows with
throughput; unweighted fits let the largest N dominate and estimate σ poorly), and reports
the peak N* = sqrt((1−σ)/κ) with quality flags.

Superlinear data (throughput per client rising with N, e.g. 1 → 2 clients on 2 cores) is
fitted as Gunther does: σ may be negative (down to SIGMA_MIN), the fit is flagged
`superlinear`, and the denominator is kept positive over the measured range. The whole curve is
fitted; no points are dropped.
It never raises on small inputs: fewer than 3 distinct client counts give a "fit_failed" result.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ybscale.files import TableError, read_table

KAPPA_ZERO = 1e-12
# A parameter whose term adds less than this share to the denominator at the largest measured N
# cannot be told apart from 0 by the data (the optimiser stops near, not on, the bound).
NEGLIGIBLE = 1e-6
MIN_POINTS = 5
MIN_R2 = 0.9
TOL = {"ftol": 1e-12, "xtol": 1e-12, "gtol": 1e-12}
SIGMA_MIN = -1.0
FLAGS = ("extrapolated", "few_points", "poor_fit", "fit_failed", "superlinear")


@dataclass
class UslFit:
    """Fitted USL parameters, their standard errors, the peak and quality flags."""

    sigma: float
    kappa: float
    lam: float
    sigma_se: float
    kappa_se: float
    lam_se: float
    n_star: float
    x_n_star: float
    r2: float
    n_points: int
    flags: list[str] = field(default_factory=list)


def usl(n, sigma: float, kappa: float, lam: float):
    """USL throughput at concurrency n (scalar or array)."""
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def _model(n, sigma: float, kappa: float, lam: float):
    """USL with the denominator floored just above 0 (σ < 0 could make it vanish)."""
    n = np.asarray(n, dtype=float)
    return lam * n / np.maximum(1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0), 1e-9)


def peak(sigma: float, kappa: float, lam: float) -> tuple[float, float]:
    """(N*, X(N*)); with κ≈0 N* is infinite and X tends to λ/σ (or infinity if σ = 0)."""
    if not (math.isfinite(sigma) and math.isfinite(kappa) and math.isfinite(lam)):
        return math.nan, math.nan
    if kappa < KAPPA_ZERO:
        return math.inf, (lam / sigma if sigma > 0 else math.inf)
    n_star = math.sqrt(max(1.0 - sigma, 0.0) / kappa)
    return n_star, float(usl(n_star, sigma, kappa, lam))


def _start_values(n: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
    """Starting points: small σ/κ, and the linearised least squares N/X = a + b(N−1) + cN(N−1)."""
    n_min = n.min()
    lam0 = float(np.mean(x[n == n_min]) / n_min)
    starts = [np.array([0.01, 0.001, lam0])]
    design = np.column_stack([np.ones_like(n), n - 1.0, n * (n - 1.0)])
    coef, *_ = np.linalg.lstsq(design, n / x, rcond=None)
    a, b, c = coef
    if a > 0:
        lin = np.array([b / a, c / a, 1.0 / a])
        lin[0] = np.clip(lin[0], SIGMA_MIN + 0.01, 0.99)
        lin[1] = np.clip(lin[1], 1e-6, 0.99)
        starts.append(lin)
    return starts


def _curve_fit(n: np.ndarray, x: np.ndarray, p0: np.ndarray):
    """One bounded curve_fit; returns (params, pcov, ssr) or None on failure."""
    from scipy.optimize import OptimizeWarning, curve_fit  # the fit's alone: a chart needs none

    bounds = ([SIGMA_MIN, 0.0, 1e-9], [1.0, 1.0, np.inf])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            params, pcov = curve_fit(
                _model, n, x, p0=p0, sigma=x, bounds=bounds, x_scale="jac", max_nfev=20000, **TOL
            )
    except (RuntimeError, ValueError, np.linalg.LinAlgError):
        return None
    if np.any(1.0 + params[0] * (n - 1.0) + params[1] * n * (n - 1.0) <= 0):
        return None
    ssr = float(np.sum(((x - usl(n, *params)) / x) ** 2))
    return params, pcov, ssr


def _failed(n: np.ndarray, x: np.ndarray, flags: list[str]) -> UslFit:
    """Result when the model cannot be fitted: λ from the smallest N, the rest NaN."""
    lam = float(np.mean(x[n == n.min()]) / n.min()) if len(n) else math.nan
    nan = math.nan
    return UslFit(nan, nan, lam, nan, nan, nan, nan, nan, nan, len(n), flags + ["fit_failed"])


def _clean(clients, tps) -> tuple[np.ndarray, np.ndarray]:
    """Finite, positive (N, X) pairs as float arrays."""
    n = np.asarray(clients, dtype=float).ravel()
    x = np.asarray(tps, dtype=float).ravel()
    if n.shape != x.shape:
        raise ValueError(f"clients ({n.size}) and tps ({x.size}) differ in length")
    keep = np.isfinite(n) & np.isfinite(x) & (n > 0) & (x > 0)
    return n[keep], x[keep]


def fit_usl(clients, tps, with_cov: bool = False):
    """Fit the USL to throughput `tps` measured at concurrency `clients`.

    With `with_cov`, returns (fit, covariance of (σ, κ, λ) or None).
    """
    n, x = _clean(clients, tps)
    flags = ["few_points"] if len(n) < MIN_POINTS else []
    if len(np.unique(n)) < 3:
        return (_failed(n, x, flags), None) if with_cov else _failed(n, x, flags)
    results = [r for p0 in _start_values(n, x) if (r := _curve_fit(n, x, p0)) is not None]
    if not results:
        return (_failed(n, x, flags), None) if with_cov else _failed(n, x, flags)
    params, pcov, ssr = min(results, key=lambda r: r[2])
    sigma, kappa, lam = _snap_to_zero(*(float(v) for v in params), n.max())
    se = _standard_errors(pcov)
    sst = float(np.sum((x - x.mean()) ** 2))
    r2 = 1.0 - float(np.sum((x - usl(n, sigma, kappa, lam)) ** 2)) / sst if sst > 0 else math.nan
    n_star, x_n_star = peak(sigma, kappa, lam)
    if not (n.min() <= n_star <= n.max()):
        flags.append("extrapolated")
    if math.isfinite(r2) and r2 < MIN_R2:
        flags.append("poor_fit")
    if sigma < 0:
        flags.append("superlinear")
    fit = UslFit(sigma, kappa, lam, *se, n_star, x_n_star, r2, len(n), sorted(flags))
    return (fit, pcov) if with_cov else fit


def _snap_to_zero(sigma: float, kappa: float, lam: float, n_max: float):
    """Set σ or κ to exactly 0 when its term is negligible over the measured range."""
    base = 1.0 + sigma * (n_max - 1.0)
    if kappa * n_max * (n_max - 1.0) < NEGLIGIBLE * base:
        kappa = 0.0
    if abs(sigma) * (n_max - 1.0) < NEGLIGIBLE:
        sigma = 0.0
    return sigma, kappa, lam


def _standard_errors(pcov) -> tuple[float, float, float]:
    """sqrt(diag(pcov)), NaN where not estimable."""
    with np.errstate(invalid="ignore"):
        diag = np.diag(np.asarray(pcov, dtype=float))
    return tuple(float(math.sqrt(d)) if np.isfinite(d) and d >= 0 else math.nan for d in diag)


def format_fit(fit: UslFit) -> str:
    """Human-readable report of a fit."""
    lines = [
        f"sigma  = {fit.sigma:.6g} ± {fit.sigma_se:.3g}",
        f"kappa  = {fit.kappa:.6g} ± {fit.kappa_se:.3g}",
        f"lambda = {fit.lam:.6g} ± {fit.lam_se:.3g}",
        f"N*     = {fit.n_star:.6g}",
        f"X(N*)  = {fit.x_n_star:.6g}",
        f"R2     = {fit.r2:.4f}",
        f"points = {fit.n_points}",
        f"flags  = {', '.join(fit.flags) if fit.flags else 'none'}",
    ]
    return "\n".join(lines)


def read_points(path: Path, clients_col: str, tps_col: str) -> tuple[np.ndarray, np.ndarray]:
    """Read (clients, tps) from a CSV; SystemExit with a message naming the file and column."""
    import pandas as pd

    try:
        frame = read_table(path)
    except TableError as exc:
        raise SystemExit(f"ybscale usl: {exc}") from None
    columns = []
    for col in (clients_col, tps_col):
        if col not in frame.columns:
            found = ", ".join(map(str, frame.columns)) or "none"
            raise SystemExit(f"ybscale usl: {path}: missing column '{col}' (found: {found})")
        values = pd.to_numeric(frame[col], errors="coerce")
        bad = values.isna()
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            value = frame[col].iloc[line - 2]
            raise SystemExit(
                f"ybscale usl: {path}: column '{col}' line {line}: "
                + ("missing value" if pd.isna(value) else f"non-numeric value {value!r}")
            )
        columns.append(values.to_numpy(dtype=float))
    if len(frame) < 2:
        raise SystemExit(f"ybscale usl: {path}: need at least 2 points, found {len(frame)}")
    return columns[0], columns[1]


def main(argv: list[str] | None = None) -> int:
    """`ybscale usl --input FILE.csv`: fit the USL and print parameters, N* and flags."""
    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(prog="ybscale usl", description=cli_description(__doc__))
    parser.add_argument("--input", required=True, type=Path, help="CSV with clients and tps")
    parser.add_argument("--clients-column", default="clients")
    parser.add_argument("--tps-column", default="tps")
    args = parser.parse_args(argv)
    clients, tps = read_points(args.input, args.clients_column, args.tps_column)
    print(format_fit(fit_usl(clients, tps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
