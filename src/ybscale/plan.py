"""`ybscale plan`: what a study will take before it runs (the gcp plan: clusters, slots,
VM-hours, cost and quotas, each cluster's dataset load time and disk per tserver, whatever
backend the config runs on; the error strata as each backend runs the rows), or with
`--detect` the replications needed to detect an effect from a finished study's noise
(`ybscale.analysis.power`, backend-neutral)."""

from __future__ import annotations

import argparse
import sys
from functools import partial

from ybscale.config_sources import file_sources, read_yaml_file, sources_in_use
from ybscale.errors import error_line


def main(argv: list[str] | None = None) -> int:

    from ybscale.help import description as cli_description

    parser = argparse.ArgumentParser(prog="ybscale plan", description=cli_description(__doc__))
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument(
        "--configfile", action="append", default=[],
        help="a profile layered over --config as by snakemake --configfile (config/gcp.yaml)",
    )  # fmt: skip
    parser.add_argument("--design", default=None, help="default: the config's design")
    parser.add_argument("--detect", default=None, help="replications to detect e.g. 10%% or 500")
    parser.add_argument(
        "--analysis", default="results",
        help="the study's results: the noise --detect uses, the loads measured beside the plan's",
    )  # fmt: skip
    parser.add_argument(
        "--response", default=None,
        help="with --detect: the response to size (analysis.responses; default: the first)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        config = read_yaml_file(args.config) or {}
        for profile in args.configfile:
            from snakemake.utils import update_config

            update_config(config, read_yaml_file(profile) or {})
        with sources_in_use(file_sources([args.config, *args.configfile])):
            return _report(config, args)
    except (OSError, KeyError, ValueError) as exc:
        print(f"ybscale plan: {error_line(exc)}", file=sys.stderr)
        return 1


def _report(config: dict, args) -> int:
    """What `main` prints: the plan and the strata, or with --detect the replications."""
    from ybscale import study
    from ybscale.backends.gcp.plan import (
        format_factors,
        format_plan,
        measured_loads,
        measured_log_copies,
        measured_restores,
        plan,
        replicated_cost,
    )
    from ybscale.design.strata import format_strata
    from ybscale.study import cluster_of

    if args.detect:
        from ybscale.analysis.power import detect
        from ybscale.analysis.study_files import StudyFiles

        loaded = study.load(config, args.design)
        files = StudyFiles.under(args.analysis, loaded.design.run_ids)
        cost = None
        if loaded.settings["backend"] == "gcp":
            cost = partial(replicated_cost, loaded.design, loaded.settings)
        print(detect(args.detect, loaded.design, loaded.settings, files, cost, args.response))
        return 0
    chosen = config.get("backend", "local")
    config["backend"] = "gcp"  # the plan is the gcp plan, whatever the config runs on
    loaded = study.load(config, args.design, budget=True)  # every round the budget allows
    copies = measured_log_copies(args.analysis)  # the logs' egress, from what was sent
    the_plan = plan(loaded.rows, loaded.settings, quotas=True, compare=True, copies=copies)
    print(format_plan(the_plan, measured_loads(args.analysis), args.analysis,
                      measured_restores(args.analysis)))  # fmt: skip
    print(f"- {budget_note(loaded)}")  # one more note, below the plan's own
    print()
    print(format_factors(loaded.design))
    print(format_strata(loaded.design, cluster_of(loaded.settings, loaded.rows), "gcp"))
    if chosen != "gcp":  # and as the config's own backend runs the rows
        own = study.load({**config, "backend": chosen}, args.design)
        print(format_strata(own.design, cluster_of(own.settings, own.rows), chosen))
    return 0


def budget_note(loaded) -> str:
    """One line on measurement.budget: the rounds the plan prices (its worst case), or why the
    design is measured as written (ybscale.design.rounds)."""
    given = loaded.settings["measurement"].get("budget")
    if not given:
        return "measurement.budget: none; the design as written, no further rounds."
    base, most = loaded.base_replicates, loaded.design.replications
    if most > base:
        return (
            f"measurement.budget {dict(given)}: while a column is undecided the study adds "
            f"replicates up to {most}; the plan above prices all {most} (the worst case)."
        )
    return (
        f"measurement.budget {dict(given)}: not used here, the design is measured as written "
        "(its rows share clusters, or it has centre points or blocks: ybscale.design.rounds)."
    )


if __name__ == "__main__":
    sys.exit(main())
