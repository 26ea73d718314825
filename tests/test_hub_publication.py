"""Publication to the Hub (tcmqa.hub): retries, the outbox drained in few commits, the requests mirror,
the import at start, and the whole thing under the Hub's commit cap, injected failures and an outage.

The Hub is tests/fakehub.FakeHub (commit cap with 429 + Retry-After, injected 5xx/429/connection
errors, latency); the store is the real one (SQLite in tmp_path). What was published is read back
with the real ``datasets.load_dataset`` from a snapshot of the fake repo.
"""

from __future__ import annotations

import io
import json
import logging
import random
import threading
import time
from pathlib import Path

import datasets
import httpx2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from fakehub import FakeHub, http_error, transport_error
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from tcmqa.hub.files import request_json
from tcmqa.hub.publisher import Publisher
from tcmqa.hub.retries import with_retries
from tcmqa.publish import publish, validate_tree
from tcmqa.schema import OUTPUTS, PROBES, RESULTS
from tcmqa.store import FINISHED, open_store, publications_t

REPO, REQUESTS = "org/TCMQA", "org/requests"


# ------------------------------------------------------------------------------------------------
# Helpers: rows, outputs parts, a store, a fast publisher
# ------------------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def result_row(i: int) -> dict:
    return {
        "model": f"org/model-{i:02d}",
        "origin": "evaluated",
        "family": "Qwen2",
        "params_b": 0.5 + i,
        "full": 20.0 + i / 3,
        "single": 21.0,
        "multi": 10.0 + i,
        "subset": 30.0,
        "delta_human": -12.5,
        "lp_full": 25.0,
        "multi_f1": 40.0,
        "confidence_gap": 0.3,
        "revision": f"{i:040x}",
        "engine": "transformers",
        "protocol": "v1",
        "date": "2026-01-02",
        "n": 32,
        "n_single": 26,
        "n_multi": 6,
        "n_subset": 31,
        "engine_version": "5.0",
        "dtype": "float32",
        "not_a_results_column": "dropped on the Hub",
    }


def output_rows(i: int, item_ids: list[str]) -> list[dict]:
    return [
        {
            "model": f"org/model-{i:02d}",
            "item_id": item_id,
            "answer_type": "single",
            "generated_text": "B",
            "prediction": ["B"],
            "correct": k % 2 == 0,
            "precision": 1.0,
            "recall": 1.0,
            "f1": 1.0,
            "letter_logprobs": {letter: -1.0 - k for letter in "ABCDE"},
            "lp_prediction": "B",
            "lp_correct": True,
            "margin": 0.5,
            "finish_reason": "stop",
            "n_prompt_tokens": 100 + k,
            "prompt_hash": f"{k:064x}",
            "protocol": "v1",
            "revision": f"{i:040x}",
        }
        for k, item_id in enumerate(item_ids)
    ]


def probe_rows(i: int, item_ids: list[str]) -> list[dict]:
    """A rotation row per item and rotation 0-1, and an order row per item, as ``tcmqa.probes`` writes them."""
    facts = {"model": f"org/model-{i:02d}", "revision": f"{i:040x}", "answer_type": "single", "probe_version": "p1"}
    rotations = [
        {"probe": "rotation", "rotation": k, "answer": ["ABCDE"[k]], "generated_text": "A", "prediction": ["A"],
         "correct": k == 0, "letter_logprobs": dict.fromkeys("ABCDE", -1.5), "lp_prediction": "A",
         "lp_correct": k == 0, "prompt_hash": f"{k:064x}"}
        for k in range(2)
    ]  # fmt: skip
    order = {"probe": "order", "convention": "", "n_orders": 24, "order_rank": 1, "order_percentile": 100.0,
             "published_logprob": -123.25}  # fmt: skip
    return [
        {name: None for name in PROBES} | facts | {"item_id": item_id} | extra
        for item_id in item_ids
        for extra in (*rotations, order)
    ]


def write_parts(
    folder: Path, rows: list[dict], n_parts: int, features: datasets.Features = OUTPUTS, stem: str = "part"
) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(rows) // max(1, n_parts))
    paths = []
    for p in range(n_parts):
        path = folder / f"{stem}-{p:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows[p * size : (p + 1) * size], schema=features.arrow_schema), path)
        paths.append(path)
    return paths


ITEM_IDS = [str(k) for k in range(6)]


