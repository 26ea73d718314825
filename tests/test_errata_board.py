"""The board and the model page under the served data's errata (``-k errata``): a tree rebuilt with errata serves
corrected keys; every row run before them with outputs in the store is rescored from its stored predictions,
without rerunning, to the numbers ``tcmqa_metric`` gives from scratch on the corrected keys, and says the key
revision it is on; a row without outputs is marked as not rescored."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.ingest import majority
from tcmqa.leaderboard.board import COMPARABLE, COMPARISON, OTHER_DATA, Board, served_fingerprint
from tcmqa.leaderboard.compare import Comparator
from tcmqa.leaderboard.model_page import ModelPages
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.leaderboard.rescored import KEY_REVISION, NOT_RESCORED, Rescorer
from tcmqa.prompts import PROTOCOL
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.store import SQLiteStore
from tcmqa.study import load_study
from tcmqa_metric import score

MODELS = pd.DataFrame(
    {"model": ["weak", "middle", "strong"], "family": ["F", "F", "F"], "params_b": [1.0, 4.0, 9.0],
     "single": [45.0, 55.0, 70.0], "multi": [10.0, 25.0, 40.0]}
)  # fmt: skip


@dataclass
class Planted:
    """Runs recorded on the keys as first published, then a tree rebuilt with errata on the planted wrong keys:
    ``errata[-1]`` drops an item of the study's subset, the others correct a key (some in the subset too)."""

    sim: Path
    store: SQLiteStore
    rebuilt: Path
    served: str
    errata: list[dict]


def planted(tmp_path: Path) -> Planted:
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=800, n_raters=12, n_responses=1600, swapped_keys=0.05,
                   seed=5), MODELS)  # fmt: skip
    before = load_study(sim / "data").data_fingerprint
    store = SQLiteStore(tmp_path / "store")
    for run in sorted((sim / "runs").iterdir()):  # the runs, recorded on the keys as first published
        row = json.loads((run / "results.json").read_text(encoding="utf-8"))
        row |= {"protocol": PROTOCOL, "data_fingerprint": before, "coverage": 100.0}  # revision: its outputs' own
        store.submit(row["model"], row["revision"], PROTOCOL, "local")
        job = store.claim("w")
        assert job is not None and store.finish(job, row, sorted((run / "outputs").glob("*.parquet")))
    store.import_results([{"model": "org/outputs-elsewhere", "family": "F", "full": 61.0, "coverage": 100.0,
                           "protocol": PROTOCOL, "revision": "b" * 40, "data_fingerprint": before}])  # fmt: skip
    # errata on the planted wrong keys (one of the subset's dropped), then the next tree
    planted = pq.read_table(sim / "raw" / "planted.parquet").to_pandas().set_index("item_id")
    corpus = {r["id"]: r for r in load_config(sim / "data", "corpus") if not r["flagged"]}
    subset = {r["item_id"] for r in load_config(sim / "data", "subset")}
    swapped = sorted((i for i in corpus if planted.at[i, "swapped"]), key=lambda i: i not in subset)
    base = {"reviewers": ["S1", "S2"], "decided_date": "2026-12-01", "corpus_revision": before}
    errata = [{"item_id": i, "verdict": "wrong_key", "old_key": corpus[i]["answer"],
               "new_key": list(planted.at[i, "answer"]), **base} for i in swapped[1:]]  # fmt: skip
    errata.append({"item_id": swapped[0], "verdict": "unclear", "old_key": corpus[swapped[0]]["answer"], "drop": True,
                   **base})  # fmt: skip
    path = tmp_path / "errata.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in errata), encoding="utf-8")
    rebuilt = tmp_path / "rebuilt"
    build(
        [str(sim / "raw" / "items.jsonl")], rebuilt, str(sim / "raw" / "annotation_platform.sqlite"), errata=str(path)
    )
    served = served_fingerprint(str(rebuilt))
    assert served != before
    return Planted(sim, store, rebuilt, served, errata)


