"""The vendored YugabyteDB catalogue: what it holds, what the code sets against it, server.* knobs
on gcp checked at dry run, and the script that rebuilds it from a yugabyte-db checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, failed, gflags_compiler, shipped_config, snakemake
from designs import seed_study

from ybscale.backends import yb_catalogue
from ybscale.backends.yb_catalogue import regenerate

ROOT = Path(__file__).resolve().parents[2]


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
    assert set(catalogue["flags_set_by_ybscale"]["yb-master"]) <= yb_catalogue.master_flags(series)


def test_server_knobs_split_by_the_flag_list_without_local_postgres(monkeypatch):
    """Issue 20, item 9: without local PostgreSQL binaries every server.* knob became a flag."""
    from ybscale.backends import local
    from ybscale.backends.gcp import stacks

    def no_binaries():
        raise local.cluster.BackendError("no PostgreSQL binaries here")

    monkeypatch.setattr(local, "find_bindir", no_binaries)
    monkeypatch.setattr(local.cluster, "find_bindir", no_binaries)
    server = {"work_mem": "16MB", "yb_bnl_batch_size": "512", "ysql_max_connections": "200"}
    master, flags, pg_conf = stacks.split_server_settings(server, "2024.2.1.0-b185")
    assert master == {}
    assert flags == {"ysql_max_connections": "200"}
    assert pg_conf == {"work_mem": "16MB", "yb_bnl_batch_size": "512"}


# PostgreSQL 11.2 is YSQL's base in 2024.2: settings PostgreSQL added in 13-15 are not in its
# guc.c (YSQL refuses to start with them in its configuration file); these are, as are
# YugabyteDB's own yb_* settings
NEWER_THAN_PG11 = ["enable_memoize", "hash_mem_multiplier", "enable_incremental_sort",
                   "wal_keep_size", "idle_session_timeout", "compute_query_id"]  # fmt: skip
IN_2024_2 = ["wal_keep_segments", "yb_enable_expression_pushdown", "work_mem", "yb_bnl_batch_size",
             "log_min_duration_sample", "yb_enable_base_scans_cost_model"]  # fmt: skip


@pytest.mark.parametrize("name", NEWER_THAN_PG11)
def test_a_setting_newer_than_the_releases_postgres_is_refused(name):
    [error] = yb_catalogue.server_setting_errors(
        {name: {"on": "config/d.yaml: factors.A"}}, "2024.2.1.0-b185"
    )
    assert error == (
        f"config/d.yaml: factors.A: server.{name}: neither a yb-master or yb-tserver flag nor a "
        "YSQL setting of YugabyteDB 2024.2 (src/ybscale/backends/yb_catalogue/2024.2.json)"
    )


@pytest.mark.parametrize("name", IN_2024_2)
def test_a_setting_of_the_releases_guc_tables_is_accepted(name):
    value = "64MB" if name == "work_mem" else "1"  # work_mem's least is 64 kB
    assert yb_catalogue.server_setting_errors({name: {value: "d.yaml"}}, "2024.2.1.0-b185") == []
    assert yb_catalogue.split_server_settings({name: value}, "2024.2")[2] == {name: value}


def test_a_read_only_setting_is_refused_as_such():
    """Internal settings (server_version, ...) and those no configuration file may set
    (transaction_isolation) exist, but --ysql_pg_conf_csv cannot set them."""
    errors = yb_catalogue.server_setting_errors(
        {"server_version": {"1": "d.yaml"}, "transaction_isolation": {"1": "d.yaml"}},
        "2024.2.1.0-b185",
    )
    assert errors == [
        f"d.yaml: server.{name}: a YSQL setting of YugabyteDB 2024.2 "
        "(src/ybscale/backends/yb_catalogue/2024.2.json) that no configuration file can set "
        "(internal or read-only)"
        for name in ("server_version", "transaction_isolation")
    ]


def test_master_flags_go_to_the_master_and_shared_flags_to_both():
    master, tserver, pg_conf = yb_catalogue.split_server_settings(
        {"load_balancer_max_concurrent_moves": "4", "enable_automatic_tablet_splitting": "false",
         "ysql_max_connections": "200"}, "2024.2")  # fmt: skip
    assert master == {"load_balancer_max_concurrent_moves": "4",
                      "enable_automatic_tablet_splitting": "false"}  # fmt: skip
    assert tserver == {"enable_automatic_tablet_splitting": "false",
                       "ysql_max_connections": "200"}  # fmt: skip
    assert pg_conf == {}


# Issue 46, item 3: the pinned build's own flags and settings. Where each fact was read (in
# yugabyte/yugabyte-db, path at commit):
# - docs/content/v2024.2/reference/configuration/yb-tserver.md
#   at 036c49a3b1b6046d36530a04eb94c389fa251a1e: "##### ysql_yb_enable_cbo ... Available in
#   v2024.2.4 or later." and the YSQL parameter yb_enable_cbo with the same note;
# - the release notes docs/content/preview/releases/ybdb-releases/v2024.2.md
#   at 0225cbd9b9e747f9a8df0834aec1ad5f5a077fd7, v2024.2.0.0: "You enable the feature using the
#   `use_fast_backward_scan` flag", "Enables control of optimizer statistics via the
#   `ysql_yb_enable_optimizer_statistics` flag", "Enables control over in-place index updates with
#   `yb_enable_inplace_index_update`", "Connection pooling ... Added support for built-in
#   connection pooling", whose page docs/content/v2024.2/explore/going-beyond-sql/connection-mgr-
#   ysql.md (at 14ffe6c3607cd909d65cb15f8717a96abe04b7bc) says "set the yb-tserver flag
#   `enable_ysql_conn_mgr`";
# - where each flag is defined, so which server takes it: use_fast_backward_scan in
#   src/yb/common/common_flags.cc (shared code: both servers; a stored version the string index
#   found, its commit not shown); yb_enable_optimizer_statistics (DEFINE_RUNTIME_PG_PREVIEW_FLAG)
#   in src/yb/yql/pgwrapper/pg_wrapper.cc at 8147600af0e7d08ada4b999b0ffde4c9b4bc39d8
#   (yb-tserver); enable_ysql_conn_mgr in src/yb/tserver/tablet_server.cc
#   at 006ca60efd75ae689c3dee8f5530fcf0300b2937 (yb-tserver); enable_wait_queues in
#   src/yb/common/common_flags.cc at 9656a89afad7b55866e569fbb0f58c5b58e42589 (both servers,
#   though only the yb-tserver page documents it).
LATER_PATCH = {"ysql_yb_enable_cbo": "2024.2.4", "yb_enable_cbo": "2024.2.4"}
IN_2024_2_0 = {  # name -> (to yb-master, to yb-tserver, a YSQL setting)
    "use_fast_backward_scan": (True, True, False),
    "ysql_yb_enable_optimizer_statistics": (False, True, False),
    "enable_ysql_conn_mgr": (False, True, False),
    "yb_enable_inplace_index_update": (False, False, True),
    "enable_wait_queues": (True, True, False),
}


@pytest.mark.parametrize(("name", "since"), LATER_PATCH.items())
def test_a_name_of_a_later_2024_2_patch_is_refused_naming_why(name, since):
    """2024.2.1.0's yb-tserver exits on an unknown flag (YSQL on an unknown setting): a name the
    v2024.2 docs mark "Available in v2024.2.4 or later" (yb-tserver.md) is refused with that
    reason, not accepted from the series' documentation."""
    [error] = yb_catalogue.server_setting_errors(
        {name: {"on": "config/d.yaml: factors.A.levels[0]"}}, "2024.2.1.0-b185"
    )
    assert error.startswith(
        f"config/d.yaml: factors.A.levels[0]: server.{name}: {name}: available from v{since}; "
        "the pinned build is 2024.2.1.0 ("
    ), error
    assert "docs/content/v2024.2/reference/configuration/yb-tserver.md" in error
    assert name not in yb_catalogue.tserver_flags("2024.2") | yb_catalogue.master_flags("2024.2")
    assert name not in yb_catalogue.ysql_settings("2024.2")
    assert yb_catalogue.flag_type("2024.2", name) is None


