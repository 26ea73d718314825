"""One loader for the analyses: configs and model runs as aligned item × model arrays.

Every table and figure is a reduction over the same few matrices (items along rows, models along
columns), so they are built once here. A local tree is read with pyarrow, column by column (1.1 M
output rows load in seconds); a Hub id goes through ``load_config``. A model need not cover every
item: ``covered`` says which cells hold an output, and every statistic uses covered cells only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcmqa.data import load_config
from tcmqa.outputs import OUTPUTS_DIR, RESULTS_FILE, read_outputs_table

_OUTPUT_COLUMNS = ["model", "item_id", "correct", "precision", "recall", "f1", "prediction", "lp_correct", "margin"]
_CORPUS_COLUMNS = ["id", "options", "answer_type", "explanation", "source_difficulty", "flagged"]


@dataclass
class Study:
    """The configs of one release plus the model runs to compare, aligned by item."""

    corpus: pd.DataFrame  # all corpus rows (id, answer_type, flagged, has_explanation, ...)
    responses: pd.DataFrame  # every practitioner response
    subset: pd.DataFrame  # the three-rater items, indexed like the rows of the matrices below
    models: pd.DataFrame  # model, family, params_b; column order of the matrices
    item_ids: np.ndarray  # scored items: unflagged corpus items, corpus order
    multi: np.ndarray  # bool per scored item
    covered: np.ndarray  # items × models: the model has an output for the item
    correct: np.ndarray  # items × models, exact match (False where not covered)
    lp_correct: np.ndarray
    margin: np.ndarray  # float32, NaN where not covered
    precision: np.ndarray  # float32, NaN where not covered
    recall: np.ndarray
    f1: np.ndarray
    pred_size: np.ndarray  # letters predicted, NaN where not covered
    subset_rows: np.ndarray  # row of each subset item in the matrices (-1: not scored)

    @property
    def model_names(self) -> list[str]:
        return self.models["model"].tolist()


def _read_config(data: str | Path, config: str, columns: list[str] | None = None) -> pa.Table:
    folder = Path(data).expanduser() / config
    if folder.is_dir():
        return pq.read_table(sorted(folder.glob("*.parquet")), columns=columns)
    return load_config(data, config).data.table.select(columns) if columns else load_config(data, config).data.table


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


def _run_meta(run: Path, model: str) -> dict:
    results = run / RESULTS_FILE
    meta = json.loads(results.read_text(encoding="utf-8")) if results.is_file() else {}
    return {"model": model, "family": meta.get("family") or "unknown", "params_b": meta.get("params_b")}


def load_study(data: str | Path, outputs: list[str | Path]) -> Study:
    """Read the ``corpus``, ``responses`` and ``subset`` configs of ``data`` and the runs in ``outputs``."""
    corpus_table = _read_config(data, "corpus", _CORPUS_COLUMNS)
    options = corpus_table["options"].combine_chunks()
    five = np.ones(len(corpus_table), dtype=bool)
    for letter in range(options.type.num_fields):
        five &= pc.greater(pc.utf8_length(pc.fill_null(options.field(letter), "")), 0).to_numpy(zero_copy_only=False)
    corpus = corpus_table.drop_columns(["options"]).to_pandas()
    corpus["five_options"] = five
    corpus["has_explanation"] = corpus.pop("explanation").fillna("").str.len() > 0
    responses = _read_config(data, "responses").to_pandas()
    subset = _read_config(data, "subset").to_pandas()

    scored = corpus[~corpus["flagged"]]
    item_ids = scored["id"].to_numpy()
    index = pd.Index(item_ids)
    runs = run_dirs(outputs)
    n, m = len(item_ids), len(runs)
    covered = np.zeros((n, m), dtype=bool)
    correct, lp_correct = np.zeros((n, m), dtype=bool), np.zeros((n, m), dtype=bool)
    floats = {
        k: np.full((n, m), np.nan, dtype=np.float32) for k in ("margin", "precision", "recall", "f1", "pred_size")
    }
    metas = []
    for j, run in enumerate(runs):
        table = read_outputs_table(run, columns=_OUTPUT_COLUMNS)
        rows = index.get_indexer(table["item_id"].to_numpy(zero_copy_only=False))
        keep = rows >= 0  # outputs for flagged or unknown items do not count
        rows = rows[keep]
        covered[rows, j] = True
        correct[rows, j] = table["correct"].to_numpy(zero_copy_only=False)[keep]
        lp_correct[rows, j] = table["lp_correct"].to_numpy(zero_copy_only=False)[keep]
        for k in ("margin", "precision", "recall", "f1"):
            floats[k][rows, j] = table[k].to_numpy(zero_copy_only=False)[keep]
        floats["pred_size"][rows, j] = pc.list_value_length(table["prediction"]).to_numpy(zero_copy_only=False)[keep]
        metas.append(_run_meta(run, table["model"][0].as_py() if len(table) else run.name))
    return Study(
        corpus=corpus,
        responses=responses,
        subset=subset,
        models=pd.DataFrame(metas),
        item_ids=item_ids,
        multi=(scored["answer_type"] == "multi").to_numpy(),
        covered=covered,
        correct=correct,
        lp_correct=lp_correct,
        subset_rows=index.get_indexer(subset["item_id"]),
        **floats,
    )
