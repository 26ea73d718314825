"""Raw sources -> rows of the corpus, responses and subset configs, with a report of every drop.

Item records (JSONL or a JSON list) go through the paper's schema filter (exactly five non-empty
options, a non-empty answer within A-E) and exact-duplicate removal; the annotation platform's
SQLite database gives the practitioner responses, with correctness recomputed from the answer set
(the metric's rule) and pseudonymous practitioner ids. ``tcmqa build`` writes these rows as Parquet;
``loading_script/tcmqa.py`` wraps them in a ``datasets`` builder.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from tcmqa.errata import apply_errata
from tcmqa.schema import DOMAIN_BY_PLATFORM_NUMBER, DOMAINS, MAX_DOMAINS_PER_RESPONSE, RATERS_PER_ITEM, STUDY
from tcmqa_metric import LETTERS, normalize_reference

# ---------------------------------------------------------------------------------------------
# The build report: every dropped record with its reason
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class BuildReport:
    """What the build kept, what it dropped and why; written as ``build_report.json``."""

    items_read: int = 0
    dropped: list[dict] = dataclasses.field(default_factory=list)  # {"where", "id", "reason", "detail"}
    notes: list[dict] = dataclasses.field(default_factory=list)  # kept, but worth knowing
    counts: dict[str, int] = dataclasses.field(default_factory=dict)  # rows per config and more

    def drop(self, where: str, record_id: object, reason: str, detail: str = "") -> None:
        self.dropped.append(
            {"where": where, "id": None if record_id is None else str(record_id), "reason": reason, "detail": detail}
        )

    def note(self, where: str, record_id: object, reason: str, detail: str = "") -> None:
        self.notes.append({"where": where, "id": str(record_id), "reason": reason, "detail": detail})

    def to_dict(self) -> dict:
        return {
            "items_read": self.items_read,
            "counts": self.counts,
            "dropped_by_reason": dict(collections.Counter(d["reason"] for d in self.dropped)),
            "notes_by_reason": dict(collections.Counter(n["reason"] for n in self.notes)),
            "dropped": self.dropped,
            "notes": self.notes,
        }


# ---------------------------------------------------------------------------------------------
# Items: read raw records, apply the paper's schema filter, drop exact duplicates
# ---------------------------------------------------------------------------------------------


def read_item_records(paths: Iterable[str | os.PathLike], report: BuildReport) -> Iterator[tuple[str, dict]]:
    """Yield ``(where, record)`` from JSONL files or JSON lists; unreadable lines are reported."""
    for path in map(Path, paths):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json" or text.lstrip().startswith("["):
            records = json.loads(text)
            if not isinstance(records, list):
                raise ValueError(f"{path}: a .json item file must hold a list of records")
            lines = [(f"{path}#{i}", r) for i, r in enumerate(records)]
        else:
            lines = []
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    lines.append((f"{path}:{n}", json.loads(line)))
                except json.JSONDecodeError as err:
                    report.items_read += 1
                    report.drop(f"{path}:{n}", None, "not_json", str(err))
        for where, record in lines:
            report.items_read += 1
            if isinstance(record, dict):
                yield where, record
            else:
                report.drop(where, None, "not_an_object", type(record).__name__)


class InvalidRecord(ValueError):
    """A raw record that fails the schema filter; ``reason`` is a stable key for the report."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


def _text(value: object) -> str:
    return "" if value is None else str(value).strip()