@pytest.mark.parametrize("name", IN_2024_2_0)
def test_a_flag_or_setting_2024_2_0_added_is_accepted_and_routed_where_defined(name):
    """The 2024.2.0.0 release notes list them, so 2024.2.1.0 has them (see the sources above);
    a flag goes to the server(s) whose code defines it, a setting to --ysql_pg_conf_csv."""
    to_master, to_tserver, setting = IN_2024_2_0[name]
    assert yb_catalogue.server_setting_errors({name: {"true": "d.yaml"}}, "2024.2.1.0-b185") == []
    master, tserver, pg_conf = yb_catalogue.split_server_settings({name: "on"}, "2024.2")
    assert (name in master, name in tserver, name in pg_conf) == (to_master, to_tserver, setting)
    if not setting:
        assert yb_catalogue.flag_type("2024.2", name) == "bool"
        assert (master | tserver)[name] == "true"  # gflags takes no on


def test_every_flag_and_setting_of_the_pinned_catalogue_has_a_source():
    """Each name says where it was read: a flag its DEFINE_* (path and commit, or the string
    index's note) and the server(s) that path means, else the documentation page(s) listing it;
    a YSQL setting the guc.c of ysql_setting_names_source or its own entry; a refused name its
    documentation note. The server lists are the flag_sources' servers."""
    catalogue = yb_catalogue.load("2024.2")
    sources = catalogue["flag_sources"]
    master, tserver = set(catalogue["master_flag_names"]), set(catalogue["tserver_flag_names"])
    assert set(sources) == master | tserver
    for name, entry in sources.items():
        servers = {s for s, names in (("yb-master", master), ("yb-tserver", tserver))
                   if name in names}  # fmt: skip
        assert set(entry["servers"]) == servers, name
        assert entry["routed_by"], name
        if "defined_in" in entry:
            assert entry.get("commit") or "commit not shown" in entry.get("note", ""), name
            path = entry["defined_in"].removeprefix("ent/")
            if path.startswith(regenerate.MASTER_DIRS):
                expected = {"yb-master"}
            elif path.startswith(regenerate.TSERVER_DIRS) and path not in regenerate.BOTH_FILES:
                expected = {"yb-tserver"}
            else:
                expected = {"yb-master", "yb-tserver"}
            set_by_us = {s for s, names in regenerate.FLAGS_SET.items() if name in names}
            assert servers == expected | set_by_us, name
        else:
            assert "documentation page" in entry["routed_by"], name
            assert entry["documented_in"], name
        for doc in entry.get("documented_in", []):
            assert doc["page"].startswith("docs/content/") and len(doc["commit"]) == 40, name
    assert "guc.c" in catalogue["ysql_setting_names_source"]
    for name, entry in catalogue["ysql_setting_names_added"].items():
        assert name in catalogue["ysql_setting_names"]
        assert entry["documented_in"].startswith("docs/content/") and len(entry["commit"]) == 40
        assert entry["read"] and entry["note"], name
    for name, entry in catalogue["not_in_pinned_build"].items():
        assert entry["reason"].startswith(f"available from v{entry['available_from']}; "), name
        assert entry["read"] and len(entry["commit"]) == 40, name
        assert "Available in" in entry["read"] or "and later" in entry["read"], name
        assert name not in master | tserver | set(catalogue["ysql_setting_names"]), name


