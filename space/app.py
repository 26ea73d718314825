"""TCMQA leaderboard Space (gradio 6): Board, Plots, Item explorer, Submit, Queue, Practitioners, About.

The web process never imports an engine: it validates and enqueues submissions and reads results
from the store; workers (``tcmqa worker``) evaluate. Locally (no ``SPACE_ID``) the app starts one
worker itself, accepts local model folders and needs no sign-in::

    python space/app.py            # or: tcmqa serve
"""

from __future__ import annotations

import shlex
import tempfile
import threading
import time
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa.hub import Publisher
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard import queue
from tcmqa.leaderboard.about import probes_markdown
from tcmqa.leaderboard.explorer import Explorer
from tcmqa.leaderboard.settings import Settings
from tcmqa.leaderboard.validation import Rejected, enqueue, submitter, validate
from tcmqa.schema import CITATION, HOMEPAGE
from tcmqa.store import Store, open_store
from tcmqa.worker import LocalWorker

ABOUT = """
## Protocol ({protocol})
Each model answers every item once: its own chat template with thinking disabled, greedy decoding
(temperature 0), 16 new tokens. Two predictions come from that one generation: the letters A–E found
in the text after NFKC normalisation (exact match on the answer set: **Full**, **Single**, **Multi**,
**Subset**), and the argmax over A–E of the first token's log-probs, read by token id for all five
letters (**LP Full**). Multi-answer items also get precision/recall/F1. **Δ human** is Subset minus the
practitioners' majority vote ({human}). Rows marked *reported* are the paper's Table 4; *evaluated*
rows were run by this Space.

## Departures from the paper
*Evaluated* rows are scored with three departures from the paper's Section 2.3 (*reported* rows are
the paper's own numbers):

- **(a) Letter scan.** The text is NFKC-normalised before the scan, so full-width `Ｂ` or circled `Ⓑ`
  counts as `B`; the paper scans the raw text. Effect: Full, Single, Multi, Subset and Multi P/R/F1
  change only for a model whose text holds such characters. The paper's behaviour: re-score
  `generated_text` in the `outputs` config with the metric's `parser="paper"`.
- **(b) Letter log-probs.** All five letters are read by token id, each summed (log-sum-exp) over its
  single-token spellings; the paper takes the engine's top-k log-probs and sets letters outside them to
  −∞. Effect: LP Full can differ, and margins are always finite here, so **Conf. gap** is not comparable
  with the paper's. The paper's behaviour cannot be recovered from the stored `letter_logprobs`: it
  needs a re-run with the engine returning its top-k log-probs.
- **(c) Empty predictions.** An answer with no letter scores precision 0 in Multi P/R/F1; the paper's
  Table 5 reads as if such answers were left out of precision. Effect: multi-answer precision is lower
  here when a model gives empty answers. The paper's behaviour: drop rows with an empty `prediction`
  before averaging `precision`, or score with the metric's `empty_precision=None`.

{probes}
## Links
- Dataset: [{homepage}]({homepage}) (configs `corpus`, `responses`, `subset`, `outputs`, `results`)
- Metric: `evaluate.load("tcmqa_metric")` — exact match over answer sets, P/R/F1

## Citation
```bibtex
{citation}```
"""


