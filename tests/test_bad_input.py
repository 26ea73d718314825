"""Bad input is refused with a clear, specific message before any file-system or database call (issue 24):
a model id longer than a path, control characters in typed text on both stores, a multi-answer item
answered with one letter through the API, and every command that writes a folder run twice into it."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from pathlib import Path

import pytest
from gradio_client import Client
from sources import DEMO_ITEMS
from space_fixtures import hub_models, launch, local_settings

from tcmqa import cli
from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.forms import FormError
from tcmqa.leaderboard import queue, validation
from tcmqa.leaderboard.practice import Practice
from tcmqa.leaderboard.validation import Policy, Rejected, validate
from tcmqa.store import PENDING, SQLiteStore, Store

KEY = 14  # the practitioner's key among the start's API outputs: issued by the name's first start
ERROR = 10  # the inline error's position in the Practitioners tab's screen outputs


@pytest.fixture(scope="module")
def fresh_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fresh-tree")
    build([str(DEMO_ITEMS)], out)
    return out


def _no_file_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any path the validation makes (its one way to the file system) fails the test."""

    def touched(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the file system was asked about a model id whose form is wrong")

    monkeypatch.setattr(validation, "Path", touched)


@pytest.mark.parametrize("hosted", [False, True])
def test_bad_input_long_model_id_refused_before_the_file_system(
    hosted: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """20,000 characters, a folder name past NAME_MAX, a NUL: a clear message naming the limit, no file-system,
    store or Hub call (None stands for both: touching them fails), and no log line repeats the value whole."""
    policy = Policy(hosted=hosted, protocol="v1")
    cases = {
        "a" * 20_000: "at most 4096 characters, not 20000",
        "org/" + "b" * 1000: "longer than 255 characters",
        "./" + "c" * 300: "longer than 255 characters",
        "org/m\x00odel": r"model id: holds the control character U\+0000",
        "org/model\x1b[31m": r"model id: holds the control character U\+001B",
    }
    _no_file_system(monkeypatch)
    with caplog.at_level(logging.DEBUG):
        for model_id, said in cases.items():
            with pytest.raises(Rejected, match=said) as refused:
                validate(model_id, "main", user="u", api=None, store=None, policy=policy)  # type: ignore[arg-type]
            assert len(str(refused.value)) < 300
        with pytest.raises(Rejected, match="revision: holds the control character"):
            validate("org/model", "main\x00", user="u", api=None, store=None, policy=policy)  # type: ignore[arg-type]
    assert all(len(record.getMessage()) < 1000 for record in caplog.records)


def test_bad_input_control_characters_refused_on_both_stores(url: str, tmp_path: Path, fresh_tree: Path) -> None:
    """A NUL or an escape in a licence number or a flag's comment is refused, naming the field, before the
    store is read, on SQLite (which would store it) and PostgreSQL (which would raise); newlines stay text."""
    store = Store(url, cache_dir=tmp_path / "cache")
    p = Practice(store, load_config(str(fresh_tree), "corpus").to_list(), block_size=5)
    for number in ("LIC-\x00-1", "LIC\x1b[2J", "LIC\x7f", "LIC\u0085X"):
        with pytest.raises(FormError, match=r"licence number: holds the control character U\+00") as refused:
            p.confirm("ann", True, number)
        assert "retype it" in str(refused.value)
    assert store.practitioner("ann") is None
    p.confirm("ann", True, "LIC-1")
    view = p.current("ann")
    assert view is not None
    letters = list(p.items[view.item_id]["answer"])
    record = {"domains": ["materia_medica"], "difficulty": 3, "flagged": True, "seconds": 5.0}
    for comment in ("wrong\x00key", "\x1b[31mred", "a\x08b"):
        with pytest.raises(FormError, match="comment: holds the control character"):
            p.submit("ann", view.item_id, letters, comment=comment, **record)
    with pytest.raises(FormError, match="comment: at most 500 characters"):
        p.submit("ann", view.item_id, letters, comment="x" * 501, **record)
    assert store.practice_responses(account="ann") == []
    recorded, _ = p.submit("ann", view.item_id, letters, comment="選項 B\n與 C 相同\t(見教材)", **record)
    (row,) = store.practice_responses(account="ann")
    assert recorded and row["comment"] == "選項 B\n與 C 相同\t(見教材)"
    store.close()


def test_bad_input_control_characters_in_job_ids_and_admin_reasons(url: str, tmp_path: Path, fresh_tree: Path) -> None:
    """A typed job id (the Queue tab's lookup) and an admin's reason are checked before the store is asked."""
    store = Store(url, cache_dir=tmp_path / "cache")
    shown = queue.job_markdown(store, "2026\x00x")  # Markdown: escaped
    assert shown.startswith("❌ job id: holds the control character U") and "0000 at position 5" in shown
    assert "job id: at most 64 characters" in queue.job_markdown(store, "j" * 5000)
    assert "job id: holds the control character" in queue.job_log(store, "2026\x00x")
    assert queue.job_markdown(store, " nope ") == "No job `nope`."
    p = Practice(store, load_config(str(fresh_tree), "corpus").to_list(), block_size=5, admins=["lead"])
    p.confirm("ann", True)
    p.assignment("ann")
    with pytest.raises(FormError, match=r"reason: holds the control character U\+0000"):
        p.exclude("lead", "ann", "spam\x00")
    with pytest.raises(FormError, match="reason: at most 500 characters"):
        p.release_slot("lead", "ann", 0, "r" * 501)
    with pytest.raises(ValueError, match="an exclusion needs a reason"):
        p.exclude("lead", "ann", "  ")
    assert p.decisions("lead").empty and not p.status("ann")["excluded"]
    p.exclude("lead", "ann", "clicked through\nevery item")
    assert p.status("ann")["excluded"]
    store.close()


def test_bad_input_multi_answer_needs_two_letters_on_the_api(tmp_path: Path, fresh_tree: Path) -> None:
    """Through the API a multi-answer item is not recorded with one letter (in either field), a licence number
    with a NUL is refused inline, and so is an admin's reason or job id with one; two letters record."""
    store = SQLiteStore(tmp_path / "store")
    items = {i["id"]: i for i in load_config(str(fresh_tree), "corpus").to_list()}
    token = "operator-token-0123456789abcdef"  # local mode: an admin's key is the operator's token
    settings = local_settings(
        store.root, fresh_tree, practice_block_size=16, practice_admins=("boss",), admin_token=token
    )
    demo, url = launch(settings, store, hub_models())
    try:
        client = Client(url, verbose=False)
        job = store.submit("org/good", "0" * 40, "v1", "u")
        for typed, said in (((job.id, "spam\x00"), "reason: holds"), ((job.id + "\x1b", "why"), "job id: holds")):
            refused = client.predict("boss", token, *typed, api_name="/admin_cancel")
            assert refused.startswith("❌") and said in refused, refused
        assert store.get(job.id).status == PENDING
        refused = client.predict("kim", "", True, "LIC\x00", api_name="/practice_start")
        assert "licence number: holds the control character U+0000" in refused[0], refused[0]
        assert store.practitioner("kim") is None
        key = refused[KEY]  # the key kim's first start issued (tcmqa.leaderboard.identity): her browser keeps it
        item = client.predict("kim", key, True, "LIC-7", api_name="/practice_start")[5]
        while items[item]["answer_type"] != "multi":  # single-answer items answered until a multi-answer one
            answer = items[item]["answer"]
            item = client.predict(
                "kim", key, item, answer[0], [], ["other"], 3, False, "", api_name="/practice_submit"
            )[5]
        answered = len(store.practice_responses(account="kim"))
        for single, many in (("A", []), (None, ["B"]), ("C", ["C"])):
            out = client.predict("kim", key, item, single, many, ["other"], 3, False, "", api_name="/practice_submit")
            assert "multi-answer item: choose two or more letters" in out[ERROR], out[ERROR]
        assert len(store.practice_responses(account="kim")) == answered
        out = client.predict("kim", key, item, None, ["A", "B"], ["other"], 3, False, "", api_name="/practice_submit")
        assert out[0] == "✅ Recorded." and len(store.practice_responses(account="kim")) == answered + 1
    finally:
        demo.close()


def test_bad_input_folder_commands_run_twice_replace_their_own_and_refuse_others(
    tmp_path: Path, capsys: pytest.CaptureFixture, tiny_eval: dict
) -> None:
    """build, simulate and report (the commands that write a whole --out folder) replace an earlier output of
    their own, as their help says, and refuse a folder that is someone else's before writing anything; eval and
    merge refuse a folder holding a run (eval continues it with --resume), as theirs says."""
    tree, sim, report = tmp_path / "tree", tmp_path / "sim", tmp_path / "report"
    small = ("--n-items", "300", "--n-raters", "6", "--n-responses", "300")
    runs = {
        "build": ["build", "--items", str(DEMO_ITEMS), "--out", str(tree)],
        "simulate": ["simulate", "--out", str(sim), *small],
        "report": ["report", "--data", str(sim / "data"), "--out", str(report), "--n-boot", "10"],  # the study's
    }
    for command, argv in runs.items():
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert "an earlier" in help_text and "there is replaced" in help_text, help_text
        for _ in (1, 2):
            assert cli.main(argv) == 0
    (tree / "stale.txt").write_text("not the build's")
    assert cli.main(runs["build"]) == 0 and (tree / "stale.txt").exists()  # only its own parts are replaced
    with sqlite3.connect(sim / "raw" / "annotation_platform.sqlite") as db:
        assert db.execute("SELECT count(*) FROM user").fetchone()[0] == 6  # written once, not twice
    other = tmp_path / "someone-else"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    for argv in runs.values():
        with pytest.raises(SystemExit, match="is not empty and holds no earlier output"):
            cli.main([str(other) if argv[i - 1] == "--out" else a for i, a in enumerate(argv)])
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    run = tmp_path / "run"
    evaluate = ["eval", *(f"--{k.replace('_', '-')}={v}" for k, v in tiny_eval.items()), "--limit=4", f"--out={run}"]
    with pytest.raises(SystemExit):
        cli.main(["eval", "--help"])
    assert "unless --resume" in " ".join(capsys.readouterr().out.split())
    assert cli.main(evaluate) == 0
    with pytest.raises(SystemExit, match="already holds a run; pass --resume"):
        cli.main(evaluate)
    assert cli.main([*evaluate, "--resume"]) == 0
    with pytest.raises(SystemExit, match="already holds a run; merge into an empty --out"):
        cli.main(["merge", str(run), "--out", str(shutil.copytree(run, tmp_path / "copy"))])
