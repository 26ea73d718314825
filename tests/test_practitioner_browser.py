"""Practitioner mode in a real browser (Debian's chromium through Playwright, the CJK font installed):

* a practitioner signs in, confirms a licence, answers five items (one multi-answer), reloads mid-block
  and the page itself resumes at item six; every response the server sends is searched for the answers;
* the keyboard flow (A-E, 1-5, a domain, Enter) through a small block, the inline errors for a missing
  answer, difficulty or domain, the item controls leaving at the block's end, and the item-by-item review;
* a whole block by keyboard alone: the name typed and Enter to start, letters, difficulty and domains by
  their keys, Enter to submit (``-k keyboard_only``); blocks read from 1;
* pause and resume across a reload: the button shows the state the server holds, and the stored
  response's seconds and seconds paused are the time worked and the time paused;
* the study lead's console: admins only, exclude and re-include with a reason.

Screenshots go to artifacts/screenshots/practitioner-*.png."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sources import DEMO_ITEMS, demo_interactions, read_jsonl, write_platform_db, wrong_answer
from space_fixtures import (
    BROWSER,
    SHOTS,
    evaluated_model,
    hub_models,
    launch,
    local_settings,
    open_chromium,
    record_fetch_streams,
)

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.store import SQLiteStore

BLOCK = 8
RECORD_TRAFFIC = record_fetch_streams("__traffic")

pytestmark = BROWSER


@pytest.fixture(scope="module")
def multi_tree(tmp_path_factory) -> Path:
    """The demo items, each with an explanation (``EXPLAIN-<id>``, shown only in a finished block's review);
    the imported study covers all but six single- and the six multi-answer items."""
    root = tmp_path_factory.mktemp("browser-tree")
    items = [{**i, "explanation": f"EXPLAIN-{i['question_id']}：君臣佐使"} for i in read_jsonl(DEMO_ITEMS)]
    path = root / "items.jsonl"
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    unrated = {i["question_id"] for i in items[20:]}  # 6 single + 6 multi
    db = write_platform_db(root / "p.sqlite", items, [r for r in demo_interactions(items) if r[1] not in unrated])
    build([str(path)], root / "tree", str(db))
    return root / "tree"


def test_practitioner_browser_answers_reloads_and_resumes(tmp_path: Path, multi_tree: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    items = {i["id"]: i for i in load_config(str(multi_tree), "corpus").to_list()}
    store = SQLiteStore(tmp_path / "store")
    settings = local_settings(store.root, multi_tree, practice_block_size=BLOCK)
    demo, url = launch(settings, store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1300, "height": 1100})
            # every byte of every response the page fetches, streams included: gradio's queue streams each
            # event's outputs over fetch, so the page's own fetch is wrapped and each response cloned
            page.add_init_script(RECORD_TRAFFIC)

            def sign_in(confirm: bool) -> None:
                page.get_by_role("tab", name="Practitioners").click()
                page.locator("#practice-name textarea, #practice-name input").first.fill("mei")
                if confirm:
                    page.locator("#practice-licence input").check()
                    page.locator("#practice-licence-number textarea, #practice-licence-number input").first.fill(
                        "TCM-0042"
                    )
                page.locator("#practice-start").click()

            page.goto(url)
            sign_in(confirm=True)
            header = page.locator("#practice-header")
            expect(header).to_contain_text(f"item 1 of {BLOCK}", timeout=30_000)
            block = store.practice_assignments("mei")[0]["block"]
            block_items = store.practice_block_items(block)
            kinds = []
            for n in range(1, 6):
                expect(header).to_contain_text(f"item {n} of {BLOCK}", timeout=30_000)
                item = items[block_items[n - 1]]
                expect(page.locator("#practice-question")).to_contain_text(item["question"])
                kinds.append(item["answer_type"])
                group = page.locator("#practice-multi" if item["answer_type"] == "multi" else "#practice-single")
                expect(group).to_be_visible()
                for letter in item["answer"] if n != 3 else wrong_answer(item["answer"]):
                    group.get_by_text(f"{letter}. {item['options'][letter]}", exact=True).click()
                page.locator("#practice-domains").get_by_text(DOMAIN).click()
                page.locator("#practice-difficulty").get_by_text(str(1 + n % 5), exact=True).click()
                if n == 2:
                    page.locator("#practice-flag input").check()
                    page.locator("#practice-comment textarea, #practice-comment input").first.fill("選項有誤")
                page.screenshot(path=SHOTS / f"practitioner-0{n}-item{n}.png", full_page=True)
                page.locator("#practice-submit").click()
                expect(header).to_contain_text(f"item {n + 1} of {BLOCK}", timeout=30_000)
            assert "multi" in kinds, f"the block's first five items are all single-answer: {kinds}"

            page.wait_for_timeout(1000)  # the recorder reads the streams asynchronously
            bodies = [page.evaluate("window.__traffic.join('')")]
            page.reload()  # the page resumes the block by itself: no sign-in again
            page.get_by_role("tab", name="Practitioners").click()
            expect(page.locator("#practice-header")).to_contain_text(f"item 6 of {BLOCK}", timeout=30_000)
            expect(page.locator("#practice-note")).to_contain_text("resumes where you left it")
            expect(page.locator("#practice-header")).to_contain_text("5 answered")
            page.screenshot(path=SHOTS / "practitioner-06-resumed-item6.png", full_page=True)
            page.wait_for_timeout(1000)
            bodies += [page.evaluate("window.__traffic.join('')"), page.request.get(url + "config").text()]
            browser.close()
    finally:
        demo.close()
    stored = store.practice_responses(account="mei")
    assert len(stored) == 5 and [r["position"] for r in stored] == [0, 1, 2, 3, 4]
    assert sum(len(json.loads(r["selected"])) > 1 for r in stored) >= 1
    flagged = [r for r in stored if r["flagged"]]
    assert len(flagged) == 1 and flagged[0]["comment"] == "選項有誤"
    assert all(r["seconds"] is not None and r["seconds"] > 0 for r in stored)
    assert store.practitioner("mei")["licence_number"] == "TCM-0042"
    # the traffic: the server's responses carry no reference answer, no correctness, no report
    joined = "\n".join(bodies)
    assert "item 6 of" in joined and "item 2 of" in joined  # the recorded traffic holds the item screens
    assert all(items[i]["question"] in joined for i in block_items[:6])
    for word in ('"answer"', "**Answer:**", "Your accuracy", '"correct"', "TCM-0042", "EXPLAIN-", "Reference:"):
        assert word not in joined, word
    assert not re.search(r"block \d+ complete", joined, re.I)


@contextlib.contextmanager
def practice_page(tmp_path: Path, tree: Path, block: int, **changes: Any) -> Iterator[tuple[SQLiteStore, Any, Any]]:
    """The Space launched on a fresh store with one evaluated model; (store, browser, a page on the app)."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    evaluated_model(store, tree, tmp_path)
    settings = local_settings(store.root, tree, practice_block_size=block, **changes)
    demo, url = launch(settings, store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1300, "height": 1100})
            page.goto(url)
            yield store, browser, page
            browser.close()
    finally:
        demo.close()


