"""Tests for ybscale.design.factorial: sign table, defining relation, aliases, checks, output."""

import copy
import json
import math
import subprocess
import sys
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from designs import design as make_design
from designs import seed_design_path, seed_study

from ybscale.design.factorial import (
    Design,
    DesignError,
    Factor,
    design_from_dict,
    load_design,
    main,
)

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, data: dict, name: str = "bad_design.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def seed() -> Design:
    return load_design(seed_design_path())


# --------------------------------------------------------------------------- seed design


def test_seed_factors(seed):
    assert seed.base == ["A", "B", "C", "D"]
    assert seed.generators == {"E": "BC", "F": "AB"}
    assert seed.n_rows == 16
    assert [f.name for f in seed.factors] == [
        "operation_size",
        "workload",
        "nodes",
        "isolation",
        "replication",
        "node_size",
    ]
    assert seed.factor("D").levels == ("read committed", "repeatable read")
    assert seed.factor("E").levels == ("off", "on")  # quoted in YAML, not booleans


def test_seed_sign_table(seed):
    table = seed.sign_table()
    assert table.index.name == "run"
    assert list(table.index) == [f"run{i:02d}" for i in range(1, 17)]
    assert list(table.columns) == ["row", "replicate", "A", "B", "C", "D", "E", "F"]
    assert list(table["row"]) == list(range(1, 17))
    assert set(table["replicate"]) == {1}
    # Yates order: A alternates fastest, then B, C, D
    assert list(table["A"]) == [-1, 1] * 8
    assert list(table["B"]) == ([-1] * 2 + [1] * 2) * 4
    assert list(table["C"]) == ([-1] * 4 + [1] * 4) * 2
    assert list(table["D"]) == [-1] * 8 + [1] * 8
    assert (table["E"] == table["B"] * table["C"]).all()
    assert (table["F"] == table["A"] * table["B"]).all()
    cols = ["A", "B", "C", "D", "E", "F"]
    assert list(table.loc["run01", cols]) == [-1, -1, -1, -1, 1, 1]
    assert list(table.loc["run02", cols]) == [1, -1, -1, -1, 1, -1]
    assert list(table.loc["run07", cols]) == [-1, 1, 1, -1, 1, -1]
    assert list(table.loc["run12", cols]) == [1, 1, -1, 1, -1, 1]
    assert list(table.loc["run16", cols]) == [1, 1, 1, 1, 1, 1]
    assert table[cols].dtypes.map(pd.api.types.is_integer_dtype).all()


def test_seed_rows_match_seed_table3(seed):
    """Same 16 sign combinations as the seed report's Table 3 (which lists A slowest)."""
    table3 = {
        (a, b, c, d, b * c, a * b) for a, b, c, d in product([-1, 1], repeat=4)
    }  # E = BC, F = AB
    ours = {tuple(r) for r in seed.sign_table()[["A", "B", "C", "D", "E", "F"]].values.tolist()}
    assert ours == table3


def test_seed_levels_and_signs(seed):
    assert seed.signs("run01") == {"A": -1, "B": -1, "C": -1, "D": -1, "E": 1, "F": 1}
    assert seed.levels("run01") == {
        "isolation": "read committed",
        "node_size": "large",
        "nodes": 3,
        "operation_size": 1,
        "replication": "on",
        "workload": "read",
    }
    assert list(seed.levels("run16")) == sorted(seed.levels("run16"))
    assert seed.levels("run16")["isolation"] == "repeatable read"


def test_seed_defining_relation(seed):
    assert seed.defining_relation() == ["ABF", "BCE", "ACEF"]
    assert seed.defining_relation_string() == "I = ABF = BCE = ACEF"
    assert seed.resolution == 3