def test_a_later_patchs_flag_and_the_2024_2_0_ones_at_dry_run(tmp_path):
    """`snakemake -n` with backend gcp on the pinned 2024.2.1.0: a factor setting
    server.ysql_yb_enable_cbo fails naming the file, the field and why (available from v2024.2.4,
    yb-tserver.md); the flags and the setting 2024.2.0.0 added (the release notes) pass in the
    same run's defaults.server (any refused would be listed too)."""
    work = copy_workflow(tmp_path / "w")
    design = seed_study()
    design["factors"]["D"] = {"name": "d", "sets": "server.ysql_yb_enable_cbo",
                              "levels": ["legacy_mode", "on"]}  # fmt: skip
    (work / "config" / "cbo.yaml").write_text(yaml.safe_dump(design))
    configfile = work / "config" / "cbo-config.yaml"
    configfile.write_text(
        yaml.safe_dump(
            {
                "backend": "gcp",
                "design": "config/cbo.yaml",
                "defaults": {"server": {n: True for n in IN_2024_2_0}},
            }
        )
    )
    out = snakemake(work, "-n", "results/effects.csv", configfile=str(configfile), timeout=300)
    assert out.returncode != 0, failed(out)
    text = out.stdout + out.stderr
    assert (
        "config/cbo.yaml: factors.D.levels[0]: server.ysql_yb_enable_cbo: ysql_yb_enable_cbo: "
        "available from v2024.2.4; the pinned build is 2024.2.1.0"
    ) in text, failed(out)
    for name in IN_2024_2_0:
        assert f"server.{name}" not in text, (name, failed(out))


# gflags' FlagValue::ParseFrom (gflags/gflags src/gflags.cc): what each type takes, case by case
GFLAGS_CASES = [
    ("bool", "true", True), ("bool", "YES", True), ("bool", "t", True), ("bool", "0", True),
    ("bool", "on", False), ("bool", "off", False), ("bool", "", False), ("bool", " true", False),
    ("int32", "200", True), ("int32", "-1", True), ("int32", "0x1F", True),
    ("int32", "010", True),  # base 10: a leading 0 is not octal
    ("int32", " 7", True),  # strtoll skips leading white space
    ("int32", "7 ", False), ("int32", "lots", False), ("int32", "1.5", False),
    ("int32", "2147483647", True), ("int32", "2147483648", False), ("int32", "", False),
    ("int32", "16MB", False),  # gflags takes no units
    ("uint32", "-1", False), ("uint32", " -1", False), ("uint32", "4294967296", False),
    ("int64", "9223372036854775807", True), ("int64", "9223372036854775808", False),
    ("uint64", "18446744073709551615", True), ("uint64", "18446744073709551616", False),
    ("double", "0.85", True), ("double", "1e3", True), ("double", "-.5", True),
    ("double", "inf", True), ("double", "0x1p-2", True), ("double", "1e400", False),
    ("double", "1e-400", False), ("double", "4.9e-324", False),  # underflow: a subnormal
    ("double", "0.5x", False), ("double", "1_0", False),
    ("string", "", True), ("string", "on", True),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "text", "takes"), GFLAGS_CASES)
def test_flag_values_are_read_by_gflags_grammar(kind, text, takes):
    from ybscale.backends.yb_catalogue import gflags

    assert gflags.parses(kind, text) is takes


GFLAGS_PROGRAM = """
#include <gflags/gflags.h>
DEFINE_bool(b, false, "");
DEFINE_int32(i32, 0, "");
DEFINE_uint32(u32, 0, "");
DEFINE_int64(i64, 0, "");
DEFINE_uint64(u64, 0, "");
DEFINE_double(d, 0, "");
DEFINE_string(s, "", "");
int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);  // exits 1 on a value its type refuses
  return 0;
}
"""
GFLAG_OF = {"bool": "b", "int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64",
            "double": "d", "string": "s"}  # fmt: skip


