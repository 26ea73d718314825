"""The fresh pool: writing, blind review, the lifecycle and the reference, on SQLite and PostgreSQL.

``-k fresh_review``: who reviews and what a reviewer may read when; ``-k fresh_lifecycle``: draft →
review → accepted → retired, the import, the pool's version and the practitioners' reference.
"""

from __future__ import annotations

import json
import time

import pytest

from tcmqa.fresh.pool import FreshPool, check_written, retire
from tcmqa.ingest import clean_item
from tcmqa.store import PoolRefused, Store, WrittenItem
from tcmqa.store.tables import fresh_items_t

STEM = "患者晨起口苦，午后潮热，夜间盗汗，舌红少苔，宜首先考虑的治法是"
OPTIONS = ["滋阴降火", "清热燥湿", "疏肝理气", "温阳化饮", "健脾益气"]
EXPLANATION = "阴虚火旺，当滋阴降火；B 为湿热之法，C 为肝郁之法，D 为饮证之法，E 为气虚之法，皆不合。"
YES = {"key_correct": True, "keyed_exact": True, "clear": True, "sound": True, "original": True}


def written(stem: str = STEM, options: list[str] = OPTIONS, answer: str = "A", **extra) -> dict:
    """A written item's fields as the writing form sends them."""
    return {
        "question": stem,
        "options": dict(zip("ABCDE", options, strict=True)),
        "answer": answer,
        "explanation": EXPLANATION,
        "domains": ["diagnosis_patterns", "internal_medicine"],
        "difficulty": 3,
        "own_work": True,
        **extra,
    }


# Items written for these tests (not from any paper or book), each unlike the others.
OTHERS = [
    (
        "针刺足三里时，为避免伤及深部组织，下列说法最恰当的是",
        ["直刺一至二寸", "斜刺三寸以上", "平刺五分", "点刺出血", "禁用灸法"],
    ),
    ("煎煮含有矿石类药物的方剂时，这类药物一般应当", ["先煎", "后下", "包煎", "另炖", "烊化"]),
    (
        "一位老年患者久咳气短，动则尤甚，腰膝酸软，其病位主要在",
        ["肺与肾", "心与肝", "脾与胃", "胆与膀胱", "大肠与小肠"],
    ),
]


def people(store: Store, *accounts: str) -> None:
    for account in accounts:
        store.confirm_licence(account)


@pytest.fixture
def pool(url: str, demo_items: list[dict]) -> FreshPool:
    """A pool over an empty store of each kind, five confirmed practitioners, N = 3, the demo corpus public."""
    store = Store(url)
    people(store, "writer", "p1", "p2", "p3", "p4")
    return FreshPool(store, [clean_item(r) for r in demo_items], raters=3, exclude={"lead"})


def seats(pool: FreshPool, item_id: str, role: str = "reviewer") -> list[dict]:
    return [
        r
        for r in pool.store.fresh_reviews(item_id=item_id)
        if r["released_at"] is None and r["role"] == role and r["revision"] == pool.store.fresh_item(item_id).revision
    ]


def review(pool: FreshPool, item_id: str, answers: dict[str, str] | None = None, accept: bool = True) -> str:
    """Every current reviewer answers blind (``answers``: by account; else the key) and judges; the state."""
    state = ""
    for seat in seats(pool, item_id):
        if seat["judged_at"] is not None:
            continue
        pool.answer(seat["reviewer"], seat["id"], (answers or {}).get(seat["reviewer"], "A"), 3, 41.5)
        judgement = YES if accept else {**YES, "clear": False}
        state = pool.judge(seat["reviewer"], seat["id"], judgement, [] if accept else ["unclear_question"], "模糊")
    return state