def clean_item(record: dict) -> dict:
    """One raw record -> one corpus row, or :class:`InvalidRecord` with the paper's filter reason."""
    record_id = record.get("id", record.get("question_id"))
    if record_id is None or _text(record_id) == "":
        raise InvalidRecord("missing_id")
    question = _text(record.get("question"))
    if not question:
        raise InvalidRecord("empty_question")
    options = record.get("choices", record.get("options"))
    if isinstance(options, list):  # ["...", ...] in A-E order
        options = (
            dict(zip(LETTERS, options)) if len(options) == len(LETTERS) else {str(i): o for i, o in enumerate(options)}
        )
    if not isinstance(options, dict):
        raise InvalidRecord("missing_options", f"options is {type(options).__name__}")
    options = {str(k).strip().upper(): _text(v) for k, v in options.items()}
    if sorted(options) != list(LETTERS):
        raise InvalidRecord("not_five_options", f"option keys {sorted(options)}")
    empty = [k for k in LETTERS if not options[k]]
    if empty:
        raise InvalidRecord("empty_option", f"empty option(s) {''.join(empty)}")
    raw_answer = record.get("answer")
    if raw_answer is None or (isinstance(raw_answer, (str, list)) and not raw_answer):
        raise InvalidRecord("empty_answer")
    try:
        answer = normalize_reference(raw_answer)
    except (ValueError, TypeError) as err:
        raise InvalidRecord("answer_outside_a_e", str(err)) from err
    difficulty = record.get("difficulty", record.get("source_difficulty"))
    return {
        "id": _text(record_id),
        "question": question,
        "options": {k: options[k] for k in LETTERS},
        "answer": answer,
        "answer_type": "multi" if len(answer) > 1 else "single",
        "explanation": _text(record.get("explanation")) or None,
        "source_difficulty": int(difficulty)
        if isinstance(difficulty, (int, float)) or _text(difficulty).isdigit()
        else None,
        "topic": _text(record.get("topic")) or None,
        "source": _text(record.get("source")) or None,
        "domains": [],
        "flagged": False,
        "release_date": None,  # an exam item was never a hidden fresh one
        "retired_date": None,
        "original_answer": answer,
    }


def filter_items(records: Iterable[tuple[str, dict]], report: BuildReport) -> list[dict]:
    """The schema filter plus exact-duplicate removal (same stem, options and answer).

    Items that share a stem but differ in options or answer are different questions and stay.
    A second record reusing an id with different content is dropped: ids must be unique.
    """
    kept: dict[str, dict] = {}
    seen: dict[tuple, str] = {}
    for where, record in records:
        try:
            item = clean_item(record)
        except InvalidRecord as err:
            report.drop(where, record.get("id", record.get("question_id")), err.reason, err.detail)
            continue
        key = (item["question"], tuple(item["options"].values()), tuple(item["answer"]))
        if key in seen:
            report.drop(where, item["id"], "duplicate", f"same stem, options and answer as id {seen[key]}")
        elif item["id"] in kept:
            report.drop(where, item["id"], "duplicate_id", "id already used by a different item")
        else:
            seen[key] = item["id"]
            kept[item["id"]] = item
    return list(kept.values())


# ---------------------------------------------------------------------------------------------
# Responses: the annotation platform's SQLite database
# ---------------------------------------------------------------------------------------------

# The annotation platform's tables, as ``tcmqa build --platform-db`` reads them (read_responses).
PLATFORM_SCHEMA = """
CREATE TABLE user (user_id INTEGER PRIMARY KEY, username VARCHAR(64), assigned_questions TEXT);
CREATE TABLE questions (question_id INTEGER PRIMARY KEY, question VARCHAR(350), choices TEXT, answer VARCHAR(100));
CREATE TABLE user_interactions (
    user_id INTEGER NOT NULL, question_id INTEGER NOT NULL, correctness INTEGER NOT NULL,
    selected_choices TEXT, individual_question_time FLOAT NOT NULL, stopped_for FLOAT NOT NULL,
    selected_category TEXT, selected_difficulty INTEGER, is_flagged INTEGER NOT NULL,
    PRIMARY KEY (user_id, question_id));
"""
# What an export adds to the platform's tables (Practice.export_platform_db): the platform numbered a
# user per block with three raters (block = (user_id - 1) // 3); an export of the whole study (study and
# Space, any N, one pseudonym per person across blocks) names each user's pseudonym, block, slot and
# source, and the raters per item N, so ``tcmqa build --platform-db`` rebuilds the same rows.
EXPORT_SCHEMA = """
CREATE TABLE tcmqa_raters (
    user_id INTEGER PRIMARY KEY, practitioner_id TEXT NOT NULL, block INTEGER NOT NULL,
    rater_slot INTEGER, source TEXT NOT NULL);
CREATE TABLE tcmqa_study (raters INTEGER NOT NULL, study_raters INTEGER NOT NULL);
"""

