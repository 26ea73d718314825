"""The study lead's console (admins only): what each practitioner did, the flagged items, the slots and
the decisions, as tables the Practitioners tab renders.

Nothing here is published, and nothing shows an item of an open block (:func:`open_items`): no flag,
comment or reference answer of it, though each practitioner's counts and rates include their answers
there (an admin cannot rate: ``core.ADMIN_NOT_RATER``). Accuracy is against the reference answer;
agreement is with the co-raters who answered the same items (the study's and the Space's responses that
count).
"""

from __future__ import annotations

import collections
import datetime
import json
import statistics

import pandas as pd

from tcmqa.leaderboard.practice.admin import PracticeAdmin
from tcmqa.leaderboard.practice.core import counts, finished, open_items

PRACTITIONER_COLUMNS = [
    "account",
    "practitioner_id",
    "blocks",
    "answered",
    "accuracy",
    "agreement",
    "median_seconds",
    "longest_same_answer_run",
    "flags",
    "flag_comments",
    "last_active",
    "excluded",
    "excluded_reason",
    "excluded_by",
]
FLAGGED_COLUMNS = ["item_id", "question", "answer", "flags", "study_flags", "comments"]
SLOT_COLUMNS = ["block", "slot", "account", "practitioner_id", "answered", "items", "state", "assigned_at", "reason"]
DECISION_COLUMNS = ["account", "decision", "reason", "decided_by", "decided_at"]


def _when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def longest_run(answers: list[list[str]]) -> int:
    """The longest run of identical consecutive answers (a practitioner clicking through shows long runs)."""
    best = run = 0
    for i, answer in enumerate(answers):
        run = run + 1 if i and answer == answers[i - 1] else 1
        best = max(best, run)
    return best


