"""The practitioners' ``responses`` and ``subset`` configs, rebuilt and committed to the results repo,
coalesced (practitioner mode)."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from huggingface_hub import CommitOperationAdd

from tcmqa.hub.committer import Committer
from tcmqa.hub.retries import short

log = logging.getLogger("tcmqa.hub")

RESPONSES_VERSION = "hub.responses.version"  # store state: the practice version last published
RESPONSES_LAST = "hub.responses.last_commit"  # store state: wall time of the last responses commit


class ResponsesPublisher(Committer):
    """Publishes the study's configs when their version changed."""

    def publish_responses(
        self,
        version: str,
        tables: Callable[[], dict[str, list[dict[str, Any]]]],
        every_s: float = 300.0,
        force: bool = False,
    ) -> bool:
        """Commit the rebuilt ``responses`` and ``subset`` configs, coalesced; True when committed.

        ``tables()`` is ``Practice.configs``: the pinned study's rows plus the Space's blocks that all their
        raters finished (an open block's answers are never published), excluded practitioners and
        released slots left out. Only these two configs are written: the study's pinned source never is.

        ``version`` names the state of the practice responses (``Store.practice_version``); nothing is
        committed when that version is already on the Hub, nor (unless ``force``) within ``every_s`` of
        the last such commit, so many submissions make one commit. ``tables()`` gives the rows (only
        called when a commit is due); each config is one shard at the path ``tcmqa build`` writes, so the
        new shard replaces the old. Never raises: a failure holds the repo like a results commit does.
        """
        from tcmqa.schema import FEATURES

        with self._lock:
            try:
                if self.store.get_state(RESPONSES_VERSION) == version:
                    return False
                last = float(self.store.get_state(RESPONSES_LAST) or 0.0)
            except Exception:
                log.exception("reading the responses publication state failed")
                return False
            now = self.clock()
            if not force and now - last < every_s:
                return False
            if not self._ready(self.repo_id):
                return False
            try:
                rows = tables()
                operations = []
                for config in ("responses", "subset"):
                    sink = io.BytesIO()
                    table = pa.Table.from_pylist(rows[config], schema=FEATURES[config].arrow_schema)
                    pq.write_table(table, sink)
                    path = f"{config}/test-00000-of-00001.parquet"
                    operations.append(CommitOperationAdd(path, sink.getvalue()))
                message = (
                    f"practitioner responses: {len(rows['responses'])} responses, {len(rows['subset'])} subset items"
                )
                commit = self._commit(self.repo_id, operations, message)
            except Exception as err:
                delay = self._failed(self.repo_id, err)
                log.warning(
                    "publishing the responses to %s failed: %s; retrying in %.3gs", self.repo_id, short(err), delay
                )
                return False
            try:
                self.store.set_state(RESPONSES_VERSION, version)
                self.store.set_state(RESPONSES_LAST, repr(now))
            except Exception:
                log.exception("published the responses in %s, but saving that failed", commit)
            log.info("published the responses and subset configs to %s in %s", self.repo_id, commit)
            return True

    def run_responses_forever(
        self,
        stop_event: threading.Event,
        source: Callable[[], tuple[str | None, Callable[[], dict[str, list[dict[str, Any]]]]]],
        every_s: float = 300.0,
        poll_s: float = 30.0,
    ) -> None:
        """Publish ``source()``'s (version, tables) with :meth:`publish_responses` until ``stop_event`` is set."""
        while not stop_event.is_set():
            try:
                version, tables = source()
                if version is not None:  # None: nothing new to publish (no practitioner answered here)
                    self.publish_responses(version, tables, every_s)
            except Exception:
                log.exception("responses publication iteration failed")
            stop_event.wait(poll_s)
