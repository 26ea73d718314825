"""Calibration and selective accuracy of the log-prob channel, read from the stored letter log-probs.

No extra pass: every output row already holds the first generated token's log-prob of each letter.
Confidence is the probability of the predicted letter renormalised over A-E (the model's belief
*given* that it answers with a letter), so a model that often starts with another token is not
penalised twice. Only single-answer items count: a one-letter prediction cannot be right on a
multi-answer item, whatever the model believes.

The figures follow HELM: equal-mass ECE over 10 bins, accuracy on the most confident 10%, and the
area under the accuracy-coverage curve (mean over k of the accuracy on the k most confident items).

>>> confidence = [0.95, 0.9, 0.6, 0.55]
>>> correct = [True, True, False, True]
>>> round(selective_accuracy(confidence, correct, 0.5), 3)
1.0
>>> round(accuracy_coverage_area(confidence, correct), 4)  # (1 + 1 + 2/3 + 3/4) / 4
0.8542
>>> round(equal_mass_ece(confidence, correct, bins=2), 4)  # bins {.95,.9}: |1-.925|; {.6,.55}: |.5-.575|
0.075
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcmqa_metric import LETTERS

BINS = 10
TOP_SHARE = 0.10


def letter_probabilities(logprobs: np.ndarray) -> np.ndarray:
    """Rows of log-probs over A-E -> rows of probabilities renormalised over A-E."""
    logprobs = np.asarray(logprobs, dtype=float)
    shifted = logprobs - logprobs.max(axis=1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


def _ranked(confidence: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    confidence = np.asarray(confidence, dtype=float)
    correct = np.asarray(correct, dtype=bool)
    if confidence.shape != correct.shape or confidence.ndim != 1:
        raise ValueError(
            f"confidence and correct must be two vectors of one length: {confidence.shape}, {correct.shape}"
        )
    order = np.argsort(-confidence, kind="stable")
    return confidence[order], correct[order]


def equal_mass_ece(confidence: Sequence[float], correct: Sequence[bool], bins: int = BINS) -> float:
    """Expected calibration error with bins of equal size (sorted by confidence): sum over bins of the
    bin's share times |accuracy - mean confidence|. A fraction in [0, 1]; NaN without items."""
    conf, right = _ranked(confidence, correct)
    if not len(conf):
        return math.nan
    total = 0.0
    for idx in np.array_split(np.arange(len(conf)), min(bins, len(conf))):
        total += len(idx) / len(conf) * abs(right[idx].mean() - conf[idx].mean())
    return float(total)


def selective_accuracy(confidence: Sequence[float], correct: Sequence[bool], share: float = TOP_SHARE) -> float:
    """Accuracy on the ``share`` most confident items (at least one)."""
    _, right = _ranked(confidence, correct)
    if not len(right):
        return math.nan
    return float(right[: max(1, math.ceil(share * len(right)))].mean())


def accuracy_coverage_area(confidence: Sequence[float], correct: Sequence[bool]) -> float:
    """Area under the accuracy-coverage curve: mean over k of the accuracy on the k most confident."""
    _, right = _ranked(confidence, correct)
    if not len(right):
        return math.nan
    return float((np.cumsum(right) / np.arange(1, len(right) + 1)).mean())


def summarise(outputs: pd.DataFrame) -> dict[str, Any]:
    """The results row's calibration columns (percent) from output rows (``letter_logprobs``,
    ``lp_correct``, ``answer_type``); null without a single-answer item."""
    single = outputs[outputs["answer_type"] == "single"]
    if single.empty:
        return {"ece": None, "acc_top10": None, "acc_coverage_area": None}
    logprobs = np.array([[row[letter] for letter in LETTERS] for row in single["letter_logprobs"]], dtype=float)
    confidence = letter_probabilities(logprobs).max(axis=1)
    correct = single["lp_correct"].to_numpy(dtype=bool)
    return {
        "ece": 100 * equal_mass_ece(confidence, correct),
        "acc_top10": 100 * selective_accuracy(confidence, correct),
        "acc_coverage_area": 100 * accuracy_coverage_area(confidence, correct),
    }
