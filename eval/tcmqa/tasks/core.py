"""What the lm-eval and lighteval tasks share: the items they read and how one answer is scored.

The items are the data's scorable corpus rows in corpus order (flagged items left out, as ``tcmqa eval``
leaves them), each with ``in_subset``: whether it is in the practitioners' comparison subset. Scores are
``tcmqa_metric.score`` on one item, the call ``tcmqa.outputs.build_rows`` makes: the generative channel
reads the text with ``parse_text``; the log-prob channel takes the letter of highest log-likelihood
(``tcmqa.outputs.lp_prediction``, the first on a tie). A score that does not apply to an item (Single on a
multi-answer item, Subset outside the subset) is None, and :func:`average_applicable` leaves it out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.compute as pc

from tcmqa import prompts
from tcmqa.outputs import lp_prediction
from tcmqa.schema import HUB_ID
from tcmqa_metric import LETTERS, parse_text, score

DATA_VAR = "TCMQA_TASK_DATA"  # a Hub id or a tree written by `tcmqa build`; TechTCM/TCMQA when unset
GENERATIVE_METRICS = ("full", "single", "multi", "subset", "multi_f1")
LOGPROB_METRICS = ("lp_full",)
# The log-prob channel's choices: the five letters, each scored as the text right after the prompt. The engines
# sum each letter's single-token spellings ("A", "▁A", "Ａ"); a tool scores text, and a spelling such as " A" is
# no token of its own after the template's newline (lm-eval moves the context's trailing whitespace into the
# continuation), so the tools' letter log-probs are the bare letters': lower, with the same argmax where the
# spellings keep their order (all 20 items of the tests).
CHOICES = list(LETTERS)


def task_data(data: str | None = None) -> str:
    """The data the tasks read: ``data`` if given, else $TCMQA_TASK_DATA, else TechTCM/TCMQA."""
    return data or os.environ.get(DATA_VAR) or HUB_ID


def items(data: str | None = None, data_revision: str | None = None) -> datasets.Dataset:
    """The scorable corpus rows of :func:`task_data` in corpus order, each with ``in_subset``."""
    from tcmqa.data import has_config, load_config

    source = task_data(data)
    corpus = load_config(source, "corpus", data_revision).data.table
    corpus = corpus.filter(pc.invert(pc.fill_null(corpus["flagged"], False)))
    subset: set[str] = set()
    if has_config(source, "subset"):
        subset = set(load_config(source, "subset", data_revision)["item_id"])
    in_subset = pa.array([item_id in subset for item_id in corpus["id"].to_pylist()], pa.bool_())
    return datasets.Dataset(corpus.append_column("in_subset", in_subset))


def user_message(doc: Mapping[str, Any]) -> str:
    """The protocol's single user message; the tool wraps it in the model's chat template."""
    messages = prompts.render_messages(doc)
    if [m["role"] for m in messages] != ["user"]:
        raise ValueError(f"the tasks expect one user message; the protocol gives {[m['role'] for m in messages]}")
    return messages[0]["content"]


def _applies(doc: Mapping[str, Any], value: float) -> dict[str, float | None]:
    multi = doc["answer_type"] == "multi"
    return {
        "full": value,
        "single": None if multi else value,
        "multi": value if multi else None,
        "subset": value if doc["in_subset"] else None,
    }


def generative_scores(doc: Mapping[str, Any], text: str) -> dict[str, float | None]:
    """Full, Single, Multi, Subset (exact match, 0 or 1) and Multi F1 of one generated text."""
    per_item = score([parse_text(text)], [list(doc["answer"])], [doc["answer_type"]], per_item=True)["per_item"]
    scores = _applies(doc, float(per_item["exact_match"][0]))
    scores["multi_f1"] = float(per_item["f1"][0]) if doc["answer_type"] == "multi" else None
    return scores


def letter_logprobs(logliks: Sequence[float]) -> dict[str, float]:
    """Each letter's log-prob from the log-likelihoods of :data:`CHOICES`, in that order."""
    if len(logliks) != len(CHOICES):
        raise ValueError(f"expected one log-likelihood per letter {LETTERS}, got {len(logliks)}")
    return {letter: float(value) for letter, value in zip(LETTERS, logliks)}


def logprob_scores(doc: Mapping[str, Any], logliks: Sequence[float]) -> dict[str, float | None]:
    """LP Full (exact match of the letter of highest log-likelihood, 0 or 1) from those of :data:`CHOICES`."""
    prediction = lp_prediction(letter_logprobs(logliks))
    return {"lp_full": float(score([prediction], [list(doc["answer"])], [doc["answer_type"]])["exact_match"])}


def average_applicable(values: Iterable[float | None]) -> float:
    """The mean over the items a score applies to (None left out); nan over none. Not named *mean*: lighteval takes
    an aggregation so named for a plain mean and computes its stderr as one, which fails on the None; it bootstraps
    the stderr of others (in worker processes: the function must be importable, as here)."""
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(kept) / len(kept) if kept else math.nan
