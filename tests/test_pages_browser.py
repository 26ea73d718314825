"""A real browser (Debian's chromium through Playwright) on the Space's empty states, Compare's offer and the
plots, on test_space_pages' tree (a model evaluated here on the items no practitioner rated, a model's
outputs published with the data): the model page that has no subset item says why and shows no empty table
or blank plot; the board says why that row's Subset is blank; the item page says why it has no practitioners'
answers; Compare says before any click which rows it cannot compare and why, then sets the evaluated row
beside the published one; the plots keep the rows evaluated here off the paper's axes, the Subset chart tall
enough for its labels. Screenshots: artifacts/screenshots/pages-*.png."""

from __future__ import annotations

from pathlib import Path

from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium
from test_analysis_browser import _choose
from test_space_pages import NEW, PUBLISHED, pages_tree, record_unrated

from tcmqa.leaderboard.compare import PAPER_ROWS
from tcmqa.store import SQLiteStore

pytestmark = BROWSER


def test_pages_empty_states_compare_offer_and_plots(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    tree, scored = pages_tree(tmp_path)
    store = SQLiteStore(tmp_path / "store")
    unrated = record_unrated(store, tmp_path / "parts", tree, scored)
    demo, url = launch(local_settings(store.root, tree, refresh_s=30), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            note = page.locator("#board-note")
            share = 100 * len(unrated) / len(scored)
            expect(note).to_contain_text(f"{NEW} (partial run, {share:.0f}% of the items)", timeout=30_000)
            expect(note).to_contain_text("the subset grows as practitioners answer")
            page.screenshot(path=SHOTS / "pages-board-note.png", full_page=True)

            page.get_by_role("tab", name="Model").click()
            for part in ("model-domains", "model-domain-plot", "model-calibration", "model-probes"):
                expect(page.locator(f"#{part}")).to_be_hidden()  # nothing chosen: nothing empty shown
            _choose(page, "model-select", NEW)
            summary = page.locator("#model-summary")
            expect(summary).to_contain_text("this model's items are not in the practitioners' subset", timeout=30_000)
            expect(summary).to_contain_text("the subset grows as practitioners answer")
            for part in ("domains", "domain-plot", "difficulty", "difficulty-plot", "consensus", "consensus-plot"):
                expect(page.locator(f"#model-{part}")).to_be_hidden()
            expect(page.locator("#model-calibration")).to_be_hidden()
            page.screenshot(path=SHOTS / "pages-model-no-subset.png", full_page=True)
            _choose(page, "model-select", PUBLISHED)  # on the subset items: the tables and figures come back
            expect(page.locator("#model-domain-plot img")).to_be_visible(timeout=30_000)
            expect(page.locator("#model-consensus")).to_be_visible()

            page.get_by_role("tab", name="Compare").click()
            offer = page.locator("#compare-offer")  # before any click
            expect(offer).to_contain_text(f"{NEW} (evaluated here)", timeout=30_000)
            expect(offer).to_contain_text(f"{PUBLISHED} (published outputs)")
            expect(offer).to_contain_text("Rows that cannot be compared")
            expect(offer).to_contain_text("Gemma-2-2B-It")
            expect(offer).to_contain_text(PAPER_ROWS)
            for table in ("outcomes", "types", "domains", "items"):
                expect(page.locator(f"#compare-{table}")).to_be_hidden()
            _choose(page, "compare-a", NEW)
            _choose(page, "compare-b", PUBLISHED)
            page.locator("#compare-run").click()
            expect(page.locator("#compare-summary")).to_contain_text(f"{len(unrated)} common items", timeout=30_000)
            expect(page.locator("#compare-outcomes")).to_be_visible()
            page.screenshot(path=SHOTS / "pages-compare.png", full_page=True)

            page.get_by_role("tab", name="Item explorer").click()
            page.locator("#item-id input, #item-id textarea").first.fill(unrated[0]["id"])
            page.locator("#item-show").click()
            expect(page.locator("#item-text")).to_contain_text("Practitioners' answers: none yet", timeout=30_000)
            expect(page.locator("#item-responses")).to_be_hidden()
            expect(page.locator("#item-outputs")).to_be_visible()
            page.screenshot(path=SHOTS / "pages-item-no-answers.png", full_page=True)

            page.get_by_role("tab", name="Plots").click()
            expect(page.locator("#plots-figure2 img")).to_be_visible(timeout=30_000)
            bars = page.locator("#plots-subset img")
            expect(bars).to_be_visible()
            assert bars.bounding_box()["height"] > 400  # type: ignore[index]  # not a 50-pixel strip
            expect(page.locator("#plots-note")).to_contain_text(f"{NEW} (partial)")
            page.screenshot(path=SHOTS / "pages-plots.png", full_page=True)
            browser.close()
    finally:
        demo.close()
