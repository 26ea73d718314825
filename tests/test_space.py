"""The Space launched for real on 127.0.0.1 and driven with gradio_client: refusals, sign-in, board,
item explorer, queue, and 50 concurrent submissions. Only the Hub is faked (fakehub.py)."""

from __future__ import annotations

import dataclasses
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from gradio_client import Client
from space_fixtures import APP, REFUSALS, SHA, as_a_space, board, hub_models, launch, local_settings

from tcmqa.leaderboard.settings import Settings
from tcmqa.store import SQLiteStore


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory, demo_tree: Path):
    store = SQLiteStore(tmp_path_factory.mktemp("space-store"))
    hub = hub_models()
    for i in range(50):
        hub.add_model(f"org/m{i}", sha=f"{i:040x}")
    hub.add_model("org/same", sha="5" * 40)
    hub.add_model("org/dated", sha="6" * 40)
    demo, url = launch(local_settings(store.root, demo_tree), store, hub)
    yield SimpleSpace(store, Client(url, verbose=False), url)
    demo.close()


@dataclasses.dataclass
class SimpleSpace:
    store: SQLiteStore
    client: Client
    url: str


def test_every_refusal_returns_its_message(space: SimpleSpace) -> None:
    before = len(space.store.jobs())
    for model, revision, message in REFUSALS:
        feedback, job_id = space.client.predict(model, revision, api_name="/submit")
        assert message in feedback and feedback.startswith("❌"), (model, feedback)
        assert job_id == ""
    assert len(space.store.jobs()) == before


def test_submission_is_queued_then_duplicate_points_to_it(space: SimpleSpace) -> None:
    feedback, job_id = space.client.predict("org/good", "v1.0", api_name="/submit")
    assert feedback.startswith("✅") and job_id in feedback
    assert space.client.predict(job_id, api_name="/job").startswith("**PENDING**")
    again, _ = space.client.predict("org/good", SHA, api_name="/submit")
    assert f"already PENDING as job {job_id}" in again
    queue = space.client.predict(api_name="/queue")
    assert [row[1] for row in queue["data"] if row[3] == job_id.rsplit("-", 1)[-1]] == ["PENDING"]
    space.store.fail(space.store.claim("w"), "the harness exited with code 1", "CUDA OOM")
    status = space.client.predict(job_id, api_name="/job")
    assert "**FAILED**" in status and "exited with code 1" in status and "CUDA OOM" not in status
    assert space.client.predict(job_id, api_name="/job_log") == "CUDA OOM"  # on demand, as text
    resubmitted, new_id = space.client.predict("org/good", "", api_name="/submit")
    assert resubmitted.startswith("✅") and new_id != job_id


def test_board_seeded_filters_and_picks_up_results(space: SimpleSpace) -> None:
    rows = board(space.client)
    assert len(rows) == 30 and rows[0]["Model"] == "Qwen2.5-14B-Inst." and rows[0]["Full"] == 77.98
    human = [r for r in rows if r["Origin"] == "reference"]
    assert len(human) == 1 and human[0]["Subset"] == 64.94
    assert {r["Model"] for r in board(space.client, search="qwen2.5")} == {
        "Qwen2.5-0.5B-Inst.",
        "Qwen2.5-1.5B-Inst.",
        "Qwen2.5-3B-Inst.",
        "Qwen2.5-7B-Inst.",
        "Qwen2.5-14B-Inst.",
    }
    gemma = board(space.client, families=["Gemma3"], size_max=2)
    assert {r["Model"] for r in gemma} == {"Gemma-3-270M-It", "Gemma-3-1B-It", "Licensed practitioners (majority vote)"}

    space.store.submit("org/new", SHA, "v1", "local")
    job = space.store.claim("w")
    assert space.store.finish(
        job,
        {"model": "org/new", "family": "Qwen2", "params_b": 0.5, "full": 99.0, "origin": "evaluated", "revision": SHA},
        [],
    )
    top = board(space.client)[0]  # no restart: the next refresh reads the store
    assert (top["Model"], top["Origin"], top["Full"]) == ("org/new", "evaluated", 99.0)


