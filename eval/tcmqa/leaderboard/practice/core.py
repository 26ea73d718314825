"""What every part of practitioner mode builds on: one store, one corpus and the settings; the accounts; the slots.

:class:`PracticeCore` holds the state (the parameters are :class:`tcmqa.leaderboard.practice.Practice`'s),
an account's standing (signed in, licence confirmed, excluded) and the gate every practitioner action
passes, and the one home of the slot rules every other part reads: which assignment holds its slot
(:meth:`PracticeCore._holds`), whose responses count (:func:`counts`), which blocks all their raters
have finished (:func:`finished_blocks`) and which are open (:func:`open_blocks`, :func:`open_block_items`:
the one rule of what may not leave the store, read by every publisher and page). The parts (assignment,
scoring, admin, console) are mixins over it, composed into ``Practice``.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Iterable
from typing import Any

from tcmqa import forms
from tcmqa.ingest import DEFAULT_PSEUDONYM_KEY, person_pseudonym
from tcmqa.schema import BLOCK_SIZE, RATERS_PER_ITEM, SPACE, STUDY
from tcmqa.store import Store
from tcmqa.store.practice import PracticeSnapshot

MAX_LICENCE_NUMBER = 64  # characters of the optional licence number
ABANDON_AFTER_S = 14 * 86400.0  # a slot whose practitioner answered nothing for this long is offered to another


class NotAllowed(Exception):
    """The account may not do this (not signed in, not confirmed, excluded, not its item, not an admin)."""


class ReviewWaits(NotAllowed):
    """The account finished its block, but a co-rater has not: the review waits for the block."""


ADMIN_NOT_RATER = (
    "a study lead (an account in TCMQA_ADMINS) cannot answer items: the console reads every practitioner's "
    "work, so a lead's answers would not be independent. Answer from an account that is not an admin"
)


def study_rows(imported: Iterable[dict]) -> list[dict]:
    """The imported study's response rows with their provenance: ``source`` "study" (rows published by
    the Space, ``source`` "space", are never the study and are left out) and ``rater_slot`` (None when the
    source did not record it)."""
    rows = []
    for r in imported:
        if (r.get("source") or STUDY) == SPACE:
            continue
        rows.append({**r, "source": STUDY, "rater_slot": r.get("rater_slot")})
    return rows


def block_raters(snap: PracticeSnapshot, block: int, raters: int) -> int:
    """The block's slots: its own (a top-up block has fewer), or N (``raters``) for blocks made before
    the store kept them."""
    return snap.block_raters.get(block, raters)


def finished(snap: PracticeSnapshot, a: dict) -> bool:
    """Whether the assignment's practitioner answered every item of its block."""
    answered, _ = snap.activity.get((a["account"], a["block"]), (0, 0.0))
    return answered >= len(snap.blocks.get(a["block"], []))


def counts(snap: PracticeSnapshot, a: dict) -> bool:
    """Whether an assignment's responses count: not released, and its practitioner not excluded.

    A released slot's responses stay stored but never count: its items are answered again by the
    practitioner who refills it, and an item has exactly N responses in the subset.
    """
    return a["released_at"] is None and a["account"] not in snap.excluded


def finished_blocks(snap: PracticeSnapshot, raters: int) -> set[int]:
    """Blocks whose every slot is filled by a counted practitioner who finished it: only these are
    published, and only their items may show answers, explanations or other raters' responses."""
    done: collections.Counter[int] = collections.Counter(
        a["block"] for a in snap.assignments if counts(snap, a) and finished(snap, a)
    )
    return {b for b in snap.blocks if done[b] >= block_raters(snap, b, raters)}


def open_blocks(snap: PracticeSnapshot, raters: int) -> set[int]:
    """Blocks still being answered: not finished by all their raters, and not retired (a block reopened after
    it was published is never answered again). Nothing of an open block leaves the store: not the models'
    outputs on its items, not the responses (the study's included), not the review, on the Hub or any page."""
    return set(snap.blocks) - finished_blocks(snap, raters) - snap.retired


def open_items(snap: PracticeSnapshot, raters: int) -> set[str]:
    """The items of every open block (:func:`open_blocks`)."""
    return {item for block in open_blocks(snap, raters) for item in snap.blocks[block]}


def open_block_items(store: Store, raters: int = RATERS_PER_ITEM) -> set[str]:
    """The items of every open block, read from the store now: what the publisher, the explorer, the
    comparison, the console and the configs withhold (``raters``: the N of blocks made before the store
    kept each block's slots)."""
    return open_items(store.practice_snapshot(), raters)


