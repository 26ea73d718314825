"""The Practitioners tab's fresh items: a confirmed practitioner writes an item; the reviewers of an item answer
it blind, then judge it; its writer revises a rejected item once from the comments; the study lead's console
shows the pool (ids, states, counts) and reassigns a review. The rules are :mod:`tcmqa.fresh.pool`'s; this
module lays them out and wires them, every handler through the identity guard (:mod:`tcmqa.leaderboard.identity`),
which hands it the caller's proven account (None for anyone not signed in, whom the rules refuse).

What a page shows of a hidden item: to its writer, the item, its state and the reviewers' comments; to a
reviewer, the stem and the options, and only once their blind answer is stored the key and the explanation;
to the study lead, ids, accounts, states and counts; to anyone else nothing. A refusal as a near-duplicate of
a public item shows that item (public text) and the similarity; of a pool item, neither its id nor the
similarity (an oracle on hidden text).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa.fresh.pool import REDUX_CATEGORIES, Checked
from tcmqa.leaderboard import lang
from tcmqa.leaderboard import practice as practice_lib
from tcmqa.leaderboard.formats import table
from tcmqa.leaderboard.identity import Guard
from tcmqa.leaderboard.practice.text import plain
from tcmqa.store import PoolRefused
from tcmqa.store.pool import JUDGEMENT, REVIEWER
from tcmqa_metric import LETTERS

FIELDS = ("question", *(f"option_{letter}" for letter in LETTERS), "answer", "explanation", "domains")
FIELDS += ("difficulty", "own_work", "duplicate")
SHOWN_AT = {"options": "option_A", "answer_type": "answer"}  # a check's field -> the message box that shows it
HOLDS = {  # the judgement's five questions, each ticked when it holds
    "key_correct": "The key is correct",
    "keyed_exact": "Exactly the keyed options are correct",
    "clear": "The item is clear",
    "sound": "It is sound TCM",
    "original": "It is original (not from a paper or book)",
}
CATEGORIES = {  # MMLU-Redux's categories of what is wrong
    "unclear_question": "Unclear question",
    "unclear_options": "Unclear options",
    "no_correct_option": "No correct option",
    "several_correct": "Several correct options",
    "wrong_key": "Wrong key",
}
assert tuple(HOLDS) == JUDGEMENT and tuple(CATEGORIES) == REDUX_CATEGORIES
WRITE_HINT = (
    "Write an item in the corpus's shape: a stem, five options, the key (one or more letters), an explanation "
    "that says why each distractor is wrong, one to three domains and the difficulty you intend. It stays "
    "hidden: two other practitioners answer it blind and then judge it; once both accept, models are "
    "evaluated on it, and it is published only when it is retired."
)
REVIEW_HINT = (
    "Items written by other practitioners, assigned to you. Answer each blind first, exactly as in a block; "
    "only then are its key and explanation shown, and you judge it."
)
MINE_COLUMNS = ["item", "state", "revision", "submitted", "stem"]
REVIEW_COLUMNS = ["review", "item", "role", "to do"]
REFUSALS = (PoolRefused, practice_lib.NotAllowed, ValueError)


def _when(seconds: float | None) -> str:
    return "" if seconds is None else time.strftime("%Y-%m-%d", time.gmtime(seconds))


def nearest_markdown(checked: Checked, public: Mapping[str, Mapping[str, Any]]) -> str:
    """The near-duplicate refusal: the nearest public item in full (its text is public) with the similarity;
    for a pool item only that the pool holds one as close (its id and similarity would be an oracle)."""
    match = checked.nearest
    if match is None:
        return ""
    item = public.get(match.item_id) if checked.nearest_is_public else None
    if item is None:
        return "⚠️ Too close to an item already in the pool: write an original item."
    options = item.get("options") or item.get("choices") or {}
    lines = [f"- {letter}. {plain(text)}" for letter, text in options.items()]
    return "\n".join(
        [
            f"⚠️ Too close to the public item **{match.item_id}** (similarity {match.similarity:.2f}; "
            "an item is refused at 0.50 or above): write an original item. The public item:",
            "",
            plain(item.get("question")),
            "",
            *lines,
        ]
    )


def judgement_of(held: Sequence[str] | None) -> dict[str, bool]:
    """The five answers from the ticked boxes: each holds when ticked."""
    ticked = set(held or ())
    return {key: key in ticked for key in JUDGEMENT}


def fresh_items_section(
    practice: practice_lib.PracticeLoader, guard: Guard, caller: list[Any], demo: gr.Blocks
) -> None:
    """The writing form, the writer's items and the reviews assigned to the caller (``caller``: the components
    the guard proves the account from)."""
    clocks = practice_lib.ItemClocks()  # the blind answer's seconds, kept by the server as a block item's are
    domain_choices = [(lang.domain_label(key), key) for key in practice_lib.DOMAINS]

    with gr.Accordion("Write a fresh item", open=False, elem_id="fresh-write"):
        gr.Markdown(WRITE_HINT)
        editing = gr.Textbox(visible=False, elem_id="fresh-editing")
        stem = gr.Textbox(label="Stem", lines=3, elem_id="fresh-stem")
        errors = {"question": gr.Markdown(elem_id="fresh-error-question")}
        duplicate = gr.Markdown(elem_id="fresh-duplicate")
        options = []
        for letter in LETTERS:
            options.append(gr.Textbox(label=f"Option {letter}", elem_id=f"fresh-option-{letter.lower()}"))
            errors[f"option_{letter}"] = gr.Markdown(elem_id=f"fresh-error-option-{letter.lower()}")
        key = gr.CheckboxGroup(list(LETTERS), label="Key (one or more letters)", elem_id="fresh-key")
        errors["answer"] = gr.Markdown(elem_id="fresh-error-answer")
        explanation = gr.Textbox(
            label="Explanation: why the key is right and why each distractor is wrong",
            lines=4,
            elem_id="fresh-explanation",
        )
        errors["explanation"] = gr.Markdown(elem_id="fresh-error-explanation")
        domains = gr.CheckboxGroup(domain_choices, label=lang.t("practice_domains"), elem_id="fresh-domains")
        errors["domains"] = gr.Markdown(elem_id="fresh-error-domains")
        difficulty = gr.Radio(
            [1, 2, 3, 4, 5], label="Intended difficulty (1 easiest, 5 hardest)", elem_id="fresh-difficulty"
        )
        errors["difficulty"] = gr.Markdown(elem_id="fresh-error-difficulty")
        own_work = gr.Checkbox(
            label="This item is my own work, not taken from a paper or a book", elem_id="fresh-own-work"
        )
        errors["own_work"] = gr.Markdown(elem_id="fresh-error-own-work")
        write_button = gr.Button("Submit the item for review", variant="primary", elem_id="fresh-submit")
        write_note = gr.Markdown(elem_id="fresh-note")
        gr.Markdown("### Your items\nA rejected item comes back with the reviewers' comments: revise it once.")
        mine = table(interactive=False, wrap=True, elem_id="fresh-mine", label="Your items")
        with gr.Row():
            revise_id = gr.Textbox(label="Item to revise (its id)", elem_id="fresh-revise-item")
            revise_button = gr.Button("Load it with the comments", elem_id="fresh-revise")
        comments = gr.Markdown(elem_id="fresh-comments")
        mine_button = gr.Button("Show my items and reviews", size="sm", elem_id="fresh-mine-refresh")

    with gr.Accordion("Review fresh items", open=False, elem_id="fresh-review"):
        gr.Markdown(REVIEW_HINT)
        reviews = table(interactive=False, elem_id="fresh-reviews", label="Assigned to you")
        with gr.Row():
            wanted = gr.Number(
                None, label="Review to open (its number above; empty: your next)", precision=0, elem_id="fresh-open-id"
            )
            open_button = gr.Button("Open the review", elem_id="fresh-open")
        review_note = gr.Markdown(elem_id="fresh-review-note")
        review_id = gr.Number(None, precision=0, visible=False, elem_id="fresh-review-id")
        with gr.Column(visible=False, elem_id="fresh-blind-box") as blind_box:
            review_header = gr.Markdown(elem_id="fresh-review-header")
            review_question = gr.Markdown(elem_id="fresh-review-question")
            single = gr.Radio(list(LETTERS), label="Your answer (one letter)", elem_id="fresh-review-single")
            multi = gr.CheckboxGroup(
                list(LETTERS), label="Your answer (two or more letters)", elem_id="fresh-review-multi"
            )
            blind_difficulty = gr.Radio(
                [1, 2, 3, 4, 5], label="Difficulty for you (1 easiest, 5 hardest)", elem_id="fresh-review-difficulty"
            )
            answer_button = gr.Button("Record my blind answer", variant="primary", elem_id="fresh-answer")
        with gr.Column(visible=False, elem_id="fresh-judge-box") as judge_box:
            revealed = gr.Markdown(elem_id="fresh-revealed")
            holds = gr.CheckboxGroup(
                [(label, k) for k, label in HOLDS.items()], label="Tick each that holds", elem_id="fresh-holds"
            )
            problems = gr.CheckboxGroup(
                [(label, k) for k, label in CATEGORIES.items()], label="What is wrong", elem_id="fresh-problems"
            )
            remark = gr.Textbox(
                label="Comment for the writer (required when you reject)", lines=2, elem_id="fresh-comment"
            )
            judge_button = gr.Button("Submit my judgement", variant="primary", elem_id="fresh-judge")
    heartbeat_timer = gr.Timer(practice_lib.AWAY_S / 3)

    form = [stem, *options, key, explanation, domains, difficulty, own_work]
    boxes = [errors[f] for f in FIELDS if f != "duplicate"]

    def pool_of() -> Any:
        return practice.get().fresh_pool

    def mine_table(who: str | None) -> pd.DataFrame:
        items = pool_of().store.fresh_items(writer=who) if who else []
        rows = [
            [i.id, i.state, i.revision, _when(i.submitted_at), i.content.question[:40]] for i in items
        ]  # the writer's own items: their text is theirs
        return pd.DataFrame(rows, columns=MINE_COLUMNS)

    def reviews_table(who: str | None) -> pd.DataFrame:
        rows = []
        for r in pool_of().store.fresh_reviews(reviewer=who) if who else []:
            if r["released_at"] is not None:
                continue
            if r["answered_at"] is None:
                todo = "answer blind"
            elif r["role"] == REVIEWER and r["judged_at"] is None:
                todo = "judge"
            else:
                todo = "done"
            rows.append([r["id"], r["item_id"], r["role"], todo])
        return pd.DataFrame(rows, columns=REVIEW_COLUMNS)

    def form_values(item: Any = None) -> dict[Any, Any]:
        """The form emptied, or filled with the writer's own item (to revise it)."""
        content = item.content if item is not None else None
        values = {
            editing: item.id if item is not None else "",
            stem: content.question if content else "",
            key: list(content.answer) if content else [],
            explanation: content.explanation if content else "",
            domains: list(content.domains) if content else [],
            difficulty: content.difficulty if content else None,
            own_work: False,
        }
        for letter, box in zip(LETTERS, options, strict=True):
            values[box] = content.options[letter] if content else ""
        return values

    def messages(found: Mapping[str, str]) -> dict[Any, Any]:
        """Each check's message at its field (every other field's cleared)."""
        shown = {f: "" for f in FIELDS if f != "duplicate"}
        for field, text in found.items():
            if field != "duplicate":
                shown[SHOWN_AT.get(field, field)] = f"⚠️ {text}"
        return {errors[f]: text for f, text in shown.items()}

    @guard.practitioner
    def write(
        who: str | None,
        item_id: str,
        question: str,
        a: str,
        b: str,
        c: str,
        d: str,
        e: str,
        letters: list[str] | None,
        why: str,
        chosen: list[str] | None,
        level: Any,
        own: bool,
    ) -> dict[Any, Any]:
        """Check and store the form's item (a new one, or the revision of ``item_id``), or say what to fix."""
        raw = {
            "question": question,
            "options": dict(zip(LETTERS, (a, b, c, d, e), strict=True)),
            "answer": list(letters or []),
            "explanation": why,
            "domains": list(chosen or []),
            "difficulty": int(level) if isinstance(level, int | float) and not isinstance(level, bool) else level,
            "own_work": own is True,
        }
        cleared = {**messages({}), duplicate: ""}
        try:
            p = practice.get()
            if item_id:
                checked, stored = p.fresh_pool.edit(who, item_id, raw), item_id
            else:
                stored, checked = p.fresh_pool.write(who, raw)
        except REFUSALS as err:
            return {**cleared, write_note: f"❌ {err}"}
        if checked.item is None:
            return {
                **cleared,
                **messages(checked.errors),
                duplicate: nearest_markdown(checked, p.items),
                write_note: "❌ Not stored: fix what is marked.",
            }
        done = f"✅ **{stored}** is in review: two other practitioners answer it blind, then judge it."
        return {**cleared, **form_values(), write_note: done, mine: mine_table(who), comments: ""}

    @guard.practitioner
    def load_mine(who: str | None) -> dict[Any, Any]:
        return {mine: mine_table(who), reviews: reviews_table(who)}

    @guard.practitioner
    def revise(who: str | None, item_id: str) -> dict[Any, Any]:
        """The writer's own rejected item (or draft) in the form, with the reviewers' comments."""
        item_id = (item_id or "").strip()
        try:
            pool = pool_of()
            item = pool.store.fresh_item(item_id) if who and item_id else None
            if item is None or item.writer != who:
                raise PoolRefused(f"fresh item {item_id!r} is not yours" if who else "sign in first")
            if item.state not in ("draft", "rejected"):
                raise PoolRefused(f"fresh item {item_id} is {item.state}: only a draft or a rejected item can change")
            judged = pool.comments(who, item_id)
        except REFUSALS as err:
            return {comments: f"❌ {err}"}
        lines = [f"### Comments on {item_id}"]
        for j in judged:
            wrong = ", ".join(CATEGORIES[c] for c in j["problems"]) or "none ticked"
            verdict = "accepts" if j["accepts"] else "rejects"
            lines.append(
                f"- revision {j['revision']}, a reviewer {verdict} (what is wrong: {wrong}): {plain(j['comment'])}"
            )
        return {**form_values(item), comments: "\n".join(lines), write_note: ""}

    def review_screen(who: str, view: Mapping[str, Any], note_text: str = "") -> dict[Any, Any]:
        """The review as the store lets the reviewer read it: blind until their answer is stored."""
        letters = [(f"{k}. {v}", k) for k, v in view["options"].items()]
        is_multi = view["answer_type"] == "multi"
        answered = view["answered"]
        out: dict[Any, Any] = {
            review_note: note_text,
            review_id: view["review_id"],
            blind_box: gr.update(visible=True),
            review_header: f"**Review {view['review_id']}** · item {view['item_id']} · "
            + ("you answered it blind" if answered else "answer it blind"),
            review_question: plain(view["question"]),
            single: gr.update(
                choices=letters,
                value=(view.get("selected") or [None])[0],
                visible=not is_multi,
                interactive=not answered,
            ),
            multi: gr.update(
                choices=letters, value=view.get("selected") or [], visible=is_multi, interactive=not answered
            ),
            blind_difficulty: gr.update(interactive=not answered),
            answer_button: gr.update(visible=not answered),
            judge_box: gr.update(visible=answered and view["role"] == REVIEWER and not view["judged"]),
            reviews: reviews_table(who),
        }
        if answered:
            out[revealed] = (
                f"**Key: {', '.join(view['answer'])}** (you answered {', '.join(view['selected'])})\n\n"
                f"**Explanation.** {plain(view['explanation'])}"
            )
        else:
            out[revealed] = ""
            clocks.show(who, f"review-{view['review_id']}", time.time())
        return out

    def closed(who: str | None, text: str) -> dict[Any, Any]:
        return {
            review_note: text,
            blind_box: gr.update(visible=False),
            judge_box: gr.update(visible=False),
            revealed: "",
            review_id: None,
            reviews: reviews_table(who),
        }

    @guard.practitioner
    def open_review(who: str | None, number: float | None) -> dict[Any, Any]:
        """The caller's review ``number``, else their next seat still to do (the oldest); blind until answered."""
        try:
            store = pool_of().store
            for seat in store.fresh_reviews(reviewer=who) if who else []:
                todo = seat["answered_at"] is None or (seat["role"] == REVIEWER and seat["judged_at"] is None)
                if number:  # an empty field sends 0 or nothing; review ids start at 1
                    todo = seat["id"] == int(number)
                if seat["released_at"] is None and todo:
                    try:
                        return review_screen(who, store.fresh_review_view(seat["id"], who))
                    except PoolRefused:  # revised since: that seat is closed
                        continue
            if who is None:
                raise PoolRefused("sign in first")
            if number:
                raise PoolRefused(f"review {int(number)} is not assigned to you")
            return closed(who, "Nothing to review now: thank you.")
        except REFUSALS as err:
            return closed(who, f"❌ {err}")

    @guard.practitioner
    def answer(
        who: str | None, seat: float | None, one: str | None, many: list[str] | None, level: int | None
    ) -> dict[Any, Any]:
        """Store the blind answer with its seconds (the server's clock); then the key and explanation."""
        if seat is None:
            return {review_note: "❌ Open a review first."}
        letters = [one] if one else list(many or [])
        if not letters or not level:
            return {review_note: "⚠️ Give your answer and the difficulty before it is recorded."}
        try:
            pool = pool_of()
            pool.store.fresh_review_view(int(seat), who or "")  # refused unless the caller holds this review
        except REFUSALS as err:
            return {review_note: f"❌ {err}"}
        timed = clocks.times(who, f"review-{int(seat)}", time.time()) if who else None
        if who and timed is None:  # the Space restarted since the item was shown: its time is never made up
            clocks.show(who, f"review-{int(seat)}", time.time())
            return {review_note: "⚠️ This item's timer was lost (the Space restarted); it runs again from now."}
        seconds = 0.0 if timed is None else max(0.0, timed[0] - timed[1])  # the time worked, pauses left out
        try:
            view = pool.answer(who, int(seat), letters, int(level), round(seconds, 1))
        except REFUSALS as err:
            return {review_note: f"❌ {err}"}
        if who:
            clocks.done(who, f"review-{int(seat)}")
        judge = "judge the item below" if view["role"] == REVIEWER else "thank you (a blind answer only)"
        return review_screen(who or "", view, f"✅ Blind answer recorded: {judge}.")

    @guard.practitioner
    def judge(
        who: str | None, seat: float | None, held: list[str] | None, wrong: list[str] | None, text: str
    ) -> dict[Any, Any]:
        if seat is None:
            return {review_note: "❌ Open a review first."}
        try:
            state = pool_of().judge(who, int(seat), judgement_of(held), list(wrong or []), text or "")
        except REFUSALS as err:
            return {review_note: f"❌ {err}"}
        return {
            **closed(who, f"✅ Judgement recorded; the item is now {state.replace('_', ' ')}."),
            holds: [],
            problems: [],
            remark: "",
        }

    @guard.practitioner
    def heartbeat(who: str | None, seat: float | None) -> None:
        if who and seat is not None:
            clocks.touch(who, f"review-{int(seat)}", time.time())

    written = [*boxes, duplicate, write_note, editing, *form, mine, comments]
    write_button.click(write, [*caller, editing, *form], written, api_name="fresh_write")
    revise_button.click(revise, [*caller, revise_id], written, api_name="fresh_revise")
    shown = [review_note, review_id, blind_box, review_header, review_question, single, multi, blind_difficulty]
    shown += [answer_button, judge_box, revealed, reviews, holds, problems, remark]
    open_button.click(open_review, [*caller, wanted], shown, api_name="fresh_open_review")
    answer_button.click(answer, [*caller, review_id, single, multi, blind_difficulty], shown, api_name="fresh_answer")
    judge_button.click(judge, [*caller, review_id, holds, problems, remark], shown, api_name="fresh_judge")
    heartbeat_timer.tick(heartbeat, [*caller, review_id], None, api_name=False, show_progress="hidden")
    mine_button.click(load_mine, caller, [mine, reviews], api_name="fresh_mine")
    demo.load(load_mine, caller, [mine, reviews], api_name=False, show_progress="hidden")  # hosted: the profile