def build_app(settings: Settings, store: Store | None = None, api: Any = None) -> gr.Blocks:
    """The whole UI; ``store`` and ``api`` are injectable so tests run on a real store and a fake Hub."""
    store = store or open_store(settings.store)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    policy = settings.policy()
    practice = practice_lib.PracticeLoader(
        settings.data,
        store,
        block_size=settings.practice_block_size,
        raters=settings.practice_raters,
        daily_cap=settings.practice_daily_cap,
        admins=settings.practice_admins,
    )
    board = board_lib.Board(store, practice=practice if settings.practice else None)
    explorer = Explorer(settings.data, store)

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

    def refresh_families(current: list[str]) -> Any:
        return gr.update(choices=board.families(), value=current)

    def show_plots() -> tuple[pd.DataFrame, pd.DataFrame]:
        return board_lib.plot_frames(board.frame())

    def show_item(item_id: str) -> tuple[str, pd.DataFrame, pd.DataFrame]:
        try:
            return explorer.item(item_id)
        except Exception as err:  # the data may be unreachable (offline Hub, missing tree): say so
            return f"The items could not be loaded from {settings.data}: {err}", pd.DataFrame(), pd.DataFrame()

    def submit(model_id: str, revision: str, profile: gr.OAuthProfile | None) -> tuple[str, str]:
        try:
            user = submitter(profile, policy)
            accepted = validate(model_id, revision, user=user, api=api, store=store, policy=policy)
            job = enqueue(accepted, user=user, store=store, policy=policy)
        except Rejected as err:
            return f"❌ {err}", ""
        return (
            f"✅ Queued {job.model} at `{job.revision[:12]}` ({accepted.params_b:g}B) as job `{job.id}`: "
            "PENDING. Its status updates below.",
            job.id,
        )

    def show_queue() -> pd.DataFrame:
        return queue.jobs_frame(store)

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
            inputs = [search, families, size_min, size_max, origins, columns, sort_by, descending]
            for control in inputs:
                control.change(show_board, inputs, table, api_name=False, show_progress="hidden")
            gr.on([demo.load, timer.tick], show_board, inputs, table, api_name="board", show_progress="hidden")
            timer.tick(refresh_families, families, families, api_name=False, show_progress="hidden")
        with gr.Tab("Plots"):
            scatter = gr.ScatterPlot(
                x="params_b",
                y="full",
                color="family",
                x_title="Parameters (B)",
                y_title="Full exact match (%)",
                label="Accuracy vs size",
            )
            bars = gr.BarPlot(
                x="model",
                y="subset",
                color="origin",
                sort="-y",
                y_title="Subset exact match (%)",
                label="Subset accuracy (the practitioners' reference included)",
                x_label_angle=-60,
            )
            gr.on([demo.load, timer.tick], show_plots, None, [scatter, bars], api_name="plots", show_progress="hidden")
        with gr.Tab("Item explorer"):
            item_id = gr.Textbox(label="Item id", elem_id="item-id")
            item_button = gr.Button("Show item")
            item_text = gr.Markdown()
            gr.Markdown("**Practitioners' answers**")
            item_responses = gr.Dataframe(interactive=False)
            gr.Markdown("**Models' outputs**")
            item_outputs = gr.Dataframe(interactive=False, wrap=True)
            gr.on(
                [item_button.click, item_id.submit],
                show_item,
                item_id,
                [item_text, item_responses, item_outputs],
                api_name="item",
            )
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
            submit_button = gr.Button("Submit for evaluation", variant="primary", elem_id="submit-button")
            feedback = gr.Markdown(elem_id="submit-feedback")
            job_id = gr.Textbox(label="Job id", elem_id="submit-job")
            status = gr.Markdown(elem_id="submit-status")
            submit_button.click(submit, [model_id, revision], [feedback, job_id], api_name="submit")
            status_timer = gr.Timer(2)
            gr.on(
                [job_id.change, status_timer.tick],
                lambda j: queue.job_markdown(store, j),
                job_id,
                status,
                api_name="job",
                show_progress="hidden",
            )
        with gr.Tab("Queue"):
            queue_table = gr.Dataframe(interactive=False, elem_id="queue-table", label="Evaluation requests")
            gr.on([demo.load, timer.tick], show_queue, None, queue_table, api_name="queue", show_progress="hidden")
        if settings.practice:
            with gr.Tab("Practitioners"):
                practitioners_tab(settings, practice)
        with gr.Tab("About"):
            gr.Markdown(
                ABOUT.format(
                    protocol=policy.protocol,
                    human=board_lib.HUMAN_SUBSET,
                    probes=probes_markdown(),
                    homepage=HOMEPAGE,
                    citation=CITATION,
                )
            )
    return demo


PRACTICE_HINT = (
    "Licensed TCM practitioners answer the same items as the models, under the paper's protocol: a fixed "
    "private block of items, one item per screen, the answer, up to three domains, a difficulty from 1 to 5, "
    "and a flag for a defective item. Your answers are stored at once; come back any time to resume. The "
    "reference answers are shown only once your block is complete."
)
DOMAIN_CHOICES = [(f"{zh} ({key})", key) for key, zh in practice_lib.DOMAINS.items()]