DEFAULT_PSEUDONYM_KEY = "tcmqa-public-v1"


def pseudonym(user_id: int, key: str) -> str:
    """A study practitioner's pseudonym ("P..."): the same key and platform user give the same id in every build."""
    return "P" + hashlib.sha256(f"{key}:{user_id}".encode()).hexdigest()[:10]


def person_pseudonym(number: int, key: str) -> str:
    """A Space practitioner's pseudonym ("S...", never a study id): one per person (the store's person
    number, stable across their blocks), derived only when rows are published or exported, so a key
    change renames a person and never duplicates a response."""
    return "S" + hashlib.sha256(f"{key}:space-person:{number}".encode()).hexdigest()[:10]


def _parse_selected(raw: str | None) -> list[str]:
    """The platform stores a bare letter ("C") or a JSON list ('["B", "D"]')."""
    raw = (raw or "").strip()
    if not raw:
        return []
    value = json.loads(raw) if raw.startswith("[") else raw
    return normalize_reference(value) if value else []


def _parse_categories(raw: str | None) -> tuple[list[str], list[str]]:
    """Category numbers "1".."10" (a JSON list) -> (domain keys in Table 1 order, unknown numbers)."""
    numbers = [str(n).strip() for n in json.loads(raw)] if raw and raw.strip() else []
    keys = {DOMAIN_BY_PLATFORM_NUMBER[n] for n in numbers if n in DOMAIN_BY_PLATFORM_NUMBER}
    return [k for k in DOMAINS if k in keys], [n for n in numbers if n not in DOMAIN_BY_PLATFORM_NUMBER]


def _platform_raters(con: sqlite3.Connection, pseudonym_key: str) -> tuple[Callable[[int], dict], dict[str, int]]:
    """(user id -> practitioner_id, source, block, rater_slot), and N (``make_subset``'s raters, study_raters).

    An export names them (``EXPORT_SCHEMA``); the platform's own database follows its rule: three
    raters per block, user u in block (u - 1) // 3, slot (u - 1) % 3, pseudonym from u.
    """
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "tcmqa_raters" not in tables:
        study = RATERS_PER_ITEM

        def derived(user_id: int) -> dict:
            block, slot = divmod(int(user_id) - 1, study)
            return {
                "practitioner_id": pseudonym(user_id, pseudonym_key),
                "source": STUDY,
                "block": block,
                "rater_slot": slot,
            }

        return derived, {"raters": study, "study_raters": study}
    named = {
        u: {"practitioner_id": pid, "source": source, "block": block, "rater_slot": slot}
        for u, pid, block, slot, source in con.execute(
            "SELECT user_id, practitioner_id, block, rater_slot, source FROM tcmqa_raters"
        )
    }
    raters, study_raters = con.execute("SELECT raters, study_raters FROM tcmqa_study").fetchone()

    def exported(user_id: int) -> dict:
        if user_id not in named:
            raise KeyError(f"user {user_id} is not in tcmqa_raters")
        return named[user_id]

    return exported, {"raters": int(raters), "study_raters": int(study_raters)}


