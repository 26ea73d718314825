"""The fresh pool in practitioner mode: its rules over this Space's store and corpus, and the study lead's
tables of it.

The tables hold ids, accounts, states, counts, rates and times only, never an item's text, options, key or
explanation: a hidden item is read by its writer and, after their blind answer, its reviewers
(:mod:`tcmqa.store.pool`), by no one else, the study lead included. Agreement is between the two reviewers
of a revision (both accept or both reject); blind correct is the share of a reviewer's blind answers that
match the key; time in review runs from entering review to the decision, or to now while undecided.
"""

from __future__ import annotations

import collections
import functools
import statistics
import time
from collections.abc import Iterable
from typing import Any

import pandas as pd

from tcmqa.fresh.pool import FreshPool
from tcmqa.leaderboard.practice.admin import PracticeAdmin
from tcmqa.store.pool import ACCEPTED, IN_REVIEW, REJECTED, REVIEWER, STATES

DAY_S = 86_400.0
STATE_NAMES = {"in_review": "in review", "accepted": "accepted (hidden)", "retired": "retired (public)"}
SUMMARY_COLUMNS = ["measure", "value"]
ITEM_COLUMNS = ["item_id", "state", "origin", "revision", "writer", "answered", "judged", "submitted", "days_in_review"]
REVIEWER_COLUMNS = ["account", "open", "answered", "judged", "accepts", "agreement", "blind_correct", "median_seconds"]
OPEN_COLUMNS = ["review_id", "item_id", "role", "reviewer", "assigned", "days_waiting", "assigned_by"]


def _date(when: float | None) -> str | None:
    return None if when is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(when))


def _percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def _days(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / DAY_S, 2)


def is_open(review: dict[str, Any]) -> bool:
    """A seat still to be done: a reviewer's until judged, a rater's until answered (none once released)."""
    done = review["judged_at"] if review["role"] == REVIEWER else review["answered_at"]
    return review["released_at"] is None and done is None


def review_times(events: Iterable[dict[str, Any]], now: float) -> tuple[list[float], dict[str, float]]:
    """(the seconds of every stay in review that ended in a decision, item id -> its seconds in review so far
    for each item in review now); a stay runs from entering review (a submission, an import, a revision)."""
    decided: list[float] = []
    entered: dict[str, float] = {}
    for e in events:
        if e["to_state"] == IN_REVIEW and e["from_state"] != IN_REVIEW:
            entered[e["item_id"]] = e["at"]
        elif e["from_state"] == IN_REVIEW and e["to_state"] in (ACCEPTED, REJECTED) and e["item_id"] in entered:
            decided.append(e["at"] - entered.pop(e["item_id"]))
    return decided, {item: now - since for item, since in entered.items()}