def test_item_explorer(space: SimpleSpace, demo_items: list[dict]) -> None:
    text, responses, _outputs = space.client.predict(str(demo_items[0]["question_id"]), api_name="/item")
    assert demo_items[0]["question"] in text and "**Answer:** A" in text and "曲直" in text
    assert len(responses["data"]) == 3 and "practitioner id" in responses["headers"]
    missing, _, _ = space.client.predict("no-such-item", api_name="/item")
    assert "No item with id" in missing


def test_50_concurrent_submissions(space: SimpleSpace) -> None:
    def submit(model: str) -> str:
        return space.client.predict(model, "", api_name="/submit")[0]

    with ThreadPoolExecutor(50) as pool:
        different = list(pool.map(submit, [f"org/m{i}" for i in range(50)]))
    assert all(f.startswith("✅") for f in different), [f for f in different if not f.startswith("✅")][:3]
    jobs = space.store.jobs()
    assert sorted(j.model for j in jobs if j.model.startswith("org/m")) == sorted(f"org/m{i}" for i in range(50))

    with ThreadPoolExecutor(50) as pool:
        same = list(pool.map(submit, ["org/same"] * 50))
    assert sum(f.startswith("✅") for f in same) == 1
    assert all("already PENDING" in f for f in same if not f.startswith("✅"))
    assert sum(j.model == "org/same" for j in space.store.jobs()) == 1


def test_hosted_mode_refuses_calls_without_a_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Space (SYSTEM=spaces, SPACE_ID) with OAuth: gradio_client calls arrive with profile=None."""
    as_a_space(monkeypatch)
    store = SQLiteStore(tmp_path / "store")
    demo, url = launch(local_settings(store.root, "unused", hosted=True), store, hub_models())
    try:
        feedback, job_id = Client(url, verbose=False).predict("org/good", "", api_name="/submit")
    finally:
        demo.close()
    assert feedback == "❌ Sign in with Hugging Face first: the leaderboard only accepts signed-in submissions."
    assert job_id == "" and store.jobs() == []


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPACE_ID", raising=False)
    local = Settings.from_env()
    assert (local.hosted, local.store, local.start_worker) == (False, ".cache/space", True)
    monkeypatch.setenv("SPACE_ID", "TechTCM/leaderboard")
    monkeypatch.setenv("TCMQA_RATE_LIMIT", "3")
    with pytest.raises(ValueError, match="TCMQA_PSEUDONYM_KEY"):  # hosted practice needs a secret key
        Settings.from_env()
    monkeypatch.setenv("TCMQA_PSEUDONYM_KEY", "a-secret-of-the-space")
    with pytest.raises(ValueError, match="TCMQA_STUDY_REVISION"):  # and the study pinned, not its own output
        Settings.from_env()
    monkeypatch.setenv("TCMQA_STUDY_REVISION", "0" * 40)
    hosted = Settings.from_env()
    assert hosted.store == "/data/tcmqa" and not hosted.start_worker and hosted.publish
    assert (hosted.policy().rate_limit, hosted.policy().protocol) == (3, "v1")
    assert not local.publish


def test_item_explorer_on_a_tree_without_responses(tmp_path: Path, demo_items: list[dict]) -> None:
    from sources import DEMO_ITEMS

    from tcmqa.build import build
    from tcmqa.leaderboard.explorer import Explorer

    build([str(DEMO_ITEMS)], tmp_path / "tree")  # no platform database: corpus only
    text, responses, outputs = Explorer(str(tmp_path / "tree"), SQLiteStore(tmp_path / "s")).item(
        str(demo_items[1]["question_id"])
    )
    assert demo_items[1]["question"] in text and responses.empty and outputs.empty


def test_the_web_process_imports_no_engine() -> None:
    """DESIGN's rule: the Space's web process never imports an engine (the worker process does)."""
    import subprocess

    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1], run_name='space_app'); "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'evaluate') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(APP)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# a chat template's error that closes the status's code fence and injects a link and an image
INJECTED = "```\n\n[sign in again](https://evil.example/login) ![x](https://evil.example/x.png) <img src=x>"


def test_a_log_tail_is_text_never_markdown(space: SimpleSpace) -> None:
    _, job_id = space.client.predict("org/gated-ok", "", api_name="/submit")
    claimed = space.store.claim("w")
    while claimed is not None and claimed.id != job_id:  # earlier tests' jobs are still queued
        claimed = space.store.claim("w")
    assert claimed is not None
    space.store.fail(claimed, "template error: " + INJECTED, "jinja2 said:\n" + INJECTED)
    status = space.client.predict(job_id, api_name="/job")
    assert "**FAILED**" in status and "template error" in status
    # every character Markdown or HTML would read is escaped: no fence closes, no link or tag is made
    assert re.search(r"(?<!\\)(```|\]\(|<img|!\[)", status) is None, status
    assert space.client.predict(job_id, api_name="/job_log") == "jinja2 said:\n" + INJECTED  # the text, as is


SECRET = "password=hunter2-secret host=db.internal.example user=tcmqa_admin"


def test_secrets_in_pages_never_reach_a_visitor(
    tmp_path: Path, demo_tree: Path, demo_items: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database error names host, user and password: every page and API response says its kind and an
    id only, and the operator's log holds the text with that id."""
    import logging

    import httpx
    import sqlalchemy.exc

    store = SQLiteStore(tmp_path / "store")
    store.submit("org/good", SHA, "v1", "local")
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    client = Client(url, verbose=False)

    def down(*args, **kwargs):
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception(f"connection failed: {SECRET}"))

    for method in ("version", "jobs", "get", "submit", "results", "practice_version", "practice_snapshot"):
        if hasattr(store, method):
            monkeypatch.setattr(store, method, down)
    seen: list[str] = []
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("tcmqa.space").addHandler(handler)
    try:
        calls = [
            ((demo_items[0]["question_id"],), "/item"),
            (("org/good", ""), "/submit"),
            (("abc",), "/job"),
            (("abc",), "/job_log"),
            ((), "/queue"),
            ((), "/plots"),
            (("", [], None, None, ["evaluated"], ["Full"], "Full", True), "/board"),
        ]
        for args, api in calls:
            try:
                seen.append(str(client.predict(*args, api_name=api)))
            except Exception as err:  # gr.Error reaches the client as an AppError with the visitor's message
                seen.append(str(err))
        seen.append(httpx.get(url).text)
        seen.append(httpx.get(url + "gradio_api/info").text)
    finally:
        logging.getLogger("tcmqa.space").removeHandler(handler)
        demo.close()
    for text in seen:
        assert "hunter2" not in text and "db.internal" not in text and "tcmqa_admin" not in text, text
    assert any("database unavailable (error " in text for text in seen), seen
    ids = {text.split("(error ")[1][:6] for text in seen if "(error " in text}
    logged = "\n".join(r.getMessage() for r in records)
    assert ids and all(i in logged for i in ids) and "hunter2" in logged  # the operator's log has it all


