"""What a job is: its statuses, its record (:class:`Job`) and its row in the ``jobs`` table.

Every part of the store that reads jobs (the queue, the results import, the outbox and its mirrors)
turns rows into :class:`Job` records through :class:`JobRows`, so a job's columns are read one way.
Pages that poll the queue read :class:`JobStatus` instead: the columns they show, never the log tail or
the meta (a 4 KB log tail per job, read by every open page every few seconds, is most of what a full read
moves); the log tail is read only when a visitor asks for it.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tcmqa.store.core import StoreCore
from tcmqa.store.tables import jobs_t

PENDING, RUNNING, FINISHED, FAILED = "PENDING", "RUNNING", "FINISHED", "FAILED"
LIVE = (PENDING, RUNNING, FINISHED)  # a (model, revision, protocol) in one of these is not resubmittable
EVAL, BACKFILL = "eval", "backfill"  # a submission; the hidden pool only, for a finished evaluation's row
QUICK = "quick"  # a submission of the anchor items only: an estimate of Full (tcmqa.quick_anchors)
CLAIM_ORDER = {EVAL: 0, QUICK: 0, BACKFILL: 1}  # a back-fill is claimed only when no submission waits


@dataclasses.dataclass
class Job:
    """One submission and its life in the queue; ``claim`` identifies the attempt that owns it.

    ``updated_at`` moves with every write (heartbeats included); ``status_at`` only when the status changes.
    ``retries`` counts transient failures (the Hub down, ...), which cost no attempt; a PENDING job is not
    claimed before ``not_before``. ``kind`` is ``EVAL`` (a submission), ``QUICK`` (a submission evaluated on the
    anchor items only; its estimate of Full goes into its meta, ``estimate``, never into the results) or
    ``BACKFILL`` (its meta names the finished job, ``of``, whose row gets the current pool's fresh columns).
    """

    id: str
    model: str
    revision: str
    protocol: str
    user: str
    status: str = PENDING
    submitted_at: float = 0.0
    updated_at: float = 0.0
    attempts: int = 0
    claim: str = ""
    heartbeat_at: float = 0.0
    progress: str = ""
    reason: str = ""
    log_tail: str = ""
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    status_at: float = 0.0
    not_before: float = 0.0
    retries: int = 0
    kind: str = EVAL

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Job:
        return cls(**json.loads(text))


def new_job(
    model: str, revision: str, protocol: str, user: str, meta: dict[str, Any] | None = None, now: float | None = None
) -> Job:
    """A PENDING job submitted at ``now`` (the store passes its database's time)."""
    now = time.time() if now is None else now
    job_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + "-" + uuid.uuid4().hex[:8]
    return Job(job_id, model, revision, protocol, user, PENDING, now, now, meta=dict(meta or {}), status_at=now)


@dataclasses.dataclass(frozen=True)
class JobStatus:
    """What a page polls of a job: its status, progress and times; whether it has a log, not the log."""

    id: str
    model: str
    revision: str
    user: str
    status: str
    progress: str
    reason: str
    attempts: int
    submitted_at: float
    updated_at: float
    has_log: bool


_JOB_COLUMNS = [f.name for f in dataclasses.fields(Job)]
_STATUS_COLUMNS = [jobs_t.c[f.name] for f in dataclasses.fields(JobStatus) if f.name != "has_log"]
_HAS_LOG = (sa.func.coalesce(sa.func.length(jobs_t.c.log_tail), 0) > 0).label("has_log")


class JobRows(StoreCore):
    """Rows of the ``jobs`` table <-> :class:`Job` records, and the live job of a key."""

    @staticmethod
    def _job(row: Any) -> Job:
        values = {name: row[name] for name in _JOB_COLUMNS}
        values["meta"] = json.loads(values["meta"] or "{}")
        for name in ("claim", "progress", "reason", "log_tail"):
            values[name] = values[name] or ""
        for name in ("submitted_at", "updated_at", "heartbeat_at", "status_at", "not_before"):
            values[name] = values[name] or 0.0
        for name in ("attempts", "retries"):
            values[name] = values[name] or 0
        return Job(**values)

    @staticmethod
    def _values(job: Job) -> dict[str, Any]:
        return {name: json.dumps(job.meta) if name == "meta" else getattr(job, name) for name in _JOB_COLUMNS}

    def job_statuses(self, job_id: str | None = None) -> list[JobStatus]:
        """Every job's status (or only ``job_id``'s), newest first: the columns a queue page shows, no log tail."""
        query = sa.select(*_STATUS_COLUMNS, _HAS_LOG).order_by(jobs_t.c.submitted_at.desc(), jobs_t.c.id.desc())
        if job_id is not None:
            query = query.where(jobs_t.c.id == job_id)
        with self._read() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            JobStatus(
                **{k: row[k] or "" for k in ("id", "model", "revision", "user", "status", "progress", "reason")},
                attempts=row["attempts"] or 0,
                submitted_at=row["submitted_at"] or 0.0,
                updated_at=row["updated_at"] or 0.0,
                has_log=bool(row["has_log"]),
            )
            for row in rows
        ]

    def _live(self, conn: Connection, model: str, revision: str, protocol: str, kind: str = EVAL) -> Job | None:
        """The job of ``kind`` (a submission by default) of this key that is pending, running or finished."""
        row = (
            conn.execute(
                sa.select(jobs_t).where(
                    jobs_t.c.model == model,
                    jobs_t.c.revision == revision,
                    jobs_t.c.protocol == protocol,
                    jobs_t.c.status != FAILED,
                    jobs_t.c.kind == kind,
                )
            )
            .mappings()
            .first()
        )
        return self._job(row) if row else None