def pool_console_section(practice: practice_lib.PracticeLoader, guard: Guard, caller: list[Any]) -> None:
    """The study lead's pool in the console: items by state and the pool's measures, every item by id, the
    reviewers' load and agreement, the open reviews; a review reassigned (with a reason)."""
    with gr.Column(elem_id="pool-console"):
        _pool_console(practice, guard, caller)


def _pool_console(practice: practice_lib.PracticeLoader, guard: Guard, caller: list[Any]) -> None:
    gr.Markdown(
        "### The fresh pool\nIds, states and counts only: a hidden item's text and key are read by its writer "
        "and, after their blind answer, its reviewers."
    )
    refresh = gr.Button("Refresh the pool", elem_id="pool-refresh")
    note = gr.Markdown(elem_id="pool-note")
    wide = {"interactive": False, "wrap": True, "max_height": 420}
    summary = table(label="The pool", elem_id="pool-summary", **wide)
    items = table(label="Items", elem_id="pool-items", **wide)
    reviewers = table(label="Reviewers: load and agreement", elem_id="pool-reviewers", **wide)
    waiting = table(label="Open reviews", elem_id="pool-open", **wide)
    with gr.Row():
        seat = gr.Number(None, label="Review id (to reassign)", precision=0, elem_id="pool-review")
        to = gr.Textbox(label="Give it to (account; empty: the least loaded)", elem_id="pool-to")
        reason = gr.Textbox(label="Reason (recorded with your account)", elem_id="pool-reason")
        reassign_button = gr.Button("Reassign the review", elem_id="pool-reassign")

    def tables(admin: str | None, text: str = "") -> list[Any]:
        p = practice.get()
        frames = [p.pool_summary(admin), p.pool_items(admin), p.pool_reviewers(admin), p.pool_open_reviews(admin)]
        return [text, *frames]

    @guard.admin
    def show(admin: str | None) -> list[Any]:
        try:
            return tables(admin)
        except REFUSALS as err:
            return [f"❌ {err}", *[pd.DataFrame() for _ in range(4)]]

    @guard.admin
    def reassign(admin: str | None, review: float | None, account: str, why: str) -> list[Any]:
        try:
            if review is None:
                raise ValueError("enter the id of the review to reassign")
            new = practice.get().reassign_review(admin, int(review), why or "", (account or "").strip() or None)
            return tables(admin, f"✅ Review {int(review)} reassigned: now review {new}.")
        except REFUSALS as err:
            return [f"❌ {err}", *[gr.update() for _ in range(4)]]

    outputs = [note, summary, items, reviewers, waiting]
    refresh.click(show, caller, outputs, api_name="pool_console")
    reassign_button.click(reassign, [*caller, seat, to, reason], outputs, api_name="pool_reassign")
