"""One contract, two databases: every test runs on a real SQLite file and on a real PostgreSQL server.

Ids ``sqlite`` and ``postgres`` (``pytest -k postgres`` selects the PostgreSQL ones); the server is
started once per session by tests/postgres.py and each test gets a database of its own.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from tcmqa import store as store_module
from tcmqa.store import (
    FAILED,
    FINISHED,
    MIGRATIONS,
    PENDING,
    RUNNING,
    DuplicateError,
    RateLimited,
    SQLiteStore,
    Store,
    open_store,
    store_url,
)

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[list[Store]]:
    """Stores opened by a test, closed (their connections released) after it."""
    stores: list[Store] = []
    yield stores
    for store in stores:
        store.close()


@pytest.fixture
def open_(url: str, tmp_path: Path, opened: list[Store]):
    def open_one(cache: str = "cache") -> Store:
        store = Store(url, cache_dir=tmp_path / cache)
        opened.append(store)
        return store

    return open_one


@pytest.fixture
def store(open_) -> Store:
    return open_()


def _row(model: str) -> dict:
    return {
        "model": model,
        "family": "Gemma3",
        "params_b": 0.27,
        "origin": "evaluated",
        "full": 20.0,
        "revision": SHA,
        "protocol": "v1",
    }


def _outputs(tmp_path: Path, model: str, parts: int = 1) -> list[Path]:
    paths = []
    for i in range(parts):
        path = tmp_path / f"{model.replace('/', '_')}-part-{i}.parquet"
        pd.DataFrame({"model": [model, model], "item_id": [f"{i}-1", f"{i}-2"]}).to_parquet(path)
        paths.append(path)
    return paths


def _probes(folder: Path, model: str) -> list[Path]:
    """A probed run's parts, named as ``tcmqa probe`` names them (the store numbers them in name order)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, probe in (("rotation-00000", "rotation"), ("order-00000", "order"), ("rotation-00001", "rotation")):
        path = folder / f"{name}.parquet"
        pd.DataFrame({"model": [model], "item_id": [name], "probe": [probe]}).to_parquet(path)
        paths.append(path)
    return paths


def _finish(store: Store, tmp_path: Path, model: str) -> str:
    store.submit(model, SHA, "v1", "alice")
    job = store.claim("w")
    assert store.finish(job, _row(model), _outputs(tmp_path, model))
    return job.id


def test_submit_claim_finish_roundtrip(store: Store, tmp_path: Path) -> None:
    job = store.submit("org/a", SHA, "v1", "alice", {"params_b": 0.27})
    assert store.get(job.id).status == PENDING and store.get(job.id).meta == {"params_b": 0.27}
    claimed = store.claim("w1")
    assert claimed.id == job.id and claimed.status == RUNNING and claimed.attempts == 1
    assert store.claim("w2") is None
    assert store.heartbeat(claimed, "12/100 items")
    assert store.get(job.id).progress == "12/100 items"
    assert store.finish(claimed, _row("org/a"), _outputs(tmp_path, "org/a"))
    assert store.get(job.id).status == FINISHED
    assert [r["model"] for r in store.results()] == ["org/a"]
    files = store.outputs_files()
    assert len(files) == 1 and len(pd.read_parquet(files[0])) == 2
    assert files[0] == tmp_path / "cache" / job.id / "part-00000.parquet"


def test_duplicates_refused_until_failed(store: Store) -> None:
    job = store.submit("org/a", SHA, "v1", "alice")
    with pytest.raises(DuplicateError) as err:
        store.submit("org/a", SHA, "v1", "bob")
    assert err.value.job.id == job.id and "PENDING" in str(err.value)
    store.submit("org/a", SHA, "v2", "bob")  # another protocol is another evaluation
    claimed = store.claim("w")
    assert store.fail(claimed, "harness exited with code 1", "Traceback ...")
    failed = store.get(job.id)
    assert (failed.status, failed.reason, failed.log_tail) == (FAILED, "harness exited with code 1", "Traceback ...")
    again = store.submit("org/a", SHA, "v1", "alice")  # a failed one may be resubmitted
    assert store.find("org/a", SHA, "v1").id == again.id


