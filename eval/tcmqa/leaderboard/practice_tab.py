"""The Space's Practitioners tab: sign in, confirm a licence, answer one item per screen, pause, review the
finished block; the study lead's console for admins. Its gradio components and handlers over
:mod:`tcmqa.leaderboard.practice` (the study's rules); :func:`tcmqa.leaderboard.space.build_app` calls
:func:`practitioners_tab` inside its ``gr.Tab``.
"""

from __future__ import annotations

import json
import tempfile
import time
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa.leaderboard import identity, lang
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.adjudication_tab import adjudication_console_section, adjudication_review_section
from tcmqa.leaderboard.errors import reported
from tcmqa.leaderboard.formats import table
from tcmqa.leaderboard.fresh_tab import fresh_items_section, pool_console_section
from tcmqa.leaderboard.lang import t
from tcmqa.leaderboard.practice.text import review_markdown
from tcmqa.leaderboard.settings import Settings

# each domain's key on the keyboard (shown beside it; A-E are the answers, 1-5 the difficulty)
DOMAIN_KEYS = dict(zip(practice_lib.DOMAINS, "FGHIJKLMNO", strict=True))
DOMAIN_CHOICES = [(f"{letter} · " + lang.domain_label(key), key) for key, letter in DOMAIN_KEYS.items()]
LETTERS = list("ABCDE")
# local mode: the browser remembers the name and the key of its last successful start, so a reload resumes the
# block by itself (the key is the session's secret: tcmqa.leaderboard.identity)
# (and after Enter in the name or key field, that field lets go of the focus: the item's keys work at once)
REMEMBER_JS = """(name, key) => {
  if (document.activeElement?.closest?.("#practice-name, #practice-key")) document.activeElement.blur();
  if (name && key) {
    localStorage.setItem("tcmqa-practitioner", name);
    localStorage.setItem("tcmqa-practitioner-key", key);
  }
  return [name, key];
}"""
RECALL_JS = """() => [
  localStorage.getItem("tcmqa-practitioner") || "", localStorage.getItem("tcmqa-practitioner-key") || ""
]"""
KEY_NOTE = (
    "This browser keeps the key of this name, so a reload resumes your block. To resume on another device, "
    "enter your name and this key there (keep it private): `{key}`"
)
HEARTBEAT_S = 10  # the open item's page says it is still there this often
# A-E pick an answer, 1-5 a difficulty, F-O tick or untick a domain (DOMAIN_KEYS), Enter submits: never while
# typing in a text field, never with no item on screen (paused, the block over, another tab shown); Enter submits
# wherever the focus is (a button, the one-line comment included; an input method's Enter that commits a
# composition is left alone)
KEYS_JS = """
() => {
  if (window.__tcmqaKeys) return;
  window.__tcmqaKeys = true;
  const domainKeys = DOMAIN_KEYS;
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    const t = e.target;
    const typing = t && (t.tagName === "TEXTAREA" || t.isContentEditable ||
      (t.tagName === "INPUT" && !["radio", "checkbox"].includes(t.type)));
    const work = document.querySelector("#practice-work");
    const inComment = e.key === "Enter" && t && t.closest && t.closest("#practice-comment");
    if ((typing && !inComment) || !work || !work.checkVisibility()) return;
    const key = e.key.length === 1 ? e.key.toUpperCase() : e.key;
    let target = null;
    if (key.length === 1 && key in domainKeys) {
      target = document.querySelector(`#practice-domains input[name="${domainKeys[key]}"]`);
    } else if ("ABCDE".includes(key) && key.length === 1) {
      target = document.querySelector(`#practice-single input[value="${key}"]`) ||
        document.querySelector(`#practice-multi input[name="${key}"]`);
    } else if ("12345".includes(key) && key.length === 1) {
      target = document.querySelector(`#practice-difficulty input[value="${key}"]`);
    } else if (key === "Enter") {
      target = document.querySelector("#practice-submit:not([disabled])");
    }
    if (target) {  // the page's own handlers never see it (Enter on a focused checkbox would toggle it)
      e.preventDefault();
      e.stopPropagation();
      target.click();
    }
  }, true);
}
""".replace("DOMAIN_KEYS", json.dumps({letter: key for key, letter in DOMAIN_KEYS.items()}), 1)


