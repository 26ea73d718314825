"""The evaluation queue and its results: one interface, an embedded SQLite store and a Hub store.

The web process enqueues and reads; workers (other processes, maybe other machines) claim, heartbeat
and record. Every state change is atomic so that two workers never both run a job and a job that is
re-run after a crash is recorded exactly once: a claim carries a token, and heartbeat/finish/fail
only succeed while the job is still RUNNING under that token. Results and outputs are keyed by job id,
so a repeated write replaces rather than duplicates.

    sqlite:  a directory holding queue.sqlite (WAL) and outputs/<job id>/part-*.parquet
    hub:     requests/<job id>.json in a requests dataset repo; results/<job id>.parquet and
             outputs/<job id>-part-*.parquet in the benchmark dataset repo (its results/outputs configs)
"""

from __future__ import annotations

import abc
import dataclasses
import io
import json
import os
import random
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PENDING, RUNNING, FINISHED, FAILED = "PENDING", "RUNNING", "FINISHED", "FAILED"
LIVE = (PENDING, RUNNING, FINISHED)  # a (model, revision, protocol) in one of these is not resubmittable


class DuplicateError(Exception):
    """The same (model, revision, protocol) is already pending, running or finished."""

    def __init__(self, job: Job):
        super().__init__(f"{job.model}@{job.revision[:12]} ({job.protocol}) is already {job.status}: job {job.id}")
        self.job = job


@dataclasses.dataclass
class Job:
    """One submission and its life in the queue; ``claim`` identifies the attempt that owns it."""

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

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Job:
        return cls(**json.loads(text))


def new_job(model: str, revision: str, protocol: str, user: str, meta: dict[str, Any] | None = None) -> Job:
    now = time.time()
    job_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + "-" + uuid.uuid4().hex[:8]
    return Job(job_id, model, revision, protocol, user, PENDING, now, now, meta=dict(meta or {}))


class Store(abc.ABC):
    """What the Space and the workers need from a queue; both implementations pass one contract test."""

    @abc.abstractmethod
    def submit(self, model: str, revision: str, protocol: str, user: str, meta: dict[str, Any] | None = None) -> Job:
        """Enqueue a PENDING job, or raise DuplicateError pointing at the live one."""

    @abc.abstractmethod
    def jobs(self) -> list[Job]:
        """Every job, newest first."""

    def get(self, job_id: str) -> Job | None:
        return next((job for job in self.jobs() if job.id == job_id), None)

    def find(self, model: str, revision: str, protocol: str) -> Job | None:
        """The live (pending, running or finished) job for this key, if any."""
        return next(
            (
                j
                for j in self.jobs()
                if (j.model, j.revision, j.protocol) == (model, revision, protocol) and j.status in LIVE
            ),
            None,
        )

    def submitted_since(self, user: str, since: float) -> int:
        return sum(1 for job in self.jobs() if job.user == user and job.submitted_at >= since)

    @abc.abstractmethod
    def claim(self, worker: str) -> Job | None:
        """Atomically move the oldest PENDING job to RUNNING for this worker, or return None."""

    @abc.abstractmethod
    def heartbeat(self, job: Job, progress: str = "") -> bool:
        """Refresh the claim; False if this attempt no longer owns the job (stop working on it)."""

    @abc.abstractmethod
    def finish(self, job: Job, row: dict[str, Any], outputs: list[Path]) -> bool:
        """Record the results row and outputs and mark FINISHED; False if the claim was lost."""

    @abc.abstractmethod
    def fail(self, job: Job, reason: str, log_tail: str = "") -> bool:
        """Mark FAILED with a reason the submitter can read; False if the claim was lost."""

    @abc.abstractmethod
    def requeue_stale(self, stale_after: float, max_attempts: int) -> list[Job]:
        """Re-queue RUNNING jobs whose heartbeat is older than ``stale_after`` s; FAIL those out of attempts."""

    @abc.abstractmethod
    def results(self) -> list[dict[str, Any]]:
        """Every recorded results row."""

    @abc.abstractmethod
    def outputs_files(self) -> list[Path]:
        """Local paths of every recorded per-item outputs Parquet file."""

    @abc.abstractmethod
    def version(self) -> str:
        """Changes whenever results change, so readers can cache."""


