"""Fold-over follow-ups: generators, resolution, aliases, reuse of the original rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from designs import seed_design, seed_design_path

from ybscale.analysis.effects import estimate_effects
from ybscale.design.factorial import Design, DesignError, Factor, load_design
from ybscale.design.followup import confounded_pairs, fold, followup_rows, main, propose


@pytest.fixture
def seed() -> Design:
    return seed_design()


def _words(design: Design) -> set[str]:
    return {w.lstrip("-") for w in design.defining_relation()}


def _two_level(letters: str, generators: dict[str, str]) -> Design:
    factors = tuple(Factor(x, f"f{x}", (-1, 1)) for x in letters)
    return Design(factors=factors, generators=generators)


def test_full_foldover_of_the_seed_design(seed):
    combined = fold(seed)
    # original I = ABF = BCE = ACEF (res III). Montgomery 8.6: the full fold-over keeps the
    # even-length words; the odd ones become words with the fold letter G
    assert combined.generators == {"E": "-BCG", "F": "-ABG"}
    assert _words(combined) == {"ACEF", "ABFG", "BCEG"}
    assert combined.resolution == 4
    assert combined.n_rows == 32
    treatment = {w for w in _words(combined) if "G" not in w}
    assert treatment == {"ACEF"}  # no word of length 3: main effects clear of 2FIs
    for letter in "ABCDEF":
        aliases = combined.alias_string(letter).replace("-", "").split(" = ")
        assert not [a for a in aliases if len(a) == 2 and "G" not in a], letter


def test_full_foldover_of_the_2_7_4_design_is_montgomerys_resolution_iv():
    # Montgomery Table 8.x: 2^(7-4)_III with D=AB, E=AC, F=BC, G=ABC; its fold-over is the
    # 2^(7-3)_IV with I = ABCG = BCDE = ACDF = ADEG = BDFG = ABEF = CEFG
    design = _two_level("ABCDEFG", {"D": "AB", "E": "AC", "F": "BC", "G": "ABC"})
    assert design.resolution == 3
    combined = fold(design)
    treatment = {w for w in _words(combined) if "H" not in w}
    assert treatment == {"ABCG", "BCDE", "ACDF", "ADEG", "BDFG", "ABEF", "CEFG"}
    assert combined.resolution == 4


def test_single_factor_foldover_clears_that_factor_and_its_interactions(seed):
    combined = fold(seed, "A")
    assert combined.generators == {"E": "BC", "F": "-ABG"}
    groups = [
        [m.lstrip("-") for m in members if "G" not in m and len(m.lstrip("-")) <= 2]
        for _, members in combined.alias_groups()
    ]
    for group in groups:
        if any("A" in w for w in group):
            assert len(group) == 1, group  # A and every AX alone among low-order terms
    # the other aliases of the seed stay: B = CE is still confounded
    assert combined.alias_string("B").replace("-", "").split(" = ")[1] == "CE"


def test_original_rows_come_first_unchanged_and_the_rest_is_the_foldover(seed):
    combined = fold(seed)
    for run in seed.run_ids:  # same ids, same levels: the pipeline reuses their measurements
        assert combined.levels(run) == seed.levels(run)
    new = followup_rows(combined)
    assert new == combined.run_ids[16:]
    table = combined.sign_table()
    folded = {tuple(-s for s in seed.signs(r).values()) for r in seed.run_ids}
    assert {tuple(int(table.loc[r, x]) for x in "ABCDEF") for r in new} == folded


def test_combined_analysis_separates_a_from_bf(seed):
    # BF large, A zero: in the original fraction A = BF, so A's column shows BF's effect;
    # in the combined design A is estimated free of BF
    def response(design):
        t = design.sign_table()
        return pd.Series(1000.0 + 150.0 * t["B"] * t["F"], index=t.index)

    original = estimate_effects(seed, response(seed)).set_index("term")
    assert original.loc["A", "effect"] == pytest.approx(300.0)
    combined = fold(seed)
    effects = estimate_effects(combined, response(combined)).set_index("term")
    assert effects.loc["A", "effect"] == pytest.approx(0.0, abs=1e-9)
    bf = [t for t in effects.index if "BF" in effects.loc[t, "alias"].replace("-", "").split(" = ")]
    assert len(bf) == 1
    assert abs(effects.loc[bf[0], "effect"]) == pytest.approx(300.0)
    assert np.isclose(effects["effect"].abs(), 300.0).sum() == 1


def test_proposal_prefers_the_fold_that_separates_the_active_aliases(seed):
    # only A active: A = BF. Folding A or F or B separates it, and so does the full fold-over
    pairs, proposals = propose(seed, ["A"])
    assert pairs == [("A", "A", "BF")]
    assert proposals[0].columns == "full" and proposals[0].separated == pairs
    # D is clear of two-factor interactions: nothing to separate
    assert confounded_pairs(seed, ["D"]) == []
    # B = AF = CE: the full fold-over separates B from both, a fold on C only from CE
    pairs, proposals = propose(seed, ["B"])
    best = proposals[0]
    assert best.columns == "full"
    assert {(a, b) for _, a, b in best.separated} == {("B", "AF"), ("B", "CE")}
    fold_c = next(p for p in proposals if p.columns == "C")
    assert {(a, b) for _, a, b in fold_c.separated} == {("B", "CE"), ("AF", "CE")}


def test_bad_fold_columns_name_the_factors(seed):
    with pytest.raises(DesignError, match="unknown factor"):
        fold(seed, "Q")


def test_next_writes_a_valid_combined_design(tmp_path, seed, capsys):
    results = tmp_path / "results"
    results.mkdir()
    effects = pd.DataFrame(
        {"term": ["B", "A", "C"], "alias": ["", "", ""], "active": [True, False, False]}
    )
    effects.to_csv(results / "effects.csv", index=False)
    out = tmp_path / "design-foldover.yaml"
    design = str(seed_design_path())
    assert main(["--analysis", str(results), "--design", design, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "full fold-over" in printed and "run17..run32" in printed
    written = load_design(out)
    assert written.generators == {"E": "-BCG", "F": "-ABG"}
    assert written.factor("G").fold and written.factor("G").levels == ("original", "foldover")
    assert [f.name for f in written.factors if not f.fold] == [f.name for f in seed.factors]
    assert written.levels("run05") == seed.levels("run05")
    # a design written before the fold-over column was called `fold` names the rename
    old = tmp_path / "design-block.yaml"
    old.write_text(out.read_text().replace("fold: true", "block: true"))
    with pytest.raises(
        DesignError, match=r"design-block.yaml: factors\.G\.block: renamed to `fold`"
    ):
        load_design(old)
