"""Throughput ceilings: per row (empirical max and USL fit) and the table that feeds the effects."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ybscale.analysis.columns import first_line, read_columns, row_count
from ybscale.analysis.usl import UslFit, fit_usl, peak
from ybscale.measure import buffers

if TYPE_CHECKING:
    import pandas as pd

# The per-row job reads a row's tables (throughput.csv, repetitions.csv) as columns
# (`read_columns`: a dict of numpy arrays), without pandas; the functions take DataFrames too.

BUFFER_FIELDS = buffers.SUMMARY  # where the reads were served (issue 48)
USL_FIELDS = ("sigma", "kappa", "lam", "n_star", "x_n_star", "r2", "ci_low", "ci_high")
CONFIDENCE = 0.95
N_BOOT = 4000


def full_repetitions(repetitions) -> np.ndarray:
    """Which repetitions count for the ceiling: all but the economy sweep's probes and the
    runs set aside as disturbed (`set_aside`)."""
    keep = np.logical_not(_flag(repetitions, "probe"))
    return keep & np.logical_not(set_aside(repetitions))


def set_aside(repetitions) -> np.ndarray:
    """The runs set aside (measured again: others took too much of the machine)."""
    if "set_aside" not in repetitions:
        return np.zeros(len(np.asarray(repetitions["clients"])), dtype=bool)
    return np.array([_text(v) != "" for v in repetitions["set_aside"]], dtype=bool)


def _flag(repetitions, column: str) -> np.ndarray:
    """A true/false column as booleans (read back as text or bool), all false when absent."""
    if column not in repetitions:
        return np.zeros(len(np.asarray(repetitions["clients"])), dtype=bool)
    return np.array([str(v) == "True" for v in repetitions[column]], dtype=bool)


def _text(value) -> str:
    """A text cell as read back: NaN (pandas' empty cell) is ''."""
    return "" if isinstance(value, float) and math.isnan(value) else str(value)


def samples_by_clients(repetitions) -> dict[int, np.ndarray]:
    """Per client count (ascending), the throughput of every repetition (repetitions.csv:
    clients, tps); the economy sweep's probes only rank counts and are left out."""
    full = full_repetitions(repetitions)
    clients = np.asarray(repetitions["clients"], dtype=float)[full]
    tps = np.asarray(repetitions["tps"], dtype=float)[full]
    return {int(c): tps[clients == c] for c in np.unique(clients[np.isfinite(clients)])}


def measuring_time(repetitions) -> dict:
    """The row's measuring time from repetitions.csv: pgbench's seconds (`duration_s`) of its
    full repetitions and of its probes, and how many of each."""
    aside = set_aside(repetitions)
    probes = _flag(repetitions, "probe") & ~aside
    full = full_repetitions(repetitions)
    seconds = np.asarray(repetitions["duration_s"], dtype=float)
    kept_disturbed = _flag(repetitions, "disturbed") & ~aside
    return {
        "seconds": float(seconds.sum()),
        "repetitions": int(full.sum()),
        "repetition_seconds": float(seconds[full].sum()),
        "probes": int(probes.sum()),
        "probe_seconds": float(seconds[probes].sum()),
        "set_aside": int(aside.sum()),
        "set_aside_seconds": float(seconds[aside].sum()),
        "kept_disturbed": int(kept_disturbed.sum()),
    }


def single_errors(repetitions) -> dict[int, tuple[float, int]]:
    """Per client count measured by one (full) repetition: its batch-means standard error and
    degrees of freedom (repetitions.csv tps_se, tps_se_df), where recorded."""
    if "tps_se" not in repetitions:
        return {}
    full = full_repetitions(repetitions)
    clients = np.asarray(repetitions["clients"], dtype=float)[full]
    se = np.asarray(repetitions["tps_se"], dtype=float)[full]
    df = np.asarray(repetitions["tps_se_df"], dtype=float)[full]
    out = {}
    for c in np.unique(clients[np.isfinite(clients)]):
        idx = np.flatnonzero(clients == c)
        if len(idx) == 1 and math.isfinite(se[idx[0]]) and df[idx[0]] >= 1:
            out[int(c)] = (float(se[idx[0]]), int(df[idx[0]]))
    return out


def empirical_ceiling(
    samples: dict[int, np.ndarray],
    confidence: float = CONFIDENCE,
    n_boot: int = N_BOOT,
    seed: int = 0,
    single: dict[int, tuple[float, int]] | None = None,
) -> dict:
    """Largest mean throughput over client counts, with a bootstrap interval.

    Parametric bootstrap over the repetitions: every draw replaces each client count's mean by
    mean + s/sqrt(n)·T(n−1) (s, n of its repetitions) and takes the maximum; the interval is
    the percentile interval of those maxima. The Student-t draw keeps the coverage of a t
    interval with 3–5 repetitions, where resampling the repetitions themselves (only 10
    distinct resamples of 3 values) gives intervals far too narrow. A client count with one
    repetition draws from its own seconds' spread (`single`: batch-means standard error and
    degrees of freedom, `precision.batch_means`), or, without it, is taken as exact.
    """
    counts = sorted(samples)
    means = np.array([np.mean(samples[c]) for c in counts])
    rng = np.random.default_rng(seed)
    draws = np.tile(means, (n_boot, 1))
    for j, c in enumerate(counts):
        x = np.asarray(samples[c], dtype=float)
        if len(x) >= 2 and x.std(ddof=1) > 0:
            se = x.std(ddof=1) / math.sqrt(len(x))
            draws[:, j] += se * rng.standard_t(len(x) - 1, size=n_boot)
        elif len(x) == 1 and c in (single or {}):
            se, df = single[c]
            draws[:, j] += se * rng.standard_t(df, size=n_boot)
    maxima = draws.max(axis=1)
    tail = (1 - confidence) / 2
    best = int(np.argmax(means))
    known = len(samples[counts[best]]) >= 2 or counts[best] in (single or {})
    return {  # no interval where the best count's spread is unknown (one repetition, no seconds)
        "tps": float(means[best]),
        "clients": int(counts[best]),
        "ci_low": float(np.quantile(maxima, tail)) if known else math.nan,
        "ci_high": float(np.quantile(maxima, 1 - tail)) if known else math.nan,
    }


def usl_interval(fit: UslFit, pcov, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Delta-method interval of X(N*) from the fit's covariance (t with n − 3 df)."""
    cov = np.asarray(pcov, dtype=float) if pcov is not None else None
    dof = fit.n_points - 3
    if cov is None or cov.shape != (3, 3) or dof < 1 or not math.isfinite(fit.x_n_star):
        return math.nan, math.nan
    theta = np.array([fit.sigma, fit.kappa, fit.lam])
    grad = np.zeros(3)
    for i in range(3):
        h = 1e-6 * max(abs(theta[i]), 1e-9)
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (peak(*up)[1] - peak(*down)[1]) / (2 * h)
    var = float(grad @ cov @ grad)
    if not (math.isfinite(var) and var >= 0):
        return math.nan, math.nan
    # the t quantile from scipy.special, imported here: a row with too few counts for this
    # interval never pays for scipy's import (about half of a fitting job's start)
    from scipy.special import stdtrit

    half = float(stdtrit(dof, 0.5 + confidence / 2)) * math.sqrt(var)
    return fit.x_n_star - half, fit.x_n_star + half


def latency_bound(throughput, slo_ms: float | None) -> dict:
    """The largest mean tps among the client counts whose p95 latency is within `slo_ms`
    ({} without percentiles or a target; tps NaN when no count meets it)."""
    if slo_ms is None or "latency_p95_ms" not in throughput:
        return {}
    col = "tps_mean" if "tps_mean" in throughput else "tps"
    p95 = np.asarray(throughput["latency_p95_ms"], dtype=float)
    tps = np.asarray(throughput[col], dtype=float)
    within = np.flatnonzero((p95 <= slo_ms) & np.isfinite(tps))
    if within.size == 0:
        return {"slo_ms": slo_ms, "tps": "nan", "clients": None, "p95_ms": "nan"}
    best = int(within[np.argmax(tps[within])])  # the first of equal maxima
    return {
        "slo_ms": slo_ms,
        "tps": float(tps[best]),
        "clients": int(np.asarray(throughput["clients"])[best]),
        "p95_ms": float(p95[best]),
    }


def latency_at(throughput, clients: int) -> dict:
    """p50/p95/p99 (ms) and their sample size at `clients` ({} without percentiles)."""
    cols = ["latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_n"]
    if not set(cols) <= set(throughput):
        return {}
    at = first_line(throughput, "clients", clients)
    return {c.removeprefix("latency_"): _finite(float(np.asarray(throughput[c])[at])) for c in cols}


def latency_at_load(throughput, ceiling_tps: float, load: dict | None, percentile: int) -> dict:
    """The `percentile` latency (ms) at the reference load (analysis.latency_load): a client
    count (``{"clients": 8}``), or a fraction of the row's own ceiling (``{"fraction": 0.5}``:
    the smallest client count whose mean throughput reaches that share of `ceiling_tps`).
    ``{"percentile", "clients", "ms", "load"}`` (ms NaN when the row did not measure the count
    or has no percentiles; `load` in words); {} without a reference load."""
    if not load:
        return {}
    column = f"latency_p{percentile}_ms"
    if "clients" in load:
        clients = int(load["clients"])
        words = f"p{percentile} at {clients} clients"
    else:
        fraction = float(load["fraction"])
        col = "tps_mean" if "tps_mean" in throughput else "tps"
        tps = np.asarray(throughput[col], dtype=float)
        counts = np.asarray(throughput["clients"])
        reach = counts[tps >= fraction * ceiling_tps]
        clients = int(reach.min()) if reach.size else None
        words = f"p{percentile} at {fraction:.0%} of the row's ceiling"  # the count reaching it
    out = {"percentile": percentile, "clients": clients, "ms": "nan", "load": words}
    measured = np.asarray(throughput["clients"]) == clients
    if column in throughput and measured.any():
        out["ms"] = _finite(float(np.asarray(throughput[column], dtype=float)[measured][0]))
    return out


def row_ceiling(
    run: str,
    throughput,
    repetitions=None,
    latency_slo_ms: float | None = None,
    latency_load: dict | None = None,
    latency_percentile: int = 95,
) -> dict:
    """Empirical ceiling (largest mean tps, where, 95 % interval) and the USL fit with its own.

    `throughput` and `repetitions`: columns (`read_columns`) or DataFrames. Without
    `repetitions` (older results) the throughput lines are the only samples and the empirical
    interval is NaN.
    """
    col = "tps_mean" if "tps_mean" in throughput else "tps"
    no_repetitions = repetitions is None or row_count(repetitions) == 0
    if not no_repetitions:
        samples = samples_by_clients(repetitions)
    else:
        pairs = zip(throughput["clients"], throughput[col], strict=True)
        samples = {int(c): np.array([t]) for c, t in pairs}
    empirical = empirical_ceiling(
        samples, single=None if no_repetitions else single_errors(repetitions)
    )
    largest = max(np.asarray(throughput["clients"], dtype=float), default=max(samples))
    empirical["lower_bound"] = empirical["clients"] == max(int(largest), max(samples))
    if no_repetitions:
        empirical.update(ci_low=math.nan, ci_high=math.nan)
    fit, pcov = fit_usl(
        np.asarray(throughput["clients"], dtype=float),
        np.asarray(throughput[col], dtype=float),
        with_cov=True,
    )
    usl = {k: _finite(v) for k, v in dataclasses.asdict(fit).items()}
    low, high = usl_interval(fit, pcov)
    usl.update(ci_low=_finite(low), ci_high=_finite(high))
    return {
        "run": run,
        "measuring": {}
        if no_repetitions or "duration_s" not in repetitions
        else measuring_time(repetitions),
        "empirical": {k: _finite(v) for k, v in empirical.items()},
        "bottleneck": bottleneck_at(throughput, empirical["clients"]),
        "latency": latency_at(throughput, empirical["clients"]),
        "latency_bound": latency_bound(throughput, latency_slo_ms),
        "latency_at_load": latency_at_load(
            throughput, float(empirical["tps"]), latency_load, latency_percentile
        ),
        "usl": usl,
        "method": {
            "empirical": "max over client counts of the mean tps of the repetitions (the "
            "economy sweep's probes excluded); 95% interval: parametric (Student t) bootstrap "
            "over the repetitions (a count with one: over its seconds, batch means); "
            "lower_bound: the max is at the largest count measured (the curve may still rise)",
            "usl": "scipy curve_fit of X(N) = lam*N / (1 + sigma(N-1) + kappa*N(N-1)), "
            "sigma < 0 allowed (superlinear); 95% interval of X(N*): delta method, fit covariance",
            "bottleneck": "at the empirical ceiling's client count: the resource with the largest "
            "service demand D = U/X (U: CPU time over the counted seconds / their length x the "
            "resource's CPUs, mean over the repetitions); bound_tps = X/U of that resource "
            "(Jain ch. 33); host (the whole machine) is context, never the bottleneck",
            "latency": "at the empirical ceiling's client count: percentiles (numpy, linear) of "
            "every successful transaction's latency in the counted seconds of its repetitions, "
            "from pgbench's per-transaction log; n: how many",
            "latency_bound": "the largest mean tps of a client count whose p95 latency is "
            "within analysis.latency_slo_ms",
            "latency_at_load": "the analysis.latency_percentile latency of the client count "
            "analysis.latency_load names (a count, or the smallest reaching a fraction of the "
            "empirical ceiling), as measured there (the same percentiles as latency)",
        },
    }


def bottleneck_at(throughput, clients: int) -> dict:
    """The bottleneck columns of the line at `clients` ({} when the row has none)."""
    if "bottleneck" not in throughput:
        return {}
    at = first_line(throughput, "clients", clients)
    line = {c: np.asarray(throughput[c])[at] for c in throughput}
    util = {
        c.removeprefix("util_"): _finite(float(v)) for c, v in line.items() if c.startswith("util_")
    }
    name = line["bottleneck"]
    return {
        "resource": name if isinstance(name, str) else "",
        "utilisation": _finite(float(line["bottleneck_util"])),
        "bound_tps": _finite(float(line["bound_tps"])),
        "cpu_ms_per_transaction": _finite(float(line["bottleneck_cpu_ms"])),
        "utilisation_by_resource": util,
        **{k: _finite(float(line[k])) for k in BUFFER_FIELDS if k in line},
    }


def _finite(value):
    """JSON has no inf/nan: write them as strings so nothing is silently dropped."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def collect(
    design_path: str,
    ceiling_files: list[Path],
    choice: str,
    prices: dict[str, dict] | None = None,
) -> pd.DataFrame:
    """One line per run: its signs, both ceilings and the chosen response (``response``, and
    the same as ``ceiling``); with `prices` (run -> ``{"price_per_hour", "price_basis"}``,
    `ybscale.study.hourly_prices`) the price used and ``throughput_per_dollar``: the ceiling
    divided by the cluster's price per hour, its interval the ceiling's divided by it."""
    import pandas as pd

    from ybscale.design.factorial import load_design

    design = load_design(design_path)
    table = design.measured_table()  # the centre runs after the rest, every letter 0
    lines = []
    for path in ceiling_files:
        data = json.loads(Path(path).read_text())
        usl = data["usl"]
        line = {
            "run": data["run"],
            "empirical_tps": data["empirical"]["tps"],
            "empirical_clients": data["empirical"]["clients"],
            "empirical_ci_low": float(data["empirical"].get("ci_low", math.nan)),
            "empirical_ci_high": float(data["empirical"].get("ci_high", math.nan)),
            "empirical_lower_bound": bool(data["empirical"].get("lower_bound", False)),
        }
        measuring = data.get("measuring") or {}
        line["measured_seconds"] = float(measuring.get("seconds", math.nan))
        line["probes"] = measuring.get("probes")
        line["full_repetitions"] = measuring.get("repetitions")
        line["set_aside"] = measuring.get("set_aside")  # disturbed runs measured again
        line["kept_disturbed"] = measuring.get("kept_disturbed")  # still disturbed at the bound
        bound = data.get("latency_bound") or {}
        line["latency_bound_tps"] = float(bound.get("tps", math.nan))
        line["latency_bound_clients"] = bound.get("clients")
        line["latency_p95_ms"] = float((data.get("latency") or {}).get("p95_ms", math.nan))
        at_load = data.get("latency_at_load") or {}
        if at_load:
            line["latency_at_load"] = at_load["load"]
            line["latency_at_load_clients"] = at_load["clients"]
            line["latency_at_load_ms"] = float(at_load["ms"])
        neck = data.get("bottleneck") or {}
        line["bottleneck"] = neck.get("resource", "")
        for key in ("utilisation", "bound_tps", "cpu_ms_per_transaction"):
            line[f"bottleneck_{key}"] = float(neck.get(key, math.nan))
        line["host_utilisation"] = float(
            neck.get("utilisation_by_resource", {}).get("host", math.nan)
        )
        # what other processes took of the machine at the ceiling (local: interference)
        line["outside_utilisation"] = float(
            neck.get("utilisation_by_resource", {}).get("outside", math.nan)
        )
        for key in BUFFER_FIELDS:  # where the reads were served at the ceiling (issue 48)
            line[key] = float(neck.get(key, math.nan))
        line.update({f"usl_{k}": float(usl.get(k, math.nan)) for k in USL_FIELDS})
        line["usl_flags"] = ";".join(usl.get("flags", []))
        lines.append(line)
    ceilings = pd.DataFrame(lines).set_index("run")
    missing = set(table.index) - set(ceilings.index)
    if missing:
        raise ValueError(f"{design_path}: no ceiling for rows {sorted(missing)}")
    out = table.join(ceilings, how="inner")
    out = out.rename(columns={"usl_lam": "usl_lambda"})
    if choice == "latency_bound":  # no interval: the bound is one count's mean
        out["response"] = out["latency_bound_tps"]
        out["response_ci_low"] = out["response_ci_high"] = math.nan
        missing = out.index[out["response"].isna()].tolist()
        if missing:
            raise ValueError(
                f"analysis.ceiling: latency_bound: no client count of {missing} met the p95 "
                "target analysis.latency_slo_ms (or no percentiles were measured)"
            )
    else:
        prefix = "empirical" if choice == "empirical" else "usl"
        out["response"] = out["empirical_tps"] if choice == "empirical" else out["usl_x_n_star"]
        out["response_ci_low"] = out[f"{prefix}_ci_low"]
        out["response_ci_high"] = out[f"{prefix}_ci_high"]
    for end in ("", "_ci_low", "_ci_high"):
        out[f"ceiling{end}"] = out[f"response{end}"]
    if "latency_at_load_ms" in out and out["latency_at_load_ms"].isna().any():
        missing = out.index[out["latency_at_load_ms"].isna()].tolist()
        raise ValueError(
            f"analysis.responses: latency: no latency at the reference load for {missing} "
            f"({out['latency_at_load'].iloc[0]}): no percentiles at that client count (it was "
            "not measured, or no second was counted: measurement.seconds must exceed "
            "skip_seconds)"
        )
    if prices is not None:
        _per_dollar(out, prices, design_path)
    return out.reset_index()


def _per_dollar(out: pd.DataFrame, prices: dict[str, dict], design_path: str) -> None:
    """The price each row's cluster costs per hour, how it was obtained, and the ceiling (with
    its interval) per unit of that price."""
    missing = sorted(set(out.index) - set(prices))
    if missing:
        raise ValueError(f"{design_path}: no cluster price for rows {missing}")
    out["price_per_hour"] = [float(prices[run]["price_per_hour"]) for run in out.index]
    out["price_basis"] = [str(prices[run]["price_basis"]) for run in out.index]
    for end in ("", "_ci_low", "_ci_high"):
        out[f"throughput_per_dollar{end}"] = out[f"ceiling{end}"] / out["price_per_hour"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ybscale.analysis.ceiling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="ceiling.json of one row from its throughput.csv")
    fit.add_argument("--run", required=True)
    fit.add_argument("--throughput", required=True, type=Path)
    fit.add_argument("--repetitions", type=Path, help="repetitions.csv (for the interval)")
    fit.add_argument("--latency-slo-ms", type=float, help="p95 target of the latency bound")
    fit.add_argument(
        "--latency-load",
        type=json.loads,
        help='the latency response\'s reference load: {"clients": N} or {"fraction": F}',
    )
    fit.add_argument("--latency-percentile", type=int, default=95, choices=(50, 95, 99))
    fit.add_argument("--out", required=True, type=Path)
    col = sub.add_parser("collect", help="ceilings.csv from every row's ceiling.json")
    col.add_argument("--design", required=True)
    col.add_argument(
        "--ceiling", choices=["empirical", "usl", "latency_bound"], default="empirical"
    )
    col.add_argument(
        "--prices",
        type=json.loads,
        help="JSON: run -> {price_per_hour, price_basis} (ybscale.study.hourly_prices)",
    )
    col.add_argument("--out", required=True, type=Path)
    col.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "fit":
        reps = read_columns(args.repetitions) if args.repetitions else None
        data = row_ceiling(
            args.run,
            read_columns(args.throughput),
            reps,
            args.latency_slo_ms,
            args.latency_load,
            args.latency_percentile,
        )
        args.out.write_text(json.dumps(data, indent=2))
    else:
        table = collect(args.design, args.files, args.ceiling, args.prices)
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