def test_serve_honours_tcmqa_store_and_never_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tcmqa serve` runs on $TCMQA_STORE like the app (``--store`` wins); its help shows no URL."""
    import argparse
    import os
    import runpy

    from tcmqa import serve

    url = "postgresql://tcmqa:hunter2@db.internal.example/tcmqa"
    monkeypatch.setattr(os, "environ", dict(os.environ))  # serve sets the app's variables: none leaks out
    monkeypatch.setenv("TCMQA_STORE", url)
    seen: list[str] = []
    monkeypatch.setattr(runpy, "run_path", lambda *a, **k: seen.append(os.environ["TCMQA_STORE"]))
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    assert serve.main(parser.parse_args(["--app", str(APP)])) == 0
    assert serve.main(parser.parse_args(["--app", str(APP), "--store", "/tmp/s"])) == 0
    monkeypatch.delenv("TCMQA_STORE")
    assert serve.main(parser.parse_args(["--app", str(APP)])) == 0
    assert seen == [url, "/tmp/s", serve.DEFAULT_STORE]
    monkeypatch.setenv("TCMQA_STORE", url)
    assert "hunter2" not in parser.format_help()


def test_fresh_release_date_given_at_submission_reaches_the_job(space: SimpleSpace) -> None:
    feedback, job_id = space.client.predict("org/dated", "", "2024-06-07", api_name="/submit")
    assert feedback.startswith("✅"), feedback
    job = space.store.get(job_id)
    assert job is not None and job.meta["released"] == "2024-06-07"
    refused, _ = space.client.predict("org/dated", "", "June 2024", api_name="/submit")
    assert "YYYY-MM-DD" in refused