def practitioners_tab(settings: Settings, practice: practice_lib.PracticeLoader) -> None:
    """The Practitioners tab: sign in, confirm a licence, answer one item per screen, see the block's report."""
    refusals = (practice_lib.NotAllowed, practice_lib.DailyCapReached, ValueError)

    def account(name: str, profile: gr.OAuthProfile | None) -> str | None:
        if settings.hosted:  # the signed-in Hugging Face account, never a name the browser sends
            return profile.username if profile is not None else None
        return (name or "").strip() or None

    def screen(who: str, note: str = "") -> list[Any]:
        """[note, header, question, single, multi, item id, domains, difficulty, flag, comment, timing, report]."""
        p = practice.get()
        view = p.current(who)
        if view is None:
            assigned = p.assignment(who)
            report = (
                practice_lib.report_markdown(p.report(who)) if assigned else "No items are left to assign: thank you."
            )
            hidden = gr.update(visible=False, value=None)
            return [note, "", "", hidden, gr.update(visible=False, value=[]), "", [], None, False, "", {}, report]
        letters = [(f"{k}. {v}", k) for k, v in view.options.items()]
        multi = view.answer_type == "multi"
        timing = {"item_id": view.item_id, "shown_at": time.time(), "paused": 0.0, "paused_since": None}
        return [
            note,
            f"**{view.header()}** · {view.answered} answered",
            practice_lib.item_markdown(view),
            gr.update(choices=letters, value=None, visible=not multi),
            gr.update(choices=letters, value=[], visible=multi),
            view.item_id,
            [],
            None,
            False,
            "",
            timing,
            "",
        ]

    def unchanged(note: str) -> list[Any]:
        return [note, *[gr.update() for _ in range(9)], gr.update(), gr.update()]

    def start(name: str, licence: bool, number: str, profile: gr.OAuthProfile | None) -> list[Any]:
        who = account(name, profile)
        if who is None:
            return unchanged("❌ Sign in first." if settings.hosted else "❌ Enter your name first.")
        try:
            p = practice.get()
            if licence:
                p.confirm(who, True, number)
            elif not p.status(who)["confirmed"]:
                return unchanged("❌ Confirm that you hold a TCM licence to answer.")
            return screen(who, f"Signed in as **{who}**.")
        except refusals as err:
            return unchanged(f"❌ {err}")

    def submit(
        name: str,
        item_id: str,
        single: str | None,
        multi: list[str] | None,
        domains: list[str] | None,
        difficulty: int | None,
        flagged: bool,
        comment: str,
        timing: dict | None,
        profile: gr.OAuthProfile | None,
    ) -> list[Any]:
        who = account(name, profile)
        if who is None:
            return unchanged("❌ Sign in first.")
        if not item_id:
            return unchanged("❌ Start or resume first.")
        now, timing = time.time(), timing or {}
        seconds = paused = None
        if timing.get("item_id") == item_id:
            paused = timing["paused"] + (now - timing["paused_since"] if timing.get("paused_since") else 0.0)
            seconds = now - timing["shown_at"] - paused
        try:
            recorded, _ = practice.get().submit(
                who,
                item_id,
                [single] if single else (multi or []),
                domains or [],
                int(difficulty) if difficulty else None,
                bool(flagged),
                comment or "",
                seconds,
                paused,
            )
            return screen(who, "✅ Recorded." if recorded else "This item was already recorded.")
        except refusals as err:
            return unchanged(f"❌ {err}")

    def pause(timing: dict | None) -> tuple[dict, Any]:
        timing, now = dict(timing or {}), time.time()
        if not timing:
            return timing, gr.update()
        if timing.get("paused_since"):
            timing["paused"] += now - timing["paused_since"]
            timing["paused_since"] = None
            return timing, gr.update(value="暫停一下 Pause")
        timing["paused_since"] = now
        return timing, gr.update(value="繼續 Resume (paused)")

    def next_block(name: str, profile: gr.OAuthProfile | None) -> list[Any]:
        who = account(name, profile)
        try:
            practice.get().assignment(who, next_block=True)
            return screen(who)
        except refusals as err:
            return unchanged(f"❌ {err}")

    def progress(name: str, profile: gr.OAuthProfile | None) -> tuple[str, pd.DataFrame]:
        try:
            return "", practice.get().progress(account(name, profile))
        except refusals as err:
            return f"❌ {err}", pd.DataFrame()

    def exclude(name: str, who: str, reason: str, profile: gr.OAuthProfile | None) -> str:
        try:
            practice.get().exclude(account(name, profile), (who or "").strip(), reason)
            return f"Excluded **{who}**: {reason}"
        except refusals as err:
            return f"❌ {err}"

    def export(name: str, profile: gr.OAuthProfile | None) -> tuple[str, str | None]:
        try:
            folder = tempfile.mkdtemp(prefix="tcmqa-export-")
            path = practice.get().export_platform_db(account(name, profile), f"{folder}/annotation_platform.sqlite")
            return "Exported in the platform's format (`tcmqa build --platform-db`).", str(path)
        except refusals as err:
            return f"❌ {err}", None

    gr.Markdown(PRACTICE_HINT)
    if settings.hosted:
        gr.LoginButton()
        name = gr.Textbox(visible=False)
    else:
        name = gr.Textbox(label="Your name (local mode)", elem_id="practice-name")
    with gr.Row():
        licence = gr.Checkbox(label="I hold a TCM practitioner licence (asked once)", elem_id="practice-licence")
        number = gr.Textbox(
            label="Licence number (optional; kept private, never published)", elem_id="practice-licence-number"
        )
    start_button = gr.Button("Start / resume my block", variant="primary", elem_id="practice-start")
    note = gr.Markdown(elem_id="practice-note")
    header = gr.Markdown(elem_id="practice-header")
    question = gr.Markdown(elem_id="practice-question")
    single = gr.Radio([], label="Answer (one letter)", visible=False, elem_id="practice-single")
    multi = gr.CheckboxGroup([], label="Answer (two or more letters)", visible=False, elem_id="practice-multi")
    item_id = gr.Textbox(visible=False, elem_id="practice-item")
    domains = gr.CheckboxGroup(DOMAIN_CHOICES, label="Domains (up to three)", elem_id="practice-domains")
    difficulty = gr.Radio(
        [1, 2, 3, 4, 5], label="Difficulty for you (1 easiest, 5 hardest)", elem_id="practice-difficulty"
    )
    with gr.Row():
        flagged = gr.Checkbox(label="問題報錯 Flag this item as incorrect", elem_id="practice-flag")
        comment = gr.Textbox(label="Comment (optional)", max_length=500, elem_id="practice-comment")
    timing = gr.State({})
    with gr.Row():
        pause_button = gr.Button("暫停一下 Pause", elem_id="practice-pause")
        submit_button = gr.Button("Submit and next", variant="primary", elem_id="practice-submit")
    report = gr.Markdown(elem_id="practice-report")
    next_button = gr.Button("Start another block", elem_id="practice-next")
    screen_outputs = [
        note,
        header,
        question,
        single,
        multi,
        item_id,
        domains,
        difficulty,
        flagged,
        comment,
        timing,
        report,
    ]
    start_button.click(start, [name, licence, number], screen_outputs, api_name="practice_start")
    submit_button.click(
        submit,
        [name, item_id, single, multi, domains, difficulty, flagged, comment, timing],
        screen_outputs,
        api_name="practice_submit",
        concurrency_limit=None,
    )
    pause_button.click(pause, timing, [timing, pause_button], api_name=False)
    next_button.click(next_block, name, screen_outputs, api_name="practice_next")
    with gr.Accordion("Admin", open=False):
        admin_note = gr.Markdown()
        progress_button = gr.Button("Progress per block")
        progress_table = gr.Dataframe(interactive=False, label="Blocks")
        progress_button.click(progress, name, [admin_note, progress_table], api_name="practice_progress")
        with gr.Row():
            excluded = gr.Textbox(label="Account to exclude")
            reason = gr.Textbox(label="Reason (recorded)")
        exclude_button = gr.Button("Exclude")
        exclude_button.click(exclude, [name, excluded, reason], admin_note, api_name="practice_exclude")
        export_button = gr.Button("Export (platform database)")
        export_file = gr.File(label="annotation_platform.sqlite")
        export_button.click(export, name, [admin_note, export_file], api_name="practice_export")