def test_fresh_review_writer_never_reviews_own_item(pool):
    item_id, checked = pool.write("writer", written())
    assert item_id is not None, checked.errors
    reviewers = {s["reviewer"] for s in seats(pool, item_id)}
    assert len(reviewers) == 2 and "writer" not in reviewers and "lead" not in reviewers
    # the writer can neither read nor answer a seat of their own item, nor be given one by the lead
    seat = seats(pool, item_id)[0]
    with pytest.raises(PoolRefused, match="not assigned to you"):
        pool.store.fresh_review_view(seat["id"], "writer")
    with pytest.raises(PoolRefused, match="not assigned to you"):
        pool.answer("writer", seat["id"], "A", 3, 10.0)
    with pytest.raises(PoolRefused, match="may not review"):
        pool.reassign("lead", seat["id"], "on leave", to="writer")
    # with nobody else eligible the item waits in review without a seat; a later fill draws two
    narrow = FreshPool(pool.store, [], exclude={"p1", "p2", "p3", "p4"})
    waiting, _ = narrow.write("writer", written(*OTHERS[0]))
    assert pool.store.fresh_item(waiting).state == "in_review" and seats(pool, waiting) == []
    pool.fill()
    assert len(seats(pool, waiting)) == 2 and "writer" not in {s["reviewer"] for s in seats(pool, waiting)}


def test_fresh_review_key_unreadable_before_the_blind_answer(pool):
    item_id, _ = pool.write("writer", written(answer="AC"))
    seat = seats(pool, item_id)[0]
    reviewer = seat["reviewer"]
    view = pool.store.fresh_review_view(seat["id"], reviewer)
    assert view["question"] == STEM and view["answer_type"] == "multi"
    assert "answer" not in view and "explanation" not in view and not view["answered"]
    with pytest.raises(PoolRefused, match="blind answer before judging"):
        pool.judge(reviewer, seat["id"], YES, [], "")
    after = pool.answer(reviewer, seat["id"], ["C", "A"], 2, 30.0)
    assert after["answer"] == ["A", "C"] and after["explanation"] == EXPLANATION and after["selected"] == ["A", "C"]
    with pytest.raises(PoolRefused, match="already answered"):
        pool.answer(reviewer, seat["id"], "B", 2, 30.0)
    # nothing of the hidden item's text or key is in a repr, an event or a refusal
    item = pool.store.fresh_item(item_id)
    texts = [repr(item), repr(item.content), *map(repr, pool.store.fresh_events(item_id))]
    try:
        pool.store.fresh_review_view(seat["id"], "p4" if reviewer != "p4" else "p3")
    except PoolRefused as err:
        texts.append(str(err))
    if pool.store.dialect == "postgresql":  # a statement the database refuses: its parameters stay out
        content = item.content
        bad = WrittenItem(STEM + "\x00", content.options, content.answer, content.explanation, ["other"], 3, True)
        with pytest.raises(RuntimeError, match="refused a change") as refused:
            pool.store.create_fresh_items("writer", [bad], submit=False)
        texts.append(str(refused.value))
        assert refused.value.__suppress_context__ and refused.value.__cause__ is None
    assert not any(STEM[:6] in t or OPTIONS[0] in t or EXPLANATION[:6] in t for t in texts)


def test_fresh_lifecycle_two_accepts_release_and_version(pool):
    empty = pool.store.fresh_pool_version()
    item_id, _ = pool.write("writer", written(), submit=False)
    assert pool.store.fresh_item(item_id).state == "draft" and pool.store.fresh_reviews(item_id=item_id) == []
    pool.edit("writer", item_id, written(answer="A"), submit=True)
    first = seats(pool, item_id)[0]
    pool.answer(first["reviewer"], first["id"], "A", 3, 20.0)
    assert pool.judge(first["reviewer"], first["id"], YES, [], "") == "in_review"
    assert pool.store.accepted_fresh_items() == [] and pool.store.fresh_pool_version() == empty
    assert review(pool, item_id) == "accepted"
    (row,) = pool.store.accepted_fresh_items()
    assert row["id"] == item_id and row["answer"] == ["A"] and row["answer_type"] == "single"
    assert row["options"] == dict(zip("ABCDE", OPTIONS, strict=True)) and row["source"] == "fresh"
    assert row["release_date"] is not None and len(row["release_date"]) == 10 and row["retired_date"] is None
    assert pool.store.fresh_pool_version() != empty
    # every change and review is an event with who and when
    actions = [(e["action"], e["from_state"], e["to_state"]) for e in pool.store.fresh_events(item_id)]
    assert actions[:2] == [("write", None, "draft"), ("edit", "draft", "draft")] or actions[1][0] == "submit"
    assert ("submit", "draft", "in_review") in actions and ("accept", "in_review", "accepted") in actions
    assert sum(a == "judge" for a, _, _ in actions) == 2 and sum(a == "answer" for a, _, _ in actions) == 2
    assert all(e["who"] and e["at"] > 0 for e in pool.store.fresh_events(item_id))
    assert pool.store.fresh_counts()["accepted"] == 1
    # another writer's copy of it is refused, naming the pool item and not its text, and counted
    copy_id, copy = pool.write("p4", written(options=OPTIONS[::-1]))
    assert copy_id is None and item_id in copy.errors["duplicate"] and not copy.nearest_is_public
    assert STEM[:6] not in copy.errors["duplicate"] and pool.store.fresh_duplicates_refused() == 1
    assert pool.store.fresh_events(item_id)[-1]["action"] == "refused_duplicate"


