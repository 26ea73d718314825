"""The fresh pool's rules: what a written item, a blind answer and a judgement must hold, and who may act.

The store (:mod:`tcmqa.store.pool`) keeps the lifecycle atomic and the key hidden until a reviewer's
blind answer is stored; this module checks every input before it reaches the store, one message per
field, none of which quotes the item's text:

* a written item: a stem of at most ``MAX_STEM`` characters, five distinct non-empty options of at
  most ``MAX_OPTION`` each, a key of one or more letters A–E (the answer type follows from it), an
  explanation (why each distractor is wrong) of at most ``MAX_EXPLANATION``, one to three of the
  study's domains, an intended difficulty 1–5, and the writer's statement that it is their own work,
  not taken from a paper or book; control characters are refused (line breaks only in the stem and
  the explanation); then the near-duplicate check (:mod:`tcmqa.fresh.duplicates`) against the public
  corpus and the whole pool, naming the nearest public item and its similarity when it refuses;
* a blind answer: one or more letters, a difficulty 1–5, the seconds taken;
* a judgement: key correct, exactly the keyed options correct, clear, sound TCM, original (each yes or
  no), MMLU-Redux's categories for what is wrong, and a comment (required when rejecting); the
  reviewer accepts only when all five hold and no category is ticked.

Writers and reviewers are confirmed practitioners who are not excluded; the study lead's accounts
(``exclude``, the admins) neither write nor review. The reference on fresh items takes the study's N
(``raters``) blind answers per item: two reviewers', and raters drawn for the rest.
"""

from __future__ import annotations

import dataclasses
import json
import math
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from tcmqa.fresh.duplicates import THRESHOLD, DuplicateIndex, Match
from tcmqa.schema import DOMAINS, MAX_DOMAINS_PER_RESPONSE, RATERS_PER_ITEM
from tcmqa.store import Store
from tcmqa.store.pool import JUDGEMENT, PoolRefused, WrittenItem
from tcmqa_metric import LETTERS

MAX_STEM = 1000  # characters; the sample's longest stem is 280
MAX_OPTION = 200  # the sample's longest option is 106
MAX_EXPLANATION = 4000  # the sample's longest explanation is 558; a fresh one explains every distractor
MAX_COMMENT = 2000
MAX_SECONDS = 86_400.0
DIFFICULTIES = range(1, 6)
REDUX_CATEGORIES = ("unclear_question", "unclear_options", "no_correct_option", "several_correct", "wrong_key")
SECONDS_PER_DAY = 86_400.0


@dataclasses.dataclass(frozen=True)
class Checked:
    """A written item checked: the item when it passes; else one message per field (``errors``), and the
    nearest indexed item when the near-duplicate check refused it."""

    item: WrittenItem | None
    errors: dict[str, str]
    nearest: Match | None = None
    nearest_is_public: bool = False


@dataclasses.dataclass(frozen=True)
class ImportReport:
    """An import: (line, new id) of each item stored, (line, {field: message}) of each record refused."""

    imported: list[tuple[int, str]]
    refused: list[tuple[int, dict[str, str]]]


def _control(text: str, multiline: bool) -> bool:
    """Whether the text holds a control character (NUL included); line breaks and tabs only where allowed."""
    allowed = {"\n", "\t", "\r"} if multiline else set()
    return any(unicodedata.category(c) in ("Cc", "Cs") and c not in allowed for c in text)


def _text(errors: dict[str, str], field: str, value: Any, limit: int, multiline: bool, name: str) -> str:
    if value is not None and not isinstance(value, str):
        errors[field] = f"{name} must be text"
        return ""
    text = (value or "").strip()
    if not text:
        errors[field] = f"{name} is empty"
    elif len(text) > limit:
        errors[field] = f"{name} has {len(text)} characters; at most {limit}"
    elif _control(text, multiline):
        errors[field] = f"{name} holds a control character; remove it"
    return text


def _letters(value: Any) -> list[str] | None:
    """Sorted distinct letters A–E from "BD", "B,D" or ["B", "D"]; None when anything else is there."""
    if isinstance(value, str):
        parts = [c for c in unicodedata.normalize("NFKC", value).upper() if c not in " ,、;"]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        parts = [unicodedata.normalize("NFKC", v).strip().upper() for v in value]
    else:
        return None
    if not parts or any(p not in LETTERS for p in parts):
        return None
    return sorted(set(parts))


