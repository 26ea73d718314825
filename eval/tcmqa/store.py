"""The evaluation queue, its results and the publication outbox: one store on SQLite or PostgreSQL.

The web process enqueues and reads; workers (other processes, maybe other machines) claim, heartbeat
and record; a publisher copies finished evaluations to the Hub. Every state change is one database
transaction, so two workers never both run a job and a job re-run after a crash is recorded exactly
once: a claim carries a token, and heartbeat/finish/fail only succeed while the job is still RUNNING
under that token. ``finish`` stores the results row, the outputs and probes Parquet bytes and an
unpublished publication in the same transaction, so workers on other machines need no shared disk and a
finished evaluation is never lost between the queue and the Hub.

    open_store(".cache/space")                     SQLite: <dir>/queue.sqlite (WAL); parts cached in <dir>/outputs
    open_store("sqlite:////abs/dir/queue.sqlite")  the same, naming the file (SQLAlchemy URL: 4 slashes = absolute)
    open_store("postgresql://user@host:5432/db")   PostgreSQL (psycopg 3); parts cached in $TCMQA_CACHE/store-outputs

One implementation serves both dialects (SQLAlchemy Core); they differ in three small places: how a
writing transaction begins (SQLite ``BEGIN IMMEDIATE``; PostgreSQL row locks with ``FOR UPDATE SKIP
LOCKED`` and an advisory lock around submissions), the partial-index syntax, and the upsert. The schema
is versioned (table ``schema_version``) and migrated in order when a store is opened.
"""

from __future__ import annotations

import calendar
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

PENDING, RUNNING, FINISHED, FAILED = "PENDING", "RUNNING", "FINISHED", "FAILED"
LIVE = (PENDING, RUNNING, FINISHED)  # a (model, revision, protocol) in one of these is not resubmittable
IMPORTED_USER = "hub"  # the submitter recorded for results imported from the Hub


class DuplicateError(Exception):
    """The same (model, revision, protocol) is already pending, running or finished."""

    def __init__(self, job: Job):
        super().__init__(f"{job.model}@{job.revision[:12]} ({job.protocol}) is already {job.status}: job {job.id}")
        self.job = job


class RateLimited(Exception):
    """The user already has ``limit`` submissions within the last ``window_s`` seconds."""

    def __init__(self, count: int, limit: int, window_s: float):
        super().__init__(f"{count} submissions in the last {window_s / 3600:g} h; the limit is {limit}")
        self.count, self.limit, self.window_s = count, limit, window_s


class DailyCapReached(Exception):
    """The practitioner already recorded ``cap`` responses today (UTC)."""

    def __init__(self, count: int, cap: int):
        super().__init__(f"{count} responses today; the daily limit is {cap}. Please continue tomorrow.")
        self.count, self.cap = count, cap


