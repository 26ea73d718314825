"""The publication outbox and the mirrors' state: what the publisher copies to the Hub, and when.

``finish`` (:mod:`tcmqa.store.queue`) queues a publication in the same transaction as the results; the
publisher (:mod:`tcmqa.hub`) takes the unpublished ones in batches, marks them published or failed (with a
retry time), mirrors status changes of the queue, and keeps its bookmarks in a key-value state.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tcmqa.store.jobs import Job, JobRows
from tcmqa.store.tables import jobs_t, outputs_t, probes_t, publications_t, results_t, state_t


@dataclasses.dataclass
class Publication:
    """A finished evaluation waiting for the Hub: its job, results row, outputs and probes Parquet parts."""

    job: Job
    row: dict[str, Any]
    outputs: list[bytes]
    probes: list[bytes] = dataclasses.field(default_factory=list)
    attempts: int = 0  # failed publication attempts so far
    last_error: str = ""

    @property
    def nbytes(self) -> int:
        """The Parquet bytes it adds to a commit (what bounds a publication batch)."""
        return sum(len(data) for data in (*self.outputs, *self.probes))


class OutboxStore(JobRows):
    """The publication outbox, the queue's status changes for the mirrors, and the key-value state."""

    def unpublished(self, limit: int = 50) -> list[Publication]:
        """Finished evaluations not yet on the Hub whose next try has come, oldest first."""
        with self._read() as conn:
            now = self._now(conn)  # the outbox's times are the database's, like the queue's
            query = (
                sa.select(
                    jobs_t,
                    results_t.c.row.label("_row"),
                    publications_t.c.attempts.label("_pub_attempts"),
                    publications_t.c.last_error.label("_pub_error"),
                )
                .join(publications_t, publications_t.c.job_id == jobs_t.c.id)
                .join(results_t, results_t.c.job_id == jobs_t.c.id)
                .where(publications_t.c.published_at.is_(None), publications_t.c.next_try_at <= now)
                .order_by(publications_t.c.created_at, publications_t.c.job_id)
                .limit(limit)
            )
            found = conn.execute(query).mappings().all()
            ids = [r["id"] for r in found]
            outputs, probes = (self._parts_of(conn, table, ids) for table in (outputs_t, probes_t))
        return [
            Publication(
                self._job(r),
                json.loads(r["_row"]),
                outputs[r["id"]],
                probes[r["id"]],
                attempts=r["_pub_attempts"],
                last_error=r["_pub_error"] or "",
            )
            for r in found
        ]

    @staticmethod
    def _parts_of(conn: Connection, table: sa.Table, ids: list[str]) -> dict[str, list[bytes]]:
        """Each job's parts in ``table``, in part order (an empty list for a job with none)."""
        parts: dict[str, list[bytes]] = {job_id: [] for job_id in ids}
        for chunk in _chunks(ids):
            query = sa.select(table.c.job_id, table.c.data).where(table.c.job_id.in_(chunk))
            for job_id, data in conn.execute(query.order_by(table.c.job_id, table.c.part)):
                parts[job_id].append(bytes(data))
        return parts

    def mark_published(self, job_ids: list[str], commit: str) -> None:
        """These jobs are on the Hub at ``commit``."""
        with self._write() as conn:
            now = self._now(conn)
            for chunk in _chunks(job_ids):
                conn.execute(
                    sa.update(publications_t)
                    .where(publications_t.c.job_id.in_(chunk))
                    .values(published_at=now, hub_commit=commit, last_error="")
                )

    def republish(self, job_ids: list[str]) -> None:
        """Publish these published jobs again, now (the publisher withheld rows of theirs that may now go);
        a job no longer in the outbox (withdrawn) is left alone."""
        with self._write() as conn:
            now = self._now(conn)
            for chunk in _chunks(job_ids):
                conn.execute(
                    sa.update(publications_t)
                    .where(publications_t.c.job_id.in_(chunk), publications_t.c.published_at.is_not(None))
                    .values(published_at=None, next_try_at=now, attempts=0, last_error="")
                )

    def publication_failed(self, job_ids: list[str], error: str, retry_after_s: float) -> None:
        """Publishing these failed: count the attempt, keep the error, retry no sooner than ``retry_after_s``."""
        with self._write() as conn:
            now = self._now(conn)
            for chunk in _chunks(job_ids):
                conn.execute(
                    sa.update(publications_t)
                    .where(publications_t.c.job_id.in_(chunk), publications_t.c.published_at.is_(None))
                    .values(attempts=publications_t.c.attempts + 1, last_error=error, next_try_at=now + retry_after_s)
                )

    # -- mirrors ----------------------------------------------------------------------------------
    def jobs_changed_since(self, t: float) -> list[Job]:
        """Jobs whose status changed after ``t`` (heartbeats do not count), oldest change first."""
        query = sa.select(jobs_t).where(jobs_t.c.status_at > t).order_by(jobs_t.c.status_at, jobs_t.c.id)
        with self._read() as conn:
            return [self._job(r) for r in conn.execute(query).mappings()]

    def get_state(self, key: str) -> str | None:
        with self._read() as conn:
            return conn.execute(sa.select(state_t.c.value).where(state_t.c.key == key)).scalar()

    def set_state(self, key: str, value: str) -> None:
        with self._write() as conn:
            conn.execute(self._upsert(state_t, {"key": key, "value": value}, ["key"]))


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
