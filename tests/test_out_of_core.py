"""The out-of-core loader (outputs queried where they lie) gives exactly what the in-memory pandas path gave.

The reference below is the loader as it was: every run's output rows read into pandas, item ids looked
up in an index, values assigned into item × model matrices. It is held equal, matrix by matrix and then
report file by report file (every table's CSV and every figure's JSON), on the real sample with varied
runs (several parts, a partial run, outputs on flagged and unknown items, runs on other data) and on a
simulated study.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tcmqa.data import load_config
from tcmqa.engines.base import Completion, Prompt
from tcmqa.outputs import build_rows, read_outputs, write_part
from tcmqa.outputs_query import OutputsQuery
from tcmqa.report import write_report
from tcmqa.runs import data_fingerprint
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import Study, load_study

LETTERS = np.array(list("ABCDE"))


def pandas_reference(study: Study) -> dict[str, np.ndarray]:
    """The matrices of ``study``'s runs as the in-memory pandas loader built them (all items × models)."""
    index = pd.Index(study.item_ids)
    n, m = len(study.item_ids), len(study.models)
    out = {k: np.zeros((n, m), dtype=bool) for k in ("covered", "correct", "lp_correct")}
    out |= {k: np.full((n, m), np.nan, dtype=np.float32) for k in ("margin", "precision", "recall", "f1", "pred_size")}
    for j, run in enumerate(study.models["run"]):
        frame = read_outputs(run)
        rows = index.get_indexer(frame["item_id"])
        keep = rows >= 0
        rows = rows[keep]
        out["covered"][rows, j] = True
        for k in ("correct", "lp_correct", "margin", "precision", "recall", "f1"):
            out[k][rows, j] = frame[k].to_numpy()[keep]
        out["pred_size"][rows, j] = frame["prediction"].map(len).to_numpy()[keep]
    return out


def assert_equal_to_reference(study: Study, tmp_path: Path) -> None:
    """Every matrix bit for bit (NaN where NaN), then every file of the report made from each."""
    reference = pandas_reference(study)
    multi = np.flatnonzero(study.multi)
    for k, expected in reference.items():
        got = getattr(study, k)
        if k in ("precision", "recall", "f1", "pred_size"):
            expected = expected[multi]  # the multi-answer scores are kept for multi-answer items only
        assert got.dtype == expected.dtype and got.shape == expected.shape, k
        np.testing.assert_array_equal(got, expected, err_msg=k)
    write_report(study, tmp_path / "new", n_boot=200)
    old = {k: v[multi] if k in ("precision", "recall", "f1", "pred_size") else v for k, v in reference.items()}
    write_report(dataclasses.replace(study, **old), tmp_path / "old", n_boot=200)
    files = sorted(
        p.relative_to(tmp_path / "old") for p in (tmp_path / "old").rglob("*") if p.suffix in {".csv", ".json", ".md"}
    )
    assert len(files) > 10
    for name in files:
        assert (tmp_path / "new" / name).read_bytes() == (tmp_path / "old" / name).read_bytes(), name


def varied_run(tree: Path, run: Path, model: str, seed: int, *, limit: int | None = None, chunk: int = 1000,
               with_flagged: bool = False, fingerprint: str | None = None) -> None:  # fmt: skip
    """A real-format run over the tree's items (flagged ones too if asked): random letter sets (empty,
    single, several) and random letter log-probs, written in parts of ``chunk`` rows by the harness's writer."""
    items = [i for i in load_config(tree, "corpus") if with_flagged or not i["flagged"]][:limit]
    rng = np.random.default_rng(seed)
    texts = ["".join(rng.choice(LETTERS, rng.integers(0, 4), replace=False)) for _ in items]
    logprobs = [dict(zip(LETTERS, -rng.exponential(2.0, 5))) for _ in items]
    rows = build_rows(
        items,
        [Prompt([], f"prompt {i['id']}", []) for i in items],
        [Completion(f"答案：{t}", "stop", 10, lp) for t, lp in zip(texts, logprobs)],
        model=model,
        revision="test",
    )
    for k, start in enumerate(range(0, len(rows), chunk)):
        write_part(run, k, rows[start : start + chunk])
    meta = {"model": model, "family": f"F{seed % 2}", "params_b": float(seed), "engine": "vllm"}
    (run / "results.json").write_text(json.dumps(meta | {"data_fingerprint": fingerprint}), encoding="utf-8")


