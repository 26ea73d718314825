"""The Space in Simplified Chinese, Traditional Chinese and English (tcmqa.leaderboard.lang, gradio's own i18n):

* which locale a page gets: ``?lang=`` first, then the browser's languages (``zh-HK`` reads Traditional,
  ``zh`` Simplified, anything else English), one rule for the page's script and the handlers;
* in a real browser: the tabs and labels in the browser's language by default, the header's selector
  switching it (the address keeps it), and what the handlers render (the domains' names) in the same one;
* every text has all three languages, and no domain is shown by its key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from space_fixtures import BROWSER, hub_models, launch, local_settings, open_chromium

from tcmqa.leaderboard import lang
from tcmqa.schema import DOMAIN_NAMES, DOMAINS
from tcmqa.store import SQLiteStore


@pytest.mark.parametrize(
    ("asked", "accept", "locale"),
    [
        (None, "zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),
        (None, "zh-HK,en;q=0.5", "zh-TW"),
        (None, "zh-Hant-TW", "zh-TW"),
        (None, "zh", "zh-CN"),
        (None, "fr-FR,de;q=0.9", "en"),
        (None, "fr-FR,zh-TW;q=0.4,en;q=0.3", "zh-TW"),  # the first language the Space has, by preference
        (None, "en;q=0.2,zh-CN;q=0.8", "zh-CN"),
        (None, None, "en"),
        ("zh-TW", "zh-CN", "zh-TW"),  # the address wins over the browser
        ("klingon", "zh-CN", "zh-CN"),
    ],
)
def test_space_languages_choose(asked: str | None, accept: str | None, locale: str) -> None:
    assert lang.choose(asked, accept) == locale


def test_space_languages_every_text_in_three() -> None:
    for key, texts in lang.STRINGS.items():
        assert len(texts) == len(lang.LOCALES) and all(s.strip() for s in texts), key
    for key, names in DOMAIN_NAMES.items():
        assert set(names) == set(lang.LOCALES) and key not in names.values()
        assert lang.domain(key, "zh-TW") == DOMAINS[key]  # the paper's labels are the Traditional names
    assert lang.domain("materia_medica", "zh-CN") == "中药本草学"
    assert lang.domain("materia_medica", "en") == "Materia medica"


@BROWSER[0]
@BROWSER[1]
def test_space_languages_browser(tmp_path: Path, demo_tree: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    store = SQLiteStore(tmp_path / "store")
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    tabs = {
        "en": ("Board", "Item explorer", "Practitioners"),
        "zh-CN": ("排行榜", "试题浏览", "中医师作答"),
        "zh-TW": ("排行榜", "試題瀏覽", "中醫師作答"),
    }
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            for browser_locale, locale in (("zh-CN", "zh-CN"), ("zh-HK", "zh-TW"), ("en-US", "en")):
                page = browser.new_context(locale=browser_locale).new_page()
                page.goto(url)
                for name in tabs[locale]:
                    expect(page.get_by_role("tab", name=name, exact=True)).to_be_visible(timeout=30_000)
                expect(page.locator(f"#language input[value='{locale}']")).to_be_checked()
                page.close()
            # the selector: the page again in the chosen language, kept in the address
            page = browser.new_context(locale="en-US").new_page()
            page.goto(url)
            expect(page.get_by_role("tab", name="Item explorer", exact=True)).to_be_visible(timeout=30_000)
            page.locator("#language").get_by_text("简体中文").click()
            page.wait_for_url("**lang=zh-CN**", timeout=30_000)
            expect(page.get_by_role("tab", name="试题浏览", exact=True)).to_be_visible(timeout=30_000)
            # what a handler renders follows: the explorer's domains by their Simplified names, no keys
            page.get_by_role("tab", name="试题浏览", exact=True).click()
            results = page.locator("#explorer-results")
            expect(results).to_contain_text("中药本草学", timeout=30_000)
            for key in DOMAINS:
                expect(results).not_to_contain_text(key)
            browser.close()
    finally:
        demo.close()
