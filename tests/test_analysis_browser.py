"""A real browser (Debian's chromium through Playwright) on the launched Space's Compare, Model and Plots
tabs: two recorded models compared (the 2x2 table, McNemar and κ, the differing items with their Chinese
stems; a clicked item opens in the Item explorer), one model's page with its tables and figures, and the
Plots tab's Figure 2. Screenshots: artifacts/screenshots/compare.png, model-page.png, plots-figure2.png."""

from __future__ import annotations

from pathlib import Path

from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium
from test_compare import record_run

from tcmqa.data import load_config
from tcmqa.leaderboard.board import served_fingerprint
from tcmqa.store import SQLiteStore

pytestmark = BROWSER


def _choose(page, dropdown: str, value: str) -> None:
    """Pick ``value`` in the gradio dropdown with elem_id ``dropdown`` (its own list of options)."""
    from playwright.sync_api import expect

    box = page.locator(f"#{dropdown}")
    box.locator("input").click()
    box.get_by_role("option", name=value, exact=True).click()
    expect(box.locator("input")).to_have_value(value)


def test_compare_model_and_plots_tabs(tmp_path: Path, demo_tree: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    corpus = load_config(str(demo_tree), "corpus").to_list()
    comparable = {"data_fingerprint": served_fingerprint(str(demo_tree)), "human_reference": 72.0}
    ids = [i["id"] for i in corpus]
    b_right = set(ids[::2])  # org/b-3b right on every other item, org/a-7b on every item
    record_run(store, tmp_path / "a", "org/a-7b", corpus, set(ids), params_b=7.0, full=100.0, **comparable)
    probed = {"ece": 3.5, "acc_top10": 90.0, "circular": 40.0, "recall_std": 2.5}
    record_run(store, tmp_path / "b", "org/b-3b", corpus, b_right, params_b=3.0, full=50.0, **comparable, **probed)
    # the list's first row: A right and B wrong, lowest id first (B's E is right where the answer is E)
    differing = min((i for i in corpus if i["id"] not in b_right and i["answer"] != ["E"]), key=lambda i: i["id"])
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.get_by_role("tab", name="Compare").click()
            _choose(page, "compare-a", "org/a-7b")
            _choose(page, "compare-b", "org/b-3b")
            page.locator("#compare-run").click()
            expect(page.locator("#compare-summary")).to_contain_text("McNemar", timeout=30_000)
            expect(page.locator("#compare-summary")).to_contain_text("Cohen's κ")
            expect(page.locator("#compare-outcomes")).to_contain_text("A right")
            expect(page.locator("#compare-domains")).to_contain_text("foundational_theory")
            items = page.locator("#compare-items")
            expect(items).to_contain_text(differing["question"][:10])  # the Chinese stem
            page.screenshot(path=SHOTS / "compare.png", full_page=True)
            # a differing item clicked opens in the Item explorer
            expect(items.get_by_test_id("cell-0-0")).to_have_text(differing["id"])
            items.get_by_test_id("cell-0-2").click()
            expect(page.locator("#item-text")).to_contain_text(differing["question"], timeout=30_000)
            expect(page.locator("#item-text")).to_contain_text("Answer:")

            page.get_by_role("tab", name="Model").click()
            _choose(page, "model-select", "org/b-3b")
            expect(page.locator("#model-summary")).to_contain_text("in the practitioners' subset", timeout=30_000)
            expect(page.locator("#model-domains")).to_contain_text("中醫基礎理論")
            expect(page.locator("#model-calibration")).to_contain_text("ECE")
            expect(page.locator("#model-probes")).to_contain_text("Circular")
            for plot in ("model-domain-plot", "model-difficulty-plot", "model-consensus-plot"):
                expect(page.locator(f"#{plot} img")).to_be_visible(timeout=30_000)
            page.screenshot(path=SHOTS / "model-page.png", full_page=True)

            page.get_by_role("tab", name="Plots").click()
            expect(page.locator("#plots-figure2 img")).to_be_visible(timeout=30_000)
            page.screenshot(path=SHOTS / "plots-figure2.png", full_page=True)
            browser.close()
    finally:
        demo.close()