def read_responses(
    db_path: str | os.PathLike, items: dict[str, dict], report: BuildReport, pseudonym_key: str = DEFAULT_PSEUDONYM_KEY
) -> tuple[list[dict], dict[str, int]]:
    """Rows of the ``responses`` config, and N (``make_subset``'s ``raters`` and ``study_raters``);
    correctness is recomputed from the corpus answer set.

    A response to an item the schema filter dropped is dropped with it (``item_dropped``); one to
    an id no item record had is ``unknown_item``.
    """
    dropped_ids = {d["id"] for d in report.dropped if d["id"] is not None}
    if not Path(db_path).is_file():
        raise FileNotFoundError(f"platform database not found: {db_path}")
    con = sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT user_id, question_id, correctness, selected_choices, individual_question_time,"
            " stopped_for, selected_category, selected_difficulty, is_flagged"
            " FROM user_interactions ORDER BY user_id, question_id"
        ).fetchall()
        rater_of, raters = _platform_raters(con, pseudonym_key)
    finally:
        con.close()
    out = []
    for user_id, question_id, recorded, selected_raw, seconds, paused, category_raw, difficulty, flagged in rows:
        where = f"{Path(db_path).name}:user_interactions(user_id={user_id}, question_id={question_id})"
        item = items.get(str(question_id))
        if item is None:
            if str(question_id) in dropped_ids:
                report.drop(where, question_id, "item_dropped", "its item was dropped by the schema filter")
            else:
                report.drop(where, question_id, "unknown_item", "no item record has this id")
            continue
        try:
            selected = _parse_selected(selected_raw)
            domains, unknown = _parse_categories(category_raw)
            rater = rater_of(user_id)
        except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError is a ValueError
            report.drop(where, question_id, "malformed_response", str(err))
            continue
        response_id = f"{rater['practitioner_id']}-{item['id']}"
        correct = selected == item["answer"]
        if recorded is not None and bool(recorded) != correct:
            report.note(
                where,
                response_id,
                "correctness_mismatch",
                f"recorded {recorded}, recomputed {int(correct)} ({selected} vs {item['answer']})",
            )
        if unknown:
            report.note(where, response_id, "unknown_category", f"ignored category numbers {unknown}")
        if len(domains) > MAX_DOMAINS_PER_RESPONSE:
            report.note(where, response_id, "more_than_three_domains", f"{len(domains)} domains ticked")
        if difficulty is not None and not 1 <= int(difficulty) <= 5:
            report.note(where, response_id, "difficulty_out_of_range", f"{difficulty} set to null")
            difficulty = None
        out.append(
            {
                "response_id": response_id,
                "item_id": item["id"],
                "practitioner_id": rater["practitioner_id"],
                "source": rater["source"],
                "block": rater["block"],
                "rater_slot": rater["rater_slot"],
                "selected": selected,
                "correct": correct,
                "domains": domains,
                "domains_zh": [DOMAINS[k] for k in domains],
                "difficulty": difficulty,
                "flagged": bool(flagged),
                "seconds": seconds,
                "seconds_paused": paused,
            }
        )
    return out, raters


def majority(n_correct: int, raters: int) -> bool:
    """The practitioners' verdict on an item: strictly more than half of its N raters correct.

    A tie (N even, exactly N/2 correct) is not a majority: the item counts as missed.
    """
    return 2 * n_correct > raters