def run_job(
    store,
    tmp_path: Path,
    i: int,
    item_ids: list[str] = ITEM_IDS,
    parts: int = 2,
    probe_parts: int = 0,
    row: dict | None = None,
) -> tuple[str, dict]:
    """Submit, claim, heartbeat and finish job ``i`` (probed in ``probe_parts`` parts, ``row`` changing its
    results row); returns its id and row."""
    job = store.submit(f"org/model-{i:02d}", f"{i:040x}", "v1", "user", meta={"family": "Qwen2", "params_b": 0.5})
    claimed = store.claim("worker")
    assert claimed is not None and claimed.id == job.id
    assert store.heartbeat(claimed, "50%")
    row = result_row(i) | (row or {})
    run = tmp_path / "runs" / job.id
    outputs = write_parts(run / "outputs", output_rows(i, item_ids), parts)
    probes = write_parts(run / "probes", probe_rows(i, item_ids), probe_parts, PROBES, "rotation")
    assert store.finish(claimed, row, outputs, probes)
    return job.id, row


def make_store(tmp_path: Path):
    return open_store(f"sqlite:///{tmp_path / 'store' / 'queue.sqlite'}", cache_dir=tmp_path / "cache")


def fast(store, hub, **overrides) -> Publisher:
    """A Publisher with waits in milliseconds."""
    settings = dict(
        requests_repo=REQUESTS,
        mirror_every_s=0.2,
        batch=50,
        commit_limit=None,
        attempts=4,
        base_s=0.002,
        max_s=5.0,
        fail_base_s=0.02,
        fail_max_s=0.25,
        rng=random.Random(0),
    )
    return Publisher(store, hub, REPO, **(settings | overrides))


def typed(rows: list[dict], features: datasets.Features) -> list[dict]:
    """Rows as they read back from Parquet typed with ``features`` (float32 rounding, dropped keys)."""
    return datasets.Dataset.from_list([{k: r.get(k) for k in features} for r in rows], features=features).to_list()


# ------------------------------------------------------------------------------------------------
# with_retries
# ------------------------------------------------------------------------------------------------
class Flaky:
    def __init__(self, *errors: BaseException, result="ok"):
        self.errors, self.result, self.calls = list(errors), result, 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


@pytest.mark.parametrize(
    "error",
    [http_error(500), http_error(502), http_error(503), http_error(429), transport_error("connect")],
    ids=["500", "502", "503", "429", "connect"],
)
def test_transient_errors_are_retried_with_jittered_exponential_backoff(error):
    sleeps: list[float] = []
    call = Flaky(error, error, error)
    assert with_retries(call, attempts=5, base_s=1.0, max_s=60, sleep=sleeps.append, rng=random.Random(1)) == "ok"
    assert call.calls == 4 and len(sleeps) == 3
    assert all(0 <= s <= 2**i for i, s in enumerate(sleeps))  # full jitter under 1, 2, 4 s


def test_timeouts_are_retried_and_the_last_error_is_raised():
    timeout = transport_error("timeout")
    assert isinstance(timeout, httpx2.TimeoutException)
    call = Flaky(timeout, timeout, timeout)
    with pytest.raises(httpx2.ReadTimeout):
        with_retries(call, attempts=3, base_s=0.0, sleep=lambda s: None)
    assert call.calls == 3


def test_retry_after_is_honoured_and_a_long_one_is_not_waited_on():
    sleeps: list[float] = []
    call = Flaky(http_error(429, headers={"Retry-After": "7"}))
    assert with_retries(call, base_s=0.001, max_s=60, sleep=sleeps.append) == "ok"
    assert sleeps == [7.0]
    date = http_error(503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})  # in the past: no wait
    sleeps.clear()
    assert with_retries(Flaky(date), base_s=0.0, sleep=sleeps.append) == "ok" and sleeps == [0.0]
    hour = Flaky(http_error(429, headers={"Retry-After": "3600"}))
    with pytest.raises(HfHubHTTPError) as info:
        with_retries(hour, max_s=60, sleep=sleeps.append)
    assert hour.calls == 1 and info.value.response.status_code == 429


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 412, 422])
def test_other_client_errors_are_raised_at_once_with_the_hubs_message(status):
    call = Flaky(http_error(status, "Invalid credentials in Authorization header"))
    with pytest.raises(HfHubHTTPError, match="Invalid credentials") as info:
        with_retries(call, sleep=lambda s: pytest.fail("slept"))
    assert call.calls == 1 and info.value.response.status_code == status


