"""The fresh pool's transactions: items practitioners write, their blind answers and reviews, and every event.

The rules (what a written item must hold, the near-duplicate check, what an answer or a judgement may
hold) are :mod:`tcmqa.fresh.pool`'s; this module holds what must be atomic and what must never leak:

* the lifecycle, draft → in_review → accepted (hidden; its release date is the acceptance) → retired
  (public), with rejected → in_review once (the revision), each change one transaction and one event;
* the seats: every item in review holds two reviewers who are not its writer, confirmed, not excluded,
  never an earlier reviewer of the item, the least loaded first; an accepted item then holds as many
  blind answers as the study's N (``raters``), more raters being drawn where two reviewers are fewer;
* the blind answer: a reviewer reads the key and explanation only from :meth:`PoolStore.fresh_review_view`,
  which withholds them until the reviewer's own answer is stored; a judgement needs that answer too.

An item's text, options, key and explanation leave this module only in the rows its readers ask for
(:class:`FreshItem` hides them from ``repr``); messages, events and logs name items by id alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import logging
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tcmqa.ingest import majority
from tcmqa.schema import RATERS_PER_ITEM
from tcmqa.store.core import _SUBMIT_LOCK, StoreCore
from tcmqa.store.tables import fresh_events_t, fresh_items_t, fresh_reviews_t, practitioners_t
from tcmqa_metric import LETTERS

log = logging.getLogger(__name__)

DRAFT, IN_REVIEW, ACCEPTED, REJECTED, RETIRED = "draft", "in_review", "accepted", "rejected", "retired"
STATES = (DRAFT, IN_REVIEW, ACCEPTED, REJECTED, RETIRED)
REVIEWER, RATER = "reviewer", "rater"  # a rater answers blind for the reference only; a reviewer also judges
REVIEWERS = 2  # reviewers per revision
MAX_REVISIONS = 2  # a rejected item may be revised once
FRESH_SOURCE = "fresh"  # the corpus's ``source`` of a pool item
_POOL_LOCK = _SUBMIT_LOCK + 16  # numbering items and drawing seats (PostgreSQL; SQLite's BEGIN IMMEDIATE does)
_OPTION_COLUMNS = {letter: f"option_{letter.lower()}" for letter in LETTERS}
DUPLICATE_REFUSED = "refused_duplicate"  # the event of an item another written item was refused as too close to
JUDGEMENT = ("key_correct", "keyed_exact", "clear", "sound", "original")  # each 1 (yes) or 0 (no)


class PoolRefused(Exception):
    """The action does not apply now (state, account, order); the message names the item by id only."""


@dataclasses.dataclass(frozen=True)
class WrittenItem:
    """An item's content as checked by :func:`tcmqa.fresh.pool.check_written` (never shown by ``repr``)."""

    question: str = dataclasses.field(repr=False)
    options: dict[str, str] = dataclasses.field(repr=False)
    answer: list[str] = dataclasses.field(repr=False)  # sorted letters
    explanation: str = dataclasses.field(repr=False)
    domains: list[str] = dataclasses.field(default_factory=list)
    difficulty: int | None = None
    own_work: bool = False

    @property
    def answer_type(self) -> str:
        return "multi" if len(self.answer) > 1 else "single"


@dataclasses.dataclass(frozen=True)
class FreshItem:
    """A pool item as stored; its text, options, key and explanation are kept out of ``repr``."""

    id: str
    writer: str
    origin: str  # "written" | "imported"
    state: str
    revision: int
    content: WrittenItem
    created_at: float
    submitted_at: float | None
    accepted_at: float | None
    retired_at: float | None


def iso_date(when: float | None) -> str | None:
    """A stored time as its UTC date, ``2026-12-01`` (the release and retired dates)."""
    return None if when is None else datetime.datetime.fromtimestamp(when, datetime.UTC).date().isoformat()


def _content(row: Mapping[str, Any]) -> WrittenItem:
    return WrittenItem(
        question=row["question"],
        options={letter: row[column] for letter, column in _OPTION_COLUMNS.items()},
        answer=list(row["answer"]),
        explanation=row["explanation"],
        domains=json.loads(row["domains"]),
        difficulty=row["difficulty"],
        own_work=bool(row["own_work"]),
    )


