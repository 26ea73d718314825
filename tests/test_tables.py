"""Tables agree with the harness's results rows and with their own definitions, on a small simulated study."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tcmqa import figures, tables
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import load_study

MODELS = pd.DataFrame(
    {
        "model": ["a-small", "a-large", "b-small"],
        "family": ["A", "A", "B"],
        "params_b": [1.0, 7.0, 3.0],
        "single": [30.0, 70.0, 50.0],
        "multi": [5.0, 40.0, 20.0],
    }
)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    return simulate(
        tmp_path_factory.mktemp("sim"), SimulationConfig(n_items=2000, n_raters=30, n_responses=4500, seed=7), MODELS
    )


@pytest.fixture(scope="module")
def study(sim):
    return load_study(sim / "data", [sim / "runs"])


def test_leaderboard_equals_the_harness_results_rows(sim, study):
    board = tables.leaderboard(study).set_index("model")
    multi = tables.multi_answer(study).set_index("model")
    for run in (sim / "runs").iterdir():
        row = json.loads((run / "results.json").read_text())
        for key in ("full", "single", "multi", "subset", "delta_human"):
            assert board.loc[row["model"], key] == pytest.approx(row[key], abs=1e-4), key
        for ours, theirs in (
            ("precision", "multi_precision"),
            ("recall", "multi_recall"),
            ("f1", "multi_f1"),
            ("mean_pred_size", "multi_mean_pred_size"),
        ):
            assert multi.loc[row["model"], ours] == pytest.approx(row[theirs], abs=1e-3), ours
        assert tables.human_reference(study) == pytest.approx(row["human_reference"], abs=1e-6)


def test_board_is_grouped_by_family_then_size(study):
    assert tables.leaderboard(study)["model"].tolist() == ["a-small", "a-large", "b-small"]


def test_quadrants_partition_the_subset_and_match_accuracies(study):
    d = figures.outcome_quadrants_data(study)
    total = np.array(d["both"]) + np.array(d["neither"]) + np.array(d["model_only"]) + np.array(d["practitioners_only"])
    np.testing.assert_allclose(total, 100, atol=1e-3)
    board = tables.leaderboard(study).set_index("model")
    for k, model in enumerate(d["models"]):
        assert d["both"][k] + d["model_only"][k] == pytest.approx(board.loc[model, "subset"], abs=1e-3)
        assert d["both"][k] + d["practitioners_only"][k] == pytest.approx(tables.human_reference(study), abs=1e-3)


def test_practitioner_tables_count_every_response_and_subset_item(study):
    t3 = tables.practitioner_difficulty(study)
    assert t3.iloc[-1]["responses"] == len(study.responses)
    assert t3.iloc[:-1]["responses"].sum() == study.responses["difficulty"].notna().sum()
    assert t3.iloc[-1]["accuracy"] == pytest.approx(100 * study.responses["correct"].mean())
    t1 = tables.domain_portfolio(study)
    assert (t1["items"] <= len(study.subset)).all() and t1["items"].sum() >= len(study.subset)
    agreement, _ = tables.practitioner_agreement(study)
    assert agreement.table["observed"].sum() == len(study.subset)


def test_intervals_bracket_the_estimates_and_neighbours_are_tested(study):
    board = tables.leaderboard(study).set_index("model")
    ci = tables.intervals(study, n_boot=300).set_index("model")
    for key, lo, hi in (
        ("full", "full_lo", "full_hi"),
        ("subset", "subset_lo", "subset_hi"),
        ("delta_human", "delta_lo", "delta_hi"),
    ):
        assert (ci[lo] <= board[key]).all() and (board[key] <= ci[hi]).all(), key
    tests = tables.neighbour_tests(study)
    assert len(tests) == len(MODELS) - 1
    assert (tests["p_value"] < 1e-6).all()  # 20-point gaps over 2,000 items are real


def test_a_run_that_covers_part_of_the_items_is_scored_on_those_only(sim, tmp_path, study):
    run = tmp_path / "partial"
    (run / "outputs").mkdir(parents=True)
    table = pq.read_table(sim / "runs" / "a-large" / "outputs" / "part-00000.parquet")
    half = table.slice(0, len(table) // 2)
    pq.write_table(half, run / "outputs" / "part-00000.parquet")
    shutil.copy(sim / "runs" / "a-large" / "results.json", run / "results.json")
    partial = load_study(sim / "data", [run])
    assert tables.leaderboard(partial)["full"].iloc[0] == pytest.approx(100 * np.mean(half["correct"].to_numpy()))
    assert partial.covered.sum() == len(half)