def test_offline_mode_and_bugs_are_not_retried():
    for error in (OfflineModeIsEnabled("offline"), ValueError("a bug")):
        call = Flaky(error)
        with pytest.raises(type(error)):
            with_retries(call, sleep=lambda s: pytest.fail("slept"))
        assert call.calls == 1


# ------------------------------------------------------------------------------------------------
# The fake Hub itself
# ------------------------------------------------------------------------------------------------
def test_fakehub_caps_commits_per_repo_with_429_and_retry_after():
    clock = FakeClock()
    hub = FakeHub(commit_cap=3, window_s=3600, clock=clock)
    for k in range(3):
        hub.create_commit(REPO, [], commit_message=f"c{k}")
        clock.sleep(100)
    with pytest.raises(HfHubHTTPError, match="exceeded our hourly quotas") as info:
        hub.create_commit(REPO, [], commit_message="one too many")
    assert info.value.response.status_code == 429
    assert int(info.value.response.headers["Retry-After"]) == 3600 - 300
    hub.create_commit(REQUESTS, [], commit_message="another repo has its own cap")
    clock.sleep(3600 - 300)
    hub.create_commit(REPO, [], commit_message="the window moved on")
    assert hub.rate_limited == 1 and hub.max_commits_in_window(REPO) == 3


def test_fakehub_injected_failures_latency_and_outage():
    hub = FakeHub(latency_s=0.01)
    hub.fail_next(1, 502, calls=("create_commit",))
    hub.fail_next(1, "connect")
    hub.fail_next(1, 503, after_commit=True)
    start = time.perf_counter()
    hub.create_repo(REPO)  # the 502 waits for a create_commit; this call is served
    with pytest.raises(HfHubHTTPError) as info:
        hub.create_commit(REPO, [], commit_message="x")
    assert info.value.response.status_code == 502
    with pytest.raises(httpx2.ConnectError):
        hub.list_repo_files(REPO)
    with pytest.raises(HfHubHTTPError):
        hub.create_commit(REPO, [], commit_message="lands, answer lost")
    assert [c.answer_lost for c in hub.commit_log] == [True]
    with hub.outage("timeout"), pytest.raises(httpx2.ReadTimeout):
        hub.repo_info(REPO)
    assert hub.list_repo_files(REPO) == []
    assert time.perf_counter() - start >= 0.05  # 6 calls of 10 ms
    outcomes = []
    for fake in (FakeHub(failure_rate=0.5, seed=7), FakeHub(failure_rate=0.5, seed=7)):
        got = []
        for _ in range(20):
            try:
                fake.create_commit(REPO, [], commit_message="x")
                got.append("ok")
            except Exception as err:
                got.append(type(err).__name__)
        outcomes.append(got)
    assert outcomes[0] == outcomes[1] and "ok" in outcomes[0] and len(set(outcomes[0])) > 1  # seeded


# ------------------------------------------------------------------------------------------------
# The Publisher
# ------------------------------------------------------------------------------------------------
def test_published_results_and_outputs_load_with_datasets(demo_tree, tmp_path):
    """The card declares outputs/results before any exists; the publisher's files then load as those configs."""
    hub = FakeHub()
    publish(demo_tree, REPO, api=hub)  # the built corpus tree and its card, with no results yet
    item_ids = [r["id"] for r in datasets.load_dataset(str(demo_tree), "corpus", split="test")]
    store = make_store(tmp_path)
    rows = {}
    for i in range(3):
        job_id, row = run_job(store, tmp_path, i, item_ids[: 5 + i], parts=1 + i)
        rows[job_id] = row
    publisher = fast(store, hub)
    assert publisher.publish_pending() == 3 and store.unpublished() == []
    assert len(hub.commits_to(REPO)) == 2  # the tree, then one commit for the three jobs
    assert publisher.publish_pending() == 0 and len(hub.commits_to(REPO)) == 2

    folder = hub.snapshot_download(REPO, repo_type="dataset")  # a fresh folder name (see fakehub)
    results = datasets.load_dataset(folder, "results", split="test")
    assert results.features == RESULTS
    by_model = sorted(results.to_list(), key=lambda r: r["model"])
    assert by_model == sorted(typed(list(rows.values()), RESULTS), key=lambda r: r["model"])
    outputs = datasets.load_dataset(folder, "outputs", split="test")
    assert outputs.features == OUTPUTS
    expected = [r for i in range(3) for r in output_rows(i, item_ids[: 5 + i])]
    key = lambda r: (r["model"], r["item_id"])  # noqa: E731
    assert sorted(outputs.to_list(), key=key) == sorted(typed(expected, OUTPUTS), key=key)
    assert len(datasets.load_dataset(folder, "corpus", split="test")) == len(item_ids)
    assert validate_tree(folder) == []  # the repo with the Space's files is still a valid tree
    names = set(hub.files(REPO))
    for job_id in rows:
        assert f"results/{job_id}.parquet" in names
    assert sum(n.startswith("outputs/") for n in names) == 1 + 2 + 3

    publish(demo_tree, REPO, api=hub)  # a re-publish of the corpus keeps them
    assert {n for n in hub.files(REPO) if n.startswith(("results/", "outputs/"))} == {
        n for n in names if n.startswith(("results/", "outputs/"))
    }


