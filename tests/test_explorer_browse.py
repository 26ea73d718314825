"""The explorer's browse and search (tcmqa.leaderboard.browse through Explorer) on a small built tree whose
every count is planted, so each expected set below is worked out by hand from the rules in this docstring.

The tree: the 32 demo items (indices i = 0..31, ids 9000 + i; items 26-31 multi-answer; source difficulty
1 + i % 5), one option of item 7 holding the planted text ``ＱＸ寒证`` (full-width letters). Three raters
answer items 0-23 (items 24-31 are unrated, so off the subset):

* rater u (1..3) is right on item i iff u <= i % 4, so ``n_correct`` = i % 4 and the majority is right iff
  i % 4 >= 2;
* every rater ticks domain number 1 + i % 10 (DOMAINS in order); rater 3 also ticks 10 (``other``) on item 5;
* raters 1 and 2 rate a = 1 + i % 5; rater 3 rates a + 2 (at most 5) on even items, a on odd ones; the mean's
  level (rounded half up) is then 2 for items 0, 1, 10, 11, 20, 21; 1 for 5, 15; 3 for 6, 7, 16, 17;
  4 for 2, 3, 8, 12, 13, 18, 22, 23; 5 for 4, 9, 14, 19.

A published model, ``paper/planted``, is right on item i iff i % 3 == 0 (its letter probabilities on every
item are 40/30/20/5/5 % once renormalised over A-E). Against the majority on items 0-23:
practitioners right, model wrong: 2, 7, 10, 11, 14, 19, 22, 23; model right, practitioners wrong: 0, 9, 12, 21;
both right: 3, 6, 15, 18; both wrong: 1, 4, 5, 8, 13, 16, 17, 20.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sources import DEMO_ITEMS, read_jsonl, write_platform_db
from space_fixtures import CHROMIUM, SHOTS, evaluated_model, hub_models, launch, local_settings, open_chromium

from tcmqa.build import build
from tcmqa.leaderboard import browse, lang
from tcmqa.leaderboard.board import Board, served_fingerprint
from tcmqa.leaderboard.explorer import PROBABILITY_COLUMNS, Explorer
from tcmqa.leaderboard.formats import header
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import DOMAIN_NAMES, DOMAINS, OUTPUTS
from tcmqa.store import SQLiteStore
from tcmqa.store.practice import SlotPlan

PLANTED = "ＱＸ寒证"
MODEL = "paper/planted"
PROBABILITIES = {"A": 0.2, "B": 0.15, "C": 0.1, "D": 0.025, "E": 0.025}  # half the mass on letters: renormalised


def ids(*indices: int) -> set[str]:
    return {str(9000 + i) for i in indices}


def _interactions(items: list[dict]) -> list[tuple]:
    """The platform rows of the module doc's three raters on items 0-23."""
    rows = []
    for i, item in enumerate(items[:24]):
        a = 1 + i % 5
        for u in (1, 2, 3):
            right = u <= i % 4
            letters = list(item["answer"]) if right else (["E"] if item["answer"] != "E" else ["A"])
            categories = [str(1 + i % 10)] + (["10"] if (i, u) == (5, 3) else [])
            rating = min(5, a + 2) if u == 3 and i % 2 == 0 else a
            rows.append(
                (u, item["question_id"], int(right), json.dumps(letters), 20.0, 0.0, json.dumps(categories), rating, 0)
            )
    return rows


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browse")
    items = read_jsonl(DEMO_ITEMS)
    items[7]["choices"]["C"] = PLANTED
    path = root / "items.jsonl"
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    db = write_platform_db(root / "platform.sqlite", items, _interactions(items))
    build([str(path)], root / "tree", str(db))
    logprobs = {letter: math.log(p) for letter, p in PROBABILITIES.items()}
    rows = [
        {
            "model": MODEL,
            "item_id": str(item["question_id"]),
            "answer_type": "multi" if len(item["answer"]) > 1 else "single",
            "generated_text": f"PLANTED-{item['question_id']}",
            "prediction": list(item["answer"]) if i % 3 == 0 else ["Z"],
            "correct": i % 3 == 0,
            "letter_logprobs": logprobs,
            "protocol": PROTOCOL,
            "revision": "r1",
        }
        for i, item in enumerate(items)
    ]
    (root / "tree" / "outputs").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), root / "tree" / "outputs" / "p.parquet")
    return root / "tree"


