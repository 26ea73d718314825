"""Two models compared (tcmqa.leaderboard.compare): planted outcomes with every number worked out by hand
(the 2x2 table, McNemar's exact p, accuracy by answer type and by domain, the differing items and their
pages), κ against scikit-learn, and on a real store and built tree: each model's run read where it lies and
the items of an open practitioner block never listed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import cohen_kappa_score
from sources import DEMO_ITEMS, demo_interactions, read_jsonl, write_platform_db

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.leaderboard.compare import STEM_CHARS, Comparator, compare
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.leaderboard.practice.core import open_block_items
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import OUTPUTS
from tcmqa.store import SQLiteStore, Store

MM, IM = "materia_medica", "internal_medicine"
# item i0..i9: i0-i6 single-answer, i7-i9 multi; domains as the raters gave them; i9 flagged (never scored)
DOMAINS = [[MM]] * 5 + [[MM, IM]] * 3 + [[]] * 2
A_RIGHT = [1, 1, 1, 1, 0, 0, 1, 0, 1, 1]
B_RIGHT = [1, 0, 0, 1, 1, 0, 0, 0, 1, 0]  # B has no output on i0


def _corpus() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"i{k}" for k in range(10)],
            "question": [f"問題{k}" + "長" * (80 if k == 1 else 3) for k in range(10)],
            "answer": [["A"] if k < 7 else ["B", "D"] for k in range(10)],
            "answer_type": ["single"] * 7 + ["multi"] * 3,
            "domains": DOMAINS,
            "flagged": [False] * 9 + [True],
        }
    )


def _run(right: list[int], skip: tuple[str, ...] = ()) -> pd.DataFrame:
    corpus = _corpus()
    rows = [
        {"item_id": i, "correct": bool(r), "prediction": answer if r else ["E"]}
        for i, answer, r in zip(corpus["id"], corpus["answer"], right)
        if i not in skip
    ]
    return pd.DataFrame(rows)


@pytest.fixture
def planted():
    return compare(_corpus(), _run(A_RIGHT), _run(B_RIGHT, skip=("i0",)), "org/a", "org/b", withheld={"i2"})


def test_compare_common_items_and_outcome_table(planted) -> None:
    # common: i1..i8 (B lacks i0, i9 is flagged); A = 1,1,1,0,0,1,0,1 and B = 0,0,1,1,0,0,0,1 there
    assert planted.n == 8
    table = planted.outcomes.set_index("")
    assert table.loc["A right", "B right"] == 2  # i3, i8
    assert table.loc["A right", "B wrong"] == 3  # i1, i2, i6
    assert table.loc["A wrong", "B right"] == 1  # i4
    assert table.loc["A wrong", "B wrong"] == 2  # i5, i7


def test_compare_mcnemar_exact_and_kappa(planted) -> None:
    # 4 discordant items, 3 of them A's: two-sided exact p = 2 * P(X <= 1 | Binomial(4, 1/2)) = 2 * 5/16
    assert (planted.test.only_a, planted.test.only_b) == (3, 1)
    assert planted.test.p_value == pytest.approx(10 / 16)
    a, b = [1, 1, 1, 0, 0, 1, 0, 1], [0, 0, 1, 1, 0, 0, 0, 1]
    # by hand: p_o = 4/8, p_e = 5/8 * 3/8 + 3/8 * 5/8 = 30/64, κ = (32/64 - 30/64) / (34/64) = 1/17
    assert planted.kappa == pytest.approx(1 / 17)
    assert planted.kappa == pytest.approx(cohen_kappa_score(a, b))
    assert "p = 0.625" in planted.summary() and "κ = 0.059" in planted.summary()


def test_compare_accuracy_by_answer_type_and_domain(planted) -> None:
    types = planted.accuracy.set_index("items")
    assert types.loc["all"].tolist() == [8, 62.5, 37.5]
    assert types.loc["single"].tolist() == [6, 66.7, 33.3]  # i1..i6: A 4/6, B 2/6
    assert types.loc["multi"].tolist() == [2, 50.0, 50.0]  # i7, i8
    domains = planted.by_domain.set_index("domain")
    assert domains.loc[MM].tolist() == [7, 57.1, 28.6]  # i1..i7: A 4/7, B 2/7
    assert domains.loc[IM].tolist() == [3, 33.3, 0.0]  # i5..i7
    assert domains.loc["unrated"].tolist() == [1, 100.0, 100.0]  # i8


def test_compare_differing_items_leave_out_the_withheld_and_page(planted) -> None:
    assert planted.withheld == 1  # i2, in an open practitioner block
    first = planted.page(1)
    assert first.columns.tolist() == ["item_id", "right", "stem", "A", "B", "answer"]
    assert first["item_id"].tolist() == ["i1", "i6", "i4"]  # A's right ones first, then B's
    assert first["right"].tolist() == ["A", "A", "B"]
    assert first.loc[0, "stem"].endswith("…") and len(first.loc[0, "stem"]) == STEM_CHARS
    assert first.loc[1, "stem"] == "問題6長長長"
    assert first.loc[0].tolist()[3:] == ["A", "E", "A"]
    assert first.loc[2].tolist()[3:] == ["E", "A", "A"]
    assert planted.pages(size=2) == 2
    assert planted.page(2, size=2)["item_id"].tolist() == ["i4"]
    assert planted.page(99, size=2)["item_id"].tolist() == ["i4"]  # clamped to the last page
    assert planted.page(0, size=2)["item_id"].tolist() == ["i1", "i6"]
    # only the items one model got right
    assert planted.page(1, right="B")["item_id"].tolist() == ["i4"]
    assert planted.pages(size=1, right="A") == 2 and planted.page(2, size=1, right="A")["item_id"].tolist() == ["i6"]
    with pytest.raises(ValueError, match="right is 'A', 'B' or None"):
        planted.page(1, right="C")


def test_compare_models_without_common_items() -> None:
    c = compare(_corpus(), _run(A_RIGHT), _run(B_RIGHT).iloc[:0])
    assert c.n == 0 and c.differing.empty and c.page(1).empty
    assert "no scored item in common" in c.summary()


def record_run(store: Store, folder: Path, model: str, corpus: list[dict], right: set[str], **extra: Any) -> None:
    """A finished full run of ``model``: right on the items of ``right``, E elsewhere; ``extra``: results fields."""
    rows = [
        {
            "model": model,
            "item_id": item["id"],
            "answer_type": item["answer_type"],
            "generated_text": "",
            "prediction": item["answer"] if item["id"] in right else ["E"],
            "correct": item["id"] in right or item["answer"] == ["E"],
            "protocol": PROTOCOL,
            "revision": "a" * 40,
        }
        for item in corpus
    ]
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), folder / "part-00000.parquet")
    store.submit(model, "a" * 40, PROTOCOL, "local")
    job = store.claim("w")
    assert job is not None and job.model == model
    row = {"model": model, "origin": "evaluated", "family": "Qwen2", "params_b": 0.5, "revision": "a" * 40}
    row |= {"protocol": PROTOCOL, "coverage": 100.0, **extra}
    assert store.finish(job, row, [folder / "part-00000.parquet"])


@pytest.fixture(scope="module")
def half_rated_tree(tmp_path_factory) -> Path:
    """The demo items, the imported study rating the first 16: the rest are left for the Space's blocks."""
    root = tmp_path_factory.mktemp("compare")
    items = read_jsonl(DEMO_ITEMS)
    rated = {i["question_id"] for i in items[:16]}
    db = write_platform_db(root / "p.sqlite", items, [r for r in demo_interactions(items) if r[1] in rated])
    build([str(DEMO_ITEMS)], root / "tree", str(db))
    return root / "tree"