def test_a_probed_job_is_published_in_one_commit(tmp_path):
    """A job's results row, outputs and probes parts land in one commit; the probes keep their rows and types."""
    hub = FakeHub()
    store = make_store(tmp_path)
    job_id, _ = run_job(store, tmp_path, 0, parts=1, probe_parts=2)
    assert fast(store, hub).publish_pending() == 1
    [commit] = hub.commits_to(REPO)
    assert sorted(commit.added) == [
        f"outputs/{job_id}-part-00000.parquet",
        f"probes/{job_id}-part-00000.parquet",
        f"probes/{job_id}-part-00001.parquet",
        f"results/{job_id}.parquet",
    ]
    files = hub.files(REPO)
    parts = [pq.read_table(io.BytesIO(files[f"probes/{job_id}-part-{i:05d}.parquet"])) for i in range(2)]
    assert all(part.schema.remove_metadata() == PROBES.arrow_schema.remove_metadata() for part in parts)
    assert [row for part in parts for row in part.to_pylist()] == typed(probe_rows(0, ITEM_IDS), PROBES)
    assert fast(make_store(tmp_path / "fresh"), hub).import_published() == 1  # the import reads results/ only


def test_published_probes_load_as_the_probes_config(demo_tree, tmp_path):
    """The card declares ``probes`` before any exists; the publisher's parts then load as that config."""
    hub = FakeHub()
    publish(demo_tree, REPO, api=hub)
    item_ids = [r["id"] for r in datasets.load_dataset(str(demo_tree), "corpus", split="test")][:4]
    store = make_store(tmp_path)
    run_job(store, tmp_path, 0, item_ids, parts=1, probe_parts=2)
    assert fast(store, hub).publish_pending() == 1
    folder = hub.snapshot_download(REPO, repo_type="dataset")
    probes = datasets.load_dataset(folder, "probes", split="test")
    assert probes.features == PROBES
    key = lambda r: (r["item_id"], r["probe"], r["rotation"] or 0)  # noqa: E731
    assert sorted(probes.to_list(), key=key) == sorted(typed(probe_rows(0, item_ids), PROBES), key=key)
    assert validate_tree(folder) == []  # the probes files fit the declared features and refer to corpus items

    published = {n for n in hub.files(REPO) if n.startswith("probes/")}
    publish(demo_tree, REPO, api=hub)  # a re-publish of the built configs deletes no probes part
    assert {n for n in hub.files(REPO) if n.startswith("probes/")} == published and len(published) == 2


def test_a_failed_publication_is_recorded_and_retried_later(tmp_path):
    hub = FakeHub()
    store = make_store(tmp_path)
    ids = [run_job(store, tmp_path, i)[0] for i in range(2)]
    hub.fail_next(1, 403, calls=("create_commit",))
    publisher = fast(store, hub, fail_base_s=0.2)
    assert publisher.publish_pending() == 0  # never raises into the caller
    assert hub.calls["create_commit"] == 1  # a 403 is not retried
    assert store.unpublished() == []  # not before its retry time
    assert store.get(ids[0]).status == FINISHED  # the queue does not wait on the Hub
    time.sleep(0.25)
    waiting = store.unpublished()
    assert [p.job.id for p in waiting] == ids
    assert all(p.attempts == 1 and "403" in p.last_error and "no write access" in p.last_error for p in waiting)
    assert publisher.publish_pending() == 2 and store.unpublished() == []
    hub.fail_next(3, 503)  # transient: retried inside the call (4 attempts), then published
    run_job(store, tmp_path, 5)
    assert publisher.publish_pending() == 1 and hub.calls["create_commit"] == 2 + 4


