"""The store's schema in its latest shape: every table and index the queries use.

One ``MetaData`` holds them all (queue, results and parts, the publication outbox and its state,
practitioner mode), so the schema reads in one place; :mod:`tcmqa.store.migrations` builds it, in order,
in an existing database.
"""

from __future__ import annotations

import sqlalchemy as sa

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
    sa.Column("not_before", _F),  # a PENDING job released by a transient failure waits until then (migration 6)
    sa.Column("retries", sa.Integer, nullable=False, server_default="0"),  # its transient failures so far
    # "eval" (a submission) or "backfill" (the hidden pool only, for a finished eval's row; migration 11)
    sa.Column("kind", _T, nullable=False, server_default="eval"),
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
# each job's output rows of the hidden pool (migration 12): never read for a page; the publisher commits the rows
# of retired items only (tcmqa.hub.withheld)
pool_outputs_t = _parts_table("pool_outputs")
# Each run's per-item correctness as two bitmaps over the item numbering (tcmqa.store.outcomes; migration 7).
item_keys_t = sa.Table(
    "item_keys",
    _meta,
    sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),  # the item's number: its bit
    sa.Column("item_id", _T, nullable=False, unique=True),
)
outcomes_t = sa.Table(
    "outcomes",
    _meta,
    sa.Column("run", _T, primary_key=True),  # the job id; "published:<model>@<revision>" for a published run
    sa.Column("model", _T, nullable=False),
    sa.Column("revision", _T, nullable=False),
    sa.Column("protocol", _T, nullable=False),
    sa.Column("source", _T, nullable=False),  # "recorded" | "published"
    sa.Column("at", _F),
    sa.Column("n_items", sa.Integer, nullable=False),
    sa.Column("n_correct", sa.Integer, nullable=False),
    sa.Column("present", sa.LargeBinary, nullable=False),  # bit i: item number i answered
    sa.Column("correct", sa.LargeBinary, nullable=False),  # bit i: item number i right
)
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


def _partial_index(name: str, table: sa.Table, columns: list[str], where: str, unique: bool = False) -> sa.Index:
    """One partial index in both dialects (they spell the WHERE option differently)."""
    clause = sa.text(where)
    return sa.Index(name, *(table.c[c] for c in columns), unique=unique, sqlite_where=clause, postgresql_where=clause)


