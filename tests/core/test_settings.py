"""The one settings loader: schema defaults filled once, errors naming the field, read-only."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, copy_workflow, failed, settings_with, shipped_config, snakemake

from ybscale import config_sources, settings


def user_config() -> dict:
    return shipped_config()


def test_defaults_come_from_the_schema_when_the_config_leaves_them_out():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())  # as the user keeps it
    assert "warmup" not in config["measurement"] and "local" not in config
    loaded = settings.load(config)
    measurement = settings.schema("config")["properties"]["measurement"]["properties"]
    assert loaded["measurement"]["warmup"] == measurement["warmup"]["default"]
    assert dict(loaded["local"]["cpu"]) == {"small": 0.25, "large": 0.5}


def test_loaded_settings_cannot_change_at_any_depth():
    loaded = settings_with()
    with pytest.raises(TypeError, match="read-only"):
        loaded["backend"] = "gcp"
    with pytest.raises(TypeError, match="read-only"):
        loaded["measurement"]["seconds"] = 1
    with pytest.raises(TypeError, match="read-only"):
        loaded["measurement"]["clients"].append(64)
    with pytest.raises(TypeError, match="read-only"):
        loaded["local"].update(data_root="/tmp")
    before = loaded["measurement"]["seconds"]
    changed = {**loaded, "measurement": {**loaded["measurement"], "seconds": before + 1}}
    assert changed["measurement"]["seconds"] == before + 1
    assert loaded["measurement"]["seconds"] == before


def test_loaded_settings_travel_as_plain_data():
    """JSON, pickle, deepcopy and repr see the same data as a dict."""
    loaded = settings_with()
    plain = settings.thaw(loaded)
    assert json.loads(json.dumps(loaded)) == plain
    assert repr(loaded) == repr(plain)  # Snakemake compares params by their value
    again = pickle.loads(pickle.dumps(loaded))
    assert again == plain and isinstance(again, settings.Frozen)
    assert copy.deepcopy(loaded) == plain
    assert yaml.safe_load(yaml.safe_dump(settings.thaw(loaded))) == plain


def test_the_jobs_settings_file_is_named_by_its_content_and_reads_back_the_same(tmp_path):
    """What the cluster and measuring jobs read: the same settings, the same file (written
    once); other settings, a file of their own, so a run never changes another's."""
    loaded = settings_with()
    path = settings.write_file(loaded, tmp_path)
    again = settings.read_file(path)
    assert again == settings.thaw(loaded) and isinstance(again, settings.Frozen)
    with pytest.raises(TypeError, match="read-only"):
        again["measurement"]["seconds"] = 1
    written = os.stat(path).st_mtime_ns
    assert settings.write_file(settings_with(), tmp_path) == path
    assert os.stat(path).st_mtime_ns == written  # not rewritten
    measurement = {**user_config()["measurement"], "seconds": 7}
    other = settings.write_file(settings_with(measurement=measurement), tmp_path)
    assert other != path and settings.read_file(other)["measurement"]["seconds"] == 7
    assert settings.read_file(path)["measurement"]["seconds"] == loaded["measurement"]["seconds"]
    names = sorted(os.path.basename(p) for p in (path, other))
    assert sorted(p.name for p in tmp_path.iterdir()) == names  # no temporary file left


