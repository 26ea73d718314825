"""lm-eval's hooks for the TCMQA tasks (the YAML files here name them with ``!function utils.NAME``).

Every rule lives in :mod:`tcmqa.tasks.core`; these only adapt it to lm-eval's calling conventions.
"""

from __future__ import annotations

from typing import Any

import datasets

from tcmqa.tasks import core


def corpus(data: str | None = None, data_revision: str | None = None, **_: Any) -> datasets.DatasetDict:
    """The items (lm-eval calls this with the task's metadata: ``--metadata '{"data": "runs/sample-tree"}'``)."""
    return datasets.DatasetDict({"test": core.items(data, data_revision)})


def doc_to_text(doc: dict) -> str:
    return core.user_message(doc)


def doc_to_target(doc: dict) -> str:
    return "".join(doc["answer"])


def doc_to_choice(doc: dict) -> list[str]:
    return core.CHOICES


def process_generation(doc: dict, results: list[str]) -> dict:
    return core.generative_scores(doc, results[0])


def process_loglikelihood(doc: dict, results: list[tuple[float, bool]]) -> dict:
    return core.logprob_scores(doc, [loglik for loglik, _ in results])


def average_applicable(values: list) -> float:
    return core.average_applicable(values)
