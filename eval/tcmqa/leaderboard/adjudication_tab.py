"""Key adjudication on the Practitioners tab: the study lead's suspect list and assignments (in the console), a
reviewer's assigned items, verdict and, once it is saved, the evidence. The rules are
:mod:`tcmqa.leaderboard.practice.adjudication`'s; every handler goes through the identity guard, which hands it
the caller's proven account (None for anyone not signed in, or not an admin where an admin is needed), and the
rules refuse the rest: a stranger, or a practitioner the item is not assigned to, reads nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa.errata import VERDICTS
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.formats import table
from tcmqa.leaderboard.identity import Guard
from tcmqa.leaderboard.practice.text import plain
from tcmqa_metric import LETTERS

REFUSALS = (practice_lib.NotAllowed, ValueError)
VERDICT_LABELS = {  # MMLU-Redux's categories, as a reviewer reads them
    "key_correct": "The key is correct",
    "wrong_key": "Wrong key (tick the right letters)",
    "no_correct_option": "No option is correct",
    "several_correct": "Several options are correct (beyond the key)",
    "unclear": "The question or the options are unclear",
    "broken_extraction": "The extraction is broken (text missing or garbled)",
}
assert tuple(VERDICT_LABELS) == VERDICTS
REVIEW_HINT = (
    "Items whose published key the study lead asked you to check. Read the item and its key, give your verdict "
    "and say why; the evidence (the practitioners' and the models' answers, the item's fit, flags and comments) "
    "is shown once your verdict is saved, and a saved verdict is final."
)


def evidence_markdown(evidence: Mapping[str, Any]) -> str:
    """The suspect list's evidence on one item, as a reviewer reads it after their verdict."""
    e = evidence
    majority = "a majority" if e["practitioner_majority_elsewhere"] else "no majority"
    lines = [
        f"### Evidence (rank {e['rank']}, score {e['score']:.1f})",
        f"- **Why it ranks here:** {plain(e['reason'])}",
        f"- **Practitioners:** {e['practitioners_alternative']} of {e['practitioners_answered']} chose "
        f"{e['alternative']}, {e['practitioners_key']} the key {e['key']} ({majority} on another answer)",
        f"- **Models:** {e['models_alternative']} of {e['models_answered']} chose {e['alternative']}, "
        f"{e['models_key']} the key {e['key']}",
        f"- **Fit:** discrimination {_number(e['discrimination'])} ± {_number(e['discrimination_se'])}, "
        f"difficulty {_number(e['difficulty'])}",
        f"- **Flags:** {e['flags']}; **comments:** {e['comments']}",
        *[f"  - “{plain(text)}”" for text in e.get("comment_texts") or []],
    ]
    return "\n".join(lines)


def _number(value: Any) -> str:
    return "n/a" if value is None or value != value else f"{value:.2f}"


def item_text(view: Mapping[str, Any]) -> str:
    """The item under review with its published key (what the verdict is about)."""
    options = [f"- **{k}.** {plain(v)}" for k, v in view["options"].items() if v]
    return "\n".join(
        [
            f"**Item {view['item_id']}**",
            "",
            plain(view["question"]),
            "",
            *options,
            "",
            f"**Published key: {view['key']}**",
        ]
    )


def adjudication_console_section(practice: practice_lib.PracticeLoader, guard: Guard, caller: list[Any]) -> None:
    """In the console: the suspect list with each rank's reason; an item assigned to two reviewers, a third when
    they disagree; every adjudication; the decided ones exported as an errata file."""
    with gr.Column(elem_id="adjudication-console"):
        gr.Markdown(
            "### Suspect keys\nEvery scored item ranked by the evidence that its key is wrong, with the reason. "
            "Assign an item to two practitioners who did not rate it; when their verdicts disagree, assign a third."
        )
        show_button = gr.Button("Show the suspect list", elem_id="adjudication-suspects-refresh")
        note = gr.Markdown(elem_id="adjudication-lead-note")
        wide = {"interactive": False, "wrap": True, "max_height": 420}
        suspects = table(label="Suspect keys, most suspect first", elem_id="adjudication-suspects", **wide)
        with gr.Row():
            item = gr.Textbox(label="Item (its id)", elem_id="adjudication-item")
            first = gr.Textbox(label="First reviewer (account)", elem_id="adjudication-first")
            second = gr.Textbox(label="Second reviewer (account)", elem_id="adjudication-second")
            assign_button = gr.Button("Assign to the two reviewers", elem_id="adjudication-assign")
        with gr.Row():
            third = gr.Textbox(label="Another reviewer, when the verdicts disagree", elem_id="adjudication-third")
            third_button = gr.Button("Assign another reviewer", elem_id="adjudication-add")
        adjudications = table(label="Adjudications", elem_id="adjudication-table", **wide)
        export_button = gr.Button("Export the decided items (errata)", elem_id="adjudication-export")
        export_file = gr.File(label="errata.jsonl", height=90, elem_id="adjudication-export-file")

    def tables(admin: str | None, text: str = "") -> list[Any]:
        p = practice.get()
        return [text, p.suspects(admin), p.adjudication_table(admin)]

    def refused(err: Exception) -> list[Any]:
        return [f"❌ {err}", gr.update(), gr.update()]

    @guard.admin
    def show(admin: str | None) -> list[Any]:
        try:
            return tables(admin)
        except REFUSALS as err:
            return [f"❌ {err}", pd.DataFrame(), pd.DataFrame()]

    @guard.admin
    def assign(admin: str | None, item_id: str, one: str, two: str) -> list[Any]:
        try:
            practice.get().assign_adjudication(admin, item_id, [one, two])
            return tables(admin, f"✅ Item {(item_id or '').strip()} assigned to {one.strip()} and {two.strip()}.")
        except REFUSALS as err:
            return refused(err)

    @guard.admin
    def add(admin: str | None, item_id: str, reviewer: str) -> list[Any]:
        try:
            practice.get().add_adjudication_reviewer(admin, item_id, reviewer)
            return tables(admin, f"✅ Item {(item_id or '').strip()} also assigned to {(reviewer or '').strip()}.")
        except REFUSALS as err:
            return refused(err)

    @guard.admin
    def export(admin: str | None) -> tuple[str, str | None]:
        import tempfile

        try:
            folder = tempfile.mkdtemp(prefix="tcmqa-errata-")
            path = practice.get().export_errata(admin, f"{folder}/errata.jsonl")
            return "Exported the decided items (`tcmqa build --errata errata.jsonl`).", str(path)
        except REFUSALS as err:
            return f"❌ {err}", None

    outputs = [note, suspects, adjudications]
    show_button.click(show, caller, outputs, api_name="adjudication_suspects")
    assign_button.click(assign, [*caller, item, first, second], outputs, api_name="adjudication_assign")
    third_button.click(add, [*caller, item, third], outputs, api_name="adjudication_add")
    export_button.click(export, caller, [note, export_file], api_name="adjudication_export")


