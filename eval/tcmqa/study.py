"""One loader for the analyses: configs and model runs as aligned item × model arrays.

Every table and figure is a reduction over the same few matrices (items along rows, models along
columns), so they are built once here, compact: bool and float32, and the multi-answer scores
(precision, recall, F1, |ŷ|) for the multi-answer items only, the only items they are read on.
The configs of a local tree are read with pyarrow, a Hub id through ``load_config``; the runs' output
parts are queried where they lie (:class:`tcmqa.outputs_query.OutputsQuery`), only the columns and
items the matrices need, streamed into them (1,000 models × 38,279 items: docs/benchmarks.md, "Report
at scale"). A model need not cover every item: ``covered`` says which cells hold an output, and every
statistic uses covered cells only. A run with two outputs for one scored item is an error naming it.

A run computed on other data is left out, by name, into ``Study.excluded``: its ``results.json``
records another data fingerprint than this data's (the fingerprint of every scorable item,
``tcmqa.runs.data_fingerprint``), or (a run that recorded none) none of its output rows is a
scored item here. Two runs of one model (two engines, say) are told apart by name:
``model (engine)``, or ``model (run folder)`` where the engine does not tell them apart.

A tree without practitioner data (corpus only: no ``responses`` or ``subset`` config) loads with
empty ``responses`` and ``subset`` frames; :attr:`Study.has_responses` and :attr:`Study.has_subset`
say what is there. A study without runs (``outputs`` empty, or every run computed on other data)
loads with no model columns (item × 0 matrices): the practitioners' side alone, :attr:`Study.has_models`
false.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcmqa.data import has_config, load_config
from tcmqa.outputs import OUTPUTS_DIR, RESULTS_FILE
from tcmqa.outputs_query import OutputsQuery
from tcmqa.runs import data_fingerprint
from tcmqa.schema import RESPONSES, SUBSET

# Study matrix -> its value per output row (SQL over the outputs view): every item, and multi-answer items
_CELLS = {"correct": "coalesce(correct, false)", "lp_correct": "coalesce(lp_correct, false)", "margin": "margin"}
_MULTI_CELLS = {"precision": "precision", "recall": "recall", "f1": "f1", "pred_size": "len(prediction)"}
_CORPUS_COLUMNS = [
    "id",
    "question",
    "options",
    "answer",
    "answer_type",
    "explanation",
    "source_difficulty",
    "domains",
    "flagged",
]
# what data_fingerprint hashes, per item
_FINGERPRINT_COLUMNS = ["id", "question", "options", "answer", "answer_type"]
EXCLUDED_COLUMNS = ["model", "run", "data", "data_fingerprint", "reason"]
# the matrices with one column per model (Study.with_models cuts them together)
_PER_MODEL = ("covered", "correct", "lp_correct", "margin", "precision", "recall", "f1", "pred_size")


@dataclass
class Study:
    """The configs of one release plus the model runs to compare, aligned by item."""

    corpus: pd.DataFrame  # all corpus rows (id, answer_type, flagged, has_explanation, ...)
    responses: pd.DataFrame  # every practitioner response
    subset: pd.DataFrame  # the three-rater items, indexed like the rows of the matrices below
    models: pd.DataFrame  # model (unique name), family, params_b, engine, run; column order of the matrices
    item_ids: np.ndarray  # scored items: unflagged corpus items, corpus order
    multi: np.ndarray  # bool per scored item
    covered: np.ndarray  # items × models: the model has an output for the item
    correct: np.ndarray  # items × models, exact match (False where not covered)
    lp_correct: np.ndarray
    margin: np.ndarray  # float32, NaN where not covered
    # multi-answer items (rows: np.flatnonzero(multi)) × models, float32, NaN where not covered
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    pred_size: np.ndarray  # letters predicted
    subset_rows: np.ndarray  # row of each subset item in the matrices (-1: not scored)
    data_fingerprint: str = ""  # of the scored items (tcmqa.runs.data_fingerprint)
    excluded: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EXCLUDED_COLUMNS))  # other data

    def with_models(self, columns: np.ndarray) -> Study:
        """This study over the models at ``columns`` (in that order) only: a key audit bounded in models."""
        cut = {name: getattr(self, name)[:, columns] for name in _PER_MODEL}
        return replace(self, models=self.models.iloc[columns].reset_index(drop=True), **cut)

    @property
    def model_names(self) -> list[str]:
        return self.models["model"].tolist()

    @property
    def has_models(self) -> bool:
        """At least one run computed on this data (the matrices have a column)."""
        return len(self.models) > 0

    @property
    def has_responses(self) -> bool:
        """The data holds practitioner responses (a ``responses`` config with rows)."""
        return len(self.responses) > 0

    @property
    def has_subset(self) -> bool:
        """The data holds the practitioners' comparison subset (a ``subset`` config with rows)."""
        return len(self.subset) > 0


