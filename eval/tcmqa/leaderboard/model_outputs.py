"""Which model outputs the Space shows beside the practitioners: one revision per model, the latest full run.

Two sources hold per-item outputs: the store (the runs recorded here, one folder of parts per job,
``Store.outputs_files``) and the data the Space serves (its published ``outputs`` config: the paper's
models and every run published before). Every model found in either is used, with exactly one run:

* a run is one (model, revision) of one source; its items are the distinct item ids of its rows;
* a run is *full* when it covers every scored item of the data (``n_scored``; unknown: the most items
  any run of that model covers);
* each model's run is its latest full run, or, with none full, its latest run; "latest" is when the
  store recorded it (a job's finish), for a published run the ``date`` of its row in the data's
  ``results`` config (0 without one); a recorded run wins a tie over a published one (the same
  revision republished is the same run).

So two revisions of one model are never mixed: :meth:`ModelOutputs.on` returns only rows of each
model's chosen run. The choice is re-made when the store's results change (``Store.version``); the
published config is read once per process, out of core (only the columns asked for, rows filtered
by item id). Listing the recorded runs reads no output row: each run's facts were aggregated when it
was recorded (the store's outcome index, :mod:`tcmqa.store.outcomes`); :func:`record_published` does
the same, once, for the runs the data publishes.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from tcmqa.data import has_config, load_config
from tcmqa.leaderboard import outcomes
from tcmqa.store import Store
from tcmqa.store.outcomes import published_run

RECORDED, PUBLISHED = "recorded", "published"
log = logging.getLogger("tcmqa.model_outputs")


@dataclasses.dataclass(frozen=True)
class Run:
    """One model's outputs at one revision from one source."""

    model: str
    revision: str
    source: str  # RECORDED (a job of the store) or PUBLISHED (the data's outputs config)
    n_items: int
    at: float  # when it was recorded (or published, by its results row's date); 0 unknown
    job: str = ""  # a recorded run's job (its parts: ``Store.outputs_files(job)``)


def choose(runs: Iterable[Run], n_scored: int | None = None) -> dict[str, Run]:
    """The one run of each model: its latest full run, else its latest run (see the module doc)."""
    by_model: dict[str, list[Run]] = {}
    for run in runs:
        by_model.setdefault(run.model, []).append(run)
    chosen = {}
    for model, candidates in by_model.items():
        full_n = n_scored if n_scored else max(r.n_items for r in candidates)
        chosen[model] = max(candidates, key=lambda r: (r.n_items >= full_n, r.at, r.source == RECORDED, r.n_items))
    return chosen


def recorded_runs(store: Store) -> list[Run]:
    """The runs recorded in the store with per-item correctness, one per job: the store's outcome index
    (aggregated when each was recorded, :mod:`tcmqa.store.outcomes`), so listing them reads no output row."""
    return [
        Run(info.model, info.revision, RECORDED, info.n_items, float(info.at or 0), info.run)
        for info in store.outcome_index().values()
        if info.source == RECORDED
    ]


def _published_table(data: str) -> ds.Dataset | pa.Table | None:
    """The data's ``outputs`` config, unread: a Parquet dataset of a local tree, or the Hub's Arrow table."""
    if not has_config(data, "outputs"):
        return None
    folder = Path(data).expanduser() / "outputs"
    if folder.is_dir():
        return ds.dataset(sorted(str(p) for p in folder.glob("*.parquet")), format="parquet")
    try:
        return load_config(data, "outputs").data.table
    except ValueError:  # a Hub dataset without an outputs config yet
        return None


def _dates(data: str) -> dict[tuple[str, str], float]:
    """(model, revision) -> the date of its row in the data's ``results`` config, as a time stamp."""
    from tcmqa.store.results import _date_stamp

    if not has_config(data, "results"):
        return {}
    try:
        rows = load_config(data, "results").select_columns(["model", "revision", "date"]).to_list()
    except (ValueError, KeyError):
        return {}
    return {(str(r["model"]), str(r["revision"] or "")): _date_stamp(r["date"]) for r in rows}


def published_runs(data: str) -> list[Run]:
    """The runs in the data's ``outputs`` config: one per (model, revision), its items counted as its rows
    (one per item: the config's contract, which the analyses enforce).

    The config is streamed in record batches, two columns at a time, so a thousand published models (38
    million rows) are counted in constant memory rather than read whole.
    """
    source = _published_table(data)
    if source is None:
        return []
    batches = (
        source.to_batches(columns=["model", "revision"], batch_size=1 << 20)
        if isinstance(source, ds.Dataset)
        else source.select(["model", "revision"]).to_batches(max_chunksize=1 << 20)
    )
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for batch in batches:
        table = pa.table({"model": batch.column(0), "revision": pc.fill_null(batch.column(1), "")})
        grouped = table.group_by(["model", "revision"]).aggregate([([], "count_all")])
        pairs = zip(grouped["model"].to_pylist(), grouped["revision"].to_pylist(), strict=True)
        counts.update(dict(zip(pairs, grouped["count_all"].to_pylist(), strict=True)))
    dates = _dates(data)
    return [Run(str(m), str(r), PUBLISHED, int(n), dates.get((str(m), str(r)), 0.0)) for (m, r), n in counts.items()]