# Every index of the latest schema (a migration creates each when its version introduces it).
LIVE_EVAL = "status != 'FAILED' AND kind = 'eval'"  # one submission per key (back-fills since migration 11)
LIVE_BACKFILL = "status IN ('PENDING', 'RUNNING') AND kind = 'backfill'"  # one waiting back-fill per key
_partial_index("one_live_job", jobs_t, ["model", "revision", "protocol"], LIVE_EVAL, unique=True)
_partial_index("one_live_backfill", jobs_t, ["model", "revision", "protocol"], LIVE_BACKFILL, unique=True)
sa.Index("by_status", jobs_t.c.status, jobs_t.c.submitted_at)
sa.Index("by_user", jobs_t.c.user, jobs_t.c.submitted_at)
sa.Index("by_status_at", jobs_t.c.status_at)
_partial_index("unpublished", publications_t, ["next_try_at"], "published_at IS NULL")


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
    sa.Column("number", sa.Integer),  # the person's number (1, 2, ...): their pseudonym's seed, never reused
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
    sa.Column("slot", sa.Integer, nullable=False),  # 0..raters-1 within the block; a released slot is refilled
    sa.Column("user_id", sa.Integer, nullable=False, unique=True),  # a row number (1, 2, ...)
    sa.Column("assigned_at", _F, nullable=False),
    sa.Column("released_at", _F),  # NULL: the account holds the slot; else it was freed for another
    sa.Column("released_reason", _T),
    sa.Column("released_by", _T),  # the admin, or "auto" (excluded or inactive, refilled)
)
practice_block_info_t = sa.Table(
    "practice_block_info",
    _meta,
    sa.Column("block", sa.Integer, primary_key=True),
    sa.Column("raters", sa.Integer, nullable=False),  # slots of the block: N, or fewer for a top-up block
    sa.Column("kind", _T, nullable=False),  # "fresh" | "top_up"
    sa.Column("created_at", _F, nullable=False),
)
practice_retired_t = sa.Table(
    "practice_retired",
    _meta,
    sa.Column("block", sa.Integer, primary_key=True),  # a block reopened after it was published: never refilled
    sa.Column("retired_at", _F, nullable=False),
    sa.Column("reason", _T, nullable=False),  # the decision that reopened it
    sa.Column("retired_by", _T, nullable=False),
)
practice_exclusions_t = sa.Table(
    "practice_exclusions",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("account", _T, nullable=False),
    sa.Column("excluded", sa.Integer, nullable=False),  # 1 excluded, 0 re-included
    sa.Column("reason", _T, nullable=False),
    sa.Column("decided_by", _T, nullable=False),
    sa.Column("decided_at", _F, nullable=False),
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
practitioner_keys_t = sa.Table(  # local mode's practitioner sessions (tcmqa.leaderboard.identity)
    "practitioner_keys",
    _meta,
    sa.Column("account", _T, primary_key=True),
    sa.Column("key_digest", _T, nullable=False),  # SHA-256 of the key the account's first start issued
    sa.Column("issued_at", _F, nullable=False),
)
sa.Index("practice_block_item", practice_blocks_t.c.block, practice_blocks_t.c.item_id, unique=True)
sa.Index("practice_by_block", practice_assignments_t.c.block)
sa.Index("practice_responses_by_time", practice_responses_t.c.account, practice_responses_t.c.recorded_at)
sa.Index("practitioner_number", practitioners_t.c.number, unique=True)
_PRACTICE_TABLES_5 = (practice_block_info_t, practice_exclusions_t)  # came with migration 5


# The fresh pool (tcmqa.store.pool; migration 9): items practitioners write, their reviews, every event.
fresh_items_t = sa.Table(
    "fresh_items",
    _meta,
    sa.Column("id", _T, primary_key=True),  # "fresh-00001": never a public item's id
    sa.Column("number", sa.Integer, nullable=False, unique=True),  # the id's number, given in order
    sa.Column("writer", _T, nullable=False),  # the account that wrote it (the study lead for an imported item)
    sa.Column("origin", _T, nullable=False),  # "written" | "imported"
    sa.Column("state", _T, nullable=False),  # draft | in_review | accepted | rejected | retired
    sa.Column("revision", sa.Integer, nullable=False),  # 1; 2 once revised after a rejection
    sa.Column("question", _T, nullable=False),
    *(sa.Column(f"option_{letter.lower()}", _T, nullable=False) for letter in "ABCDE"),
    sa.Column("answer", _T, nullable=False),  # the key's sorted letters, "BD"
    sa.Column("answer_type", _T, nullable=False),  # "single" | "multi"
    sa.Column("explanation", _T, nullable=False),
    sa.Column("domains", _T, nullable=False),  # JSON list of 1-3 domain keys
    sa.Column("difficulty", sa.Integer),  # the writer's intended difficulty, 1-5
    sa.Column("own_work", sa.Integer, nullable=False),  # 1: the writer stated it is their own, unpublished work
    sa.Column("created_at", _F, nullable=False),
    sa.Column("submitted_at", _F),  # into review (the latest revision)
    sa.Column("accepted_at", _F),  # the release date
    sa.Column("retired_at", _F),  # made public
    sa.Column("updated_at", _F, nullable=False),
)
fresh_reviews_t = sa.Table(
    "fresh_reviews",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("item_id", _T, nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),  # the item's revision this review reads
    sa.Column("role", _T, nullable=False),  # "reviewer" (answers blind, then judges) | "rater" (answers blind only)
    sa.Column("reviewer", _T, nullable=False),
    sa.Column("assigned_at", _F, nullable=False),
    sa.Column("assigned_by", _T, nullable=False),  # "auto", or the lead who reassigned it
    # the blind answer, before the key is readable
    sa.Column("selected", _T),  # the letters answered, "BD"; NULL: not answered yet
    sa.Column("blind_difficulty", sa.Integer),
    sa.Column("seconds", _F),
    sa.Column("answered_at", _F),
    # the judgement, once the key and explanation were read
    sa.Column("key_correct", sa.Integer),
    sa.Column("keyed_exact", sa.Integer),  # exactly the keyed options are correct
    sa.Column("clear", sa.Integer),
    sa.Column("sound", sa.Integer),  # sound TCM
    sa.Column("original", sa.Integer),
    sa.Column("problems", _T),  # JSON list of MMLU-Redux categories
    sa.Column("comment", _T),
    sa.Column("accepts", sa.Integer),  # 1 accept, 0 reject
    sa.Column("judged_at", _F),
    sa.Column("released_at", _F),  # NULL: the reviewer holds it; else reassigned to another
    sa.Column("released_by", _T),
    sa.Column("released_reason", _T),
)
fresh_events_t = sa.Table(
    "fresh_events",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("item_id", _T, nullable=False),  # a public item's id for "refused_duplicate": a copy of it was refused
    sa.Column("action", _T, nullable=False),  # write | submit | assign | answer | judge | revise | ... | retire
    sa.Column("from_state", _T),
    sa.Column("to_state", _T),
    sa.Column("who", _T, nullable=False),
    sa.Column("at", _F, nullable=False),
    sa.Column("review_id", sa.Integer),
)
sa.Index("fresh_review_once", fresh_reviews_t.c.item_id, fresh_reviews_t.c.reviewer, unique=True)
sa.Index("fresh_reviews_by_reviewer", fresh_reviews_t.c.reviewer)
sa.Index("fresh_items_by_state", fresh_items_t.c.state)
sa.Index("fresh_events_by_item", fresh_events_t.c.item_id, fresh_events_t.c.id)
FRESH_TABLES = (fresh_items_t, fresh_reviews_t, fresh_events_t)  # came with migration 9


# Key adjudication (tcmqa.store.adjudication; migration 13): the suspect items the study lead put to reviewers, as
# they stood when assigned, and each reviewer's verdict.
adjudications_t = sa.Table(
    "adjudications",
    _meta,
    sa.Column("item_id", _T, primary_key=True),
    sa.Column("old_key", _T, nullable=False),  # the key's sorted letters when assigned, "BD"
    sa.Column("corpus_revision", _T, nullable=False),  # the scored items' data fingerprint it was assigned on
    sa.Column("rank", sa.Integer, nullable=False),  # its rank in the suspect list then
    sa.Column("evidence", _T, nullable=False),  # JSON: the suspect list's row and the practitioners' comments
    sa.Column("assigned_by", _T, nullable=False),
    sa.Column("assigned_at", _F, nullable=False),
)
adjudication_reviews_t = sa.Table(
    "adjudication_reviews",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("item_id", _T, nullable=False),
    sa.Column("reviewer", _T, nullable=False),
    sa.Column("assigned_by", _T, nullable=False),
    sa.Column("assigned_at", _F, nullable=False),
    sa.Column("verdict", _T),  # one of tcmqa.errata.VERDICTS; NULL: not given yet
    sa.Column("new_key", _T),  # a wrong key's right letters, "BD"
    sa.Column("comment", _T),
    sa.Column("decided_at", _F),
)
sa.Index("adjudication_review_once", adjudication_reviews_t.c.item_id, adjudication_reviews_t.c.reviewer, unique=True)
sa.Index("adjudication_reviews_by_reviewer", adjudication_reviews_t.c.reviewer)
