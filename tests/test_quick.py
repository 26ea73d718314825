"""The quick estimate: anchors chosen from the one scale, and its leave-one-model-out error measured."""

from __future__ import annotations

import numpy as np
import pytest

from tcmqa import irt, quick
from tcmqa.simulate import SimulationConfig, reported_models, simulate
from tcmqa.study import load_study

# every third of the paper's 29 rows: weak to strong, several families
MODELS = reported_models().iloc[::3].reset_index(drop=True)
N_ANCHORS = 100
BOUND = {"anchor": 6.0, "irt": 12.0}  # mean absolute error, points, over the 10 left-out models (measured: 3.9, 8.1)


@pytest.fixture(scope="module")
def scale(tmp_path_factory):
    cfg = SimulationConfig(n_items=2000, n_raters=30, n_responses=4500, seed=5)
    out = simulate(tmp_path_factory.mktemp("sim-quick"), cfg, MODELS)
    study = load_study(out / "data", [out / "runs"])
    outcome = irt.outcomes(study)
    return study, outcome, irt.fit_2pl(outcome.y)


def test_quick_estimate_anchors_cover_the_items(scale):
    _, _, fit = scale
    anchors = quick.choose_anchors(fit, N_ANCHORS)
    assert len(np.unique(anchors.rows)) == N_ANCHORS
    assert anchors.weights.sum() == pytest.approx(1.0)
    assert (anchors.weights > 0).all()
    with pytest.raises(ValueError, match="between 1 and the 1,991 items"):
        quick.choose_anchors(fit, 0)


def test_quick_estimate_leave_one_model_out_error_is_bounded(scale):
    study, outcome, fit = scale
    loo = quick.leave_one_model_out(outcome, fit, N_ANCHORS)
    assert loo["model"].tolist() == study.model_names
    np.testing.assert_allclose(loo["full"], 100 * study.correct.mean(axis=0), atol=1e-4)
    summary = quick.error_summary(loo).set_index("estimator")
    for estimator, bound in BOUND.items():
        assert summary.at[estimator, "mae"] < bound, summary


def test_quick_estimate_refuses_answers_not_one_per_anchor(scale):
    _, _, fit = scale
    anchors = quick.choose_anchors(fit, 10)
    with pytest.raises(ValueError, match=r"one answer .* per anchor: 10"):
        quick.estimate(fit, anchors, np.ones(9))
