"""Error strata: clusters per backend, whole-plot columns, Lenth per stratum at its level."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import shipped_config
from designs import seed_design_path, seed_study

from ybscale import study
from ybscale.analysis.effects import estimate_effects, lenth
from ybscale.analysis.lenth_critical import critical as lenth_critical
from ybscale.analysis.strata import judge, stratum_lenth
from ybscale.design.strata import SINGLE, SUB, WHOLE, column_strata
from ybscale.study import cluster_of

ROOT = Path(__file__).resolve().parents[2]
SEED_WHOLE = {"A", "B", "C", "E", "F", "AC", "AE"}


def _seed(backend: str, **extra):
    config = shipped_config()
    config["backend"] = backend
    config.update(extra)
    loaded = study.load(config, str(seed_design_path()))
    return loaded.design, cluster_of(loaded.settings, loaded.rows)


def test_gcp_shares_a_cluster_per_combination_and_the_seed_is_a_split_plot():
    design, clusters = _seed("gcp")
    groups: dict[str, list[str]] = {}
    for run, cluster in clusters.items():
        groups.setdefault(cluster, []).append(run)
    assert len(groups) == 8 and all(len(runs) == 2 for runs in groups.values())
    signs = design.sign_table()
    for runs in groups.values():  # the two rows of a cluster differ in D only
        a, b = signs.loc[runs[0]], signs.loc[runs[1]]
        assert [x for x in design.letters if a[x] != b[x]] == ["D"]
    strata = column_strata(design, clusters)
    assert {t for t, s in strata.items() if s == WHOLE} == SEED_WHOLE
    assert {t for t, s in strata.items() if s == SUB} == set(design.terms) - SEED_WHOLE


def test_gcp_replicates_run_on_clusters_of_their_own_so_cluster_variance_has_df(tmp_path):
    """Issue 19, item 4: each replicate of a combination on a cluster of its own (16 clusters
    for the seed design twice), the same whole-plot columns, and the cluster-to-cluster
    variance gets degrees of freedom (MixedLM applies); reusing the cluster gives it none."""
    from ybscale.analysis.strata import mixed_applies
    from ybscale.backends import get_backend
    from ybscale.backends.base import BackendError
    from ybscale.design.row import Row
    from ybscale.design.strata import describe

    design = seed_study()
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump({**design, "replications": 2}))
    config = shipped_config()
    config["backend"] = "gcp"
    loaded = study.load(config, str(path))
    clusters = cluster_of(loaded.settings, loaded.rows)
    assert len(set(clusters.values())) == 16 and len(loaded.clusters) == 16
    strata = column_strata(loaded.design, clusters)
    assert {t for t, s in strata.items() if s == WHOLE} == SEED_WHOLE
    assert mixed_applies(strata, clusters, 2)
    assert len(describe(loaded.design, clusters, "gcp")["clusters"]) == 16  # design.json
    # the measuring job finds a replicate-2 row's cluster from its params alone
    row = Row.from_dict(loaded.rows[16].params())
    assert row.replicate == 2 and clusters[row.run] == f"{row.combination}-r2"
    backend = get_backend(loaded.settings, tmp_path / "clusters")
    with pytest.raises(BackendError, match=rf"clusters/{row.combination}-r2/endpoints.json"):
        with backend.cluster(row, tmp_path):
            pass
    config["gcp"] = {"cluster_per_replicate": False}
    reused = study.load(config, str(path))
    clusters = cluster_of(reused.settings, reused.rows)
    assert len(set(clusters.values())) == 8
    assert not mixed_applies(column_strata(reused.design, clusters), clusters, 2)


def test_local_is_one_stratum_and_existing_follows_the_endpoints():
    design, clusters = _seed("local")
    assert len(set(clusters.values())) == 16
    assert set(column_strata(design, clusters).values()) == {SINGLE}
    host = {"hosts": ["db1"], "port": 5433, "database": "yugabyte", "user": "yugabyte"}
    combos = {c: dict(host) for c in _seed("gcp")[1].values()}
    design, clusters = _seed("existing", existing={"combinations": combos})
    assert len(set(clusters.values())) == 1  # one cluster for all: no whole plots
    assert set(column_strata(design, clusters).values()) == {SINGLE}


def test_simulated_critical_values_hold_their_level():
    ier, eer = lenth_critical(7)
    rng = np.random.default_rng(3)
    e = rng.standard_normal((20_000, 7))
    flagged = np.mean([stratum_lenth(row)["active"].mean() for row in e[:4000]])
    assert flagged == pytest.approx(0.05, abs=0.01)
    assert eer > ier > 0


def test_whole_plot_noise_flags_whole_plot_columns_at_alpha_per_stratum():
    """1,000 seeded simulations of the seed design on gcp: σ_whole = 3·σ_sub, no effect."""
    design, clusters = _seed("gcp")
    strata = column_strata(design, clusters)
    x = design.model_matrix().astype(float)
    terms = list(x.columns)
    whole = np.array([strata[t] == WHOLE for t in terms])
    label = sorted(set(clusters.values()))
    cluster = np.array([label.index(clusters[r]) for r in x.index])
    rng = np.random.default_rng(19)
    per_stratum = pooled = sub = 0
    n = 1000
    for _ in range(n):
        y = 10_000 + 3.0 * rng.standard_normal(8)[cluster] + rng.standard_normal(16)
        effects = x.to_numpy().T @ y / 8
        pooled += int((np.abs(effects[whole]) > lenth(effects)["me"]).sum())
        per_stratum += int(stratum_lenth(effects[whole])["active"].sum())
        sub += int(stratum_lenth(effects[~whole])["active"].sum())
    rate_whole, rate_pooled = per_stratum / (n * whole.sum()), pooled / (n * whole.sum())
    rate_sub = sub / (n * (~whole).sum())
    print(
        f"whole-plot columns flagged: per stratum {100 * rate_whole:.1f} %, pooled Lenth "
        f"{100 * rate_pooled:.1f} %; sub-plot columns per stratum {100 * rate_sub:.1f} %"
    )
    assert abs(rate_whole - 0.05) <= 0.02
    assert abs(rate_sub - 0.05) <= 0.02
    assert rate_pooled > 3 * 0.05


def test_judge_rewrites_margins_per_stratum_and_leaves_small_strata_untested():
    design, clusters = _seed("gcp")
    strata = column_strata(design, clusters)
    rng = np.random.default_rng(5)
    y = pd.Series(1000 + rng.standard_normal(16), index=design.run_ids)
    table = judge(estimate_effects(design, y), strata).set_index("term")
    assert set(table.loc[list(SEED_WHOLE), "stratum"]) == {WHOLE}
    assert table.loc[list(SEED_WHOLE), "me"].nunique() == 1
    assert table.loc["A", "me"] != table.loc["D", "me"]
    # two whole-plot columns only: no noise estimate, not tested
    few = {t: (WHOLE if t in ("A", "B") else SUB) for t in design.terms}
    table = judge(estimate_effects(design, y * 0 + 1000 + 500 * (design.model_matrix()["A"])), few)
    row = table.set_index("term").loc["A"]
    assert np.isnan(row["me"]) and not row["active"]


def test_shared_clusters_run_in_random_cluster_order_recorded_as_blocks():
    from ybscale.design.order import planned_order, run_priorities

    design, clusters = _seed("gcp")
    plan = planned_order(design.sign_table(), "random", 20240501, clusters)
    blocks = plan["block"].tolist()
    # each cluster's rows one after the other, and the block is the cluster
    assert [clusters[r] for r in plan["run"]] == blocks
    assert len(set(blocks)) == 8 and all(blocks[i] == blocks[i + 1] for i in range(0, 16, 2))
    orders = {
        tuple(dict.fromkeys(planned_order(design.sign_table(), "random", s, clusters)["block"]))
        for s in range(6)
    }
    assert len(orders) > 1  # the clusters' order comes from the seed
    within = {
        tuple(planned_order(design.sign_table(), "random", s, clusters)["run"])[:2]
        for s in range(12)
    }
    assert any(a > b for a, b in within)  # rows within a cluster are not in standard order
    priority = run_priorities(design, "random", 20240501, clusters)
    assert sorted(priority, key=priority.get, reverse=True) == plan["run"].tolist()
    # local: every row its own cluster: replicate blocks as before
    local = _seed("local")[1]
    assert planned_order(design.sign_table(), "random", 3, local)["block"].tolist() == [1] * 16


def test_design_json_analysis_and_findings_name_each_columns_stratum(tmp_path):
    import json

    from ybscale.analysis.analyze import analyze
    from ybscale.design.factorial import main as design_main
    from ybscale.report.strata_text import findings_text

    design, clusters = _seed("gcp")
    args = [f"{r}={c}" for r, c in clusters.items()]
    assert design_main([str(seed_design_path()), str(tmp_path), "--backend", "gcp",
                        "--clusters", *args]) == 0  # fmt: skip
    strata = json.loads((tmp_path / "design.json").read_text())["strata"]
    assert strata["backend"] == "gcp" and len(strata["clusters"]) == 8
    assert {t for t, s in strata["columns"].items() if s == WHOLE} == SEED_WHOLE
    rng = np.random.default_rng(11)
    cluster = {c: rng.normal(0, 300) for c in set(clusters.values())}
    y = [20_000 + cluster[clusters[r]] + rng.normal(0, 100) for r in design.run_ids]
    responses = pd.DataFrame({"tps": y}, index=design.run_ids)
    effects = analyze(design, responses, "tps", tmp_path, charts=False, clusters=clusters)[
        "effects"
    ]
    assert set(effects.set_index("term").loc[list(SEED_WHOLE), "stratum"]) == {WHOLE}
    (text,) = findings_text(effects, "gcp")
    assert text.startswith("**Error strata.** On gcp rows that differ only in session")
    assert "the whole-plot columns" in text and "against the cluster-to-cluster noise" in text
    anova = pd.read_csv(tmp_path / "anova.csv")  # unreplicated: no stratum has error df
    assert set(anova["stratum"]) == {WHOLE, SUB} and anova["F"].isna().all()
    pooled = analyze(design, responses, "tps", tmp_path, charts=False)["effects"]
    assert findings_text(pooled, "local")[0].startswith("**Error strata.** One stratum (local)")


def test_replicates_on_clusters_of_their_own_reach_the_findings(tmp_path):
    """The seed design twice on gcp (16 clusters): the effects use MixedLM, anova.csv tests the
    whole plot against its own error (8 df) and the findings say both."""
    from ybscale.analysis.analyze import analyze
    from ybscale.analysis.study_files import StudyFiles
    from ybscale.report.findings import write_findings

    design_yaml = seed_study()
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump({**design_yaml, "replications": 2}))
    config = shipped_config()
    loaded = study.load({**config, "backend": "gcp"}, str(path))
    clusters = cluster_of(loaded.settings, loaded.rows)
    design = loaded.design
    rng = np.random.default_rng(12)
    shift = {c: rng.normal(0, 300) for c in sorted(set(clusters.values()))}
    signs = design.sign_table()
    y = [20_000 + 2_000 * signs.loc[r, "D"] + shift[clusters[r]] + rng.normal(0, 100)
         for r in design.run_ids]  # fmt: skip
    responses = pd.DataFrame({"tps": y}, index=design.run_ids)
    results = tmp_path / "results"
    tables = analyze(design, responses, "tps", results, charts=False, clusters=clusters)
    effects = tables["effects"].set_index("term")
    assert (effects.loc[list(SEED_WHOLE), "method"] == "t").all()  # MixedLM
    # its t tests stay in the multiplicity family: Holm over the 15 columns
    terms = effects.loc[list(loaded.design.terms)]
    assert set(terms["multiplicity"]) == {"holm"} and terms["p_value"].notna().all()
    assert (terms["p_adjusted"] >= terms["p_value"]).all()
    assert list(terms.index[terms["active"]]) == ["D"]
    anova = tables["anova"].set_index("term")
    assert anova.loc["whole-plot error", "df"] == 16 - 1 - 7
    assert anova.loc["residual", "df"] == 32 - 16 - 8
    assert anova.loc["D", "p_adjusted"] < 0.05
    text = write_findings(design, StudyFiles.under(results, design.run_ids), tmp_path / "f.md")
    assert "MixedLM with the cluster as a random effect" in text
    assert "(t test on its error stratum (MixedLM, the cluster a random effect); p-values " in text
    assert "adjusted by Holm over the 15 columns" in text
    assert "**ANOVA by stratum**" in text and "whole-plot error (clusters within" in text
    assert ": D below α = 0.05" in text
    # the findings job as the rule calls it: the design page lists the 16 clusters
    from ybscale.report.findings import main as findings_main

    page = tmp_path / "design.rst"
    runs = [str(results / "runs" / r) for r in design.run_ids]
    assert findings_main([
        "--design", str(path), "--effects", str(results / "effects.csv"),
        "--ceilings", str(results / "ceilings.csv"), "--outliers", str(results / "outliers.csv"),
        "--anova", str(results / "anova.csv"), "--out", str(tmp_path / "g.md"),
        "--design-rst", str(page), *runs, "--clusters", *[f"{r}={c}" for r, c in clusters.items()],
    ]) == 0  # fmt: skip
    shown = page.read_text()
    assert "The 32 runs ran on 16 clusters:" in shown
    r2 = clusters[design.run_ids[16]]
    assert r2.endswith("-r2") and f"* ``{r2}``: {design.run_ids[16]}, " in shown


def test_plan_lists_each_columns_stratum_for_gcp_and_the_configs_backend(capsys, monkeypatch):
    from ybscale.cli import main as cli

    monkeypatch.chdir(ROOT)
    assert cli(["plan"]) == 0
    out = capsys.readouterr().out
    assert "Error strata (gcp: 16 runs on 8 clusters):" in out
    assert "  whole-plot (against the cluster-to-cluster noise): A, B, F, C, AC, E, AE\n" in out
    assert "  sub-plot (against the noise within a cluster): D, AD, " in out
    # local: one stratum, said once (no column listed as "single")
    assert "Error strata (local: every row runs on a fresh cluster" in out
    assert " single" not in out


def test_half_normal_plot_per_stratum():
    import altair as alt

    from ybscale.report import charts

    design, clusters = _seed("gcp")
    rng = np.random.default_rng(2)
    y = pd.Series(1000 + rng.standard_normal(16), index=design.run_ids)
    table = judge(estimate_effects(design, y), column_strata(design, clusters))
    chart = charts.half_normal_chart(table)
    assert isinstance(chart, alt.HConcatChart) and len(chart.hconcat) == 2
    spec = chart.to_dict()
    titles = [c["title"]["text"] for c in spec["hconcat"]]
    assert titles == ["Half-normal plot, whole-plot columns", "Half-normal plot, sub-plot columns"]
    pooled = charts.half_normal_chart(
        judge(estimate_effects(design, y), {t: SINGLE for t in design.terms})
    )
    assert isinstance(pooled, alt.LayerChart)


def test_replicates_on_fresh_clusters_use_mixedlm_with_the_cluster_as_random_effect():
    """2^3, 3 replicates, each (A, B) combination a fresh cluster per replicate: 12 clusters,
    whole-plot columns A, B, AB (8 df), sub-plot C, AC, BC, ABC."""
    from ybscale.analysis.strata import mixed, mixed_applies
    from ybscale.design.factorial import design_from_dict

    spec = {f: {"name": n, "levels": [0, 1]} for f, n in zip("ABC", ["a", "b", "c"], strict=True)}
    design = design_from_dict({"factors": spec, "replications": 3}, "split")
    signs = design.sign_table()
    clusters = {r: f"A{s['A']}B{s['B']}r{s['replicate']}" for r, s in signs.iterrows()}
    strata = column_strata(design, clusters)
    assert {t for t, s in strata.items() if s == WHOLE} == {"A", "B", "AB"}
    assert mixed_applies(strata, clusters, 3)
    assert not mixed_applies(strata, {r: c[:4] for r, c in clusters.items()}, 3)  # reused
    rng = np.random.default_rng(8)
    flagged, se_ratio = 0, []
    for _ in range(20):
        shift = {c: rng.normal(0, 3.0) for c in set(clusters.values())}
        y = [100 + 2.0 * signs.loc[r, "C"] + shift[clusters[r]] + rng.normal() for r in signs.index]
        z = pd.Series(y, index=design.run_ids)
        table = judge(estimate_effects(design, z, blocks=True), strata)
        effects = mixed(table, design, z, clusters, strata).set_index("term")
        assert effects.loc["C", "active"]  # the sub-plot effect of 4 against within-cluster noise
        flagged += int(effects.loc[["A", "B", "AB"], "active"].sum())
        se_ratio.append(effects.loc["A", "std_error"] / effects.loc["C", "std_error"])
    print(f"whole-plot nulls flagged {flagged} of 60; whole/sub se {np.median(se_ratio):.1f}")
    assert np.median(se_ratio) > 2  # the whole plot carries the cluster-to-cluster noise
    assert flagged <= 8  # 3 expected at α = 0.05