def sign_in(page: Any, name: str, confirm: bool = True, key: str = "") -> None:
    """``name`` starts; ``key``: what the key field holds (an admin's: the operator's token)."""
    page.get_by_role("tab", name="Practitioners").click()
    page.locator("#practice-name textarea, #practice-name input").first.fill(name)
    if key:
        page.locator("#practice-key input").fill(key)
    if confirm:
        page.locator("#practice-licence input").check()
    page.locator("#practice-start").click()


DOMAIN = "J · Materia medica"  # its key and its name (the browser reads English)


def keyboard_answer(page: Any, item: dict, letters: list[str], difficulty: int, domain: bool = True) -> None:
    """Letters and difficulty by key, a domain by mouse (focus then stays on a checkbox, not a text field)."""
    for letter in letters:
        page.keyboard.press(letter.lower())
    page.keyboard.press(str(difficulty))
    if domain:
        page.locator("#practice-domains").get_by_text(DOMAIN).click()


def test_practitioner_browser_keyboard_flow_errors_and_review(tmp_path: Path, multi_tree: Path) -> None:
    from playwright.sync_api import expect

    items = {i["id"]: i for i in load_config(str(multi_tree), "corpus").to_list()}
    with practice_page(tmp_path, multi_tree, block=4) as (store, _browser, page):
        sign_in(page, "lan")
        header, error = page.locator("#practice-header"), page.locator("#practice-error")
        expect(header).to_contain_text("item 1 of 4", timeout=30_000)
        block_items = store.practice_block_items(store.practice_assignments("lan")[0]["block"])
        # the tab says how many subset items the next block would complete (Practice.next_block_completes)
        expect(page.locator("#practice-next-info")).to_contain_text("Your next block would complete")
        # the stem as plain text (no heading), the options once: in the answer buttons only
        first = items[block_items[0]]
        expect(page.locator("#practice-question")).to_contain_text(first["question"])
        assert page.locator("#practice-question h1, #practice-question h2, #practice-question h3").count() == 0
        for letter, text in first["options"].items():
            assert page.get_by_text(text, exact=False).count() >= 1
            expect(page.locator("#practice-question")).not_to_contain_text(f"{letter}. {text}")
        wrong = wrong_answer(first["answer"])
        for n, item_id in enumerate(block_items, 1):
            item = items[item_id]
            expect(header).to_contain_text(f"item {n} of 4", timeout=30_000)
            group = "#practice-multi" if item["answer_type"] == "multi" else "#practice-single"
            letters = wrong if n == 1 else list(item["answer"])
            if n == 2:  # the answer only: difficulty and domain are asked for, next to the controls
                for letter in letters:
                    page.keyboard.press(letter)
                page.keyboard.press("Enter")
                expect(error).to_contain_text("difficulty", timeout=10_000)
                expect(error).to_contain_text("domain")
                expect(error).not_to_contain_text("answer**")
                page.screenshot(path=SHOTS / "practitioner-10-missing-difficulty-domain.png", full_page=True)
                page.keyboard.press("4")
                page.keyboard.press("Enter")
                expect(error).not_to_contain_text("difficulty", timeout=10_000)
                expect(error).to_contain_text("at least one domain")
                page.locator("#practice-domains").get_by_text(DOMAIN).click()
            elif n == 3:  # difficulty and domain but no answer
                keyboard_answer(page, item, [], 2)
                page.keyboard.press("Enter")
                expect(error).to_contain_text("your answer", timeout=10_000)
                page.screenshot(path=SHOTS / "practitioner-11-missing-answer.png", full_page=True)
                for letter in letters:
                    page.keyboard.press(letter)
            else:
                keyboard_answer(page, item, letters, 1 + n % 5)
            for letter in letters:
                expect(page.locator(f"{group} input[value='{letter}'], {group} input[name='{letter}']")).to_be_checked()
            expect(page.locator("#practice-difficulty input:checked")).to_have_count(1)
            if n == 1:
                page.screenshot(path=SHOTS / "practitioner-12-keyboard-item1.png", full_page=True)
            page.keyboard.press("Enter")
            if n < 4:
                expect(header).to_contain_text(f"item {n + 1} of 4", timeout=30_000)
                expect(error).to_have_text("")
        # the block is over, its co-raters have not answered: the review waits for them (no read-ahead)
        review = page.locator("#practice-report")
        expect(review).to_contain_text("Its review opens once all its 3 raters have finished it", timeout=30_000)
        for mark in ("Reference:", "EXPLAIN-", "org/model"):
            expect(review).not_to_contain_text(mark)
        page.screenshot(path=SHOTS / "practitioner-13-review-waits.png", full_page=True)
        practice = PracticeLoader(str(multi_tree), store, block_size=4, raters=3).get()
        for co_rater in ("ann", "cy"):
            practice.confirm(co_rater, True)
            while (view := practice.current(co_rater)) is not None:
                practice.submit(
                    co_rater,
                    view.item_id,
                    wrong_answer(list(items[view.item_id]["answer"])),
                    ["other"],
                    3,
                    False,
                    "",
                    12.0,
                    0.0,
                )
        block = store.practice_assignments("lan")[0]["block"]
        assert all(store.practice_assignments(c)[0]["block"] == block for c in ("ann", "cy")), "the co-raters' block"
        # every rater finished: back on the tab, the review shows every item
        page.reload()
        sign_in(page, "lan", confirm=False)
        expect(review).to_contain_text("Item by item", timeout=30_000)
        for elem in ("#practice-submit", "#practice-pause", "#practice-difficulty", "#practice-domains"):
            expect(page.locator(elem)).to_have_count(0)
        page.keyboard.press("A")  # no item on screen: the keys do nothing
        expect(page.locator("#practice-next")).to_be_visible()
        for item_id in block_items:
            item = items[item_id]
            expect(review).to_contain_text(item["question"].strip().splitlines()[0])
            expect(review).to_contain_text(f"Reference: {', '.join(item['answer'])}")
            expect(review).to_contain_text(item["explanation"])
        expect(review).to_contain_text(f"Your answer: {', '.join(wrong)} (✗ wrong)")
        expect(review).to_contain_text("org/model:")
        page.screenshot(path=SHOTS / "practitioner-14-block-review.png", full_page=True)
    stored = store.practice_responses(account="lan")
    assert len(stored) == 4
    assert all(r["difficulty"] in range(1, 6) and json.loads(r["domains"]) for r in stored)
    assert json.loads(stored[0]["selected"]) == wrong and stored[1]["difficulty"] == 4


