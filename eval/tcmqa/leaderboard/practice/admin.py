"""The admin side of practitioner mode: progress per block, exclusions, slots, the export for ``tcmqa build``.

Only accounts in ``admins`` may call these. Every decision is stored with its reason, who decided and
when, so it holds across restarts and republishing. The export writes the annotation platform's SQLite
format with the export's own tables (``ingest.EXPORT_SCHEMA``) naming each user's pseudonym, block, slot
and source, so ``tcmqa build --platform-db`` on it rebuilds the same ``responses`` and ``subset``.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd

from tcmqa import forms
from tcmqa.ingest import EXPORT_SCHEMA, PLATFORM_SCHEMA
from tcmqa.leaderboard.practice.core import NotAllowed, counts, finished
from tcmqa.leaderboard.practice.scoring import PracticeScoring
from tcmqa.schema import DOMAINS

PLATFORM_NUMBER = {key: str(i) for i, key in enumerate(DOMAINS, 1)}  # domain key -> "1".."10"
PROGRESS_COLUMNS = [
    "block",
    "kind",
    "items",
    "slots",
    "raters",
    "excluded",
    "responses",
    "finished",
    "open_slots",
    "published",
    "retired",
]


class PracticeAdmin(PracticeScoring):
    """Admins only: progress, exclusions, slots, the platform-database export."""

    def _admin(self, account: str | None) -> str:
        if not account or account not in self.admins:
            raise NotAllowed("admins only")
        return account

    def progress(self, admin: str | None) -> pd.DataFrame:
        """Per block: kind, items, slots, raters holding a slot (excluded ones among all assigned),
        responses and raters who finished (of those that count), open slots (none in a retired block),
        published, retired (reopened after it was published: never refilled)."""
        self._admin(admin)
        snap = self.store.practice_snapshot()
        published = self._finished_blocks(snap)
        rows = []
        for block, items in sorted(snap.blocks.items()):
            members = [a for a in snap.assignments if a["block"] == block]
            counted = [a for a in members if counts(snap, a)]
            free = self._block_raters(snap, block) - sum(self._holds(snap, a) for a in members)
            rows.append(
                {
                    "block": block,
                    "kind": snap.block_kind.get(block, "fresh"),
                    "items": len(items),
                    "slots": self._block_raters(snap, block),
                    "raters": sum(self._holds(snap, a) for a in members),
                    "excluded": sum(a["account"] in snap.excluded for a in members),
                    "responses": sum(snap.activity.get((a["account"], block), (0, 0.0))[0] for a in counted),
                    "finished": sum(finished(snap, a) for a in counted),
                    "open_slots": 0 if block in snap.retired else free,
                    "published": block in published,
                    "retired": block in snap.retired,
                }
            )
        return pd.DataFrame(rows, columns=PROGRESS_COLUMNS)

    def exclude(self, admin: str | None, account: str, reason: str, excluded: bool = True) -> None:
        """Exclude a practitioner, or re-include one (``excluded=False``), with a reason; both are kept.

        An excluded practitioner's responses leave the configs, the subset and every human figure at once.
        In a block still open their slot is offered to the next new practitioner; re-included before that slot
        is refilled, they hold it again and their responses come back; once refilled, their responses stay out
        (the items were answered again by the new holder) and they get a new block when they return. A block
        that was published is retired instead: its items are public, so its slot is never handed out again
        and its items leave the subset (they are never drawn again) until the practitioner is re-included.
        """
        reason = _reason(reason, "an exclusion" if excluded else "re-including")
        admin = self._admin(admin)
        if not self.store.exclude_practitioner(account, reason, admin, excluded, self._finished_blocks):
            raise ValueError(f"no practitioner {account!r}")

    def include(self, admin: str | None, account: str, reason: str) -> None:
        """Undo an exclusion, with its own reason (see :meth:`exclude`)."""
        self.exclude(admin, account, reason, excluded=False)

    def release_slot(self, admin: str | None, account: str, block: int, reason: str) -> None:
        """Free the slot ``account`` holds in ``block`` for the next new practitioner, with a reason.

        Their answers stay stored but leave the configs (the new holder answers the whole block); a published
        block is retired instead of refilled (see :meth:`exclude`).
        """
        reason = _reason(reason, "releasing a slot")
        admin = self._admin(admin)
        if not self.store.release_practice_slot(account, int(block), reason, admin, self._finished_blocks):
            raise ValueError(f"{account!r} holds no slot in block {block}")

    def reassign_slot(self, admin: str | None, block: int, slot: int, account: str, reason: str) -> dict[str, Any]:
        """Give slot ``slot`` of ``block`` to ``account`` (a confirmed practitioner who never had this block),
        releasing whoever held it; returns the new assignment. Refused for a published or retired block."""
        reason = _reason(reason, "reassigning a slot")
        admin = self._admin(admin)
        snap = self.store.practice_snapshot()
        if int(block) not in snap.blocks:
            raise ValueError(f"no practice block {block}")
        if not 0 <= int(slot) < self._block_raters(snap, int(block)):
            raise ValueError(f"block {block} has slots 0..{self._block_raters(snap, int(block)) - 1}, not {slot}")
        try:
            self._allowed(account)
        except NotAllowed as err:
            raise ValueError(f"{account!r} cannot take a slot: {err}") from None
        return self.store.reassign_practice_slot(int(block), int(slot), account, reason, admin, self._finished_blocks)

    def export_platform_db(self, admin: str | None, path: str | os.PathLike) -> Path:
        """The whole study (the imported study and the Space's published responses: :meth:`configs`) in the
        annotation platform's SQLite format, for ``tcmqa build --platform-db``.

        Users are named by their pseudonym (no account names, e-mails or licence numbers); one platform
        user per (person, block), as on the platform; ``tcmqa_raters`` names each one's pseudonym, block,
        slot and source and ``tcmqa_study`` the raters per item, so the rebuild has the same rows.
        """
        self._admin(admin)
        path = Path(path)
        if path.exists():
            path.unlink()
        rows = self.configs()["responses"]
        users: dict[tuple[str, str, int], int] = {}
        for r in sorted(rows, key=lambda r: (r["source"] != "study", r["block"], r["rater_slot"] or 0)):
            users.setdefault((r["source"], r["practitioner_id"], r["block"]), len(users) + 1)
        assigned: dict[int, list[str]] = collections.defaultdict(list)
        for r in rows:
            assigned[users[(r["source"], r["practitioner_id"], r["block"])]].append(r["item_id"])
        slot_of = {(r["source"], r["practitioner_id"], r["block"]): r["rater_slot"] for r in rows}
        con = sqlite3.connect(path)
        try:
            con.executescript(PLATFORM_SCHEMA + EXPORT_SCHEMA)
            item_ids = sorted({r["item_id"] for r in rows})
            con.executemany(
                "INSERT INTO questions VALUES (?, ?, ?, ?)",
                [
                    (
                        i,
                        self.items[i]["question"],
                        json.dumps(self.items[i]["options"], ensure_ascii=False),
                        "".join(self.items[i]["answer"]),
                    )
                    for i in item_ids
                ],
            )
            con.executemany(
                "INSERT INTO user VALUES (?, ?, ?)",
                [(u, pid, json.dumps(sorted(assigned[u]))) for (_, pid, _), u in users.items()],
            )
            con.executemany(
                "INSERT INTO tcmqa_raters VALUES (?, ?, ?, ?, ?)",
                [(u, pid, block, slot_of[(source, pid, block)], source) for (source, pid, block), u in users.items()],
            )
            con.execute("INSERT INTO tcmqa_study VALUES (?, ?)", (self.raters, self.study_raters))
            con.executemany(
                "INSERT INTO user_interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        users[(r["source"], r["practitioner_id"], r["block"])],
                        r["item_id"],
                        int(r["correct"]),
                        json.dumps(r["selected"]) if len(r["selected"]) > 1 else "".join(r["selected"]),
                        r["seconds"] or 0.0,
                        r["seconds_paused"] or 0.0,
                        json.dumps([PLATFORM_NUMBER[k] for k in r["domains"]]),
                        r["difficulty"],
                        int(r["flagged"]),
                    )
                    for r in rows
                ],
            )
            con.commit()
        finally:
            con.close()
        return path


def _reason(text: str | None, decision: str) -> str:
    """A decision's reason, stripped: plain text of at most :data:`tcmqa.forms.MAX_REASON` characters
    (:class:`tcmqa.forms.FormError`), and given (ValueError saying which decision needs it)."""
    reason = forms.checked("reason", text, max_chars=forms.MAX_REASON, lines=True)
    if not reason:
        raise ValueError(f"{decision} needs a reason")
    return reason
