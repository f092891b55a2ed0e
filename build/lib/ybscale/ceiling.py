"""Throughput ceilings: per row (empirical max and USL fit) and the table that feeds the effects."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import pandas as pd

from ybscale.design import load_design
from ybscale.usl import fit_usl

USL_FIELDS = ("sigma", "kappa", "lam", "n_star", "x_n_star", "r2")


def row_ceiling(run: str, throughput: pd.DataFrame) -> dict:
    """Empirical ceiling (largest median tps and where) and the USL fit of one row's curve."""
    best = throughput.loc[throughput["tps"].idxmax()]
    fit = fit_usl(throughput["clients"].to_numpy(float), throughput["tps"].to_numpy(float))
    usl = {k: _finite(v) for k, v in dataclasses.asdict(fit).items()}
    return {
        "run": run,
        "empirical": {"tps": float(best["tps"]), "clients": int(best["clients"])},
        "usl": usl,
        "method": {
            "empirical": "max over client counts of the median tps of the repetitions",
            "usl": "scipy curve_fit of X(N) = lam*N / (1 + sigma(N-1) + kappa*N(N-1))",
        },
    }


def _finite(value):
    """JSON has no inf/nan: write them as strings so nothing is silently dropped."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def collect(design_path: str, ceiling_files: list[Path], choice: str) -> pd.DataFrame:
    """One line per run: its signs, both ceilings and the chosen response."""
    design = load_design(design_path)
    table = design.sign_table()
    lines = []
    for path in ceiling_files:
        data = json.loads(Path(path).read_text())
        usl = data["usl"]
        line = {
            "run": data["run"],
            "empirical_tps": data["empirical"]["tps"],
            "empirical_clients": data["empirical"]["clients"],
        }
        line.update({f"usl_{k}": float(usl[k]) for k in USL_FIELDS})
        line["usl_flags"] = ";".join(usl.get("flags", []))
        lines.append(line)
    ceilings = pd.DataFrame(lines).set_index("run")
    missing = set(table.index) - set(ceilings.index)
    if missing:
        raise ValueError(f"{design_path}: no ceiling for rows {sorted(missing)}")
    out = table.join(ceilings, how="inner")
    out = out.rename(columns={"usl_lam": "usl_lambda"})
    out["response"] = out["empirical_tps"] if choice == "empirical" else out["usl_x_n_star"]
    return out.reset_index()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ybscale.ceiling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser("fit", help="ceiling.json of one row from its throughput.csv")
    fit.add_argument("--run", required=True)
    fit.add_argument("--throughput", required=True, type=Path)
    fit.add_argument("--out", required=True, type=Path)
    col = sub.add_parser("collect", help="ceilings.csv from every row's ceiling.json")
    col.add_argument("--design", required=True)
    col.add_argument("--ceiling", choices=["empirical", "usl"], default="empirical")
    col.add_argument("--out", required=True, type=Path)
    col.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "fit":
        data = row_ceiling(args.run, pd.read_csv(args.throughput))
        args.out.write_text(json.dumps(data, indent=2))
    else:
        collect(args.design, args.files, args.ceiling).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