def _item(row: Mapping[str, Any]) -> FreshItem:
    return FreshItem(
        id=row["id"],
        writer=row["writer"],
        origin=row["origin"],
        state=row["state"],
        revision=int(row["revision"]),
        content=_content(row),
        created_at=row["created_at"],
        submitted_at=row["submitted_at"],
        accepted_at=row["accepted_at"],
        retired_at=row["retired_at"],
    )


def _columns(item: WrittenItem) -> dict[str, Any]:
    return {
        "question": item.question,
        **{column: item.options[letter] for letter, column in _OPTION_COLUMNS.items()},
        "answer": "".join(item.answer),
        "answer_type": item.answer_type,
        "explanation": item.explanation,
        "domains": json.dumps(list(item.domains)),
        "difficulty": item.difficulty,
        "own_work": int(item.own_work),
    }


def corpus_row(item: FreshItem) -> dict[str, Any]:
    """The item in the corpus's shape (``tcmqa.schema.CORPUS``) with its release and retired dates."""
    c = item.content
    return {
        "id": item.id,
        "question": c.question,
        "options": dict(c.options),
        "answer": list(c.answer),
        "original_answer": list(c.answer),  # the key as written (errata apply to it later, as to an exam item's)
        "answer_type": c.answer_type,
        "explanation": c.explanation,
        "source_difficulty": c.difficulty,  # the writer's intended difficulty, 1-5
        "topic": None,
        "source": FRESH_SOURCE,
        "domains": list(c.domains),
        "flagged": False,
        "release_date": iso_date(item.accepted_at),
        "retired_date": iso_date(item.retired_at),
    }


def _open(t: sa.Table = fresh_reviews_t) -> sa.ColumnElement[bool]:
    """A seat still to be done by its holder: a reviewer's until judged, a rater's until answered."""
    return sa.and_(
        t.c.released_at.is_(None),
        sa.or_(
            sa.and_(t.c.role == REVIEWER, t.c.judged_at.is_(None)),
            sa.and_(t.c.role == RATER, t.c.answered_at.is_(None)),
        ),
    )


