"""Benchmark the Space on loopback: board first render with 1,000 result rows, and 100 concurrent page loads.

    python bench/space.py [--rows 1000] [--loads 100]

First render is measured twice: server side (store read + merge + select, what every refresh costs)
and in Debian's chromium (navigation until the board's first row is drawn), if /usr/bin/chromium exists.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before any Hugging Face import reads it

import httpx

from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.settings import Settings
from tcmqa.leaderboard.space import build_app
from tcmqa.leaderboard.space import launch as launch_app
from tcmqa.store import SQLiteStore


def fill(store: SQLiteStore, rows: int) -> None:
    """``rows`` finished evaluations, recorded through the store's own claim/finish path."""
    for i in range(rows):
        store.submit(f"bench/model-{i:04d}", f"{i:040x}", "v1", "bench")
    while (job := store.claim("bench")) is not None:
        i = int(job.model.rsplit("-", 1)[1])
        store.finish(
            job,
            {
                "model": job.model,
                "family": f"F{i % 12}",
                "params_b": 0.1 + i % 70,
                "origin": "evaluated",
                "full": (i * 7) % 100,
                "single": (i * 5) % 100,
                "multi": (i * 3) % 100,
                "subset": (i * 11) % 100,
                "revision": job.revision,
                "protocol": "v1",
                "engine": "vllm",
            },
            [],
        )


def browser_first_render(url: str) -> float | None:
    if not Path("/usr/bin/chromium").exists():
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page()
        page.goto(url)  # warm: static assets cached, as for a returning visitor
        page.locator("#board-table [data-testid='cell-0-0']").wait_for(timeout=60_000)
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(url)
        page.locator("#board-table [data-testid='cell-0-0']").wait_for(timeout=60_000)
        elapsed = time.perf_counter() - start
        browser.close()
    return elapsed


async def concurrent_loads(url: str, n: int) -> tuple[list[float], float]:
    async with httpx.AsyncClient(timeout=120) as client:

        async def load() -> float:
            start = time.perf_counter()
            response = await client.get(url)
            response.raise_for_status()
            config = await client.get(url + "config")
            config.raise_for_status()
            return time.perf_counter() - start

        start = time.perf_counter()
        times = await asyncio.gather(*[load() for _ in range(n)])
        return list(times), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=100)
    args = parser.parse_args()

    store = SQLiteStore(tempfile.mkdtemp(prefix="bench-space-"))
    fill(store, args.rows)
    start = time.perf_counter()
    shown = board_lib.select(board_lib.Board(store).frame())
    server = time.perf_counter() - start
    print(f"board rows: {len(shown)} ({args.rows} evaluated + 29 reported + 1 reference)")
    print(f"server-side first board (read store, merge, select): {server * 1000:.0f} ms")

    settings = Settings(
        hosted=False,
        store=str(store.root),
        data="unused",
        start_worker=False,
        worker_args="",
        max_params_b=16,
        rate_limit=5,
        rate_window_h=24,
        refresh_s=60,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_app(settings, store, api=object())
    launch_app(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        rendered = browser_first_render(url)
        if rendered is not None:
            print(f"browser first render (navigation -> first board row drawn): {rendered:.2f} s")
        times, wall = asyncio.run(concurrent_loads(url, args.loads))
        q = statistics.quantiles(times, n=100)
        print(
            f"{args.loads} concurrent page loads (GET / + /config): wall {wall:.2f} s, "
            f"p50 {q[49]:.2f} s, p95 {q[94]:.2f} s, max {max(times):.2f} s, {args.loads / wall:.0f} loads/s"
        )
    finally:
        demo.close()


if __name__ == "__main__":
    main()