@pytest.fixture
def explorer(tree: Path, tmp_path: Path) -> Explorer:
    return Explorer(str(tree), SQLiteStore(tmp_path / "store"))


def found(explorer: Explorer, model: str | None = MODEL, **filters) -> set[str]:
    """Every id matching (all pages)."""
    first = explorer.browse(browse.Filters(**filters), model, 1)
    pages = [first, *[explorer.browse(browse.Filters(**filters), model, n) for n in range(2, first.pages + 1)]]
    return {i for p in pages for i in p.rows["id"]}


def test_search_finds_planted_text_case_and_width_folded(explorer: Explorer) -> None:
    assert found(explorer, search="qx寒") == ids(7)  # ＱＸ in the option, typed as ASCII lower case
    assert found(explorer, search=" ＱＸ寒证 ") == ids(7)
    assert found(explorer, search="肺") == ids(1, 2, 4, 10)  # in a stem or an option
    assert found(explorer, search="no such text") == set()


def test_each_filter_against_hand_counts(explorer: Explorer) -> None:
    assert found(explorer, domain="other") == ids(5, 9, 19)  # rater 3's extra tick on item 5 counts
    assert found(explorer, domain="foundational_theory") == ids(0, 10, 20)  # 30 is unrated: no domain
    assert found(explorer, answer_type="multi") == ids(26, 27, 28, 29, 30, 31)
    assert len(found(explorer, answer_type="single")) == 26
    assert found(explorer, rated_difficulty=1) == ids(5, 15)
    assert found(explorer, rated_difficulty=3) == ids(6, 7, 16, 17)
    assert found(explorer, rated_difficulty=4) == ids(2, 3, 8, 12, 13, 18, 22, 23)
    assert found(explorer, source_difficulty=5) == ids(4, 9, 14, 19, 24, 29)
    for k in range(4):
        assert found(explorer, consensus=k) == ids(*[i for i in range(24) if i % 4 == k])
    assert found(explorer, answer_type="multi", consensus=2) == set()  # multi items 26-31 are unrated
    assert found(explorer, domain="other", consensus=1) == ids(5, 9)


def test_outcome_filter_against_the_planted_model(explorer: Explorer) -> None:
    expected = {
        "practitioners right, model wrong": ids(2, 7, 10, 11, 14, 19, 22, 23),
        "model right, practitioners wrong": ids(0, 9, 12, 21),
        "both right": ids(3, 6, 15, 18),
        "both wrong": ids(1, 4, 5, 8, 13, 16, 17, 20),
    }
    for outcome, items in expected.items():
        assert found(explorer, outcome=outcome) == items, outcome
    rows = explorer.browse(browse.Filters(search="qx寒"), MODEL).rows
    assert rows.to_dict("records") == [
        {
            "id": "9007",
            "stem": "脉来急数，一息七八至，称为",
            "answer type": "single",
            "domain": DOMAIN_NAMES["ent_ophthalmology"]["en"],  # its name in the caller's language (no request: en)
            "consensus": "3/3",
            "model outcome": "practitioners right, model wrong",
            "difficulty": "",  # no scale fitted here
            "discrimination": "",
        }
    ]
    off_subset = explorer.browse(browse.Filters(search="痈的初期"), MODEL).rows  # item 24: unrated, model right
    assert off_subset[["consensus", "model outcome"]].values.tolist() == [["", "model right"]]
    assert explorer.browse(browse.Filters(search="痈的初期"), None).rows["model outcome"].tolist() == [""]
    with pytest.raises(browse.Refused, match="choose a model"):
        explorer.browse(browse.Filters(outcome="both right"), None)
    with pytest.raises(browse.Refused, match="no outputs of the model 'org/none'"):
        explorer.browse(browse.Filters(), "org/none")
    with pytest.raises(browse.Refused, match="unknown outcome"):
        browse.Filters(outcome="model wins")


