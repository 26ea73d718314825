"""The evaluation queue: submissions (duplicates, rate limits), claims, heartbeats, finish, fail, requeue.

Every state change is one transaction; a claim carries a token, and heartbeat/finish/fail only succeed
while the job is still RUNNING under that token, so two workers never both run a job and a job re-run
after a crash is recorded exactly once. ``finish`` records the results row, the outputs and probes parts
and an unpublished publication with the status, so a finished evaluation is never lost on its way to
the Hub.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from tcmqa.store.core import _SUBMIT_LOCK
from tcmqa.store.jobs import CLAIM_ORDER, EVAL, FAILED, FINISHED, PENDING, QUICK, RUNNING, Job, JobRows, new_job
from tcmqa.store.results import _jsonable
from tcmqa.store.tables import jobs_t, outcomes_t, outputs_t, pool_outputs_t, probes_t, publications_t, results_t


class DuplicateError(Exception):
    """The same (model, revision, protocol) is already pending, running or finished (``job``: that one; for a
    quick submission, a full evaluation of the key counts too: it makes the estimate pointless)."""

    def __init__(self, job: Job):
        super().__init__(f"{job.model}@{job.revision[:12]} ({job.protocol}) is already {job.status}: job {job.id}")
        self.job = job


class RateLimited(Exception):
    """The user already has ``limit`` submissions within the last ``window_s`` seconds."""

    def __init__(self, count: int, limit: int, window_s: float):
        super().__init__(f"{count} submissions in the last {window_s / 3600:g} h; the limit is {limit}")
        self.count, self.limit, self.window_s = count, limit, window_s


def _stale_verdict(job: Job, max_attempts: int, now: float) -> Job:
    """The requeued or failed version of a job whose worker went silent."""
    if job.attempts >= max_attempts:
        reason = f"the worker stopped responding on {job.attempts} attempt(s); giving up after {max_attempts}"
        return dataclasses.replace(job, status=FAILED, claim="", reason=reason, updated_at=now, status_at=now)
    progress = "re-queued: worker stopped responding"
    return dataclasses.replace(job, status=PENDING, claim="", progress=progress, updated_at=now, status_at=now)


class QueueStore(JobRows):
    """The queue's transactions (see the module docstring)."""

    def _select_jobs(self, *where: Any) -> list[Job]:
        query = sa.select(jobs_t).where(*where).order_by(jobs_t.c.submitted_at.desc(), jobs_t.c.id.desc())
        with self._read() as conn:
            return [self._job(r) for r in conn.execute(query).mappings()]

    def submit(
        self,
        model: str,
        revision: str,
        protocol: str,
        user: str,
        meta: dict[str, Any] | None = None,
        *,
        rate_limit: int | None = None,
        rate_window_s: float = 86400,
        kind: str = EVAL,
    ) -> Job:
        """Enqueue a PENDING job of ``kind`` (``EVAL`` or ``QUICK``), or raise DuplicateError pointing at the live
        one (for ``QUICK``: a live full evaluation, else a live quick one), or RateLimited.

        The rate-limit count, the duplicate check and the insert are one serialized transaction.
        """
        if kind not in (EVAL, QUICK):
            raise ValueError(f"a submission is of kind {EVAL!r} or {QUICK!r}, not {kind!r}")
        try:
            with self._write() as conn:
                self._lock(conn, _SUBMIT_LOCK)
                job = dataclasses.replace(
                    new_job(model, revision, protocol, user, meta, now=self._now(conn)), kind=kind
                )
                if rate_limit is not None:
                    count = _count_since(conn, user, job.submitted_at - rate_window_s)
                    if count >= rate_limit:
                        raise RateLimited(count, rate_limit, rate_window_s)
                live = self._live(conn, model, revision, protocol)
                if kind == QUICK:
                    live = live or self._live(conn, model, revision, protocol, QUICK)
                if live:
                    raise DuplicateError(live)
                conn.execute(sa.insert(jobs_t).values(**self._values(job)))
        except IntegrityError:  # a writer that bypassed the lock won the race; the unique index refused us
            live = self.find(model, revision, protocol)
            if live is None:
                raise
            raise DuplicateError(live) from None
        return job

    def jobs(self) -> list[Job]:
        """Every job, newest first."""
        return self._select_jobs()

    def get(self, job_id: str) -> Job | None:
        with self._read() as conn:
            row = conn.execute(sa.select(jobs_t).where(jobs_t.c.id == job_id)).mappings().first()
        return self._job(row) if row else None

    def full_job_id(self, short: str) -> str:
        """The id of the one job whose random part is ``short`` (the Queue shows ids so); ``short`` itself when
        no job or several match, so the caller's "no job" message names what was typed."""
        query = sa.select(jobs_t.c.id).where(jobs_t.c.id.endswith("-" + short, autoescape=True)).limit(2)
        with self._read() as conn:
            ids = conn.execute(query).scalars().all()
        return ids[0] if len(ids) == 1 else short

    def find(self, model: str, revision: str, protocol: str) -> Job | None:
        """The live (pending, running or finished) job for this key, if any."""
        with self._read() as conn:
            return self._live(conn, model, revision, protocol)

    def submitted_since(self, user: str, since: float) -> int:
        with self._read() as conn:
            return _count_since(conn, user, since)

    def submitted_within(self, user: str, window_s: float) -> int:
        """The user's submissions in the last ``window_s`` s by the database's clock (the rate limit's count)."""
        with self._read() as conn:
            return _count_since(conn, user, self._now(conn) - window_s)

    def _any(self, where: Callable[[float], tuple[Any, ...]]) -> bool:
        """Whether a job matches ``where(now)`` by the database's clock; a read, so an idle poll takes no write lock."""
        with self._read() as conn:
            return conn.execute(sa.select(jobs_t.c.id).where(*where(self._now(conn))).limit(1)).first() is not None

    def waiting(self) -> bool:
        """Whether any job is PENDING, claimable now or after its backoff (a ``--once`` worker waits for it)."""
        return self._any(lambda _now: (jobs_t.c.status == PENDING,))

    def claim(self, worker: str) -> Job | None:
        """Atomically move the oldest PENDING job to RUNNING for this worker, or return None; back-fills wait
        below every submission (``CLAIM_ORDER``)."""
        if not self._any(_claimable):
            return None
        with self._write() as conn:
            row = (
                conn.execute(
                    sa.select(jobs_t)
                    .where(*_claimable(self._now(conn)))
                    .order_by(sa.case(CLAIM_ORDER, value=jobs_t.c.kind, else_=0), jobs_t.c.submitted_at, jobs_t.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)  # PostgreSQL; SQLite holds its write lock already
                )
                .mappings()
                .first()
            )
            if row is None:
                return None
            now, job = self._now(conn), self._job(row)
            job = dataclasses.replace(
                job,
                status=RUNNING,
                attempts=job.attempts + 1,
                claim=f"{worker}#{job.attempts + 1}",
                heartbeat_at=now,
                updated_at=now,
                status_at=now,
                progress="claimed",
                reason="",
                log_tail="",
            )
            values = {k: getattr(job, k) for k in ("status", "attempts", "claim", "heartbeat_at", "updated_at")}
            values |= {k: getattr(job, k) for k in ("status_at", "progress", "reason", "log_tail")}
            conn.execute(sa.update(jobs_t).where(jobs_t.c.id == job.id).values(**values))
        return job

    @staticmethod
    def _owned_update(conn: Connection, job: Job, **values: Any) -> bool:
        """Update the job only while this attempt still owns it (RUNNING under its claim token)."""
        result = conn.execute(
            sa.update(jobs_t)
            .where(jobs_t.c.id == job.id, jobs_t.c.claim == job.claim, jobs_t.c.status == RUNNING)
            .values(**values)
        )
        return result.rowcount == 1

    def heartbeat(self, job: Job, progress: str = "") -> bool:
        """Refresh the claim; False if this attempt no longer owns the job (stop working on it)."""
        with self._write() as conn:
            now = self._now(conn)
            return self._owned_update(conn, job, heartbeat_at=now, updated_at=now, progress=progress)

    def finish(
        self,
        job: Job,
        row: dict[str, Any],
        outputs: Collection[Path],
        probes: Collection[Path] = (),
        pool: Collection[Path] = (),
    ) -> bool:
        """Record the results row, outputs and probes parts, mark FINISHED and queue the publication, in one
        transaction. Parts are numbered in file-name order. ``pool``: the output parts of the hidden pool, kept
        privately until their items retire (only the publisher reads them, and commits retired items' rows only).

        False (and nothing recorded) if the claim was lost.
        """
        parts = {outputs_t: _read_parts(outputs), probes_t: _read_parts(probes)}
        text = json.dumps(row, ensure_ascii=False, default=_jsonable)
        with self._write() as conn:
            now = self._now(conn)
            if not self._owned_update(conn, job, status=FINISHED, updated_at=now, status_at=now, progress="done"):
                return False
            for table in (results_t, outputs_t, probes_t, publications_t):
                conn.execute(sa.delete(table).where(table.c.job_id == job.id))
            conn.execute(sa.insert(results_t).values(job_id=job.id, row=text, recorded_at=now))
            for table, data in parts.items():
                _insert_parts(conn, table, job.id, data)
            record_pool_outputs(conn, job.id, pool)
            conn.execute(sa.insert(publications_t).values(job_id=job.id, created_at=now, next_try_at=now, attempts=0))
            # its outcome is aggregated by its first reader (tcmqa.store.outcomes.record_outcomes); a re-recorded
            # job's old one goes
            conn.execute(sa.delete(outcomes_t).where(outcomes_t.c.run == job.id))
        return True

    def fail(self, job: Job, reason: str, log_tail: str = "") -> bool:
        """Mark FAILED with a reason the submitter can read; False if the claim was lost."""
        with self._write() as conn:
            now = self._now(conn)
            return self._owned_update(
                conn, job, status=FAILED, updated_at=now, status_at=now, reason=reason, log_tail=log_tail
            )

    def release(self, job: Job, reason: str, backoff_s: float) -> bool:
        """Put a job that failed for a passing cause back to PENDING: its attempt is not counted, it waits
        ``backoff_s`` seconds (by the database's clock) and ``retries`` counts it; False if the claim was lost."""
        with self._write() as conn:
            now = self._now(conn)
            progress = f"waiting to retry: {reason}"
            return self._owned_update(
                conn,
                job,
                status=PENDING,
                claim="",
                attempts=job.attempts - 1,
                retries=job.retries + 1,
                not_before=now + backoff_s,
                updated_at=now,
                status_at=now,
                progress=progress[:200],
            )

    def requeue_stale(self, stale_after: float, max_attempts: int) -> list[Job]:
        """Re-queue RUNNING jobs whose heartbeat is older than ``stale_after`` s; FAIL those out of attempts."""
        if not self._any(lambda now: _silent(now, stale_after)):
            return []
        changed = []
        with self._write() as conn:
            now = self._now(conn)
            rows = (
                conn.execute(sa.select(jobs_t).where(*_silent(now, stale_after)).with_for_update(skip_locked=True))
                .mappings()
                .all()
            )
            for row in rows:
                old = self._job(row)
                job = _stale_verdict(old, max_attempts, now)
                result = conn.execute(
                    sa.update(jobs_t)
                    .where(jobs_t.c.id == job.id, jobs_t.c.claim == old.claim, jobs_t.c.status == RUNNING)
                    .where(jobs_t.c.heartbeat_at < now - stale_after)
                    .values(
                        status=job.status,
                        claim=job.claim,
                        reason=job.reason,
                        progress=job.progress,
                        updated_at=now,
                        status_at=now,
                    )
                )
                if result.rowcount == 1:
                    changed.append(job)
        return changed


