"""One contract, two stores: real SQLite files and the Hub store against a thin fake HfApi."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from fakehub import FakeHub

from tcmqa.store import FAILED, FINISHED, PENDING, RUNNING, DuplicateError, HubStore, SQLiteStore, Store, open_store

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(params=["sqlite", "hub"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "store")
    hub = FakeHub()
    hub.create_repo("org/requests")
    hub.create_repo("org/TCMQA")
    return HubStore("org/requests", "org/TCMQA", api=hub, cache_dir=tmp_path / "cache")


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


def _outputs(tmp_path: Path, model: str) -> list[Path]:
    path = tmp_path / f"{model.replace('/', '_')}-part-0.parquet"
    pd.DataFrame({"model": [model, model], "item_id": ["1", "2"]}).to_parquet(path)
    return [path]


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
    assert store.version() != before


def test_open_store(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path / "s")), SQLiteStore)
    hub = open_store("hub:org/requests,org/TCMQA", api=FakeHub())
    assert isinstance(hub, HubStore) and (hub.requests_repo, hub.results_repo) == ("org/requests", "org/TCMQA")


def test_hub_results_use_results_features(tmp_path: Path) -> None:
    hub = FakeHub()
    hub.create_repo("org/requests")
    store = HubStore("org/requests", "org/TCMQA", api=hub, cache_dir=tmp_path)
    store.submit("org/a", SHA, "v1", "alice")
    job = store.claim("w")
    assert store.finish(job, _row("org/a"), _outputs(tmp_path, "org/a"))
    files = hub.list_repo_files("org/TCMQA", repo_type="dataset")
    assert files == [f"outputs/{job.id}-part-00000.parquet", f"results/{job.id}.parquet"]
    row = store.results()[0]
    assert row["model"] == "org/a" and row["multi_f1"] is None and "human_reference" in row
