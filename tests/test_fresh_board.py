"""The board's fresh columns: a planted memoriser marked, a clean model not (with a planted difficulty shift),
and the columns held back while the pool is small."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fresh_items import accept

from tcmqa.fresh.gap import MIN_POOL
from tcmqa.fresh.hidden import HiddenPool
from tcmqa.fresh.scores import fresh_columns
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.board import FRESH_CI, GAP_CI, GAP_MARK, HUMAN_NAME, Board
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import RESULTS
from tcmqa.store import SQLiteStore

HUMAN_THETA, SHIFT = 0.8, 1.0  # the practitioners' ability; fresh items are SHIFT logits harder for everyone


def written(n: int) -> list[dict]:
    """``n`` distinct items written for the test (their text is not what the board reads)."""
    return [
        {"question": f"第{k}题：下列说法正确的是", "options": {x: f"选项{x}{k}" for x in "ABCDE"}, "answer": ["A"]}
        for k in range(n)
    ]


def pooled(tmp_path, human_fresh: np.ndarray) -> tuple[SQLiteStore, HiddenPool]:
    """A store whose pool holds an accepted item per entry of ``human_fresh``, each answered blind by three
    practitioners with that majority; the pool as a run is handed it."""
    store = SQLiteStore(tmp_path / "s")
    accept(store, written(len(human_fresh)), right={k: [bool(h)] * 3 for k, h in enumerate(human_fresh)})
    return store, HiddenPool(store.fresh_pool_version(), store.accepted_fresh_items(), store.fresh_reference())


def simulate(seed: int, n_public: int = 800, n_fresh: int = 200) -> tuple[np.ndarray, ...]:
    """Rasch items: subset items with three practitioners' majority, pool items (harder) with a blind-answer one."""
    rng = np.random.default_rng(seed)
    public_b, fresh_b = rng.normal(0, 1.2, n_public), rng.normal(SHIFT, 1.2, n_fresh)

    def majority(b: np.ndarray, raters: int) -> np.ndarray:
        right = rng.random((raters, len(b))) < 1 / (1 + np.exp(b - HUMAN_THETA))
        return (2 * right.sum(0) > raters).astype(int)

    return public_b, fresh_b, majority(public_b, 3), majority(fresh_b, 3), rng


def row_for(model: str, pool: HiddenPool, public: np.ndarray, human_public: np.ndarray, fresh: np.ndarray) -> dict:
    """A results row whose fresh columns are computed from per-item correctness (tcmqa.fresh.scores)."""
    ids = [item["id"] for item in pool.items]
    public_rows = pd.DataFrame({"correct": public.astype(bool), "majority_correct": human_public.astype(bool)})
    pool_rows = pd.DataFrame({"item_id": ids, "correct": fresh.astype(bool)})
    columns = fresh_columns(pool, pool_rows, public_rows, public_rows, None)
    values = {
        **{"model": model, "origin": "evaluated", "protocol": PROTOCOL, "revision": "1" * 40},
        **{"data_fingerprint": "f" * 16, "n": 1000, "n_corpus": 1000, "coverage": 100.0},
        **{"full": 100 * public.mean(), "subset": 100 * public.mean(), "human_reference": 100 * human_public.mean()},
    }
    return {name: None for name in RESULTS} | values | columns


def record(store: SQLiteStore, row: dict) -> None:
    store.submit(row["model"], row["revision"], PROTOCOL, "u")
    job = store.claim("w")
    assert job is not None and store.finish(job, row, [])


def test_fresh_gap_board_marks_a_memoriser_and_not_a_clean_model_once_the_pool_is_large(tmp_path):
    public_b, fresh_b, human_public, human_fresh, rng = simulate(seed=3, n_fresh=MIN_POOL)
    memorised = rng.random(len(public_b)) < 0.7  # right on what it memorised, at chance on the rest and the pool
    memoriser_public = np.where(memorised, 1, rng.random(len(public_b)) < 0.2).astype(int)
    memoriser_fresh = (rng.random(len(fresh_b)) < 0.2).astype(int)
    clean_public = (rng.random(len(public_b)) < 1 / (1 + np.exp(public_b - HUMAN_THETA))).astype(int)
    clean_fresh = (rng.random(len(fresh_b)) < 1 / (1 + np.exp(fresh_b - HUMAN_THETA))).astype(int)
    store, pool = pooled(tmp_path, human_fresh[:-1])  # one item short of MIN_POOL
    record(store, row_for("org/memoriser", pool, memoriser_public, human_public, memoriser_fresh[:-1]))
    record(store, row_for("org/clean", pool, clean_public, human_public, clean_fresh[:-1]))
    board = Board(store)
    frame = board.frame().set_index("Model")
    assert set(frame.loc[["org/clean", "org/memoriser"], FRESH_CI]) == {f"pool too small ({MIN_POOL - 1})"}
    assert frame.loc[["org/clean", "org/memoriser"], ["Fresh", "Gap vs human"]].isna().all().all()
    assert set(frame.loc[["org/clean", "org/memoriser"], GAP_CI]) == {""}
    accept(store, written(MIN_POOL)[-1:], right={0: [bool(human_fresh[-1])] * 3})  # the pool reaches MIN_POOL
    frame = board.frame().set_index("Model")
    clean, memoriser = frame.loc["org/clean"], frame.loc["org/memoriser"]
    # the clean model too loses on the harder pool: its own gap is large, the practitioners' as large
    assert clean["Public − Fresh"] > 5 and memoriser["Public − Fresh"] > 5
    assert memoriser[GAP_CI].endswith(GAP_MARK) and GAP_MARK not in clean[GAP_CI]
    assert memoriser["Gap vs human"] > 0 and clean[GAP_CI] != ""
    # the rows were evaluated on the pool before it grew (their back-fills are queued): each says which
    assert clean[FRESH_CI].endswith(f"n={MIN_POOL - 1}, on pool {pool.version[:12]}")
    # the practitioners' fresh accuracy from their blind answers, beside their subset accuracy
    human = frame.loc[HUMAN_NAME]
    human = human[human["Comparison"] == board_lib.COMPARABLE].iloc[0]
    assert human["Fresh"] == pytest.approx(100 * human_fresh.mean(), abs=0.01)
    assert human["Subset"] == pytest.approx(100 * human_public.mean(), abs=0.01)


def test_fresh_reference_on_the_board_is_of_the_studys_raters(tmp_path):
    """The board's practitioners' fresh reference is the majority of the Space's N blind answers (TCMQA_RATERS),
    as the worker's: one right answer of three is right for N = 1 and wrong for N = 3."""
    store = SQLiteStore(tmp_path / "s")
    accept(store, written(1), right={0: [True, False, False]})
    for raters, right in ((1, True), (3, False)):
        assert board_lib.PoolFacts.of(store, raters).human == (right,)
        board = Board(store, raters=raters)
        board.frame()
        assert board._pool.human == (right,)  # what the board's fresh columns are read against
