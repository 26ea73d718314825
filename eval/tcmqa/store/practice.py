"""Practitioner mode's transactions: practitioners, practice blocks, their assignments and the responses.

The rules (who may answer, which items a new block draws, what a response may hold) are
:mod:`tcmqa.leaderboard.practice`'s; this module holds what must be atomic: an assignment made once per
free rater slot, one response per (account, item), the daily cap counted in the same transaction.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from tcmqa.store.core import _SUBMIT_LOCK, StoreCore
from tcmqa.store.tables import (
    practice_assignments_t,
    practice_block_info_t,
    practice_blocks_t,
    practice_exclusions_t,
    practice_responses_t,
    practice_retired_t,
    practitioners_t,
)

T = TypeVar("T")
log = logging.getLogger("tcmqa.store")


class DailyCapReached(Exception):
    """The practitioner already recorded ``cap`` responses today (UTC)."""

    def __init__(self, count: int, cap: int):
        super().__init__(f"{count} responses today; the daily limit is {cap}. Please continue tomorrow.")
        self.count, self.cap = count, cap


@dataclasses.dataclass(frozen=True)
class PracticeSnapshot:
    """What an assignment decision reads, at one instant (the rules are tcmqa.leaderboard.practice's)."""

    now: float
    blocks: dict[int, list[str]]  # block -> its item ids in order
    block_raters: dict[int, int]  # block -> its slots (blocks made before migration 5 have none: N)
    block_kind: dict[int, str]  # block -> "fresh" | "top_up"
    assignments: list[dict[str, Any]]  # every assignment, released ones too, oldest first
    activity: dict[tuple[str, int], tuple[int, float]]  # (account, block) -> (responses, last recorded_at)
    excluded: set[str]  # accounts excluded now
    flagged_by: dict[str, set[str]]  # item id -> accounts that flagged it here
    retired: set[int] = dataclasses.field(default_factory=set)  # blocks reopened after publication: never refilled


@dataclasses.dataclass(frozen=True)
class SlotPlan:
    """An assignment decision: the slot an account takes, in a new block when ``items`` is given."""

    block: int
    slot: int
    items: list[str] | None = None  # a new block's items in order; None: an existing block
    raters: int | None = None  # a new block's slots
    kind: str = "fresh"  # a new block's kind: "fresh" | "top_up"
    release: tuple[tuple[str, int, str], ...] = ()  # (account, block, reason): stale holders to release first


Finished = Callable[[PracticeSnapshot], set[int]]  # the blocks all of whose raters finished them (published)


class PracticeStore(StoreCore):
    """Practitioner mode's transactions (tcmqa.leaderboard.practice holds the rules)."""

    def practitioner(self, account: str) -> dict[str, Any] | None:
        with self._read() as conn:
            row = conn.execute(sa.select(practitioners_t).where(practitioners_t.c.account == account)).mappings()
            found = row.first()
        return dict(found) if found else None

    def practitioners(self) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(sa.select(practitioners_t).order_by(practitioners_t.c.created_at)).mappings().all()
        return [dict(r) for r in rows]

    def register_practitioner(self, account: str) -> dict[str, Any]:
        """The account's practitioner record, created (unconfirmed) on first sight with the next person number."""
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK + 4)
            found = conn.execute(sa.select(practitioners_t.c.account).where(practitioners_t.c.account == account))
            if found.first() is None:
                number = conn.execute(sa.select(sa.func.coalesce(sa.func.max(practitioners_t.c.number), 0))).scalar()
                conn.execute(
                    sa.insert(practitioners_t).values(
                        account=account, created_at=time.time(), excluded=0, number=int(number) + 1
                    )
                )
        return self.practitioner(account)  # type: ignore[return-value]

    def confirm_licence(self, account: str, licence_number: str | None = None) -> None:
        """Record (once) that the account confirmed holding a TCM licence, with an optional private number."""
        self.register_practitioner(account)
        with self._write() as conn:
            values: dict[str, Any] = {"confirmed_at": time.time()}
            if licence_number:
                values["licence_number"] = licence_number
            conn.execute(
                sa.update(practitioners_t)
                .where(practitioners_t.c.account == account, practitioners_t.c.confirmed_at.is_(None))
                .values(**values)
            )

    def exclude_practitioner(
        self, account: str, reason: str, by: str, excluded: bool = True, finished: Finished | None = None
    ) -> bool:
        """Exclude (or re-include) a practitioner: the current state and an entry of its history; False if unknown.

        ``finished``: the rule of published blocks; a block the exclusion reopens is retired (:meth:`_retiring`).
        """
        with self._write() as conn:

            def change() -> bool:
                now = time.time()
                result = conn.execute(
                    sa.update(practitioners_t)
                    .where(practitioners_t.c.account == account)
                    .values(excluded=int(excluded), excluded_reason=reason, excluded_at=now, excluded_by=by)
                )
                if result.rowcount != 1:
                    return False
                conn.execute(
                    sa.insert(practice_exclusions_t).values(
                        account=account, excluded=int(excluded), reason=reason, decided_by=by, decided_at=now
                    )
                )
                return True

            return self._retiring(conn, finished, f"{account} excluded: {reason}", by, change)

    def practice_exclusions(self, account: str | None = None) -> list[dict[str, Any]]:
        """Every exclusion and re-inclusion (account, excluded, reason, decided_by, decided_at), oldest first."""
        query = sa.select(practice_exclusions_t).order_by(practice_exclusions_t.c.id)
        if account is not None:
            query = query.where(practice_exclusions_t.c.account == account)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def practice_assignments(self, account: str | None = None) -> list[dict[str, Any]]:
        """Assignments (account, block, slot, user_id, assigned_at, released_*), released ones too, oldest first."""
        query = sa.select(practice_assignments_t).order_by(
            practice_assignments_t.c.assigned_at, practice_assignments_t.c.block
        )
        if account is not None:
            query = query.where(practice_assignments_t.c.account == account)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def practice_block_items(self, block: int) -> list[str]:
        query = (
            sa.select(practice_blocks_t.c.item_id)
            .where(practice_blocks_t.c.block == block)
            .order_by(practice_blocks_t.c.position)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def practice_block_counts(self) -> dict[int, int]:
        """Items per practice block."""
        query = sa.select(practice_blocks_t.c.block, sa.func.count()).group_by(practice_blocks_t.c.block)
        with self._read() as conn:
            return {int(b): int(n) for b, n in conn.execute(query)}

    def practice_snapshot(self) -> PracticeSnapshot:
        """Blocks, assignments, activity, exclusions and flags as they stand (read-only)."""
        with self._read() as conn:
            return self._snapshot(conn)

    def _snapshot(self, conn: Connection) -> PracticeSnapshot:
        blocks: dict[int, list[str]] = {}
        query = sa.select(practice_blocks_t).order_by(practice_blocks_t.c.block, practice_blocks_t.c.position)
        for row in conn.execute(query).mappings():
            blocks.setdefault(int(row["block"]), []).append(row["item_id"])
        info = {int(r["block"]): dict(r) for r in conn.execute(sa.select(practice_block_info_t)).mappings()}
        assignments = [
            dict(r)
            for r in conn.execute(
                sa.select(practice_assignments_t).order_by(
                    practice_assignments_t.c.assigned_at, practice_assignments_t.c.block
                )
            ).mappings()
        ]
        t = practice_responses_t
        activity = {
            (account, int(block)): (int(n), float(last))
            for account, block, n, last in conn.execute(
                sa.select(t.c.account, t.c.block, sa.func.count(), sa.func.max(t.c.recorded_at)).group_by(
                    t.c.account, t.c.block
                )
            )
        }
        excluded = set(
            conn.execute(sa.select(practitioners_t.c.account).where(practitioners_t.c.excluded == 1)).scalars()
        )
        flagged = collections.defaultdict(set)
        for account, item_id in conn.execute(sa.select(t.c.account, t.c.item_id).where(t.c.flagged == 1)):
            flagged[item_id].add(account)
        retired = {int(b) for b in conn.execute(sa.select(practice_retired_t.c.block)).scalars()}
        return PracticeSnapshot(
            now=time.time(),
            blocks=blocks,
            block_raters={b: int(i["raters"]) for b, i in info.items()},
            block_kind={b: i["kind"] for b, i in info.items()},
            assignments=assignments,
            activity=activity,
            excluded=excluded,
            flagged_by=dict(flagged),
            retired=retired,
        )

    def assign_practice_block(
        self,
        account: str,
        plan: Callable[[PracticeSnapshot, str], SlotPlan | None],
        next_block: bool = False,
    ) -> dict[str, Any] | None:
        """The account's current assignment, or a new one, in one serialized transaction.

        The current one is the account's latest assignment still held (not released); with
        ``next_block`` (the caller checked it is answered in full), or when there is none, ``plan(snapshot,
        account)`` decides which slot the account takes (a free slot of a block, or a new block with its
        items) and which stale assignments to release first; None: nothing left, None returned.
        """
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK + 2)
            held = [
                a
                for a in conn.execute(
                    sa.select(practice_assignments_t)
                    .where(practice_assignments_t.c.account == account)
                    .order_by(practice_assignments_t.c.assigned_at, practice_assignments_t.c.block)
                ).mappings()
            ]
            if held and held[-1]["released_at"] is None and not next_block:
                return dict(held[-1])
            decision = plan(self._snapshot(conn), account)
            if decision is None:
                return None
            now = time.time()
            for holder, block, reason in decision.release:
                self._release(conn, holder, block, reason, "auto", now)
            if decision.items is not None:
                conn.execute(
                    sa.insert(practice_blocks_t),
                    [
                        {"block": decision.block, "position": i, "item_id": item}
                        for i, item in enumerate(decision.items)
                    ],
                )
                conn.execute(
                    sa.insert(practice_block_info_t).values(
                        block=decision.block, raters=decision.raters, kind=decision.kind, created_at=now
                    )
                )
            return self._insert_assignment(conn, account, decision.block, decision.slot, now)

    def _insert_assignment(self, conn: Connection, account: str, block: int, slot: int, now: float) -> dict[str, Any]:
        user_id = conn.execute(sa.select(sa.func.coalesce(sa.func.max(practice_assignments_t.c.user_id), 0))).scalar()
        row = {
            "account": account,
            "block": block,
            "slot": slot,
            "user_id": int(user_id) + 1,
            "assigned_at": now,
            "released_at": None,
            "released_reason": None,
            "released_by": None,
        }
        conn.execute(sa.insert(practice_assignments_t).values(**row))
        return row

    @staticmethod
    def _release(conn: Connection, account: str, block: int, reason: str, by: str, now: float) -> bool:
        t = practice_assignments_t
        result = conn.execute(
            sa.update(t)
            .where(t.c.account == account, t.c.block == block, t.c.released_at.is_(None))
            .values(released_at=now, released_reason=reason, released_by=by)
        )
        return result.rowcount == 1

    def release_practice_slot(
        self, account: str, block: int, reason: str, by: str, finished: Finished | None = None
    ) -> bool:
        """Free the slot the account holds in ``block`` (its responses stay stored); False if it holds none.

        ``finished``: the rule of published blocks; a published block released from is retired (:meth:`_retiring`).
        """
        with self._write() as conn:
            return self._retiring(
                conn,
                finished,
                f"{account} released: {reason}",
                by,
                lambda: self._release(conn, account, block, reason, by, time.time()),
            )

    def reassign_practice_slot(
        self, block: int, slot: int, account: str, reason: str, by: str, finished: Finished | None = None
    ) -> dict[str, Any]:
        """Give slot ``slot`` of ``block`` to ``account``, releasing whoever held it, in one transaction.

        Raises ValueError when the account already had this block (an item is never answered twice) or, with
        ``finished`` (the rule of published blocks), when the block is published or retired: its items are public.
        """
        t = practice_assignments_t
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK + 2)
            if finished is not None:
                self._lock(conn, _SUBMIT_LOCK + 3)
                snap = self._snapshot(conn)
                if block in snap.retired or block in finished(snap):
                    raise ValueError(
                        f"block {block} was published (its items, responses and outputs are public): its slots are "
                        f"never given again; {account!r} gets a new block by starting"
                    )
            had = conn.execute(sa.select(t.c.account).where(t.c.account == account, t.c.block == block)).first()
            if had is not None:
                raise ValueError(f"{account!r} already had block {block}: choose another practitioner")
            now = time.time()
            holders = conn.execute(
                sa.select(t.c.account).where(t.c.block == block, t.c.slot == slot, t.c.released_at.is_(None))
            ).scalars()
            for holder in list(holders):
                self._release(conn, holder, block, reason, by, now)
            return self._insert_assignment(conn, account, block, slot, now)

    def _retiring(
        self, conn: Connection, finished: Finished | None, reason: str, by: str, change: Callable[[], T]
    ) -> T:
        """``change()`` in this transaction; with ``finished`` (the blocks all of whose raters finished them, the
        rule of tcmqa.leaderboard.practice, so the published ones), every block finished before the change and
        not after it is retired: its items, responses and outputs are public, so its freed slot is never handed
        out again (the next practitioner gets a new block). Serialized with assignments and responses."""
        if finished is None:
            return change()
        self._lock(conn, _SUBMIT_LOCK + 2)
        self._lock(conn, _SUBMIT_LOCK + 3)
        before = finished(self._snapshot(conn))
        result = change()
        after = self._snapshot(conn)
        for block in sorted(before - finished(after) - after.retired):
            conn.execute(
                sa.insert(practice_retired_t).values(block=block, retired_at=time.time(), reason=reason, retired_by=by)
            )
            log.info("practice block %d reopened after publication (%s): retired", block, reason)
        return result

    def record_practice_response(self, row: dict[str, Any], daily_cap: int | None = None) -> tuple[bool, dict]:
        """Store one response; ``(False, the stored one)`` when this account already answered this item.

        ``row`` holds the columns of ``practice_responses`` (lists as JSON text). The daily cap counts
        the account's responses since 00:00 UTC; reaching it raises :class:`DailyCapReached`.
        """
        key = (practice_responses_t.c.account == row["account"], practice_responses_t.c.item_id == row["item_id"])
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK + 3)
            existing = conn.execute(sa.select(practice_responses_t).where(*key)).mappings().first()
            if existing is not None:
                return False, dict(existing)
            now = time.time()
            if daily_cap is not None:
                midnight = now - now % 86400
                count = conn.execute(
                    sa.select(sa.func.count())
                    .select_from(practice_responses_t)
                    .where(
                        practice_responses_t.c.account == row["account"], practice_responses_t.c.recorded_at >= midnight
                    )
                ).scalar_one()
                if count >= daily_cap:
                    raise DailyCapReached(count, daily_cap)
            values = {**row, "recorded_at": now}
            try:
                with conn.begin_nested():
                    conn.execute(sa.insert(practice_responses_t).values(**values))
            except IntegrityError:  # a concurrent writer that bypassed the lock stored it first
                existing = conn.execute(sa.select(practice_responses_t).where(*key)).mappings().first()
                return False, dict(existing) if existing else values
            return True, values

    def practice_responses(self, account: str | None = None, block: int | None = None) -> list[dict[str, Any]]:
        """Stored responses (lists still JSON text), by block, account and position."""
        query = sa.select(practice_responses_t).order_by(
            practice_responses_t.c.block, practice_responses_t.c.account, practice_responses_t.c.position
        )
        if account is not None:
            query = query.where(practice_responses_t.c.account == account)
        if block is not None:
            query = query.where(practice_responses_t.c.block == block)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def practice_responses_exist(self) -> bool:
        with self._read() as conn:
            return conn.execute(sa.select(practice_responses_t.c.account).limit(1)).first() is not None

    def practice_version(self) -> str:
        """Changes whenever a response is recorded, a practitioner excluded or re-included, or a slot
        assigned or released, so readers can cache."""
        a = practice_assignments_t
        with self._read() as conn:
            count, last = conn.execute(
                sa.select(sa.func.count(), sa.func.max(practice_responses_t.c.recorded_at))
            ).one()
            decisions = conn.execute(sa.select(sa.func.max(practice_exclusions_t.c.id))).scalar()
            slots = conn.execute(sa.select(sa.func.count(), sa.func.count(a.c.released_at)).select_from(a)).one()
        return f"{count}:{last}:{decisions}:{slots[0]}:{slots[1]}"
