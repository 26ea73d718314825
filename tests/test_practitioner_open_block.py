"""Independence: no endpoint of the Space returns the reference answer, the explanation, another rater's
answer or a model's output for an item in an open practitioner block (the caller's among them).

The Space runs for real (local mode, SQLite, practitioner mode on, blocks of 5, 3 raters); its data is
the demo items with a distinctive explanation each (``EXPLAIN-<id>``), the imported study covering the
first 16; one evaluated model whose output on each item says ``MODEL-SAID-<id>``. Practitioner ``ann``
opens a block and answers two items; ``corater-bo`` finishes the same block (so a co-rater's answers
exist for every item of ann's open block); ``corater-cy`` answers one. Then:

* every endpoint the app declares (``demo.fns``: named and private) is listed in :data:`ENDPOINTS`,
  so a new one fails :func:`test_open_block_every_endpoint_is_listed` until it is classified;
* every endpoint the API exposes is called through gradio_client as ann and anonymously, with each
  open item as the item argument: no reply holds an explanation, a model output, ``**Answer:**``, a
  co-rater's account or a practitioner's answer row of an open item (the explorer's own reply is
  checked by structure: the question and options, the withheld note, empty tables);
* in Chromium, ann signs in on the Practitioners tab and looks every open item up in the Item
  explorer: every response the page received (``page.on("response")``, the queue's event streams read
  through the page's own fetch) is searched the same way, and so is the page's text;
* control: an item of no open block shows its answer, explanation, the study's responses and the
  model's output, through the API and in the page, so the searches are not vacuous;
* finishing the block (ann and cy answer the rest) releases the items: the explorer shows them.

Run with ``pytest -k open_block``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gradio_client import Client
from sources import DEMO_ITEMS, demo_interactions, read_jsonl, write_platform_db
from space_fixtures import (
    BROWSER,
    CHROMIUM,
    SHOTS,
    hub_models,
    launch,
    local_settings,
    open_chromium,
    record_fetch_streams,
)

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.leaderboard import formats
from tcmqa.leaderboard.explorer import WITHHELD, open_block_items
from tcmqa.leaderboard.identity import digest, new_key
from tcmqa.leaderboard.practice import PracticeLoader, ReviewWaits
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import OUTPUTS
from tcmqa.store import SQLiteStore

BLOCK, RATERS = 5, 3
ANN, BO, CY = "ann", "corater-bo", "corater-cy"
ANSWER_MARK = "**Answer:**"

# Every function the Space wires to an event, by its api_name (a private one, api_name False, by its
# function's name), and what it returns of an item. A new endpoint fails the listing test until added here.
ENDPOINTS: dict[str, str] = {
    # Item explorer (mine)
    "item": "show_item: one item; the answer, explanation, responses and outputs withheld for open-block items",
    "open_row": "open_row (private: a result row clicked): that row's item, withheld as /item withholds it",
    "browse": "show_page: a page of items (id, stem, type, domains); consensus and outcome blank for open-block "
    "items, which consensus, outcome and rated-difficulty filters leave out",
    "first_page": "first_page (private: a filter changed): page 1 of /browse",
    "previous_page": "previous_page (private): the page before, as /browse",
    "next_page": "next_page (private): the page after, as /browse",
    "refresh_choices": "refresh_choices (private, on page load): the models with outputs, the source difficulties",
    "fit_tables": "fit_tables (private, after an item page): whether each of its tables is shown; no value",
    # Board and plots: per-model aggregates and the practitioners' reference row, no item
    "board": "show_board: the leaderboard rows",
    "show_board": "show_board (private: a board filter changed): the leaderboard rows",
    "refresh_families": "refresh_families (private, on the timer): the family choices",
    "refresh_board": "refresh_board (private, on the timer): the board and its note, as board and board_note",
    "board_note": "board_note (private, with the board): why the shown rows' Subset cells are blank, by model name",
    "tab_names": "tab_names (private, on page load): the tabs' names in the caller's language",
    "plots": "show_plots: board aggregates for the plots (Figure 2, the one scale, the Subset bars) and each "
    "practitioner's ability (a pseudonym, an aggregate over finished blocks)",
    # Compare and Model tabs (tcmqa.leaderboard.tabs)
    "compare": "show_compare: two models' aggregates and the items where they differ, open-block items never listed",
    "model_page": "show_model: one model's aggregates beside the practitioners', calibration and probes; no item",
    "model_choices": "model_choices (private, on page load): the names of the models with outputs, and which board "
    "rows Compare cannot compare and why",
    "open_item": "open_item (private, a differing item clicked): that row's id for the Item explorer's box",
    # Submit and queue: no item
    "submit": "submit: a model submission's verdict and job id",
    "job": "the job's status markdown",
    "queue": "show_queue: the jobs table",
    "job_log": "show_log: the end of a job's harness log, as text",
    "upgrade": "upgrade_quick: a finished quick estimate's full evaluation queued; its verdict and job id",
    "admin_cancel": "admin_cancel: an admin cancels a job (admins only); the job's status markdown",
    "admin_requeue": "admin_requeue: an admin re-queues a FAILED job (admins only); the job's status markdown",
    "admin_withdraw": "admin_withdraw: an admin withdraws a published row (admins only); the job's status markdown",
    # The Practitioners tab: the caller's own current item without its answer; the report and the review
    # (answers, explanations, co-raters, models) only for a block the caller finished
    "practice_start": "start: sign in, confirm a licence, the caller's current item (no answer)",
    "resume": "resume (private, on page load): the caller's current item (no answer), or the finished block's review",
    "practice_submit": "submit: records the caller's answer, then the caller's next item (no answer)",
    "practice_pause": "pause: the caller's pause state",
    "heartbeat": "heartbeat (private, on a timer): the caller's pause state",
    "practice_next": "next_block: the caller's next block's first item (no answer)",
    # The study lead's console: admins only (the caller here is not one); it shows flag comments and
    # per-practitioner accuracy, so an admin is not also a rater with an open block
    "practice_console": "console: practitioners, flagged items with comments, slots, blocks, decisions (admins)",
    "practice_exclude": "exclude: a decision, then the console (admins)",
    "practice_include": "include: a decision, then the console (admins)",
    "practice_release": "release: a slot freed, then the console (admins)",
    "practice_reassign": "reassign: a slot given to an account, then the console (admins)",
    "practice_export": "export: the platform database file (admins)",
    # Fresh items (tcmqa.leaderboard.fresh_tab): a hidden item's text only to its writer and, after their blind
    # answer, its reviewers; never an exam item's answer (tests/test_fresh_space.py: -k fresh_hidden)
    "fresh_write": "write: the written item's checks at their fields; a near-copy shows the public item it copies",
    "fresh_revise": "revise: a rejected item back into review (its writer only)",
    "fresh_mine": "mine: the caller's own written items (id, state, revision)",
    "load_mine": "load_mine (private): one of the caller's rejected items with its reviewers' comments",
    "fresh_open_review": "open_review: an assigned item's stem and options; the key only after the blind answer",
    "fresh_answer": "answer: records the reviewer's blind answer, then the key and the judgement form",
    "fresh_judge": "judge: records the reviewer's judgement",
    "pool_console": "pool console: the pool's counts, items by id and state, reviewers' load (admins; no text)",
    "pool_reassign": "reassign: an open review given to another reviewer (admins)",
    # Key adjudication (tcmqa.leaderboard.adjudication_tab): the suspect list and the assignments to the study lead
    # only; an item with its published key to the reviewers it is assigned to, the evidence only after their
    # verdict; nothing to anyone else (tests/test_errata_space.py: -k adjudicat). An item of an open block is
    # never assigned.
    "adjudication_suspects": "show: the ranked suspect list with reasons and the adjudications (admins)",
    "adjudication_assign": "assign: an item to two reviewers, then the suspect list (admins)",
    "adjudication_add": "add: another reviewer on a disagreement, then the suspect list (admins)",
    "adjudication_export": "export: the decided items as an errata file (admins)",
    "adjudication_open": "open_item: an item assigned to the caller with its key; the evidence after their verdict",
    "adjudication_verdict": "save: the caller's verdict on an item assigned to them, then the evidence",
    "adjudication_mine": "load_mine: the ids of the items assigned to the caller",
}


def _endpoint_names(demo: Any) -> set[str]:
    """The name of each wired function: its api_name, or for a private one its function's name."""
    names = set()
    for fn in demo.fns.values():
        if fn.fn is None:
            continue
        names.add(fn.fn.__name__ if fn.api_visibility == "private" else str(fn.api_name))
    return names