def test_comparator_on_a_store_withholds_open_block_items(tmp_path: Path, half_rated_tree: Path) -> None:
    """org/a right everywhere, org/b nowhere: every scored item differs; a practitioner's open block
    (5 items) is left out of the list and counted as withheld."""
    demo_tree = half_rated_tree
    store = SQLiteStore(tmp_path / "store")
    corpus = load_config(str(demo_tree), "corpus").to_list()
    scored = [i for i in corpus if not i["flagged"]]
    record_run(store, tmp_path / "a", "org/a", corpus, {i["id"] for i in corpus})
    record_run(store, tmp_path / "b", "org/b", corpus, set())
    practice = PracticeLoader(str(demo_tree), store, block_size=5, raters=3).get()
    practice.confirm("ann", True)
    assert practice.assignment("ann") is not None
    open_items = open_block_items(store, 3)
    assert len(open_items) == 5
    comparator = Comparator(str(demo_tree), store, raters=3)
    assert comparator.models() == ["org/a", "org/b"]
    c = comparator.compare("org/a", "org/b")
    discordant = {i["id"] for i in scored if i["answer"] != ["E"]}  # B's E is right where the answer is E
    assert c.n == len(scored)
    assert c.test.only_a == len(discordant) and c.test.only_b == 0
    assert set(c.differing["item_id"]) == discordant - open_items
    assert c.withheld == len(discordant & open_items) > 0
    assert not set(c.page(1, size=1000)["item_id"]) & open_items
