"""The explorer's practitioner columns and model outputs stay current without a restart, and every model
with recorded or published outputs is used with one revision (the latest full run), never two mixed.

Real SQLite store, a real built tree (the demo items) given a published ``outputs`` and ``results``
config, the Space launched and read through gradio_client.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gradio_client import Client
from sources import DEMO_ITEMS, demo_interactions, read_jsonl, write_platform_db
from space_fixtures import hub_models, launch, local_settings

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.leaderboard import model_outputs
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import OUTPUTS
from tcmqa.store import SQLiteStore

BLOCK, RATERS = 4, 3


def _rows(model: str, revision: str, items: list[dict], text: str, right: bool = True) -> list[dict]:
    """Outputs rows: right on every item (or wrong on every one), the text naming the revision."""
    return [
        {
            "model": model,
            "item_id": item["id"],
            "answer_type": item["answer_type"],
            "generated_text": f"{text}-{item['id']}",
            "prediction": item["answer"] if right else ["Z"],
            "correct": right,
            "protocol": PROTOCOL,
            "revision": revision,
        }
        for item in items
    ]


def _record(store: SQLiteStore, folder: Path, model: str, revision: str, items: list[dict], right: bool = True) -> None:
    """A finished job of ``model`` at ``revision`` over ``items``, its outputs in the store."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model.replace('/', '_')}-{revision}.parquet"
    rows = _rows(model, revision, items, revision, right)
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), path)
    store.submit(model, revision, PROTOCOL, "local")
    job = store.claim("w")
    assert job is not None and job.revision == revision
    row = {"model": model, "origin": "evaluated", "family": "Qwen2", "params_b": 0.5, "revision": revision}
    assert store.finish(job, {**row, "protocol": PROTOCOL, "coverage": 100.0 * len(items) / 32}, [path])


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The demo items, the imported study on the first 16; published outputs of two models:
    ``paper/one`` at two full revisions (dated), ``paper/partial`` at two partial ones."""
    root = tmp_path_factory.mktemp("fresh")
    items = read_jsonl(DEMO_ITEMS)
    rated = {i["question_id"] for i in items[:16]}
    db = write_platform_db(root / "p.sqlite", items, [r for r in demo_interactions(items) if r[1] in rated])
    build([str(DEMO_ITEMS)], root / "tree", str(db))
    corpus = [i for i in load_config(str(root / "tree"), "corpus").to_list() if not i["flagged"]]
    rows = (
        _rows("paper/one", "old", corpus, "PUB-OLD")
        + _rows("paper/one", "new", corpus, "PUB-NEW")
        + _rows("paper/partial", "p1", corpus[:20], "PART-1")
        + _rows("paper/partial", "p2", corpus[:10], "PART-2")
    )
    (root / "tree" / "outputs").mkdir()
    pq.write_table(
        pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), root / "tree" / "outputs" / "part-0.parquet"
    )
    (root / "tree" / "results").mkdir()
    results = [
        {"model": "paper/one", "revision": "new", "date": "2025-06-01"},
        {"model": "paper/one", "revision": "old", "date": "2025-01-01"},
        {"model": "paper/partial", "revision": "p1", "date": "2025-01-01"},
        {"model": "paper/partial", "revision": "p2", "date": "2025-03-01"},
    ]
    pq.write_table(pa.Table.from_pylist(results), root / "tree" / "results" / "part-0.parquet")
    return root / "tree"


def test_practitioner_models_one_revision_per_model(tree: Path, tmp_path: Path) -> None:
    corpus = [i for i in load_config(str(tree), "corpus").to_list() if not i["flagged"]]
    ids = [i["id"] for i in corpus]
    store = SQLiteStore(tmp_path / "store")
    _record(store, tmp_path / "parts", "org/model", "r1", corpus)  # full
    _record(store, tmp_path / "parts", "org/model", "r2", corpus)  # full, later: the one
    _record(store, tmp_path / "parts", "org/model", "r3", corpus[:5])  # partial, latest: not full
    outputs = model_outputs.ModelOutputs(str(tree), store, n_scored=len(corpus))
    runs = outputs.runs()
    assert {m: (r.revision, r.source) for m, r in runs.items()} == {
        "org/model": ("r2", model_outputs.RECORDED),
        "paper/one": ("new", model_outputs.PUBLISHED),  # the later date
        "paper/partial": ("p2", model_outputs.PUBLISHED),  # none full: the latest
    }
    rows = outputs.on(ids, ["generated_text", "correct"])
    assert rows.groupby("model")["revision"].nunique().max() == 1  # never two revisions of one model
    assert len(rows[rows["model"] == "org/model"]) == len(ids)
    assert rows[rows["model"] == "paper/one"]["generated_text"].str.startswith("PUB-NEW-").all()
    table = model_outputs.models_on(store, ids[:8], str(tree), len(corpus))
    assert sorted(table["model"]) == ["org/model", "paper/one", "paper/partial"]
    assert table.set_index("model").loc["org/model", "revision"] == "r2" and (table["items"] == 8).all()
    # a newer full run is picked up on the store's next version, the same object
    _record(store, tmp_path / "parts", "org/model", "r4", corpus)
    assert outputs.runs()["org/model"].revision == "r4"
    recorded_only = model_outputs.models_on(store, ids[:8])  # no data: the recorded runs alone
    assert recorded_only["model"].tolist() == ["org/model"] and recorded_only["revision"].tolist() == ["r4"]


@pytest.fixture
def space(tree: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "store")
    corpus = [i for i in load_config(str(tree), "corpus").to_list() if not i["flagged"]]
    _record(store, tmp_path / "parts", "org/model", "r1", corpus)
    settings = local_settings(store.root, tree, practice_block_size=BLOCK, practice_raters=RATERS)
    demo, url = launch(settings, store, hub_models())
    try:
        yield {"store": store, "client": Client(url, verbose=False), "corpus": corpus, "tree": tree, "parts": tmp_path}
    finally:
        demo.close()


def _answer_all(practice: PracticeLoader, account: str) -> list[str]:
    p = practice.get()
    p.confirm(account, True)
    assignment = p.assignment(account)
    assert assignment is not None
    while (view := p.current(account)) is not None:
        letters = ["A", "B"] if view.answer_type == "multi" else ["C"]
        p.submit(account, view.item_id, letters, ["other"], 2, False, "", 9.0, 0.0)
    return p.store.practice_block_items(assignment["block"])


def _models(outputs: dict) -> dict[str, str]:
    headers = outputs["headers"]
    return {row[headers.index("model")]: row[headers.index("revision")] for row in outputs["data"]}


def test_practitioner_explorer_columns_and_models_update_without_restart(space: dict[str, Any]) -> None:
    store, client = space["store"], space["client"]
    practice = PracticeLoader(str(space["tree"]), store, block_size=BLOCK, raters=RATERS)
    first = _answer_all(practice, "rater-1")
    item = first[0]
    assert "withheld" in client.predict(item, api_name="/item")[0]  # its block is open
    assert _answer_all(practice, "rater-2") == first and _answer_all(practice, "rater-3") == first
    text, responses, outputs = client.predict(item, api_name="/item")  # the block finished: no restart
    assert "**Answer:**" in text and len(responses["data"]) == RATERS
    assert _models(outputs) == {"org/model": "r1", "paper/one": "new"}  # paper/partial's p2 has not this item
    # an exclusion reopens the block (its slot is to be refilled): withheld again; re-included: back
    assert store.exclude_practitioner("rater-2", "test", "admin", True)
    assert "withheld" in client.predict(item, api_name="/item")[0]
    assert store.exclude_practitioner("rater-2", "test", "admin", False)
    text, responses, _ = client.predict(item, api_name="/item")
    assert "**Answer:**" in text and len(responses["data"]) == RATERS
    # a newer full run of the recorded model replaces the older revision in the explorer, one row per model
    _record(store, space["parts"], "org/model", "r2", space["corpus"])
    assert _models(client.predict(item, api_name="/item")[2]) == {"org/model": "r2", "paper/one": "new"}


def test_practitioner_reference_rows_one_revision_each(tree: Path, tmp_path: Path) -> None:
    """Two results rows of one model at two revisions: each row's Subset and Δ human come from its own
    revision's outputs (one right everywhere, one wrong everywhere), never the two mixed."""
    corpus = [i for i in load_config(str(tree), "corpus").to_list() if not i["flagged"]]
    store = SQLiteStore(tmp_path / "store")
    _record(store, tmp_path / "parts", "org/model", "right", corpus, right=True)
    _record(store, tmp_path / "parts", "org/model", "wrong", corpus, right=False)
    practice = PracticeLoader(str(tree), store, block_size=BLOCK, raters=RATERS).get()
    rows = {r["revision"]: r for r in practice.reference_rows(store.results())}
    assert rows["right"]["subset"] == 100.0 and rows["wrong"]["subset"] == 0.0
    assert rows["right"]["n_subset"] == rows["wrong"]["n_subset"] > 0
    assert rows["right"]["delta_human"] == 100.0 - rows["right"]["human_reference"]


