"""Practitioner mode: licensed practitioners answer TCMQA items inside the Space (no gradio here).

The paper's protocol (Section 2.2, Appendix A): a practitioner signs in, confirms once that they hold
a TCM licence (an optional licence number is stored privately, never published nor exported), and
gets a fixed private block of items (``block_size``, 150 by default), each block going to exactly
``raters`` practitioners (3). One item per screen; one submission records the answer letters, up to
three domains, a difficulty 1-5, an optional flag with a comment, the seconds on the item and the
seconds paused, then advances to the next unanswered item.

* Assignment: a new account joins the oldest block that still has a free rater slot and shares no
  item with its earlier blocks; otherwise a new block is drawn from the items that need raters most
  (no rater in the imported study and in no practice block first, then the fewest), stratified by
  (domain, source difficulty, answer type) in proportion to the pool, never an item the account had.
  Items any rater flagged are not drawn. An excluded practitioner's slot is not reused.
* Idempotency: one response per (account, item) is a key of the store's table; a replayed or
  double-clicked submission records nothing new and returns the stored one.
* Privacy: :meth:`Practice.current` returns an :class:`ItemView` without the reference answer; the
  answer appears only in :meth:`Practice.report`, once the account's block is complete.
* Pseudonyms: the platform user id of an assignment is ``block * raters + slot + 1`` (the platform's
  ``block = (user_id - 1) // 3``), and the public practitioner id is ``ingest.pseudonym(user_id,
  key)``: the export (:meth:`Practice.export_platform_db`) read by ``tcmqa build --platform-db`` gives
  the same ids and blocks. New blocks are numbered after the imported study's blocks, so user ids
  never collide with the study's.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tcmqa.ingest import DEFAULT_PSEUDONYM_KEY, PLATFORM_SCHEMA, BuildReport, make_subset, pseudonym
from tcmqa.schema import BLOCK_SIZE, DOMAINS, MAX_DOMAINS_PER_RESPONSE, RATERS_PER_ITEM
from tcmqa.store import DailyCapReached, Store
from tcmqa_metric import LETTERS

__all__ = [
    "DailyCapReached",
    "ItemView",
    "NotAllowed",
    "Practice",
]

PLATFORM_NUMBER = {key: str(i) for i, key in enumerate(DOMAINS, 1)}  # domain key -> "1".."10"
MAX_COMMENT = 500


class NotAllowed(Exception):
    """The account may not do this (not signed in, not confirmed, excluded, not its item, not an admin)."""


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


class Practice:
    """Practitioner mode over one store and one corpus.

    ``items``: corpus rows; ``imported``: the responses rows of the imported study (the built tree's
    ``responses`` config), which count as raters already given; ``admins``: accounts allowed the
    admin functions; ``daily_cap``: responses per account per UTC day (None: no cap).
    """

    def __init__(
        self,
        store: Store,
        items: Iterable[dict],
        imported: Iterable[dict] = (),
        *,
        block_size: int = BLOCK_SIZE,
        raters: int = RATERS_PER_ITEM,
        daily_cap: int | None = None,
        admins: Iterable[str] = (),
        pseudonym_key: str | None = None,
        seed: int = 0,
    ):
        self.store = store
        self.items = {str(i["id"]): dict(i) for i in items}
        self.imported = [dict(r) for r in imported]
        self.block_size = int(block_size)
        self.raters = int(raters)
        self.daily_cap = daily_cap
        self.admins = set(admins)
        self.pseudonym_key = pseudonym_key or os.environ.get("TCMQA_PSEUDONYM_KEY") or DEFAULT_PSEUDONYM_KEY
        self.seed = seed
        self.imported_raters = collections.Counter(r["item_id"] for r in self.imported)
        blocks = [int(r["block"]) for r in self.imported if r.get("block") is not None]
        self.first_block = max(blocks) + 1 if blocks else 0
        self._cache_lock = threading.Lock()
        self._cache: tuple[str, Any] | None = None

    # -- accounts ---------------------------------------------------------------------------------
    def status(self, account: str | None) -> dict[str, Any]:
        """What the account may do now: signed in, confirmed, excluded (its reason is not shown to others)."""
        if not account:
            return {"signed_in": False, "confirmed": False, "excluded": False}
        record = self.store.practitioner(account) or {}
        return {
            "signed_in": True,
            "confirmed": bool(record.get("confirmed_at")),
            "excluded": bool(record.get("excluded")),
        }

    def confirm(self, account: str | None, licence: bool, licence_number: str | None = None) -> None:
        """The account confirms once that it holds a TCM licence (an optional number, kept private)."""
        if not account:
            raise NotAllowed("sign in first")
        if not licence:
            raise NotAllowed("answering is limited to practitioners who confirm they hold a TCM licence")
        number = (licence_number or "").strip()[:64] or None
        self.store.confirm_licence(account, number)

    def _allowed(self, account: str | None) -> str:
        if not account:
            raise NotAllowed("sign in first")
        record = self.store.practitioner(account)
        if record is None or not record.get("confirmed_at"):
            raise NotAllowed("confirm that you hold a TCM licence first")
        if record.get("excluded"):
            raise NotAllowed("this account is excluded from the study")
        return account

    # -- blocks -----------------------------------------------------------------------------------
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

    def _answered(self, account: str, block: int) -> dict[str, dict]:
        return {r["item_id"]: r for r in self.store.practice_responses(account=account, block=block)}

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

    # -- after a block ----------------------------------------------------------------------------
    def report(self, account: str | None, block: int | None = None) -> dict[str, Any]:
        """The account's accuracy on a completed block: against the reference, against the other raters
        (all of them, as they stand now), by domain, and the models' accuracy on the same items.

        Raises :class:`NotAllowed` while the block is not complete: the answers stay hidden until then.
        """
        if not account:
            raise NotAllowed("sign in first")
        assignments = {a["block"]: a for a in self.store.practice_assignments(account)}
        if not assignments:
            raise NotAllowed("no block assigned")
        block = max(assignments, key=lambda b: assignments[b]["assigned_at"]) if block is None else block
        if block not in assignments:
            raise NotAllowed("not your block")
        items = self.store.practice_block_items(block)
        mine = self._answered(account, block)
        if len(mine) < len(items):
            raise NotAllowed(f"the block is not complete ({len(mine)} of {len(items)} answered)")
        others = [r for r in self.store.practice_responses(block=block) if r["account"] != account]
        excluded = {p["account"] for p in self.store.practitioners() if p["excluded"]}
        others = [r for r in others if r["account"] not in excluded]
        other_by_item: dict[str, list[list[str]]] = collections.defaultdict(list)
        for r in others:
            other_by_item[r["item_id"]].append(json.loads(r["selected"]))
        rows = []
        for item_id in items:
            item, r = self.items[item_id], mine[item_id]
            selected = json.loads(r["selected"])
            peers = other_by_item.get(item_id, [])
            domains = list(item.get("domains") or []) or json.loads(r["domains"]) or ["other"]
            rows.append(
                {
                    "item_id": item_id,
                    "domain": domains[0],
                    "answer_type": item["answer_type"],
                    "correct": selected == list(item["answer"]),
                    "agree": (sum(p == selected for p in peers) / len(peers)) if peers else None,
                }
            )
        frame = pd.DataFrame(rows)
        by_domain = (
            frame.groupby("domain")
            .agg(items=("item_id", "size"), accuracy=("correct", "mean"), agreement=("agree", "mean"))
            .reset_index()
        )
        by_domain["accuracy"] = (100 * by_domain["accuracy"]).round(1)
        by_domain["agreement"] = (100 * by_domain["agreement"].astype(float)).round(1)
        by_domain.insert(1, "domain_zh", by_domain["domain"].map(DOMAINS))
        agree = frame["agree"].dropna()
        return {
            "block": block,
            "items": len(items),
            "accuracy": round(100 * float(frame["correct"].mean()), 2),
            "agreement": None if agree.empty else round(100 * float(agree.mean()), 2),
            "by_domain": by_domain,
            "models": self.models_on(items),
        }

    def models_on(self, item_ids: Sequence[str]) -> pd.DataFrame:
        """Every evaluated model's exact-match accuracy on these items (from the store's outputs)."""
        wanted = set(item_ids)
        parts = []
        for path in self.store.outputs_files():
            frame = pd.read_parquet(path, columns=["model", "item_id", "correct"])
            parts.append(frame[frame["item_id"].isin(wanted)])
        if not parts:
            return pd.DataFrame(columns=["model", "items", "accuracy"])
        frame = pd.concat(parts, ignore_index=True).drop_duplicates(["model", "item_id"], keep="last")
        out = frame.groupby("model").agg(items=("item_id", "size"), accuracy=("correct", "mean")).reset_index()
        out["accuracy"] = (100 * out["accuracy"]).round(1)
        return out.sort_values("accuracy", ascending=False).reset_index(drop=True)

    # -- the responses and subset configs ---------------------------------------------------------
    def _included(self, include_excluded: bool = False) -> list[tuple[dict, dict]]:
        """(response, assignment) pairs of the practice responses, excluded practitioners left out."""
        excluded = set() if include_excluded else {p["account"] for p in self.store.practitioners() if p["excluded"]}
        assigned = {(a["account"], a["block"]): a for a in self.store.practice_assignments()}
        return [
            (r, assigned[(r["account"], r["block"])])
            for r in self.store.practice_responses()
            if r["account"] not in excluded and r["item_id"] in self.items
        ]

    def response_rows(self) -> list[dict]:
        """Practice responses as rows of the ``responses`` config (pseudonymous ids, no account names)."""
        rows = []
        for r, a in self._included():
            item = self.items[r["item_id"]]
            pid = pseudonym(a["user_id"], self.pseudonym_key)
            selected = json.loads(r["selected"])
            domains = json.loads(r["domains"])
            rows.append(
                {
                    "response_id": f"{pid}-{item['id']}",
                    "item_id": item["id"],
                    "practitioner_id": pid,
                    "block": (a["user_id"] - 1) // RATERS_PER_ITEM,
                    "selected": selected,
                    "correct": selected == list(item["answer"]),
                    "domains": domains,
                    "domains_zh": [DOMAINS[k] for k in domains],
                    "difficulty": r["difficulty"],
                    "flagged": bool(r["flagged"]),
                    "seconds": r["seconds"],
                    "seconds_paused": r["seconds_paused"],
                }
            )
        return rows

    def configs(self, include_flagged: bool = False) -> dict[str, list[dict]]:
        """The ``responses`` and ``subset`` configs: the imported study plus the practice responses.

        Cached on the store's practice version (a new response or an exclusion rebuilds them).
        """
        version = self.store.practice_version()
        with self._cache_lock:
            if self._cache is not None and self._cache[0] == version:
                return self._cache[1]
        seen = {r["response_id"] for r in self.imported}
        responses = self.imported + [r for r in self.response_rows() if r["response_id"] not in seen]
        subset = make_subset(responses, self.items, BuildReport(), include_flagged)
        tables = {"responses": responses, "subset": subset}
        with self._cache_lock:
            self._cache = (version, tables)
        return tables

    def human_reference(self, item_ids: Iterable[str] | None = None) -> tuple[float | None, int]:
        """The practitioners' majority vote (percent) on the subset items (those of ``item_ids``), and n."""
        subset = self.configs()["subset"]
        wanted = None if item_ids is None else set(item_ids)
        votes = [r["majority_correct"] for r in subset if wanted is None or r["item_id"] in wanted]
        if not votes:
            return None, 0
        return 100 * sum(votes) / len(votes), len(votes)

    def reference_rows(self, evaluated: Sequence[dict]) -> list[dict]:
        """Each evaluated results row with ``subset``, ``human_reference`` and ``delta_human`` recomputed
        on the current subset config from the model's outputs in the store (rows without outputs as they were).
        """
        subset = {r["item_id"]: r["majority_correct"] for r in self.configs()["subset"]}
        parts = [pd.read_parquet(p, columns=["model", "item_id", "correct"]) for p in self.store.outputs_files()]
        outputs = (
            pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["model", "item_id", "correct"])
        )
        outputs = outputs[outputs["item_id"].isin(set(subset)) & ~outputs["item_id"].map(self._flagged)]
        out = []
        for row in evaluated:
            mine = outputs[outputs["model"] == row.get("model")].drop_duplicates("item_id", keep="last")
            if row.get("origin") == "reported" or mine.empty:
                out.append(row)
                continue
            human = 100 * sum(subset[i] for i in mine["item_id"]) / len(mine)
            score = 100 * float(mine["correct"].mean())
            out.append(
                {**row, "subset": score, "human_reference": human, "delta_human": score - human, "n_subset": len(mine)}
            )
        return out

    def _flagged(self, item_id: str) -> bool:
        return bool(self.items.get(item_id, {}).get("flagged"))

    # -- admin ------------------------------------------------------------------------------------
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


