"""Factors declare the knob they set; every level is checked before anything starts.

Every invalid design goes through `study.load` (what the Snakefile calls at parse time); one
design per place a check lives also goes through a real `snakemake -n` (what a user meets) on a
copy of the workflow whose data root is watched: none may start a server or create a cluster
directory.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, ram_root, servers_under, shipped_config
from designs import seed_study

from ybscale import study
from ybscale.design import knobs, workload
from ybscale.design.factorial import DesignError
from ybscale.design.row import RowError

SEED = seed_study()
CONFIG = shipped_config()


def factors(**extra) -> dict:
    """A 2^3 design on operation size, workload and isolation, plus `extra` factors."""
    base = {
        "A": {"name": "operation_size", "levels": [1, 100]},
        "B": {"name": "workload", "levels": ["read", "write"]},
        "C": {"name": "isolation", "levels": ["read committed", "repeatable read"]},
    }
    return {"factors": {**base, **extra}}


def with_c(**c) -> dict:
    return factors(C={"name": "c", **c})


# (design, extra config, text the error must contain: file and field named)
INVALID = {
    "unknown knob kind": (with_c(sets="disk.size", levels=[1, 2]), {}, "factors.C.sets"),
    "unknown cluster knob": (with_c(sets="cluster.disks", levels=[1, 2]), {}, "factors.C.sets"),
    "unknown dataset knob": (with_c(sets="dataset.size", levels=[1, 2]), {}, "factors.C.sets"),
    "no sets, unknown name": (with_c(levels=[1, 2]), {}, "factors.C.name"),
    "negative nodes": (with_c(sets="cluster.nodes", levels=[3, -5]), {}, "factors.C.levels[1]"),
    "fractional nodes": (with_c(sets="cluster.nodes", levels=[2.5, 3]), {}, "factors.C.levels[0]"),
    "word as nodes": (with_c(sets="cluster.nodes", levels=[3, "many"]), {}, "factors.C.levels[1]"),
    "size not in table": (
        with_c(sets="cluster.node_size", levels=["small", "huge"]),
        {},
        "factors.C.levels[1]",
    ),
    "replication maybe": (
        with_c(sets="cluster.replication", levels=["off", "maybe"]),
        {},
        "factors.C.levels[1]",
    ),
    "no such script": (
        factors(B={"name": "workload", "levels": ["read", "scan"]}),
        {},
        "factors.B.levels[1]",
    ),
    "no such isolation": (
        factors(C={"name": "isolation", "levels": ["read committed", "serializable2"]}),
        {},
        "factors.C.levels[1]",
    ),
    "variable the script never uses": (
        with_c(sets="workload.batch", levels=[1, 2]),
        {},
        "factors.C.sets",
    ),
    "unknown server setting": (
        with_c(sets="server.no_such_setting", levels=[1, 2]),
        {},
        "factors.C.levels[0]",
    ),
    "server enum typo": (
        with_c(sets="server.synchronous_commit", levels=["on", "offf"]),
        {},
        "factors.C.levels[1]",
    ),
    "server value out of range": (
        with_c(sets="server.max_connections", levels=[100, 999999999]),
        {},
        "factors.C.levels[1]",
    ),
    "server unit unknown": (
        with_c(sets="server.shared_buffers", levels=["64MB", "64XB"]),
        {},
        "factors.C.levels[1]",
    ),
    "server setting that cannot be set": (
        with_c(sets="server.server_version", levels=["1", "2"]),
        {},
        "factors.C.levels[0]",
    ),
    "session cannot change a server setting": (
        with_c(sets="session.shared_buffers", levels=["64MB", "128MB"]),
        {},
        "factors.C.levels[0]",
    ),
    "unknown session setting": (
        with_c(sets="session.no_such_setting", levels=["a", "b"]),
        {},
        "factors.C.levels[0]",
    ),
    "session boolean typo": (
        with_c(sets="session.enable_seqscan", levels=["on", "maybe"]),
        {},
        "factors.C.levels[1]",
    ),
    "two factors, one knob": (
        factors(D={"name": "threads", "sets": "workload.rows", "levels": [1, 10]}),
        {},
        "factors.D.sets",
    ),
    "zero dataset rows": (
        with_c(sets="dataset.rows", levels=[1000, 0]),
        {},
        "factors.C.levels[1]",
    ),
    "zero value size": (
        with_c(sets="dataset.value_bytes", levels=[32, 0]),
        {},
        "factors.C.levels[1]: dataset.value_bytes: 0 is not a positive integer",
    ),
    "value size above 1 MiB": (
        with_c(sets="dataset.value_bytes", levels=[32, 2_000_000]),
        {},
        "factors.C.levels[1]: dataset.value_bytes: 2000000 bytes per value is above the largest",
    ),
    "fractional default value size": (
        factors(),
        {"defaults": {"dataset": {"value_bytes": 2.5}}},
        "config/config.yaml: defaults.dataset.value_bytes: 2.5 is not a positive integer",
    ),
    "zipfian parameter below pgbench's least": (
        with_c(sets="workload.distribution", levels=["uniform", "zipfian 1"]),
        {},
        "factors.C.levels[1]: workload.distribution: 'zipfian 1': the Zipfian parameter must "
        "be from 1.001 to 1000",
    ),
    "unknown distribution": (
        factors(),
        {"defaults": {"workload": {"distribution": "normal"}}},
        "config/config.yaml: defaults.workload.distribution: 'normal' is not a distribution: "
        "uniform, zipfian or zipfian <s>",
    ),
    "list as a level": (with_c(sets="workload.rows", levels=[1, [2]]), {}, "factors.C.levels"),
    "zero rows per transaction": (
        factors(A={"name": "operation_size", "levels": [0, 100]}),
        {},
        "factors.A.levels[0]",
    ),
    "negative rows per transaction": (
        factors(),
        {"defaults": {"workload": {"rows": -5}}},
        "config/config.yaml: defaults.workload.rows: -5 is not a positive integer",
    ),
    "bad default": (
        factors(),
        {"defaults": {"cluster": {"nodes": 0}}},
        "config/config.yaml: defaults.cluster.nodes",
    ),
    "script variable nobody sets": (
        factors(B={"name": "workload", "levels": ["read", "needs_foo"]}),
        {},
        "workloads/needs_foo.sql: uses :foo",
    ),
    "one centre point beside a categorical factor": (
        {**factors(), "center_points": 1},
        {},
        "center_points: 1 in each combination of the levels of workload and isolation leaves "
        "no pure error",
    ),
    "centre points without a middle anywhere": (
        {
            "factors": {
                "A": {"name": "workload", "levels": ["read", "write"]},
                "B": {"name": "nodes", "levels": [3, 4]},
            },
            "center_points": 2,
        },
        {},
        "center_points: no factor has a middle, so there is no centre: factors.A (workload)",
    ),
}


# one case per place a check lives (design schema, factor checks, row resolution, the backend's
# catalogue check, config defaults, script variables): each through a real `snakemake -n`
DRY_RUN = [
    "list as a level",
    "unknown knob kind",
    "negative nodes",
    "value size above 1 MiB",
    "server enum typo",
    "bad default",
    "negative rows per transaction",
    "unknown distribution",
    "script variable nobody sets",
    "one centre point beside a categorical factor",
]


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """A copy of the workflow on a watched RAM data root, with one extra script."""
    work = copy_workflow(tmp_path_factory.mktemp("knobs"))
    (work / "workloads" / "needs_foo.sql").write_text("SELECT :foo + :shard;\n")
    with ram_root() as root:
        yield work, root


def case_folder(name: str) -> str:
    """Where a case's files go, under the work folder."""
    return "cases/" + name.replace(" ", "_").replace(",", "")


