"""Back-fills: when the hidden pool changes, every comparable model on the board is evaluated on it again.

A job evaluates the pool as it stands when it runs, so rows evaluated before the pool last grew are on
an older version. :func:`queue_backfills` (run by every worker before it claims) gives each such row a
back-fill job: the pool only, with the row's recorded engine, dtype and engine args, queued below every
submission (``tcmqa.store.jobs.CLAIM_ORDER``). Rows that get one are the board's comparable rows (full
coverage, on the fingerprint most of them share, under the current protocol), evaluated here (their
public outputs are in the store: the gap needs them). A change is acted on once: the version back-filled
is kept in the store's state, and at most one back-fill waits per model (it reads the newest pool when
claimed). Nothing is queued while the pool is below ``MIN_POOL``: the board does not show it then.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tcmqa.fresh.gap import MIN_POOL
from tcmqa.leaderboard.board import is_full, reference_fingerprint
from tcmqa.prompts import PROTOCOL
from tcmqa.store import Job, Store

BACKFILLED = "fresh.backfilled"  # store state: the pool version whose back-fills were queued
logger = logging.getLogger(__name__)


def settings(row: dict[str, Any]) -> dict[str, Any]:
    """The harness settings a row recorded: its engine, dtype and engine args (what a back-fill runs with)."""
    return {
        "engine": row.get("engine"),
        "dtype": row.get("dtype"),
        "engine_args": json.loads(row.get("engine_args") or "{}"),
    }


def queue_backfills(store: Store, protocol: str = PROTOCOL) -> list[Job]:
    """Queue a back-fill for every comparable row not on the current pool version; the jobs queued."""
    version = store.fresh_pool_version()
    if store.get_state(BACKFILLED) == version:
        return []
    size = len(store.accepted_fresh_items())
    if size < MIN_POOL:
        return []
    finished = store.finished_evaluations()
    rows = [row for _, row in finished]
    fingerprint = reference_fingerprint(rows, protocol)
    queued = []
    for job, row in finished:
        comparable = row.get("data_fingerprint") == fingerprint and row.get("protocol") == protocol and is_full(row)
        if comparable and row.get("pool_version") != version:
            backfill = store.queue_backfill(job, {"pool_version": version, "settings": settings(row)})
            if backfill is not None:
                queued.append(backfill)
    store.set_state(BACKFILLED, version)
    logger.info("pool %s (%d items): %d back-fill(s) queued", version[:12], size, len(queued))
    return queued
