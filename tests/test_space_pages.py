"""The Space's empty states and Compare's offer (tcmqa.leaderboard.empty, compare, tabs), through gradio_client
on a launched Space: a freshly evaluated model none of whose items is in the practitioners' subset gets a
model page that says why and shows no empty table, the board says why its Subset is blank, an unanswered
item says why it has no practitioners' answers, and Compare sets an evaluated row beside a published one
and says which rows it cannot compare (the paper's reported rows) and why.

The tree: the demo items, the imported study rating the first 16 (the subset); ``paper/pub``'s outputs
published with the data on every item; ``org/new`` evaluated here on the 16 unrated items only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gradio_client import Client
from sources import half_rated_tree
from space_fixtures import hub_models, launch, local_settings

from tcmqa.data import load_config
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard import empty, model_outputs
from tcmqa.leaderboard.compare import PAPER_ROWS, availability
from tcmqa.leaderboard.model_page import model_page
from tcmqa.prompts import PROTOCOL
from tcmqa.runs import data_fingerprint
from tcmqa.schema import OUTPUTS
from tcmqa.store import SQLiteStore, Store

NEW, PUBLISHED = "org/new", "paper/pub"


def outputs_rows(model: str, items: list[dict], revision: str) -> list[dict]:
    """``model``'s outputs: right on every other item."""
    return [
        {
            "model": model,
            "item_id": item["id"],
            "answer_type": item["answer_type"],
            "generated_text": "",
            "prediction": item["answer"] if i % 2 == 0 else ["E"],
            "correct": i % 2 == 0 or item["answer"] == ["E"],
            "protocol": PROTOCOL,
            "revision": revision,
        }
        for i, item in enumerate(items)
    ]


def pages_tree(root: Path) -> tuple[Path, list[dict]]:
    """The module doc's tree (``paper/pub`` published on every scored item) and its scored items."""
    tree = half_rated_tree(root)
    scored = [i for i in load_config(str(tree), "corpus").to_list() if not i["flagged"]]
    (tree / "outputs").mkdir()
    rows = outputs_rows(PUBLISHED, scored, "p1")
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), tree / "outputs" / "part-0.parquet")
    return tree, scored


def record_unrated(store: Store, folder: Path, tree: Path, scored: list[dict]) -> list[dict]:
    """``org/new`` evaluated here on the items no practitioner rated (none in the subset); those items."""
    rated = set(load_config(str(tree), "subset").to_pandas()["item_id"])
    items = [i for i in scored if i["id"] not in rated]
    folder.mkdir(parents=True)
    path = folder / "part-00000.parquet"
    pq.write_table(pa.Table.from_pylist(outputs_rows(NEW, items, "a" * 40), schema=OUTPUTS.arrow_schema), path)
    store.submit(NEW, "a" * 40, PROTOCOL, "local")
    job = store.claim("w")
    assert job is not None
    row = {"model": NEW, "origin": "evaluated", "family": "Gemma3", "params_b": 0.27, "revision": "a" * 40}
    row |= {"protocol": PROTOCOL, "full": 50.0, "n": len(items), "n_subset": 0, "n_corpus": len(scored)}
    row |= {"coverage": 100.0 * len(items) / len(scored), "data_fingerprint": data_fingerprint(scored)}
    assert store.finish(job, row, [path])
    return items


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("pages")
    tree, scored = pages_tree(root)
    store = SQLiteStore(root / "store")
    unrated = record_unrated(store, root / "parts", tree, scored)
    demo, url = launch(local_settings(store.root, tree), store, hub_models())
    try:
        subset = set(load_config(str(tree), "subset").to_pandas()["item_id"]) & {i["id"] for i in scored}
        yield {"client": Client(url, verbose=False), "unrated": unrated, "subset": len(subset)}
    finally:
        demo.close()


def _hidden(part: Any) -> bool:
    return isinstance(part, dict) and part.get("visible") is False


def test_model_page_without_subset_items_says_why_and_shows_no_empty_table(space: dict[str, Any]) -> None:
    summary, *parts = space["client"].predict(NEW, api_name="/model_page")
    assert f"{len(space['unrated'])} items scored" in summary
    assert f"this model's items are not in the practitioners' subset ({space['subset']} items so far)" in summary
    assert "the subset grows as practitioners answer" in summary
    subset_parts = parts[2:8]  # after the scale and pass tables (not on the subset): by domain, difficulty, consensus
    assert all(_hidden(part) for part in subset_parts), subset_parts  # no empty table, no blank plot
    assert all(_hidden(part) for part in parts[8:])  # no calibration or probe values recorded: said, not shown
    # a model on the subset items: its tables and figures are shown
    summary, *parts = space["client"].predict(PUBLISHED, api_name="/model_page")
    assert f"{space['subset']} of them in the practitioners' subset" in summary
    assert [part.get("visible") for part in parts[2:8]] == [True] * 6
    assert parts[2]["value"]["data"] and parts[3]["value"] is not None