def case_design(work: Path, name: str, design: dict) -> Path:
    """The case's design written to work/cases/<name>/design.yaml."""
    folder = work / case_folder(name)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "design.yaml").write_text(yaml.safe_dump(design))
    return folder / "design.yaml"


def names_the_file(name: str, text: str) -> bool:
    """The error names the design file (or the config or script file the case is about)."""
    where = INVALID[name][2]
    return "design.yaml" in text or "config" in where or ".sql" in text


def dry_run(work: Path, root: Path, name: str, design: dict, extra: dict):
    folder = case_design(work, name, design).parent
    config = {"design": str(folder / "design.yaml"), "local": {"data_root": str(root)}, **extra}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "results/effects.csv"]
        + ["--configfile", str(folder / "config.yaml")],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_invalid_designs_fail_the_dry_run_naming_file_and_field(workflow):
    work, root = workflow
    names = DRY_RUN
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda n: dry_run(work, root, n, *INVALID[n][:2]), names))
    problems = []
    for name, out in zip(names, results, strict=True):
        text = out.stdout + out.stderr
        # a value from the case's --configfile is named with that file, not config/config.yaml
        where = INVALID[name][2].replace("config/config.yaml", f"{case_folder(name)}/config.yaml")
        if out.returncode == 0:
            problems.append(f"{name}: dry run passed")
        elif where not in text:
            problems.append(f"{name}: {where!r} not in: {text[-600:]}")
        elif not names_the_file(name, text):
            problems.append(f"{name}: the design file is not named: {text[-600:]}")
    assert problems == []
    assert servers_under(root) == []
    assert list(root.iterdir()) == []  # no cluster directory, no template: nothing started


