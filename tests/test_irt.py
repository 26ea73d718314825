"""The 2PL fit recovers planted item and ability parameters, practitioners answering a block each."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from tcmqa.irt import fit_2pl

N_ITEMS, N_MODELS = 1500, 400
PRACTITIONERS = np.array([-1.5, -0.5, 0.5, 1.5, 2.5])  # planted abilities, each on a block of its own
BLOCK = 300


@pytest.fixture(scope="module")
def planted():
    rng = np.random.default_rng(11)
    a = rng.lognormal(0.0, 0.35, N_ITEMS)
    a[:30] = -rng.uniform(0.5, 1.0, 30)  # items the abler get wrong more often (a wrong key)
    b = rng.normal(0.0, 1.0, N_ITEMS)
    theta = np.concatenate([rng.normal(0.0, 1.0, N_MODELS), PRACTITIONERS])
    p = 1 / (1 + np.exp(-a[:, None] * (theta[None, :] - b[:, None])))
    y = (rng.random(p.shape) < p).astype(np.float32)
    for k in range(len(PRACTITIONERS)):  # missing data: each practitioner answers one block
        answered = np.zeros(N_ITEMS, dtype=bool)
        answered[k * BLOCK : (k + 1) * BLOCK] = True
        y[~answered, N_MODELS + k] = np.nan
    return a, b, theta, y, fit_2pl(y)


def test_irt_recovers_planted_parameters(planted):
    a, b, theta, _, fit = planted
    assert fit.converged
    assert np.corrcoef(fit.theta, theta)[0, 1] > 0.9
    assert np.corrcoef(fit.a, a)[0, 1] > 0.9
    positive = a > 0  # difficulty means little where the discrimination is negative
    assert np.corrcoef(fit.b[positive], b[positive])[0, 1] > 0.9
    assert (fit.a[:30] < 0).mean() > 0.9


def test_irt_orders_planted_practitioners(planted):
    *_, fit = planted
    people = fit.theta[N_MODELS:]
    assert (np.diff(people) > 0).all()
    assert spearmanr(people, PRACTITIONERS).statistic == pytest.approx(1.0)
    # a block of 300 items measures less precisely than 1,500: the standard errors say so
    assert fit.theta_se[N_MODELS:].min() > fit.theta_se[:N_MODELS].max()
    z = (people - PRACTITIONERS) / fit.theta_se[N_MODELS:]
    assert (np.abs(z) < 3.5).all()


def test_irt_refit_from_a_start_converges_at_once(planted):
    *_, y, fit = planted
    again = fit_2pl(y, start=fit)
    assert again.iterations <= 3
    np.testing.assert_allclose(again.theta, fit.theta, atol=1e-2)


@pytest.mark.parametrize(
    ("y", "message"),
    [(np.array([[1.0, 2.0]]), "1 \\(right\\), 0 \\(wrong\\) or NaN"), (np.zeros((0, 3)), "items x respondents")],
)
def test_irt_refuses_what_is_not_an_outcome_matrix(y, message):
    with pytest.raises(ValueError, match=message):
        fit_2pl(y)