def test_practitioner_browser_pause_reload_resume_timing(tmp_path: Path, multi_tree: Path) -> None:
    from playwright.sync_api import expect

    items = {i["id"]: i for i in load_config(str(multi_tree), "corpus").to_list()}
    with practice_page(tmp_path, multi_tree, block=BLOCK) as (store, _browser, page):
        pause, question = page.locator("#practice-pause"), page.locator("#practice-question")
        submit, header = page.locator("#practice-submit"), page.locator("#practice-header")
        begun = time.time()
        sign_in(page, "yu")
        expect(header).to_contain_text(f"item 1 of {BLOCK}", timeout=30_000)
        block_items = store.practice_block_items(store.practice_assignments("yu")[0]["block"])
        expect(pause).to_have_text("Pause")
        page.wait_for_timeout(1200)  # working
        pause.click()
        expect(pause).to_contain_text("Resume", timeout=10_000)
        paused_from = time.time()
        expect(page.locator("#practice-paused")).to_be_visible()
        expect(question).to_have_count(0)  # hidden while paused
        expect(submit).to_be_disabled()
        page.evaluate("document.activeElement.blur()")  # Enter on the focused Pause button would resume
        page.keyboard.press("Enter")  # nothing to submit while paused
        page.keyboard.press("A")
        expect(pause).to_contain_text("Resume")
        page.screenshot(path=SHOTS / "practitioner-20-paused.png", full_page=True)
        page.wait_for_timeout(1500)
        page.reload()  # still paused after a reload: the button says so
        page.get_by_role("tab", name="Practitioners").click()
        expect(header).to_contain_text(f"item 1 of {BLOCK}", timeout=30_000)
        expect(pause).to_contain_text("Resume")
        expect(page.locator("#practice-paused")).to_be_visible()
        page.screenshot(path=SHOTS / "practitioner-21-paused-after-reload.png", full_page=True)
        page.wait_for_timeout(500)
        paused_to = time.time()
        pause.click()
        expect(pause).to_have_text("Pause", timeout=10_000)
        expect(question).to_contain_text(items[block_items[0]]["question"].strip().splitlines()[0])
        expect(submit).to_be_enabled()
        page.wait_for_timeout(1000)  # working again
        item = items[block_items[0]]
        keyboard_answer(page, item, list(item["answer"]), 3)
        page.screenshot(path=SHOTS / "practitioner-22-resumed.png", full_page=True)
        page.keyboard.press("Enter")
        expect(header).to_contain_text(f"item 2 of {BLOCK}", timeout=30_000)
        ended = time.time()
        expect(pause).to_have_text("Pause")  # a new item starts unpaused, and the button says so
        # a pause on item 2 does not leak into item 3
        pause.click()
        expect(pause).to_contain_text("Resume", timeout=10_000)
        pause.click()
        expect(pause).to_have_text("Pause", timeout=10_000)
    # seconds: the whole time on the item (shown to submitted); seconds_paused: the paused part of it
    (first,) = store.practice_responses(account="yu")
    assert first["item_id"] == block_items[0]
    paused, total = first["seconds_paused"], first["seconds"]
    assert paused >= paused_to - paused_from - 0.2, first  # the pause, the reload within it included
    assert total - paused >= 2.0, first  # 1.2 s before the pause, 1 s after it, and the answering
    assert total <= ended - begun + 0.2, first
    assert total - paused < (ended - begun) - (paused_to - paused_from) + 0.2, first


