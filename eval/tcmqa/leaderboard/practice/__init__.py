"""Practitioner mode: licensed practitioners answer TCMQA items inside the Space (no gradio here).

The paper's protocol (Section 2.2, Appendix A): a practitioner signs in, confirms once that they hold
a TCM licence (an optional licence number is stored privately, never published nor exported), and
gets a fixed private block of items (``block_size``, 150 by default), each block going to exactly
``raters`` practitioners (3). One item per screen; one submission records the answer letters, up to
three domains, a difficulty 1-5, an optional flag with a comment, the seconds on the item and the
seconds paused, then advances to the next unanswered item.

* Assignment: a new account joins the oldest block that still has a free rater slot and shares no
  item with its earlier blocks; otherwise a new block is drawn from the items that need raters most
  (no rater in the imported study and in no practice block first, then the fewest), stratified by
  (domain, source difficulty, answer type) in proportion to the pool, never an item the account had.
  Items any rater flagged are not drawn. An excluded practitioner's slot is not reused.
* Idempotency: one response per (account, item) is a key of the store's table; a replayed or
  double-clicked submission records nothing new and returns the stored one.
* Privacy: :meth:`Practice.current` returns an :class:`ItemView` without the reference answer; the
  answer appears only in :meth:`Practice.report`, once the account's block is complete.
* Pseudonyms: the platform user id of an assignment is ``block * raters + slot + 1`` (the platform's
  ``block = (user_id - 1) // 3``), and the public practitioner id is ``ingest.pseudonym(user_id,
  key)``: the export (:meth:`Practice.export_platform_db`) read by ``tcmqa build --platform-db`` gives
  the same ids and blocks. New blocks are numbered after the imported study's blocks, so user ids
  never collide with the study's.

The package is split by concern; :class:`Practice` is composed once, here, from one mixin per module:

    tcmqa.leaderboard.practice.core        the state, the accounts and their gate, the stored responses read
    tcmqa.leaderboard.practice.assignment  blocks (stratified draw), assignment, the current item, submit
    tcmqa.leaderboard.practice.scoring     the block report, the responses/subset configs, the human reference
    tcmqa.leaderboard.practice.admin       progress, exclusions, the export in the platform's format
    tcmqa.leaderboard.practice.text        the Markdown of the Practitioners tab
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tcmqa.leaderboard.practice.admin import PLATFORM_NUMBER, PracticeAdmin
from tcmqa.leaderboard.practice.assignment import MAX_COMMENT, ItemView, PracticeAssignment, stratified_draw
from tcmqa.leaderboard.practice.core import NotAllowed
from tcmqa.leaderboard.practice.scoring import PracticeScoring
from tcmqa.leaderboard.practice.text import item_markdown, report_markdown
from tcmqa.schema import DOMAINS
from tcmqa.store import DailyCapReached, Store

__all__ = [
    "DOMAINS",
    "MAX_COMMENT",
    "PLATFORM_NUMBER",
    "DailyCapReached",
    "ItemView",
    "NotAllowed",
    "Practice",
    "PracticeLoader",
    "item_markdown",
    "report_markdown",
    "stratified_draw",
]


class Practice(PracticeAssignment, PracticeScoring, PracticeAdmin):
    """Practitioner mode over one store and one corpus.

    ``items``: corpus rows; ``imported``: the responses rows of the imported study (the built tree's
    ``responses`` config), which count as raters already given; ``admins``: accounts allowed the
    admin functions; ``daily_cap``: responses per account per UTC day (None: no cap).
    """


class PracticeLoader:
    """A :class:`Practice` made on first use from the data the Space serves (its corpus and its
    ``responses`` config, the imported study), so the web process starts without loading them."""

    def __init__(self, data: str, store: Store, **options: Any):
        self.data, self.store, self.options = data, store, options
        self._lock = threading.Lock()
        self._practice: Practice | None = None

    def get(self) -> Practice:
        with self._lock:
            if self._practice is None:
                from tcmqa.data import has_config, load_config

                items = load_config(self.data, "corpus").to_list()
                imported = load_config(self.data, "responses").to_list() if has_config(self.data, "responses") else []
                self._practice = Practice(self.store, items, imported, **self.options)
            return self._practice

    def reference_rows(self, evaluated: Sequence[dict]) -> list[dict]:
        """As :meth:`Practice.reference_rows`, but the rows as recorded while no practitioner answered here."""
        if not self.store.practice_responses_exist():
            return list(evaluated)
        return self.get().reference_rows(evaluated)