def test_lost_claim_cannot_record(store: Store, tmp_path: Path) -> None:
    store.submit("org/a", SHA, "v1", "alice")
    first = store.claim("w1")
    time.sleep(0.05)
    assert [j.status for j in store.requeue_stale(stale_after=0.01, max_attempts=3)] == [PENDING]
    second = store.claim("w2")
    assert second.attempts == 2
    assert not store.heartbeat(first) and not store.finish(first, _row("org/a"), []) and not store.fail(first, "x")
    assert store.finish(second, _row("org/a"), _outputs(tmp_path, "org/a"))
    assert len(store.results()) == 1 and len(store.outputs_files()) == 1
    assert [p.job.id for p in store.unpublished()] == [second.id]


def test_stale_job_fails_after_max_attempts(store: Store) -> None:
    job = store.submit("org/a", SHA, "v1", "alice")
    for _ in range(2):
        store.claim("w")
        time.sleep(0.02)
        store.requeue_stale(stale_after=0.01, max_attempts=2)
    failed = store.get(job.id)
    assert failed.status == FAILED and "2 attempt" in failed.reason
    assert store.requeue_stale(stale_after=0.01, max_attempts=2) == []


def test_rate_limit_count(store: Store) -> None:
    for i in range(3):
        store.submit(f"org/m{i}", SHA, "v1", "alice")
    store.submit("org/other", SHA, "v1", "bob")
    assert store.submitted_since("alice", time.time() - 60) == 3
    assert store.submitted_since("alice", time.time() + 1) == 0


def test_rate_limit_is_atomic(store: Store) -> None:
    """50 simultaneous submissions of one user under a limit of 5: exactly 5 get in."""

    def submit(i: int) -> str:
        try:
            store.submit(f"org/m{i}", SHA, "v1", "alice", rate_limit=5, rate_window_s=3600)
            return "accepted"
        except RateLimited as err:
            assert (err.limit, err.window_s) == (5, 3600) and err.count >= 5
            return "limited"

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(submit, range(50)))
    assert (outcomes.count("accepted"), outcomes.count("limited")) == (5, 45)
    assert len(store.jobs()) == 5
    store.submit("org/x", SHA, "v1", "bob", rate_limit=5)  # per user
    store.submit("org/y", SHA, "v1", "alice", rate_limit=5, rate_window_s=1e-6)  # outside the window


def test_50_concurrent_submissions(store: Store) -> None:
    with ThreadPoolExecutor(16) as pool:
        jobs = list(pool.map(lambda i: store.submit(f"org/m{i}", SHA, "v1", f"u{i}"), range(50)))
    assert len({j.id for j in jobs}) == 50
    assert sorted(j.model for j in store.jobs()) == sorted(f"org/m{i}" for i in range(50))

    def same(i: int) -> bool:
        try:
            store.submit("org/same", SHA, "v1", f"u{i}")
            return True
        except DuplicateError:
            return False

    with ThreadPoolExecutor(16) as pool:
        accepted = list(pool.map(same, range(50)))
    assert sum(accepted) == 1
    assert sum(j.model == "org/same" for j in store.jobs()) == 1


def test_concurrent_claims_each_job_once(store: Store) -> None:
    for i in range(10):
        store.submit(f"org/m{i}", SHA, "v1", "alice")
    claimed: list[str] = []
    lock = threading.Lock()

    def drain(worker: str) -> None:
        while (job := store.claim(worker)) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=drain, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(j.id for j in store.jobs())


def test_version_changes_with_results(store: Store, tmp_path: Path) -> None:
    before = store.version()
    store.submit("org/a", SHA, "v1", "alice")
    job = store.claim("w")
    store.finish(job, _row("org/a"), [])
    after = store.version()
    assert after != before
    store.import_results([{**_row("org/b"), "origin": "evaluated"}])
    assert store.version() != after


