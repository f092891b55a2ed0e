"""A row's measuring attempt: its status, and the publication of what it measured.

Snakemake deletes the outputs of a failed job and, without `-k`, starts nothing more, so a row
whose measuring job failed would keep its cluster up. The measuring job is therefore an attempt
that always ends well: it stages the measurements and records `status.json` (ok, or failed and
why), which the cluster's release waits for. The `publish` rule then moves the staged files
into place, or fails with the row's error, naming the row and its log, and discards the
attempt so that the next run measures the row again.

    python -m ybscale.measure.attempt publish --run R --status S --staged D --out results/runs/R
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

# the measuring job's outputs
PUBLISHED = ("throughput.csv", "repetitions.csv", "per_second.csv", "measurement.json")


class RowFailed(RuntimeError):
    """The row's attempt failed; the message names the row, its error and its log."""


def fingerprint(params: object) -> str:
    """What a row's measurement depends on (the measuring rule's params: row, script, code,
    measurement and backend settings) as one digest, which the attempt records."""
    text = json.dumps(params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_status(
    path: Path | str,
    run: str,
    log: Path | str,
    error: BaseException | None = None,
    measured_as: str = "",
):
    """Record the attempt's result: ok, or failed with the error's type and message, and the
    fingerprint of what it measured (`measured_as`)."""
    status = {
        "run": run,
        "status": "ok" if error is None else "failed",
        "error": "" if error is None else f"{type(error).__name__}: {error}",
        "log": str(log),
        "finished": dt.datetime.now(dt.UTC).isoformat(),
        "fingerprint": measured_as,
    }
    Path(path).write_text(json.dumps(status, indent=2) + "\n")


def is_current(folder: Path | str, measured_as: str) -> bool:
    """Whether the row in `folder` (results/runs/<run>) stands measured as `measured_as`: its
    attempt ok with that fingerprint and every measurement published. Such a row needs no
    cluster: the rules give its measuring job none, so a cluster brought up again for another
    row (one row forced, a failed row re-run) does not measure it again."""
    folder = Path(folder)
    try:
        status = json.loads((folder / "status.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        status.get("status") == "ok"
        and status.get("fingerprint") == measured_as
        and all((folder / name).is_file() for name in PUBLISHED)
    )


def publish(run: str, status_path: Path, staged: Path, outdir: Path) -> list[Path]:
    """Move the staged measurements into `outdir`; RowFailed (the attempt removed, so the next
    run measures the row again) when the attempt failed or staged nothing."""
    status = json.loads(status_path.read_text())
    missing = [name for name in PUBLISHED if not (staged / name).is_file()]
    if status.get("status") != "ok" or missing:
        why = status.get("error") or f"staged no {', '.join(missing)} in {staged}"
        status_path.unlink()
        shutil.rmtree(staged, ignore_errors=True)
        raise RowFailed(f"{run}: the measurement failed: {why} (log: {status.get('log')})")
    outdir.mkdir(parents=True, exist_ok=True)
    published = []
    for name in PUBLISHED:
        os.replace(staged / name, outdir / name)
        published.append(outdir / name)
    return published


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ybscale.measure.attempt")
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="publish a row's staged measurements or fail")
    pub.add_argument("--run", required=True)
    pub.add_argument("--status", required=True, type=Path)
    pub.add_argument("--staged", required=True, type=Path)
    pub.add_argument("--out", required=True, type=Path, help="the row's results folder")
    args = parser.parse_args(argv)
    try:
        for path in publish(args.run, args.status, args.staged, args.out):
            print(f"published {path}")
    except RowFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