def _stale_verdict(job: Job, max_attempts: int, now: float) -> Job:
    """The requeued or failed version of a job whose worker went silent."""
    if job.attempts >= max_attempts:
        reason = f"the worker stopped responding on {job.attempts} attempt(s); giving up after {max_attempts}"
        return dataclasses.replace(job, status=FAILED, claim="", reason=reason, updated_at=now)
    return dataclasses.replace(
        job, status=PENDING, claim="", progress="re-queued: worker stopped responding", updated_at=now
    )


# ------------------------------------------------------------------------------------------------
# SQLite: the embedded default
# ------------------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, model TEXT NOT NULL, revision TEXT NOT NULL, protocol TEXT NOT NULL,
  user TEXT NOT NULL, status TEXT NOT NULL, submitted_at REAL, updated_at REAL, attempts INTEGER,
  claim TEXT, heartbeat_at REAL, progress TEXT, reason TEXT, log_tail TEXT, meta TEXT);
CREATE UNIQUE INDEX IF NOT EXISTS one_live_job ON jobs(model, revision, protocol) WHERE status != 'FAILED';
CREATE INDEX IF NOT EXISTS by_status ON jobs(status, submitted_at);
CREATE TABLE IF NOT EXISTS results (job_id TEXT PRIMARY KEY, row TEXT NOT NULL, recorded_at REAL);
"""
_COLUMNS = [f.name for f in dataclasses.fields(Job)]


class SQLiteStore(Store):
    """A local directory: queue.sqlite in WAL mode (many readers, one writer) and the outputs files.

    Each write is one ``BEGIN IMMEDIATE`` transaction, so claims from several worker processes
    serialize on SQLite's write lock; the partial unique index makes duplicate refusal atomic.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = self.root / "queue.sqlite"
        self.outputs_root = self.root / "outputs"
        con = self._connect()
        try:
            con.executescript(_SCHEMA)
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.db, timeout=60, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA busy_timeout=60000")
        con.row_factory = sqlite3.Row
        return con

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            yield con
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()

    @staticmethod
    def _job(row: sqlite3.Row) -> Job:
        values = dict(row)
        values["meta"] = json.loads(values["meta"] or "{}")
        return Job(**values)

    @staticmethod
    def _values(job: Job) -> list[Any]:
        return [json.dumps(job.meta) if name == "meta" else getattr(job, name) for name in _COLUMNS]

    def submit(self, model: str, revision: str, protocol: str, user: str, meta: dict[str, Any] | None = None) -> Job:
        job = new_job(model, revision, protocol, user, meta)
        with self._tx() as con:
            live = con.execute(
                "SELECT * FROM jobs WHERE model=? AND revision=? AND protocol=? AND status != 'FAILED'",
                (model, revision, protocol),
            ).fetchone()
            if live:
                raise DuplicateError(self._job(live))
            marks = ",".join("?" * len(_COLUMNS))
            con.execute(f"INSERT INTO jobs ({','.join(_COLUMNS)}) VALUES ({marks})", self._values(job))
        return job

    def jobs(self) -> list[Job]:
        con = self._connect()
        try:
            return [self._job(r) for r in con.execute("SELECT * FROM jobs ORDER BY submitted_at DESC, id DESC")]
        finally:
            con.close()

    def get(self, job_id: str) -> Job | None:
        con = self._connect()
        try:
            row = con.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
            return self._job(row) if row else None
        finally:
            con.close()

    def claim(self, worker: str) -> Job | None:
        now = time.time()
        with self._tx() as con:
            row = con.execute("SELECT * FROM jobs WHERE status='PENDING' ORDER BY submitted_at, id LIMIT 1").fetchone()
            if row is None:
                return None
            job = self._job(row)
            job = dataclasses.replace(
                job,
                status=RUNNING,
                attempts=job.attempts + 1,
                claim=f"{worker}#{job.attempts + 1}",
                heartbeat_at=now,
                updated_at=now,
                progress="claimed",
                reason="",
                log_tail="",
            )
            con.execute(
                "UPDATE jobs SET status=?, attempts=?, claim=?, heartbeat_at=?, updated_at=?, progress=?, "
                "reason='', log_tail='' "
                "WHERE id=?",
                (job.status, job.attempts, job.claim, now, now, job.progress, job.id),
            )
            return job

    def _owned_update(self, con: sqlite3.Connection, job: Job, sets: str, values: tuple[Any, ...]) -> bool:
        cur = con.execute(
            f"UPDATE jobs SET {sets} WHERE id=? AND claim=? AND status='RUNNING'", (*values, job.id, job.claim)
        )
        return cur.rowcount == 1

    def heartbeat(self, job: Job, progress: str = "") -> bool:
        now = time.time()
        with self._tx() as con:
            return self._owned_update(con, job, "heartbeat_at=?, updated_at=?, progress=?", (now, now, progress))

    def finish(self, job: Job, row: dict[str, Any], outputs: list[Path]) -> bool:
        staging = self.outputs_root / f".{job.id}.{uuid.uuid4().hex[:8]}"
        staging.mkdir(parents=True)
        for i, path in enumerate(sorted(outputs)):
            shutil.copyfile(path, staging / f"part-{i:05d}.parquet")
        try:
            with self._tx() as con:
                now = time.time()
                if not self._owned_update(con, job, "status=?, updated_at=?, progress=?", (FINISHED, now, "done")):
                    return False
                con.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?)", (job.id, json.dumps(row), now))
                final = self.outputs_root / job.id
                shutil.rmtree(final, ignore_errors=True)
                os.replace(staging, final)  # inside the transaction: a failed rename rolls back FINISHED
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def fail(self, job: Job, reason: str, log_tail: str = "") -> bool:
        with self._tx() as con:
            return self._owned_update(
                con, job, "status=?, updated_at=?, reason=?, log_tail=?", (FAILED, time.time(), reason, log_tail)
            )

    def requeue_stale(self, stale_after: float, max_attempts: int) -> list[Job]:
        now = time.time()
        changed = []
        with self._tx() as con:
            rows = con.execute("SELECT * FROM jobs WHERE status='RUNNING' AND heartbeat_at < ?", (now - stale_after,))
            for row in rows.fetchall():
                job = _stale_verdict(self._job(row), max_attempts, now)
                con.execute(
                    "UPDATE jobs SET status=?, claim=?, reason=?, progress=?, updated_at=? WHERE id=?",
                    (job.status, job.claim, job.reason, job.progress, now, job.id),
                )
                changed.append(job)
        return changed

    def results(self) -> list[dict[str, Any]]:
        con = self._connect()
        try:
            return [json.loads(r["row"]) for r in con.execute("SELECT row FROM results ORDER BY recorded_at")]
        finally:
            con.close()

    def outputs_files(self) -> list[Path]:
        return sorted(self.outputs_root.glob("[!.]*/part-*.parquet"))

    def version(self) -> str:
        con = self._connect()
        try:
            count, last = con.execute("SELECT count(*), max(recorded_at) FROM results").fetchone()
            return f"{count}:{last}"
        finally:
            con.close()