def test_paging_total_and_last_page(explorer: Explorer) -> None:
    first = explorer.browse(browse.Filters(), MODEL, 1)
    assert (first.total, first.pages, len(first.rows), first.number) == (32, 2, 25, 1)
    assert first.rows.columns.tolist() == browse.ROW_COLUMNS
    last = explorer.browse(browse.Filters(), MODEL, 2)
    assert len(last.rows) == 7 and last.rows["id"].tolist() == sorted(ids(*range(25, 32)))
    assert explorer.browse(browse.Filters(), MODEL, 99).number == 2  # clamped to the last page
    assert explorer.browse(browse.Filters(), MODEL, 0).number == 1
    assert first.summary() == "32 items · page 1 of 2"
    none = explorer.browse(browse.Filters(search="no such text"), MODEL, 3)
    assert (none.total, none.pages, none.number, len(none.rows)) == (0, 1, 1, 0)


def test_open_block_items_never_under_consensus_or_outcome(explorer: Explorer) -> None:
    """A block assigned through the store's own transaction holds items 2 (consensus 2, practitioners right
    and the model wrong), 3 (3 of 3, both right), 9 (1 of 3, the model right) and 24 (off the subset, the
    model right): none is listed under a consensus, outcome or rated-difficulty filter, and their rows
    show no consensus and no outcome; the search still finds them."""
    open_items = ids(2, 3, 9, 24)
    plan = SlotPlan(block=1, slot=0, items=sorted(open_items), raters=3)
    explorer.store.assign_practice_block("rater", lambda snap, account: plan)
    assert found(explorer, consensus=2) == ids(6, 10, 14, 18, 22)
    assert found(explorer, consensus=3) == ids(7, 11, 15, 19, 23)
    assert found(explorer, consensus=1) == ids(1, 5, 13, 17, 21)
    assert found(explorer, outcome="practitioners right, model wrong") == ids(7, 10, 11, 14, 19, 22, 23)
    assert found(explorer, outcome="both right") == ids(6, 15, 18)
    assert found(explorer, outcome="model right, practitioners wrong") == ids(0, 12, 21)
    assert found(explorer, rated_difficulty=4) == ids(8, 12, 13, 18, 22, 23)
    shown = explorer.browse(browse.Filters(), MODEL, 1).rows.set_index("id")
    assert shown.loc[sorted(open_items), ["consensus", "model outcome"]].eq("").all().all()
    assert shown.loc["9007", "consensus"] == "3/3"  # the rest as before
    assert found(explorer, search="肺") == ids(1, 2, 4, 10)  # what the corpus publishes stays searchable
    assert found(explorer, domain="diagnosis_patterns") >= ids(2)  # the corpus's domains
    # the block finished by all its raters would release them: here it stays open, so every filter agrees
    for outcome in browse.OUTCOMES:
        assert not found(explorer, outcome=outcome) & open_items


def test_item_page_every_model_with_letter_probabilities(explorer: Explorer, tree: Path, tmp_path: Path) -> None:
    evaluated_model(explorer.store, tree, tmp_path, "org/recorded")  # logs no letter log-probs
    text, responses, outputs = explorer.item("9007")
    assert PLANTED in text and "**Answer:** B" in text and len(responses) == 3
    assert outputs["model"].tolist() == ["org/recorded", MODEL]
    planted = outputs.set_index("model").loc[MODEL]
    assert planted[PROBABILITY_COLUMNS].tolist() == [40.0, 30.0, 20.0, 5.0, 5.0]
    assert planted["generated_text"] == "PLANTED-9007" and not planted["correct"]
    assert outputs.set_index("model").loc["org/recorded", PROBABILITY_COLUMNS].isna().all()
    explorer.store.assign_practice_block("rater", lambda snap, account: SlotPlan(1, 0, ["9007"], 3))
    text, responses, outputs = explorer.item("9007")
    assert "withheld" in text and "**Answer:**" not in text and responses.empty and outputs.empty


