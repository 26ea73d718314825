"""Reading the outputs config out of core: the Parquet parts of many runs, queried where they lie.

A board of a thousand models holds 38 M output rows; no analysis needs them in memory at once, only a
few of their columns reduced to compact item × model matrices or aggregated. This module is the one
reader of output parts for the analyses (``tcmqa.study`` and whatever else reads outputs across runs):
:class:`OutputsQuery` puts every part of the given run folders behind one DuckDB view, ``outputs``
(the ``OUTPUTS`` columns, plus ``run``: the run folder's position, and ``part`` and ``file_row_number``:
where the row lies), and the scored items, when given, in a table ``items`` (``item_id``; ``row``, the
item's matrix row; any other row numbering the caller keeps, NULL where an item is not in it). DuckDB
reads only the columns and row groups a query names, and results stream as Arrow record batches, so
memory holds a batch, never the rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Self

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from tcmqa.outputs import required_parts

log = logging.getLogger(__name__)

BATCH_ROWS = 1 << 20  # rows per streamed batch: a few MB per column


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class OutputsQuery:
    """The output parts of ``runs`` (run folders, or their ``outputs/`` folders) as the view ``outputs``.

    No run, or a run folder without parts, is an error (naming the folder). ``items`` (``item_id`` and
    ``row``, the matrix row of each scored item, plus any other integer row columns) is the table
    ``items``; none: no items. Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, runs: Sequence[str | Path], items: pa.Table | None = None) -> None:
        parts = [
            (str(path), run, k) for run, folder in enumerate(runs) for k, path in enumerate(required_parts(folder))
        ]
        if not parts:
            raise ValueError("no run folders to query")
        self.n_runs = len(runs)
        # insertion order is not kept: every consumer places rows by (run, item), so DuckDB need not buffer to order
        self.con = duckdb.connect(config={"preserve_insertion_order": False})
        listing = pa.table(
            {"filename": [p[0] for p in parts], "run": pa.array([p[1] for p in parts], pa.int32()),
             "part": pa.array([p[2] for p in parts], pa.int32())}
        )  # fmt: skip
        scored = (
            items
            if items is not None
            else pa.table({"item_id": pa.array([], pa.string()), "row": pa.array([], pa.int32())})
        )
        for name, table in (("parts", listing), ("items", scored)):
            self.con.register(f"_{name}", table)
            self.con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM _{name}")
            self.con.unregister(f"_{name}")
        # each file read once, however many runs name it (a run given twice is two columns of the same rows)
        self._files = "[" + ", ".join(_literal(f) for f in dict.fromkeys(p[0] for p in parts)) + "]"
        self.con.execute(
            "CREATE TEMP VIEW outputs AS SELECT o.* EXCLUDE (filename), p.run, p.part FROM "
            f"read_parquet({self._files}, filename = true, file_row_number = true) o JOIN parts p USING (filename)"
        )
        log.debug("outputs of %d runs in %d parts", len(runs), len(parts))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def frame(self, sql: str) -> pd.DataFrame:
        """A small result (an aggregate) as a DataFrame."""
        return self.con.sql(sql).df()

    def batches(self, sql: str, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """A large result, streamed: one Arrow record batch at a time."""
        with self.con.sql(sql).to_arrow_reader(batch_rows) as reader:
            yield from reader

    def run_heads(self) -> pd.DataFrame:
        """Per run, in run order: ``n_rows`` (output rows, from the parts' metadata) and ``model`` (what its
        first row names, first part first; None for a run of empty parts). Reads no column but that row's."""
        counts = self.frame(
            f"SELECT p.run, sum(m.num_rows) AS n_rows FROM parquet_file_metadata({self._files}) m "
            "JOIN parts p ON m.file_name = p.filename GROUP BY p.run"
        ).set_index("run")
        first = self.frame("SELECT run, model FROM outputs WHERE part = 0 AND file_row_number = 0").set_index("run")
        runs = range(self.n_runs)
        return pd.DataFrame(
            {
                "n_rows": counts["n_rows"].reindex(runs).fillna(0).astype(np.int64),
                "model": [m if isinstance(m, str) else None for m in first["model"].reindex(runs)],
            },
            index=pd.RangeIndex(self.n_runs, name="run"),
        )

    def cells(
        self, values: Mapping[str, str], runs: Sequence[int], rows: Sequence[str] = ("row",)
    ) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]]:
        """The outputs of ``runs`` (run positions; matrix column k is ``runs[k]``) on the items of ``items``
        that one of the row numberings ``rows`` (``items`` columns) numbers, batch by batch: each output
        row's matrix column, its row in each numbering (-1 where the numbering leaves the item out), and
        the SQL expressions ``values`` (name -> expression over ``outputs`` columns) as numpy arrays
        (NULL: NaN, or None in an object array)."""
        if not len(runs):
            return
        column = np.full(self.n_runs, -1, dtype=np.int64)
        column[list(runs)] = np.arange(len(runs))
        numbered = " OR ".join(f"i.{r} IS NOT NULL" for r in rows)
        sql = (
            f"SELECT o.run, {', '.join(f'coalesce(i.{r}, -1) AS {r}' for r in rows)}, "
            f"{', '.join(f'{expr} AS {name}' for name, expr in values.items())} "
            f"FROM outputs o JOIN items i USING (item_id) WHERE ({numbered}) AND o.run IN ({', '.join(map(str, runs))})"
        )
        for batch in self.batches(sql):
            yield (
                column[batch.column("run").to_numpy()],
                {r: batch.column(r).to_numpy().astype(np.int64) for r in rows},
                {name: batch.column(name).to_numpy(zero_copy_only=False) for name in values},
            )