def _rows_of(run: Run) -> pc.Expression:
    """The filter of a published run's rows: its model at its revision (no revision recorded: null or '')."""
    revision = pc.field("revision") == run.revision
    return (pc.field("model") == run.model) & (revision if run.revision else pc.field("revision").is_null() | revision)


def read_run(
    store: Store, data: str | None, run: Run, columns: Sequence[str], items: Collection[str] | None = None
) -> pd.DataFrame:
    """Every row of one run (``columns``, one row per item; ``items``: only those), read where it lies: only
    that run's files and only ``columns`` (the published config filtered on model and revision). Empty for a
    published run whose data has no outputs config."""
    read = list(dict.fromkeys(["item_id", *columns]))
    where = pc.field("item_id").isin(sorted(set(map(str, items)))) if items is not None else None
    if run.source == RECORDED:
        files = [str(f) for f in store.outputs_files(run.job)]
        table = ds.dataset(files, format="parquet").to_table(columns=read, filter=where)
    else:
        source = _published_table(data) if data else None
        if source is None:
            return pd.DataFrame(columns=read)
        keep = _rows_of(run) if where is None else _rows_of(run) & where
        table = (
            source.to_table(columns=read, filter=keep)
            if isinstance(source, ds.Dataset)
            else source.filter(keep).select(read)
        )
    return table.to_pandas().drop_duplicates("item_id", keep="last").reset_index(drop=True)


def record_published(store: Store, data: str) -> int:
    """Aggregate, once, the outcome of each run the data publishes that the store does not hold yet
    (:meth:`tcmqa.store.Store.record_published`): the board's reference then counts imported rows on the
    current subset too. How many runs were added; run in the background at start (it reads the config).
    A data source that cannot be read (an offline Hub) is logged, and the next start tries again."""
    try:
        return _record_published(store, data)
    except Exception:
        log.exception("aggregating the published outputs of %s failed: imported rows keep their recorded subset", data)
        return 0


def _record_published(store: Store, data: str) -> int:
    have = {(i.model, i.revision) for i in store.outcome_index().values() if i.source == PUBLISHED}
    runs = [r for r in published_runs(data) if (r.model, r.revision) not in have]
    source = _published_table(data) if runs else None
    added = 0
    for run in runs:
        keep, columns = _rows_of(run), ["item_id", "correct"]
        table = (
            source.to_table(columns=columns, filter=keep)
            if isinstance(source, ds.Dataset)
            else source.filter(keep).select(columns)  # pyright: ignore[reportOptionalMemberAccess]
        )
        added += store.record_published([(run.model, run.revision, run.at, table)])
    log.info("aggregated the outcomes of %d published run(s) of %s", added, data)
    return added


