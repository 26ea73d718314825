"""Admin actions on the queue (TCMQA_ADMINS): cancel, re-queue, withdraw a published row (one Hub commit that
removes its files, with the reason), on a real SQLite store and the fake Hub, in-process and through the app."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fakehub import FakeHub
from gradio_client import Client
from postgres import fresh_database
from space_fixtures import SHA, evaluated_model, hub_models, launch, local_settings

from tcmqa.hub.publisher import Publisher
from tcmqa.prompts import PROTOCOL
from tcmqa.publish import publish
from tcmqa.store import FAILED, FINISHED, PENDING, SQLiteStore, Store, open_store
from tcmqa.store.admin import NotAllowed

REPO = "org/TCMQA"


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A real store of each kind (the admin actions are one SQL transaction on both)."""
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "store")
    return open_store(fresh_database(request.getfixturevalue("postgres_url")), cache_dir=tmp_path / "cache")


def test_cancel_requeue_and_their_refusals(any_store: Store) -> None:
    store = any_store
    pending = store.submit("org/a", "1" * 40, PROTOCOL, "u")
    store.submit("org/b", "2" * 40, PROTOCOL, "u")
    cancelled = store.cancel(pending.id, "boss", "spam")
    assert (cancelled.status, cancelled.reason) == (FAILED, "cancelled by boss: spam")
    running = store.claim("w")
    assert running is not None and running.model == "org/b"
    store.cancel(running.id, "boss", "wrong revision")
    assert not store.heartbeat(running) and not store.finish(running, {"model": "org/b"}, [])  # the worker lost it
    requeued = store.requeue(pending.id, "boss")
    assert (requeued.status, requeued.reason, requeued.attempts) == (PENDING, "re-queued by boss", 0)
    with pytest.raises(NotAllowed, match="not FAILED"):
        store.requeue(pending.id, "boss")
    store.submit("org/b", "2" * 40, PROTOCOL, "u")  # resubmitted meanwhile: the old job may not come back
    with pytest.raises(NotAllowed, match="already queued"):
        store.requeue(running.id, "boss")
    with pytest.raises(NotAllowed, match="not FINISHED"):
        store.withdraw(pending.id, "boss", "why")


def test_withdraw_removes_the_published_files_in_one_commit_with_the_reason(demo_tree: Path, tmp_path: Path) -> None:
    hub = FakeHub()
    publish(demo_tree, REPO, api=hub)
    store = SQLiteStore(tmp_path / "store")
    evaluated_model(store, demo_tree, tmp_path, model="org/kept")
    (tmp_path / "gone").mkdir()
    evaluated_model(store, demo_tree, tmp_path / "gone", model="org/gone", revision="b" * 40)
    publisher = Publisher(store, hub, REPO)
    assert publisher.publish_pending() == 2
    [gone] = [j for j in store.jobs() if j.model == "org/gone"]
    files = [f for f in hub.files(REPO) if gone.id in f]
    assert f"results/{gone.id}.parquet" in files and any(f.startswith("outputs/") for f in files)
    version = store.version()
    assert publisher.withdraw(gone.id, "boss", "trained on the test items")
    last = hub.commits_to(REPO)[-1]
    assert sorted(last.deleted) == sorted(files) and not last.added
    assert "trained on the test items" in last.message and "boss" in last.message
    assert not [f for f in hub.files(REPO) if gone.id in f] and any("results/" in f for f in hub.files(REPO))
    assert [r["model"] for r in store.results()] == ["org/kept"] and store.version() != version
    assert store.get(gone.id).status == FAILED and "trained on the test items" in store.get(gone.id).reason
    assert store.unpublished() == []
    with pytest.raises(NotAllowed):  # nothing twice, and no commit for it
        publisher.withdraw(gone.id, "boss", "again")
    assert hub.commits_to(REPO)[-1] == last


def test_admin_actions_through_the_app(demo_tree: Path, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store")
    token = "operator-token-0123456789abcdef"  # local mode: an admin's key is the operator's token
    settings = dataclasses.replace(local_settings(store.root, demo_tree), practice_admins=("boss",), admin_token=token)
    demo, url = launch(settings, store, hub_models())
    try:
        client = Client(url, verbose=False)
        job = store.submit("org/good", SHA, PROTOCOL, "u")
        assert (
            client.predict("mallory", "", job.id, "mine now", api_name="/admin_cancel")
            == "❌ Admins only (TCMQA_ADMINS)."
        )
        assert store.get(job.id).status == PENDING
        assert (
            client.predict("boss", token, job.id, "", api_name="/admin_cancel") == "❌ Enter the job id and a reason."
        )
        done = client.predict("boss", token, job.id, "duplicate of another model", api_name="/admin_cancel")
        assert done.startswith("✅ **FAILED**") and store.get(job.id).reason.startswith("cancelled by boss")
        assert client.predict("boss", token, job.id, "", api_name="/admin_requeue").startswith("✅ **PENDING**")
        refused = client.predict("boss", token, job.id, "why", api_name="/admin_withdraw")
        assert refused.startswith("❌") and "not FINISHED" in refused
        evaluated_model(store, demo_tree, tmp_path, model="org/finished")
        [finished] = [j for j in store.jobs() if j.status == FINISHED]
        withdrawn = client.predict("boss", token, finished.id, "bad row", api_name="/admin_withdraw")  # local: no Hub
        assert withdrawn.startswith("✅ **FAILED**") and store.results() == []
    finally:
        demo.close()