def read_config(data: str | Path, config: str, columns: list[str] | None = None) -> pa.Table:
    """Config ``config`` of ``data`` (a built tree or a Hub id) as an Arrow table, ``columns`` only if given."""
    folder = Path(data).expanduser() / config
    if folder.is_dir():
        return pq.read_table(sorted(folder.glob("*.parquet")), columns=columns)
    return load_config(data, config).data.table.select(columns) if columns else load_config(data, config).data.table


def _read_optional(data: str | Path, config: str, features) -> pd.DataFrame:
    """A practitioner config, or an empty frame of its schema where the data has none (corpus only)."""
    if has_config(data, config):
        try:
            return read_config(data, config).to_pandas()
        except ValueError as err:  # a Hub dataset without the config
            if "has no" not in str(err):
                raise
    return features.arrow_schema.empty_table().to_pandas()


def run_dirs(paths: list[str | Path]) -> list[Path]:
    """Run folders named directly or found one level below each path (a folder of runs)."""
    runs = []
    for path in map(Path, paths):
        if (path / OUTPUTS_DIR).is_dir():
            runs.append(path)
        else:
            runs.extend(sorted(p for p in path.iterdir() if (p / OUTPUTS_DIR).is_dir()))
    if not runs:
        raise FileNotFoundError(f"no run folders (with {OUTPUTS_DIR}/) under {[str(p) for p in paths]}")
    return runs


def _results(run: Path) -> dict:
    results = run / RESULTS_FILE
    meta = json.loads(results.read_text(encoding="utf-8")) if results.is_file() else {}
    return meta[0] if isinstance(meta, list) and meta else meta


def _run_meta(run: Path, model: str, meta: dict) -> dict:
    return {
        "model": model,
        "family": meta.get("family") or "unknown",
        "params_b": meta.get("params_b"),
        "engine": meta.get("engine"),
        "run": str(run),
    }


def unique_names(models: pd.DataFrame) -> list[str]:
    """One name per run: the model's, then ``model (engine)`` where one model appears more than once,
    then ``model (run folder)`` (or ``model (engine, run folder)``) where the engine does not tell
    them apart."""
    names = models["model"].tolist()
    repeated = Counter(names)
    engines = [e if isinstance(e, str) and e else None for e in models["engine"]]
    names = [f"{m} ({e})" if repeated[m] > 1 and e else m for m, e in zip(names, engines)]
    repeated = Counter(names)
    folders = [Path(r).name for r in models["run"]]
    names = [
        f"{m} ({e + ', ' if e else ''}{f})" if repeated[n] > 1 else n
        for n, m, e, f in zip(names, models["model"], engines, folders)
    ]
    seen: Counter = Counter()
    unique = []
    for name in names:  # the same folder name under two parents: number them
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return unique


def load_study(data: str | Path, outputs: Sequence[str | Path] = ()) -> Study:
    """Read the ``corpus``, ``responses`` and ``subset`` configs of ``data`` and the runs in ``outputs``.

    With no ``outputs`` the study has no model columns: the practitioners' side alone (a path given
    that holds no run folder is still an error).
    """
    corpus_table = read_config(data, "corpus", _CORPUS_COLUMNS)
    options = corpus_table["options"].combine_chunks()
    five = np.ones(len(corpus_table), dtype=bool)
    for letter in range(options.type.num_fields):
        five &= pc.greater(pc.utf8_length(pc.fill_null(options.field(letter), "")), 0).to_numpy(zero_copy_only=False)
    flagged = corpus_table["flagged"].to_numpy(zero_copy_only=False)
    fingerprint = data_fingerprint(corpus_table.select(_FINGERPRINT_COLUMNS).filter(pa.array(~flagged)).to_pylist())
    corpus = corpus_table.drop_columns(["options", "question", "answer"]).to_pandas()
    corpus["five_options"] = five
    corpus["has_explanation"] = corpus.pop("explanation").fillna("").str.len() > 0
    responses = _read_optional(data, "responses", RESPONSES)
    subset = _read_optional(data, "subset", SUBSET)

    scored = corpus[~corpus["flagged"]]
    item_ids = scored["id"].to_numpy()
    multi = (scored["answer_type"] == "multi").to_numpy()
    runs = run_dirs(list(outputs)) if outputs else []
    matrices, metas, excluded = _read_runs(runs, item_ids, multi, fingerprint)
    if excluded:
        warnings.warn(
            f"left out {len(excluded)} run(s) computed on other data: "
            + "; ".join(f"{e['model']} ({e['run']})" for e in excluded),
            stacklevel=2,
        )
    models = pd.DataFrame(metas, columns=["model", "family", "params_b", "engine", "run"])
    models["model"] = unique_names(models)
    return Study(
        corpus=corpus,
        responses=responses,
        subset=subset,
        models=models,
        item_ids=item_ids,
        multi=multi,
        subset_rows=pd.Index(item_ids).get_indexer(subset["item_id"]),
        data_fingerprint=fingerprint,
        excluded=pd.DataFrame(excluded, columns=EXCLUDED_COLUMNS),
        **matrices,
    )