def make_subset(
    responses: list[dict],
    items: dict[str, dict],
    report: BuildReport,
    include_flagged: bool = False,
    raters: int = RATERS_PER_ITEM,
    study_raters: int = RATERS_PER_ITEM,
) -> list[dict]:
    """The comparison subset: each item with exactly its N responses, scored by :func:`majority`.

    An item the paper's study rated has the study's N (``study_raters``), any other the Space's N
    (``raters``: the raters per block it was given), so neither changes the other's subset. Items any
    rater flagged are left out unless asked; an item with fewer or more than its N responses is not in
    the subset.
    """
    if min(raters, study_raters) < 1:
        raise ValueError(f"raters per item must be at least 1, not {min(raters, study_raters)}")
    by_item: dict[str, list[dict]] = collections.defaultdict(list)
    for r in responses:
        by_item[r["item_id"]].append(r)
    rows = []
    for item_id, rs in by_item.items():
        n = study_raters if any(r.get("source", STUDY) == STUDY for r in rs) else raters
        if len(rs) != n:
            continue
        if not include_flagged and any(r["flagged"] for r in rs):
            report.note("subset", item_id, "flagged_excluded_from_subset", "a rater flagged this item")
            continue
        rs = sorted(rs, key=lambda r: r["practitioner_id"])
        n_correct = sum(r["correct"] for r in rs)
        rows.append(
            {
                "item_id": item_id,
                "answer_type": items[item_id]["answer_type"],
                "n_raters": n,
                "n_correct": n_correct,
                "majority_correct": majority(n_correct, n),
                "practitioner_ids": [r["practitioner_id"] for r in rs],
                "rater_correct": [r["correct"] for r in rs],
                "rater_domains": [r["domains"] for r in rs],
                "rater_difficulty": [r["difficulty"] for r in rs],
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# All configs at once
# ---------------------------------------------------------------------------------------------


def build_tables(
    items: Iterable[str | os.PathLike],
    platform_db: str | os.PathLike | None = None,
    include_flagged: bool = False,
    pseudonym_key: str | None = None,
    retired: Iterable[dict] = (),
    errata: Sequence[dict] = (),
) -> tuple[dict[str, list[dict]], BuildReport]:
    """Raw sources -> rows of every data config, and the report of what was dropped.

    ``retired``: fresh items made public (``Store.retired_fresh_items``, corpus rows with their
    ``release_date`` and ``retired_date``), added after the exam items; one whose id is taken is dropped.
    ``errata``: checked errata (``tcmqa.errata.read_errata``), applied to the corpus before the responses
    are scored against it, and written as the ``errata`` config; an item dropped by one is reported.
    """
    report = BuildReport()
    corpus = filter_items(read_item_records(items, report), report)
    taken, fresh = {item["id"] for item in corpus}, 0
    for row in retired:
        if row["id"] in taken:
            report.drop("fresh", row["id"], "duplicate_id", "id already used by an exam item")
            continue
        taken.add(row["id"])
        fresh += 1
        corpus.append(
            {**row, "domains": list(row["domains"]), "flagged": False, "original_answer": list(row["answer"])}
        )
    tables: dict[str, list[dict]] = {"corpus": corpus}
    if errata:
        corpus, dropped = apply_errata(corpus, errata)
        for erratum in dropped:
            report.drop("corpus", erratum["item_id"], "erratum", erratum["verdict"])
        tables = {"corpus": corpus, "errata": list(errata)}
    raters = None
    if platform_db is not None:
        key = pseudonym_key or os.environ.get("TCMQA_PSEUDONYM_KEY") or DEFAULT_PSEUDONYM_KEY
        if key == DEFAULT_PSEUDONYM_KEY:
            report.note(
                "responses",
                "-",
                "public_pseudonym_key",
                "set TCMQA_PSEUDONYM_KEY to a secret for a release: the default key is public",
            )
        by_id = {item["id"]: item for item in corpus}
        responses, raters = read_responses(platform_db, by_id, report, key)
        for r in responses:  # the corpus carries the raters' domains and any flag
            item = by_id[r["item_id"]]
            item["flagged"] = item["flagged"] or r["flagged"]
            item["domains"] = [k for k in DOMAINS if k in item["domains"] or k in r["domains"]]
        tables["responses"] = responses
        tables["subset"] = make_subset(responses, by_id, report, include_flagged, **raters)
    answer_types = collections.Counter(item["answer_type"] for item in corpus)
    report.counts = {name: len(rows) for name, rows in tables.items()}
    report.counts.update(
        {
            "single": answer_types["single"],
            "multi": answer_types["multi"],
            "dropped": len(report.dropped),
            "flagged_items": sum(i["flagged"] for i in corpus),
            **({} if raters is None else {"raters_per_item": raters["raters"]}),
            **({"fresh_items": fresh} if fresh else {}),
        }
    )
    return tables, report