def test_fresh_review_rejected_item_revised_once_goes_to_two_new_reviewers(pool):
    item_id, _ = pool.write("writer", written())
    first = {s["reviewer"] for s in seats(pool, item_id)}
    assert review(pool, item_id, accept=False) == "rejected"
    comments = pool.comments("writer", item_id)
    assert [c["comment"] for c in comments] == ["模糊", "模糊"] and comments[0]["problems"] == ["unclear_question"]
    with pytest.raises(PoolRefused):
        pool.comments("p1", item_id)
    checked = pool.edit("writer", item_id, written(stem=STEM + "（单选）"))
    assert checked.errors == {}, checked.errors  # the revision is not refused as a duplicate of itself
    item = pool.store.fresh_item(item_id)
    assert item.state == "in_review" and item.revision == 2
    second = {s["reviewer"] for s in seats(pool, item_id)}
    old_seat = next(r for r in pool.store.fresh_reviews(item_id=item_id) if r["revision"] == 1)
    with pytest.raises(PoolRefused, match="revised since"):  # a first reviewer never reads the revision's key
        pool.store.fresh_review_view(old_seat["id"], old_seat["reviewer"])
    assert len(second) == 2 and not second & first and "writer" not in second
    assert review(pool, item_id, accept=False) == "rejected"
    with pytest.raises(PoolRefused, match="revised once already"):
        pool.edit("writer", item_id, written(stem=STEM + "（再改）"))


def test_fresh_review_third_rater_completes_the_reference(pool):
    item_id, _ = pool.write("writer", written())
    reviewers = [s["reviewer"] for s in seats(pool, item_id)]
    # one reviewer misses it blind: with N = 3 the two answers are not yet a reference
    assert review(pool, item_id, answers={reviewers[0]: "B"}) == "accepted"
    assert pool.store.fresh_reference() == {}
    (rater,) = seats(pool, item_id, role="rater")
    assert rater["reviewer"] not in {*reviewers, "writer"}
    with pytest.raises(PoolRefused, match="blind answer only"):
        pool.judge(rater["reviewer"], rater["id"], YES, [], "")
    pool.answer(rater["reviewer"], rater["id"], "A", 2, 12.0)
    assert pool.store.fresh_reference() == {item_id: True}  # 2 of 3 right: a majority
    # the reference's N follows the study's: N = 2 needs no third rater, and 1 of 2 is no majority
    two = FreshPool(pool.store, [], raters=2)
    other, _ = two.write("writer", written(*OTHERS[0], answer="A"))
    reviewers = [s["reviewer"] for s in seats(two, other)]
    assert review(two, other, answers={reviewers[0]: "C"}) == "accepted"
    assert seats(two, other, role="rater") == [] and two.store.fresh_reference(raters=2)[other] is False


