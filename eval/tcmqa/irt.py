"""One scale for models and practitioners: a two-parameter logistic (2PL) item-response fit.

Respondent ``j`` (a model or a practitioner) answers item ``i`` right with probability
``sigmoid(a_i * (theta_j - b_i))``: ``theta`` is the respondent's ability, ``b`` the item's difficulty
and ``a`` its discrimination. ``a`` may come out near zero (the item tells nobody apart) or negative
(the abler answer it wrong more often): that is evidence its key is wrong (``tcmqa.suspects``), so
the fit must allow it, which rules out fits that bound ``a`` above zero.

Why an own fit rather than a library: py-irt (tinyBenchmarks, Fluid Benchmarking) pins versions
that would downgrade pandas and rich in the shared environment, and girth's 2PL bounds the
discrimination to positive values; what is needed is small. The fit is joint maximum a posteriori
in the slope-intercept form ``a * theta + c`` (``b = -c / a``), where each block's posterior is
concave: priors ``theta ~ N(0, 1)``, ``a ~ N(1, 1)``, ``c ~ N(0, 3^2)`` fix the scale and keep an item
every respondent got right, or wrong, finite. It alternates Newton steps: every item's ``(a, c)`` at
once (a logistic regression on the abilities, a 2 x 2 system per item, vectorised), then every
ability. Missing cells (a
practitioner answers only the items of their blocks) simply do not enter the likelihood. Each step
is a few matrix-vector products over the items x respondents matrix: 38,279 items x 130 respondents
fit in seconds on one core, 1,000 models in about a minute and a half (docs/benchmarks.md, "Keys and one
scale" and "The scale in the Space"). Standard errors are the inverse square roots of the posterior
information, each block given the other (``b``'s by the delta method: large where ``a`` is near zero,
where an item's difficulty means little).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from tcmqa.study import Study

log = logging.getLogger(__name__)

THETA_SD, A_MEAN, A_SD, C_SD = 1.0, 1.0, 1.0, 3.0  # the priors (see the module docstring)
CHUNK = 2048  # items per slice of the dense block's sums
MAX_STEP = 1.0  # largest change of any parameter in one step: Fisher scoring from far away overshoots


@dataclass
class Outcomes:
    """Right (1) or wrong (0) of each respondent on each item, NaN where the respondent did not answer."""

    y: np.ndarray  # items x respondents, float32 (1, 0 or NaN)
    item_ids: np.ndarray
    respondents: pd.DataFrame  # name, kind ("model" | "practitioner"): the columns of y

    @property
    def observed(self) -> np.ndarray:
        return ~np.isnan(self.y)


@dataclass
class Fit:
    """A 2PL fit: per item ``a``, ``b`` (and their standard errors), per respondent ``theta`` and its."""

    a: np.ndarray
    b: np.ndarray
    a_se: np.ndarray
    b_se: np.ndarray
    theta: np.ndarray
    theta_se: np.ndarray
    iterations: int
    converged: bool

    def p(self, items: np.ndarray | slice = slice(None), theta: np.ndarray | None = None) -> np.ndarray:
        """P(right) of ``items`` (rows) for each ability in ``theta`` (columns; default: the fit's)."""
        theta = self.theta if theta is None else np.asarray(theta)
        return _sigmoid(self.a[items, None] * (theta[None, :] - self.b[items, None]))


def _sigmoid(z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """1 / (1 + exp(-z)) as (1 + tanh(z / 2)) / 2: no overflow, and numpy's float32 tanh is vectorised (four
    times scipy's ``expit`` over the dense block); ``out``: in place."""
    z = np.multiply(z, 0.5, out=out)
    np.tanh(z, out=z)
    z *= 0.5
    z += 0.5
    return z


def outcomes(study: Study) -> Outcomes:
    """The outcome matrix of every model of ``study`` (on the items it covered) and every practitioner
    (on the scored items they answered; a practitioner who answered none is left out)."""
    models = np.where(study.covered, study.correct, np.nan).astype(np.float32)
    rows = pd.Index(study.item_ids).get_indexer(study.responses["item_id"])
    answered = study.responses[rows >= 0]
    names = pd.Index(sorted(answered["practitioner_id"].unique()))
    people = np.full((len(study.item_ids), len(names)), np.nan, dtype=np.float32)
    people[rows[rows >= 0], names.get_indexer(answered["practitioner_id"])] = answered["correct"].to_numpy(float)
    respondents = pd.DataFrame(
        {"name": study.model_names + list(names), "kind": ["model"] * len(study.models) + ["practitioner"] * len(names)}
    )
    return Outcomes(np.hstack([models, people]), study.item_ids, respondents)


def _step(value: np.ndarray, change: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    change = np.clip(change, -MAX_STEP, MAX_STEP)
    return value + change, change


@dataclass
class _Sums:
    """Sums over the answered cells at the current parameters: per item the information in (a, c) and the
    gradient's data part, per respondent the ability's."""

    haa: np.ndarray  # per item: sum of w t^2, sum of w t, sum of w (w = p (1 - p), t the respondent's ability)
    hac: np.ndarray
    hcc: np.ndarray
    ra: np.ndarray  # per item: sum of (y - p) t, sum of (y - p)
    rc: np.ndarray
    rt: np.ndarray  # per respondent: sum of a (y - p), sum of a^2 w
    wt: np.ndarray


class _Cells:
    """The answered cells of an outcome matrix, in two parts: the respondents who answered every item (the
    board's models) as a dense block, whose sums are matrix-vector products, and the rest (the
    practitioners on their blocks) as index arrays summed with ``bincount``. At 1,000 models x 38,279 items
    the block makes a step about ten times faster than index arrays over every cell, in a third of the memory
    (docs/benchmarks.md, "The scale in the Space")."""

    def __init__(self, y: np.ndarray):
        observed = ~np.isnan(y)
        self.shape = y.shape
        self.full = np.flatnonzero(observed.all(axis=0))  # respondents with every item answered
        self.dense = y[:, self.full] == 1  # bool: a quarter of float32
        self.rest = np.flatnonzero(~observed.all(axis=0))
        part = y[:, self.rest]
        self.item, column = np.nonzero(~np.isnan(part))
        self.person = self.rest[column]
        self.right = part[self.item, column].astype(np.float64)

    def sums(self, a: np.ndarray, c: np.ndarray, theta: np.ndarray) -> _Sums:
        n_items, n_resp = self.shape
        t = theta[self.person]
        p = _sigmoid(a[self.item] * t + c[self.item])
        r, w = self.right - p, p * (1 - p)

        def per_item(values: np.ndarray) -> np.ndarray:
            return np.bincount(self.item, values, n_items).astype(np.float64)  # int64 when no cell

        def per_person(values: np.ndarray) -> np.ndarray:
            return np.bincount(self.person, values, n_resp).astype(np.float64)

        ai = a[self.item]
        out = _Sums(
            per_item(w * t * t), per_item(w * t), per_item(w), per_item(r * t), per_item(r),
            per_person(ai * r), per_person(ai * ai * w),
        )  # fmt: skip
        if len(self.full):
            tf, a32, c32 = (v.astype(np.float32) for v in (theta[self.full], a, c))
            for rows in _chunks(n_items):  # a few thousand items at a time: the temporaries stay in cache
                z = np.multiply.outer(a32[rows], tf)
                z += c32[rows, None]
                p = _sigmoid(z, out=z)
                r = self.dense[rows] - p
                w = p - np.square(p)
                out.haa[rows] += w @ (tf * tf)
                out.hac[rows] += w @ tf
                out.hcc[rows] += w.sum(axis=1, dtype=np.float64)
                out.ra[rows] += r @ tf
                out.rc[rows] += r.sum(axis=1, dtype=np.float64)
                out.rt[self.full] += a32[rows] @ r
                out.wt[self.full] += np.square(a32[rows]) @ w
        return out


def _chunks(n: int, size: int = CHUNK) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def fit_2pl(y: np.ndarray, *, start: Fit | None = None, tol: float = 1e-3, max_iter: int = 500) -> Fit:
    """Fit a 2PL model to ``y`` (items x respondents: 1, 0, NaN where unanswered); ``start``: a fit
        of the same items and respondents to begin from (a refit after a small change converges in a few
        steps). Stops when in a step no ability moves by more than ``tol``, nor the items' parameters by more
    than ``tol`` in root mean square (a few items every respondent got right drift along a flat ridge of
    the likelihood long after the scale has settled)."""
    y = np.asarray(y)
    if y.ndim != 2 or not y.size:
        raise ValueError(f"the outcome matrix must be items x respondents with both non-empty, not shape {y.shape}")
    seen = y[~np.isnan(y)]
    if not np.isin(seen, (0.0, 1.0)).all():
        raise ValueError("outcomes must be 1 (right), 0 (wrong) or NaN (not answered)")
    cells = _Cells(y)
    n_items, n_resp = y.shape
    if start is not None:
        a, c, theta = start.a.copy(), -start.a * start.b, start.theta.copy()
    else:  # log-odds of the share right (shrunk to 1/2): respondents standardised, items as intercepts
        observed = ~np.isnan(y)
        right, answered = np.nansum(y, axis=0, dtype=np.float64), observed.sum(axis=0)
        odds = lambda s, n: np.log((s + 0.5) / (n - s + 0.5))  # noqa: E731
        theta = odds(right, answered)
        theta = (theta - theta.mean()) / (theta.std() or 1.0)
        c = odds(np.nansum(y, axis=1, dtype=np.float64), observed.sum(axis=1))
        a = np.full(n_items, A_MEAN)
    with threadpool_limits(1, user_api="blas"):  # small products: threads only wait on each other
        converged, iteration = False, 0
        while not converged and iteration < max_iter:
            iteration += 1
            s = cells.sums(a, c, theta)
            haa, hac, hcc = _information(s)
            grad_a = s.ra - (a - A_MEAN) / A_SD**2
            grad_c = s.rc - c / C_SD**2
            det = haa * hcc - hac**2
            a, moved_a = _step(a, (hcc * grad_a - hac * grad_c) / det)
            c, moved_c = _step(c, (haa * grad_c - hac * grad_a) / det)
            s = cells.sums(a, c, theta)
            theta, moved_t = _step(theta, (s.rt - theta / THETA_SD**2) / (s.wt + 1 / THETA_SD**2))
            rms = np.sqrt(max(np.mean(moved_a**2), np.mean(moved_c**2)))
            converged = max(rms, np.abs(moved_t).max()) < tol
        if not converged:
            log.warning("2PL fit stopped after %d steps without converging (tol %g)", max_iter, tol)
        s = cells.sums(a, c, theta)
    haa, hac, hcc = _information(s)
    det = haa * hcc - hac**2
    var_a, var_c, cov_ac = hcc / det, haa / det, -hac / det
    b = -c / a
    # delta method for b = -c / a
    var_b = (var_c + b**2 * var_a + 2 * b * cov_ac) / a**2
    log.debug("2PL fit of %d items x %d respondents (%d cells): %d steps", n_items, n_resp, len(seen), iteration)
    return Fit(
        a=a,
        b=b,
        a_se=np.sqrt(var_a),
        b_se=np.sqrt(np.maximum(var_b, 0.0)),
        theta=theta,
        theta_se=1 / np.sqrt(s.wt + 1 / THETA_SD**2),
        iterations=iteration,
        converged=converged,
    )


def _information(s: _Sums) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each item's posterior information matrix in (a, c): [[haa, hac], [hac, hcc]]."""
    return s.haa + 1 / A_SD**2, s.hac, s.hcc + 1 / C_SD**2


def abilities(outcome: Outcomes, fit: Fit) -> pd.DataFrame:
    """Every respondent's ability and its standard error, with the items answered and the share right."""
    seen = outcome.observed
    return outcome.respondents.assign(
        theta=fit.theta,
        theta_se=fit.theta_se,
        n_items=seen.sum(0),
        accuracy=100 * np.nansum(outcome.y, axis=0) / np.maximum(seen.sum(0), 1),
    )


def items(outcome: Outcomes, fit: Fit) -> pd.DataFrame:
    """Every item's difficulty and discrimination with their standard errors and respondents."""
    return pd.DataFrame(
        {"item_id": outcome.item_ids, "difficulty": fit.b, "difficulty_se": fit.b_se,
         "discrimination": fit.a, "discrimination_se": fit.a_se, "n_respondents": outcome.observed.sum(1)}
    )  # fmt: skip


def ability_at(fit: Fit, share: float) -> float:
    """The ability whose expected share right over the fit's items is ``share`` (between 0 and 1): where an
    accuracy, such as a pass mark, lies on the scale. Bisection: the expected share rises with ability."""
    low, high = -8.0, 8.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if fit.p(theta=np.array([mid])).mean() < share else (low, mid)
    return (low + high) / 2