def test_outbox(store: Store, tmp_path: Path) -> None:
    """finish queues a publication; mark_published takes it out; a failed one waits for its retry time."""
    first = _finish(store, tmp_path, "org/a")
    second = _finish(store, tmp_path, "org/b")
    pending = store.unpublished()
    assert [p.job.id for p in pending] == [first, second]  # oldest first
    assert pending[0].row == _row("org/a") and pending[0].job.status == FINISHED
    assert len(pending[0].outputs) == 1 and pending[0].outputs[0][:4] == b"PAR1"
    assert [p.job.id for p in store.unpublished(limit=1)] == [first]

    store.mark_published([first], "c0ffee")
    assert [p.job.id for p in store.unpublished()] == [second]

    store.publication_failed([second], "HTTP 429", retry_after_s=0.5)
    assert store.unpublished() == []
    time.sleep(0.6)
    [retry] = store.unpublished()
    assert (retry.job.id, retry.attempts, retry.last_error) == (second, 1, "HTTP 429")
    store.publication_failed([second], "HTTP 503", retry_after_s=0)
    assert [(p.attempts, p.last_error) for p in store.unpublished()] == [(2, "HTTP 503")]
    store.mark_published([second], "beef")
    assert store.unpublished() == []
    store.publication_failed([second], "late", retry_after_s=0)  # a published one stays published
    assert store.unpublished() == []


def test_import_results_skips_what_the_store_has(store: Store, tmp_path: Path) -> None:
    mine = _finish(store, tmp_path, "org/a")
    hub_rows = [
        {**_row("org/a"), "full": 99.0},  # already evaluated here: skipped
        {**_row("org/b"), "date": "2026-01-02", "job_id": "20260102T000000-aaaaaaaa"},
        {**_row("org/c"), "protocol": "v2"},
    ]
    assert store.import_results(hub_rows) == 2
    assert store.import_results(hub_rows) == 0  # idempotent
    clash = {**_row("org/d"), "job_id": mine}  # a job id already used here for another model: skipped
    assert store.import_results([clash, {**_row("org/e")}]) == 1 and store.find("org/d", SHA, "v1") is None
    models = sorted((r["model"], r["full"]) for r in store.results())
    assert models == [("org/a", 20.0), ("org/b", 20.0), ("org/c", 20.0), ("org/e", 20.0)]
    assert all("job_id" not in r for r in store.results())
    imported = store.get("20260102T000000-aaaaaaaa")
    assert imported.status == FINISHED and imported.meta == {"imported": True}
    assert time.strftime("%Y-%m-%d", time.gmtime(imported.submitted_at)) == "2026-01-02"
    assert [p.job.id for p in store.unpublished()] == [mine]  # imported ones are already published
    with pytest.raises(DuplicateError):  # and are not evaluated again
        store.submit("org/b", SHA, "v1", "bob")
    assert {j.id for j in store.jobs_changed_since(0)} == {mine}  # and never mirrored back


def test_jobs_changed_since_ignores_heartbeats(store: Store, tmp_path: Path) -> None:
    a = store.submit("org/a", SHA, "v1", "alice")
    store.submit("org/b", SHA, "v1", "alice")
    assert [j.id for j in store.jobs_changed_since(0)] == [a.id, store.find("org/b", SHA, "v1").id]
    claimed = store.claim("w")
    cursor = store.get(claimed.id).status_at
    assert store.jobs_changed_since(cursor) == []
    time.sleep(0.01)
    assert store.heartbeat(claimed, "5/10 items")
    assert store.jobs_changed_since(cursor) == []  # a heartbeat is not a status change
    assert store.get(claimed.id).updated_at > cursor and store.get(claimed.id).status_at == cursor
    assert store.finish(claimed, _row("org/a"), [])
    [changed] = store.jobs_changed_since(cursor)
    assert (changed.id, changed.status) == (a.id, FINISHED) and changed.status_at > cursor


def test_state(store: Store) -> None:
    assert store.get_state("mirror") is None
    store.set_state("mirror", "1.5")
    store.set_state("mirror", "2.5")
    store.set_state("other", "x")
    assert (store.get_state("mirror"), store.get_state("other")) == ("2.5", "x")


def test_migrations_idempotent(open_, url: str, tmp_path: Path) -> None:
    first = open_()
    job = _finish(first, tmp_path, "org/a")
    again = open_("cache2")
    assert again.schema_version() == first.schema_version() == len(MIGRATIONS)
    assert again.get(job).status == FINISHED and len(again.results()) == 1