def test_every_invalid_design_fails_study_load_naming_file_and_field(workflow):
    """The checks live in the package (study.load, which the Snakefile calls), each case here."""
    work, _ = workflow
    problems = []
    for name, (design, extra, where) in INVALID.items():
        path = case_design(work / "in-process", name, design)
        config = {**CONFIG, **extra, "design": str(path), "workloads": str(work / "workloads")}
        with pytest.raises((RowError, DesignError, ValueError)) as err:
            study.load(config)
        text = str(err.value)
        if where.replace("workloads/", "") not in text:
            problems.append(f"{name}: {where!r} not in: {text[-600:]}")
        elif not names_the_file(name, text):
            problems.append(f"{name}: the design file is not named: {text[-600:]}")
    assert problems == []


def test_valid_2_3_design_without_cluster_factor_has_one_combination(workflow):
    work, _ = workflow
    path = case_design(work, "valid 2 3", factors())
    loaded = study.load({**CONFIG, "design": str(path), "workloads": str(REPO / "workloads")})
    assert len(loaded.rows) == 8
    assert {r.combination for r in loaded.rows} == {"nodes3-small-reploff"}
    row = loaded.rows[1]  # A = +1: 100 rows per transaction, read
    assert row.variables == {"rows": "100", "distribution": "0"}
    assert row.script == "read" and row.read_only
    assert loaded.rows[2].kind == "write"
    # the write script's new rows are as large as the loaded ones (dataset.value_bytes)
    assert loaded.rows[2].variables == {"rows": "1", "value_bytes": "32"}
    assert loaded.rows[4].isolation == "repeatable read"


def test_a_variable_factor_may_be_read_by_some_of_the_designs_scripts(workflow):
    """`workload.distribution` as a factor beside the read/write factor: read.sql reads it,
    write.sql (new keys) does not; the write rows run alike at both levels (the factor's effect
    there is zero, an interaction with the script), and neither gets the variable."""
    work, _ = workflow
    design = factors(D={"name": "skew", "sets": "workload.distribution",
                        "levels": ["uniform", "zipfian"]})  # fmt: skip
    design["generators"] = {"D": "ABC"}
    path = case_design(work, "skew", design)
    loaded = study.load({**CONFIG, "design": str(path), "workloads": str(REPO / "workloads")})
    by_kind = {
        (r.kind, r.levels["skew"]): r.variables
        for r in loaded.rows
        if r.levels["operation_size"] == 1
    }
    assert by_kind[("read", "uniform")]["distribution"] == "0"
    assert by_kind[("read", "zipfian")]["distribution"] == str(knobs.ZIPFIAN_S)
    assert (
        by_kind[("write", "uniform")]
        == by_kind[("write", "zipfian")]
        == {
            "rows": "1",
            "value_bytes": "32",
        }
    )


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "config").glob("design*.yaml")))
def test_every_shipped_design_resolves_to_its_rows(name):
    """The designs the docs tell users to run (config/design*.yaml) resolve with the shipped
    defaults: one row per run, every factor's levels applied."""
    loaded = study.load({**CONFIG, "design": str(REPO / "config" / name)})
    assert len(loaded.rows) == loaded.design.n_runs > 0
    for f in loaded.design.factors:
        assert {r.levels[f.name] for r in loaded.rows} >= set(f.levels), f.name


def test_server_factor_gets_a_cluster_per_level(workflow):
    work, _ = workflow
    design = factors(D={"name": "commit", "sets": "server.synchronous_commit", "levels": [1, 0]})
    design["generators"] = {"D": "ABC"}
    path = case_design(work, "server", design)
    loaded = study.load({**CONFIG, "design": str(path), "workloads": str(REPO / "workloads")})
    assert sorted({r.combination for r in loaded.rows}) == [
        "nodes3-small-reploff-synchronous-commit-0",
        "nodes3-small-reploff-synchronous-commit-1",
    ]
    assert {r.server["synchronous_commit"] for r in loaded.rows} == {"0", "1"}


def test_seed_design_resolves_to_the_seed_rows():
    loaded = study.load(CONFIG)
    assert len(loaded.rows) == 16 and len({r.combination for r in loaded.rows}) == 8
    run01 = loaded.row("run01")
    assert run01.cluster.nodes == 3 and run01.cluster.replication is True
    assert run01.cluster.node_size == "large"
    assert run01.script == "read" and run01.variables == {"rows": "1", "distribution": "0"}
    assert run01.combination == "nodes3-large-replon"
    assert {r.combination for r in loaded.rows} == {
        f"nodes{n}-{s}-repl{p}" for n in (3, 5) for s in ("small", "large") for p in ("on", "off")
    }
    # the seed's names are shorthands: the same design without `sets:` resolves the same rows
    plain = {**SEED, "factors": {k: {**v} for k, v in SEED["factors"].items()}}
    for spec in plain["factors"].values():
        spec.pop("sets", None)
    assert all(
        knobs.SHORTHANDS[v["name"]] == SEED["factors"][k]["sets"]
        for k, v in plain["factors"].items()
    )


