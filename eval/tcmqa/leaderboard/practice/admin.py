"""The admin side of practitioner mode: progress per block, exclusions, the export for ``tcmqa build``.

Only accounts in ``admins`` may call these. The export writes the annotation platform's SQLite format
with pseudonymous users (``ingest.pseudonym``), so ``tcmqa build --platform-db`` reads it as the study.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
from pathlib import Path

import pandas as pd

from tcmqa.ingest import PLATFORM_SCHEMA, pseudonym
from tcmqa.leaderboard.practice.core import NotAllowed, PracticeCore
from tcmqa.schema import DOMAINS

PLATFORM_NUMBER = {key: str(i) for i, key in enumerate(DOMAINS, 1)}  # domain key -> "1".."10"


class PracticeAdmin(PracticeCore):
    """Admins only: progress, exclusions, the platform-database export."""

    def _admin(self, account: str | None) -> None:
        if not account or account not in self.admins:
            raise NotAllowed("admins only")

    def progress(self, admin: str | None) -> pd.DataFrame:
        """Per block: items, raters assigned (excluded among them), responses, raters who finished."""
        self._admin(admin)
        sizes = self.store.practice_block_counts()
        excluded = {p["account"] for p in self.store.practitioners() if p["excluded"]}
        assigned: dict[int, list[str]] = collections.defaultdict(list)
        for a in self.store.practice_assignments():
            assigned[a["block"]].append(a["account"])
        answered = collections.Counter((r["block"], r["account"]) for r in self.store.practice_responses())
        rows = []
        for block, size in sorted(sizes.items()):
            accounts = assigned.get(block, [])
            rows.append(
                {
                    "block": block,
                    "items": size,
                    "raters": len(accounts),
                    "excluded": sum(a in excluded for a in accounts),
                    "responses": sum(answered[(block, a)] for a in accounts),
                    "finished": sum(answered[(block, a)] >= size for a in accounts),
                    "open_slots": max(0, self.raters - len(accounts)),
                }
            )
        return pd.DataFrame(
            rows, columns=["block", "items", "raters", "excluded", "responses", "finished", "open_slots"]
        )

    def exclude(self, admin: str | None, account: str, reason: str, excluded: bool = True) -> None:
        """Exclude a practitioner (their responses leave the configs and every human figure), with a reason."""
        self._admin(admin)
        if not (reason or "").strip():
            raise ValueError("an exclusion needs a reason")
        if not self.store.exclude_practitioner(account, reason.strip(), admin, excluded):  # type: ignore[arg-type]
            raise ValueError(f"no practitioner {account!r}")

    def export_platform_db(self, admin: str | None, path: str | os.PathLike, include_excluded: bool = False) -> Path:
        """The practice responses in the annotation platform's SQLite format (``tcmqa build --platform-db``).

        Users are named by their pseudonym (no account names, e-mails or licence numbers); excluded
        practitioners are left out unless asked.
        """
        self._admin(admin)
        path = Path(path)
        if path.exists():
            path.unlink()
        pairs = self._included(include_excluded)
        con = sqlite3.connect(path)
        try:
            con.executescript(PLATFORM_SCHEMA)
            item_ids = sorted({r["item_id"] for r, _ in pairs})
            con.executemany(
                "INSERT INTO questions VALUES (?, ?, ?, ?)",
                [
                    (
                        self.items[i]["id"],
                        self.items[i]["question"],
                        json.dumps(self.items[i]["options"], ensure_ascii=False),
                        "".join(self.items[i]["answer"]),
                    )
                    for i in item_ids
                ],
            )
            users: dict[int, list[str]] = collections.defaultdict(list)
            for r, a in pairs:
                users[a["user_id"]].append(r["item_id"])
            con.executemany(
                "INSERT INTO user VALUES (?, ?, ?)",
                [(u, pseudonym(u, self.pseudonym_key), json.dumps(sorted(ids))) for u, ids in sorted(users.items())],
            )
            rows = []
            for r, a in pairs:
                selected = json.loads(r["selected"])
                item = self.items[r["item_id"]]
                rows.append(
                    (
                        a["user_id"],
                        item["id"],
                        int(selected == list(item["answer"])),
                        json.dumps(selected) if len(selected) > 1 else selected[0],
                        r["seconds"] or 0.0,
                        r["seconds_paused"] or 0.0,
                        json.dumps([PLATFORM_NUMBER[k] for k in json.loads(r["domains"])]),
                        r["difficulty"],
                        r["flagged"],
                    )
                )
            con.executemany("INSERT INTO user_interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            con.commit()
        finally:
            con.close()
        return path