def test_concurrent_openers_migrate_once(url: str, tmp_path: Path, opened: list[Store]) -> None:
    def open_one(i: int) -> int:
        store = Store(url, cache_dir=tmp_path / f"c{i}")
        opened.append(store)
        return store.schema_version()

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(open_one, range(4))) == [len(MIGRATIONS)] * 4


def test_outputs_bytes_live_in_the_database(open_, tmp_path: Path) -> None:
    """A second store on the same database with another cache folder (another machine) reads the outputs."""
    writer = open_("writer-cache")
    writer.submit("org/a", SHA, "v1", "alice")
    job = writer.claim("w")
    (tmp_path / "run").mkdir()
    sources = _outputs(tmp_path / "run", "org/a", parts=3)
    assert writer.finish(job, _row("org/a"), sources)
    reader = open_("reader-cache")
    files = reader.outputs_files()
    assert [f.relative_to(tmp_path / "reader-cache").as_posix() for f in files] == [
        f"{job.id}/part-{i:05d}.parquet" for i in range(3)
    ]
    assert [f.read_bytes() for f in files] == [p.read_bytes() for p in sorted(sources)]
    assert not (tmp_path / "writer-cache").exists()  # nothing is written until someone reads
    files[0].unlink()  # an incomplete cache folder is rewritten
    assert reader.outputs_files() == files and files[0].read_bytes() == sorted(sources)[0].read_bytes()
    assert not [p for p in (tmp_path / "reader-cache").iterdir() if p.name.startswith(".")]  # no staging left


def test_probes_parts_are_recorded_published_and_materialised(open_, tmp_path: Path) -> None:
    """finish keeps the probes parts beside the outputs, in one transaction; another machine reads them."""
    writer = open_("writer-cache")
    writer.submit("org/a", SHA, "v1", "alice")
    first = writer.claim("w1")
    writer.requeue_stale(stale_after=-1, max_attempts=3)  # the first attempt loses its claim
    second = writer.claim("w2")
    outputs, probes = _outputs(tmp_path, "org/a"), _probes(tmp_path / "run", "org/a")
    assert not writer.finish(first, _row("org/a"), outputs, probes)
    assert writer.probes_files() == []  # a lost claim records nothing
    assert writer.finish(second, _row("org/a"), outputs, probes)
    in_order = [p.read_bytes() for p in sorted(probes)]  # order-00000, rotation-00000, rotation-00001
    [publication] = writer.unpublished()
    assert publication.probes == in_order and len(publication.outputs) == 1
    assert publication.nbytes == sum(map(len, in_order)) + len(publication.outputs[0])
    reader = open_("reader-cache")
    files = reader.probes_files()
    assert [f.relative_to(tmp_path / "reader-cache").as_posix() for f in files] == [
        f"probes/{second.id}/part-{i:05d}.parquet" for i in range(3)
    ]
    assert [f.read_bytes() for f in files] == in_order
    assert [f.parent.name for f in reader.outputs_files()] == [second.id]  # the outputs are apart from them
    assert [pd.read_parquet(f).loc[0, "probe"] for f in files] == ["order", "rotation", "rotation"]
    files[1].unlink()  # an incomplete cache folder is rewritten
    assert reader.probes_files() == files and files[1].read_bytes() == in_order[1]