def adjudication_review_section(practice: practice_lib.PracticeLoader, guard: Guard, caller: list[Any]) -> None:
    """A reviewer's items: one opened with its published key, the verdict form; after it, the evidence."""
    with gr.Accordion("Adjudicate keys", open=False, elem_id="adjudication-review"):
        gr.Markdown(REVIEW_HINT)
        mine = table(interactive=False, label="Assigned to you", elem_id="adjudication-mine")
        mine_refresh = gr.Button("Show my adjudications", size="sm", elem_id="adjudication-mine-refresh")
        with gr.Row():
            wanted = gr.Textbox(label="Item to open (its id)", elem_id="adjudication-open-id")
            open_button = gr.Button("Open the item", elem_id="adjudication-open")
        review_note = gr.Markdown(elem_id="adjudication-note")
        shown_item = gr.Textbox(visible=False, elem_id="adjudication-item-id")
        text = gr.Markdown(elem_id="adjudication-text")
        with gr.Column(visible=False, elem_id="adjudication-form") as form:
            verdict = gr.Radio(
                [(label, k) for k, label in VERDICT_LABELS.items()],
                label="Your verdict",
                elem_id="adjudication-verdict",
            )
            new_key = gr.CheckboxGroup(
                list(LETTERS), label="The right letters (a wrong key)", elem_id="adjudication-new-key"
            )
            comment = gr.Textbox(label="Comment: why", lines=2, elem_id="adjudication-comment")
            save_button = gr.Button("Save my verdict", variant="primary", elem_id="adjudication-save")
        evidence = gr.Markdown(elem_id="adjudication-evidence")

    def screen(who: str, view: Mapping[str, Any], note_text: str = "") -> dict[Any, Any]:
        decided = view["verdict"] is not None
        return {
            review_note: note_text
            or (f"Your verdict: **{view['verdict']}** (saved)." if decided else "Give your verdict and say why."),
            shown_item: view["item_id"],
            text: item_text(view),
            form: gr.update(visible=not decided),
            evidence: evidence_markdown(view["evidence"]) if decided else "",
            mine: practice.get().my_adjudications(who),
        }

    def closed(text_: str) -> dict[Any, Any]:
        return {review_note: text_, shown_item: "", text: "", form: gr.update(visible=False), evidence: ""}

    @guard.practitioner
    def open_item(who: str | None, item_id: str) -> dict[Any, Any]:
        try:
            p = practice.get()
            if not (item_id or "").strip():
                todo = p.my_adjudications(who)
                todo = todo[todo["to do"] != "done"]
                if not len(todo):
                    return {**closed("Nothing to adjudicate now: thank you."), mine: p.my_adjudications(who)}
                item_id = todo["item_id"].iloc[0]
            return screen(who or "", p.adjudication_view(who, item_id))
        except REFUSALS as err:
            return closed(f"❌ {err}")

    @guard.practitioner
    def save(who: str | None, item_id: str, chosen: str | None, letters: list[str] | None, why: str) -> dict[Any, Any]:
        try:
            view = practice.get().record_adjudication_verdict(who, item_id, chosen, letters, why or "")
            return {
                **screen(who or "", view, "✅ Verdict saved: the evidence is below."),
                verdict: None,
                new_key: [],
                comment: "",
            }
        except REFUSALS as err:
            return {review_note: f"❌ {err}"}

    @guard.practitioner
    def load_mine(who: str | None) -> dict[Any, Any]:
        try:
            return {mine: practice.get().my_adjudications(who)}
        except REFUSALS:
            return {mine: pd.DataFrame()}

    outputs = [review_note, shown_item, text, form, evidence, mine, verdict, new_key, comment]
    open_button.click(open_item, [*caller, wanted], outputs, api_name="adjudication_open")
    save_button.click(save, [*caller, shown_item, verdict, new_key, comment], outputs, api_name="adjudication_verdict")
    mine_refresh.click(load_mine, caller, [mine], api_name="adjudication_mine")
