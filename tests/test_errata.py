"""Errata as data: published as the errata config, applied by the builder, the original key kept."""

from __future__ import annotations

import json

import datasets
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats
from sources import DEMO_ITEMS

from tcmqa.build import build
from tcmqa.cli import main as cli_main
from tcmqa.data import load_config
from tcmqa.errata import VERDICTS, check_erratum, read_errata
from tcmqa.rescore import ranking_change, rescore
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import load_study
from tcmqa_metric import LETTERS, score


def _corpus(tree) -> dict[str, dict]:
    return {row["id"]: row for row in load_config(tree, "corpus")}


def _erratum(item: dict, verdict: str, **fields) -> dict:
    return {"item_id": item["id"], "verdict": verdict, "old_key": item["answer"], "reviewers": ["P001", "P002"],
            "decided_date": "2026-12-01", "corpus_revision": "r1", **fields}  # fmt: skip


def test_errata_rebuild_keeps_the_original_key_and_publishes_the_verdicts(demo_tree, demo_db, tmp_path):
    before = _corpus(demo_tree)
    single = [row for row in before.values() if row["answer_type"] == "single" and not row["flagged"]]
    wrong, dropped, right = single[:3]
    new_key = [next(c for c in LETTERS if [c] != wrong["answer"])]
    errata = [
        _erratum(wrong, "wrong_key", new_key=new_key, comment="the textbook gives the other option"),
        _erratum(dropped, "several_correct", drop=True),
        _erratum(right, "key_correct"),
    ]
    path = tmp_path / "errata.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in errata), encoding="utf-8")
    out = tmp_path / "tree"
    report = build([str(DEMO_ITEMS)], out, str(demo_db), errata=str(path))
    after = _corpus(out)
    assert after[wrong["id"]]["answer"] == new_key and after[wrong["id"]]["original_answer"] == wrong["answer"]
    assert dropped["id"] not in after and len(after) == len(before) - 1
    assert {"where": "corpus", "id": dropped["id"], "reason": "erratum", "detail": "several_correct"} in report[
        "dropped"
    ]
    assert all(row["original_answer"] == row["answer"] for key, row in after.items() if key != wrong["id"])
    published = datasets.load_dataset(str(out), "errata", split="test")
    assert [r["item_id"] for r in published] == [wrong["id"], dropped["id"], right["id"]]
    assert published[0]["new_key"] == new_key and published[1]["drop"] and published[2]["verdict"] == "key_correct"
    assert datasets.load_dataset(str(out), "corpus", split="test").features["original_answer"] is not None
    assert "| `errata` | adjudicated item" in (out / "README.md").read_text(encoding="utf-8")
    assert "| `errata` |" not in (demo_tree / "README.md").read_text(encoding="utf-8")
    # the practitioners' responses are scored against the corrected key
    responses = [r for r in load_config(out, "responses") if r["item_id"] == wrong["id"]]
    assert all(r["correct"] == (sorted(r["selected"]) == new_key) for r in responses)


def test_errata_on_another_revision_are_refused(demo_tree, demo_db, tmp_path):
    item = next(iter(_corpus(demo_tree).values()))
    other = [next(c for c in LETTERS if [c] != item["answer"])]
    path = tmp_path / "errata.jsonl"
    path.write_text(json.dumps(_erratum(item, "key_correct", old_key=other)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"erratum for item {item['id']}: adjudicated on key"):
        build([str(DEMO_ITEMS)], tmp_path / "tree", str(demo_db), errata=str(path))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"verdict": "typo"}, "verdict must be one of"),
        ({"verdict": "wrong_key"}, "needs the right letters in new_key"),
        ({"verdict": "unclear"}, "cannot be scored as written"),
        ({"reviewers": ["P001"]}, "at least 2 distinct reviewers"),
        ({"old_key": ["Z"]}, "old_key must be distinct letters"),
        ({"corpus_revision": ""}, "corpus_revision"),
    ],
)
def test_errata_refuse_an_incomplete_verdict(fields, message):
    item = {"id": "7", "answer": ["A"]}
    with pytest.raises(ValueError, match=message):
        check_erratum(_erratum(item, "key_correct") | fields)
    assert "key_correct" in VERDICTS


MODELS = pd.DataFrame(
    {"model": ["weak", "middle", "strong"], "family": ["F", "F", "F"], "params_b": [1.0, 4.0, 9.0],
     "single": [45.0, 55.0, 70.0], "multi": [10.0, 25.0, 40.0]}
)  # fmt: skip