def test_fresh_review_lead_reassigns_an_open_review(pool):
    item_id, _ = pool.write("writer", written())
    seat = seats(pool, item_id)[0]
    new_id = pool.reassign("lead", seat["id"], "away for a month")
    now = {s["reviewer"] for s in seats(pool, item_id)}
    assert seat["reviewer"] not in now and len(now) == 2 and "writer" not in now
    assert next(r for r in pool.store.fresh_reviews(item_id=item_id) if r["id"] == seat["id"])["released_by"] == "lead"
    with pytest.raises(PoolRefused, match="not assigned to you"):
        pool.store.fresh_review_view(seat["id"], seat["reviewer"])
    holder = next(r["reviewer"] for r in pool.store.fresh_reviews(item_id=item_id) if r["id"] == new_id)
    pool.answer(holder, new_id, "A", 3, 5.0)
    pool.judge(holder, new_id, YES, [], "")
    with pytest.raises(PoolRefused, match="done already"):
        pool.reassign("lead", new_id, "too late")
    # a reviewer excluded from the study loses the seat not yet done at the next fill
    other = next(s for s in seats(pool, item_id) if s["id"] != new_id)
    pool.store.exclude_practitioner(other["reviewer"], "left the study", by="lead")
    pool.fill()
    now = seats(pool, item_id)
    assert other["reviewer"] not in {s["reviewer"] for s in now} and len(now) == 2


def test_fresh_review_written_item_checks():
    ok = check_written(written())
    assert ok.errors == {} and ok.item is not None and ok.item.answer_type == "single"
    bad = check_written(
        {
            "question": "脾\x00主运化",
            "options": {"A": "甲", "B": "甲", "C": "", "D": "丁", "E": "x" * 201},
            "answer": "AF",
            "explanation": "",
            "domains": ["materia_medica", "nowhere"],
            "difficulty": 6,
            "own_work": False,
        }
    )
    assert set(bad.errors) == {
        "question", "option_B", "option_C", "option_E", "answer", "explanation", "domains", "difficulty", "own_work"
    }  # fmt: skip
    assert "control character" in bad.errors["question"] and "repeats option A" in bad.errors["option_B"]
    assert "AF" not in bad.errors["answer"] and "甲" not in json.dumps(bad.errors, ensure_ascii=False)
    assert check_written(written(answer="AB", answer_type="single")).errors.keys() == {"answer_type"}
    assert check_written(written(domains=["a", "b", "c", "d"])).errors.keys() == {"domains"}


def test_fresh_lifecycle_import_reports_each_malformed_record(pool, demo_items, tmp_path):
    public = demo_items[0]
    lines = [
        json.dumps({"id": "ext-1", **written(*OTHERS[0])}, ensure_ascii=False),
        "{not json",
        json.dumps(["a list"]),
        json.dumps({"id": "ext-3", **written(*OTHERS[1]), "options": OTHERS[1][1][:4]}, ensure_ascii=False),
        json.dumps(  # a public item lightly restyled: a near-duplicate
            {**written(public["question"] + "？", list(public["choices"].values())), "id": "ext-4"}, ensure_ascii=False
        ),
        "",
        json.dumps({"id": "ext-5", **written(*OTHERS[2]), "source_difficulty": 2}, ensure_ascii=False),
        json.dumps({"id": "ext-6", **written(*OTHERS[2])}, ensure_ascii=False),  # a copy of the line before
    ]
    path = tmp_path / "batch.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = pool.import_jsonl(path, by="lead")
    assert [n for n, _ in report.imported] == [1, 7]
    reasons = dict(report.refused)
    assert set(reasons) == {2, 3, 4, 5, 8}
    assert "not JSON" in reasons[2]["line"] and "not a JSON object" in reasons[3]["line"]
    assert "options" in reasons[4]
    assert f"public item {clean_item(public)['id']}" in reasons[5]["duplicate"]
    assert "line 7 of this file" in reasons[8]["duplicate"]
    # each near-duplicate refused is an event of the item it is near (the console counts them), never its text
    assert pool.store.fresh_duplicates_refused() == 2
    assert [e["who"] for e in pool.store.fresh_events(report.imported[1][1]) if e["action"] == "refused_duplicate"] == [
        "lead"
    ]
    for _, item_id in report.imported:
        item = pool.store.fresh_item(item_id)
        assert item.state == "in_review" and item.origin == "imported" and item.writer == "lead"
        assert len(seats(pool, item_id)) == 2
    # without the lead's statement that the batch is original, a record without its own is refused
    bare = {k: v for k, v in written(STEM + "新").items() if k != "own_work"}
    path.write_text(json.dumps(bare, ensure_ascii=False) + "\n", encoding="utf-8")
    assert dict(pool.import_jsonl(path, by="lead").refused)[1].keys() == {"own_work"}
    assert [n for n, _ in pool.import_jsonl(path, by="lead", own_work=True).imported] == [1]


