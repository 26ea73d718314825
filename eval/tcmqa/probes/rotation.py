"""Option rotations: robustness (CircularEval) and letter selection bias (per-letter recall, PriDe).

Each item is asked again under the four other cyclic rotations of its options, with the protocol's
prompt, rendering and decoding; the reference letters move with the options. Rotation 0 is the
published order, copied from the v1 run. Over the five rotations every option content is shown once
at every letter, so what stays constant across them is the model's preference for letters as such:

* **CircularEval** (OpenCompass): an item counts only if it is right under all five rotations;
  ``circular_drop`` is the accuracy in the published order minus that, on the same items. The mean over
  the five rotations (``rotation_mean``) is read against that published-order accuracy on the same items
  (``rotation_published``), not against Full, which is on every item.
* **Per-letter recall spread** (Zheng et al., ICLR 2024, "RStd"): the standard deviation, over the
  letters A-E, of the share of single-answer items answered right when that letter is the answer,
  pooled over rotations (each letter is the answer equally often across an item's rotations).
* **PriDe** (ibid.): the letter prior is estimated on a seeded share of single-answer items as the
  softmax over letters of each letter's log-prob averaged over the item's rotations (content cancels),
  averaged over items; the remaining items are scored in the published order with that prior divided
  out of the log-prob channel's letter probabilities. It is read against the same channel with the prior
  left in on those same items (``pride_lp``), not against LP Full, which also counts the multi-answer
  items the log-prob channel always misses.

Null each statistic assumes: CircularEval and RStd have none (they are descriptive); a model without
letter preferences has RStd near 0 and PriDe near ``pride_lp``.

>>> item = {"options": dict(zip("ABCDE", "vwxyz")), "answer": ["B", "D"]}
>>> turned = rotate(item, 1)
>>> "".join(turned["options"].values()), turned["answer"]
('wxyzv', ['A', 'C'])
>>> rotate(item, 0) == item
True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcmqa.engines.base import Completion, Prompt
from tcmqa.outputs import build_rows
from tcmqa_metric import LETTERS

ROTATIONS = len(LETTERS)  # 0 (published) .. 4
PRIDE_SHARE = 0.05  # share of single-answer probed items PriDe estimates its prior on (Zheng et al.: 5%)
# the results columns :func:`summarise` fills besides n_rotation (tcmqa.schema.RESULT_COLUMNS says what each is)
SUMMARY = ("circular", "rotation_mean", "rotation_published", "circular_drop", "recall_std", "pride", "pride_lp")
ROW_COLUMNS = (
    "answer",
    "generated_text",
    "prediction",
    "correct",
    "letter_logprobs",
    "lp_prediction",
    "lp_correct",
    "prompt_hash",
)


def rotate(item: Mapping[str, Any], k: int) -> dict[str, Any]:
    """``item`` with its options shifted ``k`` places: letter i shows published option (i + k) mod 5."""
    if not 0 <= k < ROTATIONS:
        raise ValueError(f"rotation must be 0..{ROTATIONS - 1}, got {k}")
    options = [item["options"][letter] for letter in LETTERS]
    shifted = {letter: options[(i + k) % ROTATIONS] for i, letter in enumerate(LETTERS)}
    answer = sorted(LETTERS[(LETTERS.index(letter) - k) % ROTATIONS] for letter in item["answer"])
    return {**item, "options": shifted, "answer": answer}


def probe_rows(
    items: Sequence[Mapping[str, Any]],
    rendered: Sequence[Prompt],
    completions: Sequence[Completion],
    rotations: Sequence[int],
    *,
    model: str,
    revision: str,
) -> list[dict[str, Any]]:
    """Rotation rows (``PROBES`` columns) for rotated ``items`` (item i under ``rotations[i]``), scored
    by the same code as the v1 rows (:func:`tcmqa.outputs.build_rows`)."""
    scored = build_rows(items, rendered, completions, model=model, revision=revision)
    return [
        {
            "model": model,
            "revision": revision,
            "item_id": item["id"],
            "answer_type": item["answer_type"],
            "probe": "rotation",
            "rotation": k,
            "answer": list(item["answer"]),
            **{key: row[key] for key in ROW_COLUMNS if key != "answer"},
        }
        for item, row, k in zip(items, scored, rotations, strict=True)
    ]


def published_rows(outputs: pd.DataFrame, items: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rotation-0 rows copied from the v1 output rows of the probed items (``items`` by id)."""
    rows = []
    for out in outputs.to_dict("records"):
        if out["item_id"] not in items:
            continue
        rows.append(
            {
                "model": out["model"],
                "revision": out["revision"],
                "item_id": out["item_id"],
                "answer_type": out["answer_type"],
                "probe": "rotation",
                "rotation": 0,
                "answer": list(items[out["item_id"]]["answer"]),
                **{key: out[key] for key in ROW_COLUMNS if key != "answer"},
            }
        )
    return rows


