"""The key audit finds planted wrong keys in a simulated study and leaves planted hard items below them."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tcmqa import report
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import load_study
from tcmqa.suspects import FLAG_NATS, audit, audit_models

PLANTED = {"n_items": 4000, "n_raters": 60, "n_responses": 9000, "swapped_keys": 0.03, "hard_items": 0.01, "seed": 7}


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    out = simulate(tmp_path_factory.mktemp("sim-keys"), SimulationConfig(**PLANTED))
    study = load_study(out / "data", [out / "runs"])
    ranked = audit(study, out / "data")
    planted = pq.read_table(out / "raw" / "planted.parquet").to_pandas().set_index("item_id")
    return out, study, ranked.join(planted.drop(columns="key"), on="item_id")


def test_suspect_keys_put_the_swapped_keys_on_top(audited):
    _, _, ranked = audited
    swapped = ranked["swapped"].to_numpy()
    assert swapped.sum() == round(PLANTED["n_items"] * PLANTED["swapped_keys"])
    top = ranked["rank"].to_numpy() <= 0.05 * len(ranked)
    assert swapped[top].sum() / swapped.sum() >= 0.8
    first = swapped[: swapped.sum()]  # as many as were planted: precision equals recall here
    assert first.mean() >= 0.8
    # the leading alternative of a caught wrong key is the true answer, named in the reason
    caught = ranked[swapped & top]
    assert (caught["alternative"] == caught["answer"]).mean() >= 0.95
    assert caught["reason"].iloc[0].startswith("models ")


def test_suspect_keys_rank_planted_hard_items_below_the_swapped(audited):
    _, _, ranked = audited
    hard, swapped = ranked[ranked["hard"]], ranked[ranked["swapped"]]
    # hard indeed: most models got them wrong, and the key is right
    assert (hard["models_key"] < hard["models_answered"] / 3).mean() > 0.8
    assert (hard["key"] == hard["answer"]).all()
    assert hard["rank"].median() > 4 * swapped["rank"].median()
    assert (hard["rank"] <= 0.05 * len(ranked)).mean() <= 0.2


def test_suspect_keys_count_practitioners_flags(audited):
    _, study, ranked = audited
    flagged = ranked[ranked["flags"] > 0]
    assert len(flagged) and not flagged["scored"].any()  # a flagged item is out of the results, and listed
    assert (flagged["models_answered"] == 0).all()
    assert (flagged["score"] >= FLAG_NATS * flagged["flags"] + flagged["practitioner_nats"] - 1e-9).all()
    assert flagged["reason"].str.contains("flag").all()
    assert set(ranked["item_id"]) == set(study.corpus["id"])


def test_suspect_keys_file_from_tcmqa_report(audited, tmp_path):
    out, study, ranked = audited
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    args = ["--data", str(out / "data"), "--outputs", str(out / "runs"), "--out", str(tmp_path), "--n-boot", "20"]
    assert report.main(parser.parse_args(args)) == 0
    written = pd.read_csv(tmp_path / report.SUSPECTS_FILE, dtype={"item_id": str})
    assert written["rank"].tolist() == list(range(1, len(ranked) + 1))
    assert written["item_id"].tolist() == ranked["item_id"].tolist()
    np.testing.assert_allclose(written["score"], ranked["score"])
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## Suspect keys" in text and ranked["reason"].iloc[0] in text
    assert f"over the answers of {len(study.models)} of the {len(study.models)} models" in text


def test_suspect_keys_audit_at_most_the_bound_of_models(audited):
    out, study, ranked = audited
    bound = 10
    assert len(study.models) > bound
    bounded = audit(study, out / "data", max_models=bound)
    assert bounded.attrs == {"models_audited": bound, "models": len(study.models)}
    bounded = bounded.join(ranked.set_index("item_id")[["swapped"]], on="item_id")
    assert bounded["models_answered"].max() == bound  # the votes are the bound's models' only
    # the bound keeps the models with the most items answered, then the highest Full
    full = study.correct.sum(axis=0)
    assert set(audit_models(study, bound)) == set(np.argsort(-full, kind="stable")[:bound])
    partial = study.with_models(np.arange(len(study.models)))
    partial.covered[: len(study.item_ids) // 2, np.argmax(full)] = False
    assert np.argmax(full) not in audit_models(partial, bound)
    # and still finds the swapped keys
    swapped = bounded["swapped"].to_numpy()
    assert swapped[: swapped.sum()].mean() >= 0.8
    assert swapped[bounded["rank"].to_numpy() <= 0.05 * len(bounded)].sum() / swapped.sum() >= 0.8
    with pytest.raises(ValueError, match="at least one model"):
        audit(study, out / "data", max_models=0)