# ------------------------------------------------------------------------------------------------
# Hub datasets: for deployment
# ------------------------------------------------------------------------------------------------


class HubStore(Store):
    """Requests as JSON files in a dataset repo; every state change is a commit on ``parent_commit``.

    A commit whose parent is no longer the head is refused by the Hub (HTTP 412), so of two workers
    claiming at once exactly one wins; the loser re-reads and tries the next job. Results and outputs
    go to the benchmark dataset repo under names keyed by job id (a re-run replaces them).
    """

    REQUESTS_DIR = "requests"
    CONFLICT_RETRIES = 200

    def __init__(self, requests_repo: str, results_repo: str, api: Any = None, cache_dir: str | Path | None = None):
        from huggingface_hub import HfApi

        self.requests_repo = requests_repo
        self.results_repo = results_repo
        self.api = api or HfApi()
        self.cache_dir = Path(cache_dir or Path.home() / ".cache" / "tcmqa" / "hubstore").expanduser()

    # -- reading ---------------------------------------------------------------------------------
    def _head(self, repo: str) -> str:
        return self.api.repo_info(repo, repo_type="dataset").sha

    def _read(self, repo: str, path: str, revision: str) -> Path:
        return Path(
            self.api.hf_hub_download(repo, path, repo_type="dataset", revision=revision, cache_dir=self.cache_dir)
        )

    def _snapshot(self) -> tuple[str, list[Job]]:
        head = self._head(self.requests_repo)
        files = self.api.list_repo_files(self.requests_repo, repo_type="dataset", revision=head)
        paths = [f for f in files if f.startswith(self.REQUESTS_DIR + "/") and f.endswith(".json")]
        jobs = [Job.from_json(self._read(self.requests_repo, p, head).read_text()) for p in paths]
        return head, sorted(jobs, key=lambda j: (j.submitted_at, j.id), reverse=True)

    def jobs(self) -> list[Job]:
        return self._snapshot()[1]

    # -- writing ---------------------------------------------------------------------------------
    def _commit(self, repo: str, files: dict[str, bytes], message: str, parent: str | None) -> None:
        from huggingface_hub import CommitOperationAdd

        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=data) for p, data in files.items()]
        self.api.create_commit(repo, ops, commit_message=message, repo_type="dataset", parent_commit=parent)

    def _job_file(self, job: Job) -> dict[str, bytes]:
        return {f"{self.REQUESTS_DIR}/{job.id}.json": job.to_json().encode()}

    def _transact(self, change: Any) -> Any:
        """Run ``change(jobs) -> (result, jobs_to_write, message)`` until its commit lands on the head it read."""
        from huggingface_hub.errors import HfHubHTTPError

        for attempt in range(self.CONFLICT_RETRIES):
            head, jobs = self._snapshot()
            result, writes, message = change(jobs)
            if not writes:
                return result
            files = {k: v for job in writes for k, v in self._job_file(job).items()}
            try:
                self._commit(self.requests_repo, files, message, parent=head)
                return result
            except HfHubHTTPError as err:
                if getattr(err.response, "status_code", None) not in (409, 412):
                    raise
                time.sleep(random.uniform(0, 0.05 * min(attempt + 1, 10)))
        raise RuntimeError(f"{self.requests_repo}: gave up after {self.CONFLICT_RETRIES} conflicting commits")

    def submit(self, model: str, revision: str, protocol: str, user: str, meta: dict[str, Any] | None = None) -> Job:
        job = new_job(model, revision, protocol, user, meta)

        def change(jobs: list[Job]) -> tuple[Job, list[Job], str]:
            live = next(
                (
                    j
                    for j in jobs
                    if (j.model, j.revision, j.protocol) == (model, revision, protocol) and j.status in LIVE
                ),
                None,
            )
            if live:
                raise DuplicateError(live)
            return job, [job], f"submit {model}@{revision[:12]} ({job.id})"

        return self._transact(change)

    def claim(self, worker: str) -> Job | None:
        def change(jobs: list[Job]) -> tuple[Job | None, list[Job], str]:
            pending = sorted((j for j in jobs if j.status == PENDING), key=lambda j: (j.submitted_at, j.id))
            if not pending:
                return None, [], ""
            now, job = time.time(), pending[0]
            job = dataclasses.replace(
                job,
                status=RUNNING,
                attempts=job.attempts + 1,
                claim=f"{worker}#{job.attempts + 1}",
                heartbeat_at=now,
                updated_at=now,
                progress="claimed",
                reason="",
                log_tail="",
            )
            return job, [job], f"claim {job.id} by {worker}"

        return self._transact(change)

    def _owned(self, job: Job, message: str, **updates: Any) -> bool:
        def change(jobs: list[Job]) -> tuple[bool, list[Job], str]:
            current = next((j for j in jobs if j.id == job.id), None)
            if current is None or current.status != RUNNING or current.claim != job.claim:
                return False, [], ""
            return True, [dataclasses.replace(current, updated_at=time.time(), **updates)], f"{message} {job.id}"

        return self._transact(change)

    def heartbeat(self, job: Job, progress: str = "") -> bool:
        return self._owned(job, "heartbeat", heartbeat_at=time.time(), progress=progress)

    def finish(self, job: Job, row: dict[str, Any], outputs: list[Path]) -> bool:
        current = self.get(job.id)
        if current is None or current.status != RUNNING or current.claim != job.claim:
            return False
        files = {f"results/{job.id}.parquet": _results_parquet(row)}
        for i, path in enumerate(sorted(outputs)):
            files[f"outputs/{job.id}-part-{i:05d}.parquet"] = Path(path).read_bytes()
        # Distinct, job-keyed paths: appending needs no parent, and a re-run replaces its own files.
        self._commit(self.results_repo, files, f"results of {row.get('model')} ({job.id})", parent=None)
        return self._owned(job, "finish", status=FINISHED, progress="done")

    def fail(self, job: Job, reason: str, log_tail: str = "") -> bool:
        return self._owned(job, "fail", status=FAILED, reason=reason, log_tail=log_tail)

    def requeue_stale(self, stale_after: float, max_attempts: int) -> list[Job]:
        def change(jobs: list[Job]) -> tuple[list[Job], list[Job], str]:
            now = time.time()
            stale = [
                _stale_verdict(j, max_attempts, now)
                for j in jobs
                if j.status == RUNNING and j.heartbeat_at < now - stale_after
            ]
            return stale, stale, f"requeue {len(stale)} stale job(s)"

        return self._transact(change)

    # -- results ---------------------------------------------------------------------------------
    def _result_paths(self, head: str) -> list[str]:
        files = self.api.list_repo_files(self.results_repo, repo_type="dataset", revision=head)
        return sorted(files)

    def results(self) -> list[dict[str, Any]]:
        import pandas as pd

        head = self._head(self.results_repo)
        rows: list[dict[str, Any]] = []
        for path in self._result_paths(head):
            if path.startswith("results/") and path.endswith(".parquet"):
                frame = pd.read_parquet(self._read(self.results_repo, path, head))
                rows.extend(frame.astype(object).where(frame.notna(), None).to_dict("records"))
        return rows

    def outputs_files(self) -> list[Path]:
        head = self._head(self.results_repo)
        paths = [p for p in self._result_paths(head) if p.startswith("outputs/") and p.endswith(".parquet")]
        return [self._read(self.results_repo, p, head) for p in paths]

    def version(self) -> str:
        return self._head(self.results_repo)


def _results_parquet(row: dict[str, Any]) -> bytes:
    """One results row as Parquet with the dataset's RESULTS features (the ``results`` config)."""
    import datasets

    from tcmqa.schema import RESULTS

    full = {name: row.get(name) for name in RESULTS}
    buf = io.BytesIO()
    datasets.Dataset.from_list([full], features=RESULTS).to_parquet(buf)
    return buf.getvalue()


def open_store(spec: str, api: Any = None) -> Store:
    """``hub:REQUESTS_REPO[,RESULTS_REPO]`` for the Hub store; anything else is a SQLite store directory."""
    if spec.startswith("hub:"):
        repos = spec[4:].split(",")
        return HubStore(repos[0], repos[-1], api=api)
    return SQLiteStore(spec.removeprefix("sqlite:"))