def test_practitioner_browser_console_exclude_and_reinclude(tmp_path: Path, multi_tree: Path) -> None:
    from playwright.sync_api import expect

    items = {i["id"]: i for i in load_config(str(multi_tree), "corpus").to_list()}
    token = "operator-token-0123456789abcdef"  # local mode: the admin's key is the operator's token
    with practice_page(tmp_path, multi_tree, block=4, practice_admins=("lead",), admin_token=token) as (
        store,
        browser,
        page,
    ):
        sign_in(page, "mei")
        expect(page.locator("#practice-header")).to_contain_text("item 1 of 4", timeout=30_000)
        item = items[store.practice_block_items(store.practice_assignments("mei")[0]["block"])[0]]
        keyboard_answer(page, item, list(item["answer"]), 2)
        page.locator("#practice-flag input").check()
        page.locator("#practice-comment textarea, #practice-comment input").first.fill("答案有誤 E")  # E: no pick
        page.keyboard.press("Enter")
        expect(page.locator("#practice-header")).to_contain_text("item 2 of 4", timeout=30_000)
        expect(page.locator("#practice-console")).to_have_count(0)  # a practitioner has no console
        lead = browser.new_page(viewport={"width": 1300, "height": 1300})
        lead.goto(page.url)
        lead.get_by_role("tab", name="Practitioners").click()
        expect(lead.locator("#practice-next-info")).to_contain_text(  # a visitor, before signing in
            re.compile(r"The next block would complete \d+ subset item"), timeout=30_000
        )
        expect(lead.locator("#practice-console")).to_have_count(0)
        sign_in(lead, "lead", confirm=False, key=token)
        console, note = lead.locator("#practice-console"), lead.locator("#console-note")
        expect(console).to_be_visible(timeout=30_000)
        expect(console).to_contain_text("The study lead's console")
        expect(lead.locator("#practice-note")).to_contain_text("a study lead: the console is below")
        lead.locator("#console-refresh").click()
        people = lead.locator("#console-practitioners")
        expect(people).to_contain_text("mei", timeout=10_000)
        expect(people).to_contain_text("same-answer run")
        # mei's block is open: its flags and comments wait for every rater (no read-ahead, not even the lead's)
        expect(lead.locator("#console-flagged")).not_to_contain_text("答案有誤")
        expect(lead.locator("#console-slots")).to_contain_text("holding")
        account = lead.locator("#console-account textarea, #console-account input").first
        reason = lead.locator("#console-reason textarea, #console-reason input").first
        account.fill("mei")
        lead.locator("#console-exclude").click()  # no reason: refused, said inline
        expect(note).to_contain_text("reason", timeout=10_000)
        assert not store.practitioner("mei")["excluded"]
        reason.fill("same person as another account")
        lead.locator("#console-exclude").click()
        expect(note).to_contain_text("Excluded mei", timeout=10_000)
        expect(lead.locator("#console-decisions")).to_contain_text("same person as another account")
        assert store.practitioner("mei")["excluded"]
        assert store.practitioner("mei")["excluded_reason"] == "same person as another account"
        lead.screenshot(path=SHOTS / "practitioner-30-console-excluded.png", full_page=True)
        reason.fill("cleared on review")
        lead.locator("#console-include").click()
        expect(note).to_contain_text("Re-included mei", timeout=10_000)
        expect(lead.locator("#console-decisions")).to_contain_text("cleared on review")
        assert not store.practitioner("mei")["excluded"]
        lead.screenshot(path=SHOTS / "practitioner-31-console-reincluded.png", full_page=True)
        lead.locator("#console-export").click()
        expect(note).to_contain_text("Exported", timeout=30_000)
        expect(lead.locator("#console-export-file")).to_contain_text("annotation_platform.sqlite")
    (response,) = store.practice_responses(account="mei")
    assert response["comment"] == "答案有誤 E" and response["flagged"]


