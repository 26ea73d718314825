"""Practitioner mode's logic (tcmqa.leaderboard.practice) on a real store: assignment, idempotency,
resume, daily cap, exclusion, the rebuilt configs, the export round-trip and 20 concurrent practitioners."""

from __future__ import annotations

import collections
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from sources import DEMO_ITEMS, wrong_answer

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.ingest import person_pseudonym
from tcmqa.leaderboard.practice import DailyCapReached, InvalidResponse, NotAllowed, Practice, ReviewWaits
from tcmqa.store import MIGRATIONS, SQLiteStore


def corpus(tree: Path) -> list[dict]:
    return load_config(str(tree), "corpus").to_list()


@pytest.fixture(scope="module")
def fresh_tree(tmp_path_factory) -> Path:
    """The demo items with no responses: every item still needs three raters."""
    out = tmp_path_factory.mktemp("fresh-tree")
    build([str(DEMO_ITEMS)], out)
    return out


def make(tmp_path: Path, tree: Path, imported: list[dict] = (), **kw) -> Practice:
    kw.setdefault("block_size", 5)
    kw.setdefault("admins", ["admin"])
    return Practice(SQLiteStore(tmp_path / "store"), corpus(tree), imported, **kw)


def signed(practice: Practice, *accounts: str) -> None:
    for a in accounts:
        practice.confirm(a, True, f"LIC-{a}")


def answer(practice: Practice, account: str, item_id: str, letters, **fields):
    """A complete submission (answer, domains, difficulty, seconds), any field overridable."""
    record = {"domains": ["materia_medica"], "difficulty": 3, "seconds": 12.5, "seconds_paused": 0.0, **fields}
    return practice.submit(account, item_id, letters, **record)


def answer_all(practice: Practice, account: str, right: bool = True) -> list[str]:
    done = []
    while (view := practice.current(account)) is not None:
        item = practice.items[view.item_id]
        letters = list(item["answer"]) if right else wrong_answer(item["answer"])
        answer(practice, account, view.item_id, letters)
        done.append(view.item_id)
    return done


