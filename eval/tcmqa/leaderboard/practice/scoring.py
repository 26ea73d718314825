"""The responses scored: a practitioner's report on a finished block, and the human reference.

The practice responses join the imported study's in the ``responses`` and ``subset`` configs; the
subset's majority vote is the human reference the leaderboard sets beside each model
(``human_reference``, ``reference_rows``), recomputed as responses arrive or practitioners are excluded.
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from tcmqa.ingest import BuildReport, make_subset
from tcmqa.leaderboard import model_outputs, outcomes
from tcmqa.leaderboard.practice.core import NotAllowed, PracticeCore, ReviewWaits, counts, finished
from tcmqa.schema import DOMAINS, SPACE
from tcmqa.store.practice import PracticeSnapshot

REVIEW_MODELS = 10  # the models whose answers a block's review shows beside each item


def on_served_keys(rows: Iterable[dict], items: dict[str, dict]) -> list[dict]:
    """The study's response rows scored on the keys the Space serves (``items``, its corpus), as its own
    responses are: a study pinned before an erratum keeps a corrected item's rows, each ``correct`` again on the
    new key, and loses a dropped item's (not in the corpus any more)."""
    return [
        {**r, "correct": list(r["selected"]) == list(items[r["item_id"]]["answer"])}
        for r in rows
        if r["item_id"] in items
    ]