@pytest.fixture(scope="module")
def explained_tree(tmp_path_factory) -> Path:
    """The demo items with an explanation each; the imported study (block 0, three raters) covers the first 16."""
    root = tmp_path_factory.mktemp("open-block")
    items = [{**i, "explanation": f"EXPLAIN-{i['question_id']}: 解析"} for i in read_jsonl(DEMO_ITEMS)]
    path = root / "items.jsonl"
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    rated = {i["question_id"] for i in items[:16]}
    db = write_platform_db(root / "p.sqlite", items, [r for r in demo_interactions(items) if r[1] in rated])
    build([str(path)], root / "tree", str(db))
    return root / "tree"


def _evaluated(store: SQLiteStore, tree: Path, folder: Path) -> None:
    """One finished evaluation on every item; its text on each item is MODEL-SAID-<id>."""
    corpus = load_config(str(tree), "corpus").to_list()
    rows = [
        {
            "model": "org/model",
            "item_id": item["id"],
            "answer_type": item["answer_type"],
            "generated_text": f"MODEL-SAID-{item['id']}",
            "prediction": item["answer"],
            "correct": True,
            "protocol": PROTOCOL,
            "revision": "a" * 40,
        }
        for item in corpus
    ]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), folder / "part-00000.parquet")
    store.submit("org/model", "a" * 40, PROTOCOL, "local")
    job = store.claim("w")
    assert job is not None
    row = {"model": "org/model", "origin": "evaluated", "family": "Qwen2", "params_b": 0.5, "full": 100.0}
    assert store.finish(
        job, {**row, "protocol": PROTOCOL, "coverage": 100.0, "revision": "a" * 40}, [folder / "part-00000.parquet"]
    )