def _claimable(now: float) -> tuple[Any, ...]:
    """PENDING and not waiting out a backoff, ``now`` being the database's time."""
    return jobs_t.c.status == PENDING, sa.or_(jobs_t.c.not_before.is_(None), jobs_t.c.not_before <= now)


def _silent(now: float, stale_after: float) -> tuple[Any, ...]:
    """RUNNING with no heartbeat for ``stale_after`` s, ``now`` being the database's time."""
    return jobs_t.c.status == RUNNING, jobs_t.c.heartbeat_at < now - stale_after


def _count_since(conn: Connection, user: str, since: float) -> int:
    query = sa.select(sa.func.count()).select_from(jobs_t).where(jobs_t.c.user == user)
    return conn.execute(query.where(jobs_t.c.submitted_at >= since)).scalar_one()


def _insert_parts(conn: Connection, table: sa.Table, job_id: str, data: list[bytes]) -> None:
    """Record ``data`` as ``job_id``'s parts in ``table``, numbered from 0."""
    if data:
        conn.execute(sa.insert(table), [{"job_id": job_id, "part": i, "data": d} for i, d in enumerate(data)])


def record_pool_outputs(conn: Connection, job_id: str, pool: Collection[Path]) -> None:
    """Record ``pool`` (the output parts of the pool a run evaluated) as ``job_id``'s hidden pool outputs, keeping
    its earlier rows of items not in them: an item retired before a back-fill is in no later pool, and its rows
    must stay to be published."""
    new = _read_parts(pool)
    if not new:
        return
    evaluated = {i for data in new for i in _table(data).column("item_id").to_pylist()}
    query = sa.select(pool_outputs_t.c.data).where(pool_outputs_t.c.job_id == job_id)
    kept = []
    for (data,) in conn.execute(query.order_by(pool_outputs_t.c.part)):
        table = _table(bytes(data))
        table = table.filter(pc.invert(pc.is_in(table.column("item_id"), value_set=pa.array(sorted(evaluated)))))
        if table.num_rows:
            sink = io.BytesIO()
            pq.write_table(table, sink)
            kept.append(sink.getvalue())
    conn.execute(sa.delete(pool_outputs_t).where(pool_outputs_t.c.job_id == job_id))
    _insert_parts(conn, pool_outputs_t, job_id, kept + new)


def _table(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


def _read_parts(paths: Collection[Path]) -> list[bytes]:
    return [Path(path).read_bytes() for path in sorted(paths)]
