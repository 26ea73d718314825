"""The store's schema versions: the ordered migrations that build :mod:`tcmqa.store.tables` in a database.

The version is kept in table ``schema_version``; :meth:`tcmqa.store.Store._migrate` applies, when a store
is opened, every migration after it (``MIGRATIONS[i]`` makes version ``i + 1``). A migration is written
against the tables of its own version, so a store of any earlier version upgrades in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tcmqa.store.jobs import FINISHED
from tcmqa.store.tables import (
    _PRACTICE_TABLES_5,
    FRESH_TABLES,
    _partial_index,
    adjudication_reviews_t,
    adjudications_t,
    item_keys_t,
    jobs_t,
    outcomes_t,
    outputs_t,
    pool_outputs_t,
    practice_assignments_t,
    practice_blocks_t,
    practice_exclusions_t,
    practice_responses_t,
    practice_retired_t,
    practitioner_keys_t,
    practitioners_t,
    probes_t,
    publications_t,
    results_t,
    state_t,
)

if TYPE_CHECKING:
    from tcmqa.store import Store


_JOBS_COLUMNS_6 = ("not_before", "retries")  # came with migration 6
_JOBS_COLUMNS_11 = ("kind",)  # came with migration 11


def _column_copies(table: sa.Table, leave_out: Collection[str] = ()) -> list[sa.Column]:
    """Fresh columns like ``table``'s, for an older version of it."""
    return [
        sa.Column(
            c.name,
            c.type,
            primary_key=c.primary_key,
            nullable=c.nullable,
            unique=c.unique,
            server_default=c.server_default,
        )
        for c in table.columns
        if c.name not in leave_out
    ]


def _migration_1(conn: Connection, store: Store) -> None:
    """The original queue: jobs and results (an existing pre-versioning SQLite store is this version)."""
    legacy = sa.MetaData()
    later = {"status_at", *_JOBS_COLUMNS_6, *_JOBS_COLUMNS_11}
    jobs = sa.Table("jobs", legacy, *_column_copies(jobs_t, leave_out=later))
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


def _migration_3(conn: Connection, store: Store) -> None:
    """Practitioner mode: practitioners, practice blocks, their assignments and the responses."""
    legacy = sa.MetaData()
    practitioners = sa.Table("practitioners", legacy, *_column_copies(practitioners_t, leave_out={"number"}))
    assignments = sa.Table(
        "practice_assignments",
        legacy,
        *_column_copies(practice_assignments_t, leave_out={"released_at", "released_reason", "released_by"}),
    )
    sa.Index("practice_by_block", assignments.c.block)
    legacy.create_all(conn, tables=[practitioners, assignments], checkfirst=True)
    for table in (practice_blocks_t, practice_responses_t):
        table.create(conn, checkfirst=True)  # with their indexes


def _migration_4(conn: Connection, store: Store) -> None:
    """Probes parts beside the outputs parts (jobs finished before have none: they were not probed)."""
    probes_t.create(conn, checkfirst=True)


def _migration_5(conn: Connection, store: Store) -> None:
    """The human reference that holds: a number per person (one pseudonym across blocks), released slots,
    the slots of each block (top-up blocks have fewer), and the exclusion history.

    Existing practitioners are numbered in the order they registered; existing exclusions become the
    first entry of their history; existing blocks have no info row (they hold the configured N).
    """
    for statement in (
        "ALTER TABLE practitioners ADD COLUMN number INTEGER",
        "ALTER TABLE practice_assignments ADD COLUMN released_at DOUBLE PRECISION",
        "ALTER TABLE practice_assignments ADD COLUMN released_reason TEXT",
        "ALTER TABLE practice_assignments ADD COLUMN released_by TEXT",
    ):
        conn.execute(sa.text(statement))
    people = conn.execute(
        sa.select(practitioners_t.c.account).order_by(practitioners_t.c.created_at, practitioners_t.c.account)
    ).scalars()
    for number, account in enumerate(list(people), 1):
        conn.execute(sa.update(practitioners_t).where(practitioners_t.c.account == account).values(number=number))
    for index in practitioners_t.indexes:
        if index.name == "practitioner_number":
            index.create(conn)
    for table in _PRACTICE_TABLES_5:
        table.create(conn, checkfirst=True)
    decided = conn.execute(sa.select(practitioners_t).where(practitioners_t.c.excluded_at.is_not(None))).mappings()
    for p in list(decided):
        conn.execute(
            sa.insert(practice_exclusions_t).values(
                account=p["account"],
                excluded=p["excluded"],
                reason=p["excluded_reason"] or "",
                decided_by=p["excluded_by"] or "",
                decided_at=p["excluded_at"],
            )
        )


def _migration_6(conn: Connection, store: Store) -> None:
    """Transient failures: a released job waits until ``not_before`` (backoff) and counts them in ``retries``."""
    conn.execute(sa.text("ALTER TABLE jobs ADD COLUMN not_before DOUBLE PRECISION"))
    conn.execute(sa.text("ALTER TABLE jobs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0"))


def _migration_7(conn: Connection, store: Store) -> None:
    """Each run's outcome bitmaps (tcmqa.store.outcomes); the finished jobs' are aggregated by their first
    reader (``record_outcomes``), not here: a migration holds the write lock, and a thousand jobs take a minute."""
    item_keys_t.create(conn, checkfirst=True)
    outcomes_t.create(conn, checkfirst=True)


def _migration_8(conn: Connection, store: Store) -> None:
    """Local mode's practitioner keys: an account that practised before has none, and its next start issues one."""
    practitioner_keys_t.create(conn, checkfirst=True)


def _migration_9(conn: Connection, store: Store) -> None:
    """The fresh pool: items practitioners write, their blind answers and reviews, and every event."""
    for table in FRESH_TABLES:
        table.create(conn, checkfirst=True)  # with their indexes


def _migration_10(conn: Connection, store: Store) -> None:
    """Retired practice blocks: a block reopened after it was published (a rater excluded or released) is
    never handed out again. Blocks reopened before this version are not known to have been published."""
    practice_retired_t.create(conn, checkfirst=True)


def _migration_11(conn: Connection, store: Store) -> None:
    """Back-fill jobs (tcmqa.fresh.backfill): a job's ``kind``; one live submission and one waiting back-fill per
    (model, revision, protocol), so a finished evaluation's key takes a back-fill each time the pool grows."""
    conn.execute(sa.text("ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'eval'"))
    conn.execute(sa.text("DROP INDEX one_live_job"))
    for index in jobs_t.indexes:
        if index.name in ("one_live_job", "one_live_backfill"):
            index.create(conn)


def _migration_12(conn: Connection, store: Store) -> None:
    """Each job's output rows of the hidden pool, kept privately so that they are published when items retire;
    jobs finished before this version kept them only in their run folders."""
    pool_outputs_t.create(conn, checkfirst=True)


def _migration_13(conn: Connection, store: Store) -> None:
    """Key adjudication: the suspect items the study lead assigned to reviewers, and their verdicts."""
    for table in (adjudications_t, adjudication_reviews_t):
        table.create(conn, checkfirst=True)  # with their indexes


MIGRATIONS: list[Callable[[Connection, Store], None]] = [
    _migration_1,
    _migration_2,
    _migration_3,
    _migration_4,
    _migration_5,
    _migration_6,
    _migration_7,
    _migration_8,
    _migration_9,
    _migration_10,
    _migration_11,
    _migration_12,
    _migration_13,
]  # version i+1 = MIGRATIONS[i]
