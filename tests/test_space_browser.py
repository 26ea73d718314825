"""A real browser (Debian's chromium through Playwright) on the launched Space: the page loads, the
board filters, a submission's status changes PENDING -> RUNNING -> FINISHED as a real worker
process (with the stand-in harness) runs it, and a partial run and a full run of one model are shown
apart; the probe and uncertainty columns (intervals, separation marks, probes chosen in the column
chooser) on a board of recorded runs. Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium
from stand_in import STAND_IN

from tcmqa.leaderboard.board import (
    COMPARABLE,
    FULL_CI,
    PARTIAL,
    SEPARATION,
    SUBSET_CI,
    UNKNOWN_DATA,
    served_fingerprint,
)
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


def _record(store: SQLiteStore, outputs: Sequence[Path] = (), **values) -> None:
    """A finished evaluation, recorded through the store's own submit/claim/finish path (as bench/space.py)."""
    store.submit(values["model"], values["revision"], PROTOCOL, "browser-test")
    job = store.claim("browser-test")
    assert job is not None and store.finish(job, {name: None for name in RESULTS} | values, list(outputs))


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
        "data_fingerprint": served_fingerprint(str(demo_tree)),
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
            # unfiltered, by Full descending: the partial run's 88.8 heads the board, labelled partial
            expect(table.get_by_test_id("cell-0-0")).to_contain_text("org/twice", timeout=30_000)
            expect(table.get_by_test_id("cell-0-1")).to_have_text(PARTIAL)
            page.screenshot(path=SHOTS / "08-board-sorted-by-full.png", full_page=True)

            page.locator("#board-search textarea").fill("org/twice")
            expect(table.get_by_text("Qwen2.5-14B-Inst.")).to_have_count(0, timeout=15_000)
            full = 5  # Model, Comparison, Origin, Family, Params (B), Full
            expect(table.get_by_test_id("cell-1-0")).to_contain_text("org/twice")
            expect(table.get_by_test_id("cell-2-0")).to_have_count(0)  # two rows, one per run
            expect(table.get_by_test_id("cell-0-1")).to_have_text(PARTIAL)
            expect(table.get_by_test_id(f"cell-0-{full}")).to_have_text("88.8")
            expect(table.get_by_test_id("cell-1-1")).to_have_text(COMPARABLE)
            expect(table.get_by_test_id(f"cell-1-{full}")).to_have_text("55.5")
            page.screenshot(path=SHOTS / "09-board-partial-apart.png", full_page=True)
            browser.close()
    finally:
        demo.close()


