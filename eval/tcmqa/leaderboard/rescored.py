"""The board's rows under the served data's errata: each row's Full on the keys the data publishes now.

A tree rebuilt with errata (``tcmqa build --errata``) has corrected keys and a new data fingerprint; the runs
made before it scored their predictions on the keys the errata corrected (their fingerprint is the errata's
``corpus_revision``). Each such row with per-item outputs here is rescored without rerunning: its outcome
(which items it answered, which it got right; :mod:`tcmqa.leaderboard.outcomes`) with the corrected items scored
again from its stored predictions (:func:`tcmqa.rescore.corrected`, the metric's rule), the dropped items out of
its denominator; it is then on the served keys and ranks with the rows run on them. A row without outputs here
(imported, or the paper's) cannot be rescored and says so. Every row says the key revision its Full is on
(:data:`KEY_REVISION`): the fingerprint of those keys, 12 characters. A run's rescored counts are kept until it
is re-recorded, so a refresh reads outputs only for runs it has not seen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import pyarrow.dataset as ds

from tcmqa.errata import data_errata
from tcmqa.leaderboard.model_outputs import Run as OutputsRun
from tcmqa.leaderboard.model_outputs import _published_table, _rows_of
from tcmqa.leaderboard.outcomes import Outcomes
from tcmqa.rescore import corrected
from tcmqa.results import counted_intervals
from tcmqa.store import Store
from tcmqa.store.outcomes import RECORDED, RunInfo

KEY_REVISION = "Key revision"
NOT_RESCORED = "not rescored"
RESCORED = "rescored"
log = logging.getLogger(__name__)


def key_revision_text(fingerprint: str | None, rescored: bool = False) -> str:
    """The Key revision cell: the keys' fingerprint (12 characters), '(rescored)' after it when rescored."""
    if not fingerprint:
        return ""
    return f"{fingerprint[:12]} ({RESCORED})" if rescored else fingerprint[:12]


class Rescorer:
    """The served data's errata and every rescored run's counts (right, n), kept per run."""

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
        self._counts: dict[RunInfo, tuple[int, int]] = {}

    def rows(self, evaluated: Sequence[dict[str, Any]], outcomes: Outcomes) -> list[dict[str, Any]]:
        """Each evaluated row with its Key revision; rows on the errata's revision rescored where they have
        outputs here (Full, its interval, n, and ``key_revision``: the served keys' fingerprint)."""
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
            if info is None or truth is None:
                out.append({**row, KEY_REVISION: NOT_RESCORED})
                continue
            right, n = self._rescored(info, truth)
            low, high = counted_intervals([right], [n])
            full = {"full": 100 * right / n, "full_ci_low": float(low[0]), "full_ci_high": float(high[0]), "n": n}
            key = {"key_revision": self.served, KEY_REVISION: key_revision_text(self.served, rescored=True)}
            out.append({**row, **full, **key})
        return out

    def _rescored(self, info: RunInfo, correct: pd.Series) -> tuple[int, int]:
        """(right, n) of the run under the errata; its stored predictions read on the errata's items only."""
        with self._lock:
            if info in self._counts:
                return self._counts[info]
        run = pd.DataFrame({"item_id": correct.index.astype(str), "correct": correct.to_numpy()})
        predictions = self._predictions(info)
        run = run.merge(predictions, on="item_id", how="left")
        kept = corrected(run, self.errata)
        counts = int(kept["correct"].sum()), len(kept)
        with self._lock:
            self._counts[info] = counts
        return counts

    def _predictions(self, info: RunInfo) -> pd.DataFrame:
        """The run's stored predictions on the errata's items, read where its outputs lie."""
        wanted = pc.field("item_id").isin(self.changed)
        columns = ["item_id", "prediction"]
        if info.source == RECORDED:
            files = [str(f) for f in self.store.outputs_files(info.run)]
            table = ds.dataset(files, format="parquet").to_table(columns=columns, filter=wanted)
        else:
            source = _published_table(self.data) if self.data else None
            if source is None:
                return pd.DataFrame(columns=columns)
            keep = _rows_of(OutputsRun(info.model, info.revision, info.source, info.n_items, info.at or 0.0)) & wanted
            table = (
                source.to_table(columns=columns, filter=keep)
                if isinstance(source, ds.Dataset)
                else source.filter(keep).select(columns)
            )
        return table.to_pandas().drop_duplicates("item_id", keep="last")