def test_errata_board_and_model_page_rescore_stored_predictions(tmp_path):
    p = planted(tmp_path)
    sim, store, rebuilt, served, errata = p.sim, p.store, p.rebuilt, p.served, p.errata
    board = Board(store, data_fingerprint=served, rescorer=Rescorer(store, str(rebuilt), served))
    frame = board.frame().set_index("Model")
    fixed = {r["id"]: r for r in load_config(rebuilt, "corpus") if not r["flagged"]}
    for run in sorted((sim / "runs").iterdir()):
        outputs = pq.read_table(sorted((run / "outputs").glob("*.parquet"))).to_pandas()
        outputs = outputs[outputs["item_id"].isin(list(fixed))]
        refs = ["".join(fixed[i]["answer"]) for i in outputs["item_id"]]
        expected = score(["".join(p) for p in outputs["prediction"]], refs)
        model = outputs["model"].iloc[0]
        assert frame.at[model, "Full"] == pytest.approx(100 * expected["exact_match"], abs=0.005)
        assert frame.at[model, KEY_REVISION] == f"{served[:12]} (rescored)"
        assert frame.at[model, COMPARISON] == COMPARABLE  # on the served keys now
        recorded = json.loads((run / "results.json").read_text(encoding="utf-8"))["full"]
        assert frame.at[model, "Full"] != pytest.approx(recorded, abs=0.005)  # the planted keys had moved it
    assert frame.at["org/outputs-elsewhere", KEY_REVISION] == NOT_RESCORED
    assert frame.at["org/outputs-elsewhere", "Full"] == 61.0
    assert frame.at["org/outputs-elsewhere", COMPARISON] == OTHER_DATA
    assert set(frame.loc[frame["Origin"] == "reported", KEY_REVISION]) == {NOT_RESCORED}

    # the model page: its run scored on the corrected keys, the dropped item out
    page = ModelPages(Comparator(str(rebuilt), store)).page("strong")
    outputs = pq.read_table(sorted((sim / "runs" / "strong" / "outputs").glob("*.parquet"))).to_pandas()
    subset = {r["item_id"] for r in load_config(rebuilt, "subset")}
    on = outputs[outputs["item_id"].isin(list(subset & set(fixed)))]
    expected = score(["".join(p) for p in on["prediction"]], ["".join(fixed[i]["answer"]) for i in on["item_id"]])
    assert page.n_items == len(fixed) and page.n_subset == expected["n"]
    shown = (page.by_consensus["n"] * page.by_consensus["model %"]).sum() / page.by_consensus["n"].sum()
    assert shown == pytest.approx(100 * expected["exact_match"], abs=0.1)
    assert f"{len(errata)} errata applied" in page.summary()


def test_errata_subset_and_delta_human_rescored_on_the_corrected_keys(tmp_path):
    """The board's Subset, the practitioners' reference and Δ human of a rescored run, with the study pinned to the
    tree before the errata and a corrected and a dropped item in its subset, equal the metric and the majority
    on the corrected keys from scratch: the dropped item out, the corrected one scored again on both sides."""
    p = planted(tmp_path)
    old_subset = {r["item_id"] for r in load_config(p.sim / "data", "subset")}
    dropped = p.errata[-1]["item_id"]
    assert dropped in old_subset and any(e["item_id"] in old_subset for e in p.errata[:-1])
    practice = PracticeLoader(str(p.rebuilt), p.store, study=str(p.sim / "data")).get()
    board = Board(
        p.store, data_fingerprint=p.served, practice=practice, rescorer=Rescorer(p.store, str(p.rebuilt), p.served)
    )
    frame = board.frame().set_index("Model")

    fixed = {r["id"]: r for r in load_config(p.rebuilt, "corpus") if not r["flagged"]}
    items = old_subset & set(fixed)  # the subset on the served keys: the dropped item out
    responses = pd.DataFrame(load_config(p.sim / "data", "responses").to_list())
    responses = responses[responses["item_id"].isin(list(items))]
    right = responses.assign(
        right=[list(s) == list(fixed[i]["answer"]) for i, s in zip(responses["item_id"], responses["selected"])]
    )
    votes = right.groupby("item_id")["right"].agg(["sum", "count"])
    human = {i: majority(int(r["sum"]), int(r["count"])) for i, r in votes.iterrows()}
    for run in sorted((p.sim / "runs").iterdir()):
        outputs = pq.read_table(sorted((run / "outputs").glob("*.parquet"))).to_pandas()
        on = outputs[outputs["item_id"].isin(list(human))]
        expected = score(["".join(x) for x in on["prediction"]], ["".join(fixed[i]["answer"]) for i in on["item_id"]])
        reference = 100 * sum(human[i] for i in on["item_id"]) / len(on)
        model = outputs["model"].iloc[0]
        assert frame.at[model, "Subset"] == pytest.approx(100 * expected["exact_match"], abs=0.005)
        assert frame.at[model, "Δ human"] == pytest.approx(100 * expected["exact_match"] - reference, abs=0.01)
