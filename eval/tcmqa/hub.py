"""Publication to the Hub: the evaluation queue's results, outputs, probes and request statuses, in few commits.

The queue lives in a database (``tcmqa.store``); the Hub is only where finished work is published.
A finished job is an entry in the store's publication outbox; a ``Publisher`` (one thread in the app or
a worker) drains that outbox into the benchmark dataset repo, many jobs per commit:

    results/<job id>.parquet              one row, typed with ``tcmqa.schema.RESULTS`` (``results`` config)
    outputs/<job id>-part-NNNNN.parquet   the job's per-item outputs (``outputs`` config)
    probes/<job id>-part-NNNNN.parquet    the job's per-item probe rows (``probes`` config), if it was probed

and, when a requests repo is given, mirrors the queue's statuses there at most once per
``mirror_every_s`` (``requests/<job id>.json``, the Open LLM Leaderboard's convention), only for jobs
whose status changed. Nothing commits per heartbeat or per page view.

Only full-coverage rows are published (:func:`partial_reason`): a row scored on fewer items than its corpus
holds (``--limit``, ``--subset-only``, a shard) would stand on the board as the model's result. Such a job
stays FINISHED in the store with its row; its publication is set aside as "not published: partial" (the
reason in the outbox's ``last_error`` and the log) and never retried.

The Hub caps commits per repository (about 128 an hour) and answers HTTP 429 past it; it also has
bad minutes (5xx, dropped connections). Every call goes through ``with_retries`` (exponential backoff
with full jitter, ``Retry-After`` honoured); a publication that still fails is recorded in the store
(``publication_failed``) and tried again later, so the queue never waits on the Hub. The Publisher
also keeps its own commit budget per repo (``commit_limit``), below the Hub's cap, so that a busy
queue slows publication down (bigger batches) instead of running into 429s.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import email.utils
import io
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from tcmqa.leaderboard.board import coverage
from tcmqa.schema import RESULTS
from tcmqa.store.admin import NotAllowed
from tcmqa.store.jobs import FINISHED

log = logging.getLogger("tcmqa.hub")
T = TypeVar("T")

RESULTS_DIR = "results"
OUTPUTS_DIR = "outputs"
PROBES_DIR = "probes"
REQUESTS_DIR = "requests"
MIRROR_CURSOR = "hub.mirror.cursor"  # store state: status_at of the newest status change mirrored
MIRROR_LAST = "hub.mirror.last_commit"  # store state: wall time of the last mirror commit
RESPONSES_VERSION = "hub.responses.version"  # store state: the practice version last published
RESPONSES_LAST = "hub.responses.last_commit"  # store state: wall time of the last responses commit
MIRROR_SENT = "hub.mirror.sent"  # store state: {job id: [status, status_at]} mirrored near the cursor
NEVER_S = 100 * 365 * 86400.0  # the retry delay of a publication set aside for good (a partial row)


def _network_errors() -> tuple[type[BaseException], ...]:
    """Connection errors and timeouts of every HTTP client the Hub client may be running on."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import httpx2

        errors.append(httpx2.TransportError)
    except ImportError:  # pragma: no cover - huggingface_hub < 2 runs on requests/httpx
        pass
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:  # pragma: no cover
        pass
    try:
        import requests

        errors += [requests.ConnectionError, requests.Timeout]
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


NETWORK_ERRORS = _network_errors()


def http_status(err: BaseException) -> int | None:
    """The HTTP status of a Hub error, None for anything that is not an HTTP answer."""
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def retry_after(err: BaseException) -> float | None:
    """Seconds the Hub asked us to wait (``Retry-After``: seconds or an HTTP date), if it did."""
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


def is_transient(err: BaseException) -> bool:
    """429, 5xx, dropped connections and timeouts: worth another try. Any other error is final."""
    if isinstance(err, OfflineModeIsEnabled):  # a ConnectionError, but one that no waiting cures
        return False
    if isinstance(err, HfHubHTTPError):
        status = http_status(err)
        return status == 429 or (status is not None and status >= 500)
    return isinstance(err, NETWORK_ERRORS)


