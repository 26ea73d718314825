"""Public − Fresh: how much better a model does on public items than on never-published ones, read against the
practitioners' own gap.

Fresh items need not be as hard as the exam's, so a model's public − fresh gap alone says little: a
harder pool lowers everyone. What points at memorisation is the difference of the two gaps, the
model's minus the practitioners', on the items each set holds:

    D = [acc_model(public) − acc_model(fresh)] − [acc_human(public) − acc_human(fresh)]
      = mean_public(model − human) − mean_fresh(model − human)

where "human" is the practitioners' majority verdict on each item (``tcmqa.ingest.majority``) and
the public items are those with a practitioners' reference (the subset). The two sums run over
disjoint items, and model and practitioners answer the same items within each, so D's standard
error is that of two independent means of paired differences; the interval is normal (Wald), as
both sets hold at least ``MIN_POOL`` items when it is shown.

What D assumes: a change of difficulty between the sets moves the model's and the practitioners'
accuracy by the same number of points. That holds where their accuracies are close; for a model far
from the practitioners (near 0 or 100%) a harder pool moves it less, and D errs toward *not*
flagging a stronger model and toward flagging a weaker one. The interval excludes 0 in favour of
memorisation only when D > 0.

>>> from numpy import array
>>> gap = fresh_gap(array([1, 1, 1, 0]), array([1, 0, 1, 0]), array([1, 0, 0, 1]), array([1, 0, 0, 1]))
>>> gap.model_gap, gap.human_gap, gap.difference
(25.0, 0.0, 25.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

MIN_POOL = 100  # fresh items below which the board shows "pool too small (n)" instead of Fresh and its gap
LEVEL = 0.95


@dataclass(frozen=True)
class FreshGap:
    """A model's public − fresh gap against the practitioners', in accuracy points (percent)."""

    n_public: int
    n_fresh: int
    model_public: float
    model_fresh: float
    human_public: float
    human_fresh: float
    difference: float  # model_gap − human_gap
    low: float
    high: float

    @property
    def model_gap(self) -> float:
        return round(self.model_public - self.model_fresh, 10)

    @property
    def human_gap(self) -> float:
        return round(self.human_public - self.human_fresh, 10)

    @property
    def marked(self) -> bool:
        """The interval lies above 0: the model gains on public items more than the practitioners do."""
        return self.low > 0


def _paired(model: np.ndarray, human: np.ndarray, name: str) -> np.ndarray:
    model, human = np.asarray(model, dtype=float), np.asarray(human, dtype=float)
    if model.shape != human.shape or model.ndim != 1:
        raise ValueError(f"{name}: the model's and the practitioners' correctness must be 1-D over the same items")
    if not len(model):
        raise ValueError(f"{name}: no items")
    if not np.isin(model, (0, 1)).all() or not np.isin(human, (0, 1)).all():
        raise ValueError(f"{name}: correctness must be 0 or 1 per item")
    return model - human


def fresh_gap(
    model_public: np.ndarray, human_public: np.ndarray, model_fresh: np.ndarray, human_fresh: np.ndarray
) -> FreshGap:
    """The difference of gaps with its interval; each argument is 0/1 correctness per item, paired by position."""
    public = _paired(model_public, human_public, "public items")
    fresh = _paired(model_fresh, human_fresh, "fresh items")
    difference = public.mean() - fresh.mean()
    se = (
        np.sqrt(public.var(ddof=1) / len(public) + fresh.var(ddof=1) / len(fresh))
        if min(len(public), len(fresh)) > 1
        else np.inf
    )
    half = norm.ppf(0.5 + LEVEL / 2) * se

    def pct(values: np.ndarray) -> float:
        return round(100 * float(np.mean(values)), 10)

    return FreshGap(
        n_public=len(public),
        n_fresh=len(fresh),
        model_public=pct(model_public),
        model_fresh=pct(model_fresh),
        human_public=pct(human_public),
        human_fresh=pct(human_fresh),
        difference=round(100 * float(difference), 10),
        low=float(100 * (difference - half)),
        high=float(100 * (difference + half)),
    )