def test_practitioner_migration_adds_tables(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    assert store.schema_version() == len(MIGRATIONS) >= 3  # the practitioner tables came with migration 3
    assert store.practitioners() == [] and store.practice_responses() == []


def test_practitioner_must_sign_in_and_confirm(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree)
    with pytest.raises(NotAllowed, match="sign in"):
        p.current(None)
    p.store.register_practitioner("ann")
    with pytest.raises(NotAllowed, match="confirm"):
        p.current("ann")
    with pytest.raises(NotAllowed, match="confirm they hold"):
        p.confirm("ann", False)
    p.confirm("ann", True, "  TCM-123 ")
    assert p.status("ann") == {"signed_in": True, "confirmed": True, "excluded": False}
    assert p.store.practitioner("ann")["licence_number"] == "TCM-123"
    view = p.current("ann")
    assert view is not None and view.position == 1 and view.block_size == 5
    assert view.number == 1  # the first block, as its practitioner reads it (the store's block may be another)
    assert set(view.__dict__) == {
        "item_id",
        "block",
        "number",
        "position",
        "block_size",
        "answered",
        "question",
        "options",
        "answer_type",
    }


def test_practitioner_blocks_three_raters_fourth_gets_another(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree)
    signed(p, "a", "b", "c", "d")
    blocks = {a: p.assignment(a) for a in "abcd"}
    assert blocks["a"]["block"] == blocks["b"]["block"] == blocks["c"]["block"] == 0
    assert blocks["d"]["block"] == 1
    assert [blocks[a]["user_id"] for a in "abcd"] == [1, 2, 3, 4]
    first, second = p.store.practice_block_items(0), p.store.practice_block_items(1)
    assert len(first) == len(second) == 5 and not set(first) & set(second)
    assert p.assignment("a") == blocks["a"]  # fixed: asking again gives the same block


def test_practitioner_assignment_prefers_items_needing_raters(tmp_path: Path, demo_tree: Path) -> None:
    imported = load_config(str(demo_tree), "responses").to_list()
    items = corpus(demo_tree)
    rated = {r["item_id"] for r in imported}
    # a corpus of the 32 rated demo items plus 8 unrated copies: the unrated ones are drawn first
    extra = [{**i, "id": f"new-{i['id']}", "flagged": False, "domains": []} for i in items[:8]]
    p = Practice(SQLiteStore(tmp_path / "s"), items + extra, imported, block_size=6)
    assert p.first_block == 1  # after the imported study's block 0
    signed(p, "x")
    assigned = p.assignment("x")
    drawn = p.store.practice_block_items(assigned["block"])
    assert assigned["block"] == 1 and assigned["slot"] == 0
    assert set(drawn) <= {e["id"] for e in extra} and not set(drawn) & rated
    # flagged items are never drawn
    assert not {i["id"] for i in items if i["flagged"]} & set(drawn)


def test_practitioner_stratified_draw_mirrors_the_pool(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree, block_size=16)
    signed(p, "s")
    drawn = p.store.practice_block_items(p.assignment("s")["block"])
    multi = sum(p.items[i]["answer_type"] == "multi" for i in drawn)
    assert multi == 3  # 6 of 32 multi-answer in the pool -> 3 of 16
    assert len(set(drawn)) == 16


def test_practitioner_never_gets_an_item_twice(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree, block_size=10)
    signed(p, "a")
    seen = []
    for _ in range(3):
        seen += answer_all(p, "a")
        assert p.assignment("a", next_block=True) is not None
    assert len(seen) == 30 and len(set(seen)) == 30
    # a next block is refused until the current one is finished
    assert p.assignment("a", next_block=True)["block"] == p.assignment("a")["block"]


def test_practitioner_submit_is_idempotent_and_resumes(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree)
    signed(p, "a")
    first = p.current("a")
    recorded, nxt = answer(
        p, "a", first.item_id, list(p.items[first.item_id]["answer"]), domains=["classical_texts"], difficulty=2
    )
    assert recorded and nxt.position == 2
    again, same = answer(p, "a", first.item_id, ["A"], difficulty=5)  # a double-click or a replayed request
    assert not again and same.position == 2
    assert len(p.store.practice_responses(account="a")) == 1
    stored = p.store.practice_responses(account="a")[0]
    assert json.loads(stored["domains"]) == ["classical_texts"] and stored["difficulty"] == 2
    # a restarted Space (a new store object and Practice) resumes at the next unanswered item
    reopened = Practice(SQLiteStore(tmp_path / "store"), corpus(fresh_tree), block_size=5)
    assert reopened.current("a").item_id == nxt.item_id


def test_practitioner_submission_checks(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree)
    signed(p, "a", "b", "c", "d")
    view = p.current("a")
    p.assignment("b"), p.assignment("c")
    other = p.current("d")  # another block's item
    assert p.assignment("d")["block"] != p.assignment("a")["block"]
    with pytest.raises(NotAllowed, match="not in your block"):
        answer(p, "a", other.item_id, ["A"])
    refused = {
        ("answer", "A-E"): {"letters": ["F"]},
        ("answer", "at least one"): {"letters": []},
        ("domains", "at most 3"): {"domains": ["materia_medica", "regulation", "other", "classical_texts"]},
        ("domains", "at least one domain"): {"domains": []},
        ("domains", "unknown"): {"domains": ["astrology"]},
        ("difficulty", "1 \\(easiest\\) to 5"): {"difficulty": 6},
        ("difficulty", "rate the difficulty"): {"difficulty": None},
        ("seconds", "required"): {"seconds": None},
        ("seconds", "at least 0"): {"seconds": -1.0},
        ("seconds_paused", "more than"): {"seconds": 5.0, "seconds_paused": 6.0},
    }
    if view.answer_type == "single":
        refused["answer", "single-answer"] = {"letters": ["A", "B"]}
    for (field, message), wrong in refused.items():
        letters = wrong.pop("letters", ["A"])
        with pytest.raises(InvalidResponse, match=f"^{field}: .*{message}") as caught:
            answer(p, "a", view.item_id, letters, **wrong)
        assert caught.value.field == field and isinstance(caught.value, ValueError)
    assert p.store.practice_responses() == []
    # the flag and the comment stay optional; paused equal to the total is allowed
    assert answer(p, "a", view.item_id, ["A"], seconds=4.0, seconds_paused=4.0)[0]


def test_practitioner_daily_cap(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree, daily_cap=2)
    signed(p, "a")
    for _ in range(2):
        v = p.current("a")
        answer(p, "a", v.item_id, ["A"])
    v = p.current("a")
    with pytest.raises(DailyCapReached, match="daily limit is 2"):
        answer(p, "a", v.item_id, ["A"])
    assert len(p.store.practice_responses(account="a")) == 2


def test_practitioner_report_hidden_until_complete(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree)
    signed(p, "a", "b")
    answer_all(p, "b", right=False)
    v = p.current("a")
    answer(p, "a", v.item_id, list(p.items[v.item_id]["answer"]))
    with pytest.raises(NotAllowed, match="not complete"):
        p.report("a")
    answer_all(p, "a")
    with pytest.raises(ReviewWaits, match="2 of 3"):  # c has not finished the block
        p.report("a")
    signed(p, "c")
    answer_all(p, "c", right=False)
    report = p.report("a")
    assert report["accuracy"] == 100.0 and report["agreement"] == 0.0
    assert report["by_domain"]["items"].sum() == 5
    with pytest.raises(NotAllowed, match="not your block"):
        p.report("c" if False else "a", block=99)


def test_practitioner_configs_majority_and_exclusion(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree)
    signed(p, "a", "b", "c")
    answer_all(p, "a", right=True)
    answer_all(p, "b", right=True)
    answer_all(p, "c", right=False)
    tables = p.configs()
    assert len(tables["responses"]) == 15
    assert {r["practitioner_id"] for r in tables["responses"]} == {
        person_pseudonym(n, p.pseudonym_key) for n in (1, 2, 3)
    }
    assert {(r["source"], r["block"]) for r in tables["responses"]} == {("space", 0)}
    assert sorted({r["rater_slot"] for r in tables["responses"]}) == [0, 1, 2]
    text = json.dumps(tables, ensure_ascii=False, default=str)
    assert "LIC-" not in text and '"a"' not in text
    subset = tables["subset"]
    assert len(subset) == 5 and all(r["n_correct"] == 2 and r["majority_correct"] for r in subset)
    assert p.human_reference() == (100.0, 5)
    with pytest.raises(NotAllowed):
        p.exclude("a", "c", "careless")
    with pytest.raises(ValueError, match="reason"):
        p.exclude("admin", "c", " ")
    p.exclude("admin", "b", "answers copied")
    assert p.store.practitioner("b")["excluded_reason"] == "answers copied"
    assert p.store.practitioner("b")["excluded_by"] == "admin"
    tables = p.configs()
    # two raters left of a published block: it is retired (never refilled) and nothing of it is published
    assert tables["responses"] == [] and tables["subset"] == []
    assert p.human_reference() == (None, 0)
    with pytest.raises(NotAllowed, match="excluded"):
        p.current("b")
    progress = p.progress("admin")
    assert progress.to_dict("records") == [
        {
            "block": 0,
            "kind": "fresh",
            "items": 5,
            "slots": 3,
            "raters": 2,
            "excluded": 1,
            "responses": 10,
            "finished": 2,
            "open_slots": 0,
            "published": False,
            "retired": True,
        }
    ]


def test_practitioner_configs_extend_the_imported_study(tmp_path: Path, demo_tree: Path) -> None:
    imported = load_config(str(demo_tree), "responses").to_list()
    items = corpus(demo_tree)
    extra = [{**i, "id": f"new-{i['id']}", "flagged": False, "domains": []} for i in items[:5]]
    p = Practice(SQLiteStore(tmp_path / "s"), items + extra, imported, block_size=5)
    before = p.configs()
    signed(p, "a", "b", "c")
    for a, right in zip("abc", (True, False, False)):
        answer_all(p, a, right)
    after = p.configs()
    assert len(after["responses"]) == len(before["responses"]) + 15
    new = [r for r in after["subset"] if r["item_id"].startswith("new-")]
    assert len(new) == 5 and not any(r["majority_correct"] for r in new)
    assert len(after["subset"]) == len(before["subset"]) + 5
    assert {r["block"] for r in after["responses"] if r["item_id"].startswith("new-")} == {1}


def test_practitioner_export_round_trips_through_build(tmp_path: Path, fresh_tree: Path) -> None:
    p = make(tmp_path, fresh_tree, block_size=8)
    signed(p, "a", "b", "c", "d", "e", "f")
    for a, right in zip("abcdef", (True, True, False, True, False, True)):
        answer_all(p, a, right)
    # some multi-answer items, flags and domains make the round trip meaningful
    assert any(p.items[r["item_id"]]["answer_type"] == "multi" for r in p.store.practice_responses())
    p.exclude("admin", "e", "test account")  # block 1 loses a rater: it leaves the configs and the export
    with pytest.raises(NotAllowed):
        p.export_platform_db("a", tmp_path / "x.sqlite")
    db = p.export_platform_db("admin", tmp_path / "export.sqlite")
    out = tmp_path / "rebuilt"
    report = build([str(DEMO_ITEMS)], out, str(db))
    assert report["dropped"] == []
    rebuilt = load_config(str(out), "responses").to_pandas()
    ours = pd.DataFrame(p.configs()["responses"])
    key = ["practitioner_id", "item_id"]
    rebuilt, ours = rebuilt.sort_values(key).reset_index(drop=True), ours.sort_values(key).reset_index(drop=True)
    assert len(rebuilt) == len(ours) == 8 * 3
    for column in [
        "response_id",
        "item_id",
        "practitioner_id",
        "source",
        "block",
        "rater_slot",
        "correct",
        "difficulty",
        "flagged",
    ]:
        assert rebuilt[column].tolist() == ours[column].tolist(), column
    for column in ["selected", "domains", "domains_zh"]:
        assert rebuilt[column].map(list).tolist() == ours[column].map(list).tolist(), column
    assert rebuilt["seconds"].tolist() == pytest.approx(ours["seconds"].tolist())
    subset = load_config(str(out), "subset").to_pandas().sort_values("item_id")
    expected = pd.DataFrame(p.configs()["subset"]).sort_values("item_id")
    assert subset["item_id"].tolist() == expected["item_id"].tolist()
    assert subset["majority_correct"].tolist() == expected["majority_correct"].tolist()
    assert subset["practitioner_ids"].map(list).tolist() == expected["practitioner_ids"].map(list).tolist()
    text = db.read_bytes()
    for secret in (b"LIC-", b"admin"):
        assert secret not in text
    import sqlite3

    con = sqlite3.connect(db)
    names = [n for (n,) in con.execute("SELECT username FROM user")]
    con.close()
    assert all(n.startswith("S") for n in names) and "a" not in names


def test_practitioner_export_round_trip_of_the_whole_study(tmp_path: Path, demo_tree: Path) -> None:
    """The study and the Space together, exported and rebuilt by ``tcmqa build``: the same responses
    (every column) and the same subset, study rows keeping their ids, blocks and slots."""
    imported = load_config(str(demo_tree), "responses").to_list()
    items = corpus(demo_tree)
    extra = [{**i, "id": str(1000 + n), "flagged": False, "domains": []} for n, i in enumerate(items[:8])]
    p = Practice(SQLiteStore(tmp_path / "s"), items + extra, imported, block_size=4, admins=["admin"])
    signed(p, "a", "b", "c", "d")
    for a in "abcd":
        answer_all(p, a, right=a != "c")
    db = p.export_platform_db("admin", tmp_path / "export.sqlite")
    records = [json.loads(line) for line in DEMO_ITEMS.read_text(encoding="utf-8").splitlines() if line.strip()]
    more = [{**r, "question_id": 1000 + n, "question": r["question"] + " (copy)"} for n, r in enumerate(records[:8])]
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records + more))
    out = tmp_path / "combined-tree"
    build([str(tmp_path / "items.jsonl")], out, str(db))
    rebuilt = load_config(str(out), "responses").to_list()
    ours = p.configs()["responses"]
    assert {r["source"] for r in ours} == {"study", "space"}
    by_id = {r["response_id"]: r for r in ours}
    assert sorted(by_id) == sorted(r["response_id"] for r in rebuilt)
    for r in rebuilt:
        mine = by_id[r["response_id"]]
        for column in [
            "practitioner_id",
            "source",
            "block",
            "rater_slot",
            "selected",
            "correct",
            "domains",
            "difficulty",
            "flagged",
        ]:
            assert r[column] == mine[column], column
    subset = {r["item_id"]: r for r in load_config(str(out), "subset").to_list()}
    expected = {r["item_id"]: r for r in p.configs()["subset"]}
    assert subset.keys() == expected.keys()
    assert all(subset[i]["majority_correct"] == expected[i]["majority_correct"] for i in subset)


