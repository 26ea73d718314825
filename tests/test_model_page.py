"""One model's page (tcmqa.leaderboard.model_page): a planted model on planted subset rows, every
figure worked out by hand (by domain, by difficulty, by consensus, beside the practitioners), its
calibration and probe columns from its results row, the paper's drawings fed one model; then on a real
store and built tree, with and without practitioner mode."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from test_compare import record_run

from tcmqa.data import load_config
from tcmqa.leaderboard import lang
from tcmqa.leaderboard.compare import Comparator
from tcmqa.leaderboard.model_page import PRACTITIONERS, ModelPages, model_page
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.store import SQLiteStore

MM, IM = "materia_medica", "internal_medicine"
SUBSET = pd.DataFrame(
    [
        # item, raters, correct, majority, each rater's domains, each rater's difficulty
        ("s1", 3, 3, True, [[MM], [MM], [MM]], [1, 1, 2]),  # difficulty (median) 1
        ("s2", 3, 2, True, [[MM], [IM], []], [2, 2, 3]),  # 2
        ("s3", 3, 1, False, [[IM], [IM], [IM]], [4, 5, 5]),  # 5
        ("s4", 3, 0, False, [[], [], []], [3, 3, 3]),  # 3, no domain
        ("s5", 3, 3, True, [[MM], [], []], [1, 2, 3]),  # 2
        ("s6", 3, 2, True, [[IM], [IM], [MM]], [None, None, None]),  # unrated difficulty: 0
    ],
    columns=["item_id", "n_raters", "n_correct", "majority_correct", "rater_domains", "rater_difficulty"],
)
RUN = pd.DataFrame({"item_id": ["s1", "s2", "s3", "s4", "s5", "s6", "x1"], "correct": [1, 0, 1, 0, 1, 0, 1]})
ROW = {"model": "org/m", "ece": 4.2, "acc_top10": 88.0, "acc_coverage_area": None, "circular": 40.0, "order_p": 1e-9}


@pytest.fixture
def page():
    return model_page("org/m", RUN, SUBSET, ROW)


def _row(frame: pd.DataFrame, key: str, value) -> list:
    found = frame[frame[key] == value]
    assert len(found) == 1, (value, frame)
    return [None if isinstance(v, float) and math.isnan(v) else v for v in found.iloc[0].tolist()]


def test_model_page_by_domain_against_the_practitioners(page) -> None:
    assert (page.n_items, page.n_subset) == (7, 6)  # x1 is not in the subset
    # MM: s1 s2 s5 s6 -> model 2/4, majority 4/4; IM: s2 s3 s6 -> 1/3, 2/3; s4 has no domain
    assert _row(page.by_domain, "domain", MM) == [MM, 4, 50.0, 100.0]
    assert _row(page.by_domain, "domain", IM) == [IM, 3, 33.3, 66.7]
    assert _row(page.by_domain, "domain", "unrated") == ["unrated", 1, 0.0, 0.0]
    assert _row(page.by_domain, "domain", "regulation") == ["regulation", 0, None, None]
    # the page shows the domains by name, in the caller's language (tcmqa.leaderboard.lang)
    shown = lang.domain_names(page.by_domain)["domain"].tolist()
    assert "Materia medica" in shown and "unrated" in shown and MM not in shown
    assert len(page.by_domain) == 11  # the ten domains in the paper's order, then the unrated items


def test_model_page_by_difficulty_and_consensus(page) -> None:
    difficulty = page.by_difficulty
    assert difficulty["difficulty"].tolist() == [0, 1, 2, 3, 4, 5]
    assert _row(difficulty, "difficulty", 0) == [0, 1, 0.0, 100.0]  # s6
    assert _row(difficulty, "difficulty", 2) == [2, 2, 50.0, 100.0]  # s2, s5
    assert _row(difficulty, "difficulty", 4) == [4, 0, None, None]
    assert _row(difficulty, "difficulty", 5) == [5, 1, 100.0, 0.0]  # s3
    consensus = page.by_consensus
    assert consensus["practitioners correct"].tolist() == ["0/3", "1/3", "2/3", "3/3"]
    assert _row(consensus, "practitioners correct", "0/3") == ["0/3", 1, 0.0, 0.0]  # s4
    assert _row(consensus, "practitioners correct", "1/3") == ["1/3", 1, 100.0, 33.3]  # s3: the mean rater
    assert _row(consensus, "practitioners correct", "2/3") == ["2/3", 2, 0.0, 66.7]  # s2, s6
    assert _row(consensus, "practitioners correct", "3/3") == ["3/3", 2, 100.0, 100.0]  # s1, s5


def test_model_page_calibration_and_probes_where_they_exist(page) -> None:
    assert page.calibration[["measure", "value"]].values.tolist() == [["ECE", 4.2], ["Acc@10%", 88.0]]
    assert page.probes[["measure", "value"]].values.tolist() == [["Circular", 40.0], ["Order p", 1e-9]]
    bare = model_page("org/m", RUN, SUBSET, None)
    assert bare.calibration.empty and bare.probes.empty


def test_model_page_figures_are_the_papers_drawings_of_one_model(page) -> None:
    radar = page.domain_figure().axes[0]
    assert radar.name == "polar"
    lines = {line.get_label(): line for line in radar.get_lines()}
    assert set(lines) == {PRACTITIONERS, "org/m"}
    # the domains the subset items have, in the paper's order; the radar closes on its first point
    assert [t.get_text() for t in radar.get_xticklabels()] == ["Materia medica", "Internal medicine"]  # by name
    assert list(lines["org/m"].get_ydata()) == [50.0, 33.3, 50.0]
    assert list(lines[PRACTITIONERS].get_ydata()) == [100.0, 66.7, 100.0]
    ax = page.difficulty_figure().axes[0]
    model = next(line for line in ax.get_lines() if line.get_label() != "Practitioners (majority)")
    assert list(model.get_xdata()) == [1, 2, 3, 4, 5]
    assert [None if math.isnan(v) else v for v in model.get_ydata()] == [100.0, 50.0, 0.0, None, 100.0]
    left = page.consensus_figure().axes[0]
    assert list(left.get_lines()[0].get_ydata()) == [0.0, 100.0, 0.0, 100.0]


def test_model_pages_on_a_store(tmp_path: Path, demo_tree: Path) -> None:
    """A model right on every item: 100% everywhere on the data's subset; its stored row gives the calibration;
    practitioner mode (no Space response yet) builds the same subset."""
    store = SQLiteStore(tmp_path / "store")
    corpus = load_config(str(demo_tree), "corpus").to_list()
    record_run(store, tmp_path / "a", "org/a", corpus, {i["id"] for i in corpus})
    subset = load_config(str(demo_tree), "subset").to_pandas()
    scored = {i["id"] for i in corpus if not i["flagged"]}
    comparator = Comparator(str(demo_tree), store)
    for practice in (None, PracticeLoader(str(demo_tree), store)):
        p = ModelPages(comparator, practice).page("org/a")
        assert p.n_items == len(scored) < len(corpus)  # the flagged items are not scored
        assert p.n_subset == len(set(subset["item_id"]) & scored) > 0
        rated = p.by_domain[p.by_domain["n"] > 0]
        assert (rated["model %"] == 100.0).all()
        assert p.by_consensus["n"].sum() == p.n_subset
    assert ModelPages(comparator).page("org/none").n_items == 0