def _answer(practice: Any, account: str, n: int | None = None) -> list[str]:
    """The account confirms, takes its block and answers ``n`` items (all: None), wrong on purpose
    where it can be; returns the block's items."""
    p = practice.get()
    p.confirm(account, True)
    assignment = p.assignment(account)
    assert assignment is not None
    items = p.store.practice_block_items(assignment["block"])
    answered = 0
    while n is None or answered < n:
        view = p.current(account)
        if view is None:
            break
        letters = ["A", "B"] if view.answer_type == "multi" else ["C"]
        p.submit(account, view.item_id, letters, ["other"], 3, False, "", 12.0, 0.0)
        answered += 1
    return items


@pytest.fixture(scope="module")
def space(tmp_path_factory, explained_tree: Path) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("open-block-space")
    store = SQLiteStore(root / "store")
    _evaluated(store, explained_tree, root / "outputs")
    settings = local_settings(store.root, explained_tree, practice_block_size=BLOCK, practice_raters=RATERS)
    demo, url = launch(settings, store, hub_models())
    practice = PracticeLoader(str(explained_tree), store, block_size=BLOCK, raters=RATERS)
    block_items = _answer(practice, ANN, 2)
    key = new_key()  # ann's key, as her first start would have issued it: her calls below are hers
    assert store.bind_practitioner_key(ANN, digest(key))
    assert _answer(practice, BO) == block_items, "the co-rater joins ann's block (its free slot)"
    assert _answer(practice, CY, 1) == block_items
    corpus = {i["id"]: i for i in load_config(str(explained_tree), "corpus").to_list()}
    study = {r["item_id"] for r in load_config(str(explained_tree), "responses").to_list()}
    control = next(i for i in corpus if i in study and i not in block_items)
    try:
        yield {
            "store": store,
            "url": url,
            "demo": demo,
            "practice": practice,
            "open": block_items,
            "corpus": corpus,
            "control": control,
            "key": key,
        }
    finally:
        demo.close()