class PracticeLoader:
    """A :class:`Practice` made on first use from the data the Space serves (its corpus and its
    ``responses`` config, the imported study), so the web process starts without loading them."""

    def __init__(self, data: str, store: Store, **options: Any):
        self.data, self.store, self.options = data, store, options
        self._lock = threading.Lock()
        self._practice: Practice | None = None

    def get(self) -> Practice:
        with self._lock:
            if self._practice is None:
                from tcmqa.data import has_config, load_config

                items = load_config(self.data, "corpus").to_list()
                imported = load_config(self.data, "responses").to_list() if has_config(self.data, "responses") else []
                self._practice = Practice(self.store, items, imported, **self.options)
            return self._practice

    def reference_rows(self, evaluated: Sequence[dict]) -> list[dict]:
        """As :meth:`Practice.reference_rows`, but the rows as recorded while no practitioner answered here."""
        if not self.store.practice_responses_exist():
            return list(evaluated)
        return self.get().reference_rows(evaluated)


# -- text for the Practitioners tab (markdown; the app only wires it) ----------------------------
def item_markdown(view: ItemView) -> str:
    """The item's screen: the stem in its original Chinese and the five options (never the answer)."""
    options = "\n".join(f"- **{k}.** {v}" for k, v in view.options.items())
    return f"### {view.question}\n\n{options}"


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "_none_"
    head = "| " + " | ".join(map(str, frame.columns)) + " |\n|" + "---|" * len(frame.columns)
    body = [
        "| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, *body])


def report_markdown(report: dict[str, Any]) -> str:
    """The practitioner's own results once the block is complete."""
    agreement = "n/a (no other rater yet)" if report["agreement"] is None else f"{report['agreement']:.1f}%"
    return (
        f"## Block {report['block']} complete: thank you\n\n"
        f"**Your accuracy** against the reference answers: **{report['accuracy']:.1f}%** on {report['items']} items. "
        f"**Agreement with the other raters** (same answer set): {agreement}.\n\n"
        f"### By domain\n\n{_table(report['by_domain'])}\n\n"
        f"### The models on the same items\n\n{_table(report['models'])}"
    )
