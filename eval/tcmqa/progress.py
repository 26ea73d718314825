"""A job's progress as records: which phase it is in, how far, since when; the one owner of their format.

The harness (loading, evaluating), the probes (rotations, order test) and the worker (publishing) each
report through :class:`Phase`, which appends one JSON line per step to the run folder's :data:`FILE`; the
worker's heartbeat hands the newest record to the store (:func:`last`), and the Queue renders it with its
own time left (:meth:`Record.left_s`). tqdm still draws the terminal's bars: a log line is for a person, a
record for the page, so the page never parses tqdm's text.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

PHASES = ("loading", "evaluating", "rotations", "order test", "publishing")  # in the order a job runs them
FILE = "progress.jsonl"  # in the run folder, one record a line, newest last
MIN_STEPS = 2  # steps of new work in a phase before its rate says anything about the time left


@dataclasses.dataclass(frozen=True)
class Record:
    """One step of a phase: ``done`` of ``total``; ``first`` were done before it started (resumed parts, which
    cost no time and so stay out of its rate), ``steps`` steps of new work since ``started`` (Unix time), as of
    ``at``."""

    phase: str
    done: int
    total: int
    started: float
    at: float
    first: int = 0
    steps: int = 0

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown phase {self.phase!r}: one of {', '.join(PHASES)}")
        if not 0 <= self.first <= self.done <= self.total:
            raise ValueError(f"a phase's counts must satisfy 0 <= first <= done <= total, not {self}")

    def left_s(self, now: float | None = None) -> float | None:
        """Seconds left in this phase at ``now`` by its own rate since it started; None until :data:`MIN_STEPS`
        steps of new work (the first is often a warm-up)."""
        work, spent = self.done - self.first, self.at - self.started
        if self.done >= self.total:
            return 0.0
        if self.steps < MIN_STEPS or work <= 0 or spent <= 0:
            return None
        since = max(0.0, (time.time() if now is None else now) - self.at)
        return max(0.0, (self.total - self.done) * spent / work - since)

    def text(self) -> str:
        """The record as one line of JSON: what the run folder and the store keep."""
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)


def parse(text: str | None) -> Record | None:
    """The record in ``text`` (a store's progress value), or None for any other text ("claimed", "done", a
    tqdm line of a harness command that writes no records)."""
    if not text or not text.startswith("{"):
        return None
    try:
        return Record(**json.loads(text))
    except (ValueError, TypeError):
        return None


def read(folder: Path) -> list[Record]:
    """Every record in ``folder``'s :data:`FILE`, oldest first (a half-written last line is skipped)."""
    path = folder / FILE
    if not path.exists():
        return []
    return [r for line in path.read_text(encoding="utf-8").splitlines() if (r := parse(line)) is not None]


def last(folder: Path) -> Record | None:
    """The newest record in ``folder``, or None when nothing reported yet."""
    records = read(folder)
    return records[-1] if records else None


def clear(folder: Path) -> None:
    """Forget earlier attempts' records: a new attempt reports from its own start."""
    (folder / FILE).unlink(missing_ok=True)


class Phase:
    """A phase being reported: :meth:`step` after each unit of work; ``done`` counts work an earlier attempt
    did (it is not timed)."""

    def __init__(self, folder: Path, phase: str, total: int, done: int = 0) -> None:
        self.folder = folder
        now = time.time()
        self.record = Record(phase, done, total, started=now, at=now, first=done)
        self._write()

    def skip(self, n: int) -> None:
        """``n`` more units done by an earlier attempt (untimed, before any new work)."""
        r = self.record
        self.record = dataclasses.replace(r, done=r.done + n, first=r.first + n, at=time.time())
        self._write()

    def step(self, n: int) -> None:
        """``n`` more units of new work done."""
        r = self.record
        self.record = dataclasses.replace(r, done=r.done + n, steps=r.steps + 1, at=time.time())
        self._write()

    def _write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / FILE).open("a", encoding="utf-8") as f:
            f.write(self.record.text() + "\n")