# Written by hand: each base word times I, ABF, BCE, ACEF; sorted by (length, letters).
SEED_ALIASES = [
    ("A", "A = BF = CEF = ABCE"),
    ("B", "B = AF = CE = ABCEF"),
    ("F", "F = AB = ACE = BCEF"),  # AB
    ("C", "C = BE = AEF = ABCF"),
    ("AC", "AC = EF = ABE = BCF"),
    ("E", "E = BC = ACF = ABEF"),  # BC
    ("AE", "AE = CF = ABC = BEF"),  # ABC
    ("D", "D = ABDF = BCDE = ACDEF"),
    ("AD", "AD = BDF = CDEF = ABCDE"),
    ("BD", "BD = ADF = CDE = ABCDEF"),
    ("DF", "DF = ABD = ACDE = BCDEF"),  # ABD
    ("CD", "CD = BDE = ADEF = ABCDF"),
    ("ACD", "ACD = DEF = ABDE = BCDF"),
    ("DE", "DE = BCD = ACDF = ABDEF"),  # BCD
    ("ADE", "ADE = CDF = ABCD = BDEF"),  # ABCD
]


def test_seed_alias_structure(seed):
    groups = seed.alias_groups()
    assert len(groups) == seed.n_rows - 1
    assert [(t, " = ".join(m)) for t, m in groups] == SEED_ALIASES
    for term, alias in SEED_ALIASES:
        assert seed.alias_string(term) == alias
    assert seed.alias_string("BC") == "E = BC = ACF = ABEF"  # any member finds its group
    with pytest.raises(KeyError):
        seed.alias_string("G")


def test_seed_aliases_are_equal_columns(seed):
    """Every member's column (product of its letters) equals the term's column."""
    table = seed.sign_table()

    def col(word):
        sign = -1 if word.startswith("-") else 1
        out = pd.Series(sign, index=table.index)
        for letter in word.lstrip("-"):
            out = out * table[letter]
        return out

    for term, members in seed.alias_groups():
        for member in members:
            assert (col(member) == col(term)).all(), (term, member)


def test_seed_model_matrix(seed):
    mm = seed.model_matrix()
    assert mm.index.name == "run"
    assert list(mm.index) == seed.run_ids
    assert list(mm.columns) == [t for t, _ in SEED_ALIASES]
    table = seed.sign_table()
    assert (mm["F"] == table["A"] * table["B"]).all()
    assert (mm["ADE"] == table["A"] * table["D"] * table["E"]).all()
    # orthogonal +-1 columns: M'M = 16 I
    gram = (mm.T @ mm).values
    assert (gram == 16 * np.eye(len(mm.columns), dtype=int)).all()


# --------------------------------------------------------------------------- other designs


def test_2_7_4_resolution_iii():
    d = make_design("ABCDEFG", {"D": "AB", "E": "AC", "F": "BC", "G": "ABC"})
    assert d.n_rows == 8
    assert d.resolution == 3
    assert len(d.defining_relation()) == 15
    assert d.defining_relation()[:4] == ["ABD", "ACE", "AFG", "BCF"]
    # A times the 15 defining words, by hand
    assert d.alias_string("A") == (
        "A = BD = CE = FG = BCG = BEF = CDF = DEG = ABCF = ABEG = ACDG = ADEF"
        " = ABCDE = ABDFG = ACEFG = BCDEFG"
    )
    assert len(d.alias_groups()) == 7


def test_2_5_1_resolution_v():
    d = make_design("ABCDE", {"E": "ABCD"})
    assert d.defining_relation() == ["ABCDE"]
    assert d.resolution == 5
    assert d.alias_string("A") == "A = BCDE"
    assert d.alias_string("AB") == "AB = CDE"
    assert len(d.alias_groups()) == 15


def test_full_factorial():
    d = make_design("ABC", {})
    assert d.defining_relation() == []
    assert d.defining_relation_string() == "I"
    assert d.resolution == math.inf
    assert d.terms == ["A", "B", "AB", "C", "AC", "BC", "ABC"]
    assert all(len(m) == 1 for _, m in d.alias_groups())


def test_replications():
    d = make_design("ABC", {"C": "AB"}, replications=2)
    table = d.sign_table()
    assert d.run_ids == [f"run0{i}" for i in range(1, 9)]
    assert list(table["row"]) == [1, 2, 3, 4, 1, 2, 3, 4]
    assert list(table["replicate"]) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert table.loc["run05", "row"] == 1 and table.loc["run05", "replicate"] == 2
    assert [d.replicate(run) for run in d.run_ids] == list(table["replicate"])  # pandas-free
    assert (table.loc["run05", ["A", "B", "C"]] == table.loc["run01", ["A", "B", "C"]]).all()
    assert len(d.model_matrix()) == 8
    seed2 = design_from_dict({**seed_study(), "replications": 2}, "x.yaml")
    assert seed2.run_ids[16] == "run17" and seed2.sign_table().loc["run17", "row"] == 1


