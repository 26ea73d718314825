"""A real browser (Debian's chromium through Playwright) on the launched Space: the page loads, the
board filters, a submission's status changes PENDING -> RUNNING -> FINISHED as a real worker
process (with the stand-in harness) runs it, and a partial run and a full run of one model are shown
apart. Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium
from stand_in import STAND_IN

from tcmqa.leaderboard.board import COMPARABLE, PARTIAL, UNKNOWN_DATA
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import RESULTS
from tcmqa.store import SQLiteStore

pytestmark = BROWSER


def test_board_filters_and_submission_status(tmp_path: Path, demo_tree: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tcmqa",
            "worker",
            "--store",
            str(store.root),
            "--data",
            str(demo_tree),
            "--runs",
            str(tmp_path / "runs"),
            "--heartbeat-s",
            "0.5",
            "--poll-s",
            "0.5",
            "--command",
            f"{{python}} {script} --model {{model}} --data {{data}} --out {{out}}",
        ],
        env={
            **os.environ,
            "STAND_IN_STARTS": str(tmp_path / "starts.txt"),
            "STAND_IN_STEPS": "10",
            "STAND_IN_SLEEP": "0.6",
        },
    )
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            table = page.locator("#board-table")
            expect(table.get_by_text("Qwen2.5-14B-Inst.")).to_be_visible(timeout=30_000)
            expect(table.get_by_text("Licensed practitioners (majority vote)")).to_be_attached()  # below the fold
            page.screenshot(path=SHOTS / "01-board.png", full_page=True)

            page.locator("#board-search textarea").fill("gemma-3")
            expect(table.get_by_text("Qwen2.5-14B-Inst.")).to_have_count(0, timeout=15_000)
            expect(table.get_by_text("Gemma-3-12B-It")).to_be_visible()
            page.screenshot(path=SHOTS / "02-board-filtered.png", full_page=True)

            page.get_by_role("tab", name="Submit").click()
            page.locator("#submit-model textarea").fill("org/good")
            page.locator("#submit-button").click()
            feedback = page.locator("#submit-feedback")
            expect(feedback).to_contain_text("Queued org/good", timeout=15_000)
            status = page.locator("#submit-status")
            expect(status).to_contain_text(re.compile("PENDING|RUNNING"), timeout=15_000)
            page.screenshot(path=SHOTS / "03-submitted.png", full_page=True)
            expect(status).to_contain_text("RUNNING", timeout=30_000)
            expect(status).to_contain_text("items", timeout=30_000)
            page.screenshot(path=SHOTS / "04-running.png", full_page=True)
            expect(status).to_contain_text("FINISHED", timeout=60_000)
            page.screenshot(path=SHOTS / "05-finished.png", full_page=True)

            page.get_by_role("tab", name="Board").click()
            page.locator("#board-search textarea").fill("org/good")
            expect(table.get_by_test_id("cell-0-0")).to_contain_text("org/good", timeout=30_000)
            expect(table.get_by_test_id("cell-0-1")).to_contain_text(UNKNOWN_DATA)  # the stand-in names no data
            expect(table.get_by_test_id("cell-0-2")).to_contain_text("evaluated")
            page.screenshot(path=SHOTS / "06-board-new-row.png", full_page=True)

            page.get_by_role("tab", name="Plots").click()
            page.wait_for_timeout(3000)
            page.screenshot(path=SHOTS / "07-plots.png", full_page=True)
            browser.close()
    finally:
        worker.kill()
        worker.wait()
        demo.close()


def _record(store: SQLiteStore, **values) -> None:
    """A finished evaluation, recorded through the store's own submit/claim/finish path (as bench/space.py)."""
    store.submit(values["model"], values["revision"], PROTOCOL, "browser-test")
    job = store.claim("browser-test")
    assert job is not None and store.finish(job, {name: None for name in RESULTS} | values, [])


def test_a_partial_run_and_a_full_run_of_one_model_are_shown_apart(tmp_path: Path, demo_tree: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    common = {
        "model": "org/twice",
        "origin": "evaluated",
        "family": "qwen2",
        "params_b": 0.5,
        "protocol": PROTOCOL,
        "engine": "vllm",
        "data": str(demo_tree),
        "data_fingerprint": "f" * 16,
        "n_corpus": 1000,
        "human_reference": 70.0,
    }
    _record(store, **common, revision="1" * 40, full=55.5, n=1000, coverage=100.0)
    _record(store, **common, revision="2" * 40, full=88.8, n=50, coverage=5.0)  # --limit 50
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            table = page.locator("#board-table")
            # unfiltered: the comparable full run heads the board though the partial run scored higher
            expect(table.get_by_test_id("cell-0-0")).to_contain_text("org/twice", timeout=30_000)
            expect(table.get_by_test_id("cell-0-1")).to_have_text(COMPARABLE)
            page.screenshot(path=SHOTS / "08-board-comparable-first.png", full_page=True)

            page.locator("#board-search textarea").fill("org/twice")
            expect(table.get_by_text("Qwen2.5-14B-Inst.")).to_have_count(0, timeout=15_000)
            full = 5  # Model, Comparison, Origin, Family, Params (B), Full
            expect(table.get_by_test_id("cell-1-0")).to_contain_text("org/twice")
            expect(table.get_by_test_id("cell-2-0")).to_have_count(0)  # two rows, one per run
            expect(table.get_by_test_id("cell-0-1")).to_have_text(COMPARABLE)
            expect(table.get_by_test_id(f"cell-0-{full}")).to_have_text("55.5")
            expect(table.get_by_test_id("cell-1-1")).to_have_text(PARTIAL)
            expect(table.get_by_test_id(f"cell-1-{full}")).to_have_text("88.8")
            page.screenshot(path=SHOTS / "09-board-partial-apart.png", full_page=True)
            browser.close()
    finally:
        demo.close()
