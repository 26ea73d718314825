"""The board's fresh columns: a planted memoriser marked, a clean model not (with a planted difficulty shift),
and the columns held back while the pool is small."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tcmqa.fresh.gap import MIN_POOL
from tcmqa.fresh.hidden import HiddenPool
from tcmqa.fresh.scores import fresh_columns
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.board import FRESH_CI, GAP_CI, GAP_MARK, HUMAN_NAME, Board
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import CORPUS, RESULTS
from tcmqa.store import SQLiteStore

VERSION = "c0ffee" * 10
HUMAN_THETA, SHIFT = 0.8, 1.0  # the practitioners' ability; fresh items are SHIFT logits harder for everyone


def with_pool(store: SQLiteStore, size: int, human: dict[str, bool], version: str = VERSION) -> SQLiteStore:
    """The store's pool API (engineer pool's Store methods), answered from the test's pool."""
    items = [{"id": f"fresh-{k:04d}"} for k in range(size)]
    vars(store).update(
        accepted_fresh_items=lambda: items, fresh_pool_version=lambda: version, fresh_reference=lambda: dict(human)
    )
    return store


def simulate(seed: int, n_public: int = 800, n_fresh: int = 200) -> tuple[np.ndarray, ...]:
    """Rasch items: subset items with three practitioners' majority, pool items (harder) with a blind-answer one."""
    rng = np.random.default_rng(seed)
    public_b, fresh_b = rng.normal(0, 1.2, n_public), rng.normal(SHIFT, 1.2, n_fresh)

    def majority(b: np.ndarray, raters: int) -> np.ndarray:
        right = rng.random((raters, len(b))) < 1 / (1 + np.exp(b - HUMAN_THETA))
        return (2 * right.sum(0) > raters).astype(int)

    return public_b, fresh_b, majority(public_b, 3), majority(fresh_b, 3), rng


def row_for(model: str, public: np.ndarray, human_public: np.ndarray, fresh: np.ndarray, human_fresh: np.ndarray):
    """A results row whose fresh columns are computed from per-item correctness (tcmqa.fresh.scores)."""
    ids = [f"fresh-{k:04d}" for k in range(len(fresh))]
    items = [dict.fromkeys(CORPUS) | {"id": i, "release_date": "2026-01-01"} for i in ids]
    pool = HiddenPool(VERSION, items, dict(zip(ids, map(bool, human_fresh))))
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


def test_fresh_gap_board_marks_a_memoriser_and_not_a_clean_model(tmp_path):
    public_b, fresh_b, human_public, human_fresh, rng = simulate(seed=3)
    memorised = rng.random(len(public_b)) < 0.7  # right on what it memorised, at chance on the rest and the pool
    memoriser_public = np.where(memorised, 1, rng.random(len(public_b)) < 0.2).astype(int)
    memoriser_fresh = (rng.random(len(fresh_b)) < 0.2).astype(int)
    clean_public = (rng.random(len(public_b)) < 1 / (1 + np.exp(public_b - HUMAN_THETA))).astype(int)
    clean_fresh = (rng.random(len(fresh_b)) < 1 / (1 + np.exp(fresh_b - HUMAN_THETA))).astype(int)
    reference = {f"fresh-{k:04d}": bool(v) for k, v in enumerate(human_fresh)}
    store = with_pool(SQLiteStore(tmp_path / "s"), len(fresh_b), reference)
    record(store, row_for("org/memoriser", memoriser_public, human_public, memoriser_fresh, human_fresh))
    record(store, row_for("org/clean", clean_public, human_public, clean_fresh, human_fresh))
    frame = Board(store).frame().set_index("Model")
    # the clean model too loses on the harder pool: its own gap is large, the practitioners' as large
    clean, memoriser = frame.loc["org/clean"], frame.loc["org/memoriser"]
    assert clean["Public − Fresh"] > 10 and memoriser["Public − Fresh"] > 10
    assert memoriser[GAP_CI].endswith(GAP_MARK) and GAP_MARK not in clean[GAP_CI]
    assert memoriser["Gap vs human"] > 0 and clean[GAP_CI] != ""
    assert clean[FRESH_CI].endswith(f"n={len(fresh_b)}")
    # the practitioners' fresh accuracy from their blind answers, beside their subset accuracy
    human = frame.loc[HUMAN_NAME]
    human = human[human["Comparison"] == board_lib.COMPARABLE].iloc[0]
    assert human["Fresh"] == pytest.approx(100 * human_fresh.mean(), abs=0.01)
    assert human["Subset"] == pytest.approx(100 * human_public.mean(), abs=0.01)


def test_fresh_board_columns_wait_for_the_pool(tmp_path):
    public_b, _, human_public, human_fresh, _ = simulate(seed=0, n_fresh=MIN_POOL - 1)
    store = with_pool(SQLiteStore(tmp_path / "s"), MIN_POOL - 1, {})
    record(store, row_for("org/m", np.ones(len(public_b), int), human_public, human_fresh, human_fresh))
    frame = Board(store).frame().set_index("Model")
    assert frame.loc["org/m", FRESH_CI] == f"pool too small ({MIN_POOL - 1})"
    assert pd.isna(frame.loc["org/m", "Fresh"]) and pd.isna(frame.loc["org/m", "Gap vs human"])
    assert frame.loc["org/m", GAP_CI] == ""
    # a row on an older pool than the board's says which
    grown = with_pool(store, MIN_POOL, {}, version="d" * 60)
    frame = Board(grown).frame().set_index("Model")
    assert frame.loc["org/m", FRESH_CI].endswith(f"n={MIN_POOL - 1}, on pool {VERSION[:12]}")