class ModelOutputs:
    """The outputs of every model with recorded or published outputs, one run per model (module doc).

    ``n_scored``: the number of scored items of the data (what a full run covers); None: each model's
    largest run counts as full.
    """

    def __init__(self, data: str | None, store: Store, n_scored: int | None = None):
        self.data, self.store, self.n_scored = data, store, n_scored
        self._lock = threading.Lock()
        self._published: list[Run] | None = None
        self._version: str | None = None
        self._runs: dict[str, Run] = {}

    def runs(self) -> dict[str, Run]:
        """model -> its one run, re-chosen whenever the store's results change."""
        version = self.store.version()
        with self._lock:
            if self._published is None:
                try:
                    self._published = published_runs(self.data) if self.data else []
                except Exception:  # the data unreachable (an offline Hub): the recorded runs alone, said in the log
                    log.exception("reading the published outputs of %s failed: recorded runs only", self.data)
                    self._published = []
            if version != self._version:
                self._runs = choose([*self._published, *recorded_runs(self.store)], self.n_scored)
                self._version = version
            return dict(self._runs)

    def on(
        self,
        item_ids: Sequence[str],
        columns: Sequence[str] = ("model", "item_id", "correct"),
        models: Collection[str] | None = None,
    ) -> pd.DataFrame:
        """The rows of each model's one run on ``item_ids`` (one row per model and item), with ``revision``
        and ``source`` columns added; ``models``: those models' runs only (each recorded run read costs ~10 ms:
        a page of models, not a thousand)."""
        wanted = pa.array(sorted(set(map(str, item_ids))), pa.string())
        read = list(dict.fromkeys(["model", "revision", "item_id", *columns]))
        runs = {m: r for m, r in self.runs().items() if models is None or m in models}
        parts = []
        published = [r for r in runs.values() if r.source == PUBLISHED]
        if published and self.data:
            source = _published_table(self.data)
            if source is not None:
                keep = pc.field("item_id").isin(wanted)
                table = (
                    source.to_table(columns=read, filter=keep)
                    if isinstance(source, ds.Dataset)
                    else source.select(read).filter(pc.is_in(source["item_id"], wanted))
                )
                frame = table.to_pandas()
                frame["revision"] = frame["revision"].fillna("")
                chosen = pd.DataFrame([(r.model, r.revision) for r in published], columns=["model", "revision"])
                parts.append(frame.merge(chosen, on=["model", "revision"]).assign(source=PUBLISHED))
        for run in runs.values():
            if run.source != RECORDED:
                continue
            table = ds.dataset([str(f) for f in self.store.outputs_files(run.job)], format="parquet").to_table(
                columns=read, filter=pc.field("item_id").isin(wanted)
            )
            parts.append(table.to_pandas().assign(model=run.model, revision=run.revision, source=RECORDED))
        out_columns = list(dict.fromkeys([*read, "source"]))
        if not parts:
            return pd.DataFrame(columns=out_columns)
        frame = pd.concat([p for p in parts if len(p)] or parts, ignore_index=True)
        return frame.drop_duplicates(["model", "item_id"], keep="last")[out_columns].reset_index(drop=True)

    def of(self, model: str, columns: Sequence[str] = ("item_id", "correct")) -> pd.DataFrame:
        """Every row of one model's run (``columns``, one row per item), read where it lies: only that run's
        files and only ``columns`` (the published config filtered on model and revision). Empty for a model
        without outputs."""
        run = self.runs().get(model)
        if run is None:
            return pd.DataFrame(columns=list(dict.fromkeys(["item_id", *columns])))
        return read_run(self.store, self.data, run, columns)

    def accuracy_on(self, item_ids: Sequence[str]) -> pd.DataFrame:
        """Every model's exact-match accuracy on ``item_ids`` from its one run: model, revision, items,
        accuracy (percent, 1 decimal), best first. What a practitioner's block report sets beside theirs.

        Counted over the runs' outcomes (:mod:`tcmqa.leaderboard.outcomes`: no output row read); a published
        run whose outcome is not aggregated yet (:func:`record_published` still running) is read where it lies."""
        reference = outcomes.shared(self.store)
        matrix = reference.outcomes
        counted, unread = [], []
        with matrix.lock:
            reference.update()  # through the reference, which counts what it loads
            columns = [matrix.number[i] for i in dict.fromkeys(map(str, item_ids)) if i in matrix.number]
            for run in self.runs().values():
                row = matrix.row.get(run.job if run.source == RECORDED else published_run(run.model, run.revision))
                if row is None:
                    unread.append(run.model)
                    continue
                present, correct = matrix.present[row, columns], matrix.correct[row, columns]
                if present.any():
                    counted.append((run.model, run.revision, int(present.sum()), float(correct[present].mean())))
        frame = pd.DataFrame(counted, columns=["model", "revision", "items", "accuracy"])
        if unread:
            read = self.on(item_ids, ["correct"], models=set(unread))
            if len(read):
                more = read.groupby(["model", "revision"]).agg(items=("item_id", "size"), accuracy=("correct", "mean"))
                frame = pd.concat([frame, more.reset_index()], ignore_index=True) if len(frame) else more.reset_index()
        if frame.empty:
            return pd.DataFrame(columns=["model", "revision", "items", "accuracy"])
        out = frame
        out["accuracy"] = (100 * out["accuracy"].astype(float)).round(1)
        return out.sort_values(["accuracy", "model"], ascending=[False, True]).reset_index(drop=True)


_SHARED: dict[tuple[int, str | None], ModelOutputs] = {}
_SHARED_LOCK = threading.Lock()


def shared(store: Store, data: str | None = None, n_scored: int | None = None) -> ModelOutputs:
    """One :class:`ModelOutputs` per (store, data) in this process (the explorer and the block reports
    share its cache); ``data`` None: the store's recorded runs only."""
    key = (id(store), data)
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None or found.store is not store:
            found = _SHARED[key] = ModelOutputs(data, store, n_scored)
        if n_scored and not found.n_scored:
            found.n_scored = n_scored
        return found


def models_on(
    store: Store, item_ids: Sequence[str], data: str | None = None, n_scored: int | None = None
) -> pd.DataFrame:
    """Every model with recorded (or, given ``data``, published) outputs, its one run's accuracy on these
    items: model, revision, items, accuracy. ``Practice.models_on`` calls this."""
    return shared(store, data, n_scored).accuracy_on(item_ids)