class PracticeCore:
    """The state, the account gate and the slot rules of :class:`tcmqa.leaderboard.practice.Practice`."""

    def __init__(
        self,
        store: Store,
        items: Iterable[dict],
        imported: Iterable[dict] = (),
        *,
        block_size: int = BLOCK_SIZE,
        raters: int = RATERS_PER_ITEM,
        daily_cap: int | None = None,
        admins: Iterable[str] = (),
        pseudonym_key: str | None = None,
        abandon_after_s: float = ABANDON_AFTER_S,
        seed: int = 0,
    ):
        if int(raters) < 1:
            raise ValueError(f"raters per block must be at least 1, not {raters}")
        self.store = store
        self.items = {str(i["id"]): dict(i) for i in items}
        self.imported = study_rows(imported)
        self.block_size = int(block_size)
        self.raters = int(raters)
        self.study_raters = RATERS_PER_ITEM  # the paper's platform: three raters per block
        self.daily_cap = daily_cap
        self.admins = set(admins)
        self.pseudonym_key = pseudonym_key or os.environ.get("TCMQA_PSEUDONYM_KEY") or DEFAULT_PSEUDONYM_KEY
        self.abandon_after_s = float(abandon_after_s)
        self.seed = seed
        self.imported_raters = collections.Counter(r["item_id"] for r in self.imported)
        blocks = [int(r["block"]) for r in self.imported if r.get("block") is not None]
        self.first_block = max(blocks) + 1 if blocks else 0
        self._cache_lock = threading.Lock()
        self._cache: tuple[tuple[str, bool], Any] | None = None

    def block_number(self, block: int) -> int:
        """A Space block as its practitioners read it: counted from 1 (the store numbers the Space's blocks on
        from the imported study's, from 0); the study lead's console keeps the store's numbers."""
        return block - self.first_block + 1

    def status(self, account: str | None) -> dict[str, Any]:
        """What the account may do now: signed in, confirmed, excluded (its reason is not shown to others)."""
        if not account:
            return {"signed_in": False, "confirmed": False, "excluded": False}
        record = self.store.practitioner(account) or {}
        return {
            "signed_in": True,
            "confirmed": bool(record.get("confirmed_at")),
            "excluded": bool(record.get("excluded")),
        }

    def confirm(self, account: str | None, licence: bool, licence_number: str | None = None) -> None:
        """The account confirms once that it holds a TCM licence (an optional number, kept private; its form,
        at most :data:`MAX_LICENCE_NUMBER` characters and no control character, is checked first: FormError);
        an admin cannot (:data:`ADMIN_NOT_RATER`)."""
        number = forms.checked("licence number", licence_number, max_chars=MAX_LICENCE_NUMBER) or None
        if not account:
            raise NotAllowed("sign in first")
        if account in self.admins:
            raise NotAllowed(ADMIN_NOT_RATER)
        if not licence:
            raise NotAllowed("answering is limited to practitioners who confirm they hold a TCM licence")
        self.store.confirm_licence(account, number)

    def _allowed(self, account: str | None) -> str:
        """The account, if it may answer: signed in, not an admin, confirmed, not excluded."""
        if not account:
            raise NotAllowed("sign in first")
        if account in self.admins:
            raise NotAllowed(ADMIN_NOT_RATER)
        record = self.store.practitioner(account)
        if record is None or not record.get("confirmed_at"):
            raise NotAllowed("confirm that you hold a TCM licence first")
        if record.get("excluded"):
            raise NotAllowed("this account is excluded from the study")
        return account

    def _answered(self, account: str, block: int) -> dict[str, dict]:
        return {r["item_id"]: r for r in self.store.practice_responses(account=account, block=block)}

    # -- the slot rules (module functions below; bound to this Practice's N and inactivity) ---------
    def _block_raters(self, snap: PracticeSnapshot, block: int) -> int:
        return block_raters(snap, block, self.raters)

    def _holds(self, snap: PracticeSnapshot, a: dict) -> bool:
        """Whether an assignment holds its slot: it counts, and its practitioner finished the block or
        answered something within ``abandon_after_s`` (else the slot is offered to the next new practitioner)."""
        if not counts(snap, a):
            return False
        if finished(snap, a):
            return True
        _, last = snap.activity.get((a["account"], a["block"]), (0, 0.0))
        return snap.now - max(last, a["assigned_at"]) <= self.abandon_after_s

    def _finished_blocks(self, snap: PracticeSnapshot) -> set[int]:
        return finished_blocks(snap, self.raters)

    def _open_blocks(self, snap: PracticeSnapshot) -> set[int]:
        return open_blocks(snap, self.raters)

    def _open_items(self, snap: PracticeSnapshot) -> set[str]:
        return open_items(snap, self.raters)

    def _pseudonyms(self) -> dict[str, str]:
        """Account -> its one public pseudonym (from the person number, never the account name)."""
        return {p["account"]: person_pseudonym(p["number"], self.pseudonym_key) for p in self.store.practitioners()}

    def _target(self, item_id: str) -> int:
        """The item's N: the study's for an item the study rated (topped up to it), else this Space's."""
        return self.study_raters if self.imported_raters[item_id] else self.raters

    def _space_flagged(self, snap: PracticeSnapshot) -> set[str]:
        """Items a practitioner here flagged (excluded practitioners' flags left out)."""
        return {item for item, accounts in snap.flagged_by.items() if accounts - snap.excluded}

    def _published(self, snap: PracticeSnapshot | None = None) -> list[tuple[dict, dict]]:
        """(response, assignment) pairs that are published: counted assignments of finished blocks."""
        snap = snap or self.store.practice_snapshot()
        finished = self._finished_blocks(snap)
        counted = {(a["account"], a["block"]): a for a in snap.assignments if counts(snap, a)}
        return [
            (r, counted[(r["account"], r["block"])])
            for r in self.store.practice_responses()
            if r["block"] in finished and (r["account"], r["block"]) in counted and r["item_id"] in self.items
        ]