def test_item_page_models_a_page_at_a_time(
    explorer: Explorer, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One model a page, the given order first: a page reads its own models' runs only (the other's files
    are gone and nothing fails); a page past the last is the last."""
    import tcmqa.leaderboard.explorer as explorer_module

    monkeypatch.setattr(explorer_module, "MODELS_PER_PAGE", 1)
    evaluated_model(explorer.store, tree, tmp_path, "org/recorded")
    text, _, outputs = explorer.item("9007", 2, [MODEL])
    assert outputs["model"].tolist() == ["org/recorded"] and "models 2–2 of 2 (page 2 of 2)" in text
    assert explorer.item("9007", 9, [MODEL])[2]["model"].tolist() == ["org/recorded"]
    assert explorer.item("9007", 1)[2]["model"].tolist() == ["org/recorded"]  # no order: by name
    for path in explorer.store.outputs_files():
        path.unlink()
    text, _, outputs = explorer.item("9007", 1, [MODEL])
    assert outputs["model"].tolist() == [MODEL] and "models 1–1 of 2 (page 1 of 2)" in text


def test_default_model_is_the_leading_comparable_one(explorer: Explorer, tree: Path, tmp_path: Path) -> None:
    for model, full in (("org/low", 40.0), ("org/high", 60.0)):
        (tmp_path / model).mkdir(parents=True)
        evaluated_model(explorer.store, tree, tmp_path / model, model, full=full)
    board = Board(explorer.store, data_fingerprint=served_fingerprint(str(tree))).frame()
    assert explorer.models(board) == ["org/high", "org/low", MODEL]  # the paper's model is not on the board
    fewer = board[board["Model"] != "org/high"]
    assert explorer.models(fewer)[0] == "org/low"


def test_item_table_takes_the_corpus_domains_without_responses() -> None:
    corpus = pd.DataFrame(
        {
            "id": ["a", "b"],
            "question": ["Ｘ", "长" * 70],
            "options": [{"A": "1"}, {"A": "2"}],
            "answer_type": ["single", "multi"],
            "domains": [["regulation", "other", "not-a-domain"], ["other"]],
            "source_difficulty": [3, None],
        }
    )
    responses = pd.DataFrame({"item_id": ["b"], "domains": [["classical_texts"]], "difficulty": [2]})
    table = browse.item_table(browse.corpus_table(corpus), responses, pd.DataFrame())
    assert table.loc["a", "corpus_domains"] == ("regulation", "other") and pd.isna(table.loc["a", "rater_domains"])
    assert table.loc["b", "rater_domains"] == ("classical_texts",) and table["level"].tolist() == [0, 2]
    chosen = browse.select(table, browse.Filters(domain="other"))
    assert chosen["id"].tolist() == ["a"]  # b's practitioners said classical texts
    assert browse.select(table, browse.Filters(search="x"))["id"].tolist() == ["a"]
    stems = browse.page(browse.select(table, browse.Filters())).rows["stem"].tolist()
    assert stems == ["Ｘ", "长" * (browse.STEM_CHARS - 1) + "…"]  # a long stem cut to STEM_CHARS
    assert [browse.rated_level(m) for m in (1.0, 1.49, 1.5, 2.5, 4.6, 5.0)] == [1, 1, 2, 3, 5, 5]


def test_browse_is_fast_on_a_full_size_corpus() -> None:
    """38,279 items (the paper's corpus size), 4,785 in the subset, 15,151 responses (the study's count):
    the corpus part of the table (once per process), the practitioners' part (after every response), and a
    search with an outcome filter, each well within the explorer's 2 s budget on a loaded 2-core machine."""
    n = 38_279
    stems = [f"第{i}题 肝{'肺' if i % 7 == 0 else '脾'}之病" for i in range(n)]
    corpus = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "question": stems,
            "options": [{"A": "甲", "B": "乙", "C": "丙", "D": "丁", "E": f"戊{i % 11}"} for i in range(n)],
            "answer_type": ["multi" if i % 16 == 0 else "single" for i in range(n)],
            "domains": [[list(DOMAINS)[i % 10]] for i in range(n)],
            "source_difficulty": [i % 9 for i in range(n)],
        }
    )
    rated = range(0, n, 8)  # consensus (i // 8) % 4
    subset = pd.DataFrame(
        {
            "item_id": [f"q{i}" for i in rated],
            "n_raters": 3,
            "n_correct": [(i // 8) % 4 for i in rated],
            "majority_correct": [(i // 8) % 4 >= 2 for i in rated],
        }
    )
    responses = pd.DataFrame(
        {
            "item_id": [f"q{8 * (j % len(rated))}" for j in range(15_151)],
            "domains": [[list(DOMAINS)[j % 10]] for j in range(15_151)],
            "difficulty": [1 + j % 5 for j in range(15_151)],
        }
    )
    timings = {}
    start = time.perf_counter()
    items = browse.corpus_table(corpus)
    timings["corpus part"] = time.perf_counter() - start
    start = time.perf_counter()
    table = browse.item_table(items, responses, subset)
    timings["practitioners' part"] = time.perf_counter() - start
    correct = pd.Series([i % 3 == 0 for i in range(n)], index=[f"q{i}" for i in range(n)])
    start = time.perf_counter()
    result = browse.page(
        browse.select(table, browse.Filters(search="肺", outcome="both right"), {"q0", "q8"}, correct), 2
    )
    timings["query"] = time.perf_counter() - start
    expected = sum(1 for i in rated if i % 7 == 0 and (i // 8) % 4 >= 2 and i % 3 == 0)
    assert result.total == expected and result.number == 2
    assert timings["corpus part"] < 5 and timings["practitioners' part"] < 1 and timings["query"] < 1, timings


def _choose(page: Any, dropdown: str, label: str) -> None:
    """Pick the option ``label`` in the gradio dropdown with elem_id ``dropdown``."""
    page.locator(f"#{dropdown} input").click()
    page.get_by_role("option", name=label, exact=True).click()


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
def test_browser_search_filter_page_and_open_an_item(tree: Path, tmp_path: Path) -> None:
    """The Space in Chromium: the default model is the leading comparable one; next page; a search; the
    consensus and outcome filters (the planted model chosen); a row clicked opens its item page."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    (tmp_path / "high").mkdir()
    evaluated_model(store, tree, tmp_path / "high", "org/high", full=60.0)
    demo, url = launch(local_settings(store.root, tree), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.get_by_role("tab", name="Item explorer").click()
            summary, results = page.locator("#explorer-summary"), page.locator("#explorer-results")

            def cell(text: str) -> Any:  # the text's own element in the results table
                return results.get_by_text(text, exact=True).last

            expect(summary).to_contain_text("32 items · page 1 of 2", timeout=30_000)
            expect(page.locator("#explorer-model input")).to_have_value("org/high")  # the leading comparable
            expect(cell("五行中，木的特性是")).to_be_visible()
            page.locator("#explorer-next").click()
            expect(summary).to_contain_text("page 2 of 2")
            expect(cell("脾胃虚弱者，宜选用的补气药有")).to_be_visible()  # item 31, the last

            page.locator("#explorer-search textarea").fill("肺")
            page.locator("#explorer-search textarea").press("Enter")
            expect(summary).to_contain_text("4 items · page 1 of 1")
            page.locator("#explorer-search textarea").fill("")
            page.locator("#explorer-search textarea").press("Enter")
            expect(summary).to_contain_text("32 items")
            _choose(page, "explorer-consensus", f"2 {lang.text('explorer_correct', 'en')}")  # "2 answered right"
            expect(summary).to_contain_text("6 items")
            _choose(page, "explorer-model", MODEL)
            _choose(page, "explorer-outcome", "practitioners right, model wrong")
            expect(summary).to_contain_text(f"4 items · page 1 of 1 · outcomes of {MODEL}")  # items 2, 10, 14, 22
            expect(cell("麻黄的功效是")).to_be_visible()
            page.screenshot(path=SHOTS / "explorer-search.png", full_page=True)

            cell("麻黄的功效是").click()  # item 10
            item = page.locator("#item-text")
            expect(item).to_contain_text("**Answer:** B".replace("**", ""), timeout=30_000)
            expect(item).to_contain_text("发汗解表，宣肺平喘，利水消肿")
            expect(page.locator("#item-id textarea")).to_have_value("9010")
            outputs = page.locator("#item-outputs")
            expect(outputs).to_contain_text("PLANTED-9010")
            expect(outputs).to_contain_text("P(A) %")
            expect(page.locator("#item-responses")).to_contain_text(header("practitioner_id"))  # practitioner id
            expect(item).to_be_in_viewport(ratio=1)  # the page scrolled to the item
            page.screenshot(path=SHOTS / "explorer-item.png", full_page=True)
            browser.close()
    finally:
        demo.close()
