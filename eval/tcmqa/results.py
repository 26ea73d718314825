"""The results row (the ``results`` config, one leaderboard row) from a model's output rows.

Every number is an aggregate of per-row values the metric module computed when the rows were built,
so the row can be recomputed from the ``outputs`` config alone. Accuracies and P/R/F1 are percentages;
the mean predicted size is a count of letters; the confidence gap is in nats.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcmqa.schema import RESULTS

PAPER_HUMAN_REFERENCE = 64.94  # practitioners' majority vote on the paper's 4,801-item subset
MARGIN_CAP_QUANTILE = 0.99  # Appendix B: margins are capped at their 99th percentile


def confidence_gap(
    margins: Sequence[float], correct: Sequence[bool], cap_quantile: float = MARGIN_CAP_QUANTILE
) -> float:
    """Mean margin on correct answers minus mean margin on wrong ones (Appendix B).

    Margins are capped at their ``cap_quantile`` quantile so that a few extreme margins cannot
    dominate. NaN when either group is empty.
    """
    margins = np.asarray(margins, dtype=float)
    correct = np.asarray(correct, dtype=bool)
    if margins.shape != correct.shape:
        raise ValueError(f"margins and correct differ in shape: {margins.shape} vs {correct.shape}")
    if not correct.any() or correct.all():
        return math.nan
    capped = np.minimum(margins, np.quantile(margins, cap_quantile))
    return float(capped[correct].mean() - capped[~correct].mean())


def _percent(values: pd.Series) -> float | None:
    return float(values.mean()) * 100 if len(values) else None


def _single_value(outputs: pd.DataFrame, column: str) -> str:
    values = outputs[column].unique()
    if len(values) != 1:
        raise ValueError(f"the output rows mix several values of {column!r}: {sorted(values)[:5]}")
    return str(values[0])


def results_row(
    outputs: pd.DataFrame,
    subset: pd.DataFrame | None = None,
    *,
    family: str | None = None,
    params_b: float | None = None,
    engine: str | None = None,
    engine_version: str | None = None,
    dtype: str | None = None,
    date: str | None = None,
) -> dict[str, Any]:
    """One ``RESULTS`` row for the model whose output rows are given.

    Subset accuracy and Δ human use the items of ``subset`` (with ``item_id`` and
    ``majority_correct``) that were evaluated; the human reference is the practitioners' majority
    vote on those same items. Without a subset (or with no evaluated subset item) Subset and Δ human
    are null and the reference is the paper's 64.94. The confidence gap uses the generative channel's
    correctness.
    """
    if outputs.empty:
        raise ValueError("no output rows to summarise")
    if outputs["item_id"].duplicated().any():
        raise ValueError("the output rows repeat some item ids; each item must be scored once")
    single = outputs[outputs["answer_type"] == "single"]
    multi = outputs[outputs["answer_type"] == "multi"]
    on_subset = pd.DataFrame()
    if subset is not None and len(subset):
        on_subset = outputs.merge(subset[["item_id", "majority_correct"]], on="item_id", how="inner")
    subset_accuracy = _percent(on_subset["correct"]) if len(on_subset) else None
    human = _percent(on_subset["majority_correct"]) if len(on_subset) else PAPER_HUMAN_REFERENCE
    row = {
        "model": _single_value(outputs, "model"),
        "family": family,
        "params_b": params_b,
        "origin": "evaluated",
        "full": _percent(outputs["correct"]),
        "single": _percent(single["correct"]),
        "multi": _percent(multi["correct"]),
        "subset": subset_accuracy,
        "delta_human": None if subset_accuracy is None else subset_accuracy - human,
        "human_reference": human,
        "lp_full": _percent(outputs["lp_correct"]),
        "multi_precision": _percent(multi["precision"]),
        "multi_recall": _percent(multi["recall"]),
        "multi_f1": _percent(multi["f1"]),
        "multi_mean_pred_size": float(multi["prediction"].map(len).mean()) if len(multi) else None,
        "confidence_gap": confidence_gap(outputs["margin"], outputs["correct"]),
        "n": len(outputs),
        "n_single": len(single),
        "n_multi": len(multi),
        "n_subset": len(on_subset),
        "revision": _single_value(outputs, "revision"),
        "engine": engine,
        "engine_version": engine_version,
        "dtype": dtype,
        "protocol": _single_value(outputs, "protocol"),
        "date": date or dt.datetime.now(dt.timezone.utc).date().isoformat(),
    }
    row = {key: (None if isinstance(value, float) and math.isnan(value) else value) for key, value in row.items()}
    if set(row) != set(RESULTS):
        raise AssertionError(f"results row keys drifted from RESULTS: {sorted(set(row) ^ set(RESULTS))}")
    return row
