"""Critical values of Lenth's t = |effect| / PSE for m null effects (Ye & Hamada 2000): the
individual (IER) and the simultaneous (EER, the maximum over the m columns) 1 − α quantiles.

They are simulated, seeded, in batches until the batch means' standard error of every quantile is
at most `TARGET` of its value (0.05 %: the table is good to 0.1 % at two standard errors), and
tabulated once in `lenth_critical.csv` for α 0.01, 0.05, 0.10 and m = 4 … 127 (regenerate with
``python -m ybscale.analysis.lenth_critical``). Other (m, α) are simulated the same way when first
asked for, once per process.
"""

from __future__ import annotations

import argparse
import csv
from functools import cache, lru_cache
from pathlib import Path

TABLE = Path(__file__).with_name("lenth_critical.csv")
ALPHAS = (0.01, 0.05, 0.10)
SEED = 20000  # Ye & Hamada (2000); the stream for m is seeded with SEED + m
TARGET = 0.0005  # relative standard error of each tabulated quantile
VALUES_PER_BATCH = 1_400_000  # |effect| draws per batch (rows = this // m)
MIN_BATCHES, MAX_BATCHES = 8, 4000
FIELDS = ("m", "alpha", "ier", "ier_se", "eer", "eer_se", "rows", "seed")


def _lenth_t(rng, rows: int, m: int):
    """(all |t| of `rows` null draws of m effects, their row maxima), PSE as Lenth (1989):
    s0 = 1.5 median|c|, PSE = 1.5 median of the |c| < 2.5 s0."""
    import numpy as np

    c = np.sort(np.abs(rng.standard_normal((rows, m))), axis=1)
    s0 = 1.5 * (c[:, (m - 1) // 2] + c[:, m // 2]) / 2
    kept = (c < 2.5 * s0[:, None]).sum(axis=1)  # sorted: the kept values come first
    low = np.take_along_axis(c, ((kept - 1) // 2)[:, None], axis=1)[:, 0]
    high = np.take_along_axis(c, (kept // 2)[:, None], axis=1)[:, 0]
    pse = 1.5 * (low + high) / 2
    return c / pse[:, None], c[:, -1] / pse


def simulate(m: int, alphas=ALPHAS, seed: int = SEED, target: float = TARGET) -> list[dict]:
    """One line per α: the IER and EER quantiles (means over batches), their standard errors
    and the rows drawn, stopping when every relative standard error is at most `target`."""
    import numpy as np

    if m < 2:
        raise ValueError(f"Lenth's method needs at least 2 effects, not {m}")
    rng = np.random.default_rng(seed + m)
    rows = max(1, VALUES_PER_BATCH // m)
    probs = [1 - a for a in alphas]
    ier, eer = [], []
    while True:
        t, top = _lenth_t(rng, rows, m)
        ier.append(np.quantile(t, probs))
        eer.append(np.quantile(top, probs))
        n = len(ier)
        if n < MIN_BATCHES:
            continue
        mean = [np.mean(q, axis=0) for q in (ier, eer)]
        se = [np.std(q, axis=0, ddof=1) / np.sqrt(n) for q in (ier, eer)]
        if n >= MAX_BATCHES or all(np.all(s <= target * v) for s, v in zip(se, mean, strict=True)):
            break
    return [
        {
            "m": m,
            "alpha": a,
            "ier": float(mean[0][i]),
            "ier_se": float(se[0][i]),
            "eer": float(mean[1][i]),
            "eer_se": float(se[1][i]),
            "rows": rows * n,
            "seed": seed + m,
        }
        for i, a in enumerate(alphas)
    ]


@cache
def _table() -> dict[tuple[int, float], tuple[float, float]]:
    with TABLE.open() as f:
        return {
            (int(r["m"]), round(float(r["alpha"]), 6)): (float(r["ier"]), float(r["eer"]))
            for r in csv.DictReader(f)
        }


@lru_cache(maxsize=64)
def critical(m: int, alpha: float = 0.05) -> tuple[float, float]:
    """(individual, simultaneous) critical values of |effect|/PSE for m null effects at α:
    from the table, else simulated to the table's precision."""
    found = _table().get((m, round(alpha, 6)))
    if found is not None:
        return found
    (line,) = simulate(m, (alpha,))
    return line["ier"], line["eer"]


def write_table(path: Path = TABLE, ms=range(4, 128)) -> None:
    """Simulate every m and write the table (progress on stderr)."""
    import sys

    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        out.writeheader()
        for m in ms:
            lines = simulate(m)
            out.writerows(lines)
            f.flush()
            print(f"m={m}: {lines[0]['rows']} rows", file=sys.stderr, flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=TABLE)
    parser.add_argument("--max-m", type=int, default=127)
    args = parser.parse_args(argv)
    write_table(args.out, range(4, args.max_m + 1))


if __name__ == "__main__":
    main()


@cache
def equivalent_df(m: int, alpha: float) -> float:
    """The degrees of freedom ν whose t quantile t(1 − α/2, ν) is the IER critical value for m
    columns: the t distribution the one Lenth rule's ME matches (for power and comparisons of
    Lenth tables); inf where the IER is not above the normal quantile."""
    import math

    from scipy import optimize
    from scipy.special import ndtri, stdtrit

    ier = critical(m, alpha)[0]
    if not ier > float(ndtri(1 - alpha / 2)) * (1 + 1e-9):
        return math.inf
    return float(optimize.brentq(lambda d: stdtrit(d, 1 - alpha / 2) - ier, 0.05, 1e7))
