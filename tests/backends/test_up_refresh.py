"""`up` on a stack whose VMs Compute Engine deleted (max_run_duration): the real Pulumi engine,
with a dynamic-provider resource standing in for a VM (a file: created by `create`, found
missing by `read`, which is what a refresh asks the provider)."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi.dynamic
import pytest
import test_stacks
from test_stacks import NOW, cloudfree_program, quiet

from ybscale.backends.gcp import stacks

engine = test_stacks.engine  # the real Pulumi engine with a local file backend (fixture)


@pytest.fixture
def dynamic_providers(engine, tmp_path, monkeypatch):
    """The Python dynamic-provider plugin the Pulumi distribution ships beside its CLI
    (pulumi-resource-pulumi-python: `python3 -u -m pulumi.dynamic "$@"`), which the engine
    built from source lacks; this interpreter's, on PATH, importing from tests/."""
    import os
    import sys

    bindir = tmp_path / "plugins"
    bindir.mkdir()
    shim = bindir / "pulumi-resource-pulumi-python"
    here = Path(__file__).resolve()  # the provider class below is imported from here
    tests = os.pathsep.join(str(p) for p in (here.parent, here.parents[1]))
    shim.write_text(
        f"#!/bin/sh\nPYTHONPATH={tests}\nexport PYTHONPATH\n"
        f'exec {sys.executable} -u -m pulumi.dynamic "$@"\n'
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return engine


class FileVmProvider(pulumi.dynamic.ResourceProvider):
    """A 'VM' that is a file: reading it back finds it gone once the file is deleted."""

    def create(self, props):
        Path(props["path"]).write_text("running\n")
        return pulumi.dynamic.CreateResult(id_=props["path"], outs=props)

    def read(self, id_, props):
        if not Path(id_).exists():  # deleted behind Pulumi's back (max_run_duration)
            return pulumi.dynamic.ReadResult(id_=None, outs={})
        return pulumi.dynamic.ReadResult(id_=id_, outs=props)

    def delete(self, id_, props):
        Path(id_).unlink(missing_ok=True)


class FileVm(pulumi.dynamic.Resource):
    def __init__(self, name, path):
        super().__init__(FileVmProvider(), name, {"path": path})


def program_with_vm(path: Path):
    def program():
        cloudfree_program()
        FileVm("tserver-0-vm", str(path))

    return program


def test_real_engine_up_brings_back_vms_that_were_deleted_behind_its_back(
    dynamic_providers, tmp_path
):
    """Issue 20, item 9: without a refresh `up` says "no changes" for the deleted VM."""
    vm = tmp_path / "vm"
    combo = "nodes3-small-reploff"
    program = program_with_vm(vm)
    engine = dynamic_providers
    stacks.up(combo, engine, now=NOW, log=quiet, program=program)
    assert vm.read_text() == "running\n"
    vm.unlink()  # Compute Engine deleted it at max_run_duration
    said = []
    stacks.up(combo, engine, now=NOW, log=said.append, program=program)
    assert vm.exists(), "\n".join(said)  # created again
    assert stacks.destroy(combo, engine, log=quiet, program=program)
    assert not vm.exists()
