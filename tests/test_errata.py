"""Errata as data: published as the errata config, applied by the builder, the original key kept."""

from __future__ import annotations

import json

import datasets
import pytest
from sources import DEMO_ITEMS

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.errata import VERDICTS, check_erratum
from tcmqa_metric import LETTERS


def _corpus(tree) -> dict[str, dict]:
    return {row["id"]: row for row in load_config(tree, "corpus")}


def _erratum(item: dict, verdict: str, **fields) -> dict:
    return {"item_id": item["id"], "verdict": verdict, "old_key": item["answer"], "reviewers": ["P001", "P002"],
            "decided_date": "2026-12-01", "corpus_revision": "r1", **fields}  # fmt: skip


def test_errata_rebuild_keeps_the_original_key_and_publishes_the_verdicts(demo_tree, demo_db, tmp_path):
    before = _corpus(demo_tree)
    single = [row for row in before.values() if row["answer_type"] == "single" and not row["flagged"]]
    wrong, dropped, right = single[:3]
    new_key = [next(c for c in LETTERS if [c] != wrong["answer"])]
    errata = [
        _erratum(wrong, "wrong_key", new_key=new_key, comment="the textbook gives the other option"),
        _erratum(dropped, "several_correct", drop=True),
        _erratum(right, "key_correct"),
    ]
    path = tmp_path / "errata.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in errata), encoding="utf-8")
    out = tmp_path / "tree"
    report = build([str(DEMO_ITEMS)], out, str(demo_db), errata=str(path))
    after = _corpus(out)
    assert after[wrong["id"]]["answer"] == new_key and after[wrong["id"]]["original_answer"] == wrong["answer"]
    assert dropped["id"] not in after and len(after) == len(before) - 1
    assert {"where": "corpus", "id": dropped["id"], "reason": "erratum", "detail": "several_correct"} in report[
        "dropped"
    ]
    assert all(row["original_answer"] == row["answer"] for key, row in after.items() if key != wrong["id"])
    published = datasets.load_dataset(str(out), "errata", split="test")
    assert [r["item_id"] for r in published] == [wrong["id"], dropped["id"], right["id"]]
    assert published[0]["new_key"] == new_key and published[1]["drop"] and published[2]["verdict"] == "key_correct"
    assert datasets.load_dataset(str(out), "corpus", split="test").features["original_answer"] is not None
    assert "| `errata` | adjudicated item" in (out / "README.md").read_text(encoding="utf-8")
    assert "| `errata` |" not in (demo_tree / "README.md").read_text(encoding="utf-8")
    # the practitioners' responses are scored against the corrected key
    responses = [r for r in load_config(out, "responses") if r["item_id"] == wrong["id"]]
    assert all(r["correct"] == (sorted(r["selected"]) == new_key) for r in responses)


def test_errata_on_another_revision_are_refused(demo_tree, demo_db, tmp_path):
    item = next(iter(_corpus(demo_tree).values()))
    other = [next(c for c in LETTERS if [c] != item["answer"])]
    path = tmp_path / "errata.jsonl"
    path.write_text(json.dumps(_erratum(item, "key_correct", old_key=other)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"erratum for item {item['id']}: adjudicated on key"):
        build([str(DEMO_ITEMS)], tmp_path / "tree", str(demo_db), errata=str(path))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"verdict": "typo"}, "verdict must be one of"),
        ({"verdict": "wrong_key"}, "needs the right letters in new_key"),
        ({"verdict": "unclear"}, "cannot be scored as written"),
        ({"reviewers": ["P001"]}, "at least 2 distinct reviewers"),
        ({"old_key": ["Z"]}, "old_key must be distinct letters"),
        ({"corpus_revision": ""}, "corpus_revision"),
    ],
)
def test_errata_refuse_an_incomplete_verdict(fields, message):
    item = {"id": "7", "answer": ["A"]}
    with pytest.raises(ValueError, match=message):
        check_erratum(_erratum(item, "key_correct") | fields)
    assert "key_correct" in VERDICTS
