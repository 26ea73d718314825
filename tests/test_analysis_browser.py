"""A real browser (Debian's chromium through Playwright) on the launched Space's Compare, Model and Plots
tabs: two recorded models compared (the 2x2 table, McNemar and κ, the differing items with their Chinese
stems; a clicked item opens in the Item explorer), one model's page with its tables and figures, and the
Plots tab's Figure 2. Screenshots: artifacts/screenshots/compare.png, model-page.png, plots-figure2.png."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium
from test_compare import record_run

from tcmqa.data import load_config
from tcmqa.leaderboard.board import served_fingerprint
from tcmqa.schema import DOMAIN_NAMES
from tcmqa.store import SQLiteStore

pytestmark = BROWSER


def _choose(page, dropdown: str, value: str) -> None:
    """Pick ``value`` in the gradio dropdown with elem_id ``dropdown`` (its own list of options)."""
    from playwright.sync_api import expect

    box = page.locator(f"#{dropdown}")
    box.locator("input").click()
    box.get_by_role("option", name=value, exact=True).click()
    expect(box.locator("input")).to_have_value(value)


def test_compare_model_and_plots_tabs(tmp_path: Path, sample_tree: Path) -> None:
    """On the real sample (4,100 items, its practitioner subset): org/a-7b right on a random 60% of the
    items, org/b-3b on another random 40%."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    corpus = load_config(str(sample_tree), "corpus").to_list()
    comparable = {"data_fingerprint": served_fingerprint(str(sample_tree)), "human_reference": 40.0}
    draws = np.random.default_rng(7).random((2, len(corpus)))
    a_right = {i["id"] for i, u in zip(corpus, draws[0]) if u < 0.6}
    b_right = {i["id"] for i, u in zip(corpus, draws[1]) if u < 0.4}
    record_run(store, tmp_path / "a", "org/a-7b", corpus, a_right, params_b=7.0, full=60.0, **comparable)
    probed = {"ece": 3.5, "acc_top10": 90.0, "circular": 40.0, "recall_std": 2.5}
    record_run(store, tmp_path / "b", "org/b-3b", corpus, b_right, params_b=3.0, full=40.0, **comparable, **probed)
    # the outcomes worked out here (a prediction of E is right where the answer is E), on the scored items
    scored = [i for i in corpus if not i["flagged"]]
    right = {
        i["id"]: (i["id"] in a_right or i["answer"] == ["E"], i["id"] in b_right or i["answer"] == ["E"])
        for i in scored
    }
    both = sum(a and b for a, b in right.values())
    b_only = sorted(i for i, (a, b) in right.items() if b and not a)
    first_b_only = next(i for i in scored if i["id"] == b_only[0])
    demo, url = launch(local_settings(store.root, sample_tree), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.get_by_role("tab", name="Compare").click()
            _choose(page, "compare-a", "org/a-7b")
            _choose(page, "compare-b", "org/b-3b")
            page.locator("#compare-run").click()
            summary = page.locator("#compare-summary")
            expect(summary).to_contain_text(f"{len(scored):,} common items", timeout=30_000)
            expect(summary).to_contain_text(f"B only {len(b_only):,}")
            expect(summary).to_contain_text("Cohen's κ")
            expect(page.locator("#compare-outcomes").get_by_test_id("cell-0-1")).to_have_text(str(both))
            expect(page.locator("#compare-domains")).to_contain_text("Diagnosis and patterns")  # by name
            items = page.locator("#compare-items")
            expect(items.get_by_test_id("cell-0-1")).to_have_text("A")
            page.screenshot(path=SHOTS / "compare.png", full_page=True)
            # only the items B got right; the first one clicked opens in the Item explorer
            page.locator("#compare-which").get_by_text("B right, A wrong").click()
            expect(page.locator("#compare-note")).to_contain_text(
                f"{len(b_only):,} items where B right", timeout=30_000
            )
            expect(items.get_by_test_id("cell-0-0")).to_have_text(first_b_only["id"])
            expect(items.get_by_test_id("cell-0-1")).to_have_text("B")
            expect(items).to_contain_text(first_b_only["question"][:8])  # the Chinese stem
            page.screenshot(path=SHOTS / "compare-b-right.png", full_page=True)
            items.get_by_test_id("cell-0-2").click()
            expect(page.locator("#item-text")).to_contain_text(first_b_only["question"], timeout=30_000)
            expect(page.locator("#item-text")).to_contain_text("Answer:")

            page.get_by_role("tab", name="Model").click()
            _choose(page, "model-select", "org/b-3b")
            expect(page.locator("#model-summary")).to_contain_text("in the practitioners' subset", timeout=30_000)
            # the domain by its name in the page's language (English outside a request), not its key
            expect(page.locator("#model-domains")).to_contain_text(DOMAIN_NAMES["diagnosis_patterns"]["en"])
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
