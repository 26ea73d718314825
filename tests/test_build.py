"""The builder: schema filter, report, responses, subset, card, Hub tree, publish validation."""

from __future__ import annotations

import collections
import json
import sqlite3
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from huggingface_hub import CommitOperationAdd
from sources import (
    DEMO_ITEMS,
    SAMPLE_DB,
    SAMPLE_ITEMS,
    demo_interactions,
    loading_script,
    read_jsonl,
    write_platform_db,
)

from tcmqa.build import REPORT_NAME, build
from tcmqa.data import load_config
from tcmqa.ingest import BuildReport, clean_item, pseudonym
from tcmqa.publish import InvalidTree, publish, validate_tree
from tcmqa.schema import FEATURES

TCMQA = loading_script().TCMQA


def item(qid: int, answer="B", **overrides) -> dict:
    record = {
        "question_id": qid,
        "question": f"题干{qid}",
        "answer": answer,
        "explanation": None,
        "choices": {k: f"选项{k}{qid}" for k in "ABCDE"},
        "topic": "t",
        "difficulty": 3,
        "source": "s",
    }
    record.update(overrides)
    return record


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def reasons(report: dict) -> dict[str, str]:
    return {d["id"]: d["reason"] for d in report["dropped"]}


@pytest.mark.parametrize("raw", ["BD", "B,D", "B D", "D B", ["D", "B"], "ＢＤ", ["B", "D", "B"]])
def test_answers_normalise_to_sorted_letters(raw):
    row = clean_item(item(1, answer=raw))
    assert row["answer"] == ["B", "D"] and row["answer_type"] == "multi"


def test_corrupted_records_are_reported_and_nothing_else_is_lost(tmp_path):
    good = [item(i) for i in range(10)]
    bad = [
        item(100, choices={**item(0)["choices"], "E": ""}),  # a missing (empty) option
        item(101, choices={k: "x" for k in "ABCD"}),  # four options
        item(102, answer="F"),
        item(103, answer=""),
        "{not json",
        dict(good[3], question_id=104),  # exact duplicate of item 3 under another id
        item(105, answer="B", choices=item(3)["choices"], question=item(3)["question"]) | {"answer": "C"},
    ]
    items = write_jsonl(tmp_path / "items.jsonl", good[:5] + bad + good[5:])
    interactions = [(1, i, 1, "B", 5.0, 0.0, '["1"]', 2, 0) for i in range(10)] + [
        (1, 999, 0, "A", 5.0, 0.0, "[]", 3, 0)
    ]
    db = write_platform_db(tmp_path / "p.sqlite", [], interactions)
    report = build([str(items)], tmp_path / "tree", str(db))

    assert reasons(report) == {
        "100": "empty_option",
        "101": "not_five_options",
        "102": "answer_outside_a_e",
        "103": "empty_answer",
        None: "not_json",
        "104": "duplicate",
        "999": "unknown_item",
    }
    assert report["items_read"] == 17
    # a shared stem with another answer is a different question: kept
    corpus = load_config(tmp_path / "tree", "corpus")
    assert sorted(corpus["id"], key=int) == [str(i) for i in range(10)] + ["105"]
    assert len(load_config(tmp_path / "tree", "responses")) == 10
    saved = json.loads((tmp_path / "tree" / REPORT_NAME).read_text())
    assert saved["dropped_by_reason"]["duplicate"] == 1 and saved["counts"]["corpus"] == 11
    assert "item 3" in next(d["detail"] for d in saved["dropped"] if d["reason"] == "duplicate").replace("id", "item")


def test_a_json_list_of_records_is_read_too(tmp_path):
    path = tmp_path / "items.json"
    path.write_text(json.dumps([item(1), item(2, answer=["E", "A"])]), encoding="utf-8")
    report = build([str(path)], tmp_path / "tree")
    assert report["counts"] == {"corpus": 2, "single": 1, "multi": 1, "dropped": 0, "flagged_items": 0}


