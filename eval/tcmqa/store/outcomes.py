"""Each run's per-item correctness, aggregated once when it is recorded: what the board reads instead of output rows.

A run's outcome is two bitmaps over the store's item numbering (table ``item_keys``: every item id a run
ever had gets a number, once, in sorted order of first appearance): which items the run answered and
which it got right. 38,279 items take 4.8 KB per bitmap, so a thousand runs are a few MB, read in one
query, while their output rows are 38 million. The board's reference (Subset, Δ human, the practitioners'
line) and its separation marks are counts over these bitmaps (:mod:`tcmqa.leaderboard.outcomes`).

Written once per run: for a finished job by its first reader (``record_outcomes``, from the job's Parquet
bytes in the store; ``finish`` only drops a re-recorded job's old outcome), for runs the data publishes by
``record_published`` (the served ``outputs`` config). ``outcome_index`` says what changed, cheaply, so a
reader loads only new or re-recorded runs.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tcmqa.store.core import _ITEMS_LOCK, StoreCore
from tcmqa.store.jobs import FINISHED
from tcmqa.store.tables import item_keys_t, jobs_t, outcomes_t, outputs_t, results_t

RECORDED, PUBLISHED = "recorded", "published"
_SCHEMA = pa.schema(
    [*((c, pa.string()) for c in ("model", "revision", "protocol", "item_id")), ("correct", pa.bool_())]
)


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """An outcome's facts (its row without the bitmaps)."""

    run: str
    model: str
    revision: str
    protocol: str
    source: str
    at: float | None
    n_items: int
    n_correct: int


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One run's correctness by item number: ``present`` (answered) and ``correct``, bool vectors."""

    info: RunInfo
    present: np.ndarray
    correct: np.ndarray


def published_run(model: str, revision: str) -> str:
    """The run id of a published (model, revision): one per pair, whatever its results row's job id."""
    return f"published:{model}@{revision}"


def _table(parts: Iterable[bytes | pa.Table]) -> pa.Table:
    """The outcome columns of a run's Parquet parts (a stand-in harness's parts may lack some; without
    ``item_id`` and ``correct`` a part has no outcome)."""
    tables = []
    for part in parts:
        table = part if isinstance(part, pa.Table) else pq.read_table(io.BytesIO(part))
        names = set(table.column_names)
        if {"item_id", "correct"} <= names:
            columns = [table[f.name].cast(f.type) if f.name in names else pa.nulls(len(table), f.type) for f in _SCHEMA]
            tables.append(pa.table(columns, schema=_SCHEMA))
    return pa.concat_tables(tables) if tables else _SCHEMA.empty_table()


def _pack(numbers: np.ndarray, width: int) -> bytes:
    bits = np.zeros(width, dtype=bool)
    bits[numbers] = True
    return np.packbits(bits).tobytes()


def unpack(blob: bytes, width: int) -> np.ndarray:
    """A stored bitmap as a bool vector of ``width`` items (items numbered after it was written: False)."""
    bits = np.unpackbits(np.frombuffer(blob, dtype=np.uint8)).astype(bool)
    return bits[:width] if len(bits) >= width else np.pad(bits, (0, width - len(bits)))