def test_a_key_json_would_change_is_refused_naming_where_nothing_written(tmp_path):
    """A number as a key would come back as a string: refused, naming where it is."""
    with pytest.raises(settings.SettingsError, match=r"settings\.local\.cpu\[1\]: 2: a key"):
        settings.write_file({"local": {"cpu": [{"a": 1}, {2: "two"}]}}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_invalid_field_is_named_with_its_file():
    config = user_config()
    config["measurement"]["precision"] = 2
    with pytest.raises(settings.SettingsError, match=r"config/config.yaml: measurement.precision"):
        settings.load(config)


def test_max_clients_defaults_to_four_times_the_grid_and_may_not_be_below_it():
    config = user_config()
    config["measurement"]["clients"] = [1, 4, 12]
    assert settings.load(config)["measurement"]["max_clients"] == 48
    config["measurement"]["max_clients"] = 100
    assert settings.load(config)["measurement"]["max_clients"] == 100
    config["measurement"]["max_clients"] = 8
    below = r"config/config.yaml: measurement.max_clients: 8 is below .* \(12\)"
    with pytest.raises(settings.SettingsError, match=below):
        settings.load(config)


def test_the_latency_bound_response_needs_its_target():
    config = user_config()
    config["analysis"]["ceiling"] = "latency_bound"
    with pytest.raises(settings.SettingsError, match=r"analysis.latency_slo_ms: required"):
        settings.load(config)
    config["analysis"]["latency_slo_ms"] = 20
    assert settings.load(config)["analysis"]["latency_slo_ms"] == 20


def test_an_error_names_the_layer_that_set_the_value():
    sources = config_sources.ConfigSources(
        (
            ("config/config.yaml", {"measurement": {"max_clients": None, "clients": [1, 4]}}),
            ("other.yaml", {"measurement": {"max_clients": 2}}),
            ("--config", {"analysis": {"ceiling": "latency_bound"}}),
        )
    )
    assert sources.of("measurement.max_clients") == "other.yaml"
    assert sources.of("measurement.clients[1]") == "config/config.yaml"
    assert sources.of("analysis.ceiling") == "--config"
    assert sources.of("analysis.alpha") == "config/config.yaml"  # a schema default
    config = user_config()
    config["measurement"].update(clients=[1, 4], max_clients=2)
    config["analysis"]["ceiling"] = "latency_bound"
    config_sources.use_sources(sources)
    try:
        with pytest.raises(settings.SettingsError, match=r"^other.yaml: measurement.max_clients"):
            settings.load(config)
        config["measurement"]["max_clients"] = None
        message = r"config/config.yaml: analysis.latency_slo_ms: required .*\(--config: analysis"
        with pytest.raises(settings.SettingsError, match=message):
            settings.load(config)
    finally:
        config_sources.use_sources(config_sources.ConfigSources())


def test_a_list_item_or_a_value_inside_one_is_named_with_the_layer_that_gave_the_list():
    """A later layer's list replaces an earlier one's whole (Snakemake merges so): its items,
    and the values inside them, are that layer's, however the error writes the index."""
    sources = config_sources.ConfigSources(
        (
            ("config/config.yaml", {"measurement": {"clients": [1, 2, 4]}, "x": {"y": [{}]}}),
            ("my.yaml", {"measurement": {"clients": [1, 2, -4]}, "x": {"y": [{"z": 0}]}}),
        )
    )
    for field in ("measurement.clients.2", "measurement.clients[2]", "x.y.0.z", "x.y[0].z"):
        assert sources.of(field) == "my.yaml", field
    assert sources.of("x.y.0.w") == "config/config.yaml"  # set by no layer: a schema default


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--configfile", "config/other.yaml"], "config/other.yaml: measurement.max_clients: 3 is"),
        (
            ["--configfile", "config/config.yaml", "config/mine.yaml"],
            "config/mine.yaml: measurement.clients.2: -4 is less than the minimum of 1",
        ),
        (["--config", "measurement={max_clients: 3}"], "--config: measurement.max_clients: '3'"),
        (["--config", "defaults={dataset: {rows: -5}}"], "--config: defaults.dataset.rows: '-5'"),
        (
            ["--config", "design=config/bad.yaml"],
            "config/bad.yaml: line 3, column 1: did not find expected ',' or '}' (invalid YAML)",
        ),
        (["--config", "block=2"], "--config block=2: config/design.yaml has no blocks"),
    ],
)
def test_a_dry_run_names_the_file_or_option_a_bad_value_came_from(tmp_path, args, expected):
    """The error is all Snakemake prints on stderr beside its notices, one line per problem
    naming the file or option: no traceback, no `DesignError in file "rules/common.smk"`."""
    work = copy_workflow(tmp_path)
    (work / "config" / "other.yaml").write_text("measurement:\n  max_clients: 3\n")
    (work / "config" / "mine.yaml").write_text("measurement: {clients: [1, 2, -4]}\n")
    (work / "config" / "bad.yaml").write_text("factors:\n  A: {name: nodes, levels: [3, 5]\n")
    out = snakemake(work, "-n", *args, timeout=120)
    assert out.returncode != 0
    assert expected in out.stderr + out.stdout, failed(out)
    lines = [line for line in out.stderr.splitlines() if not line.startswith(SNAKEMAKE_NOTICES)]
    source = expected.split(":")[0]  # the file or option: on every line, one per problem
    assert lines[0].startswith(expected), failed(out)
    assert all(line.startswith(f"{source}: ") for line in lines), failed(out)
    assert "Traceback" not in out.stdout + out.stderr and ".smk" not in out.stdout + out.stderr
    assert not (work / "results").exists()  # nothing ran


# what Snakemake says of its own before reading the Snakefile
SNAKEMAKE_NOTICES = ("Using workflow specific profile", "Config file ")


VALIDATION_PROBE = """
import json, sys
from ybscale.validation import schema_errors
schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
data = json.loads(sys.argv[1])
if sys.argv[2] == "tuple":
    data = {"n": (1,)}
errors = [e.message for e in schema_errors(schema, data)]
print(json.dumps({"errors": errors, "jsonschema": "jsonschema" in sys.modules}))
"""


def _validate_in_a_fresh_process(cache, data: str, kind: str = "json") -> dict:
    env = {**os.environ, "YBSCALE_CACHE": str(cache)}
    argv = [sys.executable, "-c", VALIDATION_PROBE, data, kind]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def test_a_pass_is_remembered_and_a_failure_is_checked_every_time(tmp_path):
    """The second validation of the same data skips jsonschema; bad data (or data JSON cannot
    tell apart, a tuple) is validated again every time and still fails."""
    first = _validate_in_a_fresh_process(tmp_path, '{"n": 1}')
    assert first == {"errors": [], "jsonschema": True}
    assert len(list((tmp_path / "valid").iterdir())) == 1
    again = _validate_in_a_fresh_process(tmp_path, '{"n": 1}')
    assert again == {"errors": [], "jsonschema": False}
    for _ in range(2):
        bad = _validate_in_a_fresh_process(tmp_path, '{"n": "one"}')
        assert bad["jsonschema"] and bad["errors"] == ["'one' is not of type 'integer'"]
        tupled = _validate_in_a_fresh_process(tmp_path, "{}", "tuple")
        assert tupled["jsonschema"] and tupled["errors"] == ["(1,) is not of type 'integer'"]
    assert len(list((tmp_path / "valid").iterdir())) == 1