def test_demo_tree_configs(demo_tree, demo_items):
    corpus, responses, subset = (load_config(demo_tree, c) for c in ("corpus", "responses", "subset"))
    for name, ds in (("corpus", corpus), ("responses", responses), ("subset", subset)):
        assert ds.features == FEATURES[name]
    assert len(corpus) == len(demo_items)
    assert sum(t == "multi" for t in corpus["answer_type"]) == sum(len(r["answer"]) > 1 for r in demo_items)
    assert len(responses) == 3 * len(demo_items)
    # item 4 was flagged by one rater: it stays in responses and corpus, but not in subset
    flagged_id = str(demo_items[4]["question_id"])
    assert corpus.filter(lambda r: r["flagged"])["id"] == [flagged_id]
    assert flagged_id not in subset["item_id"] and len(subset) == len(demo_items) - 1
    by_id = {r["item_id"]: r for r in subset}
    for i, raw in enumerate(demo_items):
        if i == 4:
            continue
        expected = sum((i + u) % 3 != 0 for u in (1, 2, 3))
        row = by_id[str(raw["question_id"])]
        assert row["n_correct"] == expected and row["majority_correct"] == (expected >= 2)
        assert len(row["rater_domains"]) == 3 and all(1 <= d <= 5 for d in row["rater_difficulty"])
    assert set(responses["block"]) == {0}
    multi = next(r for r in responses if len(r["selected"]) > 1)  # stored as a JSON list on the platform
    assert multi["selected"] == sorted(multi["selected"])
    # correctness is recomputed from the answer set, and the demo's recorded values agree
    answers = {r["id"]: r["answer"] for r in corpus}
    assert all(r["correct"] == (r["selected"] == answers[r["item_id"]]) for r in responses)
    report = json.loads((demo_tree / REPORT_NAME).read_text())
    assert report["notes_by_reason"]["flagged_excluded_from_subset"] == 1
    assert "correctness_mismatch" not in report["notes_by_reason"]


def test_domains_keys_labels_and_corpus_union(demo_tree, demo_items):
    responses = load_config(demo_tree, "responses")
    r = next(r for r in responses if r["item_id"] == str(demo_items[2]["question_id"]) and len(r["domains"]) == 2)
    assert r["domains"] == ["diagnosis_patterns", "internal_medicine"]  # categories "3" and "6"
    assert r["domains_zh"] == ["診斷與辨證學", "中醫內科學"]
    corpus = {row["id"]: row for row in load_config(demo_tree, "corpus")}
    assert corpus[str(demo_items[2]["question_id"])]["domains"] == ["diagnosis_patterns", "internal_medicine"]


def test_recorded_correctness_mismatch_is_reported(tmp_path, demo_items):
    rows = demo_interactions(demo_items)
    rows[0] = (*rows[0][:2], 1 - rows[0][2], *rows[0][3:])
    db = write_platform_db(tmp_path / "p.sqlite", demo_items, rows)
    report = build([str(DEMO_ITEMS)], tmp_path / "tree", str(db))
    assert report["notes_by_reason"]["correctness_mismatch"] == 1
    assert report["counts"]["responses"] == len(rows)  # noted, not dropped


def test_pseudonyms_are_stable_and_keyed(tmp_path, demo_db, demo_tree):
    again = build([str(DEMO_ITEMS)], tmp_path / "again", str(demo_db))
    assert again["counts"] == json.loads((demo_tree / REPORT_NAME).read_text())["counts"]
    assert (
        load_config(tmp_path / "again", "responses")["practitioner_id"]
        == load_config(demo_tree, "responses")["practitioner_id"]
    )
    assert pseudonym(1, "k") == pseudonym(1, "k") != pseudonym(1, "other") != pseudonym(2, "k")


def test_builder_class_generates_the_same_rows(demo_tree, demo_db, tmp_path):
    builder = TCMQA(config_name="subset", items=[str(DEMO_ITEMS)], platform_db=str(demo_db), cache_dir=str(tmp_path))
    builder.download_and_prepare()
    assert builder.as_dataset("test").to_list() == load_config(demo_tree, "subset").to_list()


