"""Local mode's identity (tcmqa.leaderboard.identity): a stranger who reaches the page, with plain HTTP and
no secret, calls every function the app registers through ``/gradio_api/queue/join`` (the ``api_name=False``
ones too) with the most plausible arguments (a practitioner's name, the queued job's id, the admin's
name), and gets nothing of the practitioner's, records nothing and changes no job; a name resumes only
with its key; local mode refuses to listen beyond loopback without the operator's token."""

from __future__ import annotations

import argparse
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio_calls import Page
from sources import half_rated_tree
from space_fixtures import as_a_space, hub_models, launch, local_settings

from tcmqa import serve
from tcmqa.leaderboard.identity import ACCESS, Guard, NotProven, check_bind, digest
from tcmqa.leaderboard.space import build_app
from tcmqa.prompts import PROTOCOL
from tcmqa.store import PENDING, SQLiteStore, Store

ANN, ADMIN = "qi-practitioner-ann", "lead-admin"
LICENCE = "LIC-7731-private"
TOKEN = "operator-token-0123456789abcdef"


@pytest.fixture(scope="module")
def half_tree(tmp_path_factory) -> Path:
    """The demo items; the imported study rates the first 16 only (the rest make fresh blocks)."""
    return half_rated_tree(tmp_path_factory.mktemp("identity"))


def plausible(page: Page, cid: int, item: str, job: str, block: int) -> list[Any]:
    """What a stranger would try in this input: names in name fields, the job's id, the open item, no key."""
    component = page.components[cid]
    kind, props, elem = component["type"], component.get("props", {}), page.elem(cid)
    if kind == "textbox":
        if any(w in elem for w in ("key", "token")):
            return ["", "guess"]
        if any(w in elem for w in ("name", "account")):
            return [ANN, ADMIN]
        if "job" in elem:
            return [job]
        if "item" in elem:
            return [item]
        return ["stranger's text"]
    if kind == "checkbox":
        return [True]
    if kind == "number":
        return [block]
    if kind in ("radio", "dropdown", "checkboxgroup"):
        choices = [c[1] if isinstance(c, list | tuple) else c for c in props.get("choices") or []]
        if not choices:
            return [props.get("value")]
        return [[choices[0]]] if kind == "checkboxgroup" or props.get("multiselect") else [choices[0]]
    return [props.get("value")]


def answer(shown: dict[str, Any], key: str) -> dict[str, Any]:
    """The practitioner's answer to the item on her screen, by elem_id (its type: the control the screen shows)."""
    multi = shown["practice-multi"].get("visible")
    return {
        "practice-name": ANN,
        "practice-key": key,
        "practice-item": shown["practice-item"],
        "practice-single": None if multi else "A",
        "practice-multi": ["A", "B"] if multi else [],
        "practice-domains": ["materia_medica"],
        "practice-difficulty": 3,
    }


def practice_state(store: SQLiteStore) -> dict[str, Any]:
    return {
        "responses": store.practice_responses(),
        "practitioners": store.practitioners(),
        "assignments": store.practice_assignments(),
        "exclusions": store.practice_exclusions(),
        "keys": store.practitioner_key_digest(ANN) if hasattr(store, "practitioner_key_digest") else None,
    }


