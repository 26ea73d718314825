"""TCMQA for lighteval: its custom-task module (``--custom-tasks`` this file, :func:`tcmqa.tasks.lighteval_path`).

Tasks ``tcmqa_gen`` (the generative channel: greedy, 16 new tokens, scored Full, Single, Multi, Subset and
Multi F1 by ``tcmqa_metric``) and ``tcmqa_loglik`` (the log-prob channel: the log-likelihood of each letter
right after the prompt, :data:`tcmqa.tasks.core.CHOICES`, scored LP Full), on the data
:func:`tcmqa.tasks.core.task_data` names when this module is imported ($TCMQA_TASK_DATA: a Hub id or a tree
written by ``tcmqa build``; TechTCM/TCMQA when unset). The prompt is the protocol's user message in the model's
chat template (lighteval renders it for a model with one; it passes no ``enable_thinking``, so a model with a
thinking switch renders with its template's default). lighteval's ``--max-samples`` draws a shuffled sample
of the items, not the first N.
"""

from __future__ import annotations

import functools
from typing import Any

from lighteval.metrics.metrics_sample import SampleLevelComputation  # pyright: ignore[reportMissingImports]
from lighteval.metrics.utils.metric_utils import (  # pyright: ignore[reportMissingImports]
    SampleLevelMetric,
    SampleLevelMetricGrouping,
)
from lighteval.tasks.lighteval_task import LightevalTaskConfig  # pyright: ignore[reportMissingImports]
from lighteval.tasks.requests import Doc, SamplingMethod  # pyright: ignore[reportMissingImports]

from tcmqa import prompts
from tcmqa.schema import SPLIT
from tcmqa.tasks import core


@functools.cache
def _subset(data: str) -> frozenset[str]:
    """The subset's item ids (the prompt functions see one corpus row at a time)."""
    return frozenset(core.items(data).filter(lambda kept: kept, input_columns="in_subset")["id"])


def _doc(line: dict[str, Any], task_name: str, choices: list[str], gold: list[int]) -> Doc:
    item = {**line, "in_subset": line["id"] in _subset(core.task_data())}
    keep = ("id", "answer", "answer_type", "in_subset")
    return Doc(
        query=core.user_message(line),
        choices=choices,
        gold_index=gold,
        task_name=task_name,
        specific={key: item[key] for key in keep},
    )


def generative_prompt(line: dict[str, Any], task_name: str = "tcmqa_gen") -> Doc:
    return _doc(line, task_name, ["".join(line["answer"])], [0])


def loglik_prompt(line: dict[str, Any], task_name: str = "tcmqa_loglik") -> Doc:
    gold = [core.CHOICES.index(letter) for letter in line["answer"]]
    return _doc(line, task_name, core.CHOICES, gold)


class Generative(SampleLevelComputation):
    """The generative channel's scores of one item (:func:`tcmqa.tasks.core.generative_scores`)."""

    def compute(self, doc: Doc, model_response: Any, **kwargs: Any) -> dict[str, float | None]:
        return core.generative_scores(doc.specific, model_response.text[0])


class Logprob(SampleLevelComputation):
    """LP Full of one item (:func:`tcmqa.tasks.core.logprob_scores`)."""

    def compute(self, doc: Doc, model_response: Any, **kwargs: Any) -> float | None:
        return core.logprob_scores(doc.specific, list(model_response.logprobs))["lp_full"]


GENERATIVE = SampleLevelMetricGrouping(
    metric_name=list(core.GENERATIVE_METRICS),
    higher_is_better=dict.fromkeys(core.GENERATIVE_METRICS, True),
    category=SamplingMethod.GENERATIVE,
    sample_level_fn=Generative(),
    corpus_level_fn=dict.fromkeys(core.GENERATIVE_METRICS, core.average_applicable),
)
(LP_FULL,) = core.LOGPROB_METRICS
LOGPROB = SampleLevelMetric(
    metric_name=LP_FULL,
    higher_is_better=True,
    category=SamplingMethod.LOGPROBS,
    sample_level_fn=Logprob(),
    corpus_level_fn=core.average_applicable,
)

_COMMON: dict[str, Any] = {
    "hf_repo": core.task_data(),
    "hf_subset": "corpus",
    "hf_filter": lambda line: not line["flagged"],
    "hf_avail_splits": [SPLIT],
    "evaluation_splits": [SPLIT],
    "few_shots_split": None,
    "few_shots_select": None,
    "version": int(prompts.PROTOCOL.removeprefix("v")),
}
TASKS_TABLE = [
    LightevalTaskConfig(
        name="tcmqa_gen",
        prompt_function=generative_prompt,
        metrics=[GENERATIVE],
        generation_size=prompts.MAX_NEW_TOKENS,
        stop_sequence=[],
        **_COMMON,
    ),
    LightevalTaskConfig(
        name="tcmqa_loglik",
        prompt_function=loglik_prompt,
        metrics=[LOGPROB],
        generation_size=-1,
        **_COMMON,
    ),
]