def test_card_declares_configs_features_and_license(demo_tree):
    from huggingface_hub import DatasetCard

    data = DatasetCard.load(demo_tree / "README.md").data.to_dict()
    assert data["license"] == "cc-by-nc-sa-4.0" and data["language"] == ["zh"]
    # outputs, results and probes are declared before they hold a row: the Space's publisher appends them
    names = [c["config_name"] for c in data["configs"]]
    assert names == ["corpus", "responses", "subset", "outputs", "results", "probes"]
    globs = {c["config_name"]: c["data_files"] for c in data["configs"]}
    for name in ("outputs", "results", "probes"):
        assert globs[name] == [{"split": "test", "path": f"{name}/*.parquet"}]
    infos = {i["config_name"]: i for i in data["dataset_info"]}
    assert infos["subset"]["splits"][0]["num_examples"] == len(load_config(demo_tree, "subset"))
    for name in ("outputs", "results", "probes"):  # features from the schema, no split sizes (they grow)
        assert datasets.Features._from_yaml_list(infos[name]["features"]) == FEATURES[name]
        assert "splits" not in infos[name]
    assert not (demo_tree / "results").exists() and validate_tree(demo_tree) == []
    body = (demo_tree / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("TechTCM/TCMQA", "corpus"' in body and "@misc{tcmqa" in body
    assert "| `probes` | (model, item, probe):" in body  # the config table names it too


def test_real_sample(sample_tree):
    raw = read_jsonl(SAMPLE_ITEMS)
    five = [r for r in raw if all(str(v).strip() for v in r["choices"].values()) and len(r["choices"]) == 5]
    unique = {(r["question"], tuple(r["choices"][k] for k in "ABCDE"), "".join(sorted(r["answer"]))): r for r in five}
    corpus = load_config(sample_tree, "corpus")
    assert len(corpus) == len(unique)
    multi = sum(len(a) > 1 for (_, _, a) in unique)
    assert collections.Counter(corpus["answer_type"]) == {"multi": multi, "single": len(unique) - multi}
    for row in corpus:
        assert all(row["options"][k] for k in "ABCDE") and row["answer"] == sorted(set(row["answer"]))
    con = sqlite3.connect(SAMPLE_DB)
    kept = set(corpus["id"])
    recorded = [r for r in con.execute("SELECT question_id, correctness FROM user_interactions") if str(r[0]) in kept]
    responses = load_config(sample_tree, "responses")
    assert len(responses) == len(recorded)
    triples = collections.Counter(str(q) for q, _ in recorded)
    flagged = {r["item_id"] for r in responses if r["flagged"]}
    assert set(load_config(sample_tree, "subset")["item_id"]) == {q for q, n in triples.items() if n == 3} - flagged


def test_publish_validates_and_uploads_in_one_commit(demo_tree, tmp_path):
    class FakeApi:  # the Hub cannot be reached here: record the calls publish makes
        def __init__(self):
            self.calls = []

        def create_repo(self, repo_id, **kw):
            self.calls.append(("create_repo", repo_id, kw))

        def upload_folder(self, **kw):
            self.calls.append(("upload_folder", kw["repo_id"], kw))
            return type("Commit", (), {"commit_url": "https://hf.co/c/1"})()

    assert validate_tree(demo_tree) == []
    api = FakeApi()
    assert publish(demo_tree, "me/tcmqa", dry_run=True, api=api) is None and api.calls == []
    assert publish(demo_tree, "me/tcmqa", api=api) == "https://hf.co/c/1"
    assert [c[0] for c in api.calls] == ["create_repo", "upload_folder"]
    assert api.calls[1][2]["repo_type"] == "dataset" and api.calls[1][2]["folder_path"] == str(demo_tree)
    assert api.calls[1][2]["delete_patterns"] == [
        "corpus/*.parquet",
        "responses/*.parquet",
        "subset/*.parquet",
        "errata/*.parquet",
    ]


def test_publish_keeps_the_spaces_results_and_outputs(demo_tree, tmp_path):
    """``tcmqa publish`` replaces the built configs' shards and nothing the Space appended.

    Runs against tests/fakehub.FakeHub, whose ``upload_folder`` computes deletions with huggingface_hub's
    own ``_prepare_folder_deletions`` (fnmatch, where ``*`` crosses ``/``), like the real client.
    """
    from fakehub import FakeHub

    space_files = {
        "results/20260101T000000-aaaaaaaa.parquet": b"results row",
        "outputs/20260101T000000-aaaaaaaa-part-00000.parquet": b"outputs part",
    }
    stale = {"corpus/train-00000-of-00002.parquet": b"old", "responses/test-00000-of-00001.parquet": b"old"}

    def seeded() -> FakeHub:
        hub = FakeHub()
        hub.create_commit(
            "me/tcmqa",
            [CommitOperationAdd(p, d) for p, d in {**space_files, **stale}.items()],
            commit_message="earlier",
        )
        return hub

    hub = seeded()
    publish(demo_tree, "me/tcmqa", api=hub)
    files = hub.files("me/tcmqa")
    tree_files = {p.relative_to(demo_tree).as_posix(): p.read_bytes() for p in demo_tree.rglob("*") if p.is_file()}
    assert {p: files[p] for p in space_files} == space_files  # the Space's files survive
    assert "corpus/train-00000-of-00002.parquet" not in files  # a stale shard of a built config goes
    assert {p: files[p] for p in tree_files} == tree_files  # responses/ is replaced by the tree's
    assert set(files) == set(tree_files) | set(space_files)
    assert len(hub.commit_log) == 2  # one commit for the publish
    # the pattern this replaced deletes the Space's files: fnmatch's `*` crosses `/`
    old = seeded()
    old.upload_folder(
        repo_id="me/tcmqa", repo_type="dataset", folder_path=str(demo_tree), delete_patterns=["*/*.parquet"]
    )
    assert not set(space_files) & set(old.files("me/tcmqa"))


def test_validation_checks_appended_configs_when_present(demo_tree, tmp_path):
    tree = _copy(demo_tree, tmp_path / "tree")
    (tree / "results").mkdir()
    pq.write_table(pa.table({"model": ["m"]}), tree / "results" / "x.parquet")
    assert any("config 'results'" in p and "do not match" in p for p in validate_tree(tree))
    (tree / "results" / "x.parquet").unlink()
    pq.write_table(
        pa.Table.from_pylist([{"model": "m"}], schema=FEATURES["results"].arrow_schema), tree / "results" / "x.parquet"
    )
    assert validate_tree(tree) == []


def _copy(tree: Path, dest: Path) -> Path:
    import shutil

    return Path(shutil.copytree(tree, dest))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda t: (t / "subset" / "test-00000-of-00001.parquet").unlink(), "has no Parquet files"),
        (
            lambda t: pq.write_table(
                pq.read_table(t / "corpus" / "test-00000-of-00001.parquet").drop_columns(["topic"]),
                t / "corpus" / "test-00000-of-00001.parquet",
            ),
            "do not match the declared features",
        ),
        (lambda t: (t / "README.md").unlink(), "README.md is missing"),
        (lambda t: pq.write_table(pa.table({"x": [1]}), t / "stray.parquet") or (t / "extra").mkdir(), "not declared"),
    ],
)
def test_publish_refuses_an_invalid_tree(demo_tree, tmp_path, damage, message):
    tree = _copy(demo_tree, tmp_path / "tree")
    damage(tree)
    with pytest.raises(InvalidTree, match=message):
        publish(tree, "me/tcmqa", api=object())  # any call on the api would fail


def test_publish_refuses_rows_that_break_the_rules(demo_tree, tmp_path):
    tree = _copy(demo_tree, tmp_path / "tree")
    path = tree / "corpus" / "test-00000-of-00001.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[0]["answer"] = ["D", "B"]
    rows[1]["options"]["C"] = ""
    datasets.Dataset.from_list(rows, features=FEATURES["corpus"]).to_parquet(str(path))
    problems = validate_tree(tree)
    assert any("not a sorted set" in p for p in problems) and any("an option is empty" in p for p in problems)


def test_cli_build(tmp_path, capsys):
    from tcmqa.cli import main

    assert main(["build", "--items", str(DEMO_ITEMS), "--out", str(tmp_path / "t")]) == 0
    assert "corpus 32" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no such file"):
        main(["build", "--items", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "u")])


def test_empty_report_has_no_drops():
    assert BuildReport().to_dict()["dropped_by_reason"] == {}