def test_a_store_of_the_previous_schema_version_is_upgraded(
    url: str, tmp_path: Path, opened: list[Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at version 3 (no probes): its finished, unpublished job and its running job carry over."""
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:3])
    old = Store(url, cache_dir=tmp_path / "old")
    opened.append(old)
    assert old.schema_version() == 3
    with old._read() as conn:
        assert not sa.inspect(conn).has_table("probes")
    with old._write() as conn:  # what version 3's submit, claim and finish wrote
        for job_id, model, status in (("done", "org/a", FINISHED), ("running", "org/b", RUNNING)):
            conn.execute(
                sa.text(
                    'INSERT INTO jobs (id, model, revision, protocol, "user", status, submitted_at, updated_at, '
                    "attempts, claim, heartbeat_at, meta, status_at) "
                    "VALUES (:id, :model, :sha, 'v1', 'alice', :status, 1.0, 1.0, 1, 'w#1', 1.0, '{}', 1.0)"
                ),
                {"id": job_id, "model": model, "sha": SHA, "status": status},
            )
        conn.execute(sa.insert(store_module.results_t).values(job_id="done", row=json.dumps(_row("org/a"))))
        data = _outputs(tmp_path, "org/a")[0].read_bytes()
        conn.execute(sa.insert(store_module.outputs_t).values(job_id="done", part=0, data=data))
        conn.execute(sa.insert(store_module.publications_t).values(job_id="done", created_at=1.0, next_try_at=1.0))
    monkeypatch.undo()

    new = Store(url, cache_dir=tmp_path / "new")
    opened.append(new)
    assert new.schema_version() == len(MIGRATIONS)
    [waiting] = new.unpublished()
    assert (waiting.job.id, waiting.outputs, waiting.probes) == ("done", [data], [])
    claimed = new.get("running")
    assert claimed is not None and new.finish(claimed, _row("org/b"), [], _probes(tmp_path / "b", "org/b"))
    assert {f.parent.name for f in new.probes_files()} == {"running"} and len(new.probes_files()) == 3
    assert [p.job.id for p in new.unpublished()] == ["done", "running"]
    assert (claimed.not_before, claimed.retries) == (0.0, 0)  # migration 6's columns, empty on old jobs


def test_a_store_of_schema_version_1_is_upgraded_in_place(
    url: str, tmp_path: Path, opened: list[Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every migration in turn on both databases: a PENDING job of version 1 is claimable and finishes."""
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:1])
    old = Store(url, cache_dir=tmp_path / "old")
    opened.append(old)
    assert old.schema_version() == 1
    with old._write() as conn:  # what version 1's submit wrote
        conn.execute(
            sa.text(
                'INSERT INTO jobs (id, model, revision, protocol, "user", status, submitted_at, updated_at, attempts, '
                "meta) VALUES ('j1', 'org/a', :sha, 'v1', 'alice', 'PENDING', 1.0, 1.0, 0, '{}')"
            ),
            {"sha": SHA},
        )
    monkeypatch.undo()
    new = Store(url, cache_dir=tmp_path / "new")
    opened.append(new)
    assert new.schema_version() == len(MIGRATIONS)
    claimed = new.claim("w")
    assert claimed is not None and (claimed.id, claimed.attempts, claimed.retries) == ("j1", 1, 0)
    assert new.finish(claimed, _row("org/a"), _outputs(tmp_path, "org/a"))
    assert new.results() == [_row("org/a")]


def test_open_store(tmp_path: Path, opened: list[Store]) -> None:
    local = open_store(str(tmp_path / "s"))
    opened.append(local)
    assert isinstance(local, SQLiteStore) and local.root == tmp_path / "s"
    assert (tmp_path / "s" / "queue.sqlite").is_file() and local.cache_dir == tmp_path / "s" / "outputs"
    same = open_store(f"sqlite:///{tmp_path / 's' / 'queue.sqlite'}")
    opened.append(same)
    assert same.url == local.url
    legacy_spec = open_store(f"sqlite:{tmp_path / 's'}")  # the previous release's spelling
    opened.append(legacy_spec)
    assert legacy_spec.url == local.url
    assert store_url("postgresql://u@h:5432/db") == "postgresql+psycopg://u@h:5432/db"
    assert store_url("postgres://u@h/db") == store_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    with pytest.raises(ValueError, match="no longer a queue store"):
        open_store("hub:org/requests,org/TCMQA")


_LEGACY_SCHEMA = """
CREATE TABLE jobs (
  id TEXT PRIMARY KEY, model TEXT NOT NULL, revision TEXT NOT NULL, protocol TEXT NOT NULL,
  user TEXT NOT NULL, status TEXT NOT NULL, submitted_at REAL, updated_at REAL, attempts INTEGER,
  claim TEXT, heartbeat_at REAL, progress TEXT, reason TEXT, log_tail TEXT, meta TEXT);
CREATE UNIQUE INDEX one_live_job ON jobs(model, revision, protocol) WHERE status != 'FAILED';
CREATE INDEX by_status ON jobs(status, submitted_at);
CREATE TABLE results (job_id TEXT PRIMARY KEY, row TEXT NOT NULL, recorded_at REAL);
"""