def _markers(space: dict[str, Any]) -> list[str]:
    """What must never reach ann while her block is open: the explanations and model outputs of its items,
    the explorer's answer line, the co-raters' accounts."""
    marks = [ANSWER_MARK, BO, CY]
    for item_id in space["open"]:
        marks += [space["corpus"][item_id]["explanation"], f"MODEL-SAID-{item_id}"]
    return marks


def _leaks(text: str, marks: list[str]) -> list[str]:
    return [m for m in marks if m in text]


def _explorer_withholds(reply: Any, item: dict) -> None:
    text, responses, outputs = reply
    assert item["question"] in text and WITHHELD in text and ANSWER_MARK not in text
    assert all(f"**{k}.** {v}" in text for k, v in item["options"].items())
    assert not responses.get("data") and not outputs.get("data")


def test_open_block_items_are_the_open_blocks(space: dict[str, Any]) -> None:
    assert open_block_items(space["store"], RATERS) == set(space["open"])


def test_open_block_every_endpoint_is_listed(space: dict[str, Any]) -> None:
    """Every function the app wires (named or private) is classified in ENDPOINTS; an unlisted one fails."""
    names = _endpoint_names(space["demo"])
    unlisted = sorted(names - set(ENDPOINTS))
    assert not unlisted, f"classify these endpoints in ENDPOINTS (what they return of an item): {unlisted}"
    assert {"item", "board", "plots", "submit", "job", "queue"} <= names


def _sample(parameter: dict, caller: str, item_id: str, key: str) -> Any:
    """An argument for one API parameter: the caller's name and key, the item, or a neutral value of its type."""
    name = (parameter.get("parameter_name") or parameter.get("label") or "").lower()
    kind = json.dumps(parameter.get("python_type") or parameter.get("type") or "")
    if "item" in name:
        return item_id
    if name == "key":
        return key
    if name in ("name", "account", "who", "user") or "name" in name:
        return caller
    if "bool" in kind:
        return True
    if "float" in kind or "int" in kind:
        return 3
    if "List" in kind or "list" in kind or "array" in kind:
        return []
    if "Dict" in kind or "dict" in kind or "object" in kind:
        return {}
    return caller


def test_open_block_direct_api_calls(space: dict[str, Any]) -> None:
    """Every named endpoint, as ann and anonymously, with each open item: nothing of an open item comes back."""
    client = Client(space["url"], verbose=False)
    corpus, marks = space["corpus"], _markers(space)
    for item_id in space["open"]:
        _explorer_withholds(client.predict(item_id, api_name="/item"), corpus[item_id])
    endpoints = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    called = []
    for endpoint, info in endpoints.items():
        for caller in (ANN, ""):
            for item_id in space["open"]:
                key = space["key"] if caller == ANN else ""
                args = [_sample(p, caller, item_id, key) for p in info["parameters"]]
                try:
                    reply = client.predict(*args, api_name=endpoint)
                except Exception as err:  # a refusal or a bad sample argument: its message is checked too
                    reply = str(err)
                text = json.dumps(reply, ensure_ascii=False, default=str)
                assert not _leaks(text, marks), (endpoint, caller, item_id, _leaks(text, marks))
        called.append(endpoint)
    assert "/item" in called and "/board" in called and len(called) == len(endpoints)
    # the control: an item of no open block is shown in full, so the search above is not vacuous
    text, responses, outputs = client.predict(space["control"], api_name="/item")
    assert ANSWER_MARK in text and space["corpus"][space["control"]]["explanation"] in text
    assert len(responses["data"]) == 3 and any(
        f"MODEL-SAID-{space['control']}" in json.dumps(r) for r in outputs["data"]
    )


