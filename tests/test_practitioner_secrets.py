"""The Practitioners tab never shows a visitor an exception's text (issue 19): every handler is ``visitor_safe``.

The app is built for real (``build_app`` on a real SQLite store and the demo tree, the Hub faked) and its
Practitioners handlers are called as gradio calls them (``demo.fns``), every one of them, API or not (the page
load's ``resume``, the heartbeat). First a practitioner starts normally, so an item is on screen; then the
practice data or the store fails with a message that names a password, and no handler's output or error
carries it: a failure reads as its kind and an id, which the operator's log ties to the text.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
import sqlalchemy.exc
from sources import DEMO_ITEMS
from space_fixtures import hub_models, local_settings

from tcmqa.build import build
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.practice_tab import DOMAIN_CHOICES
from tcmqa.leaderboard.space import build_app
from tcmqa.store import SQLiteStore
from tcmqa.store.practice import PracticeStore

SECRET = "password=hunter2 host=db.internal.example"
ADMIN, TOKEN = "admin", "operator-token-0123456789abcdef"


@pytest.fixture(scope="module")
def fresh_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo items with no study yet: every item is open to a practitioner."""
    out = tmp_path_factory.mktemp("fresh-tree")
    build([str(DEMO_ITEMS)], out)
    return out


def _calls(item: str, domain: str, key: str) -> dict[str, list[tuple[Any, ...]]]:
    """Each Practitioners handler with what a page sends it: the name and its key first (an admin's: the
    operator's token), the profile last (local mode has none)."""
    return {
        "start": [("ann", key, True, "LIC-1", None), ("ann", key, False, "", None)],
        "resume": [("ann", key, None), (None, None, None)],
        "submit": [("ann", key, item, "A", [], [domain], 3, False, "", None)],
        "pause": [("ann", key, item, None)],
        "heartbeat": [("ann", key, item, None)],
        "next_block": [("ann", key, None)],
        "console": [(ADMIN, TOKEN, None)],
        "exclude": [(ADMIN, TOKEN, "ann", "clicking through", None)],
        "include": [(ADMIN, TOKEN, "ann", "cleared", None)],
        "release": [(ADMIN, TOKEN, "ann", 0, "away", None)],
        "reassign": [(ADMIN, TOKEN, "bo", 0, 0, "away", None)],
        "export": [(ADMIN, TOKEN, None)],
    }


def _down(*args: Any, **kwargs: Any) -> Any:
    raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception(f"connection failed: {SECRET}"))


@pytest.mark.parametrize("failing", ["store", "practice data"])
def test_practitioner_errors_hide_secrets_from_visitors(
    failing: str, tmp_path: Path, fresh_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "store")
    settings = local_settings(
        store.root, fresh_tree, practice_block_size=5, practice_admins=(ADMIN,), admin_token=TOKEN
    )
    demo = build_app(settings, store, hub_models())
    handlers = {
        f.fn.__name__: f.fn
        for f in demo.fns.values()
        if f.fn is not None and "practitioners_tab.<locals>" in f.fn.__qualname__
    }
    started = handlers["start"]("ann", "", True, "LIC-1", None)
    shown = {getattr(component, "elem_id", None): value for component, value in started.items()}
    item, key = shown["practice-item"], shown["practice-key"]  # the key: issued by the name's first start
    assert item, started  # an item is on screen: its clock runs, so submit reaches the store
    calls = _calls(item, DOMAIN_CHOICES[0][1], key)
    assert set(handlers) == set(calls)  # every handler of the tab is called below (a new one must be added)

    if failing == "store":
        for name, _ in inspect.getmembers(PracticeStore, inspect.isfunction):
            if not name.startswith("_"):
                monkeypatch.setattr(store, name, _down)
    else:
        monkeypatch.setattr(practice_lib.PracticeLoader, "get", _down)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("tcmqa.space").addHandler(handler)
    seen: list[str] = []
    try:
        for name, argument_lists in calls.items():
            for args in argument_lists:
                try:
                    seen.append(f"{name}: {handlers[name](*args)!r}")
                except gr.Error as err:  # what the page shows in its error toast
                    seen.append(f"{name}: gr.Error {err.message}")
    finally:
        logging.getLogger("tcmqa.space").removeHandler(handler)
        demo.close()
    for text in seen:
        assert "hunter2" not in text and "db.internal" not in text, text
    failed = [text for text in seen if "database unavailable (error " in text]
    assert {text.split(":")[0] for text in failed} >= {"start", "submit", "next_block", "console", "export"}, seen
    logged = "\n".join(r.getMessage() for r in records)
    ids = {text.split("(error ")[1][:6] for text in failed}
    assert all(i in logged for i in ids) and "hunter2" in logged  # the operator's log has the text, by id
