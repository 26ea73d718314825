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
from tcmqa.leaderboard import empty, formats, lang, model_outputs, outcomes, queue, tabs
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.about import about_markdown
from tcmqa.leaderboard.errors import reported
from tcmqa.leaderboard.explorer import Explorer
from tcmqa.leaderboard.explorer_tab import explorer_tab
from tcmqa.leaderboard.identity import Guard
from tcmqa.leaderboard.lang import language_selector, t, tab_labels
from tcmqa.leaderboard.practice_tab import practitioners_tab
from tcmqa.leaderboard.rescored import Rescorer
from tcmqa.leaderboard.scale import Scales
from tcmqa.leaderboard.settings import Settings
from tcmqa.leaderboard.validation import KINDS, Rejected, enqueue, submitter, upgrade, validate
from tcmqa.store import EVAL, QUICK, Store, open_store
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
    # the explorer withholds the answer of any item in a block still being answered (tcmqa.leaderboard.explorer)
    explorer = Explorer(settings.data, store, practice if settings.practice else None, settings.practice_raters)
    # the one scale of models and practitioners, fitted in the background over what the explorer serves
    explorer.scales = Scales(outcomes.shared(store), explorer.responses, explorer.domains)
    served = served_fingerprint(settings.data)
    board = board_lib.Board(
        store,
        data_fingerprint=served,
        practice=practice if settings.practice else None,
        raters=settings.practice_raters,
        scales=explorer.scales,
        pass_mark=settings.pass_mark,
        rescorer=Rescorer(store, settings.data, served),  # the data's errata: earlier runs rescored on its keys
    )
    # the published runs' outcomes, aggregated once into the store: the board counts imported rows on the current subset
    threading.Thread(target=model_outputs.record_published, args=(store, settings.data), daemon=True).start()
    # who is calling, for every handler: a public view, a practitioner's session or an admin's action
    guard = Guard(
        hosted=settings.hosted, admins=settings.practice_admins, admin_token=settings.admin_token, store=store
    )

    def shown(
        search: str,
        families: list[str],
        size_min: float | None,
        size_max: float | None,
        origins: list[str],
        columns: list[str],
        sort_by: str,
        descending: bool,
        comparisons: list[str] | None,
    ) -> pd.DataFrame:
        """The board's rows the filters keep (every comparison group when none is chosen yet)."""
        groups = board_lib.COMPARISONS if comparisons is None else comparisons
        frame = board.frame()
        return board_lib.select(
            frame, search, families or (), size_min, size_max, origins or (), columns, sort_by, descending, groups
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
        comparisons: list[str] | None = None,
    ) -> pd.DataFrame:
        columns = columns or board_lib.DEFAULT_COLUMNS
        return shown(search, families, size_min, size_max, origins, columns, sort_by, descending, comparisons)

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
        comparisons: list[str] | None = None,
    ) -> str:
        """Why the shown rows' blank Subset and Δ human cells are blank (whichever columns are chosen)."""
        rows = shown(search, families, size_min, size_max, origins, board_lib.CHOICES, "Full", True, comparisons)
        return empty.blank_subset(rows)

    @guard.public
    def refresh_families(current: list[str], seen: list[str] | None) -> tuple[Any, list[str]]:
        """The family choices when they changed; else nothing sent (an update would fire the board's change)."""
        choices = board.families()
        return (gr.skip(), seen) if choices == seen else (gr.update(choices=choices, value=current), choices)

    @guard.public
    def refresh_board(seen: str | None, *filters: Any) -> tuple[Any, Any, str]:
        """The board and its note on a refresh tick, sent only when the board or the filters changed since this
        page's last: a tick of an unchanged board sends nothing, so the page does not redraw the table
        (and fire its change events) every ``refresh_s``."""
        key = f"{id(board.frame())}|{filters!r}"
        if key == seen:
            return gr.skip(), gr.skip(), seen
        return show_board(*filters), board_note(*filters), key

    @guard.public  # anyone may submit (hosted: the signed-in account, checked by ``submitter``)
    def submit(
        model_id: str, revision: str, released: str, kind: str | None, profile: gr.OAuthProfile | None
    ) -> tuple[str, str]:
        kind = kind or EVAL
        try:
            user = submitter(profile, policy)
            accepted = validate(
                model_id, revision, user=user, api=api, store=store, policy=policy, released=released, kind=kind
            )
            job = enqueue(accepted, user=user, store=store, policy=policy, kind=kind)
        except Rejected as err:
            return f"❌ {err}", ""
        except Exception as err:
            return f"❌ The submission could not be queued: {reported(err, 'submit')}.", ""
        what = "a quick estimate of Full (the anchor items only)" if kind == QUICK else "job"
        return (
            f"✅ Queued {job.model} at `{job.revision[:12]}` ({accepted.params_b:g}B) as {what} `{job.id}`: "
            "PENDING. Its status updates below.",
            job.id,
        )

    @guard.public  # anyone signed in may upgrade a finished quick estimate (the rate limit counts it)
    def upgrade_quick(job: str, profile: gr.OAuthProfile | None) -> tuple[str, str]:
        try:
            full = upgrade(job, user=submitter(profile, policy), store=store, policy=policy)
        except Rejected as err:
            return f"❌ {queue.escaped(str(err))}", job
        except Exception as err:
            return f"❌ The upgrade could not be queued: {reported(err, 'upgrade')}.", job
        return f"✅ Queued the full evaluation of {full.model} as job `{full.id}`: it replaces the estimate.", full.id

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
                job = queue.typed_job_id(store, job)
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
        gr.HTML(f"<style>{formats.CSS}</style>", padding=False)  # every table's column widths
        with gr.Row():
            gr.Markdown(f"# {t('title')}")
            language_selector(demo)
        gr.Markdown(f"{t('intro')} **{board_lib.HUMAN_SUBSET}%**")
        timer = gr.Timer(settings.refresh_s)
        with gr.Tab(t("tab_board"), elem_id="tab-board"):
            with gr.Row():
                search = gr.Textbox(label=t("board_search"), placeholder=t("board_search_hint"), elem_id="board-search")
                families = gr.Dropdown(
                    board.families(), multiselect=True, label=t("board_family"), elem_id="board-family"
                )
                size_min = gr.Number(label=t("board_size_min"), value=0, minimum=0, elem_id="board-size-min")
                size_max = gr.Number(label=t("board_size_max"), value=1000, minimum=0, elem_id="board-size-max")
            with gr.Row():
                origins = gr.CheckboxGroup(
                    [(t(f"origin_{o}"), o) for o in board_lib.ORIGINS], value=board_lib.ORIGINS, label=t("board_rows")
                )
                comparisons = gr.CheckboxGroup(
                    board_lib.COMPARISONS,
                    value=board_lib.COMPARISONS,
                    label=t("board_comparison"),
                    elem_id="board-comparison",
                )
                columns = gr.CheckboxGroup(
                    board_lib.CHOICES,
                    value=board_lib.DEFAULT_COLUMNS[1:],
                    label=t("board_columns"),
                    elem_id="board-columns",
                )
            with gr.Row():
                sort_by = gr.Dropdown(list(board_lib.COLUMNS), value="Full", label=t("board_sort"))
                descending = gr.Checkbox(value=True, label=t("board_descending"))
            table = formats.table(
                interactive=False, pinned_columns=1, max_height=700, elem_id="board-table", label=board_lib.LEGEND
            )
            gr.Markdown(board_lib.pass_note(settings.pass_mark), elem_id="board-pass-mark")
            note = gr.Markdown(elem_id="board-note")  # why a row's Subset and Δ human are blank
            inputs = [search, families, size_min, size_max, origins, columns, sort_by, descending, comparisons]
            for control in inputs:
                control.change(show_board, inputs, table, api_name=False, show_progress="hidden")
            gr.on([demo.load], show_board, inputs, table, api_name="board", show_progress="hidden")
            gr.on(
                [demo.load, *[c.change for c in inputs]],
                board_note,
                inputs,
                note,
                api_name=False,
                show_progress="hidden",
            )
            shown_board, shown_families = gr.State(None), gr.State(None)  # what this page was last sent
            timer.tick(
                refresh_board,
                [shown_board, *inputs],
                [table, note, shown_board],
                api_name=False,
                show_progress="hidden",
            )
            timer.tick(
                refresh_families,
                [families, shown_families],
                [families, shown_families],
                api_name=False,
                show_progress="hidden",
            )
        tabs.plots_tab(board, demo, timer, guard.public)  # the paper's Figure 2 and the Subset bars
        with gr.Tab(
            t("tab_explorer"), elem_id="tab-explorer"
        ):  # search, filters, pages of items; the item page a row opens
            item_id = explorer_tab(explorer, board, demo, guard.public)
        tabs.analysis_tabs(  # Compare and Model
            settings, store, practice, item_id, demo, guard.public, board, explorer.scales
        )
        with gr.Tab(t("tab_submit"), elem_id="tab-submit"):
            if settings.hosted:
                gr.LoginButton()
                hint = t("submit_hint_hosted")
            else:
                hint = t("submit_hint_local")
            gr.Markdown(hint)
            with gr.Row():
                model_id = gr.Textbox(label=t("submit_model"), placeholder="owner/name", elem_id="submit-model")
                revision = gr.Textbox(label=t("submit_revision"), placeholder="main", elem_id="submit-revision")
                released = gr.Textbox(
                    value="",
                    label=t("submit_released"),
                    placeholder=t("submit_released_hint"),
                    info=t("submit_released_info"),
                    elem_id="submit-released",
                )
            kind = gr.Radio(
                [(t(f"submit_kind_{value}"), value) for value in KINDS],
                value=EVAL,
                label=t("submit_kind"),
                info=t("submit_kind_info"),
                elem_id="submit-kind",
            )
            submit_button = gr.Button(t("submit_button"), variant="primary", elem_id="submit-button")
            feedback = gr.Markdown(elem_id="submit-feedback")
            job_id = gr.Textbox(label=t("job_id"), elem_id="submit-job")
            status = gr.Markdown(elem_id="submit-status")
            with gr.Row():
                log_button = gr.Button(t("show_log"), size="sm", elem_id="submit-show-log")
                upgrade_button = gr.Button(t("upgrade_button"), size="sm", elem_id="submit-upgrade")
            log_text = gr.Textbox(label=t("harness_log"), lines=8, interactive=False, elem_id="submit-log")
            submit_button.click(submit, [model_id, revision, released, kind], [feedback, job_id], api_name="submit")
            upgrade_button.click(upgrade_quick, job_id, [feedback, job_id], api_name="upgrade")
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
        with gr.Tab(t("tab_queue"), elem_id="tab-queue"):
            queue_table = formats.table(interactive=False, elem_id="queue-table", label=t("queue_table"))
            gr.on([demo.load, timer.tick], show_queue, None, queue_table, api_name="queue", show_progress="hidden")
            with gr.Accordion(t("admin_actions"), open=False):
                with gr.Row(visible=not settings.hosted):  # local mode: the account and the operator's token
                    admin_name = gr.Textbox(label=t("admin_account"), elem_id="admin-account")
                    admin_key = gr.Textbox(label=t("admin_key"), type="password", elem_id="admin-key")
                with gr.Row():
                    admin_job = gr.Textbox(label=t("job_id"), elem_id="admin-job")
                    admin_reason = gr.Textbox(label=t("reason"), elem_id="admin-reason")
                with gr.Row():
                    buttons = {
                        "cancel": gr.Button(t("admin_cancel"), elem_id="admin-cancel"),
                        "requeue": gr.Button(t("admin_requeue"), elem_id="admin-requeue"),
                        "withdraw": gr.Button(t("admin_withdraw"), variant="stop", elem_id="admin-withdraw"),
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
            with gr.Tab(t("tab_practitioners"), elem_id="tab-practitioners"):
                practitioners_tab(settings, practice, demo, guard)
        with gr.Tab(t("tab_about"), elem_id="tab-about"):
            gr.Markdown(about_markdown(policy.protocol))
        tab_labels(demo, guard.public)
    return demo


def launch(demo: gr.Blocks, **options: Any) -> Any:
    """Serve the app: its queue and its languages (:data:`tcmqa.leaderboard.lang.LAUNCH`); ``options`` go to
    gradio's ``launch`` (host, port, blocking). Every start of the Space goes through here."""
    return demo.queue(default_concurrency_limit=8).launch(**lang.LAUNCH, **options)


def served_fingerprint(data: str) -> str | None:
    """The served data's fingerprint, the board's comparable group (read once, at start); None (logged: the
    board then falls back to the rows' majority) when the corpus cannot be read."""
    try:
        return board_lib.served_fingerprint(data)
    except Exception as err:
        reported(err, f"reading the served corpus {data}")
        return None
