"""Blocks and the practitioner's way through one: the slot plan, the stratified draw, the item, the answer.

A new practitioner refills a free slot first, then tops up items that lack raters, then gets a fresh
block stratified by (domain, source difficulty, answer type) (:meth:`PracticeAssignment._plan`, run inside
``Store.assign_practice_block``'s transaction); they see their next unanswered item without the answer
(:class:`ItemView`) and submit one complete response per item.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import random
from collections.abc import Sequence
from typing import Any

from tcmqa import forms
from tcmqa.leaderboard import lang
from tcmqa.leaderboard.practice.core import NotAllowed, PracticeCore
from tcmqa.schema import DOMAINS, MAX_DOMAINS_PER_RESPONSE
from tcmqa.store.practice import PracticeSnapshot, SlotPlan
from tcmqa_metric import LETTERS

MAX_COMMENT = 500


@dataclasses.dataclass(frozen=True)
class ItemView:
    """What the browser may see of an item while the block is running: never the answer."""

    item_id: str
    block: int
    number: int  # the block as the practitioner reads it (PracticeCore.block_number)
    position: int  # 1-based within the block
    block_size: int
    answered: int
    question: str
    options: dict[str, str]
    answer_type: str  # "single" | "multi": the header says it, as on the platform

    def header(self) -> str:
        """The item's line above its stem, in the caller's language."""
        kind = lang.text("multi_answer" if self.answer_type == "multi" else "single_answer")
        return lang.text("practice_header", block=self.number, position=self.position, size=self.block_size, kind=kind)


def _stratum(item: dict) -> tuple[str, int, str]:
    """(domain, source difficulty, answer type); an unrated item has no domain yet, so its exam source
    (the first two parts of its source path, e.g. a pharmacist or a physician exam) stands in for it."""
    domains = list(item.get("domains") or [])
    area = domains[0] if domains else "source:" + "/".join(str(item.get("source") or "").split("/")[:2])
    difficulty = item.get("source_difficulty")
    return (area, -1 if difficulty is None else int(difficulty), item["answer_type"])


def stratified_draw(pool: Sequence[dict], n: int, seed: int) -> list[dict]:
    """``n`` items from ``pool`` in proportion to its strata (largest remainder), random within each."""
    if n >= len(pool):
        chosen = list(pool)
    else:
        strata: dict[tuple, list[dict]] = collections.defaultdict(list)
        for item in pool:
            strata[_stratum(item)].append(item)
        rng = random.Random(seed)
        keys = sorted(strata)
        quotas = {k: n * len(strata[k]) / len(pool) for k in keys}
        counts = {k: int(q) for k, q in quotas.items()}
        left = n - sum(counts.values())
        for k in sorted(keys, key=lambda k: (-(quotas[k] - counts[k]), k))[:left]:
            counts[k] += 1
        chosen = []
        for k in keys:
            members = sorted(strata[k], key=lambda i: i["id"])
            chosen.extend(rng.sample(members, counts[k]))
    rng = random.Random(seed + 1)
    rng.shuffle(chosen)  # strata interleaved within the block
    return chosen


class InvalidResponse(ValueError):
    """A submission that is not a complete record; ``field`` names what to fix (the tab shows it inline)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


