"""The pass mark: would a model pass the licensing exam's written test, overall, by domain, on fresh items.

The national medical licensing exams' written test passes at 360 of 600 points, 60%: the line
practitioners and the press ask about first. Here it is a share of exact matches (configurable), read
against each model's accuracy on the full corpus, on the items of each domain the practitioners
assigned (the corpus's ``domains``; items nobody rated have none), and on fresh items where a
model has results on them (``tcmqa.fresh``: pass their per-model accuracy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tcmqa.schema import DOMAINS
from tcmqa.study import Study

PASS_MARK = 60.0  # percent: 360 of 600 points


def check_mark(mark: float) -> float:
    """The pass mark, refused unless a percentage strictly between 0 and 100."""
    if not 0 < mark < 100:
        raise ValueError(f"the pass mark is a percentage between 0 and 100 (the exam's is {PASS_MARK:g}), not {mark}")
    return float(mark)


def pass_table(study: Study, mark: float = PASS_MARK, fresh: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per model and scope (``full``, ``domain:<key>`` per domain with items, ``fresh`` where
    ``fresh``, rows of model, n_items and accuracy in percent on the fresh items, has the model): items,
    accuracy (percent) and whether it reaches ``mark``."""
    mark = check_mark(mark)
    covered = study.covered
    scored = study.corpus.set_index("id")["domains"].reindex(study.item_ids)
    scopes = {"full": np.ones(len(study.item_ids), dtype=bool)}
    for key in DOMAINS:
        in_domain = scored.map(lambda domains, key=key: key in list(domains) if domains is not None else False)
        if in_domain.any():
            scopes[f"domain:{key}"] = in_domain.to_numpy(bool)
    rows = []
    for scope, items in scopes.items():
        answered = covered[items].sum(axis=0)
        right = (study.correct & covered)[items].sum(axis=0)
        accuracy = np.where(answered > 0, 100 * right / np.maximum(answered, 1), np.nan)
        rows += [
            {"model": name, "scope": scope, "n_items": int(n), "accuracy": float(acc)}
            for name, n, acc in zip(study.model_names, answered, accuracy)
        ]
    if fresh is not None:
        known = fresh[fresh["model"].isin(study.model_names) & fresh["accuracy"].notna()]
        rows += [
            {"model": r.model, "scope": "fresh", "n_items": int(r.n_items), "accuracy": float(r.accuracy)}
            for r in known.itertuples()
        ]
    table = pd.DataFrame(rows, columns=["model", "scope", "n_items", "accuracy"])
    table["passes"] = table["accuracy"] >= mark
    return table
