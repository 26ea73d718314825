"""Known answers (the paper's Table 6) and equality with statsmodels / scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from tcmqa import stats

TABLE6_OBSERVED = [616, 1067, 1422, 1696]


def _table6_counts() -> np.ndarray:
    return np.repeat(np.arange(4), TABLE6_OBSERVED)


def test_table6_expected_counts_and_chi2_match_the_paper():
    result = stats.binomial_agreement(_table6_counts(), p=0.6248)
    np.testing.assert_allclose(result.table["expected"], [253.6, 1266.8, 2109.6, 1171.0], atol=0.1)
    np.testing.assert_allclose(result.table["ratio"], [2.43, 0.84, 0.67, 1.45], atol=0.005)
    assert result.chi2 == pytest.approx(1009.0, abs=0.5)
    assert result.df == 3


def test_table6_pooled_rate_is_the_papers_p():
    assert stats.binomial_agreement(_table6_counts()).p == pytest.approx(0.6248, abs=5e-5)


def test_fleiss_kappa_on_table6_is_0263_and_equals_statsmodels():
    n = _table6_counts()
    counts = np.column_stack([n, 3 - n])
    assert stats.fleiss_kappa(counts) == pytest.approx(0.263, abs=5e-4)
    assert stats.fleiss_kappa(counts) == pytest.approx(sm_fleiss(counts), abs=1e-12)


def test_fleiss_kappa_equals_statsmodels_on_many_categories():
    rng = np.random.default_rng(1)
    counts = rng.multinomial(5, [0.1, 0.2, 0.3, 0.4], size=300)
    assert stats.fleiss_kappa(counts) == pytest.approx(sm_fleiss(counts), abs=1e-12)


def test_cohen_kappa_matrix_equals_sklearn_pairwise():
    rng = np.random.default_rng(2)
    latent = rng.normal(size=(500, 1))
    x = (latent + rng.normal(size=(500, 4)) > 0).astype(int)
    matrix = stats.cohen_kappa_matrix(x)
    for i in range(4):
        for j in range(4):
            assert matrix[i, j] == pytest.approx(cohen_kappa_score(x[:, i], x[:, j]), abs=1e-12)
    assert stats.cohen_kappa(x[:, 0], x[:, 1]) == pytest.approx(cohen_kappa_score(x[:, 0], x[:, 1]), abs=1e-12)


def test_bootstrap_interval_covers_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(3)
    small, large = rng.random(200) < 0.6, rng.random(20000) < 0.6
    lo_s, hi_s = stats.percentile_interval(stats.bootstrap_means(small, n_boot=400))
    lo_l, hi_l = stats.percentile_interval(stats.bootstrap_means(large, n_boot=400))
    assert lo_s[0] < small.mean() < hi_s[0]
    assert lo_l[0] < large.mean() < hi_l[0]
    assert (hi_l - lo_l)[0] < (hi_s - lo_s)[0] / 5
    assert (hi_l - lo_l)[0] == pytest.approx(2 * 1.96 * np.sqrt(0.24 / 20000), rel=0.2)


@pytest.mark.parametrize("seed", range(6))
def test_mcnemar_equals_statsmodels_exact(seed: int):
    """Against statsmodels on pairs from near-identical to very different, small and large (even splits too)."""
    rng = np.random.default_rng(seed)
    n = [1000, 40, 7, 5000, 200, 2][seed]
    a = rng.random(n) < 0.6
    b = np.where(rng.random(n) < [0.8, 0.5, 0.3, 0.99, 0.0, 0.5][seed], a, rng.random(n) < 0.7)
    ours = stats.mcnemar(a, b)
    table = [[int((a & b).sum()), ours.only_a], [ours.only_b, int((~a & ~b).sum())]]
    assert ours.p_value == pytest.approx(sm_mcnemar(table, exact=True).pvalue, rel=1e-9)


def test_the_results_rows_binomial_interval_matches_resampling_items():
    """results.interval takes the quantiles of Binomial(n, k/n) (the count right in a resample): the interval item
    resampling gives."""
    import pandas as pd

    from tcmqa.results import interval

    correct = np.random.default_rng(1).random(3000) < 0.62
    low, high = stats.percentile_interval(stats.bootstrap_means(correct.astype(float), 4000))
    ours = interval(pd.Series(correct))
    assert ours[0] == pytest.approx(100 * low[0], abs=0.4) and ours[1] == pytest.approx(100 * high[0], abs=0.4)
    assert interval(pd.Series([], dtype=bool)) == (None, None)
