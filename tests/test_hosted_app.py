"""The hosted ``app.main()`` path (``build_hosted``): PostgreSQL, the fake Hub, the publisher thread running.

The Space starts and serves the board at once while the rows published before are imported in the
background; a job that finishes while it runs is published once.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from pathlib import Path

import pytest
from fakehub import FakeHub
from gradio_client import Client
from postgres import fresh_database
from space_fixtures import ALL_ORIGINS, as_a_space, board, evaluated_model, local_settings, space_app

from tcmqa.hub import Publisher
from tcmqa.publish import publish
from tcmqa.store import FINISHED, SQLiteStore, open_store

REPO, REQUESTS = "org/TCMQA", "org/requests"


def _wait(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    settings = dataclasses.replace(
        local_settings(url, demo_tree),
        hosted=True,
        publish=True,
        practice=False,
        results_repo=REPO,
        requests_repo=REQUESTS,
    )
    stop = threading.Event()
    demo, threads = space_app()["build_hosted"](settings, hub, stop)
    port = _free_port()
    demo.queue(default_concurrency_limit=8).launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True
    )
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
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
    finally:
        stop.set()
        demo.close()
        for thread in threads:
            thread.join(timeout=30)
    adds = [c for c in hub.commits_to(REPO) if f"results/{job.id}.parquet" in c.added]
    assert len(adds) == 1  # published once
    assert not any(t.is_alive() for t in threads)