def test_one_bad_job_does_not_hold_back_the_others(tmp_path):
    hub = FakeHub()
    store = make_store(tmp_path)
    good = [run_job(store, tmp_path, i)[0] for i in range(2)]
    job = store.submit("org/bad", "b" * 40, "v1", "user")
    store.finish(store.claim("w"), result_row(9) | {"full": "not a number"}, [])  # does not fit RESULTS
    good.append(run_job(store, tmp_path, 3)[0])
    publisher = fast(store, hub)
    assert publisher.publish_pending() == 0  # the batch of four fails for good: each is tried alone
    assert sum(publisher.publish_pending() for _ in range(6)) == 3
    assert sorted(n for n in hub.files(REPO) if n.startswith("results/")) == sorted(
        f"results/{j}.parquet" for j in good
    )
    assert len(hub.commit_log) == 3  # one per good job, none for the bad one
    time.sleep(0.3)
    (waiting,) = store.unpublished()
    assert waiting.job.id == job.id and waiting.attempts >= 2 and "not a number" in waiting.last_error


def test_only_full_coverage_rows_are_published(tmp_path, caplog):
    """A partial row (a --limit run, fewer items than the corpus) is set aside for good: not on the Hub, its
    reason in the log and the outbox, its job FINISHED with its row in the store."""
    hub = FakeHub()
    store = make_store(tmp_path)
    full, _ = run_job(store, tmp_path, 0, row={"n": 32, "n_corpus": 32, "coverage": 100.0})
    limited, _ = run_job(store, tmp_path, 1, row={"n": 10, "n_corpus": 32, "coverage": 31.25})  # --limit 10
    short, _ = run_job(store, tmp_path, 2, row={"n": 31, "n_corpus": 32})  # no coverage recorded: n < n_corpus
    unknown, _ = run_job(store, tmp_path, 3)  # records neither: cannot be told partial, published as before
    publisher = fast(store, hub)
    with caplog.at_level(logging.WARNING, logger="tcmqa.hub"):
        assert publisher.publish_pending() == 2
    published = sorted(n for n in hub.files(REPO) if n.startswith(("results/", "outputs/")))
    assert published == sorted(
        [f"results/{j}.parquet" for j in (full, unknown)]
        + [f"outputs/{j}-part-{p:05d}.parquet" for j in (full, unknown) for p in range(2)]
    )
    assert f"{limited} (org/model-01): not published: partial: coverage 31.25%, 10 of the corpus's 32" in caplog.text
    assert f"{short} (org/model-02): not published: partial: coverage 96.88%, 31 of the corpus's 32" in caplog.text
    assert [store.get(j).status for j in (limited, short)] == [FINISHED, FINISHED]
    assert sorted(r["model"] for r in store.results()) == [f"org/model-{i:02d}" for i in range(4)]
    with sa.create_engine(store.url).connect() as conn:
        kept = dict(conn.execute(sa.select(publications_t.c.job_id, publications_t.c.last_error)).all())
    assert kept[limited].startswith("not published: partial") and kept[short].startswith("not published: partial")
    time.sleep(0.3)  # past every retry delay this publisher sets: a partial row is never tried again
    assert store.unpublished() == [] and publisher.publish_pending() == 0 and len(hub.commit_log) == 1


def test_the_publishers_own_budget_keeps_it_under_the_hubs_cap(tmp_path):
    clock = FakeClock()
    hub = FakeHub(commit_cap=3, window_s=3600, clock=clock)
    store = make_store(tmp_path)
    for i in range(5):
        run_job(store, tmp_path, i, parts=1)
    publisher = fast(store, hub, batch=1, commit_limit=(3, 3600.0), clock=clock, requests_repo=None)
    assert sum(publisher.publish_pending() for _ in range(10)) == 3
    assert hub.rate_limited == 0 and len(store.unpublished()) == 2  # waiting, not failed
    clock.sleep(3600)
    assert sum(publisher.publish_pending() for _ in range(10)) == 2 and hub.rate_limited == 0


