"""Key adjudication in practitioner mode: the study lead's suspect list and assignments, the reviewers' verdicts.

The study lead (an admin) reads the ranked suspect list (:func:`tcmqa.adjudication.suspect_list`, each rank with
its reason) and assigns an item to two reviewers: confirmed practitioners, not excluded, never one who rated
the item here, never the same person twice, never an item of an open block. Each reviewer reads the item with
its published key and gives a verdict (``tcmqa.errata.VERDICTS``; a wrong key with the right letters) and a
comment; the evidence (the practitioners' majority, the models' votes, the fit, flags and comments) is shown to
a reviewer only once their verdict is saved, and a verdict is final. When every verdict is in and no two agree,
the lead assigns another reviewer; the decision is the agreeing verdicts (:func:`tcmqa.adjudication.decision`).
Nobody else reads any of it: a stranger or a practitioner not assigned the item gets a refusal.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tcmqa import adjudication as rules
from tcmqa import forms
from tcmqa.leaderboard.practice.admin import PracticeAdmin
from tcmqa.leaderboard.practice.core import NotAllowed, open_items

SUSPECT_COLUMNS = ["rank", "item_id", "score", "key", "alternative", "adjudication", "reason"]
LEAD_COLUMNS = ["rank", "item_id", "key", "reviewers", "verdicts", "status", "decision"]
MINE_COLUMNS = ["item_id", "assigned", "to do"]
EVIDENCE_FIELDS = [  # what a reviewer reads after their verdict: the suspect list's numbers behind the rank
    "rank", "score", "reason", "key", "alternative", "practitioners_alternative", "practitioners_key",
    "practitioners_answered", "practitioner_majority_elsewhere", "models_alternative", "models_key",
    "models_answered", "discrimination", "discrimination_se", "difficulty", "flags", "comments",
]  # fmt: skip
MAX_COMMENT = 1000
SHOWN = 200  # the console's suspect list: the most suspect items (the whole list is `tcmqa report`'s file)


class PracticeAdjudication(PracticeAdmin):
    """The study lead's suspect list and assignments; a reviewer's item, verdict and (after it) the evidence."""

    _suspects_lock = threading.Lock()
    _suspects_cache: tuple[str, pd.DataFrame] | None = None

    # -- the study lead -------------------------------------------------------------------------------------
    def suspects(self, admin: str | None) -> pd.DataFrame:
        """The :data:`SHOWN` most suspect items with each one's adjudication status (computed once per store state;
        a browser table of every item, 38,279 rows of reasons, would stall the page)."""
        self._admin(admin)
        ranked = self._suspects().head(SHOWN)
        state = {a["item_id"]: rules.status(a["reviews"]) for a in self.store.adjudications()}
        shown = ranked.assign(
            adjudication=[state.get(i, "") for i in ranked["item_id"]], score=ranked["score"].round(2)
        )
        return shown[SUSPECT_COLUMNS]

    def _suspects(self) -> pd.DataFrame:
        """The suspect list of the data and runs as they stand (its comments: the practitioners' here)."""
        version = f"{self.store.version()}|{self.store.practice_version()}"
        with self._suspects_lock:
            if self._suspects_cache is None or self._suspects_cache[0] != version:
                comments = pd.Series([r["item_id"] for r in self._comments()], dtype=object).value_counts()
                ranked = rules.suspect_list(str(self.data), self.store, comments)
                self._suspects_cache = (version, ranked)
            return self._suspects_cache[1]

    def _comments(self, item_id: str | None = None) -> list[dict[str, Any]]:
        """The practitioners' comments here (of items of no open block), optionally of one item."""
        withheld = open_items(self.store.practice_snapshot(), self.raters)
        return [
            r
            for r in self.store.practice_responses()
            if r["comment"] and r["item_id"] not in withheld and (item_id is None or r["item_id"] == item_id)
        ]

    def _reviewer(self, account: str, item_id: str) -> str:
        """``account`` if it may review ``item_id``: a practitioner who may answer and never rated the item here."""
        account = (account or "").strip()
        if not account:
            raise ValueError("name each reviewer (their account)")
        try:
            self._allowed(account)
        except NotAllowed as err:
            raise ValueError(f"{account!r} cannot review: {err}") from None
        if any(r["item_id"] == item_id for r in self.store.practice_responses(account=account)):
            raise ValueError(f"{account!r} rated item {item_id}: a reviewer must not be one of the item's raters")
        return account

    def _item_id(self, item_id: str) -> str:
        item_id = (item_id or "").strip()
        if item_id not in self.items:
            raise ValueError(f"no item {item_id!r} in the corpus: copy its id from the suspect list")
        if item_id in open_items(self.store.practice_snapshot(), self.raters):
            raise ValueError(f"item {item_id} is in an open practice block: adjudicate it once its block is finished")
        return item_id

    def assign_adjudication(self, admin: str | None, item_id: str, reviewers: Sequence[str]) -> None:
        """Put ``item_id`` to two reviewers, with the suspect list's evidence as it stands now."""
        admin = self._admin(admin)
        names = [(r or "").strip() for r in reviewers]
        if len(names) != 2:
            raise ValueError("name two reviewers")
        if names[0] and names[0] == names[1]:
            raise ValueError(f"{names[0]!r} is named twice: two different reviewers judge each item")
        item_id = self._item_id(item_id)
        checked = [self._reviewer(name, item_id) for name in names]
        ranked = self._suspects()
        row = ranked[ranked["item_id"] == item_id]
        if not len(row):
            raise ValueError(f"item {item_id} is not scored (flagged items are out of the suspect list)")
        evidence = {k: _plain(v) for k, v in row.iloc[0][EVIDENCE_FIELDS].items()}
        evidence["comment_texts"] = [r["comment"] for r in self._comments(item_id)]
        item = {
            "item_id": item_id,
            "old_key": "".join(sorted(self.items[item_id]["answer"])),
            "corpus_revision": ranked.attrs["corpus_revision"],
            "rank": int(evidence["rank"]),
            "evidence": evidence,
        }
        self.store.open_adjudication(item, checked, admin)

    def add_adjudication_reviewer(self, admin: str | None, item_id: str, reviewer: str) -> None:
        """Another reviewer for an item whose verdicts are all in and disagree."""
        admin = self._admin(admin)
        item_id = (item_id or "").strip()
        found = self.store.adjudications(item_id=item_id)
        if not found:
            raise ValueError(f"item {item_id!r} is not being adjudicated: assign it to two reviewers first")
        state = rules.status(found[0]["reviews"])
        if state != rules.DISAGREE:
            raise ValueError(f"item {item_id} is {state}: another reviewer is assigned only when the verdicts disagree")
        if any(r["reviewer"] == (reviewer or "").strip() for r in found[0]["reviews"]):
            raise ValueError(f"{reviewer!r} already reviews item {item_id}: name another practitioner")
        self.store.add_adjudication_reviewer(item_id, self._reviewer(reviewer, item_id), admin)

    def adjudication_table(self, admin: str | None) -> pd.DataFrame:
        """Every adjudication: its reviewers, their verdicts, its status and decision."""
        self._admin(admin)
        rows = []
        for a in self.store.adjudications():
            decided = rules.decision(a["reviews"])
            rows.append(
                {
                    "rank": a["rank"],
                    "item_id": a["item_id"],
                    "key": a["old_key"],
                    "reviewers": [r["reviewer"] for r in a["reviews"]],
                    "verdicts": [_verdict(r) or "…" for r in a["reviews"]],
                    "status": rules.status(a["reviews"]),
                    "decision": _verdict(decided) if decided else "",
                }
            )
        return pd.DataFrame(rows, columns=LEAD_COLUMNS)

    def export_errata(self, admin: str | None, path: str | Path) -> Path:
        """The decided items as an errata file (``tcmqa build --errata``), reviewers by pseudonym."""
        self._admin(admin)
        return rules.write_errata(rules.errata_rows(self.store, self.pseudonym_key), path)

    # -- a reviewer -----------------------------------------------------------------------------------------
    def my_adjudications(self, reviewer: str | None) -> pd.DataFrame:
        """The items assigned to ``reviewer`` (ids only) and what is left to do."""
        if not reviewer:
            raise NotAllowed("sign in first")
        rows = []
        for a in self.store.adjudications(reviewer=reviewer):
            mine = _review_of(a, reviewer)
            rows.append(
                [a["item_id"], rules._date(mine["assigned_at"]), "done" if mine["verdict"] else "give a verdict"]
            )
        return pd.DataFrame(rows, columns=MINE_COLUMNS)

    def adjudication_view(self, reviewer: str | None, item_id: str) -> dict[str, Any]:
        """The item assigned to ``reviewer`` with its published key; the reviewer's verdict and the evidence
        only once that verdict is saved."""
        if not reviewer:
            raise NotAllowed("sign in first")
        found = self.store.adjudications(item_id=(item_id or "").strip(), reviewer=reviewer)
        if not found:
            raise NotAllowed(f"item {(item_id or '').strip()!r} is not assigned to you for adjudication")
        a = found[0]
        item = self.items[a["item_id"]]
        mine = _review_of(a, reviewer)
        view = {
            "item_id": a["item_id"],
            "question": item["question"],
            "options": item["options"],
            "key": a["old_key"],
            "verdict": None,
            "evidence": None,
        }
        if mine["verdict"]:
            view.update(verdict=_verdict(mine), comment=mine["comment"], evidence=a["evidence"])
        return view

    def record_adjudication_verdict(
        self, reviewer: str | None, item_id: str, verdict: str | None, new_key: Sequence[str] | None, comment: str
    ) -> dict[str, Any]:
        """Save the reviewer's verdict (final) and return their view, the evidence with it."""
        view = self.adjudication_view(reviewer, item_id)  # refused unless assigned
        assert reviewer is not None
        if view["verdict"]:
            raise ValueError("your verdict on this item is already saved (a verdict is final)")
        verdict, letters = rules.checked_verdict(verdict, new_key, view["key"])
        text = forms.checked("comment", comment, max_chars=MAX_COMMENT, lines=True) or ""
        if not text:
            raise ValueError("add a comment: why the key holds, or what is wrong with the item")
        if not self.store.record_adjudication_verdict(view["item_id"], reviewer, verdict, letters, text):
            raise ValueError("your verdict on this item is already saved (a verdict is final)")
        return self.adjudication_view(reviewer, view["item_id"])


def _review_of(adjudication: dict[str, Any], reviewer: str) -> dict[str, Any]:
    return next(r for r in adjudication["reviews"] if r["reviewer"] == reviewer)


def _verdict(review: dict[str, Any] | None) -> str:
    """A verdict as read: ``wrong_key → BD`` for a wrong key, else its category."""
    if not review or not review["verdict"]:
        return ""
    return f"wrong_key → {review['new_key']}" if review["verdict"] == "wrong_key" else review["verdict"]


def _plain(value: Any) -> Any:
    """A numpy scalar as its Python value (the evidence is stored as JSON)."""
    return value.item() if hasattr(value, "item") else value
