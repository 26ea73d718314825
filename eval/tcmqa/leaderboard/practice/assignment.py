"""Blocks and the practitioner's way through one: the stratified draw, the assignment, the item, the answer.

A new block is drawn from the items that need raters most, stratified by (domain, source difficulty,
answer type); an account gets one block at a time (``Store.assign_practice_block`` makes it atomic),
sees its next unanswered item without the answer (:class:`ItemView`) and submits one response per item.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import random
from collections.abc import Sequence
from typing import Any

from tcmqa.leaderboard.practice.core import NotAllowed, PracticeCore
from tcmqa.schema import DOMAINS, MAX_DOMAINS_PER_RESPONSE
from tcmqa_metric import LETTERS

MAX_COMMENT = 500


@dataclasses.dataclass(frozen=True)
class ItemView:
    """What the browser may see of an item while the block is running: never the answer."""

    item_id: str
    block: int
    position: int  # 1-based within the block
    block_size: int
    answered: int
    question: str
    options: dict[str, str]
    answer_type: str  # "single" | "multi": the header says it, as on the platform

    def header(self) -> str:
        kind = "多选题 (multi-answer)" if self.answer_type == "multi" else "单选题 (single-answer)"
        return f"Block {self.block} · item {self.position} of {self.block_size} · {kind}"


def _stratum(item: dict) -> tuple[str, int, str]:
    domains = list(item.get("domains") or [])
    difficulty = item.get("source_difficulty")
    return (domains[0] if domains else "", -1 if difficulty is None else int(difficulty), item["answer_type"])


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


class PracticeAssignment(PracticeCore):
    """Blocks: drawn, assigned, shown item by item, answered."""

    def _make_block(self, per_block_item: dict[str, int], used: set[str]) -> list[str]:
        """Items for a new block: those needing raters most, stratified; never one the account had."""
        by_need: dict[int, list[dict]] = collections.defaultdict(list)
        for item_id, item in self.items.items():
            if item_id in used or item.get("flagged"):
                continue
            raters = self.imported_raters[item_id] + self.raters * per_block_item.get(item_id, 0)
            by_need[raters].append(item)
        chosen: list[dict] = []
        for raters in sorted(by_need):  # 0 raters first: a block of three completes them exactly
            want = self.block_size - len(chosen)
            if want <= 0:
                break
            chosen.extend(stratified_draw(by_need[raters], want, self.seed + len(per_block_item) + raters))
        return [i["id"] for i in chosen]

    def assignment(self, account: str | None, next_block: bool = False) -> dict[str, Any] | None:
        """The account's current block assignment, made on first call; ``next_block`` after finishing one."""
        account = self._allowed(account)
        current = self.store.practice_assignments(account)
        if next_block and current and not self._complete(account, current[-1]["block"]):
            next_block = False  # a block is finished before the next is given
        return self.store.assign_practice_block(account, self.raters, self.first_block, self._make_block, next_block)

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
        """Record one response; returns (recorded, the next item). A replay records nothing new.

        The item must be in the account's own block; letters within A-E (one for a single-answer
        item); up to three domains of the ten; difficulty 1-5; the comment is cut to 500 characters.
        """
        account = self._allowed(account)
        item_id = str(item_id)
        position = block_of_item = None
        for a in self.store.practice_assignments(account):
            items = self.store.practice_block_items(a["block"])
            if item_id in items:
                position, block_of_item = items.index(item_id), a["block"]
        if position is None or item_id not in self.items:
            raise NotAllowed(f"item {item_id} is not in your block")
        raw = [selected] if isinstance(selected, str) else list(selected or [])
        letters = sorted({c for x in raw for c in str(x).upper() if not c.isspace() and c not in ",;、"})
        if not letters or any(x not in LETTERS for x in letters):
            raise ValueError("choose at least one answer letter among A-E")
        if self.items[item_id]["answer_type"] == "single" and len(letters) != 1:
            raise ValueError("this is a single-answer item: choose exactly one letter")
        keys = [d for d in DOMAINS if d in set(domains)]
        unknown = set(domains) - set(DOMAINS)
        if unknown:
            raise ValueError(f"unknown domain(s) {sorted(unknown)}")
        if len(keys) > MAX_DOMAINS_PER_RESPONSE:
            raise ValueError(f"choose at most {MAX_DOMAINS_PER_RESPONSE} domains")
        if difficulty is not None and not 1 <= int(difficulty) <= 5:
            raise ValueError("difficulty is 1 (easiest) to 5 (hardest)")
        row = {
            "account": account,
            "item_id": item_id,
            "block": block_of_item,
            "position": position,
            "selected": json.dumps(letters),
            "domains": json.dumps(keys),
            "difficulty": None if difficulty is None else int(difficulty),
            "flagged": int(bool(flagged)),
            "comment": (comment or "").strip()[:MAX_COMMENT] or None,
            "seconds": None if seconds is None else max(0.0, float(seconds)),
            "seconds_paused": None if seconds_paused is None else max(0.0, float(seconds_paused)),
        }
        recorded, _ = self.store.record_practice_response(row, self.daily_cap)
        return recorded, self.current(account)
