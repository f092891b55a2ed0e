# gcp backend (its `rules`, included when backend == gcp): the plan, printed before spending.
# Its clusters come up and go down by the rules every backend uses (rules/cluster.smk).
from ybscale.backends.gcp.plan import format_plan, plan


onstart:
    # plan before spending, once per real run (not on -n, --lint, --report or --dag)
    print(format_plan(plan(STUDY.rows, SETTINGS, compare=True)), file=sys.stderr)