def test_errata_rescore_equals_the_metric_on_the_corrected_keys(tmp_path):
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=800, n_raters=12, n_responses=1600, swapped_keys=0.05,
                   seed=3), MODELS)  # fmt: skip
    planted = pq.read_table(sim / "raw" / "planted.parquet").to_pandas().set_index("item_id")
    corpus = _corpus(sim / "data")
    scored = [i for i, row in corpus.items() if not row["flagged"]]
    swapped = [i for i in scored if planted.at[i, "swapped"]]
    kept = [i for i in scored if not planted.at[i, "swapped"]]
    errata = [_erratum(corpus[i], "wrong_key", new_key=list(planted.at[i, "answer"])) for i in swapped[1:]]
    errata += [_erratum(corpus[swapped[0]], "unclear", drop=True), _erratum(corpus[kept[0]], "several_correct",
               drop=True)] + [_erratum(corpus[i], "key_correct") for i in kept[1:6]]  # fmt: skip
    path = tmp_path / "errata.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in errata), encoding="utf-8")
    # the round trip: publish the errata with a rebuilt tree and read them back from it
    rebuilt = tmp_path / "rebuilt"
    build(
        [str(sim / "raw" / "items.jsonl")], rebuilt, str(sim / "raw" / "annotation_platform.sqlite"), errata=str(path)
    )
    published = read_errata(rebuilt / "errata")
    assert len(datasets.load_dataset(str(rebuilt), "errata", split="test")) == len(errata)
    study = load_study(sim / "data", [sim / "runs"])
    result = rescore(study, sim / "data", published)
    rows = result.rows.set_index(["kind", "name"])
    # from scratch: the metric on every stored prediction against the rebuilt tree's keys, dropped items out
    fixed = {row["id"]: row for row in load_config(rebuilt, "corpus") if not row["flagged"]}
    assert len(fixed) == len(scored) - 2
    for run in sorted((sim / "runs").iterdir()):
        outputs = pq.read_table(sorted((run / "outputs").glob("*.parquet"))).to_pandas()
        outputs = outputs[outputs["item_id"].isin(list(fixed))]
        refs = ["".join(fixed[i]["answer"]) for i in outputs["item_id"]]
        expected = score(["".join(p) for p in outputs["prediction"]], refs)
        model = outputs["model"].iloc[0]
        assert rows.at[("model", model), "accuracy_after"] == pytest.approx(100 * expected["exact_match"])
        assert rows.at[("model", model), "n_after"] == expected["n"] == len(fixed)
        assert rows.at[("model", model), "accuracy_before"] == pytest.approx(
            100 * study.correct[:, study.model_names.index(model)].mean()
        )
    # the practitioners: the rebuilt tree scored their selections against the corrected keys
    responses = load_config(rebuilt, "responses").to_pandas()
    responses = responses[responses["item_id"].isin(list(fixed))]
    by_rater = responses.groupby("practitioner_id")["correct"].agg(["mean", "count"])
    practitioners = rows.xs("practitioner")
    assert len(practitioners) == len(by_rater)
    assert practitioners.loc[by_rater.index, "accuracy_after"].to_numpy() == pytest.approx(100 * by_rater["mean"])
    assert (practitioners.loc[by_rater.index, "n_after"].to_numpy() == by_rater["count"].to_numpy()).all()
    strong = rows.loc[("model", "strong")]
    assert strong["accuracy_after"] > strong["accuracy_before"]  # the swapped keys had marked it wrong
    assert np.isfinite(strong["delta_human_after"]) and strong["delta_human_after"] != strong["delta_human_before"]
    assert set(rows["key_revision_before"]) == {study.data_fingerprint}
    assert set(rows["key_revision_after"]) == {load_study(rebuilt).data_fingerprint}
    assert result.n_reviewed == len(errata) and result.n_errors == len(errata) - 5
    low, high = stats.binomtest(result.n_errors, len(errata)).proportion_ci(0.95)
    assert (result.error_low, result.error_high) == pytest.approx((100 * low, 100 * high))
    # tcmqa report --errata writes the same rows and the section
    report = tmp_path / "report"
    assert cli_main(["report", "--data", str(sim / "data"), "--outputs", str(sim / "runs"), "--errata",
                     str(rebuilt / "errata"), "--out", str(report), "--n-boot", "10"]) == 0  # fmt: skip
    written = pd.read_csv(report / "tables" / "errata_rescore.csv").set_index(["kind", "name"])
    assert written["accuracy_after"].to_numpy() == pytest.approx(rows["accuracy_after"].to_numpy())
    assert pd.read_csv(report / "tables" / "errata_summary.csv").at[0, "kendall_tau"] == pytest.approx(result.tau)
    assert "## Rescored under the errata" in (report / "report.md").read_text(encoding="utf-8")


def test_errata_ranking_change_and_kendall_tau_by_hand():
    # before: a > b > c > d; after: b > c > a > d. Of the 6 pairs, (a, b) and (a, c) swap: tau = (4 - 2) / 6
    frame, tau, _ = ranking_change(["a", "b", "c", "d"], np.array([90.0, 80, 70, 60]), np.array([70.0, 90, 80, 60]))
    assert frame["rank_before"].tolist() == [1, 2, 3, 4]
    assert frame["rank_after"].tolist() == [3, 1, 2, 4]
    assert frame["rank_change"].tolist() == [-2, 1, 1, 0]
    assert tau == pytest.approx(1 / 3)