def test_the_value_size_is_a_factor_and_its_default_leaves_the_rows_as_they_were(workflow):
    """Issue 48: dataset.value_bytes sets each loaded row's value; at its default (32: md5 in
    hex) the rows, their measuring params and the load statement are what they were before."""
    work, _ = workflow
    design = factors(D={"name": "value", "sets": "dataset.value_bytes", "levels": [32, 1000]})
    design["generators"] = {"D": "ABC"}
    path = case_design(work, "value size", design)
    loaded = study.load({**CONFIG, "design": str(path), "workloads": str(REPO / "workloads")})
    assert {r.dataset_value_bytes for r in loaded.rows} == {32, 1000}
    assert len({r.combination for r in loaded.rows}) == 1  # not infrastructure: one cluster
    for row in loaded.rows:
        assert ("dataset_value_bytes" in row.params()) == (row.dataset_value_bytes != 32)
        assert type(row).from_dict(row.params()).params() == row.params()
    assert all("dataset_value_bytes" not in r.params() for r in study.load(CONFIG).rows)
    assert workload.insert_sql("kv", 0, 9) == (
        "INSERT INTO kv SELECT key, md5(key::text) FROM "
        "(SELECT k AS key FROM generate_series(0, 9, 1) AS k) AS s;\n"
    )
    assert "left(md5(key::text), 7)" in workload.insert_sql("kv", 0, 9, value_bytes=7)


def test_script_variables_and_read_only():
    text = (REPO / "workloads" / "read.sql").read_text()
    assert workload.variables_used(text) == {
        "rows",
        "distribution",
        "shard_rows",
        "nshards",
        "shard",
    }
    assert workload.read_only(text)
    write = (REPO / "workloads" / "write.sql").read_text()
    assert not workload.read_only(write)
    assert workload.variables_used("SELECT :a::int, $$x$$ -- :not_this\n\\set b 1\nSELECT :b") == {
        "a"
    }


def test_a_script_that_only_inserts_new_keys_is_restored_without_a_reload():
    """Issue 48: the shipped write script only inserts (keys from its sequence above keybase),
    so removing the keys outside the loaded ones restores the dataset; a script that updates or
    deletes loaded rows, or reads only, is not restorable so."""
    write = (REPO / "workloads" / "write.sql").read_text()
    assert workload.inserts_only(write)
    assert not workload.inserts_only((REPO / "workloads" / "read.sql").read_text())
    assert not workload.inserts_only("UPDATE kv SET v = 'x' WHERE k = :k;")
    assert not workload.inserts_only(write + "\nDELETE FROM kv WHERE k = :k;")
    # rows 10 over 3 shards: keys 0..9, new ones from keybase 12 (a multiple of 3) up
    assert workload.restore_sql(10, 1, 3) == "DELETE FROM kv WHERE k >= 12 OR k < 0;\nVACUUM kv;\n"


def test_pgoptions_escape_spaces():
    assert workload.pgoptions({"default_transaction_isolation": "repeatable read"}) == (
        r"-c default_transaction_isolation=repeatable\ read"
    )


def test_a_yaml_boolean_server_setting_is_written_for_each_servers_grammar():
    """Issue 46: a YAML boolean in defaults.server stays on/off for PostgreSQL (local, YSQL
    settings), and becomes true/false only where gflags reads it (a yb flag on gcp)."""
    from ybscale.backends.yb_catalogue import gflags
    from ybscale.design import knobs

    assert knobs.setting_text(True) == "on" and knobs.setting_text(False) == "off"
    assert gflags.flag_text(knobs.setting_text(True), "bool") == "true"
    assert gflags.flag_text(knobs.setting_text(False), "bool") == "false"
    assert knobs.setting_text("64MB") == "64MB"


def test_a_distribution_is_the_number_pgbench_draws_with():
    """Issue 48: uniform -> 0 (read.sql's `random`), zipfian -> s = 1.1, `zipfian <s>` -> s,
    within pgbench's bounds [1.001, 1000] (PostgreSQL 15 pgbench.c MIN/MAX_ZIPFIAN_PARAM)."""
    from ybscale.design.knobs import distribution_parameter

    assert distribution_parameter("uniform") == "0"
    assert distribution_parameter("zipfian") == "1.1"
    assert distribution_parameter("zipfian 1.001") == "1.001"
    assert distribution_parameter("zipfian 1000") == "1000.0"
    for bad in ("zipfian 0.99", "zipfian 1001", "zipfian x", "zipfian 2 3", "gauss", 1.5, None):
        with pytest.raises(ValueError):
            distribution_parameter(bad)