def test_the_board_shows_intervals_separation_marks_and_chosen_probe_columns(tmp_path: Path, demo_tree: Path) -> None:
    """Four recorded runs, three with per-item outputs: the second is separated from the first, the third is not
    separated from the second (three items differ), the fourth has no outputs recorded (as an imported row has
    none) and no mark; probe columns are chosen in the column chooser."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    ids = [f"q{i:04d}" for i in range(2000)]
    first = np.random.default_rng(0).random(len(ids)) < 0.62
    second = first & (np.arange(len(ids)) % 6 != 0)  # 1/6 of first's right items lost: separated
    third = second.copy()
    third[:3] = ~third[:3]  # three items differ: not separated
    cpu, gpu = 100 / 24, 100 / 120  # Order 1st's chance rate with 23 or 119 other orders
    memorised = {"circular": 41.2, "circular_drop": 20.8, "order_first": 3.1, "order_chance": gpu, "order_p": 2.4e-9}
    runs = [
        ("org/岐黃-7B", "qwen2", first, memorised),
        (
            "org/scholar-7b",
            "qwen2",
            second,
            {"circular": 38.6, "circular_drop": 13.2, "order_first": 0.9, "order_chance": gpu},
        ),
        ("org/scholar-7b-dpo", "qwen2", third, {"order_first": 4.5, "order_chance": cpu, "order_p": 0.61}),
        ("org/imported-3b", "llama", None, {}),
    ]
    for i, (model, family, correct, probes) in enumerate(runs):
        outputs = []
        full = 40.0 if correct is None else 100 * float(correct.mean())
        if correct is not None:
            outputs = [tmp_path / f"{i}.parquet"]
            pd.DataFrame(
                {"model": model, "item_id": ids, "correct": correct, "revision": f"{i}" * 40, "protocol": PROTOCOL}
            ).to_parquet(outputs[0])
        _record(
            store,
            outputs,
            model=model,
            origin="evaluated",
            family=family,
            params_b=7.0,
            protocol=PROTOCOL,
            engine="vllm",
            data=str(demo_tree),
            data_fingerprint=served_fingerprint(str(demo_tree)),
            n_corpus=len(ids),
            n=len(ids),
            coverage=100.0,
            revision=f"{i}" * 40,
            full=full,
            full_ci_low=full - 2.1,
            full_ci_high=full + 2.1,
            subset=full - 1,
            subset_ci_low=full - 5.3,
            subset_ci_high=full + 3.3,
            human_reference=64.0,
            delta_human=full - 65,
            **probes,
        )
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1700, "height": 900})
            page.goto(url)
            table = page.locator("#board-table")
            expect(table.get_by_text("org/岐黃-7B", exact=True)).not_to_have_count(0, timeout=30_000)
            page.get_by_label("reported", exact=True).uncheck()
            expect(table.get_by_text("Qwen2.5-14B-Inst.")).to_have_count(0, timeout=15_000)
            columns = page.locator("#board-columns")
            hidden = ["Origin", "Params (B)", "Single", "Multi", "Δ human", "LP Full", "Multi F1"]
            hidden += ["Fresh", "Fresh 95% CI", "Public − Fresh", "Gap vs human", "Gap 95% CI"]  # no pool here
            hidden += ["Ability", "Ability SE", "Passes"]  # the one scale's: tests/test_scale_space.py
            hidden += ["Quick estimate", "Key revision"]  # tests/test_quick_jobs.py, tests/test_errata_board.py
            for label in hidden:
                columns.get_by_label(label, exact=True).uncheck()
            for label in (SUBSET_CI, "Circular", "Circ. drop", "Order 1st", "Order p"):
                columns.get_by_label(label, exact=True).check()
            headers = ["Model", "Comparison", "Family", "Full", FULL_CI, SEPARATION, "Subset", SUBSET_CI]
            headers += ["Circular", "Circ. drop", "Order 1st", "Order p"]
            expect(table.get_by_role("columnheader")).to_have_count(len(headers), timeout=15_000)
            page.wait_for_timeout(2500)  # two board refreshes: a late answer to an earlier change is replaced
            for k, header in enumerate(headers):
                expect(table.get_by_test_id(f"header-{k}")).to_have_attribute("title", header)
            rows = [{h: table.get_by_test_id(f"cell-{i}-{k}") for k, h in enumerate(headers)} for i in range(4)]
            expect(rows[3]["Model"]).to_have_text("org/imported-3b")
            expect(rows[0][FULL_CI]).to_have_text(re.compile(r"^\s*\d+\.\d–\d+\.\d\s*$"))
            expect(rows[0][SEPARATION]).to_have_text("")  # the best comparable row: nothing above
            # each mark names the row it was tested against, the next better by Full
            expect(rows[1][SEPARATION]).to_have_text(re.compile(r"^\s*≠ org/岐黃-7B \(p=\d"))  # separated from it
            expect(rows[2][SEPARATION]).to_have_text(re.compile(r"^\s*≈ org/scholar-7b \(p=[\d.]+\)\s*$"))  # 3 differ
            expect(rows[3][SEPARATION]).to_have_text("")  # imported: no outputs
            expect(rows[0]["Order p"]).to_have_text(re.compile(r"e-0?9"))  # a p-value of 2.4e-9 is not 0
            expect(rows[0]["Order 1st"]).to_have_text("3.10 (chance 0.83)")  # never without its chance rate
            expect(rows[2]["Order 1st"]).to_have_text("4.50 (chance 4.17)")
            page.screenshot(path=SHOTS / "board-probes.png", full_page=True)
            browser.close()
    finally:
        demo.close()
