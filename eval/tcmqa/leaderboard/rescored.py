"""The board's rows under the served data's errata: each row's Full on the keys the data publishes now.

A tree rebuilt with errata (``tcmqa build --errata``) has corrected keys and a new data fingerprint; the runs
made before it scored their predictions on the keys the errata corrected (their fingerprint is the errata's
``corpus_revision``). Each such row with per-item outputs here is rescored without rerunning: its outcome
(which items it answered, which it got right; :mod:`tcmqa.leaderboard.outcomes`) with the corrected items scored
again from its stored predictions (:func:`tcmqa.rescore.corrected`, the metric's rule), the dropped items out of
its denominator; it is then on the served keys and ranks with the rows run on them. A row without outputs here
(imported, or the paper's) cannot be rescored and says so. Every row says the key revision its Full is on
(:data:`KEY_REVISION`): the fingerprint of those keys, 12 characters. Its Subset, the practitioners' reference
and Δ human (counted by :class:`tcmqa.leaderboard.outcomes.Reference` on the correctness as recorded) are corrected
the same way: each errata item in the subset counted as now, a dropped one out of all three counts. A run's
rescored counts are kept until it is re-recorded, so a refresh reads outputs only for runs it has not seen.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from typing import Any

import pandas as pd

from tcmqa.errata import data_errata
from tcmqa.leaderboard.model_outputs import Run as OutputsRun
from tcmqa.leaderboard.model_outputs import read_run
from tcmqa.leaderboard.outcomes import Reference, subset_fields
from tcmqa.rescore import corrected
from tcmqa.results import counted_intervals
from tcmqa.store import Store
from tcmqa.store.outcomes import RunInfo

KEY_REVISION = "Key revision"
NOT_RESCORED = "not rescored"
RESCORED = "rescored"
log = logging.getLogger(__name__)


def key_revision_text(fingerprint: str | None, rescored: bool = False) -> str:
    """The Key revision cell: the keys' fingerprint (12 characters), '(rescored)' after it when rescored."""
    if not fingerprint:
        return ""
    return f"{fingerprint[:12]} ({RESCORED})" if rescored else fingerprint[:12]


@dataclasses.dataclass(frozen=True)
class Rescored:
    """One run under the errata: its Full's counts, and per errata item it answered (item id -> (correct as
    recorded, correct now; None: dropped)), what its subset counts are corrected by."""

    right: int
    n: int
    changed: dict[str, tuple[bool, bool | None]]


class Rescorer:
    """The served data's errata and every rescored run's counts, kept per run."""

    def __init__(self, store: Store, data: str | None, served: str | None):
        self.store, self.data, self.served = store, data, served
        try:
            self.errata = data_errata(data) if data else []
        except Exception:  # an unreadable errata config: the rows as recorded, said in the log
            log.exception("reading the errata of %s failed: the board shows every row as recorded", data)
            self.errata = []
        self.bases = {e["corpus_revision"] for e in self.errata}
        self.changed = [e["item_id"] for e in self.errata]
        self._lock = threading.Lock()
        self._runs: dict[RunInfo, Rescored] = {}

    def rows(self, evaluated: Sequence[dict[str, Any]], reference: Reference) -> list[dict[str, Any]]:
        """Each evaluated row with its Key revision; rows on the errata's revision rescored where they have
        outputs here (Full, its interval, n, and ``key_revision``: the served keys' fingerprint; Subset, the
        practitioners' reference and Δ human where the row's are counted on the current subset)."""
        outcomes = reference.outcomes
        out = []
        for row in evaluated:
            fingerprint = row.get("data_fingerprint")
            if not self.served or fingerprint not in self.bases:
                out.append({**row, KEY_REVISION: key_revision_text(fingerprint)})
                continue
            with outcomes.lock:
                run = outcomes.run_of(row.get("model"), row.get("revision"))
                info = outcomes.runs[outcomes.row[run]] if run is not None else None
                truth = outcomes.correctness(run) if run is not None else None
                if truth is not None:  # by item id
                    truth = pd.Series(truth.to_numpy(), index=[outcomes.items[k] for k in truth.index])
            if run is None or info is None or truth is None:
                out.append({**row, KEY_REVISION: NOT_RESCORED})
                continue
            rescored = self._rescored(info, truth)
            low, high = counted_intervals([rescored.right], [rescored.n])
            full = {
                "full": 100 * rescored.right / rescored.n,
                "full_ci_low": float(low[0]),
                "full_ci_high": float(high[0]),
                "n": rescored.n,
            }
            key = {"key_revision": self.served, KEY_REVISION: key_revision_text(self.served, rescored=True)}
            out.append({**row, **full, **key, **self._subset(row, run, rescored, reference)})
        return out

    @staticmethod
    def _subset(row: dict[str, Any], run: str, rescored: Rescored, reference: Reference) -> dict[str, Any]:
        """The row's subset columns with the errata items in the subset counted as now (a dropped item out of
        n, right and the practitioners' count); none where the row's are not counted on the current subset."""
        with reference.outcomes.lock:
            if not reference.version or row.get("subset_version") != reference.version or run not in reference.counts:
                return {}
            n, right, human = (int(c) for c in reference.counts[run])
            for item, (was, now) in rescored.changed.items():
                inside = int(reference.member[reference.outcomes.number[item]])
                if inside < 0:
                    continue
                if now is None:
                    n, right, human = n - 1, right - was, human - (inside == 1)
                else:
                    right += now - was
            version = reference.version
        if not n:
            return {}
        low, high = counted_intervals([right], [n])
        return subset_fields(n, right, human, float(low[0]), float(high[0]), version)

    def _rescored(self, info: RunInfo, correct: pd.Series) -> Rescored:
        """The run under the errata; its stored predictions read on the errata's items only, once per run."""
        with self._lock:
            if info in self._runs:
                return self._runs[info]
        run = pd.DataFrame({"item_id": correct.index.astype(str), "correct": correct.to_numpy()})
        outputs = OutputsRun(info.model, info.revision, info.source, info.n_items, info.at or 0.0, info.run)
        predictions = read_run(self.store, self.data, outputs, ["prediction"], self.changed)
        run = run.merge(predictions, on="item_id", how="left")
        kept = corrected(run, self.errata)
        now = dict(zip(kept["item_id"], kept["correct"].astype(bool).tolist(), strict=True))
        was = dict(zip(run["item_id"], run["correct"].astype(bool).tolist(), strict=True))
        changed = {i: (was[i], now.get(i)) for i in self.changed if i in was}
        rescored = Rescored(int(kept["correct"].sum()), len(kept), changed)
        with self._lock:
            self._runs[info] = rescored
        return rescored
