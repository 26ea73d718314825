"""Every run's per-item correctness in memory, and the practitioners' reference kept as counts.

The board's subset-based columns (Subset, the practitioners' reference on the same items, Δ human) and its
separation marks are reductions over per-item correctness. Reading output rows for them costs a second
per hundred models on every refresh; here each run is aggregated once, when it is recorded or imported
(:mod:`tcmqa.store.outcomes`: two bitmaps over the item numbering), and held as a row of two bool
matrices (runs × items, 1,000 × 38,279 is 77 MB). The reference is then counts per run:

* ``n``: the run's items in the subset; ``right``: of those, the ones it got right; ``human``: of those,
  the ones the practitioners' majority got right. Subset = right / n, the reference = human / n, and
  Subset's interval is the results row's own (:func:`tcmqa.results.counted_intervals`) on right and n, so
  the interval shown is always that of the Subset shown.
* The subset changes an item at a time: a practitioner's response changes at most one item's majority
  (a finished block, its items), an exclusion a block's items. :meth:`Reference.set_subset` finds the items
  whose membership or majority changed and adds each one's column to the counts of every run: O(runs)
  per item, never a pass over all items.
* A new run's counts are one pass over its own vectors; a run's counts are never recomputed otherwise.
  :meth:`Reference.recount` recomputes everything from scratch: the tests hold it equal to the maintained
  counts after random sequences of responses, exclusions and new runs.

Which run a results row reads (one revision per row, never two mixed): the run of its model at its
revision (a recorded one before a published one of the same pair, then the latest); a row that recorded
no revision reads its model's latest run.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcmqa.results import counted_intervals
from tcmqa.store import Store
from tcmqa.store.outcomes import RECORDED, Outcome, RunInfo

Counts = np.ndarray  # per run: n, right, human (int64, shape (runs, 3))


class Outcomes:
    """Every stored run's outcome (``present`` and ``correct`` matrices, runs × items), loaded incrementally:
    :meth:`refresh` reads only runs that are new or re-recorded since the last call."""

    def __init__(self, store: Store):
        self.store = store
        self.lock = threading.RLock()
        self.items: list[str] = []  # item ids by number
        self.runs: list[RunInfo] = []  # the matrices' rows
        self.row: dict[str, int] = {}  # run id -> row
        self.number: dict[str, int] = {}  # item id -> number (column)
        self.by_model: dict[str, list[RunInfo]] = {}
        self.present = np.zeros((0, 0), dtype=bool)
        self.correct = np.zeros((0, 0), dtype=bool)

    def refresh(self) -> tuple[list[Outcome], list[RunInfo]]:
        """Load what changed in the store; (the outcomes added or re-recorded, the runs removed). Readers call
        :meth:`Reference.update`, which calls this and counts what it loaded."""
        with self.lock:
            index = self.store.outcome_index()
            known = {r.run: r for r in self.runs}
            changed = [run for run, info in index.items() if known.get(run) != info]
            removed = [info for run, info in known.items() if run not in index]
            if not changed and not removed:
                return [], []
            if changed:  # numbers are never reused: read only the items numbered since
                new = self.store.item_numbers(len(self.items))
                self.number.update((item, len(self.items) + i) for i, item in enumerate(new))
                self.items = self.items + new
            width = len(self.items)
            loaded: dict[str, Outcome] = {o.info.run: o for o in self.store.outcomes(changed, width)}
            keep = [r for r in self.runs if r.run in index and r.run not in loaded]
            rows = [self.row[r.run] for r in keep]
            pad = ((0, 0), (0, width - self.present.shape[1]))
            present = [np.pad(self.present[rows], pad)] + [o.present[None, :] for o in loaded.values()]
            correct = [np.pad(self.correct[rows], pad)] + [o.correct[None, :] for o in loaded.values()]
            self.present, self.correct = np.concatenate(present), np.concatenate(correct)
            self.runs = keep + [o.info for o in loaded.values()]
            self.row = {r.run: i for i, r in enumerate(self.runs)}
            self.by_model = {}
            for r in self.runs:
                self.by_model.setdefault(r.model, []).append(r)
            return [*loaded.values()], removed

    def run_of(self, model: Any, revision: Any) -> str | None:
        """The run a results row of ``model`` at ``revision`` reads (module doc); None without one."""
        mine = self.by_model.get(str(model), [])
        if revision is not None and not pd.isna(revision) and str(revision):
            mine = [r for r in mine if r.revision == str(revision)]
        if not mine:
            return None
        return max(mine, key=lambda r: (r.source == RECORDED, r.at or 0.0, r.run)).run

    def correctness(self, run: str) -> pd.Series:
        """The run's correctness on the items it answered, indexed by item number (cheap: no item ids)."""
        i = self.row[run]
        answered = np.flatnonzero(self.present[i])
        return pd.Series(self.correct[i, answered], index=answered)