def _missing(answer: list[str], difficulty: Any, domains: list[str]) -> list[str]:
    """What the practitioner has still to give before this item can be recorded (the flag and comment are optional)."""
    missing = []
    if not answer:
        missing.append(lang.text("practice_missing_answer"))
    if not difficulty:
        missing.append(lang.text("practice_missing_difficulty"))
    if not domains:
        missing.append(lang.text("practice_missing_domain"))
    return missing


CONSOLE_HEADERS = {  # the console's tables (Practice's column names) as the study lead reads them
    "practitioner_id": "pseudonym",
    "accuracy": "accuracy %",
    "agreement": "agreement %",
    "median_seconds": "median s",
    "longest_same_answer_run": "same-answer run",
    "flag_comments": "flag comments",
    "last_active": "last active",
    "excluded_reason": "reason",
    "excluded_by": "by",
    "study_flags": "study flags",
    "open_slots": "open slots",
    "assigned_at": "assigned",
    "decided_by": "by",
    "decided_at": "when",
}


def _console_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A console table for the page: list cells (blocks, comments) as text one entry a line, fractions
    of a second and percentages to one decimal, short headers."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, list | tuple)).any():
            frame[column] = frame[column].map(lambda v: "\n".join(map(str, v)) if isinstance(v, list | tuple) else v)
        elif pd.api.types.is_float_dtype(frame[column]):
            frame[column] = frame[column].round(1)
    return frame.rename(columns=CONSOLE_HEADERS)