@dataclasses.dataclass
class Job:
    """One submission and its life in the queue; ``claim`` identifies the attempt that owns it.

    ``updated_at`` moves with every write (heartbeats included); ``status_at`` only when the status changes.
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

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Job:
        return cls(**json.loads(text))


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


def new_job(model: str, revision: str, protocol: str, user: str, meta: dict[str, Any] | None = None) -> Job:
    now = time.time()
    job_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + "-" + uuid.uuid4().hex[:8]
    return Job(job_id, model, revision, protocol, user, PENDING, now, now, meta=dict(meta or {}), status_at=now)


def _stale_verdict(job: Job, max_attempts: int, now: float) -> Job:
    """The requeued or failed version of a job whose worker went silent."""
    if job.attempts >= max_attempts:
        reason = f"the worker stopped responding on {job.attempts} attempt(s); giving up after {max_attempts}"
        return dataclasses.replace(job, status=FAILED, claim="", reason=reason, updated_at=now, status_at=now)
    progress = "re-queued: worker stopped responding"
    return dataclasses.replace(job, status=PENDING, claim="", progress=progress, updated_at=now, status_at=now)


# ------------------------------------------------------------------------------------------------
# Schema: the latest shape (what queries use) and the ordered migrations that build it
# ------------------------------------------------------------------------------------------------

_meta = sa.MetaData()
_T, _F = sa.Text, sa.Double
jobs_t = sa.Table(
    "jobs",
    _meta,
    sa.Column("id", _T, primary_key=True),
    sa.Column("model", _T, nullable=False),
    sa.Column("revision", _T, nullable=False),
    sa.Column("protocol", _T, nullable=False),
    sa.Column("user", _T, nullable=False),
    sa.Column("status", _T, nullable=False),
    sa.Column("submitted_at", _F),
    sa.Column("updated_at", _F),
    sa.Column("attempts", sa.Integer),
    sa.Column("claim", _T),
    sa.Column("heartbeat_at", _F),
    sa.Column("progress", _T),
    sa.Column("reason", _T),
    sa.Column("log_tail", _T),
    sa.Column("meta", _T),
    sa.Column("status_at", _F, nullable=False, server_default="0"),
)
results_t = sa.Table(
    "results",
    _meta,
    sa.Column("job_id", _T, primary_key=True),
    sa.Column("row", _T, nullable=False),
    sa.Column("recorded_at", _F),
)


def _parts_table(name: str) -> sa.Table:
    """A job's Parquet parts as bytes, numbered from 0 in file-name order."""
    return sa.Table(
        name,
        _meta,
        sa.Column("job_id", _T, primary_key=True),
        sa.Column("part", sa.Integer, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


outputs_t = _parts_table("outputs")  # the ``outputs`` config's rows of each job
probes_t = _parts_table("probes")  # the ``probes`` config's rows of each job (tcmqa.probes)
PROBES_CACHE = "probes"  # probes parts are materialised in <cache_dir>/probes/<job id>/
publications_t = sa.Table(
    "publications",
    _meta,
    sa.Column("job_id", _T, primary_key=True),
    sa.Column("created_at", _F, nullable=False),
    sa.Column("next_try_at", _F, nullable=False),
    sa.Column("published_at", _F),
    sa.Column("hub_commit", _T),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_error", _T),
)
state_t = sa.Table("state", _meta, sa.Column("key", _T, primary_key=True), sa.Column("value", _T, nullable=False))
version_t = sa.Table("schema_version", _meta, sa.Column("version", sa.Integer, nullable=False))
_JOB_COLUMNS = [f.name for f in dataclasses.fields(Job)]


def _partial_index(name: str, table: sa.Table, columns: list[str], where: str, unique: bool = False) -> sa.Index:
    """One partial index in both dialects (they spell the WHERE option differently)."""
    clause = sa.text(where)
    return sa.Index(name, *(table.c[c] for c in columns), unique=unique, sqlite_where=clause, postgresql_where=clause)


def _column_copies(table: sa.Table, leave_out: Collection[str] = ()) -> list[sa.Column]:
    """Fresh columns like ``table``'s, for an older version of it."""
    return [
        sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable, server_default=c.server_default)
        for c in table.columns
        if c.name not in leave_out
    ]


# Every index of the latest schema (a migration creates each when its version introduces it).
_partial_index("one_live_job", jobs_t, ["model", "revision", "protocol"], "status != 'FAILED'", unique=True)
sa.Index("by_status", jobs_t.c.status, jobs_t.c.submitted_at)
sa.Index("by_user", jobs_t.c.user, jobs_t.c.submitted_at)
sa.Index("by_status_at", jobs_t.c.status_at)
_partial_index("unpublished", publications_t, ["next_try_at"], "published_at IS NULL")


def _migration_1(conn: Connection, store: Store) -> None:
    """The original queue: jobs and results (an existing pre-versioning SQLite store is this version)."""
    legacy = sa.MetaData()
    jobs = sa.Table("jobs", legacy, *_column_copies(jobs_t, leave_out={"status_at"}))
    results = sa.Table("results", legacy, *_column_copies(results_t))
    _partial_index("one_live_job", jobs, ["model", "revision", "protocol"], "status != 'FAILED'", unique=True)
    sa.Index("by_status", jobs.c.status, jobs.c.submitted_at)
    legacy.create_all(conn, tables=[jobs, results], checkfirst=True)


def _migration_2(conn: Connection, store: Store) -> None:
    """Status times (mirrors), outputs bytes in the database, the publication outbox, a key-value state.

    An existing SQLite store's outputs files (``<dir>/outputs/<job id>/part-*.parquet``) are loaded into
    the database and its finished jobs become unpublished publications.
    """
    conn.execute(sa.text("ALTER TABLE jobs ADD COLUMN status_at DOUBLE PRECISION NOT NULL DEFAULT 0"))
    conn.execute(sa.text("UPDATE jobs SET status_at = COALESCE(updated_at, 0)"))
    for table in (outputs_t, publications_t, state_t):
        table.create(conn, checkfirst=True)  # with their indexes
    for index in jobs_t.indexes:
        if index.name in ("by_user", "by_status_at"):
            index.create(conn)
    finished = conn.execute(
        sa.select(results_t.c.job_id, results_t.c.recorded_at)
        .join(jobs_t, jobs_t.c.id == results_t.c.job_id)
        .where(jobs_t.c.status == FINISHED)
    ).all()
    for job_id, recorded_at in finished:
        when = recorded_at or time.time()
        conn.execute(sa.insert(publications_t).values(job_id=job_id, created_at=when, next_try_at=when, attempts=0))
        legacy_dir = store.root / "outputs" / job_id if store.root is not None else None
        if legacy_dir is not None and legacy_dir.is_dir():
            for part, path in enumerate(sorted(legacy_dir.glob("part-*.parquet"))):
                conn.execute(sa.insert(outputs_t).values(job_id=job_id, part=part, data=path.read_bytes()))


# Practitioner mode (tcmqa.leaderboard.practice): accounts, blocks of items, assignments, responses.
practitioners_t = sa.Table(
    "practitioners",
    _meta,
    sa.Column("account", _T, primary_key=True),
    sa.Column("created_at", _F, nullable=False),
    sa.Column("confirmed_at", _F),  # when they confirmed holding a TCM licence; NULL: not yet
    sa.Column("licence_number", _T),  # private: never published nor exported
    sa.Column("excluded", sa.Integer, nullable=False, server_default="0"),
    sa.Column("excluded_reason", _T),
    sa.Column("excluded_at", _F),
    sa.Column("excluded_by", _T),
)
practice_blocks_t = sa.Table(
    "practice_blocks",
    _meta,
    sa.Column("block", sa.Integer, primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),  # 0-based position within the block
    sa.Column("item_id", _T, nullable=False),
)
practice_assignments_t = sa.Table(
    "practice_assignments",
    _meta,
    sa.Column("account", _T, primary_key=True),
    sa.Column("block", sa.Integer, primary_key=True),
    sa.Column("slot", sa.Integer, nullable=False),  # 0.. raters-1 within the block, never reused
    sa.Column("user_id", sa.Integer, nullable=False, unique=True),  # the platform user id (export, pseudonym)
    sa.Column("assigned_at", _F, nullable=False),
)
practice_responses_t = sa.Table(
    "practice_responses",
    _meta,
    sa.Column("account", _T, primary_key=True),
    sa.Column("item_id", _T, primary_key=True),  # one response per practitioner and item
    sa.Column("block", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("selected", _T, nullable=False),  # JSON list of letters
    sa.Column("domains", _T, nullable=False),  # JSON list of domain keys
    sa.Column("difficulty", sa.Integer),
    sa.Column("flagged", sa.Integer, nullable=False, server_default="0"),
    sa.Column("comment", _T),
    sa.Column("seconds", _F),
    sa.Column("seconds_paused", _F),
    sa.Column("recorded_at", _F, nullable=False),
)
sa.Index("practice_block_item", practice_blocks_t.c.block, practice_blocks_t.c.item_id, unique=True)
sa.Index("practice_by_block", practice_assignments_t.c.block)
sa.Index("practice_responses_by_time", practice_responses_t.c.account, practice_responses_t.c.recorded_at)
_PRACTICE_TABLES = (practitioners_t, practice_blocks_t, practice_assignments_t, practice_responses_t)


def _migration_3(conn: Connection, store: Store) -> None:
    """Practitioner mode: practitioners, practice blocks, their assignments and the responses."""
    for table in _PRACTICE_TABLES:
        table.create(conn, checkfirst=True)  # with their indexes


def _migration_4(conn: Connection, store: Store) -> None:
    """Probes parts beside the outputs parts (jobs finished before have none: they were not probed)."""
    probes_t.create(conn, checkfirst=True)


MIGRATIONS: list[Callable[[Connection, Store], None]] = [
    _migration_1,
    _migration_2,
    _migration_3,
    _migration_4,
]  # version i+1 = MIGRATIONS[i]
_SUBMIT_LOCK = 0x74636D71  # PostgreSQL advisory lock keys ("tcmq")
_MIGRATE_LOCK = _SUBMIT_LOCK + 1


# ------------------------------------------------------------------------------------------------
# The store
# ------------------------------------------------------------------------------------------------


def store_url(spec: str | os.PathLike) -> str:
    """The SQLAlchemy URL for a store spec: a URL (sqlite/postgresql) or a bare directory (SQLite inside it)."""
    spec = str(spec)
    if spec.startswith("hub:"):
        raise ValueError(
            f"{spec!r}: the Hub is no longer a queue store; use a SQLite directory or a postgresql:// URL "
            "(finished evaluations are published to the Hub by the publisher)"
        )
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if spec.startswith(prefix):
            return "postgresql+psycopg://" + spec.removeprefix(prefix)
    if spec.startswith("sqlite://"):
        return spec
    directory = Path(spec.removeprefix("sqlite:")).expanduser().resolve()  # a bare "sqlite:DIR" as before
    return f"sqlite:///{directory / 'queue.sqlite'}"


def _cache_root() -> Path:
    return Path(os.environ.get("TCMQA_CACHE") or Path.home() / ".cache" / "tcmqa")


class Store:
    """The queue, results, outputs and publication outbox in one SQL database (SQLite or PostgreSQL).

    Each process opens its own ``Store`` (and so its own engine); every method is one short
    transaction. ``cache_dir`` is where ``outputs_files`` and ``probes_files`` materialise parts for local
    readers.
    """

    def __init__(self, url: str | os.PathLike, *, cache_dir: str | Path | None = None):
        self.url = store_url(url)
        parsed = sa.engine.make_url(self.url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise ValueError("a SQLite store needs a file (each process opens its own connection)")
            db = Path(parsed.database)
            db.parent.mkdir(parents=True, exist_ok=True)
            self.root: Path | None = db.parent
            self.cache_dir = Path(cache_dir or db.parent / "outputs").expanduser()
            self._writer = self._sqlite_engine(db, "BEGIN IMMEDIATE")
            self._reader = self._sqlite_engine(db, "BEGIN")
        elif self.dialect == "postgresql":
            self.root = None
            where = hashlib.sha1(parsed.render_as_string(hide_password=True).encode()).hexdigest()[:12]
            self.cache_dir = Path(cache_dir or _cache_root() / "store-outputs" / where).expanduser()
            self._writer = self._reader = sa.create_engine(
                self.url, pool_pre_ping=True, pool_size=4, max_overflow=16, pool_recycle=1800
            )
        else:
            raise ValueError(f"{self.url}: only sqlite and postgresql stores are supported")
        self._migrate()

    # -- connections ------------------------------------------------------------------------------
    @staticmethod
    def _sqlite_engine(db: Path, begin: str) -> Engine:
        """One connection per transaction (NullPool); WAL, a generous busy timeout, and our own BEGIN."""
        engine = sa.create_engine(f"sqlite:///{db}", poolclass=sa.NullPool, connect_args={"timeout": 60})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # the driver's own transaction handling is off: we BEGIN
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql(begin)

        return engine

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """A writing transaction: SQLite takes its write lock at BEGIN; PostgreSQL locks rows as it goes."""
        with self._writer.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._reader.begin() as conn:
            yield conn

    def _lock(self, conn: Connection, key: int) -> None:
        """Serialize with other transactions taking ``key`` (PostgreSQL; SQLite's BEGIN IMMEDIATE already does)."""
        if self.dialect == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))

    def _upsert(self, table: sa.Table, values: dict[str, Any], key: list[str]) -> Any:
        """INSERT ... ON CONFLICT (key) DO UPDATE in this dialect."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = insert(table).values(**values)
        return statement.on_conflict_do_update(
            index_elements=key, set_={k: v for k, v in values.items() if k not in key}
        )

    def close(self) -> None:
        """Release pooled connections (PostgreSQL); the store may still be used afterwards."""
        self._writer.dispose()
        self._reader.dispose()

    def _migrate(self) -> None:
        """Bring the schema to the latest version; concurrent openers serialize and migrate once."""
        latest = len(MIGRATIONS)
        with self._write() as conn:
            self._lock(conn, _MIGRATE_LOCK)
            version_t.create(conn, checkfirst=True)
            current = conn.execute(sa.select(version_t.c.version)).scalar()
            if current is None:
                conn.execute(sa.insert(version_t).values(version=0))
                current = 0
            if current > latest:
                raise RuntimeError(f"{self.url}: schema version {current} is newer than this code's ({latest})")
            for version in range(current + 1, latest + 1):
                MIGRATIONS[version - 1](conn, self)
                conn.execute(sa.update(version_t).values(version=version))

    def schema_version(self) -> int:
        with self._read() as conn:
            return conn.execute(sa.select(version_t.c.version)).scalar_one()

    # -- rows <-> jobs ----------------------------------------------------------------------------
    @staticmethod
    def _job(row: Any) -> Job:
        values = {name: row[name] for name in _JOB_COLUMNS}
        values["meta"] = json.loads(values["meta"] or "{}")
        for name in ("claim", "progress", "reason", "log_tail"):
            values[name] = values[name] or ""
        for name in ("submitted_at", "updated_at", "heartbeat_at", "status_at"):
            values[name] = values[name] or 0.0
        values["attempts"] = values["attempts"] or 0
        return Job(**values)

    @staticmethod
    def _values(job: Job) -> dict[str, Any]:
        return {name: json.dumps(job.meta) if name == "meta" else getattr(job, name) for name in _JOB_COLUMNS}

    def _select_jobs(self, *where: Any) -> list[Job]:
        query = sa.select(jobs_t).where(*where).order_by(jobs_t.c.submitted_at.desc(), jobs_t.c.id.desc())
        with self._read() as conn:
            return [self._job(r) for r in conn.execute(query).mappings()]

    def _live(self, conn: Connection, model: str, revision: str, protocol: str) -> Job | None:
        row = (
            conn.execute(
                sa.select(jobs_t).where(
                    jobs_t.c.model == model,
                    jobs_t.c.revision == revision,
                    jobs_t.c.protocol == protocol,
                    jobs_t.c.status != FAILED,
                )
            )
            .mappings()
            .first()
        )
        return self._job(row) if row else None

    # -- the queue --------------------------------------------------------------------------------
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
    ) -> Job:
        """Enqueue a PENDING job, or raise DuplicateError pointing at the live one, or RateLimited.

        The rate-limit count, the duplicate check and the insert are one serialized transaction.
        """
        job = new_job(model, revision, protocol, user, meta)
        try:
            with self._write() as conn:
                self._lock(conn, _SUBMIT_LOCK)
                if rate_limit is not None:
                    count = conn.execute(
                        sa.select(sa.func.count())
                        .select_from(jobs_t)
                        .where(jobs_t.c.user == user, jobs_t.c.submitted_at >= job.submitted_at - rate_window_s)
                    ).scalar_one()
                    if count >= rate_limit:
                        raise RateLimited(count, rate_limit, rate_window_s)
                live = self._live(conn, model, revision, protocol)
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

    def find(self, model: str, revision: str, protocol: str) -> Job | None:
        """The live (pending, running or finished) job for this key, if any."""
        with self._read() as conn:
            return self._live(conn, model, revision, protocol)

    def submitted_since(self, user: str, since: float) -> int:
        query = sa.select(sa.func.count()).select_from(jobs_t).where(jobs_t.c.user == user)
        with self._read() as conn:
            return conn.execute(query.where(jobs_t.c.submitted_at >= since)).scalar_one()

    def _any(self, *where: Any) -> bool:
        with self._read() as conn:
            return conn.execute(sa.select(jobs_t.c.id).where(*where).limit(1)).first() is not None

    def claim(self, worker: str) -> Job | None:
        """Atomically move the oldest PENDING job to RUNNING for this worker, or return None."""
        if not self._any(jobs_t.c.status == PENDING):  # an idle poll takes no write lock
            return None
        with self._write() as conn:
            row = (
                conn.execute(
                    sa.select(jobs_t)
                    .where(jobs_t.c.status == PENDING)
                    .order_by(jobs_t.c.submitted_at, jobs_t.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)  # PostgreSQL; SQLite holds its write lock already
                )
                .mappings()
                .first()
            )
            if row is None:
                return None
            now, job = time.time(), self._job(row)
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
        now = time.time()
        with self._write() as conn:
            return self._owned_update(conn, job, heartbeat_at=now, updated_at=now, progress=progress)

    def finish(self, job: Job, row: dict[str, Any], outputs: Collection[Path], probes: Collection[Path] = ()) -> bool:
        """Record the results row, outputs and probes parts, mark FINISHED and queue the publication, in one
        transaction. Parts are numbered in file-name order.

        False (and nothing recorded) if the claim was lost.
        """
        parts = {outputs_t: _read_parts(outputs), probes_t: _read_parts(probes)}
        text = json.dumps(row, ensure_ascii=False, default=_jsonable)
        with self._write() as conn:
            now = time.time()
            if not self._owned_update(conn, job, status=FINISHED, updated_at=now, status_at=now, progress="done"):
                return False
            for table in (results_t, outputs_t, probes_t, publications_t):
                conn.execute(sa.delete(table).where(table.c.job_id == job.id))
            conn.execute(sa.insert(results_t).values(job_id=job.id, row=text, recorded_at=now))
            for table, data in parts.items():
                if data:
                    conn.execute(
                        sa.insert(table), [{"job_id": job.id, "part": i, "data": d} for i, d in enumerate(data)]
                    )
            conn.execute(sa.insert(publications_t).values(job_id=job.id, created_at=now, next_try_at=now, attempts=0))
        return True

    def fail(self, job: Job, reason: str, log_tail: str = "") -> bool:
        """Mark FAILED with a reason the submitter can read; False if the claim was lost."""
        now = time.time()
        with self._write() as conn:
            return self._owned_update(
                conn, job, status=FAILED, updated_at=now, status_at=now, reason=reason, log_tail=log_tail
            )

    def requeue_stale(self, stale_after: float, max_attempts: int) -> list[Job]:
        """Re-queue RUNNING jobs whose heartbeat is older than ``stale_after`` s; FAIL those out of attempts."""
        now = time.time()
        silent = (jobs_t.c.status == RUNNING, jobs_t.c.heartbeat_at < now - stale_after)
        if not self._any(*silent):  # the usual case takes no write lock
            return []
        changed = []
        with self._write() as conn:
            rows = conn.execute(sa.select(jobs_t).where(*silent).with_for_update(skip_locked=True)).mappings().all()
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

    # -- results and outputs ----------------------------------------------------------------------
    def results(self) -> list[dict[str, Any]]:
        """Every results row: evaluated here, and imported from the Hub."""
        with self._read() as conn:
            rows = conn.execute(sa.select(results_t.c.row).order_by(results_t.c.recorded_at, results_t.c.job_id))
            return [json.loads(r) for (r,) in rows]

    def version(self) -> str:
        """Changes whenever results change, so readers can cache."""
        with self._read() as conn:
            count, last = conn.execute(sa.select(sa.func.count(), sa.func.max(results_t.c.recorded_at))).one()
        return f"{count}:{last}"

    def outputs_files(self) -> list[Path]:
        """Local paths of every recorded outputs part, materialised from the database into ``cache_dir``.

        Files are ``<cache_dir>/<job id>/part-NNNNN.parquet``; a job's folder is written once, atomically
        (a temporary folder renamed into place), and reused while it is complete.
        """
        return self._part_files(outputs_t, self.cache_dir)

    def probes_files(self) -> list[Path]:
        """Local paths of every recorded probes part (the ``probes`` config), like :meth:`outputs_files`:
        ``<cache_dir>/probes/<job id>/part-NNNNN.parquet``."""
        return self._part_files(probes_t, self.cache_dir / PROBES_CACHE)

    def _part_files(self, table: sa.Table, folder: Path) -> list[Path]:
        """The parts of ``table`` as files under ``folder``, one subfolder per job."""
        with self._read() as conn:
            listed = conn.execute(sa.select(table.c.job_id, table.c.part).order_by(table.c.job_id, table.c.part)).all()
        by_job: dict[str, list[int]] = {}
        for job_id, part in listed:
            by_job.setdefault(job_id, []).append(part)
        files: list[Path] = []
        for job_id, parts in by_job.items():
            paths = [folder / job_id / f"part-{part:05d}.parquet" for part in parts]
            if not all(p.is_file() for p in paths):
                self._materialise(table, folder, job_id)
            files.extend(paths)
        return files

    def _materialise(self, table: sa.Table, folder: Path, job_id: str) -> None:
        with self._read() as conn:
            rows = conn.execute(sa.select(table.c.part, table.c.data).where(table.c.job_id == job_id)).all()
        folder.mkdir(parents=True, exist_ok=True)
        staging = folder / f".{job_id}.{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            for part, data in rows:
                (staging / f"part-{part:05d}.parquet").write_bytes(data)
            final = folder / job_id
            for _ in range(3):
                try:
                    os.replace(staging, final)
                    return
                except OSError:  # an incomplete folder (from elsewhere), or another process just wrote it
                    if all((final / f"part-{part:05d}.parquet").is_file() for part, _ in rows):
                        return
                    shutil.rmtree(final, ignore_errors=True)
            raise OSError(f"could not write {final}")
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def import_results(self, rows: list[dict[str, Any]]) -> int:
        """Add results rows read from the Hub, as FINISHED jobs already published; return how many were added.

        A row whose (model, revision, protocol) already has a live job here is skipped. An optional
        ``job_id`` key names the job (it is taken out of the stored row); otherwise the id is derived
        from the key. Imported jobs have ``status_at`` 0, so mirrors of the queue never rewrite them.
        """
        added = 0
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK)
            for original in rows:
                row = dict(original)
                job_id = row.pop("job_id", None)
                key = tuple(str(row.get(name) or "") for name in ("model", "revision", "protocol"))
                if self._live(conn, *key):
                    continue
                job_id = str(job_id or "hub-" + hashlib.sha1("\0".join(key).encode()).hexdigest()[:16])
                when = _date_stamp(row.get("date"))
                now = time.time()
                job = Job(job_id, *key, IMPORTED_USER, FINISHED, when, when, progress="imported from the Hub")
                job.meta = {"imported": True}
                try:
                    with conn.begin_nested():
                        conn.execute(sa.insert(jobs_t).values(**self._values(job)))
                        text = json.dumps(row, ensure_ascii=False, default=_jsonable)
                        conn.execute(sa.insert(results_t).values(job_id=job_id, row=text, recorded_at=now))
                        conn.execute(
                            sa.insert(publications_t).values(
                                job_id=job_id,
                                created_at=now,
                                next_try_at=now,
                                published_at=now,
                                hub_commit="imported",
                                attempts=0,
                            )
                        )
                except IntegrityError:  # that job id is already used here
                    continue
                added += 1
        return added

    # -- the publication outbox -------------------------------------------------------------------
    def unpublished(self, limit: int = 50) -> list[Publication]:
        """Finished evaluations not yet on the Hub whose next try has come, oldest first."""
        now = time.time()
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
        with self._read() as conn:
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
        now = time.time()
        with self._write() as conn:
            for chunk in _chunks(job_ids):
                conn.execute(
                    sa.update(publications_t)
                    .where(publications_t.c.job_id.in_(chunk))
                    .values(published_at=now, hub_commit=commit, last_error="")
                )

    def publication_failed(self, job_ids: list[str], error: str, retry_after_s: float) -> None:
        """Publishing these failed: count the attempt, keep the error, retry no sooner than ``retry_after_s``."""
        now = time.time()
        with self._write() as conn:
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

    # -- practitioner mode (tcmqa.leaderboard.practice holds the rules; these are its transactions) ----
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

    def __repr__(self) -> str:
        shown = sa.engine.make_url(self.url).render_as_string(hide_password=True)
        return f"{type(self).__name__}({shown!r})"


class SQLiteStore(Store):
    """A store in a local directory: ``<root>/queue.sqlite``, outputs cached in ``<root>/outputs``."""

    def __init__(self, root: str | Path, *, cache_dir: str | Path | None = None):
        super().__init__(store_url(Path(root)), cache_dir=cache_dir)


def open_store(spec: str | os.PathLike, *, cache_dir: str | Path | None = None) -> Store:
    """A SQLite directory (``.cache/space``; ``sqlite:DIR`` too), a ``sqlite:///FILE`` or a ``postgresql://`` URL."""
    text = str(spec)
    if "://" in text or text.startswith("hub:"):
        return Store(text, cache_dir=cache_dir)
    return SQLiteStore(text.removeprefix("sqlite:"), cache_dir=cache_dir)


def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _read_parts(paths: Collection[Path]) -> list[bytes]:
    return [Path(path).read_bytes() for path in sorted(paths)]


def _jsonable(value: Any) -> Any:
    """numpy scalars and missing values in rows read from Parquet."""
    if hasattr(value, "item"):
        return value.item()
    if value is None or str(value) in ("<NA>", "NaT", "nan"):
        return None
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _date_stamp(date: Any) -> float:
    """A results row's UTC date (YYYY-MM-DD...) as a time stamp; 0 when absent or unreadable."""
    try:
        return float(calendar.timegm(time.strptime(str(date)[:10], "%Y-%m-%d")))
    except (TypeError, ValueError):
        return 0.0