class ByKey(Mapping[tuple[str, str], pd.Series]):
    """Per-item correctness by (model, revision), the separation marks' input
    (:data:`tcmqa.leaderboard.uncertainty.Correctness`), read from the outcomes on demand."""

    def __init__(self, outcomes: Outcomes):
        self.outcomes = outcomes

    def __getitem__(self, key: tuple[str, str]) -> pd.Series:
        run = self.outcomes.run_of(*key)
        if run is None:
            raise KeyError(key)
        return self.outcomes.correctness(run)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter({(r.model, r.revision) for r in self.outcomes.runs})

    def __len__(self) -> int:
        return len({(r.model, r.revision) for r in self.outcomes.runs})


class Reference:
    """The practitioners' reference per run, maintained as counts over :class:`Outcomes` (module doc).

    ``member``: per item number, -1 not in the subset, 0 in it with the majority wrong, 1 with it right.
    """

    def __init__(self, outcomes: Outcomes):
        self.outcomes = outcomes
        self.majority: dict[str, bool] = {}  # the subset as last set: item id -> the majority right
        self.member = np.full(0, -1, dtype=np.int8)
        self.counts: dict[str, np.ndarray] = {}  # run id -> [n, right, human]
        self.version = ""

    def _member(self, majority: Mapping[str, bool], width: int) -> np.ndarray:
        member = np.full(width, -1, dtype=np.int8)
        for item, right in majority.items():
            i = self.outcomes.number.get(item)
            if i is not None:  # an item no run answered counts for no run
                member[i] = int(bool(right))
        return member

    def _count(self, rows: np.ndarray, member: np.ndarray) -> np.ndarray:
        """[n, right, human] of the runs at ``rows`` over the whole subset ``member``: one pass each."""
        inside, human = member >= 0, member == 1
        present, correct = self.outcomes.present[rows], self.outcomes.correct[rows]
        return np.stack(
            [(present & inside).sum(1), (correct & inside).sum(1), (present & human).sum(1)], axis=1
        ).astype(np.int64)

    def update(self) -> set[str]:
        """Follow the outcomes: count new or re-recorded runs, forget removed ones, and number the subset's
        items that a new run brought (their columns were empty, so no existing count changes). The models
        whose runs changed. Every reader refreshes the outcomes through here, so no run goes uncounted."""
        with self.outcomes.lock:
            added, removed = self.outcomes.refresh()
            for info in removed:
                self.counts.pop(info.run, None)
            width = len(self.outcomes.items)
            if width != len(self.member):
                self.member = self._member(self.majority, width)
            if added:
                runs = [o.info.run for o in added]
                rows = np.array([self.outcomes.row[r] for r in runs], dtype=np.int64)
                for run, counts in zip(runs, self._count(rows, self.member), strict=True):
                    self.counts[run] = counts
            return {o.info.model for o in added} | {info.model for info in removed}

    def set_subset(self, majority: Mapping[str, bool]) -> int:
        """The subset as it stands now (item id -> whether the practitioners' majority got it right); every
        run's counts follow the items that changed. How many items changed."""
        with self.outcomes.lock:
            self.update()
            new = self._member(majority, len(self.outcomes.items))
            changed = np.flatnonzero(new != self.member)
            if len(changed) and self.counts:
                runs = list(self.counts)
                rows = np.array([self.outcomes.row[r] for r in runs], dtype=np.int64)
                present = self.outcomes.present[np.ix_(rows, changed)].astype(np.int64)
                correct = self.outcomes.correct[np.ix_(rows, changed)].astype(np.int64)
                d_in = (new[changed] >= 0).astype(np.int64) - (self.member[changed] >= 0)
                d_human = (new[changed] == 1).astype(np.int64) - (self.member[changed] == 1)
                delta = np.stack([present @ d_in, correct @ d_in, present @ d_human], axis=1)
                for run, d in zip(runs, delta, strict=True):
                    self.counts[run] = self.counts[run] + d
            self.majority, self.member = dict(majority), new
            self.version = _digest(self.majority)
            return len(changed)

    def recount(self) -> dict[str, np.ndarray]:
        """Every run's counts from scratch (what :meth:`set_subset` maintains; the tests' reference)."""
        with self.outcomes.lock:
            rows = np.arange(len(self.outcomes.runs), dtype=np.int64)
            member = self._member(self.majority, len(self.outcomes.items))
            return {r.run: c for r, c in zip(self.outcomes.runs, self._count(rows, member), strict=True)}

    def rows(self, evaluated: Sequence[dict]) -> list[dict]:
        """Each evaluated results row with ``subset`` and its interval, ``human_reference``, ``delta_human`` and
        ``n_subset`` on the current subset, and ``subset_version`` (the subset's digest); a row without outputs,
        or none of whose items are in the subset, as recorded (its ``subset_version`` "as recorded")."""
        with self.outcomes.lock:
            runs = [
                None if r.get("origin") == "reported" else self.outcomes.run_of(r.get("model"), r.get("revision"))
                for r in evaluated
            ]
            counts = [self.counts.get(run, (0, 0, 0)) if run else (0, 0, 0) for run in runs]
        n, right, human = np.array(counts, dtype=np.int64).reshape(-1, 3).T
        low, high = counted_intervals(right, n)  # at once: one call for every row (14 ms for 1,000)
        out = []
        for i, row in enumerate(evaluated):
            if not n[i]:
                out.append({**row, "subset_version": row.get("subset_version") or "as recorded"})
                continue
            out.append({**row, **subset_fields(n[i], right[i], human[i], low[i], high[i], self.version)})
        return out


