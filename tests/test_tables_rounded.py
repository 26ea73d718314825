"""Every table of a Space with data, as its visitors receive it: numbers rounded to what they mean, headers in
words, never gradio's "1 2 3", and read-only in a real browser.

The data is real where it matters: the tiny model's real run over the demo tree (margins and letter log-probs
to 16 digits) with probe columns at full precision (order p-value, rotations), a second recorded model to compare with,
the practitioners' study of the demo tree with a block started in the Space, and queued jobs, one of them
reporting its progress as the worker does."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from gradio_client import Client
from space_fixtures import (
    ALL_ORIGINS,
    BROWSER,
    SHOTS,
    evaluated_model,
    hub_models,
    launch,
    local_settings,
    open_chromium,
)

from tcmqa.harness import EvalConfig, run
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard import formats
from tcmqa.outputs import part_files
from tcmqa.prompts import PROTOCOL
from tcmqa.store import SQLiteStore

TOKEN = "operator-token-0123456789abcdef"
TINY = "org/tiny-real"
# probe columns as a probe pass leaves them (full precision), set on the real run's row
PROBED = {
    "circular": 41.735160514891625,
    "rotation_mean": 52.123456789,
    "rotation_published": 55.5555555,
    "circular_drop": 13.8203954,
    "recall_std": 7.0710678118654755,
    "pride": 48.4848484848,
    "pride_lp": 45.4545454545,
    "n_rotation": 32,
    "order_first": 33.333333333333336,
    "order_chance": 29.166666666666668,
    "order_p": 0.051234567,
    "n_order": 12,
}
SNAKE = re.compile(r"^[A-Za-z0-9]+(_[A-Za-z0-9]+)+$")
LONG_DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d{4,}(?![\d.]*e)")  # 41.735160514891625, not 1.2e-09


@pytest.fixture(scope="module")
def space(tmp_path_factory, demo_tree: Path, tiny_eval: dict, tiny_engine) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("rounded")
    out = root / "run"
    run(EvalConfig(**tiny_eval, out=out, name=TINY), engine=tiny_engine)
    row = json.loads((out / "results.json").read_text()) | {"model": TINY, "origin": "evaluated"} | PROBED
    store = SQLiteStore(root / "store")
    store.submit(TINY, row["revision"], PROTOCOL, "local")
    job = store.claim("w")
    assert job is not None and store.finish(job, row, part_files(out))
    evaluated_model(store, demo_tree, root, "org/model")
    running = store.submit("org/running", "c" * 40, PROTOCOL, "someone")
    claimed = store.claim("w2")
    assert claimed is not None and claimed.id == running.id
    store.submit("org/waiting", "b" * 40, PROTOCOL, "someone")
    store.heartbeat(claimed, "org/running (vllm):  41%|████      | 13/32 [00:10<00:14,  1.31item/s]")
    settings = local_settings(
        store.root, demo_tree, practice_block_size=5, practice_admins=("admin",), admin_token=TOKEN
    )
    demo, url = launch(settings, store, hub_models())
    yield {"url": url, "store": store, "item": str(pd.read_parquet(part_files(out)[0])["item_id"].iloc[0])}
    demo.close()


def tables(result: Any) -> Iterator[dict[str, Any]]:
    """Every table in an API result (a table is a dict with headers and data; an update holds one as its value)."""
    if isinstance(result, dict):
        if "headers" in result and "data" in result:
            yield result
        else:
            for value in result.values():
                yield from tables(value)
    elif isinstance(result, list | tuple):
        for value in result:
            yield from tables(value)


def unrounded(cell: Any) -> bool:
    """A number with more digits than its kind shows (neither 2 decimals nor 2 significant digits), or text
    holding one."""
    if isinstance(cell, float):
        return cell != round(cell, 2) and cell != formats.significant(cell)
    return isinstance(cell, str) and bool(LONG_DECIMAL.search(cell))


def every_table(space: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each page's tables, called as a visitor's browser calls them."""
    client = Client(space["url"], verbose=False)
    start = client.predict("ann", "", True, "", api_name="/practice_start")  # a block of the study, begun
    key = next(v for v in start if isinstance(v, str) and len(v) > 20 and " " not in v)
    calls = {
        "board": (("", [], None, None, ALL_ORIGINS, board_lib.CHOICES, "Full", True), "/board"),
        "explorer": (("", "", "", "", "", "", "", TINY, 1), "/browse"),
        "item page": ((space["item"], 1), "/item"),
        "queue": ((), "/queue"),
        "practitioners' console": (("admin", TOKEN), "/practice_console"),
        "pool console": (("admin", TOKEN), "/pool_console"),
        "fresh tab": (("ann", key), "/fresh_mine"),
    }
    return {page: list(tables(client.predict(*args, api_name=api))) for page, (args, api) in calls.items()}