def test_a_store_of_the_previous_release_is_upgraded(tmp_path: Path, opened: list[Store]) -> None:
    """A SQLite store written before versioning: its jobs, results and outputs files carry over."""
    root = tmp_path / "space"
    root.mkdir()
    con = sqlite3.connect(root / "queue.sqlite")
    con.executescript(_LEGACY_SCHEMA)
    con.execute(
        "INSERT INTO jobs VALUES ('j1', 'org/a', ?, 'v1', 'alice', 'FINISHED', 1.0, 2.0, 1, 'w#1', 1.5, 'done', "
        "'', '', '{}')",
        (SHA,),
    )
    con.execute(
        "INSERT INTO jobs VALUES ('j2', 'org/b', ?, 'v1', 'bob', 'PENDING', 3.0, 3.0, 0, '', 0, '', '', '', '{}')",
        (SHA,),
    )
    con.execute("INSERT INTO results VALUES ('j1', ?, 2.0)", (json.dumps(_row("org/a")),))
    con.commit()
    con.close()
    (root / "outputs" / "j1").mkdir(parents=True)
    [part] = _outputs(root / "outputs" / "j1", "org/a")
    part.rename(root / "outputs" / "j1" / "part-00000.parquet")

    store = SQLiteStore(root)
    opened.append(store)
    assert store.schema_version() == len(MIGRATIONS)
    assert [(j.id, j.status, j.status_at) for j in store.jobs()] == [("j2", PENDING, 3.0), ("j1", FINISHED, 2.0)]
    assert store.results() == [_row("org/a")]
    [pending] = store.unpublished()
    assert pending.job.id == "j1" and len(pending.outputs) == 1
    elsewhere = SQLiteStore(root, cache_dir=tmp_path / "elsewhere")
    opened.append(elsewhere)
    assert len(pd.read_parquet(elsewhere.outputs_files()[0])) == 2
    with pytest.raises(DuplicateError):
        store.submit("org/b", SHA, "v1", "carol")