class PracticeConsole(PracticeAdmin):
    """Read-only tables for the study lead; every method checks the caller is an admin."""

    def practitioners_table(self, admin: str | None) -> pd.DataFrame:
        """One row per Space practitioner: blocks, answered, accuracy (%) against the reference, agreement
        (%) with co-raters on the same items, median seconds per item, the longest run of identical
        answers, flags with their comments (none on an item of an open block), last active (UTC), and whether
        excluded, why and by whom."""
        self._admin(admin)
        snap = self.store.practice_snapshot()
        withheld = open_items(snap, self.raters)
        names = self._pseudonyms()
        counted = {(a["account"], a["block"]) for a in snap.assignments if counts(snap, a)}
        stored = self.store.practice_responses()
        answers: dict[str, list[tuple[str, list[str]]]] = collections.defaultdict(list)  # item -> (who, answer)
        for r in self.imported:
            answers[r["item_id"]].append((r["practitioner_id"], list(r["selected"])))
        for r in stored:
            if (r["account"], r["block"]) in counted:
                answers[r["item_id"]].append((r["account"], json.loads(r["selected"])))
        by_account: dict[str, list[dict]] = collections.defaultdict(list)
        for r in sorted(stored, key=lambda r: r["recorded_at"]):
            by_account[r["account"]].append(r)
        rows = []
        for p in self.store.practitioners():
            mine = by_account.get(p["account"], [])
            selected = [json.loads(r["selected"]) for r in mine]
            correct = [
                s == list(self.items[r["item_id"]]["answer"])
                for r, s in zip(mine, selected)
                if r["item_id"] in self.items
            ]
            agree = []
            for r, s in zip(mine, selected):
                others = [a for who, a in answers.get(r["item_id"], []) if who != p["account"]]
                agree.extend(a == s for a in others)
            seconds = [r["seconds"] for r in mine if r["seconds"] is not None]
            flags = [r for r in mine if r["flagged"] and r["item_id"] not in withheld]
            rows.append(
                {
                    "account": p["account"],
                    "practitioner_id": names.get(p["account"]),
                    "blocks": sorted({a["block"] for a in snap.assignments if a["account"] == p["account"]}),
                    "answered": len(mine),
                    "accuracy": round(100 * sum(correct) / len(correct), 1) if correct else None,
                    "agreement": round(100 * sum(agree) / len(agree), 1) if agree else None,
                    "median_seconds": statistics.median(seconds) if seconds else None,
                    "longest_same_answer_run": longest_run(selected),
                    "flags": len(flags),
                    "flag_comments": [f"{r['item_id']}: {r['comment']}" for r in flags if r["comment"]],
                    "last_active": _when(max((r["recorded_at"] for r in mine), default=None)),
                    "excluded": bool(p["excluded"]),
                    "excluded_reason": p["excluded_reason"] if p["excluded"] else None,
                    "excluded_by": p["excluded_by"] if p["excluded"] else None,
                }
            )
        return pd.DataFrame(rows, columns=PRACTITIONER_COLUMNS)

    def flagged_items(self, admin: str | None) -> pd.DataFrame:
        """Every item a practitioner flagged (here or in the study), most flags first, with every comment
        ("account: comment"); the reference answer is shown (the admin reviews the item). Items of open
        blocks are left out until their blocks are finished."""
        self._admin(admin)
        withheld = open_items(self.store.practice_snapshot(), self.raters)
        flags: dict[str, list[dict]] = collections.defaultdict(list)
        for r in self.store.practice_responses():
            if r["flagged"] and r["item_id"] not in withheld:
                flags[r["item_id"]].append(r)
        study = collections.Counter(
            r["item_id"] for r in self.imported if r["flagged"] and r["item_id"] not in withheld
        )
        rows = []
        for item_id in sorted(set(flags) | set(study)):
            item = self.items.get(item_id, {})
            rows.append(
                {
                    "item_id": item_id,
                    "question": item.get("question"),
                    "answer": "".join(item.get("answer") or []),
                    "flags": len(flags.get(item_id, [])),
                    "study_flags": study[item_id],
                    "comments": [f"{r['account']}: {r['comment']}" for r in flags.get(item_id, []) if r["comment"]],
                }
            )
        rows.sort(key=lambda r: (-(r["flags"] + r["study_flags"]), r["item_id"]))
        return pd.DataFrame(rows, columns=FLAGGED_COLUMNS)

    def slots_table(self, admin: str | None) -> pd.DataFrame:
        """Every assignment, released ones too: its block, slot, account, answered of items, and state
        ("holding", "finished", "inactive" (offered to the next new practitioner), "excluded", "released")."""
        self._admin(admin)
        snap = self.store.practice_snapshot()
        names = self._pseudonyms()
        rows = []
        for a in snap.assignments:
            if a["released_at"] is not None:
                state, reason = "released", a["released_reason"]
            elif a["account"] in snap.excluded:
                state, reason = "excluded", None
            elif finished(snap, a):
                state, reason = "finished", None
            else:
                state, reason = ("holding" if self._holds(snap, a) else "inactive"), None
            rows.append(
                {
                    "block": a["block"],
                    "slot": a["slot"],
                    "account": a["account"],
                    "practitioner_id": names.get(a["account"]),
                    "answered": snap.activity.get((a["account"], a["block"]), (0, 0.0))[0],
                    "items": len(snap.blocks.get(a["block"], [])),
                    "state": state,
                    "assigned_at": _when(a["assigned_at"]),
                    "reason": reason,
                }
            )
        return pd.DataFrame(rows, columns=SLOT_COLUMNS).sort_values(["block", "slot"], kind="stable")

    def decisions(self, admin: str | None) -> pd.DataFrame:
        """Every exclusion and re-inclusion, oldest first: account, decision, reason, who decided, when."""
        self._admin(admin)
        rows = [
            {
                "account": d["account"],
                "decision": "excluded" if d["excluded"] else "re-included",
                "reason": d["reason"],
                "decided_by": d["decided_by"],
                "decided_at": _when(d["decided_at"]),
            }
            for d in self.store.practice_exclusions()
        ]
        return pd.DataFrame(rows, columns=DECISION_COLUMNS)
