"""The vendored YugabyteDB catalogue: what it holds, what the code sets against it, server.* knobs
on gcp checked at dry run, and the script that rebuilds it from a yugabyte-db checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, failed, shipped_config, snakemake

from ybscale.backends import yb_catalogue
from ybscale.backends.yb_catalogue import regenerate

ROOT = Path(__file__).resolve().parents[1]


def test_the_series_of_a_version_string_or_a_release():
    assert yb_catalogue.series_of("PostgreSQL 11.2-YB-2024.2.1.0-b0 on x86_64") == "2024.2"
    assert yb_catalogue.series_of("PostgreSQL 15.12-YB-2026.1.2.0-b0") == "2026.1"
    assert yb_catalogue.series_of("2024.2.1.0-b185") == "2024.2"
    assert yb_catalogue.series_of("PostgreSQL 15.18 (Debian 15.18-0+deb12u1)") is None
    with pytest.raises(yb_catalogue.UnknownSeries, match="supported: 2024.2, 2026.1"):
        yb_catalogue.load("2.20")


def test_the_pinned_release_is_a_supported_series():
    config = shipped_config()
    release = config["gcp"]["yugabyte"]["version"]
    assert yb_catalogue.load(yb_catalogue.series_of(release))["tag"] == release


@pytest.mark.parametrize("series", yb_catalogue.SUPPORTED)
def test_every_flag_the_infra_sets_is_a_flag_of_the_series(series):
    """yb-tserver exits on an unknown flag: what startup.py passes must be in the catalogue."""
    from ybscale_infra import startup

    catalogue = yb_catalogue.load(series)
    tserver = startup.tserver_flags("10.0.0.5", ["10.0.0.2"], "us-central1-a", {}, {"a": "b"})
    master = startup.master_flags("10.0.0.2", ["10.0.0.2"], 1, "us-central1-a")
    for argv, server in ((tserver, "yb-tserver"), (master, "yb-master")):
        names = {arg[2:].split("=")[0] for arg in argv if arg.startswith("--")}
        assert names == set(catalogue["flags_set_by_ybscale"][server]), server
    assert set(catalogue["flags_set_by_ybscale"]["yb-tserver"]) <= yb_catalogue.tserver_flags(
        series
    )


def test_server_knobs_split_by_the_flag_list_without_local_postgres(monkeypatch):
    """Issue 20, item 9: without local PostgreSQL binaries every server.* knob became a flag."""
    from ybscale.backends import local
    from ybscale.backends.gcp import stacks

    def no_binaries():
        raise local.cluster.BackendError("no PostgreSQL binaries here")

    monkeypatch.setattr(local, "find_bindir", no_binaries)
    monkeypatch.setattr(local.cluster, "find_bindir", no_binaries)
    server = {"work_mem": "16MB", "yb_bnl_batch_size": "512", "ysql_num_shards_per_tserver": "4"}
    flags, pg_conf = stacks.split_server_settings(server, "2024.2.1.0-b185")
    assert flags == {"ysql_num_shards_per_tserver": "4"}
    assert pg_conf == {"work_mem": "16MB", "yb_bnl_batch_size": "512"}


def test_a_server_typo_on_gcp_is_rejected_at_dry_run_naming_file_and_field(tmp_path):
    """Issue 20: `server.<typo>` with backend gcp fails `snakemake -n` before any cluster."""
    work = copy_workflow(tmp_path / "w")
    design = yaml.safe_load((ROOT / "config" / "design.yaml").read_text())
    design["factors"]["D"] = {"name": "buffers", "sets": "server.shared_bufers",
                              "levels": ["128MB", "256MB"]}  # fmt: skip
    (work / "config" / "typo.yaml").write_text(yaml.safe_dump(design))
    out = snakemake(work, "-n", "results/effects.csv", "--config", "backend=gcp",
                    "design=config/typo.yaml", timeout=300)  # fmt: skip
    assert out.returncode != 0, failed(out)
    assert (
        "config/typo.yaml: factors.D.levels[0]: server.shared_bufers: neither a yb-tserver flag "
        "nor a YSQL setting of YugabyteDB 2024.2"
    ) in out.stdout + out.stderr, failed(out)
    design["factors"]["D"]["sets"] = "server.shared_buffers"  # the right name passes
    (work / "config" / "typo.yaml").write_text(yaml.safe_dump(design))
    out = snakemake(work, "-n", "results/effects.csv", "--config", "backend=gcp",
                    "design=config/typo.yaml", timeout=300)  # fmt: skip
    assert out.returncode == 0, failed(out)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_regenerate_reads_definitions_flags_and_settings_at_the_tag(tmp_path):
    """The script on a small checkout laid out like yugabyte-db (files written here, in the
    formats pg_proc.dat, yb_system_views.sql, gflags and guc.c use); the tag, not the branch
    head, is what it reads."""
    repo = tmp_path / "yb"
    files = {
        regenerate.PG_PROC: (
            "[\n{ oid => '8066', proname => 'yb_local_tablets', proretset => 't',\n"
            "  prorettype => 'record', proargtypes => '',\n"
            "  proallargtypes => '{text,text,int8,_text}', proargmodes => '{o,o,o,o}',\n"
            "  proargnames => '{tablet_id,table_name,size,replicas}',\n"
            "  prosrc => 'yb_local_tablets' },\n"
            "{ oid => '8033', proname => 'yb_table_properties', prorettype => 'record',\n"
            "  proargtypes => 'oid', proallargtypes => '{oid,int8,bool}',\n"
            "  proargmodes => '{i,o,o}', proargnames => '{table_oid,num_tablets,is_colocated}',\n"
            "  prosrc => 'yb_table_properties' },\n"
            "{ oid => '8099', proname => 'yb_get_tablet_metadata', proretset => 't',\n"
            "  prorettype => 'record', proargtypes => '', proallargtypes => '{text,text,text}',\n"
            "  proargmodes => '{o,o,o}', proargnames => '{tablet_id,namespace,leader}',\n"
            "  prosrc => 'yb_get_tablet_metadata' },\n]\n"
        ),
        regenerate.VIEWS: (
            "CREATE VIEW yb_local_tablets AS SELECT * FROM yb_local_tablets();\n"
            "CREATE VIEW yb_tablet_metadata AS SELECT t.tablet_id,\n"
            "  CASE WHEN t.namespace = 'system' THEN NULL ELSE ('x' || t.tablet_id)::int::oid END\n"
            "  AS oid, t.namespace AS db_name, t.leader -- the leader's address\n"
            "FROM yb_get_tablet_metadata() t WHERE t.namespace <> 'system';\n"
        ),
        "src/yb/tserver/main.cc": "".join(
            f'DEFINE_NON_RUNTIME_string({f}, "", "x");\n'
            for names in regenerate.FLAGS_SET.values()
            for f in names
        )
        + 'DEFINE_RUNTIME_PG_FLAG(int32, yb_bnl_batch_size, 1024, "x");\n',
        "src/yb/tserver/main-test.cc": 'DEFINE_test_flag(bool, only_in_tests, false, "x");\n',
        regenerate.GUC_FILES[0]: '{\n  {"work_mem", PGC_USERSET, RESOURCES_MEM,\n',
        regenerate.CONFIGURE: "PACKAGE_VERSION='11.2'\n",
    }
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "release")
    _git(repo, "tag", "2024.2.1.0-b185")
    (repo / regenerate.VIEWS).write_text("-- after the tag\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "later")
    out = subprocess.run(
        [sys.executable, "-m", "ybscale.backends.yb_catalogue.regenerate", "--git-dir",
         str(repo / ".git"), "--tag", "2024.2.1.0-b185", "--series", "2024.2"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    catalogue = json.loads(out)
    local = catalogue["objects"]["yb_local_tablets"]
    assert local["kind"] == "view" and local["columns"] == [
        ["tablet_id", "text"], ["table_name", "text"], ["size", "bigint"], ["replicas", "text[]"]
    ]  # fmt: skip
    props = catalogue["objects"]["yb_table_properties"]
    assert props["arguments"] == [["table_oid", "oid"]]
    assert props["columns"] == [["num_tablets", "bigint"], ["is_colocated", "boolean"]]
    assert catalogue["objects"]["yb_tablet_metadata"]["columns"] == [
        ["tablet_id", "text"], ["oid", "oid"], ["db_name", "text"], ["leader", "text"]
    ]  # fmt: skip
    assert "yb_servers" in catalogue["absent_objects"]
    assert "ysql_yb_bnl_batch_size" in catalogue["tserver_flag_names"]
    assert "start_cql_proxy" in catalogue["tserver_flag_names"]
    assert "only_in_tests" not in catalogue["tserver_flag_names"]
    assert catalogue["ysql_setting_names"] == ["work_mem"]
    assert catalogue["version_string"] == "PostgreSQL 11.2-YB-2024.2.1.0-b0"