def complete_items(rows: pd.DataFrame) -> pd.DataFrame:
    """The rotation rows of items that have all five rotations, one row per (item, rotation), sorted."""
    rows = rows.drop_duplicates(["item_id", "rotation"], keep="last")
    counts = rows.groupby("item_id")["rotation"].nunique()
    whole = counts.index[counts == ROTATIONS]
    return rows[rows["item_id"].isin(whole)].sort_values(["item_id", "rotation"], kind="stable")


def recall_std(rows: pd.DataFrame) -> float | None:
    """Standard deviation over A-E of the recall of each answer letter (single-answer rows), points."""
    single = rows[rows["answer_type"] == "single"]
    if single.empty:
        return None
    gold = single["answer"].map(lambda letters: letters[0])
    hit = [list(p) == [g] for p, g in zip(single["prediction"], gold, strict=True)]
    recalls = pd.Series(hit, index=single.index).groupby(gold).mean()
    return 100 * float(np.std(recalls.to_numpy())) if len(recalls) > 1 else None


def _normalised(letter_logprobs: Sequence[Mapping[str, float]]) -> np.ndarray:
    values = np.array([[row[letter] for letter in LETTERS] for row in letter_logprobs], dtype=float)
    top = values.max(axis=1, keepdims=True)
    return values - (top + np.log(np.exp(values - top).sum(axis=1, keepdims=True)))


def pride_prior(logprobs: np.ndarray) -> np.ndarray:
    """PriDe's letter prior from items x rotations x letters log-probs (the letter axis is the shown
    letter): per item the softmax of the log-probs averaged over rotations, then averaged over items."""
    mean = np.asarray(logprobs, dtype=float).mean(axis=1)
    per_item = np.exp(mean - mean.max(axis=1, keepdims=True))
    per_item /= per_item.sum(axis=1, keepdims=True)
    return per_item.mean(axis=0)


def _estimation_items(item_ids: Sequence[str], share: float, seed: int) -> set[str]:
    """A seeded, order-independent choice of ``share`` of the items (at least one, never all)."""
    ranked = sorted(item_ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
    count = min(len(ranked) - 1, max(1, round(share * len(ranked))))
    return set(ranked[:count])


def pride_accuracy(rows: pd.DataFrame, share: float = PRIDE_SHARE, seed: int = 0) -> tuple[float, float] | None:
    """PriDe-debiased accuracy of the log-prob channel (percent) on the single-answer items not used to
    estimate the prior, and the same channel's accuracy with the prior left in on those same items (what
    PriDe is read against: the gap is what the prior cost); ``rows`` are complete rotation rows
    (:func:`complete_items`). None with fewer than two single-answer items."""
    single = rows[rows["answer_type"] == "single"]
    ids = list(dict.fromkeys(single["item_id"]))
    if len(ids) < 2:
        return None
    estimate = _estimation_items(ids, share, seed)
    chosen = single[single["item_id"].isin(estimate)]
    prior = pride_prior(_normalised(chosen["letter_logprobs"].tolist()).reshape(len(estimate), ROTATIONS, -1))
    scored = single[~single["item_id"].isin(estimate) & (single["rotation"] == 0)]
    logprobs = _normalised(scored["letter_logprobs"].tolist())
    gold = scored["answer"].map(lambda letters: letters[0]).to_numpy()
    letters = np.array(list(LETTERS))

    def accuracy(scores: np.ndarray) -> float:
        return 100 * float((letters[scores.argmax(axis=1)] == gold).mean())

    return accuracy(logprobs - np.log(prior)), accuracy(logprobs)


def summarise(rows: pd.DataFrame, share: float = PRIDE_SHARE, seed: int = 0) -> dict[str, Any]:
    """The results row's rotation columns from rotation rows (items missing a rotation are left out)."""
    rows = complete_items(rows)
    if rows.empty:
        return dict.fromkeys(SUMMARY) | {"n_rotation": 0}
    by_item = rows.groupby("item_id")["correct"]
    circular = 100 * float(by_item.all().mean())
    published = 100 * float(rows.loc[rows["rotation"] == 0, "correct"].mean())
    pride = pride_accuracy(rows, share, seed)
    values = {
        "circular": circular,
        "rotation_mean": 100 * float(rows["correct"].mean()),
        "rotation_published": published,
        "circular_drop": published - circular,
        "recall_std": recall_std(rows),
        "pride": None if pride is None else pride[0],
        "pride_lp": None if pride is None else pride[1],
        "n_rotation": int(by_item.ngroups),
    }
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in values.items()}
