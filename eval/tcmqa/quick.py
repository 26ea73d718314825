"""A quick estimate of Full from a model's answers on a few anchor items, the tinyBenchmarks way.

Full needs all 38,279 items; a small model on a CPU takes hours. tinyBenchmarks (Polo et al., 2024)
recovers a benchmark's accuracy from about 100 items chosen with an item-response fit: the items are
clustered by their IRT embedding (here the 2PL's slope and intercept, ``tcmqa.irt``), the item nearest
each cluster's centre is its anchor, weighted by the cluster's share of the items. Two estimators:

* ``anchor``: the weighted share of anchors the model got right (a stratified sample);
* ``irt`` (tinyBenchmarks' p-IRT): the model's ability fitted on its anchor answers with the items'
  parameters fixed, then Full = (anchors right + the predicted P(right) of every other item) / items.

The error is measured, not assumed: :func:`leave_one_model_out` refits the scale without each model in
turn, chooses the anchors from that fit and estimates the left-out model from its anchor answers
(docs/benchmarks.md, "Quick estimate").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.cluster import KMeans

from tcmqa.irt import Fit, Outcomes, fit_2pl

log = logging.getLogger(__name__)

N_ANCHORS = 100  # tinyBenchmarks' number per benchmark
# prior sd of a new model's ability: the fit's N(0, 1) fixes the scale over many respondents; over one
# model's ~100 anchors it would pull a strong or a weak model toward the middle
ABILITY_SD = 3.0
ESTIMATORS = ("anchor", "irt")


@dataclass
class Anchors:
    """Anchor items (rows of the fit's items) and their weights (the cluster shares, summing to 1)."""

    rows: np.ndarray
    weights: np.ndarray


def choose_anchors(fit: Fit, n_anchors: int = N_ANCHORS, seed: int = 0) -> Anchors:
    """``n_anchors`` items, one per k-means cluster of the items' standardised (slope, intercept)."""
    n_items = len(fit.a)
    if not 1 <= n_anchors <= n_items:
        raise ValueError(f"the number of anchors must be between 1 and the {n_items:,} items, not {n_anchors}")
    embedding = np.column_stack([fit.a, -fit.a * fit.b])
    embedding = (embedding - embedding.mean(axis=0)) / np.where((sd := embedding.std(axis=0)) > 0, sd, 1.0)
    kmeans = KMeans(n_clusters=n_anchors, n_init=1, random_state=seed).fit(embedding)
    distance = np.linalg.norm(embedding - kmeans.cluster_centers_[kmeans.labels_], axis=1)
    order = np.lexsort((distance, kmeans.labels_))  # by cluster, nearest first
    first = order[np.r_[0, np.flatnonzero(np.diff(kmeans.labels_[order])) + 1]]
    weights = np.bincount(kmeans.labels_, minlength=n_anchors)[kmeans.labels_[first]] / n_items
    return Anchors(rows=first, weights=weights)


def ability(fit: Fit, rows: np.ndarray, right: np.ndarray) -> float:
    """A respondent's ability (MAP, prior ``N(0, ABILITY_SD^2)``) from its answers ``right`` (1/0) on the
    items ``rows``, the items' parameters fixed."""
    a, c = fit.a[rows], -fit.a[rows] * fit.b[rows]
    theta = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(a * theta + c)))
        step = (a @ (right - p) - theta / ABILITY_SD**2) / (a**2 @ (p * (1 - p)) + 1 / ABILITY_SD**2)
        theta += float(np.clip(step, -1.0, 1.0))
        if abs(step) < 1e-6:
            break
    return theta


def estimate(fit: Fit, anchors: Anchors, right: np.ndarray) -> dict[str, float]:
    """Full (percent) estimated from ``right`` (1/0 per anchor, in ``anchors.rows`` order), by each of
    :data:`ESTIMATORS`."""
    right = np.asarray(right, dtype=float)
    if right.shape != anchors.rows.shape or not np.isin(right, (0.0, 1.0)).all():
        raise ValueError(f"give one answer (1 right, 0 wrong) per anchor: {len(anchors.rows)} of them")
    theta = ability(fit, anchors.rows, right)
    predicted = fit.p(theta=np.array([theta]))[:, 0]
    predicted[anchors.rows] = right
    return {"anchor": 100 * float(anchors.weights @ right), "irt": 100 * float(predicted.mean())}


def leave_one_model_out(
    outcome: Outcomes, fit: Fit, n_anchors: int | Sequence[int] = N_ANCHORS, seed: int = 0
) -> pd.DataFrame:
    """Per model and number of anchors (``n_anchors``: one or several; the scale is refitted once per model
    for all of them): its Full (percent, over the items it answered), each estimate from its anchors when the
    scale is fitted without it, and the errors (estimate minus Full, points). A model must have answered
    every anchor: one that did not is left out of that count, named in a warning."""
    counts = [n_anchors] if isinstance(n_anchors, int) else list(n_anchors)
    rows = []
    for j in np.flatnonzero(outcome.respondents["kind"].to_numpy() == "model"):
        others = np.delete(np.arange(outcome.y.shape[1]), j)
        start = Fit(**{**vars(fit), "theta": fit.theta[others], "theta_se": fit.theta_se[others]})
        refit = fit_2pl(outcome.y[:, others], start=start)
        name = outcome.respondents["name"].iloc[j]
        full = 100 * float(np.nanmean(outcome.y[:, j]))
        for count in counts:
            anchors = choose_anchors(refit, count, seed)
            answers = outcome.y[anchors.rows, j]
            if np.isnan(answers).any():
                log.warning("%s left out of the quick estimate's error: it did not answer every anchor", name)
                continue
            estimates = estimate(refit, anchors, answers)
            errors = {f"{k}_error": estimates[k] - full for k in ESTIMATORS}
            rows.append({"model": name, "anchors": count, "full": full} | estimates | errors)
    return pd.DataFrame(rows)


def error_summary(loo: pd.DataFrame) -> pd.DataFrame:
    """One row per number of anchors and estimator: models, mean absolute, root mean square and largest error
    (points)."""
    return pd.DataFrame(
        [
            {
                "anchors": count,
                "estimator": k,
                "models": len(group),
                "mae": group[f"{k}_error"].abs().mean(),
                "rmse": float(np.sqrt((group[f"{k}_error"] ** 2).mean())),
                "max": group[f"{k}_error"].abs().max(),
            }
            for count, group in loo.groupby("anchors", sort=True)
            for k in ESTIMATORS
        ]
    )