def test_the_gflags_grammar_agrees_with_the_real_gflags(tmp_path):
    """The port (`gflags.parses`) against the real thing: every case above, and each value
    ybscale writes for a boolean, given to a program built on the system's gflags (Debian's
    libgflags-dev 2.2.2, the version YugabyteDB's builds link: their flag dumps name
    gflags-2.2.2/src/gflags.cc). Skipped where no C++ compiler or gflags headers are."""

    from ybscale.backends.yb_catalogue import gflags

    compiler = gflags_compiler()
    source = tmp_path / "flags.cc"
    source.write_text(GFLAGS_PROGRAM)
    program = tmp_path / "flags"
    subprocess.run([compiler, "-O0", "-o", str(program), str(source), "-lgflags"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    written = [("bool", gflags.flag_text(v, "bool")) for v in ("on", "off", "YES", "0")]
    cases = [*((k, t) for k, t, _ in GFLAGS_CASES), *written]
    for kind, text in cases:
        done = subprocess.run([str(program), f"--{GFLAG_OF[kind]}={text}"],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        assert (done.returncode == 0) is gflags.parses(kind, text), (kind, text, done.stderr)


def test_a_boolean_flag_is_written_true_or_false_whatever_the_spelling():
    """Issue 46, blocker: `levels: ["off", "on"]` (or a YAML boolean in defaults.server, which
    ybscale writes on/off for PostgreSQL) reached the command line as `--flag=off`, which
    gflags refuses: yb-master and yb-tserver never started. A boolean flag's value is now
    true/false, a typed flag's bad value is refused, a string flag's on stays on, and an untyped
    flag's on/off (no gflags type but a string takes them) is true/false."""
    from ybscale.backends.yb_catalogue import gflags

    split = yb_catalogue.split_server_settings
    for level, written in (("on", "true"), ("off", "false"), ("ON", "true"), ("1", "true"),
                           ("no", "false"), ("false", "false")):  # fmt: skip
        master, tserver, _ = split({"enable_automatic_tablet_splitting": level}, "2024.2")
        assert master == tserver == {"enable_automatic_tablet_splitting": written}, level
        assert gflags.parses("bool", written)
    assert yb_catalogue.flag_type("2024.2", "use_memory_defaults_optimized_for_ysql") == "bool"
    assert yb_catalogue.flag_type("2024.2", "ysql_sequence_cache_method") == "string"
    assert split({"ysql_sequence_cache_method": "on"}, "2024.2")[1] == {
        "ysql_sequence_cache_method": "on"
    }
    assert yb_catalogue.flag_type("2024.2", "durable_wal_write") == "bool"  # 2.17's dump
    assert split({"durable_wal_write": "off"}, "2024.2")[1] == {"durable_wal_write": "false"}
    # a flag whose type a catalogue does not record (every 2024.2 flag has one: issue 59)
    assert gflags.flag_text("off", None) == "false" and gflags.flag_text("7 ", None) == "7 "
    assert split({"ysql_max_connections": "200"}, "2024.2")[1] == {"ysql_max_connections": "200"}
    with pytest.raises(ValueError, match="'maybe' is not a boolean as gflags reads one"):
        split({"enable_automatic_tablet_splitting": "maybe"}, "2024.2")


def test_a_flag_value_its_type_refuses_is_an_error_naming_file_and_field():
    """`server.ysql_max_connections: lots` (an int32 flag) is refused where it was written; so is
    a boolean flag's `maybe`; on/off for a boolean flag and numbers are accepted."""
    errors = yb_catalogue.server_setting_errors(
        {"ysql_max_connections": {"200": "config/d.yaml: factors.C.levels[0]",
                                  "lots": "config/d.yaml: factors.C.levels[1]"},
         "enable_automatic_tablet_splitting": {"off": "config/d.yaml: factors.D.levels[0]",
                                               "maybe": "config/c.yaml: defaults.server."
                                                        "enable_automatic_tablet_splitting"},
         "default_memory_limit_to_ram_ratio": {"0.6": "config/c.yaml: defaults.server.x"}},
        "2024.2.1.0-b185",
    )  # fmt: skip
    where = "YugabyteDB 2024.2 (src/ybscale/backends/yb_catalogue/2024.2.json)"
    assert errors == [
        "config/c.yaml: defaults.server.enable_automatic_tablet_splitting: "
        "server.enable_automatic_tablet_splitting: 'maybe' is not a boolean as gflags reads one "
        "(1, t, true, y, yes or 0, f, false, n, no; on and off are written true and false) "
        f"(bool flag of {where})",
        "config/d.yaml: factors.C.levels[1]: server.ysql_max_connections: 'lots' is not a "
        f"32-bit integer as gflags reads one (int32 flag of {where})",
    ]


def test_every_typed_flag_is_a_flag_of_the_series_with_a_gflags_type():
    catalogue = yb_catalogue.load("2024.2")
    from ybscale.backends.yb_catalogue import gflags

    names = yb_catalogue.master_flags("2024.2") | yb_catalogue.tserver_flags("2024.2")
    for name, entry in catalogue["flag_types"].items():
        assert name in names and entry["type"] in gflags.TYPES, name
        if entry["read"].startswith("<type>"):  # the 2.17 flag dump of YugabyteDB Anywhere
            assert entry["read"].startswith(f"<type>{entry['type']}</type>"), name
            assert entry["path"].endswith("gflags_metadata/2.17/master.xml"), name
            assert entry["defined_in"].endswith(".cc"), name
        else:
            assert entry["read"].startswith(("DEFINE_", "DECLARE_")), name
            assert entry.get("path") or "string index" in entry["note"], name
    assert len(catalogue["flag_types"]) > 150


def test_every_2024_2_flag_has_its_definitions_type_and_a_misnamed_one_is_refused():
    """Issue 59 (open from issue 46): the 28 flags the v2024.2 docs list that yb-master's 2.17
    flag dump has not carry the C++ type of their own DEFINE_* (or DECLARE_*), so each value is
    checked by gflags' grammar at dry run; three of the docs' names have no DEFINE_* at all, the
    source defines the flag under another name (--ciphersuites, --xcluster_svc_queue_length,
    --disable_index_backfill): the docs' name is refused naming the source's, which is a flag."""
    catalogue = yb_catalogue.load("2024.2")
    names = yb_catalogue.master_flags("2024.2") | yb_catalogue.tserver_flags("2024.2")
    assert [n for n in sorted(names) if yb_catalogue.flag_type("2024.2", n) is None] == []
    for name, kind in (("allowed_preview_flags_csv", "string"), ("time_source", "string"),
                       ("cdc_stream_records_threshold_size_bytes", "uint64"),
                       ("max_prometheus_metric_entries", "uint32"),
                       ("reuse_unclosed_segment_threshold_bytes", "int64"),
                       ("ysql_enable_profile", "bool"), ("export_intentdb_metrics", "bool"),
                       ("ciphersuites", "string"), ("xcluster_svc_queue_length", "int32"),
                       ("disable_index_backfill", "bool")):  # fmt: skip
        assert yb_catalogue.flag_type("2024.2", name) == kind, name
    renamed = catalogue["misnamed_in_docs"]
    assert {n: e["defined_as"] for n, e in renamed.items()} == {
        "ciphersuite": "ciphersuites", "xcluster_svc_queue_size": "xcluster_svc_queue_length",
        "ycql_disable_index_backfill": "disable_index_backfill"}  # fmt: skip
    for doc_name, entry in renamed.items():
        assert doc_name not in names and entry["defined_as"] in names
        assert entry["read"].startswith("DEFINE_") and entry["defined_as"] in entry["read"]
        assert all(len(c) == 40 for c in entry["commits"]) and entry["documented_in"]
    where = {"64": "config/d.yaml: factors.E.levels[1]"}
    errors = yb_catalogue.server_setting_errors(
        {"xcluster_svc_queue_size": where, "xcluster_svc_queue_length": where,
         "max_prometheus_metric_entries": {"-1": "config/d.yaml: factors.F.levels[0]"}},
        "2024.2.1.0-b185",
    )  # fmt: skip
    assert len(errors) == 2, errors
    assert errors[0].startswith(
        "config/d.yaml: factors.F.levels[0]: server.max_prometheus_metric_entries: '-1' is not "
        "an unsigned 32-bit integer as gflags reads one (uint32 flag of YugabyteDB 2024.2"
    )
    assert (
        errors[1].startswith(
            "config/d.yaml: factors.E.levels[1]: server.xcluster_svc_queue_size: the v2024.2 docs' "
            "name for --xcluster_svc_queue_length: no DEFINE_* of xcluster_svc_queue_size"
        )
        and "set server.xcluster_svc_queue_length" in errors[1]
    )


# (setting, value, refused): PostgreSQL 11's guc.c (parse_bool, parse_int with its units and
# range, parse_real, the enum lookup) on the GUC table entries of 2024.2's YSQL
YSQL_VALUE_CASES = [
    ("work_mem", "64MB", False), ("work_mem", "65536", False), ("work_mem", "0x10000", False),
    ("work_mem", " 4096 kB ", False), ("work_mem", "1GB", False),
    ("work_mem", "1.5MB", True),  # no fraction before PostgreSQL 12
    ("work_mem", "64mb", True),  # units are case sensitive
    ("work_mem", "32", True),  # below its minimum, 64 kB
    ("work_mem", "4 GBytes", True), ("work_mem", "2TB", True),  # not a unit; past int32
    ("shared_buffers", "128MB", False), ("shared_buffers", "100kB", True),  # 12 blocks < 16
    ("statement_timeout", "5min", False), ("statement_timeout", "5 minutes", True),
    ("statement_timeout", "30s", False), ("statement_timeout", "-1", True),
    ("max_connections", "300", False), ("max_connections", "0", True),
    ("yb_bnl_batch_size", "0", True), ("yb_bnl_batch_size", "1024", False),
    ("default_statistics_target", "100kB", True),  # a setting without a unit
    ("enable_seqscan", "ON", False), ("enable_seqscan", "tru", False),
    ("enable_seqscan", "of", True), ("enable_seqscan", "maybe", True), ("enable_seqscan", "", True),
    ("yb_enable_expression_pushdown", "off", False),
    ("default_transaction_isolation", "REPEATABLE READ", False),
    ("default_transaction_isolation", "snapshot", True),
    ("synchronous_commit", "remote_apply", False), ("wal_level", "hot_standby", False),
    ("random_page_cost", "1.1", False), ("random_page_cost", "4 ", False),
    ("random_page_cost", "-1", True), ("random_page_cost", "1e400", True),
    ("random_page_cost", "4s", True),  # no unit on a real before PostgreSQL 12
    ("checkpoint_completion_target", "1.5", True),
    ("log_line_prefix", "%m [%p] ", False), ("DateStyle", "ISO, DMY", False),
    ("datestyle", "ISO, DMY", False), ("intervalstyle", "iso_8601", False),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value", "refused"), YSQL_VALUE_CASES)
def test_a_ysql_setting_value_is_read_as_postgresql_11_reads_it(name, value, refused):
    """Issue 59 (open from issue 46): YSQL settings' values are type-checked at dry run by their
    GUC table entries (type, range, unit, options) in 2024.2's guc.c, as PostgreSQL 11 parses
    a configuration file's value; a value the server would refuse names the file and field."""
    where = {value: "config/d.yaml: factors.G.levels[1]"}
    errors = yb_catalogue.server_setting_errors({name: where}, "2024.2.1.0-b185")
    assert bool(errors) is refused, errors
    if refused:
        assert errors[0].startswith(f"config/d.yaml: factors.G.levels[1]: server.{name}: "), errors
        assert "YSQL setting of YugabyteDB 2024.2" in errors[0] and "guc.c" in errors[0]


def test_every_settable_ysql_setting_has_its_guc_table_entry():
    """The catalogue types every setting a configuration file can set: 152 booleans and the
    integers, reals, strings and enums of the tables, each integer and real with its range."""
    catalogue = yb_catalogue.load("2024.2")
    types = catalogue["ysql_setting_types"]
    assert set(types) == set(catalogue["ysql_setting_names"])
    kinds = [e["type"] for e in types.values()]
    assert kinds.count("bool") == 152 and kinds.count("enum") == 29, kinds
    for name, entry in types.items():
        if entry["type"] in ("integer", "real"):
            assert entry["min"] <= entry["max"], name
        if entry["type"] == "enum":
            assert entry["options"], name
    assert types["work_mem"] == {"type": "integer", "min": 64, "max": 2**31 - 1, "unit": "kB"}
    assert yb_catalogue.ysql_setting_type("2024.2", "datestyle") == {"type": "string"}
    assert "3fdcd51c3382a8258bffaa88e1ce8b801c6909ca" in catalogue["ysql_setting_types_source"]


def test_a_server_typo_on_gcp_is_rejected_at_dry_run_naming_file_and_field(tmp_path):
    """Issue 20: `server.<typo>` with backend gcp fails `snakemake -n` before any cluster; issue
    36: so does a PostgreSQL 13-15 setting (2024.2's YSQL is PostgreSQL 11.2), while 2024.2's
    own name for what it does passes."""
    work = copy_workflow(tmp_path / "w")
    design = seed_study()
    for name, levels, ok in (("shared_bufers", ["128MB", "256MB"], False),
                             ("enable_memoize", ["on", "off"], False),
                             ("wal_keep_segments", ["0", "8"], True)):  # fmt: skip
        design["factors"]["D"] = {"name": "d", "sets": f"server.{name}", "levels": levels}
        (work / "config" / "typo.yaml").write_text(yaml.safe_dump(design))
        out = snakemake(work, "-n", "results/effects.csv", "--config", "backend=gcp",
                        "design=config/typo.yaml", timeout=300)  # fmt: skip
        if ok:
            assert out.returncode == 0, failed(out)
            continue
        assert out.returncode != 0, failed(out)
        assert (
            f"config/typo.yaml: factors.D.levels[0]: server.{name}: neither a yb-master or "
            "yb-tserver flag nor a YSQL setting of YugabyteDB 2024.2"
        ) in out.stdout + out.stderr, failed(out)


def test_gcp_values_replication_and_disks_are_checked_at_dry_run(tmp_path):
    """Issue 46 at `snakemake -n` with backend gcp, before any cluster: a boolean flag factor at
    off/on, a YAML boolean and a YSQL setting with spaces and % pass; a flag value its type
    refuses, an even replication factor and a Persistent Disk on N4 are refused, each naming
    the file and field."""
    work = copy_workflow(tmp_path / "w")
    design = seed_study()
    design["factors"]["D"] = {"name": "d", "sets": "server.enable_automatic_tablet_splitting",
                              "levels": ["off", "on"]}  # fmt: skip
    (work / "config" / "bools.yaml").write_text(yaml.safe_dump(design))
    cases = {  # name -> (design, config, None: passes | what the error says)
        "passes": ("config/bools.yaml", {"defaults": {"server": {
            "use_memory_defaults_optimized_for_ysql": False, "log_line_prefix": "%m [%p] "}}},
            None),
        "lots": ("config/bools.yaml", {"defaults": {"server": {"ysql_max_connections": "lots"}}},
                 "defaults.server.ysql_max_connections: server.ysql_max_connections: 'lots' is "
                 "not a 32-bit integer as gflags reads one"),
        "even": ("config/even.yaml", {},
                 "config/even.yaml: factors.C.levels[0]: cluster.nodes: 2 with "
                 "cluster.replication on (config/even.yaml: factors.E.levels[1]) is replication "
                 "factor 2"),
        "n4": ("config/bools.yaml", {"gcp": {"machine_types": {"large": "n4-standard-4"}}},
               "gcp.machine_types.large: n4-standard-4: the N4 series takes Hyperdisk only"),
        # a YSQL setting's value as 2024.2's PostgreSQL 11 reads ysql_pg.conf (issue 59)
        "work_mem": ("config/bools.yaml", {"defaults": {"server": {"work_mem": "1.5MB"}}},
                     "defaults.server.work_mem: server.work_mem: '1.5MB' is not an integer "
                     "(PostgreSQL 11 takes no fraction) (integer YSQL setting of YugabyteDB "
                     "2024.2"),
    }  # fmt: skip
    even = seed_study()
    even["factors"]["C"]["levels"] = [2, 5]
    (work / "config" / "even.yaml").write_text(yaml.safe_dump(even))
    for name, (design_file, config, error) in cases.items():
        configfile = work / "config" / f"{name}-config.yaml"
        configfile.write_text(yaml.safe_dump({"backend": "gcp", "design": design_file, **config}))
        out = snakemake(work, "-n", "results/effects.csv", configfile=str(configfile),
                        timeout=300)  # fmt: skip
        if error is None:
            assert out.returncode == 0, failed(out)
            continue
        assert out.returncode != 0, (name, failed(out))
        assert error in out.stdout + out.stderr, (name, failed(out))
        if name in ("lots", "n4", "work_mem"):  # a config value: named with its file
            assert f"{name}-config.yaml" in out.stdout + out.stderr, (name, failed(out))


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
        # each server's own flags in its directory, the flags both set in shared code
        "src/yb/tserver/main.cc": "".join(
            f'DEFINE_NON_RUNTIME_string({f}, "", "x");\n'
            for f in set(regenerate.FLAGS_SET["yb-tserver"])
            - set(regenerate.FLAGS_SET["yb-master"])
        )
        + 'DEFINE_RUNTIME_PG_FLAG(int32, yb_bnl_batch_size, 1024, "x");\n'
        # the name on the macro's next line; a preview PG flag (ysql_<name>)
        + "DEFINE_NON_RUNTIME_bool(\n    use_memory_defaults_optimized_for_ysql, false,\n"
        '    "x");\n'
        + "DEFINE_RUNTIME_PG_PREVIEW_FLAG(bool, yb_enable_optimizer_statistics, false,\n"
        '    "x");\n',
        "src/yb/master/main.cc": "".join(
            f'DEFINE_NON_RUNTIME_string({f}, "", "x");\n'
            for f in set(regenerate.FLAGS_SET["yb-master"])
            - set(regenerate.FLAGS_SET["yb-tserver"])
        )
        + 'DEFINE_RUNTIME_int32(load_balancer_max_concurrent_moves, 2, "x");\n',
        "src/yb/common/common_flags.cc": "".join(
            f'DEFINE_NON_RUNTIME_string({f}, "", "x");\n'
            for f in set(regenerate.FLAGS_SET["yb-master"])
            & set(regenerate.FLAGS_SET["yb-tserver"])
        )
        + "DEFINE_RUNTIME_AUTO_bool(enable_automatic_tablet_splitting, kExternal, false, true,\n"
        '    "If false, disables automatic tablet splitting");\n',
        "src/yb/tserver/main-test.cc": 'DEFINE_test_flag(bool, only_in_tests, false, "x");\n',
        # guc.c's layout: one entry per setting; debug-only ones under #ifdef, read-only ones
        # internal or GUC_DISALLOW_IN_FILE
        regenerate.GUC_FILES[0]: (
            '{\n  {"work_mem", PGC_USERSET, RESOURCES_MEM,\n    gettext_noop("x"), NULL},\n'
            "  &work_mem, 4096, 64, MAX_KILOBYTES, NULL, NULL, NULL\n},\n"
            "#ifdef LOCK_DEBUG\n"
            '{\n  {"trace_locks", PGC_SUSET, DEVELOPER_OPTIONS,\n    gettext_noop("x"), NULL,\n'
            "    GUC_NOT_IN_SAMPLE\n  },\n  &Trace_locks, false, NULL, NULL, NULL\n},\n"
            "#endif\n"
            "#ifdef TRACE_SORT\n"
            '{\n  {"trace_sort", PGC_USERSET, DEVELOPER_OPTIONS,\n    gettext_noop("x"), NULL},\n'
            "  &trace_sort, false, NULL, NULL, NULL\n},\n"
            "#endif\n"
            '{\n  {"server_version_num", PGC_INTERNAL, PRESET_OPTIONS,\n    gettext_noop("x"),\n'
            "    NULL, GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE\n  },\n  &v, 1, 1, 1\n},\n"
            '{\n  {"transaction_isolation", PGC_USERSET, CLIENT_CONN_STATEMENT,\n'
            '    gettext_noop("x"),\n    NULL,\n    GUC_NO_RESET_ALL | GUC_DISALLOW_IN_FILE\n'
            '  },\n  &s, "default", NULL, NULL, NULL\n},\n'
            '{\n  {\n    "optimize_bounded_sort", PGC_USERSET, QUERY_TUNING_METHOD,\n'
            '    gettext_noop("x"), NULL},\n  &b, true, NULL, NULL, NULL\n},\n'
            '{\n  {"yb_enable_expression_pushdown", PGC_USERSET, QUERY_TUNING_METHOD,\n'
            '    gettext_noop("Push supported expressions down to DocDB."), NULL},\n'
            "  &yb_enable_expression_pushdown, true, NULL, NULL, NULL\n},\n"
        ),
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
    tserver, master = catalogue["tserver_flag_names"], catalogue["master_flag_names"]
    assert "ysql_yb_bnl_batch_size" in tserver and "ysql_yb_bnl_batch_size" not in master
    assert "start_cql_proxy" in tserver and "start_cql_proxy" not in master
    assert "load_balancer_max_concurrent_moves" in master
    assert "load_balancer_max_concurrent_moves" not in tserver
    assert (
        "enable_automatic_tablet_splitting" in master
        and "enable_automatic_tablet_splitting" in tserver
    )
    assert "only_in_tests" not in tserver and "only_in_tests" not in master
    sources = catalogue["flag_sources"]
    assert set(sources) == set(master) | set(tserver)
    assert sources["load_balancer_max_concurrent_moves"] == {
        "servers": ["yb-master"], "defined_in": "src/yb/master/main.cc", "tag": "2024.2.1.0-b185"
    }  # fmt: skip
    assert sources["enable_automatic_tablet_splitting"]["servers"] == ["yb-master", "yb-tserver"]
    types = catalogue["flag_types"]
    assert types["ysql_yb_bnl_batch_size"] == {
        "type": "int32", "defined_in": "src/yb/tserver/main.cc", "tag": "2024.2.1.0-b185"
    }  # fmt: skip
    assert types["use_memory_defaults_optimized_for_ysql"]["type"] == "bool"
    assert types["ysql_yb_enable_optimizer_statistics"]["type"] == "bool"
    assert "ysql_yb_enable_optimizer_statistics" in tserver
    assert types["enable_automatic_tablet_splitting"]["type"] == "bool"
    assert types["load_balancer_max_concurrent_moves"]["type"] == "int32"
    assert "TEST_only_in_tests" not in types
    assert catalogue["ysql_setting_names"] == [
        "optimize_bounded_sort", "trace_sort", "work_mem", "yb_enable_expression_pushdown"
    ]  # fmt: skip
    assert catalogue["ysql_setting_names_not_settable"] == [
        "server_version_num", "transaction_isolation"
    ]  # fmt: skip
    assert catalogue["version_string"] == "PostgreSQL 11.2-YB-2024.2.1.0-b0"


@pytest.mark.parametrize("series", yb_catalogue.SUPPORTED)
def test_the_vendored_catalogue_matches_the_tag_when_a_checkout_is_at_hand(series):
    """With YBSCALE_YB_GIT_DIR (a yugabyte-db clone holding the tags), the vendored names are the
    ones regenerate.py reads at the tag: its YSQL settings exactly, its documented flags among
    the flags the tag defines for each server."""

    git_dir = os.environ.get("YBSCALE_YB_GIT_DIR")
    if not git_dir:
        pytest.skip("no yugabyte-db checkout (YBSCALE_YB_GIT_DIR)")
    vendored = yb_catalogue.load(series)
    built = regenerate.build(git_dir, vendored["tag"], series)
    assert built["postgres_base"] == vendored["postgres_base"]
    assert built["ysql_setting_names"] == vendored["ysql_setting_names"]
    for key in ("master_flag_names", "tserver_flag_names"):
        assert set(vendored[key]) <= set(built[key]), key


def test_ysql_setting_names_are_read_without_regard_to_case():
    """PostgreSQL compares setting names case-insensitively (guc.c, guc_name_compare), and a
    knob name is lower case (design knobs): `server.datestyle` is YSQL's DateStyle, accepted
    at dry run; a name in neither case is still refused."""
    assert "datestyle" in yb_catalogue.ysql_settings("2024.2")
    assert "DateStyle" in yb_catalogue.ysql_settings("2024.2")
    where = {"ISO, DMY": "config/config.yaml: defaults.server.datestyle"}
    assert yb_catalogue.server_setting_errors({"datestyle": where}, "2024.2.1.0-b185") == []
    refused = yb_catalogue.server_setting_errors({"datestile": where}, "2024.2.1.0-b185")
    assert refused and "server.datestile: neither" in refused[0]