def test_practitioner_models_with_the_hub_unreachable(tree: Path, tmp_path: Path) -> None:
    """The data a Hub id the offline machine cannot read: the recorded runs alone, no error."""
    corpus = [i for i in load_config(str(tree), "corpus").to_list() if not i["flagged"]]
    store = SQLiteStore(tmp_path / "store")
    _record(store, tmp_path / "parts", "org/model", "r1", corpus)
    table = model_outputs.models_on(store, [corpus[0]["id"]], "TechTCM/not-reachable-offline", len(corpus))
    assert table["model"].tolist() == ["org/model"] and table["revision"].tolist() == ["r1"]


def test_practitioner_block_report_models_recorded_and_published(tree: Path, tmp_path: Path) -> None:
    """A finished block's "models on the same items": the recorded model and the published ones, one revision
    each (before: the store's outputs only, often empty on a Space that has evaluated nothing yet)."""
    corpus = [i for i in load_config(str(tree), "corpus").to_list() if not i["flagged"]]
    store = SQLiteStore(tmp_path / "store")
    _record(store, tmp_path / "parts", "org/model", "r1", corpus)
    _record(store, tmp_path / "parts", "org/model", "r2", corpus, right=False)  # the latest full run
    practice = PracticeLoader(str(tree), store, block_size=BLOCK, raters=RATERS)
    items = _answer_all(practice, "rater-1")
    assert _answer_all(practice, "rater-2") == _answer_all(practice, "rater-3") == items  # the review waits for them
    models = practice.get().report("rater-1")["models"].set_index("model")
    assert models.loc["org/model", "revision"] == "r2" and models.loc["org/model", "accuracy"] == 0.0
    assert models.loc["paper/one", "revision"] == "new" and (models["items"] <= len(items)).all()