def test_run_id_width():
    d = make_design("ABCDEFG", {})
    assert d.run_ids[0] == "run001" and d.run_ids[-1] == "run128"


def test_negative_generator():
    d = make_design("ABCDE", {"E": "-ABCD"})
    table = d.sign_table()
    assert (table["E"] == -table["A"] * table["B"] * table["C"] * table["D"]).all()
    assert table.loc["run01", "E"] == -1
    assert d.defining_relation() == ["-ABCDE"]
    assert d.defining_relation_string() == "I = -ABCDE"
    assert d.resolution == 5
    assert d.alias_string("A") == "A = -BCDE"

    d3 = make_design("ABC", {"C": "-AB"})
    assert d3.defining_relation() == ["-ABC"]
    assert d3.terms == ["A", "B", "C"]
    assert d3.alias_string("AB") == "C = -AB"
    t = d3.sign_table()
    assert (d3.model_matrix()["C"] == t["C"]).all()
    assert (t["C"] == -t["A"] * t["B"]).all()


# --------------------------------------------------------------------------- validation


def _broken(tmp_path, mutate) -> str:
    data = copy.deepcopy(seed_study())
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(DesignError) as info:
        load_design(path)
    message = str(info.value)
    assert "bad_design.yaml" in message
    return message


def test_a_value_of_the_wrong_form_is_told_what_the_field_holds(tmp_path):
    """R FrF2's way of writing generators ("E = BC" in a list) is not this file's: the error
    names the file and field and says what the field holds (its schema's description), so the
    user need not open the schema; a config field too."""
    msg = _broken(tmp_path, lambda d: d.update(generators=["E = BC", "F = AB"]))
    assert "generators: ['E = BC', 'F = AB'] is not of type 'object' (Generated factors: " in msg
    assert "letter -> product of base factor letters, e.g. E: BC means" in msg
    from ybscale import settings

    bad = {"measurement": {"clients": [1], "repetitions": 0}}
    with pytest.raises(ValueError) as info:
        settings.validated(bad, "config", source="config/mine.yaml")
    assert (
        "config/mine.yaml: measurement.repetitions: 0 is less than the minimum of 1 "
        "(fewest repetitions per client count)"
    ) in str(info.value)


def test_unknown_factor_in_generator(tmp_path):
    msg = _broken(tmp_path, lambda d: d["generators"].update(E="BX"))
    assert "generators.E" in msg and "unknown factor 'X' in 'BX'" in msg


def test_generator_redefines_base_factor(tmp_path):
    msg = _broken(tmp_path, lambda d: d["generators"].update(B="AD"))
    assert "generators.B" in msg and "base factor" in msg


def test_generated_factor_not_declared(tmp_path):
    msg = _broken(tmp_path, lambda d: d["generators"].update(G="AD"))
    assert "generators.G" in msg


def test_two_identical_columns(tmp_path):
    msg = _broken(tmp_path, lambda d: d["generators"].update(F="BC"))
    assert "generators.F" in msg and "identical" in msg


def test_opposite_columns(tmp_path):
    msg = _broken(tmp_path, lambda d: d["generators"].update(F="-CB"))
    assert "generators.F" in msg and "identical" in msg


def test_repeated_letter_generator(tmp_path):
    msg = _broken(tmp_path, lambda d: d["generators"].update(F="AAB"))
    assert "generators.F" in msg


def test_three_levels(tmp_path):
    msg = _broken(tmp_path, lambda d: d["factors"]["C"].update(levels=[3, 5, 7]))
    assert "factors.C.levels" in msg


def test_one_level(tmp_path):
    msg = _broken(tmp_path, lambda d: d["factors"]["C"].update(levels=[3]))
    assert "factors.C.levels" in msg


def test_duplicate_levels(tmp_path):
    msg = _broken(tmp_path, lambda d: d["factors"]["B"].update(levels=["read", "read"]))
    assert "factors.B.levels" in msg