def test_local_identity_stranger_calls_every_function(tmp_path: Path, half_tree: Path) -> None:
    store = SQLiteStore(tmp_path / "store")
    job = store.submit("org/good", "c" * 40, PROTOCOL, "someone").id
    settings = local_settings(store.root, half_tree, practice_block_size=5, practice_admins=(ADMIN,), admin_token=TOKEN)
    demo, url = launch(settings, store, hub_models())
    try:
        page = Page(url)
        # the practitioner starts (her browser keeps the key the start returns) and records her first item
        start = page.fn("practice_start")
        started = page.call(
            start["id"],
            page.by_elem(start, {"practice-name": ANN, "practice-licence": True, "practice-licence-number": LICENCE}),
        )
        assert started["success"], started
        shown = page.shown(start, started)
        key = shown.get("practice-key", "")  # the key her first start issued (none on a page without keys)
        submit = page.fn("practice_submit")
        recorded = page.call(submit["id"], page.by_elem(submit, answer(shown, key)))
        assert recorded["success"] and len(store.practice_responses(account=ANN)) == 1, recorded
        (block,) = {a["block"] for a in store.practice_assignments(account=ANN)}
        shown = page.shown(submit, recorded)
        item = shown["practice-item"]  # her open item, the next of her block
        before, job_before = practice_state(store), store.get(job)
        # the stranger: every registered function, every plausible combination of its inputs (16 at most)
        leaked, calls = set(), 0
        for dependency in page.config["dependencies"]:
            options = [plausible(page, cid, item, job, block) for cid in dependency["inputs"]]
            for data in itertools.islice(itertools.product(*options), 16):
                seen = json.dumps(page.call(dependency["id"], list(data)), ensure_ascii=False, default=str)
                calls += 1
                leaked |= {
                    (dependency["id"], dependency.get("api_name")) for s in (ANN, LICENCE, key) if s and s in seen
                }
        assert calls >= len(page.config["dependencies"]) > 40
        assert not leaked, f"the practitioner's name, licence or key reached a stranger from {sorted(leaked)}"
        after = practice_state(store)
        assert after == before, [k for k in before if after[k] != before[k]]  # no answer, practitioner, slot, key
        job_after = store.get(job)
        assert job_after is not None and job_before is not None and job_after.status == PENDING
        assert job_after.reason == job_before.reason
        # the controls: the same calls with the secrets do what the stranger's could not
        assert page.call(submit["id"], page.by_elem(submit, answer(shown, key)))["success"]
        assert len(store.practice_responses(account=ANN)) == 2
        cancel = page.fn("admin_cancel")
        values = {"admin-account": ADMIN, "admin-key": TOKEN, "admin-job": job, "admin-reason": "a test"}
        assert page.call(cancel["id"], page.by_elem(cancel, values))["success"]
        cancelled = store.get(job)
        assert cancelled is not None and cancelled.status == "FAILED" and f"by {ADMIN}" in (cancelled.reason or "")
        print(f"{calls} calls of {len(page.config['dependencies'])} functions")
    finally:
        demo.close()