class PoolStore(StoreCore):
    """The fresh pool's transactions (tcmqa.fresh.pool holds the rules)."""

    @contextlib.contextmanager
    def _pool_write(self) -> Iterator[Connection]:
        """A writing transaction under the pool's lock whose database errors never carry the statement's
        parameters (an item's text and key) into a message, a log or a traceback."""
        try:
            with self._write() as conn:
                self._lock(conn, _POOL_LOCK)
                yield conn
        except sa.exc.StatementError as err:
            kind = type(getattr(err, "orig", None) or err).__name__
            raise RuntimeError(f"the fresh pool's database refused a change ({kind}); nothing was stored") from None

    # -- events and seats -------------------------------------------------------------------------
    @staticmethod
    def _fresh_event(
        conn: Connection,
        item_id: str,
        action: str,
        who: str,
        now: float,
        from_state: str | None,
        to_state: str | None,
        review_id: int | None = None,
    ) -> None:
        conn.execute(
            sa.insert(fresh_events_t).values(
                item_id=item_id,
                action=action,
                from_state=from_state,
                to_state=to_state,
                who=who,
                at=now,
                review_id=review_id,
            )
        )
        log.info("fresh item %s: %s by %s (%s -> %s)", item_id, action, who, from_state, to_state)

    @staticmethod
    def _fresh_row(conn: Connection, item_id: str) -> dict[str, Any]:
        row = conn.execute(sa.select(fresh_items_t).where(fresh_items_t.c.id == item_id)).mappings().first()
        if row is None:
            raise PoolRefused(f"no fresh item {item_id!r}")
        return dict(row)

    def _fresh_move(
        self, conn: Connection, row: dict[str, Any], to: str, action: str, who: str, now: float, **values: Any
    ) -> None:
        """Change an item's state from the one read (a concurrent change makes this refuse)."""
        result = conn.execute(
            sa.update(fresh_items_t)
            .where(fresh_items_t.c.id == row["id"], fresh_items_t.c.state == row["state"])
            .values(state=to, updated_at=now, **values)
        )
        if result.rowcount != 1:
            raise PoolRefused(f"fresh item {row['id']} changed meanwhile: reload it")
        self._fresh_event(conn, row["id"], action, who, now, row["state"], to)

    @staticmethod
    def _fresh_candidates(conn: Connection, row: Mapping[str, Any], exclude: Collection[str]) -> list[str]:
        """Who may take a seat of this item, least loaded first: confirmed, not excluded, not its writer,
        never a reviewer or rater of this item before (the revised item goes to two new reviewers)."""
        r, p = fresh_reviews_t, practitioners_t
        had = sa.select(r.c.reviewer).where(r.c.item_id == row["id"])
        load = sa.select(sa.func.count()).select_from(r).where(r.c.reviewer == p.c.account, _open(r)).scalar_subquery()
        total = sa.select(sa.func.count()).select_from(r).where(r.c.reviewer == p.c.account).scalar_subquery()
        query = (
            sa.select(p.c.account)
            .where(
                p.c.confirmed_at.is_not(None),
                p.c.excluded == 0,
                p.c.account != row["writer"],
                p.c.account.not_in(had),
            )
            .order_by(load, total, p.c.number, p.c.account)
        )
        excluded = set(exclude)
        return [a for a in conn.execute(query).scalars() if a not in excluded]

    def _fresh_seat(
        self, conn: Connection, row: Mapping[str, Any], reviewer: str, role: str, by: str, now: float
    ) -> int:
        review_id = conn.execute(
            sa.insert(fresh_reviews_t)
            .values(
                item_id=row["id"],
                revision=row["revision"],
                role=role,
                reviewer=reviewer,
                assigned_at=now,
                assigned_by=by,
            )
            .returning(fresh_reviews_t.c.id)
        ).scalar_one()
        self._fresh_event(conn, row["id"], f"assign_{role}", by, now, row["state"], row["state"], review_id)
        return int(review_id)

    def _fresh_fill(self, conn: Connection, raters: int, exclude: Collection[str], now: float) -> None:
        """Free the open seats of practitioners excluded since (or of the study lead's accounts), then give every
        item in review its two reviewers and every accepted item its N blind answers, as far as people allow."""
        t, r, p = fresh_items_t, fresh_reviews_t, practitioners_t
        gone = sa.select(p.c.account).where(p.c.excluded == 1)
        stale = conn.execute(
            sa.select(r.c.id, r.c.item_id, t.c.state)
            .join(t, t.c.id == r.c.item_id)
            .where(_open(r), sa.or_(r.c.reviewer.in_(gone), r.c.reviewer.in_(list(exclude))))
        ).all()
        for review_id, item_id, state in stale:
            conn.execute(
                sa.update(r)
                .where(r.c.id == review_id)
                .values(released_at=now, released_by="auto", released_reason="excluded")
            )
            self._fresh_event(conn, item_id, "release", "auto", now, state, state, review_id)
        held: dict[tuple[str, str], int] = {
            (item_id, role): int(n)
            for item_id, role, n in conn.execute(
                sa.select(r.c.item_id, r.c.role, sa.func.count())
                .join(t, sa.and_(t.c.id == r.c.item_id, t.c.revision == r.c.revision))
                .where(r.c.released_at.is_(None), t.c.state.in_((IN_REVIEW, ACCEPTED)))
                .group_by(r.c.item_id, r.c.role)
            )
        }
        rows = conn.execute(sa.select(t).where(t.c.state.in_((IN_REVIEW, ACCEPTED))).order_by(t.c.number)).mappings()
        for row in list(rows):
            reviewers, others = held.get((row["id"], REVIEWER), 0), held.get((row["id"], RATER), 0)
            if row["state"] == IN_REVIEW:
                role, wanted = REVIEWER, REVIEWERS - reviewers
            else:  # accepted: the reference's N blind answers, the reviewers' and raters' together
                role, wanted = RATER, raters - reviewers - others
            if wanted > 0:
                for account in self._fresh_candidates(conn, row, exclude)[:wanted]:
                    self._fresh_seat(conn, row, account, role, "auto", now)

    def fill_fresh_seats(self, raters: int = RATERS_PER_ITEM, exclude: Collection[str] = ()) -> None:
        """Draw the reviewers and raters still missing (call when practitioners confirm or are re-included)."""
        with self._pool_write() as conn:
            self._fresh_fill(conn, raters, exclude, time.time())

    # -- writing ------------------------------------------------------------------------------------
    def note_fresh_duplicate(self, near: str, who: str) -> None:
        """Record that ``who`` wrote an item refused as a near-duplicate of ``near`` (a public or pool item's id):
        an event of ``near`` (action ``refused_duplicate``), never the refused text."""
        with self._pool_write() as conn:
            self._fresh_event(conn, near, DUPLICATE_REFUSED, who, time.time(), None, None)

    def create_fresh_items(
        self,
        writer: str,
        items: Iterable[WrittenItem],
        *,
        submit: bool,
        origin: str = "written",
        raters: int = RATERS_PER_ITEM,
        exclude: Collection[str] = (),
    ) -> list[str]:
        """Store checked items (drafts, or straight into review with their reviewers) in one transaction;
        their new ids, in order."""
        ids = []
        with self._pool_write() as conn:
            now = time.time()
            number = int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(fresh_items_t.c.number), 0))).scalar_one())
            for item in items:
                number += 1
                item_id = f"fresh-{number:05d}"
                state = IN_REVIEW if submit else DRAFT
                conn.execute(
                    sa.insert(fresh_items_t).values(
                        id=item_id,
                        number=number,
                        writer=writer,
                        origin=origin,
                        state=state,
                        revision=1,
                        **_columns(item),
                        created_at=now,
                        submitted_at=now if submit else None,
                        updated_at=now,
                    )
                )
                self._fresh_event(
                    conn, item_id, "import" if origin == "imported" else "write", writer, now, None, state
                )
                ids.append(item_id)
            self._fresh_fill(conn, raters, exclude, now)
        return ids

    def update_fresh_item(
        self,
        item_id: str,
        writer: str,
        item: WrittenItem,
        *,
        submit: bool,
        raters: int = RATERS_PER_ITEM,
        exclude: Collection[str] = (),
    ) -> None:
        """The writer edits a draft (and may submit it), or revises a rejected item once, which goes to two
        new reviewers."""
        with self._pool_write() as conn:
            now = time.time()
            row = self._fresh_row(conn, item_id)
            if row["writer"] != writer:
                raise PoolRefused(f"fresh item {item_id} is not yours to edit")
            values = _columns(item)
            if row["state"] == DRAFT:
                if submit:
                    self._fresh_move(conn, row, IN_REVIEW, "submit", writer, now, submitted_at=now, **values)
                else:
                    conn.execute(
                        sa.update(fresh_items_t).where(fresh_items_t.c.id == item_id).values(updated_at=now, **values)
                    )
                    self._fresh_event(conn, item_id, "edit", writer, now, DRAFT, DRAFT)
            elif row["state"] == REJECTED and row["revision"] < MAX_REVISIONS:
                if not submit:
                    raise PoolRefused(f"fresh item {item_id}: a revision goes straight back into review")
                self._fresh_move(
                    conn,
                    row,
                    IN_REVIEW,
                    "revise",
                    writer,
                    now,
                    submitted_at=now,
                    revision=row["revision"] + 1,
                    **values,
                )
            elif row["state"] == REJECTED:
                raise PoolRefused(f"fresh item {item_id} was revised once already and rejected again")
            else:
                raise PoolRefused(f"fresh item {item_id} is {row['state']}: only a draft or a rejected item can change")
            self._fresh_fill(conn, raters, exclude, now)

    # -- reviewing ------------------------------------------------------------------------------------
    @staticmethod
    def _fresh_held(conn: Connection, review_id: int, reviewer: str) -> dict[str, Any]:
        row = conn.execute(sa.select(fresh_reviews_t).where(fresh_reviews_t.c.id == review_id)).mappings().first()
        if row is None or row["reviewer"] != reviewer or row["released_at"] is not None:
            raise PoolRefused(f"review {review_id} is not assigned to you")
        return dict(row)

    def fresh_review_view(self, review_id: int, reviewer: str) -> dict[str, Any]:
        """What the reviewer may read: the stem, the options and the answer type, and, only once their blind
        answer is stored, the key, the explanation and their own answer."""
        with self._read() as conn:
            review = self._fresh_held(conn, review_id, reviewer)
            row = self._fresh_row(conn, review["item_id"])
        if row["revision"] != review["revision"]:
            raise PoolRefused(f"fresh item {row['id']} was revised since: review {review_id} is closed")
        content = _content(row)
        view: dict[str, Any] = {
            "review_id": review_id,
            "item_id": row["id"],
            "role": review["role"],
            "state": row["state"],
            "question": content.question,
            "options": dict(content.options),
            "answer_type": content.answer_type,
            "answered": review["answered_at"] is not None,
            "judged": review["judged_at"] is not None,
        }
        if review["answered_at"] is not None:
            view.update(
                answer=list(content.answer),
                explanation=content.explanation,
                domains=list(content.domains),
                difficulty=content.difficulty,
                selected=list(review["selected"]),
            )
        return view

    def record_fresh_answer(
        self, review_id: int, reviewer: str, selected: list[str], difficulty: int, seconds: float
    ) -> dict[str, Any]:
        """Store the reviewer's blind answer, once; the view with the key and explanation now readable."""
        with self._pool_write() as conn:
            review = self._fresh_held(conn, review_id, reviewer)
            if review["answered_at"] is not None:
                raise PoolRefused(f"review {review_id} is already answered")
            row = self._fresh_row(conn, review["item_id"])
            if row["revision"] != review["revision"] or row["state"] not in (IN_REVIEW, ACCEPTED):
                raise PoolRefused(f"fresh item {row['id']} is no longer waiting for this review")
            now = time.time()
            conn.execute(
                sa.update(fresh_reviews_t)
                .where(fresh_reviews_t.c.id == review_id)
                .values(
                    selected="".join(sorted(set(selected))),
                    blind_difficulty=difficulty,
                    seconds=seconds,
                    answered_at=now,
                )
            )
            self._fresh_event(conn, row["id"], "answer", reviewer, now, row["state"], row["state"], review_id)
        return self.fresh_review_view(review_id, reviewer)

    def record_fresh_judgement(
        self,
        review_id: int,
        reviewer: str,
        judgement: Mapping[str, bool],
        problems: list[str],
        comment: str,
        accepts: bool,
        *,
        raters: int = RATERS_PER_ITEM,
        exclude: Collection[str] = (),
    ) -> str:
        """Store a reviewer's judgement (after their blind answer); when both reviewers of the revision have
        judged, the item is accepted (both accept: its release date is now) or rejected. The item's state."""
        with self._pool_write() as conn:
            review = self._fresh_held(conn, review_id, reviewer)
            if review["role"] != REVIEWER:
                raise PoolRefused(f"review {review_id} asks for a blind answer only")
            if review["answered_at"] is None:
                raise PoolRefused(f"review {review_id}: record your blind answer before judging the item")
            if review["judged_at"] is not None:
                raise PoolRefused(f"review {review_id} is already judged")
            row = self._fresh_row(conn, review["item_id"])
            if row["state"] != IN_REVIEW or row["revision"] != review["revision"]:
                raise PoolRefused(f"fresh item {row['id']} is no longer in review for this revision")
            now = time.time()
            conn.execute(
                sa.update(fresh_reviews_t)
                .where(fresh_reviews_t.c.id == review_id)
                .values(
                    **{k: int(bool(judgement[k])) for k in JUDGEMENT},
                    problems=json.dumps(list(problems)),
                    comment=comment,
                    accepts=int(accepts),
                    judged_at=now,
                )
            )
            self._fresh_event(conn, row["id"], "judge", reviewer, now, IN_REVIEW, IN_REVIEW, review_id)
            r = fresh_reviews_t
            verdicts = list(
                conn.execute(
                    sa.select(r.c.accepts).where(
                        r.c.item_id == row["id"],
                        r.c.revision == row["revision"],
                        r.c.role == REVIEWER,
                        r.c.released_at.is_(None),
                    )
                ).scalars()
            )
            state = IN_REVIEW
            if len(verdicts) >= REVIEWERS and all(v is not None for v in verdicts):
                state = ACCEPTED if all(verdicts) else REJECTED
                extra = {"accepted_at": now} if state == ACCEPTED else {}
                self._fresh_move(conn, row, state, "accept" if state == ACCEPTED else "reject", "auto", now, **extra)
            self._fresh_fill(conn, raters, exclude, now)
            return state

    def reassign_fresh_review(
        self,
        review_id: int,
        by: str,
        reason: str,
        to: str | None = None,
        *,
        raters: int = RATERS_PER_ITEM,
        exclude: Collection[str] = (),
    ) -> int:
        """The lead frees a seat not yet done and gives it to ``to`` (else the least loaded eligible
        practitioner); the new review's id. Refused when ``to`` may not review this item."""
        with self._pool_write() as conn:
            review = (
                conn.execute(sa.select(fresh_reviews_t).where(fresh_reviews_t.c.id == review_id)).mappings().first()
            )
            if review is None or review["released_at"] is not None:
                raise PoolRefused(f"review {review_id} is not held by anyone")
            done = review["judged_at"] if review["role"] == REVIEWER else review["answered_at"]
            if done is not None:
                raise PoolRefused(f"review {review_id} is done already")
            row = self._fresh_row(conn, review["item_id"])
            now = time.time()
            conn.execute(
                sa.update(fresh_reviews_t)
                .where(fresh_reviews_t.c.id == review_id)
                .values(released_at=now, released_by=by, released_reason=reason)
            )
            self._fresh_event(conn, row["id"], "release", by, now, row["state"], row["state"], review_id)
            candidates = self._fresh_candidates(conn, row, exclude)
            if to is not None and to not in candidates:
                raise PoolRefused(
                    f"{to!r} may not review fresh item {row['id']}: not a confirmed practitioner, excluded, "
                    "its writer or an earlier reviewer of it"
                )
            chosen = to or (candidates[0] if candidates else None)
            if chosen is None:
                raise PoolRefused(f"nobody else may review fresh item {row['id']} now")
            new_id = self._fresh_seat(conn, row, chosen, review["role"], by, now)
            self._fresh_fill(conn, raters, exclude, now)
            return new_id

    # -- retiring ---------------------------------------------------------------------------------------
    def retire_fresh_items(
        self, by: str, *, older_than_s: float | None = None, keep_newest: int | None = None
    ) -> list[str]:
        """Make accepted items public: those accepted more than ``older_than_s`` ago, or all but the newest
        ``keep_newest``; the retired ids, oldest first."""
        if (older_than_s is None) == (keep_newest is None):
            raise ValueError("retire by age (older_than_s) or to keep the newest N (keep_newest), one of them")
        with self._pool_write() as conn:
            now = time.time()
            t = fresh_items_t
            accepted = [
                dict(r)
                for r in conn.execute(
                    sa.select(t).where(t.c.state == ACCEPTED).order_by(t.c.accepted_at, t.c.number)
                ).mappings()
            ]
            if older_than_s is not None:
                chosen = [r for r in accepted if r["accepted_at"] < now - older_than_s]
            else:
                chosen = accepted[: max(0, len(accepted) - int(keep_newest or 0))]
            for row in chosen:
                self._fresh_move(conn, row, RETIRED, "retire", by, now, retired_at=now)
            return [r["id"] for r in chosen]

    # -- reading --------------------------------------------------------------------------------------
    def fresh_item(self, item_id: str) -> FreshItem | None:
        """The item with its key: for its writer, the study lead and the evaluation (a reviewer reads it
        through :meth:`fresh_review_view`, which withholds the key until the blind answer)."""
        with self._read() as conn:
            row = conn.execute(sa.select(fresh_items_t).where(fresh_items_t.c.id == item_id)).mappings().first()
        return _item(row) if row else None

    def fresh_items(self, writer: str | None = None, state: str | None = None) -> list[FreshItem]:
        """Pool items (a writer's own, or in one state), in the order written."""
        query = sa.select(fresh_items_t).order_by(fresh_items_t.c.number)
        if writer is not None:
            query = query.where(fresh_items_t.c.writer == writer)
        if state is not None:
            query = query.where(fresh_items_t.c.state == state)
        with self._read() as conn:
            return [_item(r) for r in conn.execute(query).mappings()]

    def fresh_reviews(self, item_id: str | None = None, reviewer: str | None = None) -> list[dict[str, Any]]:
        """Review rows (no item text), oldest first: a reviewer's seats, or an item's reviews."""
        query = sa.select(fresh_reviews_t).order_by(fresh_reviews_t.c.id)
        if item_id is not None:
            query = query.where(fresh_reviews_t.c.item_id == item_id)
        if reviewer is not None:
            query = query.where(fresh_reviews_t.c.reviewer == reviewer)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def fresh_events(self, item_id: str | None = None) -> list[dict[str, Any]]:
        """The event log (item, action, from, to, who, when), oldest first."""
        query = sa.select(fresh_events_t).order_by(fresh_events_t.c.id)
        if item_id is not None:
            query = query.where(fresh_events_t.c.item_id == item_id)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def fresh_duplicates_refused(self) -> int:
        """Written or imported items refused as near-duplicates, so far."""
        query = (
            sa.select(sa.func.count()).select_from(fresh_events_t).where(fresh_events_t.c.action == DUPLICATE_REFUSED)
        )
        with self._read() as conn:
            return int(conn.execute(query).scalar_one())

    def fresh_counts(self) -> dict[str, int]:
        """Items by state (every state, 0 where none)."""
        query = sa.select(fresh_items_t.c.state, sa.func.count()).group_by(fresh_items_t.c.state)
        with self._read() as conn:
            found = {state: int(n) for state, n in conn.execute(query)}
        return {state: found.get(state, 0) for state in STATES}

    # -- the evaluation's and the builder's read API ------------------------------------------------------
    def accepted_fresh_items(self) -> list[dict[str, Any]]:
        """The hidden pool, in the corpus's row shape with ``release_date`` (and ``retired_date`` None)."""
        return [corpus_row(i) for i in self.fresh_items(state=ACCEPTED)]

    def retired_fresh_items(self) -> list[dict[str, Any]]:
        """The items made public, in the corpus's row shape with ``release_date`` and ``retired_date``."""
        return [corpus_row(i) for i in self.fresh_items(state=RETIRED)]

    def fresh_pool_version(self) -> str:
        """The digest of the accepted items (ids and revisions): it changes whenever the hidden pool does."""
        t = fresh_items_t
        with self._read() as conn:
            rows = conn.execute(sa.select(t.c.id, t.c.revision).where(t.c.state == ACCEPTED).order_by(t.c.id)).all()
        text = "\n".join(f"{item_id}@{revision}" for item_id, revision in rows)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def fresh_reference(self, raters: int = RATERS_PER_ITEM) -> dict[str, bool]:
        """Accepted item id -> the practitioners' majority (``tcmqa.ingest.majority``) of the first N blind
        answers to its accepted revision; items with fewer than N blind answers are left out, as the subset
        leaves out items without their N."""
        t, r = fresh_items_t, fresh_reviews_t
        query = (
            sa.select(t.c.id, t.c.answer, r.c.selected)
            .join(r, sa.and_(r.c.item_id == t.c.id, r.c.revision == t.c.revision))
            .where(t.c.state == ACCEPTED, r.c.released_at.is_(None), r.c.answered_at.is_not(None))
            .order_by(t.c.id, r.c.answered_at, r.c.id)
        )
        answers: dict[str, list[bool]] = {}
        with self._read() as conn:
            for item_id, key, selected in conn.execute(query):
                answers.setdefault(item_id, []).append(selected == key)
        return {i: majority(sum(a[:raters]), raters) for i, a in answers.items() if len(a) >= raters}

    def fresh_item_texts(self) -> list[tuple[str, str, dict[str, str]]]:
        """(id, stem, options) of every pool item, for the near-duplicate index (never shown)."""
        return [(i.id, i.content.question, dict(i.content.options)) for i in self.fresh_items()]
