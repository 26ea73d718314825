"""Fresh items in a real browser (Debian's Chromium through Playwright, the CJK font installed), with the
screenshots the issue asks for under artifacts/screenshots/fresh-*.png:

* a practitioner writes an item: the checks' messages at their fields, then a near-duplicate of a public item
  refused with that item shown, then an item stored in review;
* a reviewer answers it blind (no key on the page), then sees the key and the explanation and the judgement;
* the study lead's console shows the pool by id and state, and no item text;
* the board shows Fresh and Public − Fresh beside Full.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fresh_items import accept
from playwright.sync_api import Page, expect
from space_fixtures import BROWSER, SHOTS, evaluated_model, hub_models, launch, local_settings, open_chromium
from test_fresh_space import EXPLANATION, KEY, OPTIONS, STEM, TOKEN

from tcmqa.leaderboard import board as board_lib
from tcmqa.store import SQLiteStore

pytestmark = BROWSER
LEAD, WRITER, REVIEWERS = "lead", "wen-writer", ("li-reviewer", "ma-reviewer")


def sign_in(page: Page, url: str, name: str, key: str = "", licence: bool = True) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Practitioners").click()
    page.locator("#practice-name textarea, #practice-name input").first.fill(name)
    if key:
        page.locator("#practice-key input, #practice-key textarea").first.fill(key)
    if licence:
        page.locator("#practice-licence input").check()
    page.locator("#practice-start").click()
    expect(page.locator("#practice-note")).to_contain_text("Signed in", timeout=30_000)


def fill(page: Page, elem: str, text: str) -> None:
    page.locator(f"#{elem} textarea, #{elem} input").first.fill(text)


def test_fresh_browser_write_review_console_board(tmp_path: Path, demo_tree: Path, demo_items: list[dict],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(board_lib, "MIN_POOL", 3)
    store = SQLiteStore(tmp_path / "store")
    settings = local_settings(store.root, demo_tree, practice_block_size=5, practice_admins=(LEAD,))
    settings = settings.__class__(**{**settings.__dict__, "admin_token": TOKEN})
    demo, url = launch(settings, store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            size = {"width": 1300, "height": 1000}
            writer, reviewer = (browser.new_context(viewport=size).new_page() for _ in range(2))
            lead = browser.new_context(viewport={"width": 3000, "height": 1000}).new_page()  # the board's columns
            sign_in(reviewer, url, REVIEWERS[0])
            second = browser.new_context(viewport=size).new_page()
            sign_in(second, url, REVIEWERS[1])
            sign_in(writer, url, WRITER)
            # writing: two checks fail at their fields
            writer.get_by_text("Write a fresh item").click()
            fill(writer, "fresh-stem", STEM)
            for letter, text in zip("abcde", [OPTIONS[0], OPTIONS[0], *OPTIONS[2:]], strict=True):
                fill(writer, f"fresh-option-{letter}", text)
            fill(writer, "fresh-explanation", EXPLANATION)
            writer.locator("#fresh-domains").get_by_text("Internal medicine").click()
            writer.locator("#fresh-difficulty").get_by_text("3", exact=True).click()
            writer.locator("#fresh-submit").click()
            expect(writer.locator("#fresh-error-option-b")).to_contain_text("repeats option A", timeout=30_000)
            expect(writer.locator("#fresh-error-answer")).to_contain_text("letters A to E")
            expect(writer.locator("#fresh-error-own-work")).to_contain_text("own work")
            writer.locator("#fresh-write").screenshot(path=SHOTS / "fresh-01-write-errors.png")
            # a public item with two options swapped: refused, the public item shown
            public = demo_items[1]
            fill(writer, "fresh-stem", public["question"] + "？")
            swapped = [public["choices"][k] for k in "BACDE"]
            for letter, text in zip("abcde", swapped, strict=True):
                fill(writer, f"fresh-option-{letter}", text)
            writer.locator("#fresh-key").get_by_text("B", exact=True).click()
            writer.locator("#fresh-own-work input").check()
            writer.locator("#fresh-submit").click()
            expect(writer.locator("#fresh-duplicate")).to_contain_text("similarity", timeout=30_000)
            writer.locator("#fresh-write").screenshot(path=SHOTS / "fresh-02-write-duplicate.png")
            # the item itself: stored in review
            fill(writer, "fresh-stem", STEM)
            for letter, text in zip("abcde", OPTIONS, strict=True):
                fill(writer, f"fresh-option-{letter}", text)
            writer.locator("#fresh-key").get_by_text("B", exact=True).click()  # untick B
            for letter in KEY:
                writer.locator("#fresh-key").get_by_text(letter, exact=True).click()
            writer.locator("#fresh-own-work input").check()
            writer.locator("#fresh-submit").click()
            expect(writer.locator("#fresh-note")).to_contain_text("is in review", timeout=30_000)
            expect(writer.locator("#fresh-error-option-b")).to_be_empty()
            # the blind review: the stem and options, no key; then the key, the explanation and the judgement
            reviewer.get_by_text("Review fresh items").click()
            reviewer.locator("#fresh-open").click()
            expect(reviewer.locator("#fresh-review-question")).to_contain_text(STEM[:12], timeout=30_000)
            expect(reviewer.locator("#fresh-judge-box")).to_be_hidden()
            assert EXPLANATION[:8] not in reviewer.content()
            multi = reviewer.locator("#fresh-review-multi")
            for letter in ("C", "D"):
                multi.get_by_text(f"{letter}. {OPTIONS['ABCDE'.index(letter)]}", exact=True).click()
            reviewer.locator("#fresh-review-difficulty").get_by_text("2", exact=True).click()
            reviewer.locator("#fresh-review").screenshot(path=SHOTS / "fresh-03-blind-review.png")
            reviewer.locator("#fresh-answer").click()
            expect(reviewer.locator("#fresh-revealed")).to_contain_text("Key: C, D, E", timeout=30_000)
            expect(reviewer.locator("#fresh-judge-box")).to_be_visible()
            reviewer.locator("#fresh-holds").get_by_text("The item is clear").click()
            reviewer.locator("#fresh-problems").get_by_text("Unclear options").click()
            fill(reviewer, "fresh-comment", "选项 C 与 E 含义相近，请区分。")
            reviewer.locator("#fresh-review").screenshot(path=SHOTS / "fresh-04-judgement.png")
            # the console's pool, and the board (three accepted items and two evaluated rows)
            accept(store, [{"question": f"第{k}题：何者为是（测试）", "options": {x: f"选{x}{k}号" for x in "ABCDE"},
                            "answer": ["A"]} for k in range(3)])  # fmt: skip
            version = store.fresh_pool_version()
            for model, fresh, marked in (("org/clean", 48.0, False), ("org/memoriser", 20.0, True)):
                (tmp_path / model).mkdir(parents=True)
                evaluated_model(
                    store, demo_tree, tmp_path / model, model=model, full=50.0, fresh=fresh,
                    fresh_ci_low=fresh - 12, fresh_ci_high=fresh + 12, n_fresh=3, pool_version=version,
                    public_minus_fresh=50.0 - fresh, fresh_gap=30.0 - fresh, fresh_gap_low=25.0 - fresh,
                    fresh_gap_high=35.0 - fresh, fresh_gap_marked=marked,
                )  # fmt: skip
            sign_in(lead, url, LEAD, TOKEN, licence=False)
            lead.locator("#pool-refresh").click()
            expect(lead.locator("#pool-items")).to_contain_text("fresh-00001", timeout=30_000)
            assert STEM[:8] not in lead.content()
            lead.locator("#pool-summary").scroll_into_view_if_needed()
            lead.locator("#pool-console").screenshot(path=SHOTS / "fresh-05-console-pool.png")
            lead.get_by_role("tab", name="Board").click()
            table = lead.locator("#board-table")
            expect(table).to_contain_text("org/memoriser", timeout=30_000)
            expect(table).to_contain_text("n=3")
            # the fresh columns are right of the answer types: scrolled into view (Model stays pinned)
            lead.evaluate(
                "() => document.querySelectorAll('#board-table *').forEach(e => {"
                " if (e.scrollWidth > e.clientWidth + 10) e.scrollLeft = e.scrollWidth; })"
            )
            table.screenshot(path=SHOTS / "fresh-06-board.png")
            browser.close()
    finally:
        demo.close()
