"""One loader for the analyses: configs and model runs as aligned item × model arrays.

Every table and figure is a reduction over the same few matrices (items along rows, models along
columns), so they are built once here. A local tree is read with pyarrow, column by column (1.1 M
output rows load in seconds); a Hub id goes through ``load_config``. A model need not cover every
item: ``covered`` says which cells hold an output, and every statistic uses covered cells only.

A run computed on other data is left out, by name, into ``Study.excluded``: its ``results.json``
records another data fingerprint than this data's (the fingerprint of every scorable item,
``tcmqa.harness.data_fingerprint``), or (a run that recorded none) none of its output rows is a
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcmqa.data import has_config, load_config
from tcmqa.harness import data_fingerprint
from tcmqa.outputs import OUTPUTS_DIR, RESULTS_FILE, read_outputs_table
from tcmqa.schema import RESPONSES, SUBSET

_OUTPUT_COLUMNS = ["model", "item_id", "correct", "precision", "recall", "f1", "prediction", "lp_correct", "margin"]
_CORPUS_COLUMNS = ["id", "question", "options", "answer", "answer_type", "explanation", "source_difficulty", "flagged"]
# what data_fingerprint hashes, per item
_FINGERPRINT_COLUMNS = ["id", "question", "options", "answer", "answer_type"]
EXCLUDED_COLUMNS = ["model", "run", "data", "data_fingerprint", "reason"]


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
    precision: np.ndarray  # float32, NaN where not covered
    recall: np.ndarray
    f1: np.ndarray
    pred_size: np.ndarray  # letters predicted, NaN where not covered
    subset_rows: np.ndarray  # row of each subset item in the matrices (-1: not scored)
    data_fingerprint: str = ""  # of the scored items (tcmqa.harness.data_fingerprint)
    excluded: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EXCLUDED_COLUMNS))  # other data

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


def _read_config(data: str | Path, config: str, columns: list[str] | None = None) -> pa.Table:
    folder = Path(data).expanduser() / config
    if folder.is_dir():
        return pq.read_table(sorted(folder.glob("*.parquet")), columns=columns)
    return load_config(data, config).data.table.select(columns) if columns else load_config(data, config).data.table


def _read_optional(data: str | Path, config: str, features) -> pd.DataFrame:
    """A practitioner config, or an empty frame of its schema where the data has none (corpus only)."""
    if has_config(data, config):
        try:
            return _read_config(data, config).to_pandas()
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
    corpus_table = _read_config(data, "corpus", _CORPUS_COLUMNS)
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
    index = pd.Index(item_ids)
    runs = run_dirs(list(outputs)) if outputs else []
    n, m = len(item_ids), len(runs)
    covered = np.zeros((n, m), dtype=bool)
    correct, lp_correct = np.zeros((n, m), dtype=bool), np.zeros((n, m), dtype=bool)
    floats = {
        k: np.full((n, m), np.nan, dtype=np.float32) for k in ("margin", "precision", "recall", "f1", "pred_size")
    }
    metas, excluded, kept = [], [], np.ones(m, dtype=bool)
    for j, run in enumerate(runs):
        meta = _results(run)
        table = read_outputs_table(run, columns=_OUTPUT_COLUMNS)
        model = table["model"][0].as_py() if len(table) else meta.get("model") or run.name
        rows = index.get_indexer(table["item_id"].to_numpy(zero_copy_only=False))
        keep = rows >= 0  # outputs for flagged or unknown items do not count
        recorded = meta.get("data_fingerprint")
        reason = None
        if recorded and recorded != fingerprint:
            reason = f"its data fingerprint {recorded} is not this data's ({fingerprint})"
        elif not recorded and not keep.any():
            reason = f"none of its {len(table):,} output rows is a scored item of this data"
        if reason:
            kept[j] = False
            excluded.append(
                {
                    "model": model,
                    "run": str(run),
                    "data": meta.get("data"),
                    "data_fingerprint": recorded,
                    "reason": reason,
                }
            )
            continue
        rows = rows[keep]
        covered[rows, j] = True
        correct[rows, j] = table["correct"].to_numpy(zero_copy_only=False)[keep]
        lp_correct[rows, j] = table["lp_correct"].to_numpy(zero_copy_only=False)[keep]
        for k in ("margin", "precision", "recall", "f1"):
            floats[k][rows, j] = table[k].to_numpy(zero_copy_only=False)[keep]
        floats["pred_size"][rows, j] = pc.list_value_length(table["prediction"]).to_numpy(zero_copy_only=False)[keep]
        metas.append(_run_meta(run, model, meta))
    if excluded:
        warnings.warn(
            f"left out {len(excluded)} run(s) computed on other data: "
            + "; ".join(f"{e['model']} ({e['run']})" for e in excluded),
            stacklevel=2,
        )
        covered, correct, lp_correct = covered[:, kept], correct[:, kept], lp_correct[:, kept]
        floats = {k: v[:, kept] for k, v in floats.items()}
    models = pd.DataFrame(metas, columns=["model", "family", "params_b", "engine", "run"])
    models["model"] = unique_names(models)
    return Study(
        corpus=corpus,
        responses=responses,
        subset=subset,
        models=models,
        item_ids=item_ids,
        multi=(scored["answer_type"] == "multi").to_numpy(),
        covered=covered,
        correct=correct,
        lp_correct=lp_correct,
        subset_rows=index.get_indexer(subset["item_id"]),
        data_fingerprint=fingerprint,
        excluded=pd.DataFrame(excluded, columns=EXCLUDED_COLUMNS),
        **floats,
    )