def with_retries(
    call: Callable[[], T],
    *,
    attempts: int = 5,
    base_s: float = 1.0,
    max_s: float = 60.0,
    sleep: Callable[[float], Any] = time.sleep,
    rng: random.Random | None = None,
    what: str = "Hub call",
) -> T:
    """``call()``, retried on transient errors (``is_transient``) up to ``attempts`` tries in all.

    Waits between tries are exponential with full jitter (uniform in ``[0, min(max_s, base_s * 2**i)]``);
    a ``Retry-After`` from the Hub is honoured (waited at least). A Hub that asks for more than ``max_s``
    is not waited on here: its error is raised at once, and the caller reschedules with ``retry_after(err)``.
    Errors that no retry can cure (4xx other than 429, offline mode, bugs) are raised at once as they
    are: a ``HfHubHTTPError`` carries the Hub's own message.
    """
    rng = rng or random.Random()
    attempts = max(1, attempts)
    for attempt in range(attempts):
        try:
            return call()
        except Exception as err:
            if not is_transient(err) or attempt == attempts - 1:
                raise
            asked = retry_after(err)
            if asked is not None and asked > max_s:
                raise
            delay = rng.uniform(0.0, min(max_s, base_s * 2**attempt))
            if asked is not None:
                delay = max(delay, asked)
            log.info("%s failed (%s), try %d/%d; retrying in %.2fs", what, _short(err), attempt + 1, attempts, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _job_level(err: BaseException) -> bool:
    """Whether a failed publication is likely the fault of what was sent, not of the Hub or the repo.

    A local error (a row that does not fit ``RESULTS``) or a request the Hub refused as such (400, 413,
    422) is; a transient error, an auth or missing-repo error (401, 403, 404) or offline mode is not.
    """
    status = http_status(err)
    if status is not None:
        return status in (400, 413, 422)
    return not isinstance(err, (*NETWORK_ERRORS, OfflineModeIsEnabled))


def partial_reason(row: dict[str, Any]) -> str | None:
    """Why ``row`` is not a full-coverage row (coverage below 100%, or fewer items scored than its corpus
    holds), or None. A row that records neither coverage nor corpus size cannot be told partial: it passes."""
    n, n_corpus, value = row.get("n"), row.get("n_corpus"), coverage(row)
    if (value is not None and value < 100 - 1e-6) or (n is not None and n_corpus and n < n_corpus):
        shown = "unknown" if value is None else f"{value:.4g}%"
        return f"not published: partial: coverage {shown}, {n} of the corpus's {n_corpus} scorable items scored"
    return None


def _short(err: BaseException, limit: int = 300) -> str:
    status = http_status(err)
    text = " ".join(str(err).split()) or type(err).__name__
    text = f"HTTP {status}: {text}" if status and not text.startswith(str(status)) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def results_parquet(row: dict[str, Any]) -> bytes:
    """One results row as Parquet typed with ``RESULTS`` (the ``results`` config); unknown keys are dropped."""
    full = RESULTS.encode_example({name: row.get(name) for name in RESULTS})
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([full], schema=RESULTS.arrow_schema), buf)
    return buf.getvalue()


_PATH = re.compile(r"(?<![\w.:/~-])(?:~|[A-Za-z]:)?(?:[/\\][\w.@+-]+){2,}[/\\]?")


