"""The study's own report: ``tcmqa report --data ...`` without runs (or with runs on other data only)
writes the practitioners' side, and its numbers are those of a report made with runs on the same data.

Over the real sample tree and over a simulated study: Tables 1, 2, 3 and 6 (CSV, cell for cell), the
majority vote and the practitioner series of Figures 5 and 7 equal the with-runs report's; report.md
names every model table and figure it left out, and why.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from test_report import MODELS, _constant_run, _run_cli

from tcmqa import report
from tcmqa.figures import FIGURES
from tcmqa.simulate import SimulationConfig, simulate

HUMAN_TABLES = ("table1_domains", "table2_corpus", "table3_difficulty", "table6_agreement")
MODEL_TABLES = ("table4_leaderboard", "table5_multi_answer", "agreement_kappa", "agreement_kappa_pairs", "intervals")


def _report_without_runs(data: Path, out: Path) -> str:
    """``tcmqa report --data DATA --out OUT``: no ``--outputs`` at all."""
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    assert report.main(parser.parse_args(["--data", str(data), "--out", str(out), "--n-boot", "50"])) == 0
    return (out / "report.md").read_text(encoding="utf-8")


def _figure(out: Path, name: str) -> dict:
    return json.loads((out / "figures" / f"{name}.json").read_text(encoding="utf-8"))


def _majority_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("Practitioner majority vote on the"))


def _assert_human_side_equal(alone: Path, with_runs: Path) -> None:
    """Every human-side number of the study's own report is the with-runs report's."""
    for name in HUMAN_TABLES:
        pd.testing.assert_frame_equal(
            pd.read_csv(alone / "tables" / f"{name}.csv"), pd.read_csv(with_runs / "tables" / f"{name}.csv")
        )
    a, b = (_figure(d, "fig5_domains") for d in (alone, with_runs))
    assert a["domains"] == b["domains"] and list(a["series"]) == ["Practitioners (majority)"]
    assert a["series"]["Practitioners (majority)"] == b["series"]["Practitioners (majority)"]
    a, b = (_figure(d, "fig7_difficulty") for d in (alone, with_runs))
    assert (a["levels"], a["n_items"], a["practitioner"]) == (b["levels"], b["n_items"], b["practitioner"])
    assert a["models"] == {}
    texts = [(d / "report.md").read_text(encoding="utf-8") for d in (alone, with_runs)]
    assert _majority_line(texts[0]) == _majority_line(texts[1])
    table6 = [t.split("## Table 6.")[1].split("\n## ")[0] for t in texts]
    assert table6[0] == table6[1]  # heading (Binomial, χ², Fleiss' κ) and table, as written


def _assert_models_named_left_out(out: Path, text: str, why: str) -> None:
    left_out = text.split(f"## {report.MODEL_TABLES_SKIPPED}")[1].split("\n## ", 1)[0]
    assert why in left_out
    models = ("Table 4", "Table 5", "Cohen's κ of each model", "Cohen's κ between model pairs", "Bootstrap", "McNemar")
    for name in models:
        assert name in left_out, name
    for name, figure in FIGURES.items():
        drawn = (out / "figures" / f"{name}.png").exists()
        assert drawn == (name in report.HUMAN_SIDE_FIGURES), name
        assert (f"Figure {figure.number} (" in left_out) != drawn, name
    for name in MODEL_TABLES:
        assert not (out / "tables" / f"{name}.csv").exists(), name
    for name in HUMAN_TABLES:
        assert (out / "tables" / f"{name}.csv").exists(), name
    for heading in ("Table 1.", "Table 2.", "Table 3.", "Table 6."):
        assert f"## {heading}" in text, heading
    assert "## Table 4." not in text and "## Table 5." not in text and report.PRACTITIONER_TABLES_SKIPPED not in text


def test_study_report_over_the_real_sample(sample_tree: Path, tmp_path: Path) -> None:
    for letter in "AC":
        _constant_run(sample_tree, tmp_path / "runs" / f"always-{letter}", letter)
    _run_cli(sample_tree, [tmp_path / "runs"], tmp_path / "with-runs")
    text = _report_without_runs(sample_tree, tmp_path / "alone")
    assert text.splitlines()[0] == "# TCMQA report" and "SIMULATED" not in text
    assert "0 model runs." in text
    _assert_models_named_left_out(tmp_path / "alone", text, "no model run was given")
    _assert_human_side_equal(tmp_path / "alone", tmp_path / "with-runs")
    assert set(json.loads((tmp_path / "with-runs" / "figures" / "fig7_difficulty.json").read_text())["models"]) == {
        "always-A",
        "always-C",
    }
    table1 = pd.read_csv(tmp_path / "alone" / "tables" / "table1_domains.csv")
    assert len(table1) == 10 and table1["items"].sum() > 0


def test_study_report_over_a_simulated_study(tmp_path: Path) -> None:
    config = SimulationConfig(n_items=1200, n_raters=12, n_responses=1800, seed=7)
    sim = simulate(tmp_path / "sim", config, MODELS)
    _run_cli(sim / "data", [sim / "runs"], tmp_path / "with-runs")
    text = _report_without_runs(sim / "data", tmp_path / "alone")
    assert "SIMULATED" in text.splitlines()[0] and "> **SIMULATED DATA.**" in text
    _assert_models_named_left_out(tmp_path / "alone", text, "no model run was given")
    _assert_human_side_equal(tmp_path / "alone", tmp_path / "with-runs")
    for name in report.HUMAN_SIDE_FIGURES:
        title = json.loads((tmp_path / "alone" / "figures" / f"{name}.json").read_text(encoding="utf-8"))["title"]
        assert title.startswith("[SIMULATED] Figure ")
    table3 = pd.read_csv(tmp_path / "alone" / "tables" / "table3_difficulty.csv").set_index("rating")
    assert table3.loc["all", "responses"] == config.n_responses


def test_study_report_with_runs_on_other_data_only(demo_tree: Path, tmp_path: Path) -> None:
    """Runs computed on other data are named and left out; the human side of this data is written."""
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=300, n_raters=6, n_responses=450, seed=8), MODELS)
    with pytest.warns(UserWarning, match=r"left out 2 run\(s\) computed on other data"):
        _run_cli(demo_tree, [sim / "runs"], tmp_path / "other")
    text = (tmp_path / "other" / "report.md").read_text(encoding="utf-8")
    listed = text.split(f"## {report.RUNS_ON_OTHER_DATA}")[1].split("\n## ", 1)[0]
    assert "m1" in listed and "m2" in listed
    _assert_models_named_left_out(tmp_path / "other", text, "every run given was computed on other data (2 left out")
    _report_without_runs(demo_tree, tmp_path / "alone")
    _assert_human_side_equal(tmp_path / "alone", tmp_path / "other")


def test_study_report_needs_runs_or_practitioners(tmp_path: Path) -> None:
    """A corpus-only tree and no run: nothing to compare, said plainly."""
    from sources import DEMO_ITEMS

    from tcmqa.build import build

    build([str(DEMO_ITEMS)], tmp_path / "tree")
    with pytest.raises(SystemExit, match="no run was computed on this data and the data holds no practitioner"):
        _report_without_runs(tmp_path / "tree", tmp_path / "out")


def test_study_report_names_what_a_mixed_rater_subset_refuses(tmp_path: Path) -> None:
    """A subset mixing items of 3 and 2 raters: Table 6 and Figure 6 assume one N, so they are named as
    refused with the reason, and the rest of the human side is written (n_raters rule: tcmqa.tables)."""
    import pyarrow.parquet as pq

    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=600, n_raters=6, n_responses=900, seed=9), MODELS)
    [part] = sorted((sim / "data" / "subset").glob("*.parquet"))
    table = pq.read_table(part)
    rows = table.to_pylist()
    first = rows[0]
    keep = 2  # the first subset item keeps two of its three raters
    first.update(
        n_raters=keep,
        practitioner_ids=first["practitioner_ids"][:keep],
        rater_correct=first["rater_correct"][:keep],
        rater_domains=first["rater_domains"][:keep],
        rater_difficulty=first["rater_difficulty"][:keep],
        n_correct=sum(first["rater_correct"][:keep]),
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    text = _report_without_runs(sim / "data", tmp_path / "alone")
    refused = text.split(f"## {report.REFUSED_BY_THE_DATA}")[1].split("\n## ", 1)[0]
    assert "Table 6 (practitioner agreement)" in refused and "mixes items with [2, 3] raters" in refused
    assert "## Table 6." not in text and "## Table 1." in text and "## Table 3." in text
    assert not (tmp_path / "alone" / "tables" / "table6_agreement.csv").exists()
