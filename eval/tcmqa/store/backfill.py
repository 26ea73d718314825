"""Back-fill jobs: the hidden pool evaluated again for a finished evaluation, so every row is on one pool version.

A back-fill is a job of kind ``BACKFILL`` for the same (model, revision, protocol) as the finished evaluation
it serves (its meta's ``of``); at most one waits per key (index ``one_live_backfill``), and it evaluates the
pool as it stands when claimed, so a pool that grows again meanwhile costs no second job. Finishing it
sets the fresh columns of the evaluation's row in place and queues that row's publication again: the
board has one row per model, and it says its pool version.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tcmqa.store.jobs import BACKFILL, EVAL, FINISHED, Job, JobRows, new_job
from tcmqa.store.queue import QueueStore, record_pool_outputs
from tcmqa.store.results import _jsonable
from tcmqa.store.tables import jobs_t, publications_t, results_t


class BackfillStore(JobRows):
    """Finished evaluations with their rows, back-fills queued and recorded (see the module docstring)."""

    def finished_evaluations(self) -> list[tuple[Job, dict[str, Any]]]:
        """Every FINISHED submission evaluated here (not imported: its outputs are in the store) with its row."""
        query = (
            sa.select(jobs_t, results_t.c.row)
            .join(results_t, results_t.c.job_id == jobs_t.c.id)
            .where(jobs_t.c.status == FINISHED, jobs_t.c.kind == EVAL)
            .order_by(jobs_t.c.submitted_at, jobs_t.c.id)
        )
        with self._read() as conn:
            found = [(self._job(r), json.loads(r["row"])) for r in conn.execute(query).mappings()]
        return [(job, row) for job, row in found if not job.meta.get("imported")]

    def queue_backfill(self, of: Job, meta: Mapping[str, Any]) -> Job | None:
        """Queue a back-fill for the finished evaluation ``of`` (``meta`` added to its own); None when one waits."""
        with self._write() as conn:
            job = new_job(of.model, of.revision, of.protocol, of.user, {**of.meta, **meta, "of": of.id})
            job = dataclasses.replace(job, kind=BACKFILL, submitted_at=self._now(conn))
            try:
                with conn.begin_nested():
                    conn.execute(sa.insert(jobs_t).values(**self._values(job)))
            except IntegrityError:  # a back-fill of this key already waits: it will read the pool as it stands
                return None
        return job

    def finish_backfill(self, job: Job, fresh: Mapping[str, Any], pool: Collection[Path] = ()) -> bool:
        """Mark the back-fill FINISHED, set ``fresh`` (the fresh columns) in its evaluation's row, make ``pool`` (the
        grown pool's output parts) that evaluation's hidden pool outputs, and queue that row's publication again,
        in one transaction; False (nothing recorded) if the claim was lost."""
        of = job.meta["of"]
        with self._write() as conn:
            now = self._now(conn)
            if not QueueStore._owned_update(conn, job, status=FINISHED, updated_at=now, status_at=now, progress="done"):
                return False
            text = conn.execute(sa.select(results_t.c.row).where(results_t.c.job_id == of)).scalar_one()
            row = {**json.loads(text), **fresh}
            conn.execute(
                sa.update(results_t)
                .where(results_t.c.job_id == of)
                .values(row=json.dumps(row, ensure_ascii=False, default=_jsonable), recorded_at=now)
            )
            record_pool_outputs(conn, of, pool)
            conn.execute(
                sa.update(publications_t)
                .where(publications_t.c.job_id == of)
                .values(published_at=None, hub_commit=None, next_try_at=now, attempts=0, last_error=None)
            )
        return True
