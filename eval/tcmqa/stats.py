"""Statistics behind the paper's agreement claims and the report's uncertainty.

Everything here works on plain arrays (items along axis 0), so the same code serves the
4,801-item subset, the full corpus and small test fixtures. The κ functions are written out
rather than borrowed so they can run on whole item-by-model matrices at once; the tests hold
them equal to statsmodels and scikit-learn on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps


@dataclass(frozen=True)
class BinomialAgreement:
    """Observed correct-count distribution against independent raters (the paper's Table 6)."""

    table: pd.DataFrame  # columns: correct, observed, expected, ratio
    p: float
    chi2: float
    df: int
    p_value: float


def binomial_agreement(n_correct: np.ndarray, n_raters: int = 3, p: float | None = None) -> BinomialAgreement:
    """χ² of correct counts per item against Binomial(n_raters, p).

    ``p`` defaults to the pooled rater accuracy; the test then has ``n_raters`` degrees of
    freedom, as in the paper (four cells, one constraint on the total; p is not deducted).
    """
    n_correct = np.asarray(n_correct, dtype=int)
    n_items = len(n_correct)
    if n_items and (n_correct.min() < 0 or n_correct.max() > n_raters):
        raise ValueError(
            f"correct counts {n_correct.min()}..{n_correct.max()} do not fit {n_raters} raters per item: "
            "pass the subset's N (tables.subset_raters)"
        )
    if p is None:
        p = float(n_correct.sum() / (n_raters * n_items))
    k = np.arange(n_raters + 1)
    observed = np.bincount(n_correct, minlength=n_raters + 1)[: n_raters + 1]
    expected = n_items * sps.binom.pmf(k, n_raters, p)
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    df = n_raters
    table = pd.DataFrame({"correct": k, "observed": observed, "expected": expected, "ratio": observed / expected})
    return BinomialAgreement(table=table, p=p, chi2=chi2, df=df, p_value=float(sps.chi2.sf(chi2, df)))


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' κ from an items × categories table of rating counts (equal raters per item)."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum(axis=1)[0]
    p_j = counts.sum(axis=0) / counts.sum()
    p_i = ((counts**2).sum(axis=1) - n) / (n * (n - 1))
    p_bar, p_e = p_i.mean(), (p_j**2).sum()
    return float((p_bar - p_e) / (1 - p_e))


def cohen_kappa_matrix(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Cohen's κ between every column of ``a`` and every column of ``b`` (binary outcomes).

    With ``b`` omitted, κ between all pairs of columns of ``a``. Vectorised: one matrix
    product per agreement term, so 29 models × 38k items costs milliseconds.
    """
    a = np.asarray(a, dtype=float)
    b = a if b is None else np.asarray(b, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if b.ndim == 1:
        b = b[:, None]
    n = a.shape[0]
    both = a.T @ b / n
    neither = (1 - a).T @ (1 - b) / n
    pa, pb = a.mean(axis=0)[:, None], b.mean(axis=0)[None, :]
    p_o = both + neither
    p_e = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (p_o - p_e) / (1 - p_e)


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's κ between two binary vectors."""
    return float(cohen_kappa_matrix(np.asarray(a), np.asarray(b))[0, 0])


def bootstrap_means(values: np.ndarray, n_boot: int = 1000, seed: int = 0, chunk: int = 100) -> np.ndarray:
    """Bootstrap replicates of column means, resampling items (rows) jointly for all columns.

    One shared resample per replicate keeps columns paired, so a difference of two columns
    (a model against the practitioner majority) gets a paired interval. Returns n_boot × columns.
    Multinomial weights replace index gathers: one (chunk × items) @ (items × columns) product.
    """
    values = np.asarray(values, dtype=np.float32)
    if values.ndim == 1:
        values = values[:, None]
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, values.shape[1]))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=size).astype(np.float32)
        out[start : start + size] = weights @ values / n
    return out


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap replicates along axis 0."""
    tail = (1 - level) / 2 * 100
    return np.percentile(replicates, tail, axis=0), np.percentile(replicates, 100 - tail, axis=0)


@dataclass(frozen=True)
class PairedTest:
    """McNemar's exact test on two models' per-item correctness."""

    only_a: int
    only_b: int
    p_value: float


def mcnemar(a: np.ndarray, b: np.ndarray) -> PairedTest:
    """Exact McNemar test: are discordant items split evenly between the two models?"""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    discordant = only_a + only_b
    # two-sided exact binomial test at 1/2: the distribution is symmetric, so its p is twice the smaller tail
    # (what scipy's binomtest gives, at 1/30 of its cost: the board tests a thousand pairs)
    p = 1.0 if discordant == 0 else min(1.0, 2 * float(sps.binom.cdf(min(only_a, only_b), discordant, 0.5)))
    return PairedTest(only_a=only_a, only_b=only_b, p_value=p)
