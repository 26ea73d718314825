"""What every part of practitioner mode builds on: one store, one corpus and the settings; the accounts.

:class:`PracticeCore` holds the state (the parameters are :class:`tcmqa.leaderboard.practice.Practice`'s),
an account's standing (signed in, licence confirmed, excluded) and the gate every practitioner action
passes, and the two views of the stored responses the other parts read: an account's answers in a
block, and the responses of practitioners not excluded. The parts (assignment, scoring, admin) are
mixins over it, composed into ``Practice``.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Iterable
from typing import Any

from tcmqa.ingest import DEFAULT_PSEUDONYM_KEY
from tcmqa.schema import BLOCK_SIZE, RATERS_PER_ITEM
from tcmqa.store import Store


class NotAllowed(Exception):
    """The account may not do this (not signed in, not confirmed, excluded, not its item, not an admin)."""


class PracticeCore:
    """The state and the account gate of :class:`tcmqa.leaderboard.practice.Practice` (its parameters)."""

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
        seed: int = 0,
    ):
        self.store = store
        self.items = {str(i["id"]): dict(i) for i in items}
        self.imported = [dict(r) for r in imported]
        self.block_size = int(block_size)
        self.raters = int(raters)
        self.daily_cap = daily_cap
        self.admins = set(admins)
        self.pseudonym_key = pseudonym_key or os.environ.get("TCMQA_PSEUDONYM_KEY") or DEFAULT_PSEUDONYM_KEY
        self.seed = seed
        self.imported_raters = collections.Counter(r["item_id"] for r in self.imported)
        blocks = [int(r["block"]) for r in self.imported if r.get("block") is not None]
        self.first_block = max(blocks) + 1 if blocks else 0
        self._cache_lock = threading.Lock()
        self._cache: tuple[str, Any] | None = None

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
        """The account confirms once that it holds a TCM licence (an optional number, kept private)."""
        if not account:
            raise NotAllowed("sign in first")
        if not licence:
            raise NotAllowed("answering is limited to practitioners who confirm they hold a TCM licence")
        number = (licence_number or "").strip()[:64] or None
        self.store.confirm_licence(account, number)

    def _allowed(self, account: str | None) -> str:
        if not account:
            raise NotAllowed("sign in first")
        record = self.store.practitioner(account)
        if record is None or not record.get("confirmed_at"):
            raise NotAllowed("confirm that you hold a TCM licence first")
        if record.get("excluded"):
            raise NotAllowed("this account is excluded from the study")
        return account

    def _answered(self, account: str, block: int) -> dict[str, dict]:
        return {r["item_id"]: r for r in self.store.practice_responses(account=account, block=block)}

    def _included(self, include_excluded: bool = False) -> list[tuple[dict, dict]]:
        """(response, assignment) pairs of the practice responses, excluded practitioners left out."""
        excluded = set() if include_excluded else {p["account"] for p in self.store.practitioners() if p["excluded"]}
        assigned = {(a["account"], a["block"]): a for a in self.store.practice_assignments()}
        return [
            (r, assigned[(r["account"], r["block"])])
            for r in self.store.practice_responses()
            if r["account"] not in excluded and r["item_id"] in self.items
        ]
