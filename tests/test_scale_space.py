"""The one scale and the pass mark in the Space: the board's abilities are the 2PL fit's on the same outcomes,
fitted in the background and refitted warm; the practitioners are drawn on the models' axis; the item page
gives each item's difficulty and discrimination; the Passes column follows the configured mark; a bad mark is
refused. Screenshots of the board, the ability plot and an item page go to artifacts/screenshots/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium

from tcmqa import irt
from tcmqa.data import load_config
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard import outcomes, plots, settings
from tcmqa.leaderboard.compare import Comparator
from tcmqa.leaderboard.explorer import Explorer
from tcmqa.leaderboard.model_page import ModelPages
from tcmqa.leaderboard.scale import NOT_FITTED, Scales
from tcmqa.prompts import PROTOCOL
from tcmqa.runs import data_fingerprint
from tcmqa.schema import OUTPUTS
from tcmqa.store import SQLiteStore, Store

SKILLS = {"org/weak": 0.25, "org/middling": 0.5, "org/good": 0.7, "org/strong": 0.85, "org/best": 0.95}


def record(store: Store, folder: Path, model: str, corpus: list[dict], right: np.ndarray, **row: object) -> None:
    """A finished full, comparable run of ``model``, right on the items where ``right``."""
    rows = [
        {"model": model, "item_id": item["id"], "answer_type": item["answer_type"], "generated_text": "",
         "prediction": item["answer"] if ok else ["E"], "correct": bool(ok)}
        for item, ok in zip(corpus, right)
    ]  # fmt: skip
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), folder / "part-00000.parquet")
    store.submit(model, "a" * 40, PROTOCOL, "local")
    job = store.claim("w")
    assert job is not None
    results = {"model": model, "origin": "evaluated", "family": "Qwen2", "params_b": 1.0, "revision": "a" * 40,
               "full": 100 * float(np.mean(right)), "protocol": PROTOCOL, "coverage": 100.0,
               "data_fingerprint": data_fingerprint(corpus)} | row  # fmt: skip
    assert store.finish(job, results, [folder / "part-00000.parquet"])


@pytest.fixture
def scored(demo_tree: Path) -> list[dict]:
    return [item for item in load_config(str(demo_tree), "corpus").to_list() if not item["flagged"]]


@pytest.fixture
def space(tmp_path: Path, demo_tree: Path, scored: list[dict]):
    """A store with five comparable models of planted skill, its explorer, scales and board."""
    store = SQLiteStore(tmp_path / "store")
    rng = np.random.default_rng(5)
    answers = {}
    for model, skill in SKILLS.items():
        answers[model] = rng.random(len(scored)) < skill
        record(store, tmp_path / model.replace("/", "-"), model, scored, answers[model])
    explorer = Explorer(str(demo_tree), store)
    scales = Scales(outcomes.shared(store), explorer.responses, explorer.domains)
    explorer.scales = scales
    board = board_lib.Board(store, data_fingerprint(scored), scales=scales)
    return store, explorer, scales, board, answers


def expected_outcome(demo_tree: Path, scored: list[dict], answers: dict[str, np.ndarray]) -> irt.Outcomes:
    """The same outcomes assembled here: the models' answers and the data's practitioners on the scored items."""
    ids = np.array([item["id"] for item in scored], dtype=object)
    responses = load_config(str(demo_tree), "responses").to_pandas()
    responses = responses[responses["item_id"].isin(set(ids))]
    people = sorted(responses["practitioner_id"].unique())
    y = np.full((len(ids), len(answers) + len(people)), np.nan, dtype=np.float32)
    for j, right in enumerate(answers.values()):
        y[:, j] = right
    rows = pd.Index(ids).get_indexer(responses["item_id"])
    y[rows, len(answers) + pd.Index(people).get_indexer(responses["practitioner_id"])] = responses["correct"]
    respondents = pd.DataFrame(
        {"name": [*answers, *people], "kind": ["model"] * len(answers) + ["practitioner"] * len(people)}
    )
    return irt.Outcomes(y, ids, respondents)


def test_irt_board_abilities_are_the_fit_on_the_same_outcomes(space, demo_tree: Path, scored: list[dict]) -> None:
    _, _, scales, board, answers = space
    before = board.frame()  # asks for the fit and returns at once: the columns stay empty until it is done
    assert before[board_lib.ABILITY].isna().all()
    assert scales.wait(120) is not None
    frame = board.frame().set_index("Model")
    outcome = expected_outcome(demo_tree, scored, answers)
    expected = irt.abilities(outcome, irt.fit_2pl(outcome.y)).set_index("name")
    for model in SKILLS:
        assert frame.at[model, board_lib.ABILITY] == pytest.approx(expected.at[model, "theta"], abs=0.011), model
        assert frame.at[model, board_lib.ABILITY_SE] == pytest.approx(expected.at[model, "theta_se"], abs=0.011)
    assert list(frame.loc[list(SKILLS), board_lib.ABILITY]) == sorted(frame.loc[list(SKILLS), board_lib.ABILITY])
    people = expected[expected["kind"] == "practitioner"]
    assert len(people) > 1
    human = frame[(frame["Origin"] == "reference") & (frame[board_lib.COMPARISON] == board_lib.COMPARABLE)]
    if len(human):  # the comparable practitioners' row: the median practitioner
        assert human[board_lib.ABILITY].iloc[0] == pytest.approx(people["theta"].median(), abs=0.011)


def test_irt_refit_is_warm_and_cached(space, tmp_path: Path, scored: list[dict]) -> None:
    store, _, scales, board, _ = space
    board.frame()
    first = scales.wait(120)
    assert first is not None
    assert scales.refresh(list(first.by_run().index)) is first  # the same runs and answers: not refitted
    cold = irt.fit_2pl(first.outcome.y)
    record(store, tmp_path / "late", "org/late", scored, np.random.default_rng(9).random(len(scored)) < 0.6)
    board.frame()
    second = scales.wait(120)
    assert second is not first and "org/late" in set(second.abilities["name"])
    again = irt.fit_2pl(second.outcome.y)
    assert second.fit.iterations < again.iterations  # warm: from the previous fit
    np.testing.assert_allclose(second.fit.theta, again.theta, atol=0.02)
    assert cold.iterations >= again.iterations - 5  # same order of steps cold, with or without the new model


def test_irt_practitioners_drawn_on_the_models_ability_axis(space) -> None:
    _, _, scales, board, _ = space
    board.frame()
    latest = scales.wait(120)
    frame = board.frame()
    figure = plots.ability_figure(frame, latest, 60.0)
    assert len(figure.axes) == 1  # one axis for both
    ax = figure.axes[0]
    lines = {line.get_label().split(" (")[0]: line for line in ax.get_lines()}
    people = latest.practitioners()
    assert list(lines[plots.PRACTITIONERS].get_xdata()) == pytest.approx(people["theta"].tolist())
    comparable = frame[(frame[board_lib.COMPARISON] == board_lib.COMPARABLE) & (frame["Origin"] == "evaluated")]
    assert sorted(lines[plots.MODELS].get_xdata()) == pytest.approx(sorted(comparable[board_lib.ABILITY]))
    passing = next(line for line in ax.get_lines() if line.get_label().startswith("Pass mark 60%"))
    assert passing.get_xdata()[0] == pytest.approx(latest.ability_at(60.0))
    empty = plots.ability_figure(frame, None, 60.0)
    assert "Not fitted yet" in empty.axes[0].texts[0].get_text()


def test_irt_item_page_and_explorer_show_difficulty_and_discrimination(space, scored: list[dict]) -> None:
    from tcmqa.leaderboard.browse import Filters

    _, explorer, scales, board, _ = space
    item = scored[0]["id"]
    text, _, _ = explorer.item(item)
    assert NOT_FITTED in text
    board.frame()
    items = scales.wait(120).items
    text, _, _ = explorer.item(item)
    assert f"**Difficulty** {items.at[item, 'difficulty']:.2f}" in text
    assert f"**discrimination** {items.at[item, 'discrimination']:.2f}" in text
    assert "half the time" in text  # what they mean
    rows = explorer.browse(Filters(search=scored[0]["question"][:12]), None).rows.set_index("id")
    assert rows.at[item, "difficulty"] == round(items.at[item, "difficulty"], 2)
    assert rows.at[item, "discrimination"] == round(items.at[item, "discrimination"], 2)


def test_pass_mark_column_flips_at_the_configured_mark(tmp_path: Path, scored: list[dict]) -> None:
    store = SQLiteStore(tmp_path / "store")
    right = np.arange(len(scored)) % 10 < 6  # 60% right
    record(store, tmp_path / "m", "org/m", scored, right, full=61.0)
    fingerprint = data_fingerprint(scored)
    cell = {
        mark: board_lib.Board(store, fingerprint, pass_mark=mark).frame().set_index("Model").at["org/m", "Passes"]
        for mark in (57.0, 60.0, 61.0, 62.0)
    }
    assert cell[57.0] == cell[60.0] == "full ✓"  # no fresh column on this board (no pool), no scale: no units
    assert cell[61.0].startswith("full ✓")  # the mark reached counts as a pass
    assert cell[62.0].startswith("full ✗")
    paper = board_lib.Board(store, fingerprint, pass_mark=60.0).frame()
    paper = paper[paper[board_lib.COMPARISON] == board_lib.PAPER].set_index("Model")
    assert paper.at["Qwen2.5-14B-Inst.", "Passes"] == "full ✓" and paper["Passes"].str.contains("full ✗").any()


def test_pass_mark_on_the_model_page(tmp_path: Path, demo_tree: Path, scored: list[dict]) -> None:
    store = SQLiteStore(tmp_path / "store")
    right = np.arange(len(scored)) % 10 < 6
    record(store, tmp_path / "m", "org/m", scored, right, fresh=70.0, n_fresh=40)
    comparator = Comparator(str(demo_tree), store)
    accuracy = 100 * right.mean()
    for mark, full in ((accuracy, "✓"), (accuracy + 0.5, "✗")):
        passes = ModelPages(comparator, pass_mark=mark).page("org/m").passes.set_index("scope")
        assert passes.at["full corpus", "accuracy %"] == pytest.approx(100 * right.mean(), abs=0.01)
        assert passes.at["full corpus", "passes"] == full
        assert passes.at["fresh items", "passes"] == "✓" and passes.at["fresh items", "items"] == 40
        assert passes.index.str.startswith("unit: ").sum() >= 1


@pytest.mark.parametrize("mark", [60.0, 45.5])
def test_pass_mark_is_a_line_on_figure2(mark: float) -> None:
    ax = plots.figure2(board_lib.merge([]), mark).axes[0]
    line = next(line for line in ax.get_lines() if line.get_label() == f"Pass mark {mark:g}%")
    assert list(line.get_ydata()) == [mark, mark]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("120", "TCMQA_PASS_MARK: the pass mark is a percentage between 0 and 100 \\(the exam's is 60\\), not 120"),
        ("0", "percentage between 0 and 100"),
        ("sixty", "TCMQA_PASS_MARK='sixty' is not a number: set a percentage such as 60"),
    ],
)
def test_pass_mark_a_bad_mark_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, message: str):
    monkeypatch.setenv("TCMQA_PASS_MARK", value)
    with pytest.raises(ValueError, match=message):
        settings.Settings.from_env()
    monkeypatch.setenv("TCMQA_PASS_MARK", "55")
    assert settings.Settings.from_env().pass_mark == 55.0
    with pytest.raises(ValueError, match="percentage between 0 and 100"):
        board_lib.Board(SQLiteStore(tmp_path / "store"), pass_mark=100.0)


@BROWSER[0]
@BROWSER[1]
def test_irt_pass_mark_screenshots(space, demo_tree: Path, scored: list[dict]) -> None:
    """The board with the Ability and Passes columns and the pass mark's line, the ability plot, an item page."""
    from playwright.sync_api import expect, sync_playwright

    store, _, scales, board, _ = space
    board.frame()
    scales.wait(120)
    best = board.frame().set_index("Model").at["org/best", board_lib.ABILITY]  # what the Space's own fit shows
    SHOTS.mkdir(parents=True, exist_ok=True)
    demo, url = launch(local_settings(store.root, demo_tree, practice=False), store, hub_models())
    try:
        with sync_playwright() as p:
            browser = open_chromium(p)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(url)
            table = page.locator("#board-table")
            expect(table.get_by_text("org/best", exact=True)).to_be_visible(timeout=30_000)
            expect(table.get_by_text("full ✓").first).to_be_attached(timeout=30_000)
            expect(page.locator("#board-pass-mark")).to_contain_text("Pass mark 60%")
            expect(table).to_contain_text(f"{best:g}", timeout=30_000)  # fitted in the background, then refreshed
            columns = page.locator("#board-columns")
            hidden = ["Origin", "Family", "Params (B)", "Full 95% CI", "≈ next by Full", "Single", "Multi", "Subset"]
            hidden += ["Δ human", "LP Full", "Multi F1", "Fresh", "Fresh 95% CI", "Public − Fresh", "Gap vs human"]
            for label in [*hidden, "Gap 95% CI"]:
                columns.get_by_label(label, exact=True).uncheck()
            expect(table.locator("th[title='Gap 95% CI']")).to_have_count(0, timeout=15_000)
            expect(table.locator("th[title='Passes']")).to_have_count(1)
            page.wait_for_timeout(2500)  # two refreshes: the table as the last change left it
            page.screenshot(path=SHOTS / "scale-01-board-abilities-pass.png", full_page=True)

            page.get_by_role("tab", name="Plots").click()
            plot = page.locator("#plots-ability")
            expect(plot.locator("img, svg").first).to_be_visible(timeout=30_000)
            page.wait_for_timeout(1500)
            plot.screenshot(path=SHOTS / "scale-02-ability-plot.png")
            page.locator("#plots-figure2").screenshot(path=SHOTS / "scale-03-figure2-pass-line.png")

            page.get_by_role("tab", name="Item explorer").click()
            page.locator("#item-id textarea").fill(str(scored[0]["id"]))
            page.locator("#item-show").click()
            expect(page.locator("#item-text")).to_contain_text("discrimination", timeout=30_000)
            expect(page.locator("#item-text")).to_contain_text("half the time")
            page.locator("#item-text").screenshot(path=SHOTS / "scale-04-item-difficulty.png")
            browser.close()
    finally:
        demo.close()
