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

The package is split by concern; :class:`Store` is composed once, here, from one mixin per module over
the connection core:

    tcmqa.store.core        connections: engines per dialect, transactions, advisory locks, upsert
    tcmqa.store.tables      the schema's latest shape (every table and index)
    tcmqa.store.migrations  the ordered migrations that build it (``MIGRATIONS``)
    tcmqa.store.jobs        the job record, its statuses and its row
    tcmqa.store.queue       submit/claim/heartbeat/finish/fail/requeue_stale, rate limits
    tcmqa.store.results     results rows, outputs and probes parts, results imported from the Hub
    tcmqa.store.outbox      the publication outbox, the mirrors' status changes and key-value state
    tcmqa.store.practice    practitioner mode's transactions
    tcmqa.store.keys        local mode's practitioner keys (their digests)
    tcmqa.store.outcomes    each run's per-item correctness as bitmaps (what the board counts)
    tcmqa.store.pool        the fresh pool: written items, their blind answers and reviews, the event log
    tcmqa.store.backfill    back-fill jobs: the hidden pool evaluated again for a finished evaluation's row
    tcmqa.store.quick       quick jobs' estimates of Full and the anchor sets they use, apart from the results
    tcmqa.store.adjudication  key adjudication: suspect items put to reviewers, their verdicts
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from tcmqa.store.adjudication import AdjudicationStore
from tcmqa.store.admin import AdminStore
from tcmqa.store.backfill import BackfillStore
from tcmqa.store.core import _MIGRATE_LOCK, store_url
from tcmqa.store.jobs import BACKFILL, EVAL, FAILED, FINISHED, LIVE, PENDING, QUICK, RUNNING, Job, new_job
from tcmqa.store.keys import KeysStore
from tcmqa.store.migrations import MIGRATIONS
from tcmqa.store.outbox import OutboxStore, Publication
from tcmqa.store.outcomes import Outcome, OutcomesStore
from tcmqa.store.pool import FreshItem, PoolRefused, PoolStore, WrittenItem
from tcmqa.store.practice import DailyCapReached, PracticeStore
from tcmqa.store.queue import DuplicateError, QueueStore, RateLimited
from tcmqa.store.quick import QuickStore
from tcmqa.store.results import IMPORTED_USER, PROBES_CACHE, ResultsStore
from tcmqa.store.tables import (
    jobs_t,
    outputs_t,
    practice_assignments_t,
    practice_blocks_t,
    practice_responses_t,
    practitioners_t,
    probes_t,
    publications_t,
    results_t,
    state_t,
    version_t,
)

__all__ = [
    "BACKFILL",
    "EVAL",
    "FAILED",
    "FINISHED",
    "IMPORTED_USER",
    "LIVE",
    "MIGRATIONS",
    "PENDING",
    "PROBES_CACHE",
    "QUICK",
    "RUNNING",
    "DailyCapReached",
    "DuplicateError",
    "FreshItem",
    "Job",
    "Outcome",
    "PoolRefused",
    "Publication",
    "RateLimited",
    "SQLiteStore",
    "Store",
    "WrittenItem",
    "jobs_t",
    "new_job",
    "open_store",
    "outputs_t",
    "practice_assignments_t",
    "practice_blocks_t",
    "practice_responses_t",
    "practitioners_t",
    "probes_t",
    "publications_t",
    "results_t",
    "state_t",
    "store_url",
    "version_t",
]


class Store(
    QueueStore,
    ResultsStore,
    OutboxStore,
    PracticeStore,
    KeysStore,
    AdminStore,
    OutcomesStore,
    PoolStore,
    BackfillStore,
    QuickStore,
    AdjudicationStore,
):
    """The queue, results, outputs and publication outbox in one SQL database (SQLite or PostgreSQL).

    Each process opens its own ``Store`` (and so its own engine); every method is one short
    transaction. ``cache_dir`` is where ``outputs_files`` and ``probes_files`` materialise parts for local
    readers.
    """

    def __init__(self, url: str | os.PathLike, *, cache_dir: str | Path | None = None):
        super().__init__(url, cache_dir=cache_dir)
        self._migrate()

    def _migrate(self) -> None:
        """Bring the schema to the latest version; concurrent openers serialize and migrate once.

        ``MIGRATIONS`` is read from this package when a store opens (a test opens a store of an earlier
        version by replacing ``tcmqa.store.MIGRATIONS`` with its prefix).
        """
        latest = len(MIGRATIONS)
        with self._write() as conn:
            self._lock(conn, _MIGRATE_LOCK)
            version_t.create(conn, checkfirst=True)
            current = conn.execute(sa.select(version_t.c.version)).scalar()
            if current is None:
                conn.execute(sa.insert(version_t).values(version=0))
                current = 0
            if current > latest:
                raise RuntimeError(f"{self.shown}: schema version {current} is newer than this code's ({latest})")
            for version in range(current + 1, latest + 1):
                MIGRATIONS[version - 1](conn, self)
                conn.execute(sa.update(version_t).values(version=version))

    def schema_version(self) -> int:
        with self._read() as conn:
            return conn.execute(sa.select(version_t.c.version)).scalar_one()


class SQLiteStore(Store):
    """A store in a local directory: ``<root>/queue.sqlite``, outputs cached in ``<root>/outputs``."""

    def __init__(self, root: str | Path, *, cache_dir: str | Path | None = None):
        super().__init__(store_url(Path(root).expanduser().absolute()), cache_dir=cache_dir)  # "./a:b" stays a path


def open_store(spec: str | os.PathLike, *, cache_dir: str | Path | None = None) -> Store:
    """A SQLite directory (``.cache/space``; ``sqlite:DIR`` too), a ``sqlite:///FILE`` or a ``postgresql://`` URL
    (:func:`tcmqa.store.core.store_url`; any other scheme is refused)."""
    text = str(spec)
    url = store_url(text)  # refuses an unknown scheme before anything is made
    if text.startswith(("sqlite://", "postgres")):
        return Store(url, cache_dir=cache_dir)
    return SQLiteStore(text.removeprefix("sqlite:"), cache_dir=cache_dir)  # a folder
