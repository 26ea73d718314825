"""The requests mirror: ``requests/<job id>.json`` in the requests repo for the jobs whose status changed,
at most one commit per ``mirror_every_s`` (the Open LLM Leaderboard's convention)."""

from __future__ import annotations

import collections
import json
import logging
from typing import Any

from huggingface_hub import CommitOperationAdd

from tcmqa.hub.committer import Committer
from tcmqa.hub.files import REQUESTS_DIR, request_json
from tcmqa.hub.retries import short

log = logging.getLogger("tcmqa.hub")

MIRROR_CURSOR = "hub.mirror.cursor"  # store state: status_at of the newest status change mirrored
MIRROR_LAST = "hub.mirror.last_commit"  # store state: wall time of the last mirror commit
MIRROR_SENT = "hub.mirror.sent"  # store state: {job id: [status, status_at]} mirrored near the cursor


class RequestsMirror(Committer):
    """Mirrors the queue's statuses to ``requests_repo`` (nothing when there is none)."""

    def mirror_requests(self, force: bool = False) -> int:
        """Commit ``requests/<job id>.json`` for jobs whose status changed since the last mirror.

        At most one commit per ``mirror_every_s`` (``force`` skips that wait, not the budget); no commit
        when no status changed. Returns how many request files were written; never raises.
        """
        repo = self.requests_repo
        if not repo:
            return 0
        with self._lock:
            try:
                now = self.clock()
                last = float(self.store.get_state(MIRROR_LAST) or 0.0)
                if not force and now - last < self.mirror_every_s:
                    return 0
                if not self._ready(repo):
                    return 0
                cursor = float(self.store.get_state(MIRROR_CURSOR) or 0.0)
                # status_at is set when a transaction starts; one that commits after a newer change was
                # mirrored would hide behind the cursor, so look back a little and skip what was sent
                # (never below 0: imported jobs have status_at 0 and are not this queue's to mirror)
                jobs = self.store.jobs_changed_since(max(0.0, cursor - self.mirror_overlap_s))
                if self._mirrored is None:
                    sent = json.loads(self.store.get_state(MIRROR_SENT) or "{}")
                    self._mirrored = {k: (v[0], float(v[1])) for k, v in sent.items()}
            except Exception:
                log.exception("reading status changes for the requests mirror failed")
                return 0
            mirrored = self._mirrored
            fresh = [j for j in jobs if _status_at(j) > 0 and mirrored.get(j.id) != (j.status, _status_at(j))]
            if not fresh:
                return 0
            try:
                if not self._requests_repo_ready:
                    self._call(lambda: self.api.create_repo(repo, repo_type="dataset", exist_ok=True), f"create {repo}")
                    self._requests_repo_ready = True
                operations = [
                    CommitOperationAdd(
                        f"{REQUESTS_DIR}/{j.id}.json",
                        json.dumps(request_json(j), ensure_ascii=False, indent=1, sort_keys=True).encode(),
                    )
                    for j in fresh
                ]
                counts = collections.Counter(j.status for j in fresh)
                message = "queue: " + ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
                commit = self._commit(repo, operations, message)
            except Exception as err:
                delay = self._failed(repo, err)
                log.warning(
                    "mirroring %d request(s) to %s failed: %s; retrying in %.3gs", len(fresh), repo, short(err), delay
                )
                return 0
            newest = max(max(_status_at(j) for j in fresh), cursor)
            for j in fresh:
                mirrored[j.id] = (j.status, _status_at(j))
            horizon = newest - 2 * self.mirror_overlap_s  # older changes are never looked at again
            self._mirrored = {k: v for k, v in mirrored.items() if v[1] >= horizon}
            try:
                self.store.set_state(MIRROR_LAST, repr(now))
                self.store.set_state(MIRROR_SENT, json.dumps(self._mirrored))
                self.store.set_state(MIRROR_CURSOR, repr(newest))
            except Exception:
                log.exception("saving the requests mirror's cursor failed")
            log.info("mirrored %d request status(es) to %s in %s", len(fresh), repo, commit)
            return len(fresh)


def _status_at(job: Any) -> float:
    value = getattr(job, "status_at", None)
    return float(value if value is not None else job.updated_at)