def practitioners_tab(
    settings: Settings, practice: practice_lib.PracticeLoader, demo: gr.Blocks, guard: identity.Guard
) -> None:
    """The Practitioners tab: sign in, confirm a licence, answer one item per screen (keys A–E, 1–5, Enter),
    pause, review the finished block; admins get the study lead's console. Every handler goes through
    ``guard`` (:mod:`tcmqa.leaderboard.identity`): it is handed the caller's proven account (hosted: the
    signed-in one; local: a name with its key), and a failure that is not a refusal reaches the page as its
    kind and an id, never its text.

    The clock of the item on screen is the server's (:class:`ItemClocks`, per account), so seconds and
    seconds paused stay right across pause, submit, reload and resume: while the page is open it says so
    every ``HEARTBEAT_S``; a gap longer than ``practice_lib.AWAY_S`` (the page was closed or reloaded) counts as paused,
    as does a pause; the Pause button shows the state the server holds.
    """
    refusals = (practice_lib.NotAllowed, practice_lib.DailyCapReached, ValueError)
    clocks = practice_lib.ItemClocks()
    # the page-load note for visitors, by language, for the practice version it was made at ("version")
    visitor_note: dict[str, str] = {}

    def is_admin(who: str | None) -> bool:
        return bool(who) and who in settings.practice_admins

    def paused_view(paused: bool) -> dict[Any, Any]:
        """The item's controls as the clock stands: the button always says the true state."""
        return {
            work: gr.update(visible=not paused),
            paused_note: gr.update(visible=paused, value=lang.text("practice_paused") if paused else ""),
            pause_button: gr.update(value=lang.text("practice_resume" if paused else "practice_pause")),
            submit_button: gr.update(interactive=not paused),
        }

    def console_view(who: str | None) -> dict[Any, Any]:
        return {console_box: gr.update(visible=is_admin(who))}

    def screen(who: str, note_text: str = "") -> dict[Any, Any]:
        """The account's next unanswered item, or, with the block complete, its report and review."""
        p = practice.get()
        view = p.current(who)
        out: dict[Any, Any] = {note: note_text, error: "", next_info: next_block_note(p, who), **console_view(who)}
        if view is None:
            assigned = p.assignment(who)
            if assigned:
                try:
                    report_ = p.report(who)
                    text = (
                        practice_lib.report_markdown(report_)
                        + "\n\n"
                        + review_markdown(p.review_rows(who, report_["block"]))
                    )
                except practice_lib.ReviewWaits as waits:  # a co-rater is still answering: nothing of the block
                    text = f"⏳ {waits}"
            else:
                text = "No items are left to assign: thank you."
            return {
                **out,
                item_box: gr.update(visible=False),
                item_id: "",
                single: gr.update(value=None),
                multi: gr.update(value=[]),
                review_box: gr.update(visible=True),
                report: text,
                next_button: gr.update(visible=bool(assigned)),
            }
        letters = [(f"{k}. {v}", k) for k, v in view.options.items()]
        is_multi = view.answer_type == "multi"
        return {
            **out,
            **paused_view(clocks.show(who, view.item_id, time.time())),
            item_box: gr.update(visible=True),
            review_box: gr.update(visible=False),
            report: "",
            header: f"**{view.header()}** · {lang.text('practice_answered', n=view.answered)}",
            question: practice_lib.item_markdown(view),
            single: gr.update(choices=letters, value=None, visible=not is_multi),
            multi: gr.update(choices=letters, value=[], visible=is_multi),
            item_id: view.item_id,
            domains: [],
            difficulty: None,
            flagged: False,
            comment: "",
        }

    def next_block_note(p: practice_lib.Practice, who: str | None) -> str:
        n = 0 if is_admin(who) else p.next_block_completes(who)
        if not n:
            return ""
        return lang.text("practice_next_mine" if who else "practice_next_any", n=n, s="s" if n != 1 else "")

    def refused(text: str, who: str | None = None) -> dict[Any, Any]:
        return {note: text, **console_view(who)}

    @guard.starting
    def start(who: str | None, issued: str | None, licence: bool, number: str) -> dict[Any, Any]:
        """Sign in (a new local name is issued its key, shown once and kept by the browser), then the block."""
        out = started(who, licence, number)
        if issued is None:
            return out
        return {**out, key_box: issued, note: f"{out.get(note, '')}\n\n{KEY_NOTE.format(key=issued)}".strip()}

    def started(who: str | None, licence: bool, number: str) -> dict[Any, Any]:
        if who is None:
            return refused("❌ Sign in first." if settings.hosted else "❌ Enter your name first.")
        try:
            p = practice.get()
        except Exception as err:  # the data may be unreachable (an offline Hub, a missing tree): said, not raised
            failed = reported(err, "practice_start")  # the text (a path, a host) goes to the log only
            return refused(f"❌ The items could not be loaded from {settings.data}: {failed}. Try again later.", who)
        try:
            if licence:
                p.confirm(who, True, number)
            elif not p.status(who)["confirmed"]:
                if is_admin(who):  # never a rater (Practice refuses it): the console reads everyone's work
                    return refused(f"Signed in as **{who}**, a study lead: the console is below.", who)
                return refused("❌ Confirm that you hold a TCM licence to answer.", who)
            return screen(who, lang.text("practice_signed_in", who=who))
        except refusals as err:
            return refused(f"❌ {err}", who)

    @guard.practitioner
    def resume(who: str | None) -> dict[Any, Any]:
        """On page load: the signed-in (hosted) or remembered (local: name and key) account's block, as left."""
        if who is None:  # a visitor: what a new practitioner's block would bring (cached per practice version)
            try:
                p = practice.get()
                version = p.store.practice_version()
                if visitor_note.get("version") != version:
                    visitor_note.clear()
                    visitor_note["version"] = version
                locale = lang.current()
                if locale not in visitor_note:
                    visitor_note[locale] = next_block_note(p, None)
                return {next_info: visitor_note[locale]}
            except Exception as err:  # the data may be unreachable: logged; the tab says so when they start
                reported(err, "practice_resume")
                return {note: gr.update()}
        out: dict[Any, Any] = {note: gr.update()} if settings.hosted else {name: who}
        try:
            if not practice.get().status(who)["confirmed"]:
                return {**out, **console_view(who)}
            return {**out, **screen(who, lang.text("practice_welcome_back", who=who))}
        except refusals as err:
            return {**out, **refused(f"❌ {err}", who)}

    @guard.practitioner
    def submit(
        who: str | None,
        item: str,
        one: str | None,
        many: list[str] | None,
        chosen_domains: list[str] | None,
        level: int | None,
        flag: bool,
        remark: str,
    ) -> dict[Any, Any]:
        if who is None:
            return refused("❌ Sign in first.")
        if not item:
            return refused("❌ Start or resume first.", who)
        answer = [one] if one else list(many or [])
        missing = _missing(answer, level, list(chosen_domains or []))
        if missing:
            return {error: lang.text("practice_missing", missing=lang.text("list_separator").join(missing))}
        now = time.time()
        timed = clocks.times(who, item, now)
        if timed is not None:
            seconds, paused = timed  # the whole time on the item, and the paused part of it
        elif any(r["item_id"] == item for r in practice.get().store.practice_responses(account=who)):
            seconds = paused = 0.0  # a replay of a recorded item: it records nothing, the stored times stay
        else:  # the Space restarted since the item was shown: its time is unknown and never made up
            clocks.show(who, item, now)
            return {error: "⚠️ This item's timer was lost (the Space restarted); it runs again from now: submit again."}
        try:
            recorded, _ = practice.get().submit(
                who,
                item,
                answer,
                list(chosen_domains or []),
                int(level) if level else None,
                bool(flag),
                remark or "",
                seconds,
                paused,
            )
        except ValueError as err:  # InvalidResponse names the field: said next to the controls, the item stays
            return {error: f"⚠️ {err}"}
        except (practice_lib.NotAllowed, practice_lib.DailyCapReached) as err:
            return refused(f"❌ {err}", who)
        clocks.done(who, item)
        try:
            return screen(who, lang.text("practice_recorded") if recorded else "This item was already recorded.")
        except refusals as err:
            return refused(f"❌ {err}", who)

    @guard.practitioner
    def pause(who: str | None, item: str) -> dict[Any, Any]:
        """Pause or resume the item's clock; the controls show the state the server holds."""
        if who is None or not item:
            return {note: gr.update()}
        paused = clocks.toggle(who, item, time.time())
        return paused_view(paused)

    @guard.background
    def heartbeat(who: str | None, item: str) -> None:
        if who and item:
            clocks.touch(who, item, time.time())

    @guard.practitioner
    def next_block(who: str | None) -> dict[Any, Any]:
        try:
            practice.get().assignment(who, next_block=True)
            return screen(who) if who else refused("❌ Sign in first.")
        except refusals as err:
            return refused(f"❌ {err}", who)

    # the study lead's console: the guard hands each function a proven admin or None, which Practice refuses
    def console_tables(admin: str | None) -> list[pd.DataFrame]:
        """Per practitioner, flagged items with every comment, slots, blocks, decisions (lists as text)."""
        p = practice.get()
        frames = [
            p.practitioners_table(admin),
            p.flagged_items(admin),
            p.slots_table(admin),
            p.progress(admin),
            p.decisions(admin),
        ]
        return [_console_frame(f) for f in frames]

    @guard.admin
    def console(admin: str | None) -> list[Any]:
        try:
            return ["", *console_tables(admin)]
        except refusals as err:
            return [f"❌ {err}", *[pd.DataFrame() for _ in range(5)]]

    def decided(admin: str | None, text: str) -> list[Any]:
        """The console after a decision: what was done, and the tables as they stand now."""
        try:
            return [text, *console_tables(admin)]
        except refusals as err:
            return [f"❌ {err}", *[gr.update() for _ in range(5)]]

    def refused_console(err: Exception) -> list[Any]:
        return [f"❌ {err}", *[gr.update() for _ in range(5)]]

    @guard.admin
    def exclude(admin: str | None, who: str, why: str) -> list[Any]:
        return set_excluded(admin, who, why, True)

    @guard.admin
    def include(admin: str | None, who: str, why: str) -> list[Any]:
        return set_excluded(admin, who, why, False)

    def set_excluded(admin: str | None, who: str, why: str, excluded: bool) -> list[Any]:
        who = (who or "").strip()
        if not who:
            return refused_console(ValueError("enter the practitioner's account"))
        try:
            practice.get().exclude(admin, who, why, excluded)
        except refusals as err:
            return refused_console(err)
        return decided(admin, f"{'Excluded' if excluded else 'Re-included'} **{who}**: {why.strip()}")

    @guard.admin
    def release(admin: str | None, who: str, block: float | None, why: str) -> list[Any]:
        who = (who or "").strip()
        if not who or block is None:
            return refused_console(ValueError("enter the account and the block of the slot to release"))
        try:
            practice.get().release_slot(admin, who, int(block), why)
        except refusals as err:
            return refused_console(err)
        return decided(admin, f"Released **{who}**'s slot in block {int(block)}: {why.strip()}")

    @guard.admin
    def reassign(admin: str | None, who: str, block: float | None, slot: float | None, why: str) -> list[Any]:
        who = (who or "").strip()
        if not who or block is None or slot is None:
            return refused_console(ValueError("enter the block, the slot and the account to give it to"))
        try:
            practice.get().reassign_slot(admin, int(block), int(slot), who, why)
        except refusals as err:
            return refused_console(err)
        return decided(admin, f"Slot {int(slot)} of block {int(block)} given to **{who}**: {why.strip()}")

    @guard.admin
    def export(admin: str | None) -> tuple[str, str | None]:
        try:
            folder = tempfile.mkdtemp(prefix="tcmqa-export-")
            path = practice.get().export_platform_db(admin, f"{folder}/annotation_platform.sqlite")
            return "Exported in the platform's format (`tcmqa build --platform-db`).", str(path)
        except refusals as err:
            return f"❌ {err}", None

    gr.Markdown(t("practice_hint"))
    if settings.hosted:
        gr.LoginButton()
    with gr.Row(visible=not settings.hosted):  # local mode: the name and its key (hosted: the signed-in account)
        name = gr.Textbox(label=t("practice_name"), elem_id="practice-name")
        key_box = gr.Textbox(
            label=t("practice_key"),
            type="password",
            elem_id="practice-key",
        )
    with gr.Row():
        licence = gr.Checkbox(label=t("practice_licence"), elem_id="practice-licence")
        number = gr.Textbox(label=t("practice_licence_number"), elem_id="practice-licence-number")
    start_button = gr.Button(t("practice_start"), variant="primary", elem_id="practice-start")
    note = gr.Markdown(elem_id="practice-note")
    next_info = gr.Markdown(elem_id="practice-next-info")
    item_id = gr.Textbox(visible=False, elem_id="practice-item")
    with gr.Column(visible=False, elem_id="practice-item-box") as item_box:
        header = gr.Markdown(elem_id="practice-header")
        with gr.Column(elem_id="practice-work") as work:
            question = gr.Markdown(elem_id="practice-question")
            # every letter is a choice from the start: a submission in a session the server does not know (after
            # a restart) still passes gradio's check; each item's screen labels them with its options
            single = gr.Radio(LETTERS, label=t("practice_answer_one"), visible=False, elem_id="practice-single")
            multi = gr.CheckboxGroup(LETTERS, label=t("practice_answer_many"), visible=False, elem_id="practice-multi")
            domains = gr.CheckboxGroup(DOMAIN_CHOICES, label=t("practice_domains"), elem_id="practice-domains")
            difficulty = gr.Radio([1, 2, 3, 4, 5], label=t("practice_difficulty"), elem_id="practice-difficulty")
            with gr.Row():
                flagged = gr.Checkbox(label=t("practice_flag"), elem_id="practice-flag")
                comment = gr.Textbox(label=t("practice_comment"), max_length=500, elem_id="practice-comment")
        paused_note = gr.Markdown(t("practice_paused"), visible=False, elem_id="practice-paused")
        error = gr.Markdown(elem_id="practice-error")
        with gr.Row():
            pause_button = gr.Button(t("practice_pause"), elem_id="practice-pause")
            submit_button = gr.Button(t("practice_submit"), variant="primary", elem_id="practice-submit")
        gr.Markdown(t("practice_keys"), elem_id="practice-keys")
    with gr.Column(visible=False, elem_id="practice-review-box") as review_box:
        report = gr.Markdown(elem_id="practice-report")
        next_button = gr.Button(t("practice_next"), elem_id="practice-next")
    heartbeat_timer = gr.Timer(HEARTBEAT_S)
    fresh_items_section(practice, guard, [name, key_box], demo)  # writing and reviewing fresh items
    adjudication_review_section(practice, guard, [name, key_box])  # a reviewer's verdicts on suspect keys
    with gr.Column(visible=False, elem_id="practice-console") as console_box:
        gr.Markdown(
            "## The study lead's console\nAdmins only (every action is checked against the admin list). "
            "Accuracy is against the reference answers, agreement with the co-raters on the same items; "
            "a long run of identical answers suggests clicking through."
        )
        admin_note = gr.Markdown(elem_id="console-note")
        refresh_button = gr.Button("Refresh the console", elem_id="console-refresh")
        wide = {"interactive": False, "wrap": True, "max_height": 420}
        practitioners_table = table(label="Practitioners", elem_id="console-practitioners", **wide)
        with gr.Row():
            excluded = gr.Textbox(label="Practitioner (account)", elem_id="console-account")
            reason = gr.Textbox(label="Reason (recorded with your account)", elem_id="console-reason")
        with gr.Row():
            exclude_button = gr.Button("Exclude", variant="stop", elem_id="console-exclude")
            include_button = gr.Button("Re-include", elem_id="console-include")
        with gr.Row():
            slot_block = gr.Number(None, label="Block", precision=0, elem_id="console-block")
            slot_number = gr.Number(None, label="Slot (to reassign)", precision=0, elem_id="console-slot")
            release_button = gr.Button("Release the account's slot in this block", elem_id="console-release")
            reassign_button = gr.Button("Give this slot to the account", elem_id="console-reassign")
        flagged_table = table(label="Flagged items, every comment", elem_id="console-flagged", **wide)
        slots_table = table(label="Slots", elem_id="console-slots", **wide)
        progress_table = table(label="Blocks", elem_id="console-blocks", **wide)
        decisions_table = table(label="Exclusions and re-inclusions", elem_id="console-decisions", **wide)
        export_button = gr.Button("Export the whole study (platform database)", elem_id="console-export")
        export_file = gr.File(label="annotation_platform.sqlite", height=90, elem_id="console-export-file")
        pool_console_section(practice, guard, [name, key_box])
        adjudication_console_section(practice, guard, [name, key_box])
    tables = [admin_note, practitioners_table, flagged_table, slots_table, progress_table, decisions_table]
    caller = [name, key_box]  # what the guard proves the account from (and, hosted, the profile gradio injects)
    refresh_button.click(console, caller, tables, api_name="practice_console")
    exclude_button.click(exclude, [*caller, excluded, reason], tables, api_name="practice_exclude")
    include_button.click(include, [*caller, excluded, reason], tables, api_name="practice_include")
    release_button.click(release, [*caller, excluded, slot_block, reason], tables, api_name="practice_release")
    reassign_button.click(
        reassign, [*caller, excluded, slot_block, slot_number, reason], tables, api_name="practice_reassign"
    )
    export_button.click(export, caller, [admin_note, export_file], api_name="practice_export")
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
        error,
        pause_button,
        submit_button,
        work,
        paused_note,
        item_box,
        review_box,
        next_button,
        next_info,
        name,
        key_box,
        console_box,
        report,
    ]
    # Enter in the name (or key) field starts, as the button does
    gr.on(
        [start_button.click, name.submit, key_box.submit],
        start,
        [*caller, licence, number],
        screen_outputs,
        api_name="practice_start",
    ).success(None, caller, None, js=REMEMBER_JS)
    # the remembered name and key fill their fields first: every later call of the page (the heartbeat too) sends them
    demo.load(None, None, caller, js=RECALL_JS).then(
        resume, caller, screen_outputs, api_name=False, show_progress="hidden"
    )
    demo.load(None, js=KEYS_JS)
    submit_button.click(
        submit,
        [*caller, item_id, single, multi, domains, difficulty, flagged, comment],
        screen_outputs,
        api_name="practice_submit",
        concurrency_limit=None,
    )
    pause_button.click(pause, [*caller, item_id], screen_outputs, api_name="practice_pause")
    heartbeat_timer.tick(heartbeat, [*caller, item_id], None, api_name=False, show_progress="hidden")
    next_button.click(next_block, caller, screen_outputs, api_name="practice_next")
