"""Accepted pool items for tests of what is done with them (evaluation, the board, back-fills), made the way
practitioners make them: written, answered blind and accepted by two reviewers, a third rater drawn for the
reference (``tcmqa.fresh.pool``, the store's pool). No tests here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tcmqa.fresh.pool import FreshPool, check_written
from tcmqa.store import Store

WRITER, RATERS = "writer", ("p1", "p2", "p3")
YES = {"key_correct": True, "keyed_exact": True, "clear": True, "sound": True, "original": True}


def accept(store: Store, items: Sequence[Mapping[str, Any]], right: Mapping[int, Sequence[bool]] = {}) -> list[str]:
    """Write ``items`` (corpus shape), have each answered blind and accepted; ``right[k]``: whether each of the
    three blind answers to item ``k`` is correct (default all). The pool ids, in order."""
    for account in (WRITER, *RATERS):
        store.confirm_licence(account)
    pool = FreshPool(store, [], raters=len(RATERS))
    ids = []
    for k, item in enumerate(items):  # one at a time: each judgement fills the seats of every item in review
        defaults = {"difficulty": item.get("source_difficulty") or 3, "explanation": item.get("explanation") or "解"}
        checked = check_written({**item, **defaults, "domains": item.get("domains") or ["other"], "own_work": True})
        assert checked.item is not None, checked.errors
        (item_id,) = store.create_fresh_items(WRITER, [checked.item], submit=True, raters=len(RATERS))
        answers = iter(right.get(k, [True] * len(RATERS)))
        wrong = next(letter for letter in "ABCDE" if letter not in item["answer"])
        while seats := [r for r in store.fresh_reviews(item_id=item_id) if _open(r)]:
            for seat in seats:
                if seat["answered_at"] is None:
                    pool.answer(seat["reviewer"], seat["id"], item["answer"] if next(answers) else wrong, 3, 30.0)
                if seat["role"] == "reviewer":
                    pool.judge(seat["reviewer"], seat["id"], YES, [], "")
        ids.append(item_id)
    return ids


def _open(review: Mapping[str, Any]) -> bool:
    done = review["judged_at"] if review["role"] == "reviewer" else review["answered_at"]
    return review["released_at"] is None and done is None
