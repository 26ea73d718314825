"""The leaderboard Space's UI (gradio 6): Board, Plots, Item explorer, Compare, Model, Submit, Queue,
Practitioners, About, assembled by :func:`build_app`. The tabs' logic is in ``tcmqa.leaderboard``; the
hosted start-up (store, worker, publisher) is :mod:`tcmqa.leaderboard.hosted`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa import forms
from tcmqa.hub.publisher import Publisher
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard import empty, model_outputs, queue, tabs
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.about import about_markdown
from tcmqa.leaderboard.errors import reported
from tcmqa.leaderboard.explorer import Explorer
from tcmqa.leaderboard.explorer_tab import explorer_tab
from tcmqa.leaderboard.identity import Guard
from tcmqa.leaderboard.practice_tab import practitioners_tab
from tcmqa.leaderboard.settings import Settings
from tcmqa.leaderboard.validation import Rejected, enqueue, submitter, validate
from tcmqa.store import Store, open_store
from tcmqa.store.admin import NotAllowed


def build_app(
    settings: Settings, store: Store | None = None, api: Any = None, publisher: Publisher | None = None
) -> gr.Blocks:
    """The whole UI; ``store`` and ``api`` are injectable so tests run on a real store and a fake Hub.
    ``publisher``: the Hub publisher, through which an admin's withdrawal removes a published row."""
    store = store or open_store(settings.store)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    policy = settings.policy()
    # the study read from its pinned source, the Space's pseudonym key, N raters, admins (Settings owns them)
    practice = practice_lib.PracticeLoader(settings.data, store, **settings.practice_options())
    board = board_lib.Board(
        store,
        data_fingerprint=served_fingerprint(settings.data),
        practice=practice if settings.practice else None,
        raters=settings.practice_raters,
    )
    # the published runs' outcomes, aggregated once into the store: the board counts imported rows on the current subset
    threading.Thread(target=model_outputs.record_published, args=(store, settings.data), daemon=True).start()
    # the explorer withholds the answer of any item in a block still being answered (tcmqa.leaderboard.explorer)
    explorer = Explorer(settings.data, store, practice if settings.practice else None, settings.practice_raters)
    # who is calling, for every handler: a public view, a practitioner's session or an admin's action
    guard = Guard(
        hosted=settings.hosted, admins=settings.practice_admins, admin_token=settings.admin_token, store=store
    )

    @guard.public
    def show_board(
        search: str,
        families: list[str],
        size_min: float | None,
        size_max: float | None,
        origins: list[str],
        columns: list[str],
        sort_by: str,
        descending: bool,
    ) -> pd.DataFrame:
        return board_lib.select(
            board.frame(),
            search,
            families or (),
            size_min,
            size_max,
            origins or (),
            columns or board_lib.DEFAULT_COLUMNS,
            sort_by,
            descending,
        )

    @guard.public
    def board_note(
        search: str,
        families: list[str],
        size_min: float | None,
        size_max: float | None,
        origins: list[str],
        columns: list[str],
        sort_by: str,
        descending: bool,
    ) -> str:
        """Why the shown rows' blank Subset and Δ human cells are blank (whichever columns are chosen)."""
        rows = board_lib.select(
            board.frame(), search, families or (), size_min, size_max, origins or (), board_lib.CHOICES
        )
        return empty.blank_subset(rows)

    @guard.public
    def refresh_families(current: list[str]) -> Any:
        return gr.update(choices=board.families(), value=current)

    @guard.public  # anyone may submit (hosted: the signed-in account, checked by ``submitter``)
    def submit(model_id: str, revision: str, released: str, profile: gr.OAuthProfile | None) -> tuple[str, str]:
        try:
            user = submitter(profile, policy)
            accepted = validate(model_id, revision, user=user, api=api, store=store, policy=policy, released=released)
            job = enqueue(accepted, user=user, store=store, policy=policy)
        except Rejected as err:
            return f"❌ {err}", ""
        except Exception as err:
            return f"❌ The submission could not be queued: {reported(err, 'submit')}.", ""
        return (
            f"✅ Queued {job.model} at `{job.revision[:12]}` ({accepted.params_b:g}B) as job `{job.id}`: "
            "PENDING. Its status updates below.",
            job.id,
        )

    @guard.public
    def show_queue() -> pd.DataFrame:
        return queue.jobs_frame(store)

    @guard.public
    def show_job(job: str) -> str:
        return queue.job_markdown(store, job)

    @guard.public
    def show_log(job: str) -> str:
        return queue.job_log(store, job)

    def admin_action(action: str) -> Callable[..., str]:
        """An admin button's handler: ``action`` on the job, by an admin, with the reason recorded."""

        def act(admin: str | None, job: str, reason: str) -> str:
            if admin is None:
                return "❌ Admins only (TCMQA_ADMINS)."
            try:  # the form of what was typed, before the store (or the Hub, for a withdrawal) is asked
                job = queue.checked_job_id(job)
                reason = forms.checked("reason", reason, max_chars=forms.MAX_REASON, lines=True)
            except forms.FormError as err:
                return f"❌ {queue.escaped(str(err))}"
            if not job or (action != "requeue" and not reason):
                return "❌ Enter the job id and a reason."
            try:
                if action == "cancel":
                    done = store.cancel(job, admin, reason)
                elif action == "requeue":
                    done = store.requeue(job, admin)
                elif publisher is not None:
                    publisher.withdraw(job, admin, reason)
                    done = store.get(job)
                else:
                    done = store.withdraw(job, admin, reason)
            except NotAllowed as err:
                return f"❌ {queue.escaped(str(err))}"
            except Exception as err:
                return f"❌ {reported(err, action)}"
            return f"✅ {queue.job_markdown(store, done.id if done else job)}"

        act.__name__ = f"admin_{action}"
        return guard.admin(act)

    with gr.Blocks(title="TCMQA leaderboard") as demo:
        gr.Markdown(
            "# TCMQA leaderboard\nTraditional Chinese Medicine licensing-exam questions, "
            f"with a licensed-practitioner reference (majority vote {board_lib.HUMAN_SUBSET} on the subset)."
        )
        timer = gr.Timer(settings.refresh_s)
        with gr.Tab("Board"):
            with gr.Row():
                search = gr.Textbox(label="Search models", placeholder="e.g. qwen2.5", elem_id="board-search")
                families = gr.Dropdown(board.families(), multiselect=True, label="Family", elem_id="board-family")
                size_min = gr.Number(label="Min params (B)", value=0, minimum=0, elem_id="board-size-min")
                size_max = gr.Number(label="Max params (B)", value=1000, minimum=0, elem_id="board-size-max")
            with gr.Row():
                origins = gr.CheckboxGroup(board_lib.ORIGINS, value=board_lib.ORIGINS, label="Rows")
                columns = gr.CheckboxGroup(
                    board_lib.CHOICES,
                    value=board_lib.DEFAULT_COLUMNS[1:],
                    label="Columns (answer types: Full, Single, Multi, Subset; probes and uncertainty: see About)",
                    elem_id="board-columns",
                )
            with gr.Row():
                sort_by = gr.Dropdown(list(board_lib.COLUMNS), value="Full", label="Sort by")
                descending = gr.Checkbox(value=True, label="Descending")
            table = gr.Dataframe(
                interactive=False, pinned_columns=1, max_height=700, elem_id="board-table", label=board_lib.LEGEND
            )
            note = gr.Markdown(elem_id="board-note")  # why a row's Subset and Δ human are blank
            inputs = [search, families, size_min, size_max, origins, columns, sort_by, descending]
            for control in inputs:
                control.change(show_board, inputs, table, api_name=False, show_progress="hidden")
            gr.on([demo.load, timer.tick], show_board, inputs, table, api_name="board", show_progress="hidden")
            timer.tick(refresh_families, families, families, api_name=False, show_progress="hidden")
            triggers = [demo.load, timer.tick, *[control.change for control in inputs]]
            gr.on(triggers, board_note, inputs, note, api_name=False, show_progress="hidden")
        tabs.plots_tab(board, demo, timer, guard.public)  # the paper's Figure 2 and the Subset bars
        with gr.Tab("Item explorer"):  # search, filters, pages of items; the item page a row opens
            item_id = explorer_tab(explorer, board, demo, guard.public)
        tabs.analysis_tabs(settings, store, practice, item_id, demo, guard.public, board)  # Compare and Model
        with gr.Tab("Submit"):
            if settings.hosted:
                gr.LoginButton()
                hint = (
                    "Sign in with Hugging Face, then enter a model id and optionally a revision (branch, tag or sha)."
                )
            else:
                hint = "Local mode: no sign-in; a Hub model id or a local model folder (safetensors) is accepted."
            gr.Markdown(hint)
            with gr.Row():
                model_id = gr.Textbox(label="Model id", placeholder="owner/name", elem_id="submit-model")
                revision = gr.Textbox(label="Revision (optional)", placeholder="main", elem_id="submit-revision")
                released = gr.Textbox(
                    value="",
                    label="Release date (optional, YYYY-MM-DD)",
                    placeholder="the Hub repo's creation date",
                    info="'Fresh after release' scores the hidden items accepted after it",
                    elem_id="submit-released",
                )
            submit_button = gr.Button("Submit for evaluation", variant="primary", elem_id="submit-button")
            feedback = gr.Markdown(elem_id="submit-feedback")
            job_id = gr.Textbox(label="Job id", elem_id="submit-job")
            status = gr.Markdown(elem_id="submit-status")
            log_button = gr.Button("Show log", size="sm", elem_id="submit-show-log")
            log_text = gr.Textbox(label="Harness log (end)", lines=8, interactive=False, elem_id="submit-log")
            submit_button.click(submit, [model_id, revision, released], [feedback, job_id], api_name="submit")
            status_timer = gr.Timer(2)
            gr.on(
                [job_id.change, status_timer.tick],
                show_job,
                job_id,
                status,
                api_name="job",
                show_progress="hidden",
            )
            log_button.click(show_log, job_id, log_text, api_name="job_log")
        with gr.Tab("Queue"):
            queue_table = gr.Dataframe(interactive=False, elem_id="queue-table", label="Evaluation requests")
            gr.on([demo.load, timer.tick], show_queue, None, queue_table, api_name="queue", show_progress="hidden")
            with gr.Accordion("Admin actions (accounts in TCMQA_ADMINS)", open=False):
                with gr.Row(visible=not settings.hosted):  # local mode: the account and the operator's token
                    admin_name = gr.Textbox(label="Your account (local mode)", elem_id="admin-account")
                    admin_key = gr.Textbox(label="The operator's token", type="password", elem_id="admin-key")
                with gr.Row():
                    admin_job = gr.Textbox(label="Job id", elem_id="admin-job")
                    admin_reason = gr.Textbox(label="Reason (recorded with your account)", elem_id="admin-reason")
                with gr.Row():
                    buttons = {
                        "cancel": gr.Button("Cancel (PENDING or RUNNING)", elem_id="admin-cancel"),
                        "requeue": gr.Button("Re-queue (FAILED)", elem_id="admin-requeue"),
                        "withdraw": gr.Button("Withdraw the published row", variant="stop", elem_id="admin-withdraw"),
                    }
                admin_note = gr.Markdown(elem_id="admin-note")
            for action, button in buttons.items():
                button.click(
                    admin_action(action),
                    [admin_name, admin_key, admin_job, admin_reason],
                    admin_note,
                    api_name=f"admin_{action}",
                )
        if settings.practice:
            with gr.Tab("Practitioners"):
                practitioners_tab(settings, practice, demo, guard)
        with gr.Tab("About"):
            gr.Markdown(about_markdown(policy.protocol))
    return demo


def served_fingerprint(data: str) -> str | None:
    """The served data's fingerprint, the board's comparable group (read once, at start); None (logged: the
    board then falls back to the rows' majority) when the corpus cannot be read."""
    try:
        return board_lib.served_fingerprint(data)
    except Exception as err:
        reported(err, f"reading the served corpus {data}")
        return None
