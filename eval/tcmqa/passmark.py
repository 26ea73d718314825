"""The pass mark: would a model pass the licensing exam's written test, overall, by domain, on fresh items.

The national medical licensing exams' written test passes at 360 of 600 points, 60%: the line
practitioners and the press ask about first. Here it is a share of exact matches (configurable: the
Space's ``TCMQA_PASS_MARK``), read against each model's accuracy on the full corpus, on the items of each
domain (a unit of the exam) the practitioners assigned (the corpus's ``domains``; items nobody rated have
none), and on fresh items where a model has results on them (``tcmqa.fresh``: pass their per-model
accuracy). :func:`passes` is the one rule; the report's table, the board's Passes column and the model
page all read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from tcmqa.schema import DOMAINS
from tcmqa.study import Study

PASS_MARK = 60.0  # percent: 360 of 600 points
YES, NO = "✓", "✗"


def check_mark(mark: float) -> float:
    """The pass mark, refused unless a percentage strictly between 0 and 100."""
    if not 0 < mark < 100:
        raise ValueError(f"the pass mark is a percentage between 0 and 100 (the exam's is {PASS_MARK:g}), not {mark}")
    return float(mark)


def passes(accuracy: float | None, mark: float = PASS_MARK) -> bool | None:
    """Whether an accuracy (percent) reaches the mark; None without one."""
    if accuracy is None or pd.isna(accuracy):
        return None
    return bool(accuracy >= mark)


def domain_scopes(domains: Sequence) -> dict[str, np.ndarray]:
    """``full`` (every item) and ``domain:<key>`` for each domain with items: masks over the items, from each
    item's domain keys (a list or array; None or NaN, as a table reads a missing one, for an item nobody rated)."""
    keys = [set(d) if isinstance(d, list | tuple | np.ndarray) else set() for d in domains]
    scopes = {"full": np.ones(len(keys), dtype=bool)}
    for key in DOMAINS:
        inside = np.array([key in k for k in keys], dtype=bool)
        if inside.any():
            scopes[f"domain:{key}"] = inside
    return scopes


def pass_rows(
    names: Sequence[str],
    covered: np.ndarray,
    correct: np.ndarray,
    domains: Sequence,
    mark: float = PASS_MARK,
    fresh: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per model (the columns of ``covered`` and ``correct``, items x models) and scope (``full``,
    ``domain:<key>`` per domain with items, ``fresh`` where ``fresh``, rows of model, n_items and accuracy in
    percent on the fresh items, has the model): items, accuracy (percent) and whether it reaches ``mark``."""
    mark = check_mark(mark)
    rows = []
    for scope, items in domain_scopes(domains).items():
        answered = covered[items].sum(axis=0)
        right = (correct & covered)[items].sum(axis=0)
        accuracy = np.where(answered > 0, 100 * right / np.maximum(answered, 1), np.nan)
        rows += [
            {"model": name, "scope": scope, "n_items": int(n), "accuracy": float(acc)}
            for name, n, acc in zip(names, answered, accuracy)
        ]
    if fresh is not None:
        known = fresh[fresh["model"].isin(list(names)) & fresh["accuracy"].notna()]
        rows += [
            {"model": r.model, "scope": "fresh", "n_items": int(r.n_items), "accuracy": float(r.accuracy)}
            for r in known.itertuples()
        ]
    table = pd.DataFrame(rows, columns=["model", "scope", "n_items", "accuracy"])
    table["passes"] = [passes(v, mark) is True for v in table["accuracy"]]
    return table


def pass_table(study: Study, mark: float = PASS_MARK, fresh: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`pass_rows` of every model of ``study`` on its scored items."""
    scored = study.corpus.set_index("id")["domains"].reindex(study.item_ids)
    return pass_rows(study.model_names, study.covered, study.correct, scored.tolist(), mark, fresh)


def verdict(full: float | None, fresh: float | None, units: Mapping[str, float], mark: float = PASS_MARK) -> str:
    """One model's pass in one cell: "full ✓ · fresh ✗ · units 5/7" (a scope without a value is left out)."""
    parts = [f"{scope} {YES if passes(value, mark) else NO}" for scope, value in (("full", full), ("fresh", fresh))
             if passes(value, mark) is not None]  # fmt: skip
    known = [v for v in units.values() if passes(v, mark) is not None]
    if known:
        parts.append(f"units {sum(bool(passes(v, mark)) for v in known)}/{len(known)}")
    return " · ".join(parts)
