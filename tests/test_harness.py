"""``tcmqa eval`` end to end on a tiny random model and the demo tree (fast, transformers engine)."""

from __future__ import annotations

import json
import math
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tcmqa import harness, prompts
from tcmqa.data import load_config
from tcmqa.harness import EvalConfig
from tcmqa.outputs import read_outputs
from tcmqa.results import PAPER_HUMAN_REFERENCE, confidence_gap, results_row
from tcmqa.runs import data_fingerprint
from tcmqa.schema import OUTPUTS, RESULTS
from tcmqa_metric import score

pytest.importorskip("transformers")


def config(base: dict, **changes) -> EvalConfig:
    return EvalConfig(**{**base, **changes})


@pytest.fixture(scope="module")
def engine(tiny_engine):
    return tiny_engine


@pytest.fixture(scope="module")
def base_args(tiny_eval):
    return tiny_eval


@pytest.fixture(scope="module")
def full_run(base_args, engine, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return harness.run(config(base_args, out=out), engine=engine)


@pytest.fixture(scope="module")
def corpus(demo_tree):
    return load_config(demo_tree, "corpus").to_pandas()


def test_outputs_have_exactly_the_outputs_schema(full_run):
    parts = sorted((full_run.out / "outputs").glob("part-*.parquet"))
    assert len(parts) > 1
    for part in parts:
        assert pq.read_schema(part).remove_metadata().equals(OUTPUTS.arrow_schema.remove_metadata())
    results = json.loads((full_run.out / "results.json").read_text())
    assert set(results) == set(RESULTS) and results["origin"] == "evaluated"


def test_flagged_items_are_left_out_and_each_item_appears_once(full_run, corpus):
    frame = read_outputs(full_run.out)
    expected = corpus.loc[~corpus["flagged"], "id"].tolist()
    assert corpus["flagged"].any()
    assert frame["item_id"].tolist() == expected


def test_rows_are_consistent_with_the_metric_and_the_protocol(full_run, corpus):
    frame = read_outputs(full_run.out).merge(corpus[["id", "answer"]], left_on="item_id", right_on="id")
    generative = score(
        frame["generated_text"].tolist(),
        frame["answer"].map(list).tolist(),
        frame["answer_type"].tolist(),
        per_item=True,
    )["per_item"]
    assert frame["correct"].tolist() == [bool(x) for x in generative["exact_match"]]
    assert frame["f1"].tolist() == pytest.approx(generative["f1"])
    for _, row in frame.iterrows():
        lps = row["letter_logprobs"]
        ranked = sorted(lps.values(), reverse=True)
        assert row["lp_prediction"] == max(lps, key=lps.get)
        assert row["margin"] == pytest.approx(ranked[0] - ranked[1], abs=1e-5)
        assert row["lp_correct"] == (list(row["answer"]) == [row["lp_prediction"]])
    assert set(frame["protocol"]) == {prompts.PROTOCOL}
    assert frame["prompt_hash"].str.fullmatch(r"[0-9a-f]{64}").all()


def test_results_row_is_recomputed_from_the_outputs(full_run, demo_tree, corpus):
    frame = read_outputs(full_run.out)
    answers = corpus.set_index("id").loc[frame["item_id"], "answer"].map(list).tolist()
    expected = score(frame["prediction"].tolist(), answers, frame["answer_type"].tolist())
    res = full_run.results
    assert res["full"] == pytest.approx(100 * expected["exact_match"])
    assert res["single"] == pytest.approx(100 * expected["exact_match_single"])
    assert res["multi"] == pytest.approx(100 * expected["exact_match_multi"])
    assert res["multi_f1"] == pytest.approx(100 * expected["f1"])
    assert res["multi_mean_pred_size"] == pytest.approx(expected["mean_pred_size"])
    assert (res["n"], res["n_single"], res["n_multi"]) == (expected["n"], expected["n_single"], expected["n_multi"])
    lp = score(frame["lp_prediction"].tolist(), answers, frame["answer_type"].tolist())
    assert res["lp_full"] == pytest.approx(100 * lp["exact_match"])
    subset = load_config(demo_tree, "subset").to_pandas()
    on_subset = subset[subset["item_id"].isin(frame["item_id"])]
    assert res["n_subset"] == len(on_subset) > 0
    assert res["human_reference"] == pytest.approx(100 * on_subset["majority_correct"].mean())
    assert res["delta_human"] == pytest.approx(res["subset"] - res["human_reference"])
    assert res["engine"] == "transformers" and res["dtype"] == "float32" and res["revision"].startswith("local-")
    assert res == results_row(
        frame,
        subset,
        family=None,
        params_b=res["params_b"],
        engine=res["engine"],
        engine_version=res["engine_version"],
        dtype="float32",
        engine_args='{"batch_size": 4}',
        batch_invariant=False,  # the transformers engine says so (padding changes the reduction order)
        date=res["date"],
        data=res["data"],
        data_revision=res["data_revision"],
        data_fingerprint=res["data_fingerprint"],
        n_corpus=res["n_corpus"],
    )


def test_results_row_says_what_data_it_ran_on(full_run, demo_tree, corpus):
    scorable = corpus.loc[~corpus["flagged"]]
    items = load_config(demo_tree, "corpus").filter(lambda item: not item["flagged"]).to_list()
    res = full_run.results
    assert res["data"] == str(demo_tree) and res["data_revision"] is None  # a local tree has no Hub revision
    assert res["data_fingerprint"] == data_fingerprint(items)
    assert res["n_corpus"] == len(scorable) == res["n"] and res["coverage"] == 100.0
    assert res["protocol"] == prompts.PROTOCOL
    from tcmqa.study import load_study  # the report fingerprints the data the same way, and keeps the run

    study = load_study(demo_tree, [full_run.out])
    assert study.data_fingerprint == res["data_fingerprint"] and study.excluded.empty
    written = json.loads((full_run.out / "results.json").read_text())
    assert {k: written[k] for k in ("data", "data_fingerprint", "n_corpus", "coverage")} == {
        k: res[k] for k in ("data", "data_fingerprint", "n_corpus", "coverage")
    }


def test_a_limit_run_shares_the_data_fingerprint_with_a_full_run(base_args, engine, full_run, tmp_path):
    """The fingerprint is the whole scorable corpus's: a --limit run is told apart by its coverage."""
    part = harness.run(config(base_args, out=tmp_path / "part", limit=3), engine=engine).results
    full = full_run.results
    assert part["data_fingerprint"] == full["data_fingerprint"] and part["n_corpus"] == full["n_corpus"]
    assert part["n"] == 3 and part["coverage"] == pytest.approx(100 * 3 / full["n_corpus"]) and part["coverage"] < 100
    assert full["coverage"] == 100.0
    # the run manifest fingerprints the items this run evaluates, so that --resume continues only them
    manifests = [json.loads((run / "run.json").read_text()) for run in (tmp_path / "part", full_run.out)]
    assert manifests[0]["data_fingerprint"] != manifests[1]["data_fingerprint"] == full["data_fingerprint"]


def test_crash_then_resume_equals_an_uninterrupted_run(base_args, engine, full_run, tmp_path, monkeypatch):
    out = tmp_path / "crashed"
    calls = {"n": 0}
    real_generate = engine._generate

    def crash_on_third_chunk(batch):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("simulated crash")
        return real_generate(batch)

    monkeypatch.setattr(engine, "_generate", crash_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        harness.run(config(base_args, out=out), engine=engine)
    monkeypatch.undo()
    assert len(list((out / "outputs").glob("part-*.parquet"))) == 2
    resumed = harness.run(config(base_args, out=out, resume=True), engine=engine)
    total = full_run.results["n"]
    assert resumed.generated == total - 8
    pd.testing.assert_frame_equal(read_outputs(out), read_outputs(full_run.out))
    assert resumed.results == full_run.results


def test_stage_timings_add_up_to_no_more_than_the_run(base_args, engine, tmp_path):
    """Rendering, scoring and writing interleave with generation: each second is counted in one stage."""
    started = time.perf_counter()
    report = harness.run(config(base_args, out=tmp_path / "timed"), engine=engine)
    wall = time.perf_counter() - started
    assert set(report.timings) == set(harness.STAGES)
    assert all(seconds >= 0 for seconds in report.timings.values())
    assert report.timings["generate"] > 0 and sum(report.timings.values()) <= wall


def test_a_finished_run_folder_is_not_overwritten_or_mixed(base_args, engine, full_run):
    with pytest.raises(SystemExit, match="--resume"):
        harness.run(config(base_args, out=full_run.out), engine=engine)
    with pytest.raises(SystemExit, match=r"different run.*n_items"):
        harness.run(config(base_args, out=full_run.out, resume=True, limit=5), engine=engine)


def test_limit_and_subset_only(base_args, engine, tmp_path, demo_tree):
    report = harness.run(config(base_args, out=tmp_path / "a", limit=5, subset_only=True), engine=engine)
    subset_ids = set(load_config(demo_tree, "subset").to_pandas()["item_id"])
    frame = read_outputs(report.out)
    assert len(frame) == 5 and set(frame["item_id"]) <= subset_ids
    assert report.results["n_subset"] == 5 and report.results["coverage"] < 100  # a subset run is partial


def test_dry_run_prints_three_prompts(base_args, capsys):
    harness.run(config(base_args, dry_run=True))
    printed = capsys.readouterr().out
    assert printed.count("-----") == 3
    assert f"protocol {prompts.PROTOCOL}" in printed and "(multi)" in printed
    assert printed.count("\nE. ") == 3


def test_model_without_chat_template_needs_one(base_args, tiny_dir, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(tiny_dir, bare)
    (bare / "chat_template.jinja").unlink()
    args = {**base_args, "model": str(bare)}
    with pytest.raises(ValueError, match="--chat-template"):
        harness.run(config(args, out=tmp_path / "x", limit=2))
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}\n答案：")
    report = harness.run(config(args, out=tmp_path / "y", limit=2, chat_template=template))
    assert report.results["n"] == 2


def test_confidence_gap_caps_margins_at_the_quantile():
    margins = [1.0, 1.0, 3.0, 0.5, 1000.0]
    correct = [True, True, True, False, False]
    assert confidence_gap(margins, correct, cap_quantile=1.0) == pytest.approx(5 / 3 - 500.25)
    # the median (1.0) caps 3.0 and 1000.0: correct [1, 1, 1], wrong [0.5, 1]
    assert confidence_gap(margins, correct, cap_quantile=0.5) == pytest.approx(1.0 - 0.75)
    assert math.isnan(confidence_gap([1.0, 2.0], [True, True]))


def test_results_without_subset_use_the_papers_reference(full_run):
    row = results_row(read_outputs(full_run.out), None)
    assert row["human_reference"] == PAPER_HUMAN_REFERENCE
    assert row["subset"] is None and row["delta_human"] is None and row["n_subset"] == 0
    assert row["data_fingerprint"] is None and row["coverage"] is None  # nothing said about the data


def test_results_row_spells_the_family_canonically(full_run):
    frame = read_outputs(full_run.out)
    assert results_row(frame, None, family="qwen2")["family"] == "Qwen2"
    assert results_row(frame, None, family="gemma3_text")["family"] == "Gemma3"
    assert results_row(frame, None, family="Qwen2.5")["family"] == "Qwen2.5"
    assert results_row(frame, None)["family"] is None
