"""The item explorer: browse and search the items (:mod:`tcmqa.leaderboard.browse`: filters, one model's
outcome beside the practitioners', pages), and one item's page: its question and options, answer and
explanation, the practitioners' answers and every model's output on it (text, predictions and the five
letters' probabilities), :data:`MODELS_PER_PAGE` models a page (each page reads only its models' runs).

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

* ``/item`` (:meth:`Explorer.item`) and the browse table's row click (``open_row``, private): an item's page;
  withholds as above.
* ``/browse`` (:meth:`Explorer.browse`) and its private ``first_page``, ``previous_page``, ``next_page``: a page
  of matching items: id, stem, answer type, domains, and for an item of no open block its consensus and the
  chosen model's outcome (an open-block item's are blank, and a consensus, outcome or rated-difficulty
  filter leaves it out); ``refresh_choices`` (private): the models with outputs and the source difficulties.
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

import collections
import functools
import json
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcmqa.data import has_config, load_config
from tcmqa.leaderboard import browse, empty, lang, model_outputs
from tcmqa.leaderboard.errors import reported
from tcmqa.leaderboard.practice.core import open_block_items  # the finished-block rule's one home
from tcmqa.leaderboard.scale import MEANING, NOT_FITTED, Scales
from tcmqa.probes.calibration import letter_probabilities
from tcmqa.schema import RATERS_PER_ITEM
from tcmqa.store import Store
from tcmqa_metric import LETTERS

OUTPUT_COLUMNS = ["model", "prediction", "correct", "lp_prediction", "lp_correct", "margin", "generated_text"]
# each letter's probability renormalised over A-E (as the calibration columns read them), percent
PROBABILITY_COLUMNS = [f"P({letter}) %" for letter in LETTERS]
SHOWN_OUTPUT_COLUMNS = ["model", "revision", "source", *OUTPUT_COLUMNS[1:-1], *PROBABILITY_COLUMNS, "generated_text"]
RESPONSE_COLUMNS = ["practitioner_id", "selected", "correct", "difficulty", "domains", "flagged", "seconds"]
SUBSET_COLUMNS = ["item_id", "n_raters", "n_correct", "majority_correct"]
MODELS_KEPT = 8  # models whose correctness per item stays in memory (the outcome filter's recent choices)
MODELS_PER_PAGE = 25  # the item page's models' outputs, a page at a time
WITHHELD = (
    "_This item is in a practitioner block still being answered: its answer, explanation, the practitioners' "
    "answers and the models' outputs are withheld until every rater of the block has finished it._"
)


def _probabilities(logprobs: pd.Series) -> pd.DataFrame:
    """Rows of ``letter_logprobs`` (a dict per row, or null) -> :data:`PROBABILITY_COLUMNS`, percent, 1 decimal."""
    values = np.array(
        [[np.nan if not row else row.get(letter, np.nan) for letter in LETTERS] for row in logprobs], dtype=float
    ).reshape(len(logprobs), len(LETTERS))
    known = np.isfinite(values).any(axis=1)
    shown = np.full(values.shape, np.nan)
    if known.any():
        shown[known] = 100 * letter_probabilities(np.where(np.isfinite(values[known]), values[known], -np.inf))
    return pd.DataFrame(shown.round(1), columns=PROBABILITY_COLUMNS, index=logprobs.index)


def _text(value: Any) -> str:
    """A corpus text field as shown: a missing one (None, or NaN in pandas) is empty, never "nan"."""
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _listed(value: Any) -> list[str]:
    """A stored list of letters or domain keys (a list, its JSON text, one string or nothing) as a list."""
    if isinstance(value, str) and value.startswith("["):
        value = json.loads(value)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _joined(value: Any) -> str:
    """Letters as shown: joined by commas."""
    return ", ".join(_listed(value))


def _domains(value: Any) -> str:
    """Domain keys as shown: their names in the caller's language (tcmqa.leaderboard.lang)."""
    return "、".join(lang.domain(key) for key in _listed(value))


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
        self._subset = pd.DataFrame(columns=SUBSET_COLUMNS)
        self._items_version: str | None = None
        self._items: pd.DataFrame | None = None
        self._correct: collections.OrderedDict[model_outputs.Run, pd.Series] = collections.OrderedDict()
        self.scales: Scales | None = None  # the one scale (the Space sets it): each item's difficulty, discrimination

    def parameters(self) -> pd.DataFrame | None:
        """The latest fit's items (difficulty, discrimination, their SEs), by item id; None before the first."""
        latest = self.scales.latest if self.scales is not None else None
        return None if latest is None else latest.items

    def domains(self) -> pd.Series:
        """Item id -> the corpus's domain keys (the pass mark's units)."""
        return self.corpus["domains"]

    @functools.cached_property
    def corpus(self) -> pd.DataFrame:
        return load_config(self.data, "corpus").to_pandas().set_index("id", drop=False)

    @functools.cached_property
    def corpus_table(self) -> pd.DataFrame:
        """The browse table's corpus part (:func:`browse.corpus_table`), built once."""
        return browse.corpus_table(self.corpus)

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

    @functools.cached_property
    def imported_subset(self) -> pd.DataFrame:
        """The data's ``subset`` config; a tree built without the platform database has none."""
        if not has_config(self.data, "subset"):
            return pd.DataFrame(columns=SUBSET_COLUMNS)
        return load_config(self.data, "subset").select_columns(SUBSET_COLUMNS).to_pandas()

    def _version(self) -> str | None:
        """What the practitioners' tables depend on: the store's practice version (None without practice mode)."""
        return None if self.practice is None else self.store.practice_version()

    def practitioners(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Every practitioner response and the subset as they stand (module doc: freshness)."""
        if self.practice is None:
            return self.imported_responses, self.imported_subset
        version = self._version()
        with self._lock:
            if version != self._responses_version:
                configs = self.practice.get().configs()
                rows, subset = configs["responses"], configs["subset"]
                self._responses = pd.DataFrame(rows) if rows else pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS])
                self._subset = pd.DataFrame(subset)[SUBSET_COLUMNS] if subset else pd.DataFrame(columns=SUBSET_COLUMNS)
                self._responses_version = version
            return self._responses, self._subset

    def responses(self) -> pd.DataFrame:
        """Every practitioner response as it stands (module doc: freshness)."""
        return self.practitioners()[0]

    def items(self) -> pd.DataFrame:
        """The browse table (:func:`browse.item_table`), rebuilt when the practice version changes."""
        version = self._version()
        with self._lock:
            if self._items is not None and version == self._items_version:
                return self._items
        responses, subset = self.practitioners()
        table = browse.item_table(self.corpus_table, responses, subset)
        with self._lock:
            self._items, self._items_version = table, version
        return table

    def correct(self, model: str) -> pd.Series | None:
        """The model's correctness by item id, from its one run (None: no outputs); the last
        :data:`MODELS_KEPT` models' are kept, each until the model's chosen run changes."""
        run = self.outputs.runs().get(model)
        if run is None:
            return None
        with self._lock:
            if run in self._correct:
                self._correct.move_to_end(run)
                return self._correct[run]
        rows = self.outputs.of(model, ["item_id", "correct"])
        series = pd.Series(rows["correct"].astype(bool).to_numpy(), index=rows["item_id"].astype(str).to_numpy())
        with self._lock:
            self._correct[run] = series
            while len(self._correct) > MODELS_KEPT:
                self._correct.popitem(last=False)
        return series

    def models(self, board: pd.DataFrame) -> list[str]:
        """The models with outputs, the leading comparable model of ``board`` (``Board.frame()``) first."""
        return browse.model_choices(board, self.outputs.runs())

    def browse(self, filters: browse.Filters, model: str | None = None, number: int = 1) -> browse.Page:
        """Page ``number`` of the items matching ``filters``, outcomes for ``model`` (module doc: independence)."""
        if filters.outcome is not None and not model:
            raise browse.Refused("choose a model for the outcome filter")
        correct = self.correct(model) if model else None
        if model and correct is None:
            raise browse.Refused(f"no outputs of the model {model!r}")
        selected = browse.select(
            self.items(), filters, open_block_items(self.store, self.raters), correct, self.parameters()
        )
        return browse.page(selected, number)

    def on_scale(self, item_id: str) -> str:
        """The item's difficulty and discrimination on the one scale, with what they mean; or that it is not
        fitted yet."""
        parameters = self.parameters()
        if parameters is None or item_id not in parameters.index:
            return NOT_FITTED
        p = parameters.loc[item_id]
        return (
            f"**Difficulty** {p['difficulty']:.2f} (SE {p['difficulty_se']:.2f}) · **discrimination** "
            f"{p['discrimination']:.2f} (SE {p['discrimination_se']:.2f}), from {int(p['n_respondents']):,} "
            f"respondents. {MEANING}"
        )

    def withheld(self, item_id: str) -> bool:
        """Whether the item is in a practitioner block still being answered (module doc: independence)."""
        return item_id in open_block_items(self.store, self.raters)

    def item(
        self, item_id: str, models_page: int = 1, order: Sequence[str] = ()
    ) -> tuple[str, pd.DataFrame, pd.DataFrame]:
        """Markdown for the item, its practitioners' responses, and the models' outputs on it (one run per
        model), :data:`MODELS_PER_PAGE` models a page: ``order`` first (the model chooser's: the leading
        comparable model first), then the rest by name; for an item in an open block, the question and options
        alone."""
        item_id = (item_id or "").strip()
        if item_id not in self.corpus.index:
            return f"No item with id `{item_id}` in {self.data}.", pd.DataFrame(), pd.DataFrame()
        row = self.corpus.loc[item_id]
        options = "\n".join(f"- **{letter}.** {text}" for letter, text in row["options"].items())
        topic = _text(row["topic"]) or "n/a"
        head = f"### Item {item_id} ({row['answer_type']}-answer, topic {topic})\n\n{row['question']}"
        if self.withheld(item_id):
            hidden = pd.DataFrame(columns=["withheld until every rater of the block has finished it"])
            return f"{head}\n\n{options}\n\n{WITHHELD}", hidden, hidden.copy()
        answer = ", ".join(row["answer"])
        text = f"{head}\n\n{options}\n\n**Answer:** {answer}\n\n{_text(row['explanation'])}\n\n{self.on_scale(item_id)}"
        unread = False  # the practitioners' answers could not be loaded (said below)
        try:
            everyone = self.responses()
        except Exception as err:  # practitioner mode cannot load its study (e.g. no pinned revision): say so
            everyone, unread = pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS]), True
            text += f"\n\n_The practitioners' answers could not be loaded: {reported(err, 'practitioners answers')}._"
        responses = everyone[everyone["item_id"] == item_id]
        columns = [c for c in [*RESPONSE_COLUMNS, "source"] if c in responses]
        responses = responses[columns].copy()
        runs = self.outputs.runs()
        ranked = [m for m in dict.fromkeys(order) if m in runs] + sorted(set(runs) - set(order))
        pages = max(1, math.ceil(len(ranked) / MODELS_PER_PAGE))
        number = min(max(1, int(models_page)), pages)
        shown = ranked[(number - 1) * MODELS_PER_PAGE : number * MODELS_PER_PAGE]
        if len(ranked) > MODELS_PER_PAGE:
            text += (
                f"\n\n_Models' outputs below: models {(number - 1) * MODELS_PER_PAGE + 1}–"
                f"{(number - 1) * MODELS_PER_PAGE + len(shown)} of {len(ranked):,} (page {number} of {pages})._"
            )
        outputs = self.outputs.on([item_id], [*OUTPUT_COLUMNS, "letter_logprobs"], models=set(shown))
        outputs = outputs.join(_probabilities(outputs["letter_logprobs"]))
        outputs = outputs[[c for c in SHOWN_OUTPUT_COLUMNS if c in outputs]].copy()
        outputs["revision"] = outputs["revision"].astype(str).str[:12]  # a commit sha, shortened as on the board
        for frame in (responses, outputs):
            for col in ("selected", "prediction"):
                if col in frame:
                    frame[col] = frame[col].map(_joined)
        if "domains" in responses:
            responses["domains"] = responses["domains"].map(_domains)
        outputs = outputs.sort_values("model", key=lambda m: m.map({name: i for i, name in enumerate(shown)}))
        if responses.empty and not unread:  # the tab hides an empty table (explorer_tab): say why
            text += f"\n\n{empty.no_responses()}"
        if outputs.empty:
            text += f"\n\n{empty.no_outputs()}"
        return text, responses.reset_index(drop=True), outputs.reset_index(drop=True)