class PracticePool(PracticeAdmin):
    """The pool's rules for the Space's handlers (:attr:`fresh_pool`) and the console's pool tables (admins)."""

    @functools.cached_property
    def fresh_pool(self) -> FreshPool:
        """The pool's rules over this store, the served corpus as the public side of the near-duplicate check,
        the Space's N, and the admins as the study lead's accounts (they neither write nor review)."""
        return FreshPool(self.store, self.items.values(), raters=self.raters, exclude=self.admins)

    def reassign_review(self, admin: str | None, review_id: int, reason: str, to: str | None = None) -> int:
        """The study lead gives a review not yet done to ``to`` (else the least loaded eligible practitioner),
        with a reason; the new review's id."""
        return self.fresh_pool.reassign(self._admin(admin), review_id, reason, to)

    def _waiting(self) -> list[dict[str, Any]]:
        """The seats still to be done of items that wait for them (in review, or accepted and short of N)."""
        live = {i.id for i in self.store.fresh_items() if i.state in (IN_REVIEW, ACCEPTED)}
        return [r for r in self.store.fresh_reviews() if is_open(r) and r["item_id"] in live]

    def pool_summary(self, admin: str | None) -> pd.DataFrame:
        """Items by state, reviews open, the acceptance rate of decisions, near-duplicates refused, the median
        days in review of decided stays, and the pool's version (the digest of the accepted items)."""
        self._admin(admin)
        counts = self.store.fresh_counts()
        events = self.store.fresh_events()
        decisions = collections.Counter(e["action"] for e in events if e["action"] in ("accept", "reject"))
        decided, _ = review_times(events, time.time())
        rows: list[tuple[str, Any]] = [(f"items {STATE_NAMES.get(s, s)}", counts[s]) for s in STATES]
        rows += [
            ("reviews open", len(self._waiting())),
            ("acceptance rate % (of decisions)", _percent(decisions["accept"], sum(decisions.values()))),
            ("near-duplicates refused", self.store.fresh_duplicates_refused()),
            ("median days in review (decided)", _days(statistics.median(decided)) if decided else None),
            ("pool version", self.store.fresh_pool_version()),
        ]
        return pd.DataFrame([(m, "" if v is None else str(v)) for m, v in rows], columns=SUMMARY_COLUMNS)

    def pool_items(self, admin: str | None) -> pd.DataFrame:
        """Every pool item by id: state, origin, revision, writer, blind answers and judgements of its current
        revision, when it entered review, and its days in review while it is there."""
        self._admin(admin)
        _, waiting = review_times(self.store.fresh_events(), time.time())
        reviews = collections.defaultdict(list)
        for r in self.store.fresh_reviews():
            if r["released_at"] is None:
                reviews[(r["item_id"], r["revision"])].append(r)
        rows = []
        for item in self.store.fresh_items():
            current = reviews[(item.id, item.revision)]
            rows.append(
                {
                    "item_id": item.id,
                    "state": item.state,
                    "origin": item.origin,
                    "revision": item.revision,
                    "writer": item.writer,
                    "answered": sum(r["answered_at"] is not None for r in current),
                    "judged": sum(r["judged_at"] is not None for r in current),
                    "submitted": _date(item.submitted_at),
                    "days_in_review": _days(waiting.get(item.id)),
                }
            )
        return pd.DataFrame(rows, columns=ITEM_COLUMNS)

    def pool_reviewers(self, admin: str | None) -> pd.DataFrame:
        """Per reviewer: seats open, blind answers, judgements, accepts, agreement % with the co-reviewer of the
        same revision, blind correct %, median seconds of a blind answer."""
        self._admin(admin)
        keys = {item.id: "".join(item.content.answer) for item in self.store.fresh_items()}
        reviews = [r for r in self.store.fresh_reviews() if r["released_at"] is None]
        verdicts: dict[tuple[str, int], dict[str, int]] = collections.defaultdict(dict)
        for r in reviews:
            if r["role"] == REVIEWER and r["accepts"] is not None:
                verdicts[(r["item_id"], r["revision"])][r["reviewer"]] = r["accepts"]
        by_account: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for r in reviews:
            by_account[r["reviewer"]].append(r)
        rows = []
        for account, mine in sorted(by_account.items()):
            answered = [r for r in mine if r["answered_at"] is not None]
            judged = [r for r in mine if r["judged_at"] is not None]
            agree = [
                other == r["accepts"]
                for r in judged
                for who, other in verdicts[(r["item_id"], r["revision"])].items()
                if who != account
            ]
            seconds = [r["seconds"] for r in answered if r["seconds"] is not None]
            right = sum(r["selected"] == keys.get(r["item_id"]) for r in answered)
            rows.append(
                {
                    "account": account,
                    "open": sum(is_open(r) for r in mine),
                    "answered": len(answered),
                    "judged": len(judged),
                    "accepts": sum(bool(r["accepts"]) for r in judged),
                    "agreement": _percent(sum(agree), len(agree)),
                    "blind_correct": _percent(right, len(answered)),
                    "median_seconds": statistics.median(seconds) if seconds else None,
                }
            )
        return pd.DataFrame(rows, columns=REVIEWER_COLUMNS)

    def pool_open_reviews(self, admin: str | None) -> pd.DataFrame:
        """Every seat still to be done, oldest first: what the lead may reassign (by its review id)."""
        self._admin(admin)
        now = time.time()
        rows = [
            {
                "review_id": r["id"],
                "item_id": r["item_id"],
                "role": r["role"],
                "reviewer": r["reviewer"],
                "assigned": _date(r["assigned_at"]),
                "days_waiting": _days(now - r["assigned_at"]),
                "assigned_by": r["assigned_by"],
            }
            for r in self._waiting()
        ]
        return pd.DataFrame(rows, columns=OPEN_COLUMNS)
