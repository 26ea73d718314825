"""The item explorer: one item's question and options, its answer and explanation, the practitioners'
answers and the models' outputs on it.

Independence. An item in a practitioner block still being answered
(:func:`tcmqa.leaderboard.practice.core.open_block_items`, the rule that also decides what is published) shows
its question and options only: no reference answer, no explanation, no practitioner's answer (the
imported study's included: they are co-raters' answers too) and no model output (a prediction marked
correct is the answer). The rule covers every open block, not only the caller's: a call through the
API (gradio_client) carries no signed-in profile, so the caller cannot be told from anyone else, and
a block is open for its raters until they have all finished it. A block is *open* while fewer than
its raters (the block's slots where the store records them, else the configured ``raters``) have
answered every one of its items, counting only accounts that hold their slot (not released) and are
not excluded; so a slot released or a rater excluded reopens the block until the slot is refilled
and answered. The imported study's blocks are finished by construction.

Freshness. The corpus loads once per process (lazily: the board must not wait for it). The
practitioners' answers are the ``responses`` config as practitioner mode builds it (the imported
study plus the Space's responses, excluded practitioners left out), re-read whenever the store's
practice version changes; without practitioner mode, the data's ``responses`` config. The models'
outputs are every model with recorded or published outputs, one revision per model
(:mod:`tcmqa.leaderboard.model_outputs`), re-chosen whenever the store's results change. Which items
are open is read from the store on every call, never cached: a block assigned a second ago is withheld.

The Space's endpoints and what each returns of an item (the complete list, each function by name, is
``ENDPOINTS`` in tests/test_practitioner_open_block.py, which fails on an unlisted one; each is called there
through gradio_client and in-process as a practitioner with an open block and anonymously, and a Chromium
session's traffic is searched):

* ``/item`` (:meth:`Explorer.item`): the explorer; withholds as above.
* ``/board``, ``/plots``, the board's filter events and ``refresh_families`` (private): per-model
  aggregates over many items and the practitioners' reference row; no item.
* ``/submit``, ``/job``, ``/queue``: the evaluation queue; no item.
* the Practitioners tab: ``/practice_start``, ``/practice_submit``, ``/practice_pause``, ``/practice_next``
  and the private ``resume`` (page load) and ``heartbeat``: the caller's own current item without its
  answer; the answers, explanations, co-raters and models only in the review of a block the caller
  finished. The console (``/practice_console``, ``_exclude``, ``_include``, ``_release``, ``_reassign``,
  ``_export``): admins only.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import pandas as pd

from tcmqa.data import has_config, load_config
from tcmqa.leaderboard import model_outputs
from tcmqa.leaderboard.errors import reported
from tcmqa.leaderboard.practice.core import open_block_items  # the finished-block rule's one home
from tcmqa.schema import RATERS_PER_ITEM
from tcmqa.store import Store

OUTPUT_COLUMNS = ["model", "prediction", "correct", "lp_prediction", "lp_correct", "margin", "generated_text"]
SHOWN_OUTPUT_COLUMNS = ["model", "revision", "source", *OUTPUT_COLUMNS[1:]]
RESPONSE_COLUMNS = ["practitioner_id", "selected", "correct", "difficulty", "domains", "flagged", "seconds"]
WITHHELD = (
    "_This item is in a practitioner block still being answered: its answer, explanation, the practitioners' "
    "answers and the models' outputs are withheld until every rater of the block has finished it._"
)


def _joined(value: Any) -> str:
    """Letters or domains as shown: a list (or its JSON text) joined by commas."""
    if isinstance(value, str) and value.startswith("["):
        value = json.loads(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return ", ".join(str(v) for v in value)


class Explorer:
    """The explorer over the data the Space serves and its store (module doc).

    ``practice``: the Space's :class:`tcmqa.leaderboard.practice.PracticeLoader` (practitioner mode), the
    home of the practitioners' answers; ``raters``: the configured raters per block.
    """

    def __init__(self, data: str, store: Store, practice: Any = None, raters: int = RATERS_PER_ITEM):
        self.data = data
        self.store = store
        self.practice = practice
        self.raters = int(raters)
        self._lock = threading.Lock()
        self._responses_version: str | None = None
        self._responses = pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS])

    @functools.cached_property
    def corpus(self) -> pd.DataFrame:
        return load_config(self.data, "corpus").to_pandas().set_index("id", drop=False)

    @functools.cached_property
    def imported_responses(self) -> pd.DataFrame:
        """The data's ``responses`` config; a tree built without the platform database has none."""
        if not has_config(self.data, "responses"):
            return pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS])
        return load_config(self.data, "responses").to_pandas()

    @functools.cached_property
    def outputs(self) -> model_outputs.ModelOutputs:
        n_scored = int((~self.corpus["flagged"].astype(bool)).sum()) if "flagged" in self.corpus else len(self.corpus)
        return model_outputs.shared(self.store, self.data, n_scored)

    def item_ids(self) -> list[str]:
        return self.corpus.index.tolist()

    def responses(self) -> pd.DataFrame:
        """Every practitioner response as it stands (module doc: freshness)."""
        if self.practice is None:
            return self.imported_responses
        version = self.store.practice_version()
        with self._lock:
            if version != self._responses_version:
                rows = self.practice.get().configs()["responses"]
                self._responses = pd.DataFrame(rows) if rows else pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS])
                self._responses_version = version
            return self._responses

    def withheld(self, item_id: str) -> bool:
        """Whether the item is in a practitioner block still being answered (module doc: independence)."""
        return item_id in open_block_items(self.store, self.raters)

    def item(self, item_id: str) -> tuple[str, pd.DataFrame, pd.DataFrame]:
        """Markdown for the item, its practitioners' responses, and the models' outputs on it (one run per
        model); for an item in an open block, the question and options alone."""
        item_id = (item_id or "").strip()
        if item_id not in self.corpus.index:
            return f"No item with id `{item_id}` in {self.data}.", pd.DataFrame(), pd.DataFrame()
        row = self.corpus.loc[item_id]
        options = "\n".join(f"- **{letter}.** {text}" for letter, text in row["options"].items())
        head = f"### Item {item_id} ({row['answer_type']}-answer, topic {row['topic'] or 'n/a'})\n\n{row['question']}"
        if self.withheld(item_id):
            hidden = pd.DataFrame(columns=["withheld until every rater of the block has finished it"])
            return f"{head}\n\n{options}\n\n{WITHHELD}", hidden, hidden.copy()
        answer = ", ".join(row["answer"])
        text = f"{head}\n\n{options}\n\n**Answer:** {answer}\n\n{row['explanation'] or ''}"
        try:
            everyone = self.responses()
        except Exception as err:  # practitioner mode cannot load its study (e.g. no pinned revision): say so
            everyone = pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS])
            text += f"\n\n_The practitioners' answers could not be loaded: {reported(err, 'practitioners answers')}._"
        responses = everyone[everyone["item_id"] == item_id]
        columns = [c for c in [*RESPONSE_COLUMNS, "source"] if c in responses]
        responses = responses[columns].copy()
        outputs = self.outputs.on([item_id], OUTPUT_COLUMNS)
        outputs = outputs[[c for c in SHOWN_OUTPUT_COLUMNS if c in outputs]].copy()
        for frame in (responses, outputs):
            for col in ("selected", "prediction", "domains"):
                if col in frame:
                    frame[col] = frame[col].map(_joined)
        return text, responses.reset_index(drop=True), outputs.sort_values("model").reset_index(drop=True)
