"""The hosted ``app.main()`` path (``build_hosted``): PostgreSQL, the fake Hub, the publisher thread running.

The Space starts and serves the board at once while the rows published before are imported in the
background; a job that finishes while it runs is published once. Through a Hub outage in the middle of a
job, with a second worker whose clock runs ten minutes fast, every job finishes and is published once,
after the outage, with no attempt counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakehub import FakeHub
from gradio_client import Client
from postgres import fresh_database
from space_fixtures import ALL_ORIGINS, as_a_space, board, evaluated_model, local_settings
from workers import stop_workers, worker_process

from tcmqa.hub.publisher import Publisher
from tcmqa.leaderboard.hosted import build_hosted
from tcmqa.leaderboard.space import launch as launch_app
from tcmqa.prompts import PROTOCOL
from tcmqa.publish import publish
from tcmqa.store import FINISHED, SQLiteStore, open_store
from tcmqa.worker import run_folder

REPO, REQUESTS = "org/TCMQA", "org/requests"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _wait(condition, timeout_s: float = 60.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _hosted_space(url: str, demo_tree: Path, hub: FakeHub) -> Iterator[Client]:
    """The Space as ``app.main()`` builds it (``build_hosted``) on the store ``url``, publishing to ``hub``,
    launched on a free port; its publisher threads are stopped, and must end, when the block ends."""
    settings = dataclasses.replace(
        local_settings(url, demo_tree),
        hosted=True,
        publish=True,
        practice=False,
        results_repo=REPO,
        requests_repo=REQUESTS,
    )
    stop = threading.Event()
    demo, threads = build_hosted(settings, hub, stop)
    port = _free_port()
    launch_app(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        stop.set()
        demo.close()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads)


def _result_commits(hub: FakeHub, job_id: str) -> list:
    """The commits that added the job's results file to the results repo."""
    return [c for c in hub.commits_to(REPO) if f"results/{job_id}.parquet" in c.added]


def test_hosted_app_imports_in_the_background_and_publishes_a_finished_job_once(
    postgres_url: str, demo_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_a_space(monkeypatch)
    hub = FakeHub()
    publish(demo_tree, REPO, api=hub)  # the served corpus on the (fake) Hub
    earlier = SQLiteStore(tmp_path / "earlier")  # a row published by an earlier Space
    evaluated_model(earlier, demo_tree, tmp_path, model="org/earlier")
    assert Publisher(earlier, hub, REPO).publish_pending() == 1

    url = fresh_database(postgres_url)
    with _hosted_space(url, demo_tree, hub) as client:
        _wait(lambda: "org/earlier" in {r["Model"] for r in board(client)})  # imported in the background
        store = open_store(url, cache_dir=tmp_path / "cache")
        done_dir = tmp_path / "done"
        done_dir.mkdir()
        evaluated_model(store, demo_tree, done_dir, model="org/new", revision="b" * 40)
        [job] = [j for j in store.jobs() if j.model == "org/new"]
        assert job.status == FINISHED
        _wait(lambda: f"results/{job.id}.parquet" in hub.files(REPO))
        _wait(lambda: "org/new" in {r["Model"] for r in board(client)})
        assert {r["Origin"] for r in board(client)} >= set(ALL_ORIGINS) - {"reference"}
    assert len(_result_commits(hub, job.id)) == 1  # published once


def test_hosted_app_outage_mid_job_with_clock_skew(
    postgres_url: str, demo_tree: Path, tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three jobs, two workers (the second's clock ten minutes fast, its stale check at 3 s). The Hub goes
    down while the first job runs: that job finishes but its publication is refused; the jobs claimed during
    the outage meet it in their model download (the harness exits 75) and wait to retry. Then the Hub
    comes back: every job finishes on its first counted attempt and is published once, after the outage."""
    as_a_space(monkeypatch)
    monkeypatch.setenv("STAND_IN_STEPS", "10")
    monkeypatch.setenv("STAND_IN_SLEEP", "0.4")
    hub = FakeHub()
    monkeypatch.setenv("STAND_IN_HUB_DOWN", str(hub.down_flag))  # the harness's downloads see the outage
    publish(demo_tree, REPO, api=hub)
    url = fresh_database(postgres_url)
    store = open_store(url)
    first, *others = jobs = [store.submit(f"org/m{i}", SHA, PROTOCOL, "u") for i in range(3)]
    retry = ("--retry-backoff-s", "0.5")
    workers = [worker_process(url, tmp_path / "healthy", stand_in, *retry, data=str(demo_tree))]
    try:
        with _hosted_space(url, demo_tree, hub) as client:
            _wait(lambda: (run_folder(tmp_path / "healthy" / "runs", first) / "step-1").exists(), what="mid-job")
            hub.go_down(503, retry_after=1)
            workers.append(
                worker_process(
                    url, tmp_path / "skewed", stand_in, *retry, "--stale-after-s", "3", skew_s=600, data=str(demo_tree)
                )
            )
            _wait(
                lambda: hub.refused_commits[REPO] > 0 and all(store.get(j.id).retries > 0 for j in others),
                what="a refused publication and a transient failure of each job claimed during the outage",
            )
            assert store.get(first.id).status == FINISHED  # finished during the outage, not yet published
            assert not hub.commits_to(REPO)[1:]  # only the corpus's commit
            hub.come_back()
            _wait(lambda: all(_result_commits(hub, j.id) for j in jobs), what="every job published")
            _wait(lambda: {j.model for j in jobs} <= {r["Model"] for r in board(client)}, what="the board's rows")
    finally:
        stop_workers(workers)
    logs = "".join((tmp_path / w / "worker.log").read_text() for w in ("healthy", "skewed"))
    [(_, outage_ended)] = hub.outages
    starts = [line.split()[0] for line in (tmp_path / "starts.txt").read_text().splitlines()]
    for job in jobs:
        done = store.get(job.id)
        assert done.status == FINISHED, logs
        assert done.attempts == 1, logs  # the outage cost no attempt, and no stale check re-queued a job
        assert starts.count(job.model) == done.retries + 1, logs  # every start but the last met the outage
        [commit] = _result_commits(hub, job.id)  # published once ...
        assert commit.at > outage_ended  # ... after the outage
    assert store.get(first.id).retries == 0  # the job running when the Hub went down was not disturbed
    assert all(store.get(j.id).retries > 0 for j in others)
    assert "re-queued" not in logs and "stopped responding" not in logs
    store.close()
