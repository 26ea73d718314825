"""What each respondent chose, not only whether it matched the key: letter sets as A..E bitmasks.

The key audit (``tcmqa.suspects``) asks which other answer the abler respondents agree on, which the
``Study`` matrices (right or wrong) cannot tell. Here every item's published key, every model's
prediction and every practitioner's selection are bitmasks (bit k: letter k of A..E; 0: nothing
chosen), aligned with the corpus items: flagged items too (the harness skips them, so no model
answered them, but practitioners did, and their flags are evidence on the key). Model predictions are
read where they lie, one small column per run (``tcmqa.outputs_query``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from tcmqa.outputs_query import OutputsQuery
from tcmqa.study import Study, read_config
from tcmqa_metric import LETTERS

NOT_ANSWERED = -1  # a model with no output for the item
_SQL_MASK = " + ".join(
    f"{1 << k} * coalesce(list_contains(prediction, '{c}'), false)::INT" for k, c in enumerate(LETTERS)
)


def masks(letter_lists: pd.Series) -> np.ndarray:
    """Letter lists (``["B", "D"]``) as bitmasks; None or empty: 0."""
    exploded = letter_lists.explode()
    bits = exploded.map({c: 1 << k for k, c in enumerate(LETTERS)}).fillna(0).astype(np.int64)
    return bits.groupby(level=0).sum().reindex(letter_lists.index, fill_value=0).to_numpy(np.int8)


def letters(mask: int) -> str:
    """A bitmask as its letters, ``"BD"``; 0: ``"-"``."""
    return "".join(c for k, c in enumerate(LETTERS) if mask >> k & 1) or "-"


@dataclass
class Answers:
    """Keys and choices on every corpus item (rows: ``item_ids``, corpus order)."""

    item_ids: np.ndarray
    scored: np.ndarray  # bool per item: scored (not flagged), a row of the study's matrices
    key: np.ndarray  # int8 per item
    models: np.ndarray  # items x models, int8; NOT_ANSWERED where the model has no output
    responses: pd.DataFrame  # row (the item's), practitioner_id, choice (bitmask), flagged: one per response


def load_answers(study: Study, data: str | Path) -> Answers:
    """The keys of ``data``'s corpus, the predictions of the study's runs and the practitioners'
    selections, on every corpus item (``study`` must have been loaded from ``data``)."""
    corpus = read_config(data, "corpus", ["id", "answer"]).to_pandas()
    item_ids = corpus["id"].to_numpy()
    key = masks(corpus["answer"])
    n, m = len(item_ids), len(study.models)
    models = np.full((n, m), NOT_ANSWERED, dtype=np.int8)
    if m:
        items = pa.table({"item_id": pa.array(item_ids, pa.string()), "row": pa.array(np.arange(n), pa.int32())})
        with OutputsQuery(study.models["run"].tolist(), items) as query:
            for columns, rows, values in query.cells({"mask": _SQL_MASK}, range(m)):
                models[rows["row"], columns] = values["mask"]
    rows = pd.Index(item_ids).get_indexer(study.responses["item_id"])
    known = study.responses[rows >= 0]
    responses = pd.DataFrame(
        {
            "row": rows[rows >= 0],
            "practitioner_id": known["practitioner_id"].to_numpy(),
            "choice": masks(known["selected"].reset_index(drop=True)),
            "flagged": known["flagged"].to_numpy(bool),
        }
    )
    scored = pd.Index(study.item_ids).get_indexer(item_ids) >= 0  # np.isin is quadratic on strings
    return Answers(item_ids=item_ids, scored=scored, key=key, models=models, responses=responses)