def test_requests_mirror_is_coalesced_and_public(tmp_path):
    clock = FakeClock()
    hub = FakeHub()
    store = make_store(tmp_path)
    publisher = fast(store, hub, mirror_every_s=60.0, clock=clock)
    a = store.submit("org/a", "a" * 40, "v1", "alice", meta={"path": "/home/alice/models/a", "family": "Qwen2"})
    b = store.submit("org/b", "b" * 40, "v1", "bob", meta={"params_b": 0.5})
    assert publisher.mirror_requests() == 2 and len(hub.commit_log) == 1  # one commit for both
    claimed = store.claim("w")
    assert publisher.mirror_requests() == 0 and len(hub.commit_log) == 1  # within mirror_every_s
    clock.sleep(61)
    assert publisher.mirror_requests() == 1  # a went RUNNING
    for _ in range(3):
        clock.sleep(61)
        assert store.heartbeat(claimed, "40%")
        assert publisher.mirror_requests() == 0  # heartbeats are not status changes
    assert len(hub.commit_log) == 2
    store.fail(claimed, "CUDA OOM while loading /home/alice/models/a/model.safetensors", log_tail="secret tail")
    clock.sleep(61)
    assert publisher.mirror_requests() == 1 and len(hub.commit_log) == 3
    public = json.loads(hub.files(REQUESTS)[f"requests/{a.id}.json"])
    assert public["status"] == "FAILED" and public["model"] == "org/a" and public["revision"] == "a" * 40
    assert public["reason"] == "CUDA OOM while loading <path>"
    assert public["family"] == "Qwen2" and public["submitted_time"].endswith("Z")
    text = json.dumps(public)
    assert "secret" not in text and "/home" not in text and "alice" not in text and "log_tail" not in text
    assert json.loads(hub.files(REQUESTS)[f"requests/{b.id}.json"])["status"] == "PENDING"
    # a fresh publisher (a restart) picks up from the stored cursor and the stored last commit time
    again = fast(store, hub, mirror_every_s=60.0, clock=clock)
    assert again.mirror_requests() == 0
    clock.sleep(61)
    assert again.mirror_requests() == 0 and len(hub.commit_log) == 3  # nothing changed since: nothing re-sent
    store.claim("w")
    clock.sleep(61)
    assert again.mirror_requests() == 1 and len(hub.commit_log) == 4
    assert json.loads(hub.files(REQUESTS)[f"requests/{b.id}.json"]) == request_json(store.get(b.id))
    assert request_json(store.get(b.id))["status"] == "RUNNING"


def test_import_published_reads_results_once_and_keeps_job_ids(tmp_path):
    hub = FakeHub()
    first = make_store(tmp_path / "first")
    ids = [run_job(first, tmp_path, i)[0] for i in range(4)]
    assert fast(first, hub).publish_pending() == 4
    fresh = make_store(tmp_path / "fresh")  # e.g. a Space restarted on an empty database
    run_job(fresh, tmp_path, 0)  # evaluated here too: the local row wins
    publisher = fast(fresh, hub)
    with hub.outage("connect"):
        assert publisher.import_published() is None  # logged; the app starts anyway
    assert publisher.import_published() == 3
    assert publisher.import_published() == 0  # nothing twice
    for job_id in ids[1:]:
        assert fresh.get(job_id).status == FINISHED
    assert sorted(r["model"] for r in fresh.results()) == [f"org/model-{i:02d}" for i in range(4)]
    assert [p.job.model for p in fresh.unpublished()] == ["org/model-00"]  # imported rows are not re-published
    assert publisher.mirror_requests(force=True) == 1  # nor mirrored (status_at 0): only the local job