def test_rounded_every_table_of_every_page_human_headers_no_placeholder(space: dict[str, Any]) -> None:
    pages = every_table(space)
    assert all(pages.values()), [page for page, found in pages.items() if not found]
    for page, found in pages.items():
        for table in found:
            headers = [str(h) for h in table["headers"]]
            assert not [h for h in headers if SNAKE.match(h)], (page, headers)
            assert headers[:3] != ["1", "2", "3"], (page, headers)
            bad = [cell for row in table["data"] for cell in row if unrounded(cell)]
            assert not bad, (page, headers, bad[:5])
    outputs = pages["item page"][1]  # the real run's margins and probabilities, as shown
    assert "LP prediction" in outputs["headers"] and "margin" in outputs["headers"]
    (margin,) = [r[outputs["headers"].index("margin")] for r in outputs["data"] if r[0] == TINY]
    assert isinstance(margin, float) and not unrounded(margin), margin
    board = pages["board"][0]
    tiny = next(r for r in board["data"] if r[0] == TINY)
    assert isinstance(tiny[board["headers"].index("Order p")], float)  # a p-value, 2 significant digits


def test_rounded_values_by_kind() -> None:
    assert formats.rounded(41.735160514891625, "percent") == 41.74
    assert formats.rounded(2.010019302368164, "decimal") == 2.01
    assert formats.rounded(0.0512, "p_value") == 0.051 and formats.rounded(1.234e-9, "p_value") == 1.2e-9
    assert formats.rounded(0.0031234, "decimal") == 0.0031  # not flattened to 0.0
    assert formats.rounded(12.0, "count") == 12 and isinstance(formats.rounded(12.0, "count"), int)
    assert formats.rounded(float("nan"), "decimal") is None and formats.rounded("text", "decimal") == "text"
    assert [formats.header(h) for h in ("lp_prediction", "item_id", "margin", "P(A)")] == [
        "LP prediction",
        "item id",
        "margin",
        "P(A)",
    ]


def _choose(page: Any, dropdown: str, value: str) -> None:
    """Pick ``value`` in the gradio dropdown with elem_id ``dropdown``."""
    box = page.locator(f"#{dropdown}")
    box.locator("input").click()
    box.get_by_role("option", name=value, exact=True).click()


def _check(page: Any, where: str) -> None:
    """The headers and rendered cells of every table on the page: words, rounded, never "1 2 3"."""
    headers = [h.strip() for h in page.locator(".tcmqa-table th").all_inner_texts() if h.strip()]
    cells = [c.strip() for c in page.locator(".tcmqa-table [data-testid^='cell-']").all_inner_texts()]
    assert not [h for h in headers if SNAKE.match(h)], (where, headers)
    assert not {"1", "2", "3"} <= set(headers), (where, headers)
    assert not [c for c in cells if LONG_DECIMAL.search(c)], (where, [c for c in cells if LONG_DECIMAL.search(c)][:5])


@BROWSER[0]
@BROWSER[1]
def test_rounded_compare_model_and_item_pages_in_a_browser_read_only(space: dict[str, Any]) -> None:
    """The pages a gradio client cannot call with a model (their model lists are filled on load), and the
    item page: rounded, human headers, columns wide enough for a word, no editor on a click."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = open_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(space["url"])
        page.locator("#board-search textarea").fill("org/")  # the evaluated rows (the paper's are rounded alike)
        expect(page.locator("#board-table").get_by_text(TINY, exact=True)).not_to_have_count(0, timeout=30_000)
        _check(page, "board")
        page.get_by_role("tab", name="Compare").click()
        _check(page, "compare, nothing chosen")
        _choose(page, "compare-a", TINY)
        _choose(page, "compare-b", "org/model")
        page.locator("#compare-run").click()
        expect(page.locator("#compare-outcomes").get_by_test_id("cell-0-1")).not_to_have_text("", timeout=30_000)
        _check(page, "compare")
        page.screenshot(path=SHOTS / "compare-rounded.png", full_page=True)
        page.get_by_role("tab", name="Model").click()
        _choose(page, "model-select", TINY)
        page.locator("#model-show").click()
        probes = page.locator("#model-probes")
        expect(probes.get_by_text("Circular", exact=True)).not_to_have_count(0, timeout=30_000)
        expect(probes.get_by_text("41.74", exact=True)).not_to_have_count(0)  # 41.735160514891625 as shown
        _check(page, "model page")
        page.screenshot(path=SHOTS / "model-page-rounded.png", full_page=True)
        page.get_by_role("tab", name="Item explorer").click()
        page.locator("#item-id textarea").fill(space["item"])
        page.locator("#item-show").click()
        outputs = page.locator("#item-outputs")
        expect(outputs.get_by_role("columnheader", name="LP prediction")).not_to_have_count(0, timeout=30_000)
        _check(page, "item page")
        expect(outputs.get_by_text(TINY, exact=True)).not_to_have_count(0)
        outputs.get_by_test_id("cell-0-0").dblclick()
        expect(outputs.locator("input:not([type=file]), textarea")).to_have_count(0)  # no editor opened
        for header in outputs.get_by_role("columnheader").all():
            box = header.bounding_box()
            assert box is not None and box["width"] >= 60, (header.inner_text(), box)
        outputs.scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "item-page-rounded.png", full_page=True)
        page.get_by_role("tab", name="Queue").click()
        expect(page.locator("#queue-table").get_by_text("org/running", exact=True)).not_to_have_count(0)
        _check(page, "queue")
        browser.close()
