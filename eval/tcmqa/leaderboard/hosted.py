"""The Space's start-up: the store (retried), the local worker, the Hub publisher threads, then the app
(:func:`tcmqa.leaderboard.space.build_app`). ``space/app.py`` runs :func:`main`.

The web process never imports an engine: it validates and enqueues submissions and reads results
from the store; workers (``tcmqa worker``) evaluate. Locally (no ``SPACE_ID``) the app starts one
worker itself, accepts local model folders and needs no Hugging Face sign-in (a practitioner's name comes
with its key, an admin's with the operator's token: :mod:`tcmqa.leaderboard.identity`).
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
import time
from typing import Any

import gradio as gr

from tcmqa.flags import redact
from tcmqa.hub.publisher import Publisher
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.identity import check_bind
from tcmqa.leaderboard.settings import Settings
from tcmqa.leaderboard.space import build_app, launch
from tcmqa.store import Store, open_store, store_url
from tcmqa.worker import LocalWorker


def open_store_retrying(url: str, waits_s: tuple[float, ...] = (1, 2, 4, 8, 16, 30)) -> Store:
    """The store, retried with backoff: a database blip at start must not kill the Space. A spec that can never
    open (an unknown scheme) is refused at once, and what is logged shows no password (:func:`tcmqa.flags.redact`)."""
    store_url(url)
    for wait in waits_s:
        try:
            return open_store(url)
        except Exception as err:
            logging.getLogger("tcmqa.space").warning(
                "opening the store failed (%s); again in %gs", redact(str(err)), wait
            )
            time.sleep(wait)
    return open_store(url)


def start_publishing(
    settings: Settings, store: Store, publisher: Publisher, stop: threading.Event
) -> list[threading.Thread]:
    """The one publisher of this store, in the background: first the rows published before (the board shows
    what it has and fills in), then finished jobs to the Hub, coalesced; practitioner configs likewise."""

    def results() -> None:
        publisher.import_published()
        publisher.run_forever(stop)

    threads = [threading.Thread(target=results, name="tcmqa-publisher", daemon=True)]
    if settings.practice:  # the responses and subset configs, rebuilt and committed at most every few minutes
        practice = practice_lib.PracticeLoader(settings.data, store, **settings.practice_options())

        def source() -> tuple[str | None, Any]:
            # what a commit would publish: unchanged while only open blocks are answered
            version = practice.get().published_version() if store.practice_responses_exist() else None
            return version, lambda: practice.get().configs()

        threads.append(
            threading.Thread(
                target=publisher.run_responses_forever,
                args=(stop, source, settings.responses_every_s),
                name="tcmqa-responses-publisher",
                daemon=True,
            )
        )
    for thread in threads:
        thread.start()
    return threads


def build_hosted(
    settings: Settings, api: Any = None, stop: threading.Event | None = None
) -> tuple[gr.Blocks, list[threading.Thread]]:
    """What ``main`` runs, as a seam for tests: the store (retried), the local worker, the publisher threads
    (until ``stop``), and the app; ``api`` is the Hub client (``HfApi()`` by default)."""
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    store = open_store_retrying(settings.store)
    if settings.start_worker:
        LocalWorker(settings.store, settings.data, shlex.split(settings.worker_args)).start()
    if not settings.publish:
        return build_app(settings, store, api), []
    publisher = Publisher(
        store, api, settings.results_repo, requests_repo=settings.requests_repo, raters=settings.practice_raters
    )
    threads = start_publishing(settings, store, publisher, stop or threading.Event())
    return build_app(settings, store, api, publisher), threads


def main() -> None:
    """Host and port come from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (a Space sets them); local mode listens
    beyond loopback only with the operator's token (:func:`tcmqa.leaderboard.identity.check_bind`)."""
    settings = Settings.from_env()
    if not settings.hosted:
        check_bind(os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1", settings.admin_token)
    demo, _ = build_hosted(settings)
    launch(demo)
