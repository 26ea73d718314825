"""Practitioner mode's transactions: practitioners, practice blocks, their assignments and the responses.

The rules (who may answer, which items a new block draws, what a response may hold) are
:mod:`tcmqa.leaderboard.practice`'s; this module holds what must be atomic: an assignment made once per
free rater slot, one response per (account, item), the daily cap counted in the same transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tcmqa.store.core import _SUBMIT_LOCK, StoreCore
from tcmqa.store.tables import practice_assignments_t, practice_blocks_t, practice_responses_t, practitioners_t


class DailyCapReached(Exception):
    """The practitioner already recorded ``cap`` responses today (UTC)."""

    def __init__(self, count: int, cap: int):
        super().__init__(f"{count} responses today; the daily limit is {cap}. Please continue tomorrow.")
        self.count, self.cap = count, cap


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
        """The account's practitioner record, created (unconfirmed) on first sight."""
        with self._write() as conn:
            found = conn.execute(sa.select(practitioners_t.c.account).where(practitioners_t.c.account == account))
            if found.first() is None:
                conn.execute(sa.insert(practitioners_t).values(account=account, created_at=time.time(), excluded=0))
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

    def exclude_practitioner(self, account: str, reason: str, by: str, excluded: bool = True) -> bool:
        """Exclude (or re-include) a practitioner, recording the reason and who decided; False if unknown."""
        with self._write() as conn:
            result = conn.execute(
                sa.update(practitioners_t)
                .where(practitioners_t.c.account == account)
                .values(excluded=int(excluded), excluded_reason=reason, excluded_at=time.time(), excluded_by=by)
            )
            return result.rowcount == 1

    def practice_assignments(self, account: str | None = None) -> list[dict[str, Any]]:
        """Assignments (account, block, slot, user_id, assigned_at), oldest first."""
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

    def assign_practice_block(
        self,
        account: str,
        raters: int,
        first_block: int,
        make_block: Callable[[dict[str, int], set[str]], list[str]],
        next_block: bool = False,
    ) -> dict[str, Any] | None:
        """The account's current assignment, or a new one, in one serialized transaction.

        The current one is the latest; with ``next_block`` (its block answered in full) a new one is
        made. A new one joins the oldest block with fewer than ``raters`` assignments that shares no
        item with the account's earlier blocks; else ``make_block(blocks_per_item, used_item_ids)``
        gives the items of a new block (``[]``: none left, None returned). The platform user id is
        ``block * raters + slot + 1``, so the platform's rule ``block = (user_id - 1) // raters`` holds.
        """
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK + 2)
            mine = (
                conn.execute(
                    sa.select(practice_assignments_t)
                    .where(practice_assignments_t.c.account == account)
                    .order_by(practice_assignments_t.c.assigned_at, practice_assignments_t.c.block)
                )
                .mappings()
                .all()
            )
            if mine and not next_block:
                return dict(mine[-1])
            used = set(
                conn.execute(
                    sa.select(practice_blocks_t.c.item_id).where(
                        practice_blocks_t.c.block.in_([m["block"] for m in mine])
                    )
                ).scalars()
            )
            taken = dict(
                conn.execute(
                    sa.select(practice_assignments_t.c.block, sa.func.count()).group_by(practice_assignments_t.c.block)
                ).all()
            )
            blocks = sorted(set(conn.execute(sa.select(practice_blocks_t.c.block).distinct()).scalars()) | set(taken))
            chosen = None
            for block in blocks:
                if taken.get(block, 0) >= raters or block in {m["block"] for m in mine}:
                    continue
                items = set(
                    conn.execute(sa.select(practice_blocks_t.c.item_id).where(practice_blocks_t.c.block == block))
                    .scalars()
                    .all()
                )
                if not items & used:
                    chosen = block
                    break
            if chosen is None:
                per_item = dict(
                    conn.execute(
                        sa.select(practice_blocks_t.c.item_id, sa.func.count()).group_by(practice_blocks_t.c.item_id)
                    ).all()
                )
                items = make_block(per_item, used)
                if not items:
                    return None
                chosen = max([first_block - 1, *blocks]) + 1
                conn.execute(
                    sa.insert(practice_blocks_t),
                    [{"block": chosen, "position": i, "item_id": item} for i, item in enumerate(items)],
                )
            slot = taken.get(chosen, 0)
            row = {
                "account": account,
                "block": chosen,
                "slot": slot,
                "user_id": chosen * raters + slot + 1,
                "assigned_at": time.time(),
            }
            conn.execute(sa.insert(practice_assignments_t).values(**row))
            return row

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
        """Changes whenever a practice response is recorded or a practitioner is excluded, so readers can cache."""
        with self._read() as conn:
            count, last = conn.execute(
                sa.select(sa.func.count(), sa.func.max(practice_responses_t.c.recorded_at))
            ).one()
            excluded = conn.execute(
                sa.select(sa.func.count(), sa.func.max(practitioners_t.c.excluded_at)).where(
                    practitioners_t.c.excluded == 1
                )
            ).one()
        return f"{count}:{last}:{excluded[0]}:{excluded[1]}"