class PracticeAssignment(PracticeCore):
    """Blocks: drawn (top-up first), assigned slot by slot, shown item by item, answered."""

    def _planned(self, snap: PracticeSnapshot) -> collections.Counter[str]:
        """Raters each item has or will have: the study's responses plus every practice block's slots (a retired
        block's too: its items are public, so they are never drawn again, neither topped up nor fresh)."""
        planned = collections.Counter(self.imported_raters)
        for block, items in snap.blocks.items():
            for item_id in items:
                planned[item_id] += self._block_raters(snap, block)
        return planned

    def _plan(self, snap: PracticeSnapshot, account: str) -> SlotPlan | None:
        """Where a practitioner goes next, in this order:

        1. a free slot of an existing block, oldest first (a released, excluded or inactive practitioner's
           slot is refilled; the stale holder is released), sharing no item with the account's blocks; never
           a retired block's (reopened after it was published: its items are public);
        2. a top-up block: items of the study or of the Space with some but fewer than their N raters
           (the study's N for its items), those missing the fewest first, grouped into a block with as
           many slots as they miss;
        3. a fresh block of items nobody rated, stratified; None when no item is left.

        Items flagged (in the corpus or here) and items the account already had are never drawn.
        """
        mine = [a for a in snap.assignments if a["account"] == account]
        had = {a["block"] for a in mine}
        used = {item for a in mine for item in snap.blocks.get(a["block"], [])}
        for block in sorted(snap.blocks):
            if block in had or block in snap.retired or used & set(snap.blocks[block]):
                continue
            members = [a for a in snap.assignments if a["block"] == block]
            taken = {a["slot"] for a in members if self._holds(snap, a)}
            free = [slot for slot in range(self._block_raters(snap, block)) if slot not in taken]
            if free:
                stale = tuple(
                    (a["account"], block, self._release_reason(snap, a))
                    for a in members
                    if a["slot"] == free[0] and a["released_at"] is None
                )
                return SlotPlan(block=block, slot=free[0], release=stale)
        planned = self._planned(snap)
        skip = used | self._space_flagged(snap)
        pool = {i: item for i, item in self.items.items() if i not in skip and not item.get("flagged")}
        missing: dict[int, list[dict]] = collections.defaultdict(list)
        for item_id, item in pool.items():
            if 0 < planned[item_id] < self._target(item_id):
                missing[self._target(item_id) - planned[item_id]].append(item)
        new_block = max([self.first_block - 1, *snap.blocks]) + 1
        seed = self.seed + new_block
        if missing:
            need = min(missing)
            items = stratified_draw(missing[need], self.block_size, seed)
            return SlotPlan(new_block, 0, [i["id"] for i in items], raters=need, kind="top_up")
        fresh = [item for item_id, item in pool.items() if planned[item_id] == 0]
        if not fresh:
            return None
        items = stratified_draw(fresh, self.block_size, seed)
        return SlotPlan(new_block, 0, [i["id"] for i in items], raters=self.raters, kind="fresh")

    def _release_reason(self, snap: PracticeSnapshot, a: dict) -> str:
        if a["account"] in snap.excluded:
            return "excluded"
        return f"inactive for more than {self.abandon_after_s / 86400:g} days; refilled"

    def assignment(self, account: str | None, next_block: bool = False) -> dict[str, Any] | None:
        """The account's current block assignment, made on first call; ``next_block`` after finishing one.

        A practitioner whose slot was released (inactive, or by an admin) gets a new one on the next call.
        """
        account = self._allowed(account)
        current = [a for a in self.store.practice_assignments(account) if a["released_at"] is None]
        if next_block and current and not self._complete(account, current[-1]["block"]):
            next_block = False  # a block is finished before the next is given
        return self.store.assign_practice_block(account, self._plan, next_block)

    def next_block_completes(self, account: str | None = None) -> int:
        """How many subset items the block the account would be given next completes: items that reach
        exactly N raters once that block's raters have all answered it (nothing is assigned here).

        A top-up block completes every one of its items with fewer responses than a fresh block; 0 when
        no item is left to assign.
        """
        snap = self.store.practice_snapshot()
        plan = self._plan(snap, account or "")
        if plan is None:
            return 0
        planned = self._planned(snap)
        if plan.items is None:  # a free slot of a block already counted in ``planned``
            items, extra = snap.blocks[plan.block], 0
        else:
            items, extra = plan.items, plan.raters or 0
        flagged = self._space_flagged(snap)
        return sum(
            planned[i] + extra == self._target(i) and i not in flagged and not self.items[i].get("flagged")
            for i in items
        )

    def _complete(self, account: str, block: int) -> bool:
        return len(self._answered(account, block)) >= len(self.store.practice_block_items(block))

    def current(self, account: str | None) -> ItemView | None:
        """The next unanswered item of the account's block (resume), or None when the block is complete."""
        assigned = self.assignment(account)
        if assigned is None:
            return None
        block = assigned["block"]
        items = self.store.practice_block_items(block)
        answered = self._answered(account, block)  # type: ignore[arg-type]
        for position, item_id in enumerate(items):
            if item_id not in answered:
                item = self.items[item_id]
                return ItemView(
                    item_id=item_id,
                    block=block,
                    number=self.block_number(block),
                    position=position + 1,
                    block_size=len(items),
                    answered=len(answered),
                    question=item["question"],
                    options={k: item["options"][k] for k in LETTERS},
                    answer_type=item["answer_type"],
                )
        return None

    def submit(
        self,
        account: str | None,
        item_id: str,
        selected: Sequence[str] | str,
        domains: Sequence[str] = (),
        difficulty: int | None = None,
        flagged: bool = False,
        comment: str = "",
        seconds: float | None = None,
        seconds_paused: float | None = None,
    ) -> tuple[bool, ItemView | None]:
        """Record one complete response; returns (recorded, the next item). A replay records nothing new.

        The item must be in a block the account holds. Required, as on every response of the paper's
        study: the answer (letters within A-E: one for a single-answer item, two or more for a multi-answer one),
        a difficulty 1-5 and one to three domains of the ten, the seconds on the item; optional: the flag and its
        comment (at most 500 characters, no control character but newlines and tabs) and the seconds paused (0).
        Seconds are non-negative and paused is at most the total. A missing or wrong field raises
        :class:`InvalidResponse` or :class:`tcmqa.forms.FormError` (ValueErrors) naming it; the comment's form is
        checked before the store is read.
        """
        remark = forms.checked("comment", comment, max_chars=MAX_COMMENT, lines=True) or None  # before the store
        account = self._allowed(account)
        item_id = str(item_id)
        position = block_of_item = None
        for a in self.store.practice_assignments(account):
            items = self.store.practice_block_items(a["block"])
            if item_id in items and a["released_at"] is None:
                position, block_of_item = items.index(item_id), a["block"]
        if position is None or item_id not in self.items:
            raise NotAllowed(f"item {item_id} is not in your block")
        row = {
            "account": account,
            "item_id": item_id,
            "block": block_of_item,
            "position": position,
            **self._complete_record(item_id, selected, domains, difficulty, seconds, seconds_paused),
            "flagged": int(bool(flagged)),
            "comment": remark,
        }
        recorded, _ = self.store.record_practice_response(row, self.daily_cap)
        return recorded, self.current(account)

    def _complete_record(
        self,
        item_id: str,
        selected: Sequence[str] | str,
        domains: Sequence[str],
        difficulty: int | None,
        seconds: float | None,
        seconds_paused: float | None,
    ) -> dict[str, Any]:
        """The checked fields of a response, as stored; :class:`InvalidResponse` names the first wrong one."""
        raw = [selected] if isinstance(selected, str) else list(selected or [])
        letters = sorted({c for x in raw for c in str(x).upper() if not c.isspace() and c not in ",;、"})
        if not letters or any(x not in LETTERS for x in letters):
            raise InvalidResponse("answer", "choose at least one answer letter among A-E")
        if self.items[item_id]["answer_type"] == "single" and len(letters) != 1:
            raise InvalidResponse("answer", "this is a single-answer item: choose exactly one letter")
        if self.items[item_id]["answer_type"] == "multi" and len(letters) < 2:
            raise InvalidResponse("answer", "this is a multi-answer item: choose two or more letters")
        if difficulty is None or str(difficulty).strip() == "":
            raise InvalidResponse("difficulty", "rate the difficulty for you, 1 (easiest) to 5 (hardest)")
        try:
            level = int(difficulty)
        except (TypeError, ValueError):
            raise InvalidResponse(
                "difficulty", f"difficulty is 1 (easiest) to 5 (hardest), not {difficulty!r}"
            ) from None
        if not 1 <= level <= 5:
            raise InvalidResponse("difficulty", f"difficulty is 1 (easiest) to 5 (hardest), not {level}")
        unknown = set(domains or ()) - set(DOMAINS)
        if unknown:
            raise InvalidResponse("domains", f"unknown domain(s) {sorted(unknown)}")
        keys = [d for d in DOMAINS if d in set(domains or ())]
        if not keys:
            raise InvalidResponse("domains", f"choose at least one domain (at most {MAX_DOMAINS_PER_RESPONSE})")
        if len(keys) > MAX_DOMAINS_PER_RESPONSE:
            raise InvalidResponse("domains", f"choose at most {MAX_DOMAINS_PER_RESPONSE} domains")
        if seconds is None:
            raise InvalidResponse("seconds", "the seconds spent on the item are required")
        total = self._seconds("seconds", seconds)
        paused = self._seconds("seconds_paused", 0.0 if seconds_paused is None else seconds_paused)
        if paused > total:
            raise InvalidResponse("seconds_paused", f"paused {paused:g} s is more than the {total:g} s on the item")
        return {
            "selected": json.dumps(letters),
            "domains": json.dumps(keys),
            "difficulty": level,
            "seconds": total,
            "seconds_paused": paused,
        }

    @staticmethod
    def _seconds(field: str, value: float) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidResponse(field, f"not a number of seconds: {value!r}") from None
        if not math.isfinite(number) or number < 0:
            raise InvalidResponse(field, f"seconds are a finite number at least 0, not {value!r}")
        return number