def test_duplicate_names(tmp_path):
    msg = _broken(tmp_path, lambda d: d["factors"]["D"].update(name="nodes"))
    assert "factors.D.name" in msg and "duplicate" in msg


def test_bad_letter(tmp_path):
    msg = _broken(tmp_path, lambda d: d["factors"].update(ab={"name": "x", "levels": [1, 2]}))
    assert "factors" in msg and "'ab'" in msg


def test_bad_replications(tmp_path):
    msg = _broken(tmp_path, lambda d: d.update(replications=0))
    assert "replications" in msg


def test_unknown_top_level_key(tmp_path):
    msg = _broken(tmp_path, lambda d: d.update(extra=1))
    assert "extra" in msg


def test_memory_design_validated():
    with pytest.raises(DesignError, match="<memory>: factors.C.levels"):
        Design(factors=(Factor("C", "c", (1, 2, 3)),))


# --------------------------------------------------------------------------- outputs


def _check_outputs(out: Path) -> None:
    table = pd.read_csv(out / "sign_table.csv")
    assert list(table.columns) == [
        "run", "row", "replicate", "A", "B", "C", "D", "E", "F",
        "operation_size", "workload", "nodes", "isolation", "replication", "node_size",
    ]  # fmt: skip
    assert len(table) == 16
    assert table.loc[0, "replication"] == "on" and table.loc[0, "isolation"] == "read committed"
    aliases = pd.read_csv(out / "aliases.csv")
    assert list(aliases.itertuples(index=False, name=None)) == SEED_ALIASES
    meta = json.loads((out / "design.json").read_text())
    assert meta["defining_relation"] == "I = ABF = BCE = ACEF"
    assert meta["defining_words"] == ["ABF", "BCE", "ACEF"]
    assert meta["resolution"] == 3
    assert meta["n_rows"] == 16 and meta["replications"] == 1
    assert meta["base"] == ["A", "B", "C", "D"]
    assert meta["generators"] == {"E": "BC", "F": "AB"}
    assert meta["factors"][0] == {
        "letter": "A",
        "name": "operation_size",
        "levels": [1, 100],
        "description": meta["factors"][0]["description"],
        "sets": "workload.rows",
        "generated": False,
    }


def test_main_writes_outputs(tmp_path):
    assert main([str(seed_design_path()), str(tmp_path / "design")]) == 0
    _check_outputs(tmp_path / "design")


def test_clusters_without_a_backend_is_a_usage_error(tmp_path, capsys):
    """The strata note names the backend: no backend is assumed for the clusters."""
    with pytest.raises(SystemExit) as exc:
        main([str(seed_design_path()), str(tmp_path / "design"), "--clusters", "run01=c1"])
    assert exc.value.code == 2
    assert "--clusters needs --backend" in capsys.readouterr().err
    assert not (tmp_path / "design").exists()


