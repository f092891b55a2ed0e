"""Where each config value came from: the files (and command-line options) merged into the
config, so that an error names the one that set the field (``other.yaml: measurement.max_clients``)
rather than config/config.yaml. The Snakefile records Snakemake's layers (`use_sources`), a
`ybscale` command the files it read (`sources_in_use`); `source_of(field)` names the field's."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from ybscale.errors import UserError

CONFIG_SOURCE = "config/config.yaml"


def read_yaml(text: str) -> object:
    """YAML with libyaml's safe loader when PyYAML has it (several times faster: every dry run
    reads the schemas and the design), else the pure-Python one; the same documents."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


class FileError(UserError):
    """A file that cannot be read, or is not YAML; the message names it (one line)."""


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: ``line 2, column 1: did not find expected ',' or ']'``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return where + " ".join(str(problem).split())


def read_yaml_file(path: str | Path) -> object:
    """The YAML document in `path`; FileError naming the file (and the line of a YAML error)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return read_yaml(text)
    except yaml.YAMLError as exc:
        raise FileError(f"{path}: {yaml_problem(exc)} (invalid YAML)") from None


@dataclass(frozen=True)
class ConfigSources:
    """Where the config's values came from: (name, data) layers in the order they were merged, a
    later one winning (Snakemake: the Snakefile's configfile, each --configfile, then --config)."""

    layers: tuple[tuple[str, Mapping], ...] = ((CONFIG_SOURCE, {}),)

    def of(self, field: str) -> str:
        """The file (or ``--config``) that set `field` (dotted: ``measurement.max_clients``; a
        list item ``measurement.clients.2`` or ``measurement.clients[2]``), else the first
        layer's: where a schema default is overridden. A layer that gives a list gives all of
        it (a later layer's list replaces an earlier one's, as Snakemake merges them)."""
        keys = [k for k in re.sub(r"\[([^]]*)\]", r".\1", field).split(".") if k]
        for name, data in reversed(self.layers):
            node = data
            for key in keys:
                if isinstance(node, Mapping) and key in node:
                    node = node[key]
                elif _is_list(node) and key.isdigit() and int(key) < len(node):
                    node = node[int(key)]
                else:
                    break
            else:
                if keys:
                    return name
        return self.layers[0][0]


def _is_list(node: object) -> bool:
    return isinstance(node, Sequence) and not isinstance(node, (str, bytes))


_sources = ConfigSources()


def use_sources(sources: ConfigSources) -> None:
    """Record where the config being loaded came from (the Snakefile calls it once it has read
    its configfile; `ybscale` commands with the file they read)."""
    global _sources
    _sources = sources


@contextmanager
def sources_in_use(sources: ConfigSources):
    """`use_sources` for the duration of a `with` block (a command's), then the previous ones."""
    before = _sources
    use_sources(sources)
    try:
        yield sources
    finally:
        use_sources(before)


def source_of(field: str) -> str:
    """``<file>: <field>`` for an error about `field`: the file (or ``--config``) its value came
    from (see `use_sources`)."""
    return f"{_sources.of(field)}: {field}"


def _shown(path) -> str:
    """`path` relative to the working directory when inside it, else absolute."""
    path = os.path.abspath(path)
    inside = path.startswith(os.getcwd() + os.sep)
    return os.path.relpath(path) if inside else path


def snakemake_sources(workflow) -> ConfigSources:
    """A Snakemake workflow's config layers: its own configfile(s), then each --configfile, then
    --config (the order Snakemake merges them in)."""
    settings = workflow.config_settings
    given = [_shown(p) for p in settings.configfiles]
    own = [p for p in map(_shown, workflow.configfiles) if p not in given]
    return file_sources(own + given, settings.config, "--config")


def file_sources(
    paths: Sequence[str], overrides: Mapping | None = None, option: str = "--set"
) -> ConfigSources:
    """The layers of config files merged in this order, then the `overrides` an `option` gave."""
    layers = [(str(path), read_yaml_file(path) or {}) for path in paths]
    return ConfigSources((*layers, (option, dict(overrides or {}))))