@pytest.mark.parametrize("hosted", [False, True], ids=["local", "hosted"])
def test_local_identity_every_handler_declares_its_access(
    tmp_path: Path, half_tree: Path, hosted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every function the app registers went through the guard; those that are not public take the name and
    the key first (what the guard proves the caller from)."""
    if hosted:
        as_a_space(monkeypatch)
    store = SQLiteStore(tmp_path / "store")
    demo = build_app(local_settings(store.root, half_tree, hosted=hosted, admin_token=TOKEN), store, hub_models())
    try:
        declared = {}
        for fn in demo.fns.values():
            if fn.fn is None or fn.fn.__module__.startswith("gradio."):  # the page's JavaScript; the login button's
                continue
            declared[fn.fn.__name__] = getattr(fn.fn, ACCESS, None)
            if declared[fn.fn.__name__] != "public":
                assert [getattr(c, "elem_id", None) for c in fn.inputs[:2]] in (
                    ["practice-name", "practice-key"],
                    ["admin-account", "admin-key"],
                ), fn.fn.__name__
    finally:
        demo.close()
    assert {
        name for name, access in declared.items() if access not in ("public", "practitioner", "starting", "admin")
    } == set()
    assert declared["start"] == "starting" and declared["resume"] == declared["heartbeat"] == "practitioner"
    assert declared["admin_cancel"] == declared["console"] == declared["export"] == "admin"
    assert declared["show_board"] == declared["show_item"] == "public"


def test_local_identity_serve_refuses_beyond_loopback_without_token(monkeypatch, capsys) -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, None)
    for host in ("0.0.0.0", "::", "192.168.1.20", "example.org", ""):
        with pytest.raises(ValueError, match="TCMQA_ADMIN_TOKEN"):
            check_bind(host, None)
        check_bind(host, TOKEN)
    with pytest.raises(ValueError, match="use at least 16"):
        check_bind("0.0.0.0", "short")
    monkeypatch.delenv("TCMQA_ADMIN_TOKEN", raising=False)
    app = Path(__file__).resolve().parents[1] / "space" / "app.py"
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    assert serve.main(parser.parse_args(["--app", str(app), "--host", "0.0.0.0"])) == 2  # refused before running
    assert "refusing to serve local mode on '0.0.0.0'" in capsys.readouterr().err


def test_local_identity_guard_rules(tmp_path: Path) -> None:
    """A name is an account with its key only; a new name's first start issues the key; an admin needs the
    operator's token; hosted, the signed-in profile alone (a typed name is ignored)."""
    store = SQLiteStore(tmp_path / "store")
    guard = Guard(hosted=False, admins=(ADMIN,), admin_token=TOKEN, store=store)
    assert guard.account("", "", None) is None and guard.claim("  ", "x", None) == (None, None)  # anonymous
    with pytest.raises(NotProven):
        guard.account(ANN, "", None)  # a name that never started: no key to prove it
    who, key = guard.claim(f" {ANN} ", "", None)
    assert who == ANN and key and store.practitioner_key_digest(ANN) == digest(key)
    assert guard.account(ANN, key, None) == ANN and guard.claim(ANN, key, None) == (ANN, None)
    for wrong in ("", "guess", key[:-1], key + "x"):
        with pytest.raises(NotProven, match="Not signed in under this name"):
            guard.claim(ANN, wrong, None)  # a second start of the name issues nothing
    assert store.practitioner_key_digest(ANN) == digest(key)
    beat = guard.background(lambda who, item: (who, item))  # the page's own timer: never a refusal to show
    assert beat(ANN, "", "i1", None) == (None, "i1") and beat(ANN, key, "i1", None) == (ANN, "i1")
    with pytest.raises(NotProven):
        guard.practitioner(lambda who, item: (who, item))(ANN, "", "i1", None)
    with pytest.raises(NotProven, match="TCMQA_ADMIN_TOKEN"):
        guard.account(ADMIN, "", None)  # an admin name is never issued a key: it needs the token
    assert guard.claim(ADMIN, TOKEN, None) == (ADMIN, None) and store.practitioner_key_digest(ADMIN) is None
    assert guard.admin_account(ADMIN, TOKEN, None) == ADMIN and guard.admin_account(ANN, key, None) is None
    with pytest.raises(NotProven, match="none is set"):
        Guard(hosted=False, admins=(ADMIN,), admin_token=None, store=store).admin_account(ADMIN, TOKEN, None)
    for bad in ("x" * 101, "ann\x00", "ann\u202e"):
        with pytest.raises(NotProven, match=r"longer than|control characters"):
            guard.account(bad, "", None)
    hosted = Guard(hosted=True, admins=(ADMIN,), admin_token=None, store=store)
    profile = gr.OAuthProfile({"preferred_username": ADMIN, "name": ADMIN, "profile": "", "picture": ""})
    assert hosted.account(ANN, "", None) is None and hosted.account("", "", profile) == ADMIN
    assert hosted.admin_account(ANN, TOKEN, None) is None and hosted.admin_account("", "", profile) == ADMIN


def test_local_identity_key_bound_once(url: str, tmp_path: Path) -> None:
    """Two first starts of one name at once: one key is bound, the other start is refused (SQLite, PostgreSQL)."""
    store = Store(url, cache_dir=tmp_path / "cache")
    barrier, bound = threading.Barrier(8), []

    def bind(i: int) -> None:
        barrier.wait()
        bound.append((i, store.bind_practitioner_key(ANN, digest(f"key-{i}"))))

    threads = [threading.Thread(target=bind, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (winner,) = [i for i, ok in bound if ok]
    assert store.practitioner_key_digest(ANN) == digest(f"key-{winner}") and store.practitioner_key_digest("x") is None
    store.close()
