"""`ybscale`: every verb reports a user's error as one line naming the file (and the field,
line or column), never a traceback; `ybscale design` works on any valid design, an
analysis-only one (factors without `sets:`) too."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pandas as pd
import pytest
from conftest import REPO

from ybscale import cli

ANALYSIS_ONLY = "factors:\n  A: {name: f1, levels: [lo, hi]}\n  B: {name: f2, levels: [lo, hi]}\n"
RESPONSES = "run,tps\nrun01,1\nrun02,2\nrun03,3\nrun04,5\n"

# verb -> (files to write, arguments, what the one line says)
BAD = {
    "design": (
        {"D.yaml": "factors:\n  A: {name: f1, levels: [lo, hi]\n"},
        ["D.yaml", "out"],
        "D.yaml: line 3, column 1: ",
    ),
    "analyze": (
        {"D.yaml": ANALYSIS_ONLY, "responses.csv": RESPONSES},
        ["--design", "D.yaml", "--responses", "responses.csv", "--out", "out"]
        + ["--run-order", "order.csv"],
        "--run-order: order.csv: no such file",
    ),
    "usl": (
        {"points.csv": "clients,tps\n1,10\n2,\n4,30\n"},
        ["--input", "points.csv"],
        "points.csv: column 'tps' line 3: missing value",
    ),
    "plan": (
        {"my.yaml": "measurement: {clients: [1, 2, -4]}\n"},
        ["--config", str(REPO / "config" / "config.yaml"), "--configfile", "my.yaml"],
        "my.yaml: measurement.clients.2: -4 is less than the minimum of 1",
    ),
    "reap": (
        {"gcp.yaml": "backend: gcp\ngcp: {region: [us\n"},
        ["--config", "gcp.yaml", "--dry-run"],
        "gcp.yaml: line 3, column 1: ",
    ),
    "next": (
        {"D.yaml": ANALYSIS_ONLY, "results/effects.csv": "term,effect\nA,1.5\n"},
        ["--analysis", "results", "--design", "D.yaml"],
        "results/effects.csv: missing column(s) active",
    ),
    "compare": (
        {"a/effects.csv": 'term,effect\n"A,1\n', "b/effects.csv": 'term,effect\n"A,1\n'},
        ["a", "b"],
        "a/effects.csv: cannot read CSV",
    ),
}


def ybscale(cwd, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ybscale.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_verb_has_a_bad_input_here():
    assert set(BAD) == set(cli.COMMANDS)


@pytest.mark.parametrize("verb", BAD)
def test_a_bad_input_is_one_line_naming_the_file_never_a_traceback(tmp_path, verb):
    files, args, expected = BAD[verb]
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = ybscale(tmp_path, verb, *args)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and expected in lines[0], out.stderr


def test_design_writes_every_output_of_an_analysis_only_design(tmp_path):
    """Factors that set no knob: the sign table, aliases and summary are written (the summary
    says the factor sets nothing); only a study that runs the design needs knobs."""
    (tmp_path / "D.yaml").write_text(ANALYSIS_ONLY)
    out = ybscale(tmp_path, "design", "D.yaml", "--sign-table", "s.csv", "--aliases", "a.csv",
                  "--summary", "d.json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    summary = json.loads((tmp_path / "d.json").read_text())
    assert [f["sets"] for f in summary["factors"]] == [None, None]
    assert list(pd.read_csv(tmp_path / "s.csv")["f1"]) == ["lo", "hi", "lo", "hi"]


def test_a_fault_of_ybscale_is_one_line_too_and_says_how_to_see_it(monkeypatch, capsys):
    def broken(argv):
        raise TypeError("unsupported operand")

    monkeypatch.setitem(sys.modules, "ybscale_broken", types.SimpleNamespace(main=broken))
    monkeypatch.setitem(cli.COMMANDS, "broken", ("ybscale_broken", "a command with a bug"))
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    assert cli.main(["broken"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "ybscale broken: TypeError: unsupported operand "
        f"(a fault of ybscale: {cli.TRACEBACK_ENV}=1 shows it)"
    ]
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises(TypeError):
        cli.main(["broken"])


@pytest.mark.parametrize("verb", sorted(cli.COMMANDS))
def test_every_verbs_help_describes_it_in_whole_sentences(verb, capsys):
    """`ybscale VERB --help` says what the verb does in whole sentences: its description (the
    paragraph after the usage) ends a sentence, never cut at the end of a docstring's first
    line (`ybscale plan --help` stopped at "(the gcp plan: clusters, slots,")."""
    with pytest.raises(SystemExit) as exc:
        cli.main([verb, "--help"])
    assert exc.value.code == 0
    paragraphs = capsys.readouterr().out.split("\n\n")
    assert paragraphs[0].startswith("usage: ")
    text = " ".join(paragraphs[1].split())
    assert not text.startswith(("positional arguments", "options")), paragraphs
    assert text.endswith((".", "?", "!")), text