def subset_fields(n: int, right: int, human: int, low: float, high: float, version: str) -> dict[str, Any]:
    """A row's subset columns from its counts (``n`` > 0) and Subset's interval (``low``, ``high``): the one
    place Subset, the practitioners' reference and Δ human are derived from [n, right, human]."""
    subset, reference = 100 * right / n, 100 * human / n
    return {
        "subset": float(subset),
        "subset_ci_low": float(low),
        "subset_ci_high": float(high),
        "human_reference": float(reference),
        "delta_human": float(subset - reference),
        "n_subset": int(n),
        "subset_version": version,
    }


def _digest(majority: Mapping[str, bool]) -> str:
    """A short digest of a subset (its items and majorities): the version a recomputed row says it is on."""
    digest = hashlib.sha256()
    for item in sorted(majority):
        digest.update(f"{item}:{int(bool(majority[item]))}\n".encode())
    return digest.hexdigest()[:12]


_SHARED: dict[int, Reference] = {}
_SHARED_LOCK = threading.Lock()


def shared(store: Store) -> Reference:
    """The one :class:`Reference` (and its :class:`Outcomes`) of ``store`` in this process: the board, the
    practitioners' reports and the explorer count over the same matrices."""
    with _SHARED_LOCK:
        found = _SHARED.get(id(store))
        if found is None or found.outcomes.store is not store:
            found = _SHARED[id(store)] = Reference(Outcomes(store))
        return found
