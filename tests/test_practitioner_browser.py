"""Practitioner mode in a real browser (Debian's chromium through Playwright): a practitioner signs in,
confirms a licence, answers five items (one multi-answer), reloads mid-block and resumes at item six.
Every response the server sends is recorded and searched for the reference answers. Screenshots go to
artifacts/screenshots/practitioner-*.png."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sources import DEMO_ITEMS, demo_interactions, read_jsonl, write_platform_db
from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.store import SQLiteStore

BLOCK = 8
RECORD_TRAFFIC = """
window.__traffic = [];
const originalFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await originalFetch(...args);
  try {
    const reader = response.clone().body.getReader();
    const decoder = new TextDecoder();
    (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        window.__traffic.push(decoder.decode(value, { stream: true }));
      }
    })();
  } catch (e) {}
  return response;
};
"""

pytestmark = BROWSER


@pytest.fixture(scope="module")
def multi_tree(tmp_path_factory) -> Path:
    """The demo items; the imported study covers all but six single- and the six multi-answer items."""
    items = read_jsonl(DEMO_ITEMS)
    unrated = {i["question_id"] for i in items[20:]}  # 6 single + 6 multi
    root = tmp_path_factory.mktemp("browser-tree")
    db = write_platform_db(root / "p.sqlite", items, [r for r in demo_interactions(items) if r[1] not in unrated])
    build([str(DEMO_ITEMS)], root / "tree", str(db))
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
                for letter in item["answer"] if n != 3 else ["E" if item["answer"] != ["E"] else "A"]:
                    group.get_by_text(f"{letter}. {item['options'][letter]}", exact=True).click()
                page.locator("#practice-domains").get_by_text("中藥本草學 (materia_medica)").click()
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
            page.reload()
            sign_in(confirm=False)
            expect(page.locator("#practice-header")).to_contain_text(f"item 6 of {BLOCK}", timeout=30_000)
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
    for word in ('"answer"', "**Answer:**", "Your accuracy", '"correct"', "TCM-0042"):
        assert word not in joined, word
    assert not re.search(r"block \d+ complete", joined, re.I)