def _redact(text: str, limit: int = 500) -> str:
    """A reason fit for a public file: local paths replaced, length capped."""
    text = _PATH.sub("<path>", text or "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(t: float | None) -> str | None:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def request_json(job: Any) -> dict[str, Any]:
    """A job as a public request file (Open LLM Leaderboard convention): no log tail, no local paths."""
    meta = getattr(job, "meta", None) or {}
    status_at = getattr(job, "status_at", None) or job.updated_at
    return {
        "job_id": job.id,
        "model": job.model,
        "revision": job.revision,
        "protocol": job.protocol,
        "status": job.status,
        "reason": _redact(job.reason),
        "attempts": job.attempts,
        "submitted_time": _iso(job.submitted_at),
        "updated_time": _iso(status_at),
        **{key: meta[key] for key in ("family", "params_b") if meta.get(key) is not None},
    }


@dataclasses.dataclass
class _Budget:
    """Commits made to one repo in the last ``window_s`` seconds (the Publisher's own cap)."""

    limit: int
    window_s: float
    times: collections.deque[float] = dataclasses.field(default_factory=collections.deque)

    def wait(self, now: float) -> float:
        """Seconds until one more commit fits (0 when it fits now)."""
        while self.times and self.times[0] <= now - self.window_s:
            self.times.popleft()
        return 0.0 if len(self.times) < self.limit else self.times[0] + self.window_s - now


class Publisher:
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

    def __init__(
        self,
        store: Any,
        api: Any,
        repo_id: str,
        requests_repo: str | None = None,
        mirror_every_s: float = 60.0,
        batch: int = 50,
        *,
        commit_limit: tuple[int, float] | None = (100, 3600.0),
        attempts: int = 5,
        base_s: float = 1.0,
        max_s: float = 60.0,
        fail_base_s: float = 30.0,
        fail_max_s: float = 3600.0,
        max_batch_bytes: int = 1 << 30,
        mirror_overlap_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Any] = time.sleep,
        rng: random.Random | None = None,
    ):
        self.store = store
        self.api = api
        self.repo_id = repo_id
        self.requests_repo = requests_repo
        self.mirror_every_s = mirror_every_s
        self.batch = batch
        self.commit_limit = commit_limit
        self.attempts, self.base_s, self.max_s = attempts, base_s, max_s
        self.fail_base_s, self.fail_max_s = fail_base_s, fail_max_s
        self.max_batch_bytes = max_batch_bytes
        self.mirror_overlap_s = mirror_overlap_s
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self._budgets: dict[str, _Budget] = {}
        self._held_until: dict[str, float] = {}  # repo -> clock time before which we leave it alone
        self._failures: dict[str, int] = collections.defaultdict(int)  # repo -> consecutive failed commits
        self._mirrored: dict[str, tuple[str, float]] | None = None  # job id -> (status, status_at) mirrored
        self._requests_repo_ready = False
        self._suspects: set[str] = set()  # jobs of a batch that failed for good: published one by one
        self._lock = threading.RLock()
        self.commits = 0  # commits this Publisher made (results and mirror)

    # -- plumbing --------------------------------------------------------------------------------
    def _call(self, fn: Callable[[], T], what: str) -> T:
        return with_retries(
            fn, attempts=self.attempts, base_s=self.base_s, max_s=self.max_s, sleep=self.sleep, rng=self.rng, what=what
        )

    def _budget(self, repo: str) -> _Budget | None:
        if self.commit_limit is None:
            return None
        return self._budgets.setdefault(repo, _Budget(*self.commit_limit))

    def _ready(self, repo: str) -> bool:
        """Whether ``repo`` may be committed to now (not held after failures, budget left)."""
        now = self.clock()
        if self._held_until.get(repo, 0.0) > now:
            return False
        budget = self._budget(repo)
        wait = budget.wait(now) if budget else 0.0
        if wait > 0:
            log.debug("%s: commit budget %s spent; next commit in %.0fs", repo, self.commit_limit, wait)
            return False
        return True

    def _commit(self, repo: str, operations: list[Any], message: str) -> str:
        info = self._call(
            lambda: self.api.create_commit(repo, operations, commit_message=message, repo_type="dataset"),
            f"commit to {repo}",
        )
        budget = self._budget(repo)
        if budget:
            budget.times.append(self.clock())
        self._failures.pop(repo, None)
        self.commits += 1
        return str(getattr(info, "oid", None) or getattr(info, "commit_url", None) or info)

    def _failed(self, repo: str, err: BaseException, attempts: int = 0) -> float:
        """Hold ``repo`` after a failed commit; returns the delay before the next try.

        The delay doubles with the repo's consecutive failures (or the jobs' earlier ``attempts``, which
        survive a restart), capped at ``fail_max_s``; a longer ``Retry-After`` from the Hub wins.
        """
        self._failures[repo] += 1
        asked = retry_after(err)
        n = max(self._failures[repo], attempts + 1)
        backoff = min(self.fail_max_s, self.fail_base_s * 2 ** min(n - 1, 30))
        delay = max(asked, backoff) if asked is not None else backoff
        self._held_until[repo] = self.clock() + delay
        return delay

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
                operations = self._operations(chosen)
                models = sorted({pub.job.model for pub in chosen})
                message = f"results of {len(chosen)} evaluation(s): " + ", ".join(models[:5])
                if len(models) > 5:
                    message += f" and {len(models) - 5} more"
                commit = self._commit(self.repo_id, operations, message)
            except Exception as err:
                attempts = max(getattr(p, "attempts", 0) for p in chosen)
                if _job_level(err) and len(chosen) > 1:
                    # maybe one job's fault (a row that does not fit the schema, a refused file): try each
                    # alone, so that one bad job cannot hold back the others
                    self._suspects.update(ids)
                    log.warning("publishing %d job(s) failed: %s; trying them one by one", len(ids), _short(err))
                    delay = 0.0
                elif _job_level(err):  # that job's backoff only; the repo stays open to the others
                    delay = min(self.fail_max_s, self.fail_base_s * 2 ** min(attempts, 30))
                else:
                    delay = self._failed(self.repo_id, err, attempts)
                if delay:
                    log.warning(
                        "publishing %d job(s) to %s failed: %s; retrying in %.3gs",
                        len(ids),
                        self.repo_id,
                        _short(err),
                        delay,
                    )
                try:
                    self.store.publication_failed(ids, _short(err, 2000), delay)
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
    def _operations(pubs: Iterable[Any]) -> list[CommitOperationAdd]:
        """Each job's results file, then its outputs and probes parts: every file of a job in one commit."""
        operations = []
        for pub in pubs:
            job_id = pub.job.id
            operations.append(CommitOperationAdd(f"{RESULTS_DIR}/{job_id}.parquet", results_parquet(pub.row)))
            for folder, parts in ((OUTPUTS_DIR, pub.outputs), (PROBES_DIR, pub.probes)):
                for i, data in enumerate(parts):
                    operations.append(CommitOperationAdd(f"{folder}/{job_id}-part-{i:05d}.parquet", bytes(data)))
        return operations

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
                log.warning("importing published results from %s failed: %s", self.repo_id, _short(err))
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

    # -- request statuses ------------------------------------------------------------------------
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
                    "mirroring %d request(s) to %s failed: %s; retrying in %.3gs", len(fresh), repo, _short(err), delay
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

    # -- the responses and subset configs (practitioner mode) ---------------------------------------
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
                    "publishing the responses to %s failed: %s; retrying in %.3gs", self.repo_id, _short(err), delay
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


def _status_at(job: Any) -> float:
    value = getattr(job, "status_at", None)
    return float(value if value is not None else job.updated_at)