def test_python_m_writes_outputs(tmp_path):
    out = tmp_path / "results" / "design"
    proc = subprocess.run(
        [sys.executable, "-m", "ybscale.design.factorial", str(seed_design_path()), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    _check_outputs(out)


def test_main_reports_error(tmp_path, capsys):
    data = seed_study()
    data["generators"]["E"] = "BX"
    path = _write(tmp_path, data)
    assert main([str(path), str(tmp_path / "out")]) == 1
    assert "generators.E" in capsys.readouterr().err


def test_a_yaml_boolean_level_is_refused_saying_to_quote_it(tmp_path):
    """`levels: [off, on]` unquoted is two YAML booleans (YAML 1.1, as PyYAML reads it): the
    error names the file and the field and says to quote them."""
    path = tmp_path / "bool_levels.yaml"
    path.write_text(
        "factors:\n"
        "  A: {name: nodes, levels: [3, 5]}\n"
        "  B: {name: commit, sets: server.synchronous_commit, levels: [off, on]}\n"
    )
    with pytest.raises(DesignError) as info:
        load_design(path)
    message = str(info.value)
    assert f"{path}: factors.B.levels.0: False is not of type 'string', 'number'" in message
    assert "quote on, off, yes, no, true and false ('on')" in message


# ------------------------------------------------------------------ blocks (issue 47)

LETTERS5 = {x: {"name": f"f{x}", "levels": [-1, 1]} for x in "ABCDE"}


def _treatments(design, block: int) -> set[str]:
    """The treatment combinations (Montgomery's names: (1), a, ab, ...) of one block."""
    table = design.sign_table()
    out = set()
    for i, (_run, row) in enumerate(table.iterrows()):
        if design.row_blocks[i] == block:
            name = "".join(x.lower() for x in design.base if row[x] > 0)
            out.add(name or "(1)")
    return out


def test_a_2_4_in_two_blocks_confounds_abcd_as_montgomery_does():
    """Montgomery (8th ed.), §7.4: the 2^4 in two blocks confounds the highest-order
    interaction, ABCD; the principal block (the one holding (1)) is (1), ab, ac, bc, ad, bd,
    cd, abcd."""
    from ybscale.design.factorial import design_from_dict

    design = design_from_dict({"factors": {x: LETTERS5[x] for x in "ABCD"}, "blocks": 2})
    assert design.block_generators == ("ABCD",)
    assert _treatments(design, 1) == {"(1)", "ab", "ac", "bc", "ad", "bd", "cd", "abcd"}
    assert design.block_labels()["run01"] == 1


def test_a_2_5_in_four_blocks_as_given_and_as_chosen():
    """Montgomery (8th ed.), §7.6: the 2^5 in four blocks with ADE and BCE confounded (and so
    their product ABCD); the principal block by the defining contrasts is (1), ad, bc, abcd,
    abe, ace, cde, bde. Chosen: no block column holds a main effect or a two-factor
    interaction (what the minimum-aberration blockings of the catalogues reach here)."""
    from ybscale.design.factorial import design_from_dict

    given = design_from_dict({"factors": LETTERS5, "blocks": 4,
                              "block_generators": ["ADE", "BCE"]})  # fmt: skip
    assert given.block_words() == ["ADE", "BCE", "ABCD"]
    assert _treatments(given, 1) == {"(1)", "ad", "bc", "abcd", "abe", "ace", "cde", "bde"}
    assert sorted(given.row_blocks.count(b) for b in (1, 2, 3, 4)) == [8, 8, 8, 8]
    chosen = design_from_dict({"factors": LETTERS5, "blocks": 4})
    assert len(chosen.block_generators) == 2
    assert all(len(w) >= 3 for w in chosen.block_words())


def test_blocks_that_cannot_be_are_refused_naming_the_field():
    from ybscale.design.factorial import DesignError, design_from_dict

    four = {x: LETTERS5[x] for x in "ABCD"}
    cases = [
        ({"factors": four, "blocks": 3}, "blocks: must be a power of two"),
        ({"factors": four, "blocks": 2, "replications": 2}, "blocks: with replications > 1"),
        ({"factors": four, "blocks": 2, "block_generators": ["ABC", "ABD"]},
         "block_generators: 2 blocks need 1 generator"),
        ({"factors": four, "blocks": 4, "block_generators": ["ABC", "BC"]},
         "block_generators: the blocks would be confounded with A"),
        ({"factors": four, "blocks": 2, "block_generators": ["ABX"]},
         "block_generators: 'ABX' is not an interaction"),
        ({"factors": four, "block_generators": ["ABCD"]}, "block_generators: given without"),
        ({"factors": {x: LETTERS5[x] for x in "AB"}, "blocks": 4}, "leave a block of one run"),
    ]  # fmt: skip
    for data, message in cases:
        with pytest.raises(DesignError, match=message):
            design_from_dict(data, "config/design.yaml")


def test_a_blocked_design_is_ordered_block_by_block_and_recorded():
    """The run order: block 1's rows (random order within), then block 2's; the record holds
    the generators, what they are aliased with and each row's block, and reads back."""
    from ybscale.design import record
    from ybscale.design.factorial import design_from_dict, design_from_record

    design = design_from_dict({"factors": {x: LETTERS5[x] for x in "ABCD"}, "blocks": 2})
    built = record.build(design, "local", order="random", seed=7)
    blocks = [line["block"] for line in built["run_order"]["planned"]]
    assert blocks == [1] * 8 + [2] * 8
    assert built["block_generators"] == ["ABCD"] and built["block_aliases"] == ["ABCD"]
    again = design_from_record(built)
    assert again.block_generators == ("ABCD",) and again.row_blocks == design.row_blocks
    shared = {run: "one" for run in design.run_ids}
    with pytest.raises(ValueError, match="blocks: design blocks with rows that share a cluster"):
        record.build(design, "gcp", clusters=shared, order="random", seed=7)


# ------------------------------------------------------------------ centre points (issue 47)

CENTRE = {
    "factors": {
        "A": {"name": "operation_size", "levels": [1, 100]},
        "B": {"name": "nodes", "levels": [3, 5]},
        "C": {"name": "work_mem", "sets": "server.random_page_cost", "levels": [1.5, 4.0]},
    },
    "center_points": 3,
}


def test_centre_runs_follow_the_factorial_runs_at_the_middle_levels():
    """A 2^3 with three centre points: run09 .. run11, every letter 0, every factor at the
    middle of its levels (integers rounded half up: 1 and 100 give 51; nodes 3 and 5 give 4;
    a decimal setting its arithmetic middle); they are recorded, ordered and read back."""
    from ybscale.design import record
    from ybscale.design.factorial import design_from_dict, design_from_record

    design = design_from_dict(CENTRE, "config/design.yaml")
    assert design.run_ids[-1] == "run08" and design.center_run_ids == ["run09", "run10", "run11"]
    assert design.levels("run10") == {"nodes": 4, "operation_size": 51, "work_mem": 2.75}
    assert design.signs("run11") == {"A": 0, "B": 0, "C": 0}
    table = design.measured_table()
    assert list(table.index) == design.all_run_ids
    assert (table.loc[design.center_run_ids, ["row", "A", "B", "C"]] == 0).all().all()
    built = record.build(design, "local", order="random", seed=7)
    planned = [line["run"] for line in built["run_order"]["planned"]]
    assert sorted(planned) == design.all_run_ids
    assert built["center_runs"] == design.center_run_ids
    assert built["center_levels"] == {"nodes": 4, "operation_size": 51, "work_mem": 2.75}
    assert set(built["clusters"]) == set(design.all_run_ids)
    assert design_from_record(built).center_run_ids == design.center_run_ids
    assert design_from_dict({**CENTRE, "center_points": 0}).all_run_ids == design.run_ids
    shared = {run: f"nodes{design.levels(run)['nodes']}" for run in design.all_run_ids}
    with pytest.raises(ValueError, match="config/design.yaml: center_points: with rows that "
                       "share a cluster"):  # fmt: skip
        record.build(design, "gcp", clusters=shared, order="random", seed=7)


def test_centre_points_that_cannot_be_are_refused_naming_the_field():
    from ybscale.design.factorial import DesignError, design_from_dict

    two = {"A": {"name": "operation_size", "levels": [1, 100]}}
    flat = {"B": {"name": "nodes", "levels": [5, 4]}, "C": {"name": "size", "levels": ["s", "l"]}}
    cases = [
        ({"factors": {**two, "B": {"name": "nodes", "levels": [5, 4]}}, "center_points": 1},
         r"center_points: 1 in each level of nodes leaves no pure error"),
        ({"factors": {**two, "B": {"name": "node_size", "levels": ["small", "large"]}},
          "center_points": 1}, r"center_points: 1 in each level of node_size leaves no pure"),
        ({"factors": {x: {"name": f"f{x}", "levels": [-1, 1]} for x in "ABC"}, "blocks": 2,
          "center_points": 1}, "center_points: 1 in each block leaves no pure error"),
        ({"factors": flat, "center_points": 2}, r"center_points: no factor has a middle, so "
         r"there is no centre: factors.B \(nodes\): no integer strictly between its levels 5 "
         r"and 4; factors.C \(size\): levels \['s', 'l'\] are not both numbers"),
        ({"factors": two, "center_points": 2, "replications": 2},
         "center_points: with replications > 1 is not supported yet"),
        ({"factors": two, "center_points": -1}, "center_points"),
    ]  # fmt: skip
    for data, message in cases:
        with pytest.raises(DesignError, match=message) as info:
            design_from_dict(data, "config/design.yaml")
        assert "config/design.yaml" in str(info.value)


def test_centre_runs_in_every_block_and_at_each_level_of_a_factor_without_a_middle():
    """Issue 60: `blocks:` with `center_points:` (refused before) puts that many centre runs
    in each block, numbered block by block, measured with their block (the run order draws
    each block's runs together); a factor without a middle (read/write, 1 or 2 bands) gets
    that many at each of its levels, every other factor at its middle (Minitab's pseudo-centre
    points); the design record says where each one is."""
    from ybscale.design import record
    from ybscale.design.factorial import design_dict, design_from_dict, design_from_record

    blocked = {"factors": {x: {"name": f"f{x}", "levels": [-1, 1]} for x in "ABC"},
               "blocks": 2, "center_points": 4}  # fmt: skip
    design = design_from_dict(blocked, "config/design.yaml")
    assert design.n_center == 8 and design.center_run_ids[0] == "run09"
    assert design.center_blocks == [1, 1, 1, 1, 2, 2, 2, 2]
    labels = design.block_labels()
    assert [labels[run] for run in design.center_run_ids] == design.center_blocks
    assert design.headline.startswith("2^(3-0) design, 8 runs and 8 centre runs")
    built = record.build(design, "local", order="random", seed=7)
    planned = {line["run"]: line for line in built["run_order"]["planned"]}
    assert {planned[run]["block"] for run in design.center_run_ids[:4]} == {1}
    first = [planned[run]["position"] for run, b in labels.items() if b == 1]
    assert max(first) == 8  # block 1 (four corners, four centre runs) before block 2
    assert built["center_placement"]["run13"] == {"block": 2}
    assert design_from_record(built).center_blocks == design.center_blocks

    catapult = {"factors": {"A": {"name": "height", "levels": [3.25, 4.75]},
                            "B": {"name": "bands", "levels": [1, 2]},
                            "C": {"name": "workload", "levels": ["read", "write"]}},
                "center_points": 2}  # fmt: skip
    design = design_from_dict(catapult, "config/design.yaml")
    assert design.center_held == ["B", "C"] and design.n_center == 8
    assert design.signs("run09") == {"A": 0, "B": -1, "C": -1}
    assert design.levels("run16") == {"bands": 2, "height": 4.0, "workload": "write"}
    table = design.measured_table().loc[design.center_run_ids]
    pairs = set(zip(table["B"], table["C"], strict=True))
    assert (table["A"] == 0).all() and pairs == {(-1, -1), (1, -1), (-1, 1), (1, 1)}
    made = design_dict(design)
    assert made["center_levels"] == {"height": 4.0} and made["center_held"] == ["bands", "workload"]
    assert made["center_placement"]["run11"] == {"bands": 2, "workload": "read"}


def test_centre_rows_resolve_to_the_middle_knob_values():
    """The centre rows are rows like any other: nodes 4 (a cluster shape of their own), 51 rows
    per transaction as the script's variable, each knob's source naming center_points."""
    from conftest import REPO, shipped_config

    from ybscale import settings
    from ybscale.design.factorial import design_from_dict
    from ybscale.design.row import resolve_rows

    config = {**settings.load(shipped_config()), "workloads": str(REPO / "workloads")}
    design = design_from_dict({**CENTRE, "factors": {k: CENTRE["factors"][k] for k in "AB"}})
    rows = resolve_rows(design, config)
    assert [r.run for r in rows] == design.all_run_ids
    centre = rows[-1]
    assert centre.cluster.nodes == 4 and centre.variables == {"rows": "51", "distribution": "0"}
    assert centre.levels == {"nodes": 4, "operation_size": 51}
    assert "center_points" in centre.sources["cluster.nodes"]
    assert len({r.combination for r in rows}) == 3  # nodes 3, 4 and 5
    # beside the workload, which has no middle: a centre row reads and one writes
    factors = {**CENTRE["factors"], "C": {"name": "workload", "sets": "workload.script",
                                          "levels": ["read", "write"]}}  # fmt: skip
    design = design_from_dict({"factors": factors, "center_points": 2})
    rows = {r.run: r for r in resolve_rows(design, config)}
    scripts = [rows[run].levels["workload"] for run in design.center_run_ids]
    assert scripts == ["read", "read", "write", "write"]
    assert {rows[run].levels["nodes"] for run in design.center_run_ids} == {4}