def _matrices(n: int, n_multi: int, m: int) -> dict[str, np.ndarray]:
    """The Study matrices of ``m`` models, nothing covered yet: False, or NaN for the float ones."""
    matrices = {k: np.zeros((n, m), dtype=bool) for k in ("covered", "correct", "lp_correct")}
    matrices["margin"] = np.full((n, m), np.nan, dtype=np.float32)
    return matrices | {k: np.full((n_multi, m), np.nan, dtype=np.float32) for k in _MULTI_CELLS}


def _read_runs(
    runs: list[Path], item_ids: np.ndarray, multi: np.ndarray, fingerprint: str
) -> tuple[dict[str, np.ndarray], list[dict], list[dict]]:
    """The Study matrices of the runs computed on this data (one column each, in run order), their
    models' metadata, and the runs left out with the reason (see the module docstring)."""
    n, n_multi = len(item_ids), int(multi.sum())
    if not runs:
        return _matrices(n, n_multi, 0), [], []
    items = pa.table(
        {
            "item_id": pa.array(item_ids, pa.string()),
            "row": pa.array(np.arange(n), pa.int32()),
            "multi_row": pa.array(np.cumsum(multi) - 1, pa.int32(), mask=~multi),
        }
    )
    with OutputsQuery(runs, items) as query:
        heads = query.run_heads()
        results = [_results(run) for run in runs]
        names = [heads.at[j, "model"] if heads.at[j, "n_rows"] else meta.get("model") or run.name
                 for j, (run, meta) in enumerate(zip(runs, results))]  # fmt: skip
        recorded = [meta.get("data_fingerprint") for meta in results]
        reasons = {
            j: f"its data fingerprint {fp} is not this data's ({fingerprint})"
            for j, fp in enumerate(recorded)
            if fp and fp != fingerprint
        }
        read = [j for j in range(len(runs)) if j not in reasons]
        m = len(read)
        matrices = _matrices(n, n_multi, m)
        flat = {k: v.reshape(-1) for k, v in matrices.items()}  # views: writes land in the matrices
        n_scored = np.zeros(m, dtype=np.int64)
        for columns, rows, values in query.cells(_CELLS | _MULTI_CELLS, read, rows=("row", "multi_row")):
            n_scored += np.bincount(columns, minlength=m)
            cells = rows["row"] * m + columns
            flat["covered"][cells] = True
            for k in _CELLS:
                flat[k][cells] = values[k]
            on_multi = rows["multi_row"] >= 0
            cells = rows["multi_row"][on_multi] * m + columns[on_multi]
            for k in _MULTI_CELLS:
                flat[k][cells] = values[k][on_multi]
    twice = np.flatnonzero(matrices["covered"].sum(axis=0) != n_scored)
    if len(twice):
        raise ValueError(
            "runs with two output rows for one scored item (a part written twice?): "
            + ", ".join(str(runs[read[k]]) for k in twice)
        )
    for k, j in enumerate(read):
        if not recorded[j] and not n_scored[k]:
            reasons[j] = f"none of its {heads.at[j, 'n_rows']:,} output rows is a scored item of this data"
    kept = [k for k, j in enumerate(read) if j not in reasons]
    if len(kept) < m:
        matrices = {key: v[:, kept] for key, v in matrices.items()}
    metas = [_run_meta(runs[j], names[j], results[j]) for j in read if j not in reasons]
    excluded = [
        {"model": names[j], "run": str(runs[j]), "data": results[j].get("data"), "data_fingerprint": recorded[j],
         "reason": reasons[j]}
        for j in sorted(reasons)
    ]  # fmt: skip
    return matrices, metas, excluded