def _options(errors: dict[str, str], value: Any) -> dict[str, str]:
    if isinstance(value, (list, tuple)) and len(value) == len(LETTERS):
        value = dict(zip(LETTERS, value, strict=True))
    if not isinstance(value, Mapping) or sorted(str(k).strip().upper() for k in value) != list(LETTERS):
        errors["options"] = "give exactly five options, A to E"
        return {}
    options = {}
    for key, text in value.items():
        letter = str(key).strip().upper()
        options[letter] = _text(errors, f"option_{letter}", text, MAX_OPTION, False, f"option {letter}")
    seen: dict[str, str] = {}
    for letter in LETTERS:
        text = options[letter]
        if text and text in seen and f"option_{letter}" not in errors:
            errors[f"option_{letter}"] = f"option {letter} repeats option {seen[text]}: five distinct options"
        seen.setdefault(text, letter)
    return {letter: options[letter] for letter in LETTERS}


def check_written(raw: Mapping[str, Any]) -> Checked:
    """Check a written item's fields (not yet the near-duplicate check: :meth:`FreshPool.check` adds it).

    ``raw`` holds ``question``, ``options`` (A–E, a mapping or five texts), ``answer`` (letters),
    ``explanation``, ``domains`` (keys of ``tcmqa.schema.DOMAINS``), ``difficulty`` (or the corpus's
    ``source_difficulty``), ``own_work`` (True) and optionally ``answer_type``, which must match the key.
    """
    errors: dict[str, str] = {}
    question = _text(errors, "question", raw.get("question"), MAX_STEM, True, "the stem")
    options = _options(errors, raw.get("options", raw.get("choices")))
    answer = _letters(raw.get("answer"))
    if answer is None:
        errors["answer"] = "the key is one or more letters A to E"
    answer_type = raw.get("answer_type")
    if answer is not None and answer_type not in (None, "", "multi" if len(answer) > 1 else "single"):
        errors["answer_type"] = "the answer type follows from the key: single for one letter, multi for several"
    explanation = _text(errors, "explanation", raw.get("explanation"), MAX_EXPLANATION, True, "the explanation")
    domains = raw.get("domains")
    if not isinstance(domains, (list, tuple)) or not all(isinstance(d, str) for d in domains):
        domains = None
    if not domains or len(set(domains)) > MAX_DOMAINS_PER_RESPONSE:
        errors["domains"] = f"choose one to {MAX_DOMAINS_PER_RESPONSE} domains"
    elif set(domains) - set(DOMAINS):
        errors["domains"] = f"unknown domain; choose from: {', '.join(DOMAINS)}"
    difficulty = raw.get("difficulty", raw.get("source_difficulty"))
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or difficulty not in DIFFICULTIES:
        errors["difficulty"] = "the intended difficulty is a whole number from 1 (easiest) to 5 (hardest)"
    if raw.get("own_work") is not True:
        errors["own_work"] = "state that the item is your own work, not taken from a paper or book"
    if errors:
        return Checked(None, errors)
    assert answer is not None and domains is not None and isinstance(difficulty, int)
    item = WrittenItem(
        question=question,
        options=options,
        answer=answer,
        explanation=explanation,
        domains=[d for d in DOMAINS if d in set(domains)],
        difficulty=difficulty,
        own_work=True,
    )
    return Checked(item, {})


def check_answer(selected: Any, difficulty: Any, seconds: Any) -> tuple[list[str], int, float]:
    """A blind answer's letters, difficulty and seconds, or ValueError saying what to fix."""
    letters = _letters(selected)
    if letters is None:
        raise ValueError("answer with one or more letters A to E")
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or difficulty not in DIFFICULTIES:
        raise ValueError("rate the difficulty from 1 (easiest) to 5 (hardest)")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"seconds must be a number from 0 to {MAX_SECONDS:.0f}")
    return letters, difficulty, float(seconds)


def check_judgement(judgement: Mapping[str, Any], problems: Iterable[str], comment: str) -> tuple[bool, list[str], str]:
    """(accepts, the categories, the comment) of a judgement, or ValueError saying what to fix.

    The reviewer accepts only when the key is correct, exactly the keyed options are correct, the item is
    clear, sound TCM and original, and no MMLU-Redux category is ticked; a rejection needs a comment (the
    writer revises from it)."""
    missing = [k for k in JUDGEMENT if not isinstance(judgement.get(k), bool)]
    if missing:
        raise ValueError(f"answer yes or no to: {', '.join(missing)}")
    ticked = list(dict.fromkeys(problems))
    unknown = [p for p in ticked if p not in REDUX_CATEGORIES]
    if unknown:
        raise ValueError(f"unknown categories {unknown}; choose from: {', '.join(REDUX_CATEGORIES)}")
    errors: dict[str, str] = {}
    text = comment.strip() if isinstance(comment, str) else ""
    if text:
        text = _text(errors, "comment", text, MAX_COMMENT, True, "the comment")
        if errors:
            raise ValueError(errors["comment"])
    accepts = all(judgement[k] for k in JUDGEMENT) and not ticked
    if not accepts and not text:
        raise ValueError("say in the comment what the writer should change")
    return accepts, ticked, text