def test_practitioner_twenty_concurrent(tmp_path: Path, fresh_tree: Path) -> None:
    """20 practitioners answer their blocks at once, each submission sent twice (a double-click):
    every response is stored exactly once."""
    items = corpus(fresh_tree) * 1
    many = [{**i, "id": f"{i['id']}-{k}"} for k in range(4) for i in items]  # 128 items
    store = SQLiteStore(tmp_path / "store")
    p = Practice(store, many, block_size=6, raters=3)
    accounts = [f"user{i:02d}" for i in range(20)]
    signed(p, *accounts)
    barrier = threading.Barrier(20)
    counts = collections.Counter()
    lock = threading.Lock()

    def work(account: str) -> int:
        barrier.wait()
        n = 0
        while (view := p.current(account)) is not None:
            letters = list(p.items[view.item_id]["answer"])
            for _ in range(2):
                recorded, _ = answer(p, account, view.item_id, letters, seconds=1.0)
                with lock:
                    counts["recorded" if recorded else "replayed"] += 1
            n += 1
        return n

    with ThreadPoolExecutor(20) as pool:
        answered = list(pool.map(work, accounts))
    stored = store.practice_responses()
    assert answered == [6] * 20
    assert len(stored) == 120 == counts["recorded"] == counts["replayed"]
    assert len({(r["account"], r["item_id"]) for r in stored}) == 120
    per_block = collections.Counter(a["block"] for a in store.practice_assignments())
    assert sorted(per_block.values()) == [2] + [3] * 6  # 20 accounts: six full blocks and one with two
    for a in accounts:  # never an item twice, and every response in the account's own block
        mine = [r for r in stored if r["account"] == a]
        block = store.practice_assignments(a)[0]["block"]
        assert {r["item_id"] for r in mine} == set(store.practice_block_items(block))


def test_practitioner_postgresql_concurrent(postgres_url: str, fresh_tree: Path) -> None:
    """The same store methods on PostgreSQL: 8 practitioners at once, every submission sent twice."""
    from postgres import fresh_database

    from tcmqa.store import open_store

    store = open_store(fresh_database(postgres_url))
    p = Practice(store, corpus(fresh_tree), block_size=4)
    accounts = [f"pg{i}" for i in range(8)]
    signed(p, *accounts)
    barrier = threading.Barrier(8)

    def work(account: str) -> int:
        barrier.wait()
        n = 0
        while (view := p.current(account)) is not None:
            for _ in range(2):
                answer(p, account, view.item_id, list(p.items[view.item_id]["answer"]))
            n += 1
        return n

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(work, accounts)) == [4] * 8
    stored = store.practice_responses()
    assert len(stored) == 32 == len({(r["account"], r["item_id"]) for r in stored})
    assert sorted(collections.Counter(a["block"] for a in store.practice_assignments()).values()) == [2, 3, 3]
    store.close()