def test_fresh_lifecycle_retire_by_age_or_newest(pool):
    ids = []
    for stem, options in [(STEM, OPTIONS), *OTHERS]:
        item_id, checked = pool.write("writer", written(stem, options))
        assert item_id is not None, checked.errors
        review(pool, item_id)
        ids.append(item_id)
    now = time.time()
    with pool.store._write() as conn:  # accepted 40, 30, 20 and 10 days ago
        for age, item_id in zip((40, 30, 20, 10), ids, strict=True):
            conn.execute(
                fresh_items_t.update().where(fresh_items_t.c.id == item_id).values(accepted_at=now - age * 86400)
            )
    version = pool.store.fresh_pool_version()
    assert retire(pool.store, "lead", older_than_days=25) == ids[:2]
    assert pool.store.fresh_pool_version() != version
    assert retire(pool.store, "lead", keep_newest=1) == ids[2:3]
    assert [i["id"] for i in pool.store.accepted_fresh_items()] == ids[3:]
    retired = pool.store.retired_fresh_items()
    assert [r["id"] for r in retired] == ids[:3] and all(r["retired_date"] and r["release_date"] for r in retired)
    with pytest.raises(ValueError, match="--older-than"):
        retire(pool.store, "lead")


def test_fresh_lifecycle_store_of_version_8_gains_the_pool(url, monkeypatch):
    import tcmqa.store as store_module

    monkeypatch.setattr(store_module, "MIGRATIONS", store_module.MIGRATIONS[:8])
    old = Store(url)
    old.confirm_licence("p1")
    old.close()
    monkeypatch.undo()
    new = Store(url)
    assert new.schema_version() == len(store_module.MIGRATIONS) >= 9
    assert new.fresh_counts()["accepted"] == 0 and new.practitioner("p1")["confirmed_at"] is not None


def test_fresh_lifecycle_retired_item_joins_the_built_corpus(url, tmp_path, capsys):
    """The lead imports a batch, it is reviewed and accepted, retired by `tcmqa pool retire`, and `tcmqa build
    --store` adds it to the corpus with its dates, which `datasets.load_dataset` reads."""
    import datasets
    from sources import DEMO_ITEMS

    from tcmqa.cli import main as tcmqa

    store = Store(url)
    people(store, "p1", "p2", "p3")
    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps(written(), ensure_ascii=False) + "\n{broken\n", encoding="utf-8")
    lead = ["pool", "--store", url, "--by", "lead"]
    assert tcmqa([*lead, "import", str(batch), "--public", str(DEMO_ITEMS), "--own-work"]) == 1
    printed = capsys.readouterr().out
    assert "line 1: fresh-00001 in review" in printed and "line 2: refused: line: not JSON" in printed
    pool = FreshPool(store, [], raters=3)
    assert review(pool, "fresh-00001") == "accepted"
    (rater,) = seats(pool, "fresh-00001", role="rater")
    pool.answer(rater["reviewer"], rater["id"], "A", 3, 9.0)
    assert tcmqa(["pool", "--store", url, "status"]) == 0
    status = capsys.readouterr().out
    assert "accepted 1" in status and STEM[:4] not in status and OPTIONS[0] not in status
    assert tcmqa([*lead, "retire", "--keep-newest", "0"]) == 0
    assert "retired 1 items: fresh-00001" in capsys.readouterr().out
    out = tmp_path / "tree"
    assert tcmqa(["build", "--items", str(DEMO_ITEMS), "--out", str(out), "--store", url]) == 0
    corpus = datasets.load_dataset(str(out), "corpus", split="test")
    fresh = [r for r in corpus if r["id"] == "fresh-00001"]
    assert len(fresh) == 1 and fresh[0]["question"] == STEM and fresh[0]["answer"] == ["A"]
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert fresh[0]["release_date"] == today and fresh[0]["retired_date"] == today and fresh[0]["source"] == "fresh"
    assert all(r["release_date"] is None and r["retired_date"] is None for r in corpus if r["id"] != "fresh-00001")
    assert json.loads((out / "build_report.json").read_text())["counts"]["fresh_items"] == 1