def _plain(value: Any) -> Any:
    """A reply in JSON's terms: tables in full (str() of a DataFrame would cut them), component keys named."""
    if isinstance(value, dict):
        return {str(getattr(k, "elem_id", None) or k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "to_json"):
        return value.to_json(force_ascii=False)
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def _text(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=False)


def test_open_block_every_function_in_process(space: dict[str, Any]) -> None:
    """Every wired function, private ones too (a page calls them by index, not through gradio_client), called
    as ann and anonymously with each open item: its return value holds nothing of an open item."""
    import inspect

    marks, called = _markers(space), set()
    for fn in space["demo"].fns.values():
        if fn.fn is None:
            continue
        extra = len(inspect.signature(fn.fn).parameters) - len(fn.inputs)  # the injected OAuth profile
        for caller in (ANN, ""):
            for item_id in space["open"]:
                args = []
                for component in fn.inputs:
                    elem = getattr(component, "elem_id", None) or ""
                    if elem == "practice-name":
                        args.append(caller)
                    elif elem == "practice-key":
                        args.append(space["key"] if caller == ANN else "")
                    elif elem in ("item-id", "practice-item"):
                        args.append(item_id)
                    else:
                        args.append(getattr(component, "value", None))
                try:
                    reply = fn.fn(*args, *([None] * extra))
                except Exception as err:  # a refusal: its message is searched too
                    reply = str(err)
                text = _text(reply)
                assert not _leaks(text, marks), (fn.fn.__name__, caller, item_id, _leaks(text, marks))
        called.add(fn.fn.__name__ if fn.api_visibility == "private" else str(fn.api_name))
    assert called == _endpoint_names(space["demo"])


RECORD_STREAMS = record_fetch_streams("__streams")


# the item page's tables of responses and outputs, by their headers as the page sends them (tcmqa.leaderboard.formats)
TABLE_HEADERS = tuple(f'"{formats.header(name)}"' for name in ("practitioner_id", "generated_text"))


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
def test_open_block_browser_traffic_of_a_practitioner_using_the_explorer(space: dict[str, Any]) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert BROWSER  # the browser marks, as the other browser modules
    SHOTS.mkdir(parents=True, exist_ok=True)
    corpus, marks = space["corpus"], _markers(space)
    with sync_playwright() as p:
        browser = open_chromium(p)
        page = browser.new_page(viewport={"width": 1300, "height": 1100})
        page.add_init_script(RECORD_STREAMS)
        responses: list[Any] = []
        page.on("response", lambda response: responses.append(response))
        page.goto(space["url"])
        # ann signs in on the Practitioners tab: her block is open, her next item is on screen
        page.get_by_role("tab", name="Practitioners").click()
        page.locator("#practice-name textarea, #practice-name input").first.fill(ANN)
        page.locator("#practice-key input").fill(space["key"])
        page.locator("#practice-start").click()
        expect(page.locator("#practice-header")).to_contain_text(f"of {BLOCK}", timeout=30_000)
        # and looks each item of her open block up in the Item explorer
        page.get_by_role("tab", name="Item explorer").click()
        box = page.locator("#item-id textarea, #item-id input").first
        for item_id in space["open"]:
            box.fill(item_id)
            page.locator("#item-show").click()
            expect(page.locator("#item-text")).to_contain_text(corpus[item_id]["question"], timeout=30_000)
            expect(page.locator("#item-text")).to_contain_text("withheld")
            expect(page.locator("#item-responses")).to_be_hidden()  # no row to show: the text says why
            expect(page.locator("#item-outputs")).to_be_hidden()
            shown = page.locator("body").inner_text()
            assert not _leaks(shown, marks), (item_id, _leaks(shown, marks))
        page.screenshot(path=SHOTS / "open-block-explorer-withheld.png", full_page=True)
        page.wait_for_timeout(1000)  # the recorder reads the streams asynchronously
        streamed = page.evaluate("window.__streams.join('')")
        bodies = []
        for response in responses:
            if "text/event-stream" in (response.headers.get("content-type") or ""):
                continue  # read through the page's fetch above (a stream's body is not kept by the browser)
            try:
                bodies.append(response.text())
            except Exception:  # a body the browser did not keep (a redirect, a font)
                continue
        traffic = "\n".join([streamed, *bodies])
        assert corpus[space["open"][0]]["question"] in traffic  # the recording holds the explorer's replies
        assert WITHHELD.strip("_")[:40] in traffic
        assert not _leaks(traffic, marks), _leaks(traffic, marks)
        for word in TABLE_HEADERS:
            at = traffic.find(word)
            assert at < 0, traffic[max(0, at - 300) : at + 200]
        # the control, in the same page: an item of no open block shows its answer and explanation
        box.fill(space["control"])
        page.locator("#item-show").click()
        explanation = corpus[space["control"]]["explanation"]
        expect(page.locator("#item-text")).to_contain_text(explanation, timeout=30_000)
        expect(page.locator("#item-text")).to_contain_text("Answer:")
        expect(page.locator("#item-outputs")).to_contain_text(f"MODEL-SAID-{space['control']}")
        page.screenshot(path=SHOTS / "open-block-explorer-control.png", full_page=True)
        page.wait_for_timeout(1000)
        control = page.evaluate("window.__streams.join('')")[len(streamed) :]
        assert all(word in control for word in TABLE_HEADERS)  # the recorder sees the tables it must not see above
        browser.close()


def test_open_block_review_waits_for_every_rater(space: dict[str, Any]) -> None:
    """bo answered every item of ann's block, ann and cy have not: bo's screen says the review waits and holds
    no reference, explanation, accuracy or model of the block (the block report and review refuse too); once
    ann and cy finish, bo's screen is the review. (It changes the module's state: it runs before the last.)"""
    client = Client(space["url"], verbose=False)
    marks = ["**Explanation:**", "**Reference:**", "Your accuracy", "org/model", "EXPLAIN"]
    first = client.predict(BO, "", False, "", api_name="/practice_start")
    key = first[14]  # the key bo's first start here issued (tcmqa.leaderboard.identity): its browser keeps it
    text = json.dumps(first, ensure_ascii=False)
    assert "opens once all its 3 raters have finished it (1 of 3 so far)" in text
    assert not _leaks(text, marks), _leaks(text, marks)
    practice = space["practice"].get()
    block = practice.assignment(BO)["block"]
    for call in (lambda: practice.report(BO), lambda: practice.review_rows(BO, block)):
        with pytest.raises(ReviewWaits):
            call()
    _answer(space["practice"], ANN)
    _answer(space["practice"], CY)
    text = json.dumps(client.predict(BO, key, False, "", api_name="/practice_start"), ensure_ascii=False)
    assert "Your accuracy" in text and text.count("**Explanation:**") == text.count("**Reference:**") == BLOCK


def test_open_block_released_when_every_rater_finished(space: dict[str, Any]) -> None:
    """Last (the module's state changes): ann and cy finish the block; the explorer shows its items in full,
    the co-raters' answers among them, without a restart."""
    client = Client(space["url"], verbose=False)
    _answer(space["practice"], ANN)
    _answer(space["practice"], CY)
    assert open_block_items(space["store"], RATERS) == set()
    item_id = space["open"][0]
    text, responses, outputs = client.predict(item_id, api_name="/item")
    assert ANSWER_MARK in text and space["corpus"][item_id]["explanation"] in text and WITHHELD not in text
    assert len(responses["data"]) == RATERS  # the three raters' answers, as published
    assert any(f"MODEL-SAID-{item_id}" in json.dumps(r) for r in outputs["data"])
