"""The admins' actions on the queue: cancel a live job, re-queue a failed one, withdraw a finished one.

Each is one transaction that checks the job's status where it changes it, so two admins (or an admin
and a worker) never act on a job at once; each records the admin and the reason in the job's ``reason``,
which the submitter reads. A cancelled RUNNING job loses its claim: its worker's next heartbeat returns
False and its result is never recorded. Withdrawing removes the results row and the outputs and probes
parts from the store (the board drops the row) and any publication not yet made; the Hub's copy is
removed by :meth:`tcmqa.hub.publisher.Publisher.withdraw`, which calls this after its commit.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tcmqa.store.jobs import FAILED, FINISHED, PENDING, RUNNING, Job, JobRows
from tcmqa.store.tables import jobs_t, outcomes_t, outputs_t, pool_outputs_t, probes_t, publications_t, results_t


class NotAllowed(Exception):
    """The job is not in a status the action applies to (or no longer is)."""


class AdminStore(JobRows):
    def _move(
        self, conn: Connection, job_id: str, allowed: tuple[str, ...], status: str, reason: str, **values: Any
    ) -> Job:
        """Move the job from one of ``allowed`` to ``status`` with ``reason``; the job as it now is."""
        now = self._now(conn)  # the database's clock, like every queue time
        row = conn.execute(sa.select(jobs_t).where(jobs_t.c.id == job_id)).mappings().first()
        if row is None or row["status"] not in allowed:
            raise NotAllowed(f"job {job_id} is {row['status'] if row else 'unknown'}, not {' or '.join(allowed)}")
        job = self._job(row)
        if status == PENDING and self._live(conn, job.model, job.revision, job.protocol):
            raise NotAllowed(f"{job.model} at {job.revision[:12]} is already queued or evaluated")
        conn.execute(
            sa.update(jobs_t)
            .where(jobs_t.c.id == job_id, jobs_t.c.status == row["status"])
            .values(status=status, reason=reason, claim="", updated_at=now, status_at=now, **values)
        )
        return self._job(conn.execute(sa.select(jobs_t).where(jobs_t.c.id == job_id)).mappings().one())

    def cancel(self, job_id: str, admin: str, reason: str) -> Job:
        """A PENDING or RUNNING job FAILED, "cancelled by <admin>: <reason>"."""
        with self._write() as conn:
            return self._move(conn, job_id, (PENDING, RUNNING), FAILED, f"cancelled by {admin}: {reason}")

    def requeue(self, job_id: str, admin: str) -> Job:
        """A FAILED job PENDING again, its attempts reset (unless its model and revision were queued since)."""
        with self._write() as conn:
            return self._move(conn, job_id, (FAILED,), PENDING, f"re-queued by {admin}", attempts=0, progress="")

    def withdraw(self, job_id: str, admin: str, reason: str) -> Job:
        """A FINISHED job's row, outputs (the hidden pool's too), probes and pending publication removed; the job
        FAILED, "withdrawn by <admin>: <reason>" (so the model may be submitted again)."""
        with self._write() as conn:
            job = self._move(conn, job_id, (FINISHED,), FAILED, f"withdrawn by {admin}: {reason}")
            for table in (results_t, outputs_t, pool_outputs_t, probes_t, publications_t):
                conn.execute(sa.delete(table).where(table.c.job_id == job_id))
            conn.execute(sa.delete(outcomes_t).where(outcomes_t.c.run == job_id))
            return job