def test_equal_to_the_pandas_path_on_the_real_sample(sample_tree, tmp_path):
    here = data_fingerprint([i for i in load_config(sample_tree, "corpus") if not i["flagged"]])
    runs = tmp_path / "runs"
    varied_run(sample_tree, runs / "a", "model-a", 1, chunk=700, fingerprint=here)
    varied_run(sample_tree, runs / "b", "model-b", 2, with_flagged=True, fingerprint=here)  # flagged outputs ignored
    varied_run(sample_tree, runs / "c", "model-c", 3, limit=1500, chunk=400)  # partial, no fingerprint recorded
    varied_run(sample_tree, runs / "d", "model-a", 4, fingerprint=here)  # the same model again: told apart by folder
    varied_run(sample_tree, runs / "e", "model-e", 5, fingerprint="0" * 64)  # on other data: left out
    with pytest.warns(UserWarning, match=r"left out 1 run\(s\) computed on other data: model-e"):
        study = load_study(sample_tree, [runs])
    assert study.models["model"].tolist() == ["model-a (vllm, a)", "model-b", "model-c", "model-a (vllm, d)"]
    assert study.covered.sum(axis=0).tolist() == [len(study.item_ids)] * 2 + [1500, len(study.item_ids)]
    assert study.excluded["model"].tolist() == ["model-e"] and "not this data's" in study.excluded["reason"][0]
    assert study.multi.any() and (~study.multi).any()
    assert_equal_to_reference(study, tmp_path / "report")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    models = pd.DataFrame(
        {"model": ["s1", "s2", "s3", "s4"], "family": ["A", "A", "B", "B"], "params_b": [1.0, 7.0, 3.0, 14.0],
         "single": [30.0, 70.0, 50.0, 60.0], "multi": [5.0, 40.0, 20.0, 25.0]}
    )  # fmt: skip
    cfg = SimulationConfig(n_items=3000, n_raters=30, n_responses=4500, seed=11)
    return simulate(tmp_path_factory.mktemp("sim"), cfg, models)


def test_equal_to_the_pandas_path_on_a_simulated_study(sim, tmp_path):
    study = load_study(sim / "data", [sim / "runs"])
    assert len(study.models) == 4 and study.covered.all()
    assert_equal_to_reference(study, tmp_path)


def test_a_run_on_no_item_here_is_left_out_and_an_empty_run_is_an_error(sim, tmp_path):
    legacy = tmp_path / "legacy"  # no fingerprint recorded, and none of its items is here
    table = pq.read_table(sim / "runs" / "s1" / "outputs" / "part-00000.parquet")
    renamed = table.set_column(1, "item_id", pa.array([f"elsewhere-{k}" for k in range(len(table))]))
    (legacy / "outputs").mkdir(parents=True)
    pq.write_table(renamed, legacy / "outputs" / "part-00000.parquet")
    with pytest.warns(UserWarning, match=r"left out 1 run\(s\).*: s1 "):
        study = load_study(sim / "data", [sim / "runs" / "s2", legacy])
    assert study.model_names == ["s2"] and study.covered.shape == (len(study.item_ids), 1)
    assert study.excluded["reason"][0] == f"none of its {len(table):,} output rows is a scored item of this data"
    (tmp_path / "empty" / "outputs").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"no output parts .* in .*empty"):
        load_study(sim / "data", [sim / "runs" / "s2", tmp_path / "empty"])


def test_a_run_given_twice_is_two_equal_columns(sim):
    study = load_study(sim / "data", [sim / "runs" / "s1", sim / "runs" / "s1"])
    assert study.model_names == ["s1 (simulation, s1)", "s1 (simulation, s1) #2"]
    np.testing.assert_array_equal(study.margin[:, 0], study.margin[:, 1])
    assert study.covered.all() and not np.isnan(study.margin).any()


def test_a_run_holding_an_item_twice_is_an_error_naming_it(sim, tmp_path):
    run = tmp_path / "twice"
    shutil.copytree(sim / "runs" / "s3", run)
    shutil.copy(run / "outputs" / "part-00000.parquet", run / "outputs" / "part-00001.parquet")
    with pytest.raises(ValueError, match=r"two output rows for one scored item.*twice"):
        load_study(sim / "data", [sim / "runs" / "s1", run])


def test_the_first_row_names_the_model_and_queries_stream_only_what_they_select(sim, tmp_path):
    """``run_heads`` counts rows and names each run's model from its first row (first part, first row);
    ``cells`` places each row by item and run."""
    run = tmp_path / "renamed"
    table = pq.read_table(sim / "runs" / "s4" / "outputs" / "part-00000.parquet")
    (run / "outputs").mkdir(parents=True)
    first = table.slice(0, 10).set_column(0, "model", pa.array(["first"] * 10))
    pq.write_table(table.slice(10), run / "outputs" / "part-00001.parquet")  # the later part
    pq.write_table(first, run / "outputs" / "part-00000.parquet")
    ids = table["item_id"].to_numpy(zero_copy_only=False)[::-1]  # matrix rows in reverse file order
    items = pa.table({"item_id": ids, "row": pa.array(np.arange(len(ids)), pa.int32())})
    with OutputsQuery([sim / "runs" / "s1", run], items) as query:
        heads = query.run_heads()
        assert heads["model"].tolist() == ["s1", "first"] and heads["n_rows"].tolist() == [len(table)] * 2
        margin = np.full(len(ids), np.nan, dtype=np.float32)
        for columns, rows, values in query.cells({"margin": "margin"}, [1]):
            assert (columns == 0).all()
            margin[rows["row"]] = values["margin"]
    np.testing.assert_array_equal(margin, table["margin"].to_numpy()[::-1])
    with pytest.raises(ValueError, match="no run folders to query"):
        OutputsQuery([])