class PracticeScoring(PracticeCore):
    """The practitioner's report, the ``responses`` and ``subset`` configs, the human reference."""

    data: str | None = None  # the data the Space serves (set by PracticeLoader): its published outputs

    def review_rows(self, account: str, block: int) -> list[dict[str, Any]]:
        """A finished block item by item, for the practitioner's review: the item, their answer, the
        reference and explanation, and the answers of the ``REVIEW_MODELS`` models best on the block (one run
        per model, the runs :meth:`report`'s accuracy uses; a thousand models' answers would bury the item).
        Only for a block no longer open (:meth:`report` says why not): :class:`ReviewWaits` until then."""
        self._review_waits(self.store.practice_snapshot(), block)
        mine = {r["item_id"]: r for r in self.store.practice_responses(account=account, block=block)}
        order = self.store.practice_block_items(block)
        models: dict[str, dict[str, list[str]]] = {i: {} for i in order}
        n_scored = sum(not item.get("flagged") for item in self.items.values())
        best = self.models_on(order)["model"].head(REVIEW_MODELS)  # counted over outcomes: no output row read
        predictions = model_outputs.shared(self.store, self.data, n_scored).on(order, ["prediction"], set(best))
        for model, item_id, prediction in predictions[["model", "item_id", "prediction"]].itertuples(index=False):
            models[item_id][model] = list(prediction) if prediction is not None else []
        return [
            {
                "position": position,
                "question": self.items[item_id]["question"],
                "options": self.items[item_id]["options"],
                "selected": json.loads(mine[item_id]["selected"]) if item_id in mine else [],
                "answer": list(self.items[item_id]["answer"]),
                "explanation": self.items[item_id].get("explanation"),
                "models": models[item_id],
            }
            for position, item_id in enumerate(order, 1)
        ]

    def report(self, account: str | None, block: int | None = None) -> dict[str, Any]:
        """The account's accuracy on a completed block: against the reference, against the other raters
        (all of them, as they stand now), by domain, and the models' accuracy on the same items.

        Raises :class:`NotAllowed` while the account has not answered the whole block, and
        :class:`ReviewWaits` while the block is open (a co-rater is still answering): the reference, the
        other raters' and the models' answers stay hidden from every rater until the block is finished.
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
        snap = self.store.practice_snapshot()
        self._review_waits(snap, block)
        raters = {a["account"] for a in snap.assignments if a["block"] == block and counts(snap, a)}
        others = [r for r in self.store.practice_responses(block=block) if r["account"] in raters - {account}]
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
        agree = frame["agree"].dropna()
        return {
            "block": block,
            "number": self.block_number(block),
            "items": len(items),
            "accuracy": round(100 * float(frame["correct"].mean()), 2),
            "agreement": None if agree.empty else round(100 * float(agree.mean()), 2),
            "by_domain": by_domain,
            "models": self.models_on(items),
        }

    def _review_waits(self, snap: PracticeSnapshot, block: int) -> None:
        """Raises :class:`ReviewWaits` while ``block`` is open: a co-rater is still answering its items."""
        if block not in self._open_blocks(snap):
            return
        n = self._block_raters(snap, block)
        done = sum(counts(snap, a) and finished(snap, a) for a in snap.assignments if a["block"] == block)
        raise ReviewWaits(
            f"You have answered every item of block {self.block_number(block)}. Its review opens once all its {n} "
            f"raters have finished it ({done} of {n} so far): until then nobody sees the reference or anyone "
            "else's choices. Come back to it later, or start your next block."
        )

    def models_on(self, item_ids: Sequence[str]) -> pd.DataFrame:
        """Every model with recorded outputs (and published ones, where ``self.data`` names the data the Space
        serves), one revision each, its latest full run: :func:`tcmqa.leaderboard.model_outputs.models_on`."""
        n_scored = sum(not item.get("flagged") for item in self.items.values())
        return model_outputs.models_on(self.store, item_ids, self.data, n_scored)

    def response_rows(self) -> list[dict]:
        """The Space's published responses as rows of the ``responses`` config: only blocks all of whose
        raters have finished them (independence), excluded practitioners and released slots left out, one
        pseudonym per person (``source`` "space", the block and the rater slot say where each came from)."""
        names = self._pseudonyms()
        rows = []
        for r, a in self._published():
            item = self.items[r["item_id"]]
            pid = names[r["account"]]
            selected = json.loads(r["selected"])
            domains = json.loads(r["domains"])
            rows.append(
                {
                    "response_id": f"{pid}-{item['id']}",
                    "item_id": item["id"],
                    "practitioner_id": pid,
                    "source": SPACE,
                    "block": a["block"],
                    "rater_slot": a["slot"],
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
        """The ``responses`` and ``subset`` configs the Space serves and publishes: the pinned study's rows
        plus :meth:`response_rows`, nothing of an item in an open block (a top-up block's study rows wait with
        it); the subset is ``ingest.make_subset`` (the study's items with the study's N, the Space's with this
        Space's N).

        Cached on the store's practice version (a response, an exclusion or a slot change rebuilds them).
        """
        version = self.store.practice_version()
        with self._cache_lock:
            if self._cache is not None and self._cache[0] == (version, include_flagged):
                return self._cache[1]
        withheld = self._open_items(self.store.practice_snapshot())
        study = [r for r in on_served_keys(self.imported, self.items) if r["item_id"] not in withheld]
        responses = study + self.response_rows()
        subset = make_subset(responses, self.items, BuildReport(), include_flagged, self.raters, self.study_raters)
        tables = {"responses": responses, "subset": subset}
        with self._cache_lock:
            self._cache = ((version, include_flagged), tables)
        return tables

    def published_version(self) -> str:
        """A digest of what :meth:`configs` publishes: unchanged while only open blocks are answered, so
        the publisher commits nothing new until a block is finished, excluded or released."""
        digest = hashlib.sha256()
        for r in sorted(self.configs()["responses"], key=lambda r: r["response_id"]):
            digest.update(f"{r['response_id']}:{r['selected']}:{r['block']}:{r['rater_slot']}\n".encode())
        return digest.hexdigest()[:16]

    def human_reference(self, item_ids: Iterable[str] | None = None) -> tuple[float | None, int]:
        """The practitioners' majority vote (percent) on the subset items (those of ``item_ids``), and n."""
        subset = self.configs()["subset"]
        wanted = None if item_ids is None else set(item_ids)
        votes = [r["majority_correct"] for r in subset if wanted is None or r["item_id"] in wanted]
        if not votes:
            return None, 0
        return 100 * sum(votes) / len(votes), len(votes)

    def subset_majority(self) -> dict[str, bool]:
        """The subset as it stands: each unflagged subset item -> whether the practitioners' majority got it right."""
        return {
            r["item_id"]: bool(r["majority_correct"])
            for r in self.configs()["subset"]
            if not self._flagged(r["item_id"])
        }

    def reference_rows(self, evaluated: Sequence[dict]) -> list[dict]:
        """Each evaluated results row with ``subset``, ``human_reference`` and ``delta_human`` on the current
        subset, from the run of its model and revision (rows without outputs as they were): counts kept
        by :class:`tcmqa.leaderboard.outcomes.Reference`, which reads no output row."""
        reference = outcomes.shared(self.store)
        reference.set_subset(self.subset_majority())
        return reference.rows(evaluated)

    def _flagged(self, item_id: str) -> bool:
        return bool(self.items.get(item_id, {}).get("flagged"))