class FreshPool:
    """The pool's rules over one store: who may act, every check before the store, the import and retiring.

    ``public`` is the public corpus (rows with ``id``, ``question`` and ``options`` or ``choices``) the
    near-duplicate check compares with; ``raters`` the study's N; ``exclude`` the study lead's accounts.
    """

    def __init__(
        self,
        store: Store,
        public: Iterable[Mapping[str, Any]],
        *,
        raters: int = RATERS_PER_ITEM,
        exclude: Collection[str] = (),
        threshold: float = THRESHOLD,
    ):
        if int(raters) < 1:
            raise ValueError(f"raters per item must be at least 1, not {raters}")
        self.store = store
        self.raters = int(raters)
        self.exclude = frozenset(exclude)
        self.threshold = threshold
        self.public = DuplicateIndex()
        self.public.extend((str(i["id"]), i["question"], i.get("options") or i["choices"]) for i in public)

    # -- who may act ----------------------------------------------------------------------------------
    def _practitioner(self, account: str | None) -> str:
        """The account, when it is a confirmed practitioner, not excluded, and not one of the study lead's."""
        if not account:
            raise PoolRefused("sign in first")
        record = self.store.practitioner(account) or {}
        if not record.get("confirmed_at"):
            raise PoolRefused("confirm that you hold a TCM licence first")
        if record.get("excluded"):
            raise PoolRefused("your account is excluded from the study")
        if account in self.exclude:
            raise PoolRefused("the study lead's accounts neither write nor review items")
        return account

    # -- writing --------------------------------------------------------------------------------------
    def pool_index(self) -> DuplicateIndex:
        """Every pool item's trigram set (any state: a rejected or retired item is not written twice)."""
        pool = DuplicateIndex()
        pool.extend(self.store.fresh_item_texts())
        return pool

    def check(
        self,
        raw: Mapping[str, Any],
        item_id: str | None = None,
        pool: DuplicateIndex | None = None,
        who: str | None = None,
    ) -> Checked:
        """:func:`check_written`, then the near-duplicate check against the public corpus and the whole pool
        (``pool``, read from the store when not given) but ``item_id`` itself when it is revised. A refusal as a
        near-duplicate is an event of the item it is near (``who`` wrote it), which the study lead's console counts."""
        checked = check_written(raw)
        if checked.item is None:
            return checked
        question, options = checked.item.question, checked.item.options
        public = self.public.nearest(question, options, self.threshold)
        match = public or (pool or self.pool_index()).nearest(question, options, self.threshold, exclude=item_id)
        if match is None:
            return checked
        where = f"public item {match.item_id}" if public else match.item_id
        message = f"too close to {where} (similarity {match.similarity:.2f}, the limit is {self.threshold:.2f})"
        if who is not None:
            self.store.note_fresh_duplicate(match.item_id, who)
        return Checked(None, {"duplicate": message + ": write an original item"}, match, public is not None)

    def write(self, account: str | None, raw: Mapping[str, Any], submit: bool = True) -> tuple[str | None, Checked]:
        """Store a new item (a draft, or submitted into review); (its id, the check), id None when refused."""
        writer = self._practitioner(account)
        checked = self.check(raw, who=writer)
        if checked.item is None:
            return None, checked
        (item_id,) = self.store.create_fresh_items(
            writer, [checked.item], submit=submit, raters=self.raters, exclude=self.exclude
        )
        return item_id, checked

    def edit(self, account: str | None, item_id: str, raw: Mapping[str, Any], submit: bool = True) -> Checked:
        """Edit a draft (and submit it), or revise a rejected item once: it goes to two new reviewers."""
        writer = self._practitioner(account)
        checked = self.check(raw, item_id=item_id, who=writer)
        if checked.item is not None:
            self.store.update_fresh_item(
                item_id, writer, checked.item, submit=submit, raters=self.raters, exclude=self.exclude
            )
        return checked

    def comments(self, account: str | None, item_id: str) -> list[dict[str, Any]]:
        """The judgements of the writer's own item once its review is over (accepted or rejected): the
        five answers, the categories and the comment of each reviewer, by revision; never who judged."""
        item = self.store.fresh_item(item_id)
        if item is None or item.writer != account:
            raise PoolRefused(f"fresh item {item_id} is not yours")
        keys = ("revision", *JUDGEMENT, "accepts", "comment")
        rows = [r for r in self.store.fresh_reviews(item_id=item_id) if r["judged_at"] is not None]
        return [{**{k: r[k] for k in keys}, "problems": json.loads(r["problems"] or "[]")} for r in rows]

    # -- reviewing ------------------------------------------------------------------------------------
    def answer(self, account: str | None, review_id: int, selected: Any, difficulty: Any, seconds: Any) -> dict:
        """Record the blind answer; the review's view, now with the key and the explanation."""
        letters, level, spent = check_answer(selected, difficulty, seconds)
        return self.store.record_fresh_answer(review_id, self._practitioner(account), letters, level, spent)

    def judge(
        self, account: str | None, review_id: int, judgement: Mapping[str, Any], problems: Iterable[str], comment: str
    ) -> str:
        """Record the judgement (after the blind answer); the item's state after it."""
        accepts, ticked, text = check_judgement(judgement, problems, comment)
        return self.store.record_fresh_judgement(
            review_id,
            self._practitioner(account),
            {k: bool(judgement[k]) for k in JUDGEMENT},
            ticked,
            text,
            accepts,
            raters=self.raters,
            exclude=self.exclude,
        )

    def reassign(self, by: str, review_id: int, reason: str, to: str | None = None) -> int:
        """The study lead gives a review not yet done to ``to`` (else the least loaded); the new review's id."""
        if not reason.strip():
            raise ValueError("give a reason for the reassignment")
        return self.store.reassign_fresh_review(
            review_id, by, reason.strip(), to, raters=self.raters, exclude=self.exclude
        )

    def fill(self) -> None:
        """Draw the reviewers and raters still missing (after practitioners confirm)."""
        self.store.fill_fresh_seats(self.raters, self.exclude)

    # -- the study lead's batch and retiring -----------------------------------------------------------
    def import_jsonl(self, path: str | Path, by: str, own_work: bool = False) -> ImportReport:
        """Externally written items (JSONL in the corpus's shape) straight into review, each checked like a
        written one; ``own_work``: the lead states, for records that do not, that they are their writers'
        own unpublished work. Every line is either stored or reported with its reasons."""
        items, refused, near = [], [], []
        pool = self.pool_index()
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                refused.append((number, {"line": f"not JSON ({err.msg} at column {err.colno})"}))
                continue
            if not isinstance(record, dict):
                refused.append((number, {"line": f"not a JSON object but {type(record).__name__}"}))
                continue
            checked = self.check({"own_work": own_work, **record}, pool=pool)
            if checked.item is None:
                refused.append((number, checked.errors))
                if checked.nearest is not None:
                    near.append(checked.nearest.item_id)
                continue
            pool.add(f"line {number} of this file", checked.item.question, checked.item.options)
            items.append((number, checked.item))
        ids = self.store.create_fresh_items(
            by, [item for _, item in items], submit=True, origin="imported", raters=self.raters, exclude=self.exclude
        )
        imported = [(number, item_id) for (number, _), item_id in zip(items, ids, strict=True)]
        stored = {f"line {number} of this file": item_id for number, item_id in imported}
        for item_id in near:  # the batch's own items by their new ids
            self.store.note_fresh_duplicate(stored.get(item_id, item_id), by)
        return ImportReport(imported, refused)


def retire(store: Store, by: str, older_than_days: float | None = None, keep_newest: int | None = None) -> list[str]:
    """Make accepted items public: those accepted more than ``older_than_days`` ago, or all but the newest
    ``keep_newest``; the retired ids (the builder adds them to the next corpus revision)."""
    if (older_than_days is None) == (keep_newest is None):
        raise ValueError("retire by age (--older-than DAYS) or to keep the newest N (--keep-newest N)")
    if older_than_days is not None and not (math.isfinite(older_than_days) and older_than_days >= 0):
        raise ValueError(f"--older-than is a number of days, 0 or more, not {older_than_days}")
    if keep_newest is not None and keep_newest < 0:
        raise ValueError(f"--keep-newest is a number of items, 0 or more, not {keep_newest}")
    older = None if older_than_days is None else older_than_days * SECONDS_PER_DAY
    return store.retire_fresh_items(by, older_than_s=older, keep_newest=keep_newest)
