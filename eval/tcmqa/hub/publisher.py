"""``Publisher``: the store's publication outbox drained into the results repo, many jobs per commit (results,
outputs and probes files), with the requests mirror and the responses configs; only full-coverage rows
are published (:func:`partial_reason`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

import pyarrow.parquet as pq
from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from tcmqa.hub.files import OUTPUTS_DIR, PROBES_DIR, RESULTS_DIR, results_parquet
from tcmqa.hub.mirror import RequestsMirror
from tcmqa.hub.responses import ResponsesPublisher
from tcmqa.hub.retries import job_level, short
from tcmqa.hub.withheld import WithheldParts, without_items
from tcmqa.leaderboard.board import coverage
from tcmqa.store.admin import NotAllowed
from tcmqa.store.jobs import FINISHED

log = logging.getLogger("tcmqa.hub")

NEVER_S = 100 * 365 * 86400.0  # the retry delay of a publication set aside for good (a partial row)


def partial_reason(row: dict[str, Any]) -> str | None:
    """Why ``row`` is not a full-coverage row (coverage below 100%, or fewer items scored than its corpus
    holds), or None. A row that records neither coverage nor corpus size cannot be told partial: it passes."""
    n, n_corpus, value = row.get("n"), row.get("n_corpus"), coverage(row)
    if (value is not None and value < 100 - 1e-6) or (n is not None and n_corpus and n < n_corpus):
        shown = "unknown" if value is None else f"{value:.4g}%"
        return f"not published: partial: coverage {shown}, {n} of the corpus's {n_corpus} scorable items scored"
    return None


class Publisher(RequestsMirror, ResponsesPublisher, WithheldParts):
    """Drains the store's publication outbox into ``repo_id`` and mirrors statuses to ``requests_repo``.

    ``api`` is an ``HfApi`` (or anything with its ``create_commit``, ``list_repo_files``,
    ``hf_hub_download`` and ``create_repo``). Retries: ``attempts`` tries per call, waits from ``base_s``
    doubling up to ``max_s``. A publication that fails anyway is recorded with ``publication_failed``
    and retried after ``fail_base_s`` doubling per consecutive failure up to ``fail_max_s`` (or the
    Hub's ``Retry-After``); meanwhile the Publisher does not call that repo. ``commit_limit`` is
    (commits, seconds) per repo, the Publisher's own budget (None: none; the Hub's is 128 an hour).
    ``max_batch_bytes`` bounds one commit's payload (at least one job always goes). A batch that fails
    with a final (non-transient) error is retried one job per commit, so one bad job holds back no other.

    Run one Publisher per store: two would both read the same outbox and commit the same files twice.
    """

    # -- results and outputs ---------------------------------------------------------------------
    def publish_pending(self) -> int:
        """One commit for the unpublished jobs (up to ``batch``); returns how many were published.

        Never raises: a failure is logged and recorded in the store (``publication_failed``), and
        those jobs come back from ``unpublished`` once their retry time has come.
        """
        with self._lock:
            if not self._ready(self.repo_id):
                return 0
            try:
                self._release_withheld()
                pending = self.store.unpublished(limit=self.batch)
            except Exception:
                log.exception("reading the publication outbox failed")
                return 0
            pending = self._set_aside_partial(pending)
            if not pending:
                return 0
            suspects = [pub for pub in pending if pub.job.id in self._suspects]
            chosen, size = suspects[:1], sum(pub.nbytes for pub in suspects[:1])
            for pub in pending if not suspects else []:
                if chosen and size + pub.nbytes > self.max_batch_bytes:
                    break
                chosen.append(pub)
                size += pub.nbytes
            ids = [pub.job.id for pub in chosen]
            try:
                operations, left_out = self._operations(chosen, self._open_items())
                self._keep_withheld(left_out)
                models = sorted({pub.job.model for pub in chosen})
                message = f"results of {len(chosen)} evaluation(s): " + ", ".join(models[:5])
                if len(models) > 5:
                    message += f" and {len(models) - 5} more"
                commit = self._commit(self.repo_id, operations, message)
            except Exception as err:
                attempts = max(getattr(p, "attempts", 0) for p in chosen)
                if job_level(err) and len(chosen) > 1:
                    # maybe one job's fault (a row that does not fit the schema, a refused file): try each
                    # alone, so that one bad job cannot hold back the others
                    self._suspects.update(ids)
                    log.warning("publishing %d job(s) failed: %s; trying them one by one", len(ids), short(err))
                    delay = 0.0
                elif job_level(err):  # that job's backoff only; the repo stays open to the others
                    delay = min(self.fail_max_s, self.fail_base_s * 2 ** min(attempts, 30))
                else:
                    delay = self._failed(self.repo_id, err, attempts)
                if delay:
                    log.warning(
                        "publishing %d job(s) to %s failed: %s; retrying in %.3gs",
                        len(ids),
                        self.repo_id,
                        short(err),
                        delay,
                    )
                try:
                    self.store.publication_failed(ids, short(err, 2000), delay)
                except Exception:
                    log.exception("recording the failed publication of %s failed", ids)
                return 0
            try:
                self.store.mark_published(ids, commit)
            except Exception:  # the files are on the Hub; the next publish of these ids rewrites the same paths
                log.exception("published %s in %s, but marking them published failed", ids, commit)
                return 0
            self._suspects.difference_update(ids)
            log.info("published %d job(s) to %s in %s (%.1f MB)", len(ids), self.repo_id, commit, size / 1e6)
            return len(ids)

    def _set_aside_partial(self, pending: list[Any]) -> list[Any]:
        """The publications of full-coverage rows; the others are set aside for good, their reason logged and
        kept in the outbox (their jobs stay FINISHED with their rows in the store)."""
        full = []
        for pub in pending:
            reason = partial_reason(pub.row)
            if reason is None:
                full.append(pub)
                continue
            log.warning("%s (%s): %s; it stays in the store", pub.job.id, pub.job.model, reason)
            try:
                self.store.publication_failed([pub.job.id], reason, NEVER_S)
            except Exception:
                log.exception("setting aside the partial row of %s failed", pub.job.id)
        return full

    @staticmethod
    def _operations(pubs: Iterable[Any], withheld: set[str]) -> tuple[list[CommitOperationAdd], dict[str, set[str]]]:
        """Each job's results file, then its outputs and probes parts without the rows of ``withheld`` items
        (open practice blocks): every file of a job in one commit; and the items each job left out."""
        operations, left_out = [], {}
        for pub in pubs:
            job_id = pub.job.id
            left_out[job_id] = set()
            operations.append(CommitOperationAdd(f"{RESULTS_DIR}/{job_id}.parquet", results_parquet(pub.row)))
            for folder, parts in ((OUTPUTS_DIR, pub.outputs), (PROBES_DIR, pub.probes)):
                for i, data in enumerate(parts):
                    kept, held = without_items(bytes(data), withheld)
                    left_out[job_id] |= held
                    operations.append(CommitOperationAdd(f"{folder}/{job_id}-part-{i:05d}.parquet", kept))
        return operations, left_out

    def import_published(self) -> int | None:
        """Read the Hub's ``results/`` once into ``store.import_results``; how many rows were added.

        Each row carries its job id (the file's name), so an imported job keeps the id it was published
        under. Returns None (logged) when the Hub cannot be read: the app starts anyway with what it has.
        """
        with self._lock:
            try:
                files = self._call(
                    lambda: self.api.list_repo_files(self.repo_id, repo_type="dataset"), f"list {self.repo_id}"
                )
                paths = [f for f in files if f.startswith(RESULTS_DIR + "/") and f.endswith(".parquet")]
                rows: list[dict[str, Any]] = []
                for path in sorted(paths):
                    local = self._call(
                        lambda p=path: self.api.hf_hub_download(self.repo_id, p, repo_type="dataset"), f"read {path}"
                    )
                    job_id = path[len(RESULTS_DIR) + 1 : -len(".parquet")]  # results/<job id>.parquet
                    rows.extend({**row, "job_id": job_id} for row in pq.read_table(local).to_pylist())
                added = self.store.import_results(rows)
            except Exception as err:
                log.warning("importing published results from %s failed: %s", self.repo_id, short(err))
                return None
            log.info("imported %d of %d published result row(s) from %s", added, len(rows), self.repo_id)
            return added

    def withdraw(self, job_id: str, admin: str, reason: str) -> str | None:
        """Unpublish a finished job: one commit that removes its results, outputs and probes files (the reason
        and the admin in its message), then the store's row (:meth:`tcmqa.store.admin.AdminStore.withdraw`).

        The commit comes first: if the Hub refuses it, nothing changed and the error is raised. Returns the
        commit, or None when nothing of the job was published yet.
        """
        with self._lock:  # never beside a publication of the same job
            job = self.store.get(job_id)
            if job is None or job.status != FINISHED:
                raise NotAllowed(f"job {job_id} is {job.status if job else 'unknown'}, not FINISHED")
            files = self._call(
                lambda: self.api.list_repo_files(self.repo_id, repo_type="dataset"), f"list {self.repo_id}"
            )
            mine = (f"{RESULTS_DIR}/{job_id}.parquet", f"{OUTPUTS_DIR}/{job_id}-part-", f"{PROBES_DIR}/{job_id}-part-")
            doomed = sorted(f for f in files if f.startswith(mine))
            commit = None
            if doomed:
                message = f"Withdraw {job.model} (job {job_id}) by {admin}: {reason}"
                commit = self._commit(self.repo_id, [CommitOperationDelete(f) for f in doomed], message)
            self.store.withdraw(job_id, admin, reason)
            log.info("withdrew job %s (%d file(s), commit %s): %s", job_id, len(doomed), commit, reason)
            return commit

    # -- the loop --------------------------------------------------------------------------------
    def run_forever(self, stop_event: threading.Event, poll_s: float = 10.0) -> None:
        """Publish and mirror until ``stop_event`` is set; waits ``poll_s`` when there is nothing to do.

        Retry waits inside a Hub call end early once ``stop_event`` is set.
        """
        self.sleep = stop_event.wait
        log.info(
            "publishing to %s%s", self.repo_id, f", mirroring to {self.requests_repo}" if self.requests_repo else ""
        )
        while not stop_event.is_set():
            published = 0
            try:
                published = self.publish_pending()
                self.mirror_requests()
            except Exception:  # both swallow their own errors; this guards the loop against bugs
                log.exception("publisher iteration failed")
            if published < self.batch:
                stop_event.wait(poll_s)
