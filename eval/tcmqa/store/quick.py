"""Quick jobs' estimates and the anchor sets they use, kept apart from the results.

A quick job (kind ``QUICK``) evaluates only the anchor items; what it finishes with is an estimate of Full,
kept in its own meta (``estimate``), never a results row: so nothing that reads the results or the outcomes
(the ranking, Compare, the plots, the separation marks, the Hub) ever meets an estimate. The board reads the
estimates here (:meth:`QuickStore.quick_estimates`) and shows them apart (``tcmqa.leaderboard.board``).

An anchor set is stored once under its version (a hash of its items and weights) in the key-value
``state`` table, with the key of the board state it was chosen from, so every estimate names the anchors
it used and a later job on an unchanged board reuses them (``tcmqa.quick_anchors``).
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from tcmqa.store.jobs import FAILED, FINISHED, QUICK, Job, JobRows
from tcmqa.store.queue import QueueStore
from tcmqa.store.tables import jobs_t, state_t

_ANCHORS = "quick-anchors:"  # state key prefix: + version -> the anchor set; + "board:" + board key -> version


class QuickStore(JobRows):
    """Quick estimates (finished quick jobs) and anchor sets (see the module docstring)."""

    def find_quick(self, model: str, revision: str, protocol: str) -> Job | None:
        """The quick job of this key that is pending, running or finished, if any."""
        with self._read() as conn:
            return self._live(conn, model, revision, protocol, QUICK)

    def finish_quick(self, job: Job, estimate: dict[str, Any]) -> bool:
        """Mark the quick job FINISHED with its ``estimate`` in its meta, in one transaction; False (nothing
        recorded) if the claim was lost."""
        meta = json.dumps({**job.meta, "estimate": estimate}, ensure_ascii=False)
        with self._write() as conn:
            now = self._now(conn)
            return QueueStore._owned_update(
                conn, job, status=FINISHED, updated_at=now, status_at=now, progress="done", meta=meta
            )

    def quick_estimates(self) -> list[Job]:
        """Every finished quick job, newest first (its ``meta["estimate"]``)."""
        query = sa.select(jobs_t).where(jobs_t.c.kind == QUICK, jobs_t.c.status == FINISHED)
        with self._read() as conn:
            rows = conn.execute(query.order_by(jobs_t.c.status_at.desc(), jobs_t.c.id.desc())).mappings()
            return [self._job(r) for r in rows]

    def quick_version(self) -> str:
        """Changes when a quick job finishes or leaves FINISHED (a board's cache key)."""
        query = sa.select(sa.func.count(), sa.func.max(jobs_t.c.status_at)).where(
            jobs_t.c.kind == QUICK, jobs_t.c.status.in_([FINISHED, FAILED])
        )
        with self._read() as conn:
            count, last = conn.execute(query).one()
        return f"{count}:{last}"

    def anchor_set(self, version: str) -> dict[str, Any] | None:
        """The stored anchor set of ``version`` (its JSON as saved), None when there is none."""
        return self._state_json(_ANCHORS + version)

    def board_anchor_set(self, board_key: str) -> dict[str, Any] | None:
        """The anchor set chosen for the board state ``board_key``, None when none was."""
        version = self._state(_ANCHORS + "board:" + board_key)
        return None if version is None else self.anchor_set(version)

    def save_anchor_set(self, board_key: str, anchors: dict[str, Any]) -> None:
        """Store ``anchors`` (with its ``version``) as the set of the board state ``board_key``."""
        with self._write() as conn:
            for key, value in (
                (_ANCHORS + anchors["version"], json.dumps(anchors)),
                (_ANCHORS + "board:" + board_key, anchors["version"]),
            ):
                conn.execute(self._upsert(state_t, {"key": key, "value": value}, ["key"]))

    def _state(self, key: str) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(state_t.c.value).where(state_t.c.key == key)).scalar()

    def _state_json(self, key: str) -> dict[str, Any] | None:
        text = self._state(key)
        return None if text is None else json.loads(text)
