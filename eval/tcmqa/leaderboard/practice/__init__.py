"""Practitioner mode: licensed practitioners answer TCMQA items inside the Space (no gradio here).

The paper's protocol (Section 2.2, Appendix A): a practitioner signs in, confirms once that they hold
a TCM licence (an optional licence number is stored privately, never published nor exported), and
gets a fixed private block of items (``block_size``, 150 by default), each block going to exactly
``raters`` practitioners (3). One item per screen; one submission records the answer letters, up to
three domains, a difficulty 1-5, an optional flag with a comment, the seconds on the item and the
seconds paused, then advances to the next unanswered item.

* Provenance: the imported study (``imported``) is read from a pinned source, never from what the
  Space published (:class:`PracticeLoader`); every response row says its ``source`` ("study" or
  "space"), its ``block`` and its ``rater_slot``.
* Assignment (top-up first): a new account takes a free slot of an existing block (an excluded
  practitioner's, a released one, or one whose practitioner answered nothing for ``abandon_after_s``);
  else a top-up block of items the study or the Space left with fewer than N raters; else a fresh block
  drawn stratified by (domain, source difficulty, answer type). Flagged items are never drawn, nor an
  item the account had.
* Idempotency: one response per (account, item) is a key of the store's table; a replayed or
  double-clicked submission records nothing new and returns the stored one.
* Independence: :meth:`Practice.current` returns an :class:`ItemView` without the reference answer; the
  answer appears only in :meth:`Practice.report`, once every rater of the block finished it
  (:class:`ReviewWaits` until then). Nothing of an open block (:func:`open_block_items`, the one rule)
  leaves the store: its responses (the study's on its items too) enter the configs the Space serves and
  publishes, and the models' outputs on its items the Hub, only once all its raters finished it. A block
  reopened after that (a rater excluded or released) is retired, never handed out again. An admin
  (the study lead) cannot rate.
* People: one pseudonym per person ("S" + a keyed hash of the person's number, never an account name
  nor a study id "P..."), derived when rows are published or exported: a key change renames, never
  duplicates. The subset is the items with exactly N (``raters``) responses; the majority is strict.

The package is split by concern; :class:`Practice` is composed once, here, from one mixin per module:

    tcmqa.leaderboard.practice.core        the state, the accounts and their gate, the slot rules
    tcmqa.leaderboard.practice.assignment  the slot plan (refill, top-up, fresh), the current item, submit
    tcmqa.leaderboard.practice.scoring     the block report, the responses/subset configs, the human reference
    tcmqa.leaderboard.practice.admin       progress, exclusions, slots, the export in the platform's format
    tcmqa.leaderboard.practice.console     the study lead's tables: practitioners, flagged items, slots
    tcmqa.leaderboard.practice.pool        the fresh pool's rules over this corpus, the lead's tables of the pool
    tcmqa.leaderboard.practice.adjudication  key adjudication: the suspect list, reviewers, verdicts, the errata
    tcmqa.leaderboard.practice.text        the Markdown of the Practitioners tab
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tcmqa.leaderboard.practice.adjudication import PracticeAdjudication
from tcmqa.leaderboard.practice.admin import PLATFORM_NUMBER
from tcmqa.leaderboard.practice.assignment import (
    MAX_COMMENT,
    InvalidResponse,
    ItemView,
    PracticeAssignment,
    stratified_draw,
)
from tcmqa.leaderboard.practice.clock import AWAY_S, ItemClocks
from tcmqa.leaderboard.practice.console import PracticeConsole
from tcmqa.leaderboard.practice.core import ABANDON_AFTER_S, NotAllowed, ReviewWaits, open_block_items
from tcmqa.leaderboard.practice.pool import PracticePool
from tcmqa.leaderboard.practice.text import item_markdown, report_markdown
from tcmqa.schema import DOMAINS
from tcmqa.store import DailyCapReached, Store

__all__ = [
    "ABANDON_AFTER_S",
    "AWAY_S",
    "DOMAINS",
    "MAX_COMMENT",
    "PLATFORM_NUMBER",
    "DailyCapReached",
    "InvalidResponse",
    "ItemClocks",
    "ItemView",
    "NotAllowed",
    "Practice",
    "PracticeLoader",
    "ReviewWaits",
    "item_markdown",
    "open_block_items",
    "report_markdown",
    "stratified_draw",
]


class Practice(PracticeAssignment, PracticeConsole, PracticePool, PracticeAdjudication):
    """Practitioner mode over one store and one corpus.

    ``items``: corpus rows; ``imported``: the imported study's response rows (rows whose ``source`` is
    "space" are left out: the Space's own responses come from the store), which count as raters already
    given; ``raters``: N per block; ``admins``: accounts allowed the admin functions; ``daily_cap``:
    responses per account per UTC day (None: no cap); ``pseudonym_key``: the key of the public
    pseudonyms (default ``TCMQA_PSEUDONYM_KEY``); ``abandon_after_s``: inactivity that frees a slot.
    """


class PracticeLoader:
    """A :class:`Practice` made on first use from the data the Space serves (its corpus) and the pinned
    study, so the web process starts without loading them.

    The study's responses are read from ``study`` (default: ``data``) at ``study_revision``: never from
    what the Space publishes, which is the same repo's ``responses`` config. A Hub study without a pinned
    revision is refused (set ``TCMQA_STUDY_REVISION`` to the commit ``tcmqa publish`` made); a local tree
    is never a publication target. Rows the Space published (``source`` "space") are left out either way.
    """

    def __init__(
        self, data: str, store: Store, *, study: str | None = None, study_revision: str | None = None, **options: Any
    ):
        self.data, self.store, self.options = data, store, options
        self.study, self.study_revision = study or data, study_revision
        self._lock = threading.Lock()
        self._practice: Practice | None = None

    def study_rows(self) -> list[dict]:
        """The imported study's response rows, from the pinned source."""
        from tcmqa.data import has_config, load_config

        local = Path(self.study).expanduser().exists()
        if not local and not self.study_revision:
            raise ValueError(
                f"the study's responses would be read from {self.study}, the repo the Space publishes to: "
                "set TCMQA_STUDY_REVISION to the commit of the study's `tcmqa publish` (or TCMQA_STUDY to its tree)"
            )
        if not has_config(self.study, "responses"):
            return []
        return load_config(self.study, "responses", revision=self.study_revision).to_list()

    def get(self) -> Practice:
        with self._lock:
            if self._practice is None:
                from tcmqa.data import load_config

                items = load_config(self.data, "corpus").to_list()
                self._practice = Practice(self.store, items, self.study_rows(), **self.options)
                self._practice.data = self.data  # models_on reads the data's published outputs too
            return self._practice

    def reference_rows(self, evaluated: Sequence[dict]) -> list[dict]:
        """As :meth:`Practice.reference_rows`, but the rows as recorded while no practitioner answered here."""
        if not self.store.practice_responses_exist():
            return list(evaluated)
        return self.get().reference_rows(evaluated)
