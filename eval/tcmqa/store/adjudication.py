"""Key adjudication's transactions: a suspect item put to its reviewers, a reviewer added, a verdict recorded.

An adjudication keeps the item as it stood when the study lead assigned it (the key, the corpus revision, its
rank and the evidence), so a verdict is always about the key the reviewers read, and the evidence a reviewer
sees after their verdict is the one the lead saw. The rules (who may review, when a third is needed, what the
decision is) are :mod:`tcmqa.leaderboard.practice.adjudication`'s and :mod:`tcmqa.adjudication`'s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tcmqa.store.core import StoreCore
from tcmqa.store.tables import adjudication_reviews_t, adjudications_t


class AdjudicationStore(StoreCore):
    def open_adjudication(
        self,
        item: dict[str, Any],
        reviewers: Sequence[str],
        by: str,
    ) -> None:
        """Store ``item`` (item_id, old_key, corpus_revision, rank, evidence: a dict) with one review per reviewer,
        in one transaction; ValueError if the item is already adjudicated."""
        now = time.time()
        try:
            with self._write() as conn:
                conn.execute(
                    sa.insert(adjudications_t).values(
                        item_id=item["item_id"],
                        old_key=item["old_key"],
                        corpus_revision=item["corpus_revision"],
                        rank=int(item["rank"]),
                        evidence=json.dumps(item["evidence"], ensure_ascii=False, default=str),
                        assigned_by=by,
                        assigned_at=now,
                    )
                )
                for reviewer in reviewers:
                    conn.execute(self._review(item["item_id"], reviewer, by, now))
        except IntegrityError:
            raise ValueError(f"item {item['item_id']} is already being adjudicated: see its reviews") from None

    @staticmethod
    def _review(item_id: str, reviewer: str, by: str, now: float) -> Any:
        return sa.insert(adjudication_reviews_t).values(
            item_id=item_id, reviewer=reviewer, assigned_by=by, assigned_at=now
        )

    def add_adjudication_reviewer(self, item_id: str, reviewer: str, by: str) -> None:
        """One more reviewer of ``item_id``; ValueError if they already review it."""
        try:
            with self._write() as conn:
                conn.execute(self._review(item_id, reviewer, by, time.time()))
        except IntegrityError:
            raise ValueError(f"{reviewer!r} already reviews item {item_id}") from None

    def adjudications(self, item_id: str | None = None, reviewer: str | None = None) -> list[dict[str, Any]]:
        """Adjudications by rank (one item's, or those ``reviewer`` reviews), each with its ``reviews`` in the
        order they were assigned and its ``evidence`` parsed."""
        a, r = adjudications_t, adjudication_reviews_t
        items = sa.select(a).order_by(a.c.rank, a.c.item_id)
        if item_id is not None:
            items = items.where(a.c.item_id == item_id)
        if reviewer is not None:
            items = items.where(a.c.item_id.in_(sa.select(r.c.item_id).where(r.c.reviewer == reviewer)))
        with self._read() as conn:
            rows = [dict(row) for row in conn.execute(items).mappings()]
            reviews = conn.execute(
                sa.select(r).where(r.c.item_id.in_([row["item_id"] for row in rows])).order_by(r.c.id)
            ).mappings()
            by_item: dict[str, list[dict[str, Any]]] = {}
            for review in reviews:
                by_item.setdefault(review["item_id"], []).append(dict(review))
        for row in rows:
            row["evidence"] = json.loads(row["evidence"])
            row["reviews"] = by_item.get(row["item_id"], [])
        return rows

    def record_adjudication_verdict(
        self, item_id: str, reviewer: str, verdict: str, new_key: str, comment: str
    ) -> bool:
        """The reviewer's verdict on ``item_id``; False (nothing changed) if they hold no review of it or
        already gave one (a verdict is final: the evidence is shown once it is saved)."""
        r = adjudication_reviews_t
        with self._write() as conn:
            done = conn.execute(
                sa.update(r)
                .where(r.c.item_id == item_id, r.c.reviewer == reviewer, r.c.verdict.is_(None))
                .values(verdict=verdict, new_key=new_key, comment=comment, decided_at=time.time())
            )
        return done.rowcount == 1
