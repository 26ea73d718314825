"""Local mode's identity (tcmqa.leaderboard.identity): a stranger who reaches the page, with plain HTTP and
no secret, calls every function the app registers through ``/gradio_api/queue/join`` (the ``api_name=False``
ones too) with the most plausible arguments (a practitioner's name, the queued job's id, the admin's
name), and gets nothing of the practitioner's, records nothing and changes no job; a name resumes only
with its key; local mode refuses to listen beyond loopback without the operator's token."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

import gradio as gr
import pytest

from tcmqa import serve
from tcmqa.leaderboard.identity import Guard, NotProven, check_bind, digest
from tcmqa.store import SQLiteStore, Store

ANN, ADMIN = "qi-practitioner-ann", "lead-admin"
LICENCE = "LIC-7731-private"
TOKEN = "operator-token-0123456789abcdef"


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
    guard = Guard(hosted=False, admins=(ADMIN,), admin_token=TOKEN, store=store, safe=lambda fn: fn)
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
    with pytest.raises(NotProven, match="TCMQA_ADMIN_TOKEN"):
        guard.account(ADMIN, "", None)  # an admin name is never issued a key: it needs the token
    assert guard.claim(ADMIN, TOKEN, None) == (ADMIN, None) and store.practitioner_key_digest(ADMIN) is None
    assert guard.admin_account(ADMIN, TOKEN, None) == ADMIN and guard.admin_account(ANN, key, None) is None
    with pytest.raises(NotProven, match="none is set"):
        Guard(hosted=False, admins=(ADMIN,), admin_token=None, store=store, safe=lambda fn: fn).admin_account(
            ADMIN, TOKEN, None
        )
    for bad in ("x" * 101, "ann\x00", "ann\u202e"):
        with pytest.raises(NotProven, match=r"longer than|control characters"):
            guard.account(bad, "", None)
    hosted = Guard(hosted=True, admins=(ADMIN,), admin_token=None, store=store, safe=lambda fn: fn)
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