def test_practitioner_reference_counts_published_runs_once_aggregated(tree: Path, tmp_path: Path) -> None:
    """A row imported from the Hub is recounted on the current subset once its published run's outcome is
    aggregated (once: a second start adds nothing); before that it says it is as recorded."""
    store = SQLiteStore(tmp_path / "store")
    practice = PracticeLoader(str(tree), store, block_size=BLOCK, raters=RATERS).get()
    imported = {"model": "paper/one", "revision": "new", "origin": "evaluated", "subset": 12.0}
    [before] = practice.reference_rows([imported])
    assert (before["subset"], before["subset_version"]) == (12.0, "as recorded")
    assert model_outputs.record_published(store, str(tree)) == 4  # paper/one and paper/partial, two revisions each
    assert model_outputs.record_published(store, str(tree)) == 0
    [after] = practice.reference_rows([imported])
    subset = practice.subset_majority()
    assert after["subset"] == 100.0 and after["n_subset"] == len(subset) > 0  # right on every item
    assert after["human_reference"] == 100 * sum(subset.values()) / len(subset)
    assert after["subset_version"] not in ("", "as recorded")


def _browse(client: Client, search: str = "", consensus: str = "", outcome: str = "") -> dict[str, dict]:
    """Every row of /browse (all its pages) by id, outcomes of org/model."""
    rows, number, pages = {}, 0, 1
    while number < pages:
        args = (search, "", "", "", "", consensus, outcome, "org/model", number + 1)
        table, summary, number = client.predict(*args, api_name="/browse")
        pages = int(re.search(r"page \d+ of (\d+)", summary).group(1))
        rows |= {row[0]: dict(zip(table["headers"], row)) for row in table["data"]}
    return rows


def test_practitioner_browse_consensus_and_outcome_update_without_restart(space: dict[str, Any]) -> None:
    """A Space block's items: while it is open, no consensus and no outcome (and absent from those filters);
    once its three raters finish, each shows its consensus (all three answered C, or A and B on a multi item,
    so 3/3 where that is the answer, else 0/3) and org/model's outcome (right everywhere), no restart."""
    store, client = space["store"], space["client"]
    practice = PracticeLoader(str(space["tree"]), store, block_size=BLOCK, raters=RATERS)
    block = _answer_all(practice, "rater-1")
    answers = {i["id"]: i["answer"] for i in space["corpus"]}
    right = {i for i in block if answers[i] in (["C"], ["A", "B"])}
    rows = _browse(client)
    assert all(rows[i]["consensus"] == "" and rows[i]["model outcome"] == "" for i in block)
    assert not set(block) & set(_browse(client, outcome="both right"))
    assert _answer_all(practice, "rater-2") == block and _answer_all(practice, "rater-3") == block
    rows = _browse(client)
    for item in block:
        expected = ("3/3", "both right") if item in right else ("0/3", "model right, practitioners wrong")
        assert (rows[item]["consensus"], rows[item]["model outcome"]) == expected, item
    assert set(_browse(client, consensus="3")) == right  # the study's items are 2 of 3 each
    assert set(block) - right <= set(_browse(client, consensus="0"))
    with pytest.raises(Exception, match=re.escape("No outputs of the model 'org/none'.")):
        client.predict("", "", "", "", "", "", "", "org/none", 1, api_name="/browse")