def test_practitioner_browser_keyboard_only_block(tmp_path: Path, multi_tree: Path) -> None:
    """A whole block by keyboard alone, domains included: the tab and the licence by key, the name typed and
    Enter in its field to start; each item's letters (A-E), difficulty (1-5) and two domains (their letters,
    F-O, shown beside them and in the hint), Enter to submit. The Space's first block reads as block 1."""
    from playwright.sync_api import expect

    from tcmqa.leaderboard.practice_tab import DOMAIN_KEYS

    items = {i["id"]: i for i in load_config(str(multi_tree), "corpus").to_list()}
    chosen = ["materia_medica", "internal_medicine"]
    with practice_page(tmp_path, multi_tree, block=3) as (store, _browser, page):
        page.locator("#tab-practitioners-button").focus()
        page.keyboard.press("Enter")
        # the page's load has run (it fills the name field with a remembered one): typing starts after it
        expect(page.locator("#practice-next-info")).to_contain_text("next block would complete", timeout=30_000)
        page.locator("#practice-licence input").focus()
        page.keyboard.press("Space")
        page.locator("#practice-name textarea, #practice-name input").first.focus()
        page.keyboard.type("kai")
        page.keyboard.press("Enter")
        header = page.locator("#practice-header")
        expect(header).to_contain_text("Block 1 · item 1 of 3", timeout=30_000)
        expect(page.locator("#practice-keys")).to_contain_text("F–O")
        for key in chosen:
            expect(page.locator("#practice-domains")).to_contain_text(f"{DOMAIN_KEYS[key]} · ")
        block_items = store.practice_block_items(store.practice_assignments("kai")[0]["block"])
        for n, item_id in enumerate(block_items, 1):
            expect(header).to_contain_text(f"item {n} of 3", timeout=30_000)
            for letter in items[item_id]["answer"]:
                page.keyboard.press(letter.lower())
            page.keyboard.press(str(n))
            for key in chosen:
                page.keyboard.press(DOMAIN_KEYS[key].lower())
            for key in chosen:
                expect(page.locator(f"#practice-domains input[name='{key}']")).to_be_checked()
            if n == 1:
                page.screenshot(path=SHOTS / "practitioner-15-keyboard-only.png", full_page=True)
            page.keyboard.press("Enter")
        expect(page.locator("#practice-report")).to_contain_text("block 1", timeout=30_000)
    stored = store.practice_responses(account="kai")
    assert [r["item_id"] for r in stored] == block_items
    assert [json.loads(r["domains"]) for r in stored] == [chosen] * 3
    assert [r["difficulty"] for r in stored] == [1, 2, 3]
    assert all(json.loads(r["selected"]) == list(items[r["item_id"]]["answer"]) for r in stored)