def test_practitioner_store_of_version_4_is_upgraded(
    url: str, tmp_path: Path, opened: list[Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 5 in place: practitioners get person numbers in registration order, an existing exclusion
    becomes the first entry of its history, assignments and responses carry over holding their slots."""
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:4])
    old = Store(url, cache_dir=tmp_path / "old")
    opened.append(old)
    assert old.schema_version() == 4
    with old._write() as conn:  # what version 4's practitioner mode wrote
        for account, created, excluded in (("bo", 2.0, 1), ("ann", 1.0, 0)):
            conn.execute(
                sa.text(
                    "INSERT INTO practitioners (account, created_at, confirmed_at, excluded, excluded_reason, "
                    "excluded_at, excluded_by) VALUES (:a, :c, :c, :e, :r, :at, :by)"
                ),
                {
                    "a": account,
                    "c": created,
                    "e": excluded,
                    "r": "copied" if excluded else None,
                    "at": 5.0 if excluded else None,
                    "by": "lead" if excluded else None,
                },
            )
            slot = 0 if account == "ann" else 1
            conn.execute(
                sa.text("INSERT INTO practice_assignments VALUES (:a, 0, :s, :u, :c)"),
                {"a": account, "s": slot, "u": slot + 1, "c": created},
            )
        conn.execute(sa.text("INSERT INTO practice_blocks VALUES (0, 0, 'item-1')"))
        conn.execute(
            sa.text(
                "INSERT INTO practice_responses (account, item_id, block, position, selected, domains, difficulty, "
                "flagged, recorded_at) VALUES ('ann', 'item-1', 0, 0, '[\"A\"]', '[\"other\"]', 3, 0, 3.0)"
            )
        )
    monkeypatch.undo()

    new = Store(url, cache_dir=tmp_path / "new")
    opened.append(new)
    assert new.schema_version() == len(MIGRATIONS)
    assert {p["account"]: p["number"] for p in new.practitioners()} == {"ann": 1, "bo": 2}
    assert [(e["account"], e["excluded"], e["reason"], e["decided_by"]) for e in new.practice_exclusions()] == [
        ("bo", 1, "copied", "lead")
    ]
    assignments = new.practice_assignments()
    assert [(a["account"], a["slot"], a["released_at"]) for a in assignments] == [("ann", 0, None), ("bo", 1, None)]
    assert len(new.practice_responses()) == 1
    assert new.register_practitioner("cy")["number"] == 3
    assert new.practice_snapshot().block_raters == {}  # blocks made before migration 5 hold the configured N


def test_practitioner_slots_and_exclusion_history(store: Store) -> None:
    """The practice transactions the rules build on: person numbers, the exclusion history, an assignment
    by plan (a new block, then a free slot), release and reassignment of a slot, the snapshot."""
    from tcmqa.store.practice import SlotPlan

    assert [store.register_practitioner(a)["number"] for a in ("ann", "bo", "cy", "ann")] == [1, 2, 3, 1]
    new_block = SlotPlan(block=7, slot=0, items=["i1", "i2"], raters=2, kind="top_up")
    first = store.assign_practice_block("ann", lambda snap, account: new_block)
    assert (first["block"], first["slot"], first["user_id"]) == (7, 0, 1)
    assert store.assign_practice_block("ann", lambda snap, account: None) == first  # held: no new plan
    join = store.assign_practice_block("bo", lambda snap, account: SlotPlan(block=7, slot=1))
    assert (join["block"], join["slot"]) == (7, 1)
    snap = store.practice_snapshot()
    assert snap.blocks == {7: ["i1", "i2"]} and snap.block_raters == {7: 2} and snap.block_kind == {7: "top_up"}
    version = store.practice_version()
    assert store.exclude_practitioner("bo", "careless", "lead") and store.exclude_practitioner(
        "bo", "ok", "lead", False
    )
    assert not store.exclude_practitioner("nobody", "x", "lead")
    assert [(e["excluded"], e["reason"]) for e in store.practice_exclusions("bo")] == [(1, "careless"), (0, "ok")]
    assert store.practice_version() != version
    assert store.release_practice_slot("bo", 7, "moved", "lead") and not store.release_practice_slot(
        "bo", 7, "again", "lead"
    )
    [released] = [a for a in store.practice_assignments("bo")]
    assert released["released_reason"] == "moved" and released["released_by"] == "lead"
    given = store.reassign_practice_slot(7, 0, "cy", "ann stopped", "lead")
    assert (given["account"], given["slot"], given["user_id"]) == ("cy", 0, 3)
    assert store.practice_assignments("ann")[0]["released_reason"] == "ann stopped"
    with pytest.raises(ValueError, match="already had block 7"):
        store.reassign_practice_slot(7, 1, "bo", "back", "lead")
    stale = SlotPlan(block=7, slot=1, release=(("nobody", 7, "stale"),))
    assert store.assign_practice_block("dee", lambda snap, account: stale)["slot"] == 1


UNKNOWN_SCHEMES = (
    "postgresql+psycopg2://u:pw-typo@db.example/q",
    "POSTGRESQL://u@db.example/q?password=pw-typo",
    "mysql://u:pw-typo@db.example/q",
    "sqlite3:///tmp/q.sqlite",
)


def test_unknown_scheme_refused_with_the_supported_ones_and_plain_paths_kept(tmp_path: Path, monkeypatch) -> None:
    """A mistyped or unsupported scheme is refused before anything is created, never an empty SQLite queue in
    a folder named after the URL; the message lists what is supported and repeats no password. A plain path,
    relative or absolute, with a colon in a folder name or not, stays a folder with SQLite inside."""
    monkeypatch.chdir(tmp_path)
    for spec in UNKNOWN_SCHEMES:
        with pytest.raises(ValueError, match="unknown store scheme") as raised:
            open_store(spec)
        message = str(raised.value)
        assert "pw-typo" not in message and "sqlite:///FILE" in message and "postgresql://" in message
    assert not any(tmp_path.iterdir())
    for spec in ("plain", str(tmp_path / "absolute"), "./odd:name", "nested/mysql:x", "sqlite:legacy"):
        store = open_store(spec)
        assert isinstance(store, SQLiteStore) and store.root is not None and store.root.is_dir(), spec
        store.close()
    assert {p.name for p in tmp_path.iterdir()} == {"plain", "absolute", "odd:name", "nested", "legacy"}
