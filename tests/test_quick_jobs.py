"""Quick jobs: the anchor items only, an estimate of Full with its measured error, shown apart from full rows.

The job kind through the store and the submission checks, the anchor sets (chosen from the board's models, or
the fixed default), the board keeping estimates out of every ranking, the upgrade to a full run, and the real
Gemma 270M quick job end to end on the CPU (``engine``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium, write_folder

from tcmqa import quick_anchors
from tcmqa.data import load_config
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.validation import Policy, Rejected, enqueue, upgrade, validate
from tcmqa.prompts import PROTOCOL
from tcmqa.runs import data_fingerprint
from tcmqa.schema import OUTPUTS
from tcmqa.store import EVAL, FAILED, FINISHED, QUICK, DuplicateError, SQLiteStore, Store

POLICY = Policy(hosted=False, protocol=PROTOCOL)


def corpus(tree: Path) -> list[dict]:
    return [item for item in load_config(str(tree), "corpus").to_list() if not item["flagged"]]


def finish_models(store: Store, tree: Path, tmp_path: Path, n: int, seed: int = 0, prefix: str = "model") -> list[dict]:
    """``n`` finished full evaluations of the served items, each right with sigmoid(skill + ease): the board's
    comparable models, with their outcomes in the store. Their results rows."""
    items = corpus(tree)
    rng = np.random.default_rng(seed)
    ease = rng.normal(0, 1.5, len(items))
    rows = []
    for k in range(n):
        model, revision = f"org/{prefix}-{k}", f"{k + 1:040x}"
        right = rng.random(len(items)) < 1 / (1 + np.exp(-(ease + (k - n / 2) / 2)))
        table = pa.Table.from_pylist(
            [
                {
                    "model": model,
                    "revision": revision,
                    "protocol": PROTOCOL,
                    "item_id": item["id"],
                    "answer_type": item["answer_type"],
                    "prediction": item["answer"] if r else ["E"],
                    "correct": bool(r),
                }
                for item, r in zip(items, right, strict=True)
            ],
            schema=OUTPUTS.arrow_schema,
        )
        path = tmp_path / f"part-{k}" / "part-00000.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(table, path)
        store.submit(model, revision, PROTOCOL, "local")
        job = store.claim("w")
        assert job is not None
        row = {"model": model, "revision": revision, "origin": "evaluated", "family": "Qwen2", "params_b": 0.5 + k,
               "full": 100 * right.mean(), "protocol": PROTOCOL, "data_fingerprint": data_fingerprint(items),
               "coverage": 100.0, "n": len(items), "n_corpus": len(items), "date": f"2026-11-{k + 1:02d}"}  # fmt: skip
        assert store.finish(job, row, [path])
        rows.append(row)
    return rows


def finished_quick(store: Store, model: str, revision: str, full: float = 41.23) -> str:
    """A quick job of ``model`` finished with an estimate (as the worker records it); its id."""
    job = store.submit(model, revision, PROTOCOL, "local", {"family": "Gemma3", "params_b": 0.27}, kind=QUICK)
    claimed = store.claim("w")
    assert claimed is not None and claimed.id == job.id
    estimate = {"full": full, "error": {"mae": 1.7, "rmse": 2.14, "max": 4.8}, "anchors": 200, "right": 82,
                "anchors_version": "0123456789abcdef", "basis": quick_anchors.FIT, "models": 29,
                "family": "Gemma3", "params_b": 0.27}  # fmt: skip
    assert store.finish_quick(claimed, estimate)
    return job.id


def test_quick_estimate_job_kind_refuses_bad_input(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store")
    model = write_folder(tmp_path / "my-model")

    class NoStore:  # a kind the form does not offer is refused before the store (or the folder) is read
        def __getattr__(self, name: str):
            raise AssertionError(f"the store was asked ({name}) before the kind was checked")

    with pytest.raises(Rejected, match=r"kind of evaluation is one of 'eval' \(Full evaluation\), 'quick'"):
        validate(str(model), "", user="local", api=None, store=NoStore(), policy=POLICY, kind="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="of kind 'eval' or 'quick', not 'backfill'"):
        store.submit("m", "r" * 40, PROTOCOL, "local", kind="backfill")

    accepted = validate(str(model), "", user="local", api=None, store=store, policy=POLICY, kind=QUICK)
    quick = enqueue(accepted, user="local", store=store, policy=POLICY, kind=QUICK)
    assert quick.kind == QUICK and store.get(quick.id).kind == QUICK  # type: ignore[union-attr]
    with pytest.raises(Rejected, match=f"A quick estimate of my-model .* is already PENDING as job {quick.id}"):
        validate(str(model), "", user="local", api=None, store=store, policy=POLICY, kind=QUICK)
    with pytest.raises(DuplicateError):  # the store refuses it too (two forms submitted at once)
        store.submit(accepted.model, accepted.revision, PROTOCOL, "local", kind=QUICK)

    # a full submission of the same model is the upgrade by resubmission: allowed beside the estimate
    full = enqueue(validate(str(model), "", user="local", api=None, store=store, policy=POLICY), user="local",
                   store=store, policy=POLICY)  # fmt: skip
    assert full.kind == EVAL
    other = write_folder(tmp_path / "other-model", shape=(999, 270))
    enqueue(validate(str(other), "", user="local", api=None, store=store, policy=POLICY), user="local", store=store,
            policy=POLICY)  # fmt: skip
    with pytest.raises(Rejected, match=r"already has a full evaluation, PENDING as job .*a quick estimate would only"):
        validate(str(other), "", user="local", api=None, store=store, policy=POLICY, kind=QUICK)
    assert [j.kind for j in store.jobs()].count(QUICK) == 1


def test_quick_estimate_anchor_sets_default_then_fitted_with_measured_error(demo_tree: Path, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store")
    items = corpus(demo_tree)
    ids, fingerprint = [item["id"] for item in items], data_fingerprint(items)
    finish_models(store, demo_tree, tmp_path / "few", quick_anchors.MIN_MODELS - 1)

    default = quick_anchors.anchor_set(store, ids, fingerprint, PROTOCOL, 8)
    assert default.basis == quick_anchors.DEFAULT and default.error == {} and len(default.item_ids) == 8
    again = quick_anchors.default_anchors(list(reversed(ids)), 8, fingerprint, PROTOCOL)
    assert again.item_ids == default.item_ids and again.version == default.version  # fixed: not the item order's
    right = dict.fromkeys(ids, True) | dict.fromkeys(default.item_ids[:2], False)
    shown = quick_anchors.estimate_text(quick_anchors.estimate(default, right))
    assert shown.startswith("≈ 75.0 ± 15.3 (8 default anchors") and "under 5 models" in shown

    finish_models(store, demo_tree, tmp_path / "more", 3, seed=1, prefix="more")  # 7 comparable models: enough to fit
    fitted = quick_anchors.anchor_set(store, ids, fingerprint, PROTOCOL, 8)
    assert fitted.basis == quick_anchors.FIT and len(fitted.models) == 7
    assert set(fitted.error) == {"mae", "rmse", "max"} and 0 < fitted.error["mae"] <= fitted.error["max"]
    assert sum(fitted.weights) == pytest.approx(1.0) and set(fitted.item_ids) <= set(ids)
    assert quick_anchors.AnchorSet.from_json(store.anchor_set(fitted.version) or {}) == fitted  # under its version
    assert quick_anchors.anchor_set(store, ids, fingerprint, PROTOCOL, 8) == fitted  # an unchanged board: reused
    estimate = quick_anchors.estimate(fitted, dict.fromkeys(ids, True))
    assert estimate["full"] == pytest.approx(100.0) and estimate["anchors_version"] == fitted.version
    with pytest.raises(ValueError, match="answered 7 of the 8 anchors"):
        quick_anchors.estimate(fitted, {i: True for i in fitted.item_ids[1:]})


def test_quick_estimate_board_keeps_estimates_apart_and_the_upgrade_replaces_them(
    demo_tree: Path, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "store")
    rows = finish_models(store, demo_tree, tmp_path, 3)
    quick_id = finished_quick(store, "org/quick", "b" * 40, full=99.0)  # above every full row
    board = board_lib.Board(store, data_fingerprint=rows[0]["data_fingerprint"])
    frame = board.frame()
    [quick] = frame[frame["Model"] == "org/quick"].to_dict("records")
    assert quick[board_lib.COMPARISON] == board_lib.QUICK_ESTIMATE and pd.isna(quick["Full"])
    assert quick[board_lib.ESTIMATE].startswith("≈ 99.0 ± 2.1 (200 anchors 01234567")
    assert quick[board_lib.SEPARATION] == "" and quick["Params (B)"] == pytest.approx(0.27)
    assert frame[board_lib.COMPARISON].iloc[-1] == board_lib.QUICK_ESTIMATE  # its own group, last
    for sort_by in ("Full", "Params (B)", board_lib.ESTIMATE):  # never ranked among the comparable rows
        shown = board_lib.select(frame, sort_by=sort_by, columns=board_lib.DEFAULT_COLUMNS)
        comparable = shown[shown[board_lib.COMPARISON] == board_lib.COMPARABLE]
        assert "org/quick" not in set(comparable["Model"]) and shown["Model"].iloc[-1] == "org/quick"
    scatter, bars = board_lib.plot_frames(frame)
    assert "org/quick" not in set(scatter["model"]) | set(bars["model"])  # not on the paper's axes
    marks = frame.loc[frame[board_lib.COMPARISON] == board_lib.COMPARABLE, board_lib.SEPARATION]
    assert "org/quick" not in " ".join(marks)  # no separation mark tested against it

    with pytest.raises(Rejected, match="is not a quick estimate: there is nothing to upgrade"):
        upgrade(store.jobs()[-1].id, user="local", store=store, policy=POLICY)
    with pytest.raises(Rejected, match="No job 'nope'"):
        upgrade("nope", user="local", store=store, policy=POLICY)
    full = upgrade(quick_id, user="local", store=store, policy=POLICY)
    assert (full.kind, full.model, full.revision, full.meta["upgrades"]) == (EVAL, "org/quick", "b" * 40, quick_id)
    assert "estimate" not in full.meta
    with pytest.raises(Rejected, match="already PENDING as job"):
        upgrade(quick_id, user="local", store=store, policy=POLICY)
    pending = board.frame()  # the pending full run changes nothing yet
    assert (pending["Model"] == "org/quick").sum() == 1 and pending[board_lib.ESTIMATE].str.startswith("≈").sum() == 1

    claimed = store.claim("w")
    assert claimed is not None and claimed.id == full.id
    assert store.finish(claimed, {**rows[0], "model": "org/quick", "revision": "b" * 40, "full": 40.0}, [])
    replaced = board.frame()
    [row] = replaced[replaced["Model"] == "org/quick"].to_dict("records")
    assert row[board_lib.COMPARISON] == board_lib.COMPARABLE and row["Full"] == 40.0 and row[board_lib.ESTIMATE] == ""


def test_quick_estimate_worker_fails_a_quick_job_without_anchors(tmp_path: Path, stand_in: str) -> None:
    from tcmqa.worker import WorkerConfig, run_job

    store = SQLiteStore(tmp_path / "store")
    store.submit("org/m", "c" * 40, PROTOCOL, "local", kind=QUICK)
    job = store.claim("w")
    assert job is not None
    cfg = WorkerConfig(store=str(tmp_path / "store"), data=str(tmp_path / "no-tree"), runs=tmp_path / "runs",
                       command=stand_in, hosted=False)  # fmt: skip
    assert run_job(store, job, cfg) == FAILED
    assert store.get(job.id).reason.startswith("the quick job's anchor items could not be chosen")  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="--quick-anchors is a number of items, at least 1, not 0"):
        WorkerConfig(quick_anchors=0, hosted=False)


@pytest.mark.browser
@BROWSER[1]
def test_quick_estimate_in_the_browser_board_submit_and_upgrade(tmp_path: Path, demo_tree: Path) -> None:
    """The board shows the estimate apart and last; the Submit form queues a quick job; Upgrade queues its full run."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(tmp_path / "store")
    finish_models(store, demo_tree, tmp_path, 3)
    quick_id = finished_quick(store, "org/quick", "b" * 40)
    model = write_folder(tmp_path / "my-model")
    demo, url = launch(local_settings(store.root, demo_tree), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            table = page.locator("#board-table")
            expect(table.get_by_text("Qwen2.5-14B-Inst.")).to_be_visible(timeout=30_000)
            page.locator("#board-search textarea").fill("org/")  # the three full rows, then the quick one
            expect(table.get_by_test_id("cell-3-1")).to_have_text(board_lib.QUICK_ESTIMATE, timeout=30_000)
            expect(table.get_by_test_id("cell-3-0")).to_have_text("org/quick")
            expect(table.locator("span.text", has_text="≈ 41.2 ± 2.1 (200 anchors 01234567")).to_be_visible()
            page.screenshot(path=SHOTS / "quick-01-board.png", full_page=True)

            page.get_by_role("tab", name="Submit").click()
            page.locator("#submit-model textarea").fill(str(model))
            page.locator("#submit-kind").get_by_text("Quick estimate", exact=True).click()
            page.locator("#submit-button").click()
            expect(page.locator("#submit-feedback")).to_contain_text("as a quick estimate of Full", timeout=30_000)
            page.locator("#submit-job textarea").fill(quick_id)
            page.locator("#submit-upgrade").click()
            feedback = page.locator("#submit-feedback")
            expect(feedback).to_contain_text("Queued the full evaluation of org/quick", timeout=30_000)
            page.screenshot(path=SHOTS / "quick-02-submit-upgrade.png", full_page=True)
            browser.close()
    finally:
        demo.close()
    kinds = sorted((j.model, j.kind, j.status) for j in store.jobs() if j.model in ("org/quick", "my-model"))
    assert kinds == [("my-model", QUICK, "PENDING"), ("org/quick", EVAL, "PENDING"), ("org/quick", QUICK, FINISHED)]


@pytest.mark.engine
def test_quick_estimate_gemma_end_to_end_on_the_cpu(
    tmp_path: Path, demo_tree: Path, gemma_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real Gemma 270M submitted as a quick job (local folder), the anchors chosen from a board of 6 models,
    evaluated by a real ``tcmqa worker`` running the real harness (transformers, float32) on the anchors only."""
    store = SQLiteStore(tmp_path / "store")
    rows = finish_models(store, demo_tree, tmp_path, 6)
    accepted = validate(str(gemma_dir), "", user="local", api=None, store=store, policy=POLICY, kind=QUICK)
    job = enqueue(accepted, user="local", store=store, policy=POLICY, kind=QUICK)
    start = time.perf_counter()
    worker = subprocess.run(
        [sys.executable, "-m", "tcmqa", "worker", "--store", str(store.root), "--data", str(demo_tree), "--runs",
         str(tmp_path / "runs"), "--engine", "transformers", "--dtype", "float32", "--quick-anchors", "8", "--once"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    done = store.get(job.id)
    assert done is not None and done.status == FINISHED, (worker.stdout[-3000:], worker.stderr[-3000:], done)
    estimate = done.meta["estimate"]
    assert (estimate["anchors"], estimate["basis"], estimate["models"]) == (8, quick_anchors.FIT, 6)
    assert 0 <= estimate["full"] <= 100 and estimate["error"]["rmse"] > 0
    assert store.results() == [r for r in store.results() if r["model"] != accepted.model]  # no results row
    log = (next((tmp_path / "runs").iterdir()) / "harness.log").read_text()
    assert "--items" in log and "--probes" not in log
    frame = board_lib.Board(store, data_fingerprint=rows[0]["data_fingerprint"]).frame()
    [row] = frame[frame["Model"] == accepted.model].to_dict("records")
    assert row[board_lib.COMPARISON] == board_lib.QUICK_ESTIMATE and row[board_lib.ESTIMATE].startswith("≈ ")
    with capsys.disabled():
        print(f"\nquick job, Gemma 270M, 8 anchors of 6 models, transformers float32 on the CPU: {seconds:.1f} s "
              f"(worker start to exit); {row[board_lib.ESTIMATE]}")  # fmt: skip