# ------------------------------------------------------------------------------------------------
# The whole thing: 60 jobs, the commit cap, injected failures, latency and an outage
# ------------------------------------------------------------------------------------------------
def test_hub_limit_sixty_jobs_published_under_cap_failures_and_outage(demo_tree, tmp_path):
    cap, window = 8, 2.0  # 8 commits per 2 s: the Hub's 128/hour cap, scaled down to run in seconds
    hub = FakeHub(
        commit_cap=cap,
        window_s=window,
        latency_s=0.002,
        failure_rate=0.2,
        failing_calls=frozenset({"create_commit"}),
        seed=11,
    )
    publish(demo_tree, REPO, api=hub)  # the built tree and its card (declaring results and outputs) first
    hub.fail_next(2, 503, calls=("create_commit",), after_commit=True)  # two commits land, their answers are lost
    store = make_store(tmp_path)
    publisher = fast(store, hub, batch=3, mirror_every_s=0.25, max_s=window + 1, rng=random.Random(3))
    stop = threading.Event()
    thread = threading.Thread(target=publisher.run_forever, args=(stop, 0.05), daemon=True)
    thread.start()
    rows: dict[str, dict] = {}
    slowest = 0.0

    def produce(indices: range) -> None:
        nonlocal slowest
        for i in indices:
            start = time.perf_counter()
            job_id, row = run_job(store, tmp_path, i, parts=1 + i % 2)
            slowest = max(slowest, time.perf_counter() - start)
            rows[job_id] = row

    started = time.monotonic()
    try:
        produce(range(0, 20))
        with hub.outage("connect"):  # the Hub is down: every call fails
            down_at = time.monotonic()
            produce(range(20, 40))
            deadline = time.monotonic() + 20
            while hub.failed["connect"] < 3 and time.monotonic() < deadline:  # the publisher met the outage
                time.sleep(0.05)
            up_at = time.monotonic()
        assert len(rows) == 40 and all(store.get(j).status == FINISHED for j in rows)  # the store went on
        assert slowest < 1.0
        produce(range(40, 60))
        produced = time.monotonic() - started
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            files = hub.files(REPO)
            requests = hub.files(REQUESTS) if REQUESTS in hub._repos else {}
            published = all(f"results/{j}.parquet" in files for j in rows)
            mirrored = all(
                json.loads(requests.get(f"requests/{j}.json", b"{}")).get("status") == FINISHED for j in rows
            )
            if published and mirrored and not store.unpublished(limit=1000):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"not caught up: {len(store.unpublished(limit=1000))} waiting, {hub.failed}")
    finally:
        stop.set()
        thread.join(timeout=30)
    elapsed = time.monotonic() - started
    assert not thread.is_alive()

    # every job's row and outputs are on the Hub, none lost, none duplicated
    folder = hub.snapshot_download(REPO, repo_type="dataset")  # a fresh folder name (see fakehub)
    results = datasets.load_dataset(folder, "results", split="test")
    key = lambda r: r["model"]  # noqa: E731
    assert sorted(results.to_list(), key=key) == sorted(typed(list(rows.values()), RESULTS), key=key)
    outputs = datasets.load_dataset(folder, "outputs", split="test")
    assert len(outputs) == 60 * len(ITEM_IDS)
    assert len({(r["model"], r["item_id"]) for r in outputs}) == len(outputs)
    assert sum(n.startswith("outputs/") for n in hub.files(REPO)) == sum(1 + i % 2 for i in range(60))

    # commits: batched, at most one per job (plus re-sends of commits whose answer was lost), never above the cap
    results_commits = hub.commits_to(REPO)[1:]  # after the tree's
    mirror_commits = hub.commits_to(REQUESTS)
    summary = (
        f"60 jobs in {elapsed:.1f}s (producing {produced:.1f}s): {len(results_commits)} results commits, "
        f"{len(mirror_commits)} mirror commits, busiest window {hub.max_commits_in_window(REPO)}, "
        f"{hub.rate_limited} refused by the cap, failures {dict(hub.failed)}, lost answers "
        f"{sum(c.answer_lost for c in hub.commit_log)}"
    )
    print("\n" + summary)
    assert len(results_commits) <= 60
    for job_id in rows:
        adds = [c for c in results_commits if f"results/{job_id}.parquet" in c.added]
        lost_before = [c for c in adds[:-1] if c.answer_lost]
        assert len(adds) == 1 + len(lost_before)  # a job is only re-sent when its commit's answer was lost
    assert len(mirror_commits) <= elapsed / 0.25 + 2
    for job_id in rows:  # a request file is written once per status (PENDING, RUNNING, FINISHED) at most
        adds = [c for c in mirror_commits if f"requests/{job_id}.json" in c.added]
        assert 1 <= len(adds) <= 3 + sum(c.answer_lost for c in adds)
    assert hub.max_commits_in_window(REPO) <= cap and hub.max_commits_in_window(REQUESTS) <= cap
    assert hub.rate_limited >= 1, summary  # the cap was hit, and its Retry-After honoured
    assert not [c for c in hub.commit_log if down_at + 0.05 < c.at < up_at]  # nothing landed while down
    assert hub.failed["connect"] >= 3 and sum(hub.failed.values()) > hub.failed["connect"]