def main() -> None:
    """Host and port come from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (a Space sets them)."""
    settings = Settings.from_env()
    store = open_store(settings.store)
    if settings.start_worker:
        LocalWorker(settings.store, settings.data, shlex.split(settings.worker_args)).start()
    if settings.publish:  # the one publisher of this store: finished jobs to the Hub, coalesced
        from huggingface_hub import HfApi

        publisher = Publisher(store, HfApi(), settings.results_repo, requests_repo=settings.requests_repo)
        publisher.import_published()  # the board starts with every row published before
        threading.Thread(target=publisher.run_forever, args=(threading.Event(),), daemon=True).start()
        if settings.practice:  # the responses and subset configs, rebuilt and committed at most every few minutes
            practice = practice_lib.PracticeLoader(
                settings.data, store, block_size=settings.practice_block_size, raters=settings.practice_raters
            )

            def source() -> tuple[str | None, Any]:
                version = store.practice_version() if store.practice_responses_exist() else None
                return version, lambda: practice.get().configs()

            threading.Thread(
                target=publisher.run_responses_forever,
                args=(threading.Event(), source, settings.responses_every_s),
                daemon=True,
            ).start()
    build_app(settings, store).queue(default_concurrency_limit=8).launch()


if __name__ == "__main__":
    main()