def test_model_page_summary_says_why_each_part_is_empty() -> None:
    run = pd.DataFrame({"item_id": ["x1", "x2"], "correct": [1, 0]})
    subset = pd.DataFrame(
        [("s1", 3, 3, True, [[], [], []], [1, 1, 1])],
        columns=["item_id", "n_raters", "n_correct", "majority_correct", "rater_domains", "rater_difficulty"],
    )
    page = model_page("org/m", run, subset, {"model": "org/m", "ece": 3.0})
    assert (page.n_subset, page.subset_items) == (0, 1)
    assert "items are not in the practitioners' subset (1 items so far)" in page.summary()
    assert "No probe values for **org/m**" in page.summary()  # calibration is there, the probes are not
    nothing = model_page("org/m", run, subset.iloc[:0], None).summary()
    assert "the practitioners' subset is empty so far" in nothing and "No calibration or probe values" in nothing


def test_board_note_gives_each_blank_subset_its_reason() -> None:
    fp = "served"
    common = {"origin": "evaluated", "protocol": PROTOCOL, "data_fingerprint": fp, "family": "Qwen2"}
    rows = [
        {**common, "model": "org/full", "full": 40.0, "subset": 41.0, "coverage": 100.0},
        {**common, "model": "org/demo", "full": 3.1, "subset": None, "coverage": 100.0},
        {**common, "model": "org/part", "full": 9.0, "subset": None, "coverage": 50.0},
    ]
    shown = board_lib.select(board_lib.merge(rows, fp), columns=board_lib.CHOICES)
    note = empty.blank_subset(shown)
    assert "**org/demo** (comparable)" in note and "**org/part** (partial run, 50% of the items)" in note
    assert "org/full" not in note and "Gemma" not in note  # the paper's rows all have a Subset
    assert "none of the items it was scored on is in the practitioners' subset yet" in note
    assert empty.blank_subset(shown[shown["Model"] == "org/full"]) == ""


def test_item_page_without_practitioners_answers_says_why(space: dict[str, Any]) -> None:
    text, responses, outputs = space["client"].predict(space["unrated"][0]["id"], api_name="/item")
    assert not responses["data"] and outputs["data"]
    assert "**Practitioners' answers**: none yet. This item is not in the practitioners' subset" in text
    assert "Models' outputs**: none yet" not in text


def test_compare_an_evaluated_row_with_a_published_row(space: dict[str, Any]) -> None:
    summary, types, domains, outcomes, items, note = space["client"].predict(
        NEW, PUBLISHED, "one is right, the other wrong", 1, api_name="/compare"
    )
    assert f"**{len(space['unrated'])}** common items" in summary
    assert all(part["visible"] and part["value"]["data"] for part in (types, domains, outcomes, items))
    assert "items where" in note


def test_compare_offers_a_reported_row_as_not_comparable_with_its_reason(space: dict[str, Any]) -> None:
    summary, *tables, note = space["client"].predict(
        "Gemma-2-2B-It", NEW, "one is right, the other wrong", 1, api_name="/compare"
    )
    assert summary == f"`Gemma-2-2B-It` cannot be compared: {PAPER_ROWS}."
    assert all(_hidden(t) for t in tables) and note == ""  # no empty table with "1 2 3" headers


def test_compare_availability_before_any_click() -> None:
    """What the Compare tab says on load: the rows with outputs, the paper's rows as not comparable and why,
    and with one model what can be done."""
    board = board_lib.merge([{"model": NEW, "origin": "evaluated", "full": 3.0}])
    one = {NEW: model_outputs.Run(NEW, "a", model_outputs.RECORDED, 32, 0.0)}
    text = availability(board, one)
    assert f"Rows that have them: **{NEW}** (evaluated here)." in text
    assert "Compare needs two" in text and "Submit tab" in text
    paper = next(line for line in text.splitlines() if line.endswith(f": {PAPER_ROWS}."))
    assert set(paper[2 : -len(PAPER_ROWS) - 3].split(", ")) == set(board_lib.reported_rows()["model"])
    both = {**one, "Gemma-2-2B-It": model_outputs.Run("Gemma-2-2B-It", "", model_outputs.PUBLISHED, 32, 0.0)}
    text = availability(board, both)
    assert "**Gemma-2-2B-It** (published outputs)" in text and "- Gemma-2-2B-It," not in text
    assert "Compare needs two" not in text


def test_empty_states_in_the_callers_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """The empty states' sentences come from the Space's one table of texts, in the caller's language."""
    from tcmqa.leaderboard import lang

    monkeypatch.setattr(lang, "current", lambda: "zh-CN")
    responses = "**中医师作答**：暂无。此题不在中医师子集中；子集随中医师作答而扩大（见“中医师作答”页）。"
    assert empty.no_responses() == responses
    page = empty.no_subset_items("org/m", 16, 15)
    assert "该模型的试题不在中医师子集中（子集目前 15 题）" in page and "subset" not in page
    monkeypatch.setattr(lang, "current", lambda: "zh-TW")
    assert empty.no_facts("org/m", True, False) == (
        "**org/m** 沒有探針數值：其結果列未記錄（這些數值來自完整評測的字母對數機率與探針輪次）。"
    )