class OutcomesStore(StoreCore):
    """The ``item_keys`` numbering and the ``outcomes`` bitmaps (module doc)."""

    def _numbers(self, conn: Connection, item_ids: Sequence[str]) -> np.ndarray:
        """The item numbers of ``item_ids`` (in their order), numbering new ones after the last."""
        known = dict(conn.execute(sa.select(item_keys_t.c.item_id, item_keys_t.c.idx)).all())
        if not set(item_ids) <= known.keys():
            self._lock(conn, _ITEMS_LOCK)  # PostgreSQL: one numberer at a time (SQLite's writer is already alone)
            known = dict(conn.execute(sa.select(item_keys_t.c.item_id, item_keys_t.c.idx)).all())
            start = max(known.values(), default=-1) + 1
            new = sorted(set(item_ids) - known.keys())
            rows = [{"item_id": item, "idx": start + i} for i, item in enumerate(new)]
            conn.execute(sa.insert(item_keys_t), rows)
            known.update((r["item_id"], r["idx"]) for r in rows)
        return np.fromiter((known[i] for i in item_ids), dtype=np.int64, count=len(item_ids))

    def _record_outcome(
        self, conn: Connection, run: str, source: str, at: float, parts: Iterable[bytes | pa.Table], **fallback: str
    ) -> bool:
        """Aggregate a run's rows into its outcome row (replacing any); False when the rows carry no
        correctness (the row is kept, empty, so the run is not read again). ``fallback``: model, revision and
        protocol for rows that did not record them."""
        table = _table(parts)
        conn.execute(sa.delete(outcomes_t).where(outcomes_t.c.run == run))
        first = {c: table[c][0].as_py() if len(table) else None for c in ("model", "revision", "protocol")}
        facts = {c: str(first[c] or fallback.get(c) or "") for c in first}
        item_ids = table["item_id"].to_pylist()
        correct = pc.fill_null(table["correct"], False).to_numpy(zero_copy_only=False)
        numbers = self._numbers(conn, item_ids)
        width = int(numbers.max()) + 1 if len(numbers) else 0
        # an item scored twice keeps its last record, as everywhere else
        last = {n: c for n, c in zip(numbers.tolist(), correct.tolist(), strict=True)}
        answered = np.fromiter(last, dtype=np.int64, count=len(last))
        right = np.fromiter((n for n, c in last.items() if c), dtype=np.int64)
        conn.execute(
            sa.insert(outcomes_t).values(
                run=run,
                source=source,
                at=at,
                n_items=len(answered),
                n_correct=len(right),
                present=_pack(answered, width),
                correct=_pack(right, width),
                **facts,
            )
        )
        return bool(len(answered))

    def record_published(self, runs: Iterable[tuple[str, str, float, pa.Table]]) -> int:
        """Aggregate runs the data publishes (model, revision, date stamp, its rows), each once: a run
        already here is left as it is. How many were added."""
        added = 0
        with self._write() as conn:
            have = set(conn.execute(sa.select(outcomes_t.c.run).where(outcomes_t.c.source == PUBLISHED)).scalars())
            for model, revision, at, table in runs:
                run = published_run(model, revision)
                if run not in have:
                    added += self._record_outcome(conn, run, PUBLISHED, at, [table], model=model, revision=revision)
        return added

    def record_outcomes(self) -> int:
        """Aggregate every finished job whose outcome is not stored yet (recorded since, or before migration 7),
        each once; how many. The reader does it, not ``finish``: the worker process then never parses
        Parquet (pyarrow's reader left it aborting at exit, one exit in ten), and a job's outcome costs its
        first reader ~20-60 ms."""
        missing = (
            sa.select(jobs_t.c.id, jobs_t.c.model, jobs_t.c.revision, jobs_t.c.protocol, results_t.c.recorded_at)
            .join(results_t, results_t.c.job_id == jobs_t.c.id)
            .where(jobs_t.c.status == FINISHED, jobs_t.c.id.not_in(sa.select(outcomes_t.c.run)))
        )
        with self._read() as conn:
            jobs = conn.execute(missing).all()
        done = 0
        for job_id, model, revision, protocol, recorded_at in jobs:
            with self._write() as conn:
                self._lock(conn, _ITEMS_LOCK)  # PostgreSQL: two readers never aggregate one job at once
                if conn.execute(sa.select(outcomes_t.c.run).where(outcomes_t.c.run == job_id)).first():
                    continue
                parts = conn.execute(
                    sa.select(outputs_t.c.data).where(outputs_t.c.job_id == job_id).order_by(outputs_t.c.part)
                ).scalars()
                facts = {"model": model, "revision": revision, "protocol": protocol}
                done += self._record_outcome(conn, job_id, RECORDED, recorded_at or 0.0, list(parts), **facts)
        return done

    def outcome_index(self) -> dict[str, RunInfo]:
        """Every stored outcome with correctness, its facts without its bitmaps (finished jobs aggregated first,
        :meth:`record_outcomes`): what a reader compares to load only what changed, and the list of runs with
        outputs (:mod:`tcmqa.leaderboard.model_outputs`)."""
        self.record_outcomes()
        columns = [outcomes_t.c[f.name] for f in dataclasses.fields(RunInfo)]
        with self._read() as conn:
            rows = conn.execute(sa.select(*columns).where(outcomes_t.c.n_items > 0)).all()
        return {r[0]: RunInfo(*r) for r in rows}

    def outcomes_version(self) -> str:
        """Changes when an outcome is added or removed (a re-recorded run changes the results' version too)."""
        with self._read() as conn:
            return str(conn.execute(sa.select(sa.func.count()).select_from(outcomes_t)).scalar_one())

    def item_numbers(self, start: int = 0) -> list[str]:
        """The item ids by number from ``start`` (position i: item number start + i); a reader that holds the
        first ``start`` reads only the items numbered since."""
        query = sa.select(item_keys_t.c.idx, item_keys_t.c.item_id).where(item_keys_t.c.idx >= start)
        with self._read() as conn:
            rows = conn.execute(query.order_by(item_keys_t.c.idx)).all()
        ids = [""] * (rows[-1][0] + 1 - start if rows else 0)
        for idx, item_id in rows:
            ids[idx - start] = item_id
        return ids

    def outcomes(self, runs: Iterable[str], width: int) -> list[Outcome]:
        """The outcomes of ``runs`` as vectors of ``width`` items."""
        wanted = list(runs)
        out = []
        with self._read() as conn:
            for chunk in range(0, len(wanted), 500):
                rows = conn.execute(sa.select(outcomes_t).where(outcomes_t.c.run.in_(wanted[chunk : chunk + 500])))
                for r in rows.mappings():
                    info = RunInfo(*(r[f.name] for f in dataclasses.fields(RunInfo)))
                    out.append(Outcome(info, unpack(r["present"], width), unpack(r["correct"], width)))
        return out
