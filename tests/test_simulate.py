"""The simulator writes the real schemas, and properties planted in it are recovered by the analyses."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tcmqa import tables
from tcmqa.schema import FEATURES
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import load_study

MODELS = pd.DataFrame(
    {
        "model": ["weak", "middling", "strong", "best"],
        "family": ["F1", "F1", "F2", "F2"],
        "params_b": [0.5, 2.0, 7.0, 14.0],
        "single": [22.0, 45.0, 70.0, 80.0],
        "multi": [2.0, 15.0, 40.0, 55.0],
    }
)
SMALL = {"n_items": 4000, "n_raters": 60, "n_responses": 9000}


@pytest.fixture(scope="module")
def independent(tmp_path_factory):
    out = simulate(tmp_path_factory.mktemp("sim-independent"), SimulationConfig(**SMALL, seed=3), MODELS)
    return out, load_study(out / "data", [out / "runs"])


@pytest.fixture(scope="module")
def dependent(tmp_path_factory):
    out = simulate(tmp_path_factory.mktemp("sim-dependent"), SimulationConfig(**SMALL, dependence=1.5, seed=4), MODELS)
    return out, load_study(out / "data", [out / "runs"])


def test_every_config_has_exactly_its_features(independent):
    out, _ = independent
    for config in ("corpus", "responses", "subset"):
        schema = pq.read_schema(next((out / "data" / config).glob("*.parquet")))
        assert schema.remove_metadata() == FEATURES[config].arrow_schema.remove_metadata(), config
    for run in (out / "runs").iterdir():
        schema = pq.read_schema(run / "outputs" / "part-00000.parquet")
        assert schema.remove_metadata() == FEATURES["outputs"].arrow_schema.remove_metadata()
        assert set(json.loads((run / "results.json").read_text())) == set(FEATURES["results"])
    assert "SIMULATED" in (out / "data" / "README.md").read_text(encoding="utf-8")


def test_counts_follow_the_platform_design(independent):
    _, study = independent
    assert len(study.corpus) == SMALL["n_items"]
    assert (study.corpus["answer_type"] == "multi").mean() == pytest.approx(0.062, abs=0.001)
    assert len(study.responses) == SMALL["n_responses"]
    assert study.responses["practitioner_id"].nunique() == SMALL["n_raters"]
    raters_per_block = study.responses.groupby("block")["practitioner_id"].nunique()
    assert raters_per_block.max() == 3
    assert (study.responses.groupby("practitioner_id").size() >= 150).all()


def test_planted_accuracies_are_recovered(independent):
    _, study = independent
    board = tables.leaderboard(study).set_index("model")
    for row in MODELS.itertuples():
        assert board.loc[row.model, "single"] == pytest.approx(row.single, abs=2.5)


def test_practitioner_agreement_is_recovered(independent):
    _, study = independent
    agreement, fleiss = tables.practitioner_agreement(study)
    ratio = agreement.table["ratio"].to_numpy()
    assert ratio[0] > 1.5 and ratio[3] > 1.2 and ratio[1] < 1 and ratio[2] < 1
    assert agreement.p_value < 1e-10 and fleiss > 0.15


def _consensus_gap(study) -> np.ndarray:
    rows, subset = tables.subset_view(study)
    n_correct = subset["n_correct"].to_numpy()
    return tables.accuracy(study, rows[n_correct == 3]) - tables.accuracy(study, rows[n_correct == 0])


def test_a_model_independent_of_practitioner_difficulty_is_flat_with_kappa_near_zero(independent):
    _, study = independent
    assert np.all(np.abs(_consensus_gap(study)) < 10)
    kappa, pairs = tables.kappa_with_practitioners(study)
    assert np.all(np.abs(kappa["kappa_vs_majority"]) < 0.06)
    assert np.nanmin(pairs[~np.eye(len(pairs), dtype=bool)]) > 0.05  # models still agree with each other


def test_a_planted_dependence_is_found(dependent):
    _, study = dependent
    assert np.all(_consensus_gap(study) > 20)
    kappa, _ = tables.kappa_with_practitioners(study)
    assert np.all(kappa["kappa_vs_majority"] > 0.1)


def test_planted_calibration_gives_a_positive_confidence_gap(independent):
    out, _ = independent
    gaps = [json.loads((run / "results.json").read_text())["confidence_gap"] for run in (out / "runs").iterdir()]
    assert min(gaps) > 0.5
