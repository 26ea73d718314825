"""``tcmqa report`` renders every table and figure: over a simulated study and over the real sample.

Over a simulated study the report's title and every figure's title say SIMULATED; over a real build none does.
"""

from __future__ import annotations

import argparse
import functools
import json
import operator
import re

import matplotlib.pyplot as plt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from tcmqa import report
from tcmqa.figures import FIGURES
from tcmqa.simulate import SimulationConfig, simulate

MODELS = pd.DataFrame(
    {"model": ["m1", "m2"], "family": ["F", "F"], "params_b": [1.0, 4.0], "single": [40.0, 60.0], "multi": [10.0, 30.0]}
)


def _run_cli(data, outputs, out) -> None:
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    assert (
        report.main(
            parser.parse_args(
                [
                    "--data",
                    str(data),
                    *functools.reduce(operator.iadd, (["--outputs", str(o)] for o in outputs), []),
                    "--out",
                    str(out),
                    "--n-boot",
                    "200",
                ]
            )
        )
        == 0
    )


def _drawn_titles(figure) -> list[str]:
    """Every title drawn on a matplotlib figure: its suptitle and each axes' title."""
    return [figure.get_suptitle(), *(ax.get_title() for ax in figure.axes)]


def _check_report(out, *, simulated: bool) -> str:
    """Every table and figure is there; the titles say SIMULATED exactly when the data is simulated."""
    text = (out / "report.md").read_text(encoding="utf-8")
    for heading in (
        "Table 1.",
        "Table 2.",
        "Table 3.",
        "Table 4.",
        "Table 5.",
        "Table 6.",
        "Cohen's κ",
        "Bootstrap 95%",
        "McNemar",
    ):
        assert heading in text
    title = text.splitlines()[0]
    assert title.startswith("# TCMQA report")
    assert ("SIMULATED" in title) == simulated, title
    for name, figure in FIGURES.items():
        assert re.fullmatch(rf"fig{figure.number}_[a-z_]+", name)  # the file names the paper's figure number
        png = out / "figures" / f"{name}.png"
        assert png.stat().st_size > 5000
        data = json.loads((out / "figures" / f"{name}.json").read_text(encoding="utf-8"))
        assert f"Figure {figure.number}. " in data["title"]
        assert ("SIMULATED" in data["title"]) == simulated, data["title"]
        with Image.open(png) as image:
            assert image.text["Title"] == data["title"]  # the PNG's own title metadata
        drawn = figure.draw(data)  # what is drawn on the PNG: the same title, from the same JSON
        try:
            assert data["title"] in _drawn_titles(drawn)
        finally:
            plt.close(drawn)
        assert f"## {data['title']}" in text and f"figures/{name}.png" in text
    return text


def test_report_over_a_simulated_study(tmp_path):
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=1500, n_raters=15, n_responses=2250, seed=2), MODELS)
    _run_cli(sim / "data", [sim / "runs" / "m1", sim / "runs" / "m2"], tmp_path / "report")
    text = _check_report(tmp_path / "report", simulated=True)
    assert "> **SIMULATED DATA.**" in text
    fig4 = json.loads((tmp_path / "report" / "figures" / "fig4_subset.json").read_text())
    assert fig4["models"] == ["m2", "m1"] and 0 < fig4["human"] < 100


def _constant_run(tree, run, letter: str, *, engine: str | None = None, limit: int | None = None) -> None:
    """A real-format run from the harness's own row builder: a 'model' that always answers ``letter``,
    its results row saying what data it ran on as the harness says it."""
    from tcmqa.data import has_config, load_config
    from tcmqa.engines.base import Completion, Prompt
    from tcmqa.outputs import build_rows, read_outputs, write_part
    from tcmqa.results import results_row
    from tcmqa.runs import data_fingerprint

    scorable = [i for i in load_config(tree, "corpus") if not i["flagged"]]
    items = scorable[:limit]
    logprobs = {c: (-0.1 if c == letter else -3.0 - k) for k, c in enumerate("ABCDE")}
    rows = build_rows(
        items,
        [Prompt([], f"prompt {i['id']}", []) for i in items],
        [Completion(letter, "stop", 10, logprobs) for _ in items],
        model=f"always-{letter}",
        revision="test",
    )
    write_part(run, 0, rows)
    subset = load_config(tree, "subset").to_pandas() if has_config(tree, "subset") else None
    row = results_row(
        read_outputs(run),
        subset,
        family="constant",
        params_b=0.0,
        engine=engine,
        data=str(tree),
        data_fingerprint=data_fingerprint(scorable),
        n_corpus=len(scorable),
    )
    (run / "results.json").write_text(json.dumps(row), encoding="utf-8")


def test_report_over_the_real_sample(sample_tree, tmp_path):
    for letter in "AC":
        _constant_run(sample_tree, tmp_path / "runs" / f"always-{letter}", letter)
    _run_cli(sample_tree, [tmp_path / "runs"], tmp_path / "report")
    text = _check_report(tmp_path / "report", simulated=False)
    assert "always-A" in text and "always-C" in text and "SIMULATED" not in text


def test_report_over_a_real_build_says_nothing_simulated(demo_tree, tmp_path):
    """The demo items built by `tcmqa build` (no sample needed): a real build, so no title says SIMULATED."""
    for letter in "BD":
        _constant_run(demo_tree, tmp_path / "runs" / f"always-{letter}", letter)
    assert not report.is_simulated(demo_tree, [tmp_path / "runs"])
    _run_cli(demo_tree, [tmp_path / "runs"], tmp_path / "report")
    assert "SIMULATED" not in _check_report(tmp_path / "report", simulated=False)


def test_simulated_inputs_are_recognised_from_the_data_or_the_runs(demo_tree, tmp_path):
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=300, n_raters=6, n_responses=450, seed=3), MODELS)
    assert report.is_simulated(sim / "data")
    assert report.is_simulated(demo_tree, [sim / "runs"])  # simulated runs against a real tree
    assert not report.is_simulated(demo_tree)


def test_runs_on_other_data_are_named_and_left_out(demo_tree, tmp_path):
    """A run recording another data fingerprint, and a run (recording none) on no item of this data."""
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=300, n_raters=6, n_responses=450, seed=4), MODELS)
    runs = tmp_path / "runs"
    _constant_run(demo_tree, runs / "here", "B")
    _constant_run(sim / "data", runs / "elsewhere", "C")  # records the simulated data's fingerprint
    legacy = runs / "legacy"  # an older run: no fingerprint recorded, and none of its items is here
    (legacy / "outputs").mkdir(parents=True)
    table = pq.read_table(sim / "runs" / "m1" / "outputs" / "part-00000.parquet")
    ids = pa.array([f"not-here-{i}" for i in range(len(table))])
    renamed = table.set_column(table.schema.get_field_index("item_id"), "item_id", ids)
    pq.write_table(renamed, legacy / "outputs" / "part-00000.parquet")
    (legacy / "results.json").write_text(json.dumps({"model": "m1", "family": "F"}), encoding="utf-8")

    with pytest.warns(UserWarning, match=r"left out 2 run\(s\) computed on other data: always-C .*; m1 "):
        _run_cli(demo_tree, [runs], tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    listed, tables_part = text.split(f"## {report.RUNS_ON_OTHER_DATA}")[1].split("## Table", 1)
    assert "always-C" in listed and "elsewhere" in listed and "m1" in listed and "legacy" in listed
    assert "always-C" not in tables_part and "m1" not in tables_part and "always-B" in tables_part
    board = pd.read_csv(tmp_path / "report" / "tables" / "table4_leaderboard.csv")
    assert board["model"].tolist() == ["always-B"] and board["n"].tolist() == [board["n"].max()] and board["n"][0] > 0
    left_out = pd.read_csv(tmp_path / "report" / "tables" / "runs_on_other_data.csv")
    assert left_out["model"].tolist() == ["always-C", "m1"]
    for name in FIGURES:
        assert "always-C" not in (tmp_path / "report" / "figures" / f"{name}.json").read_text(encoding="utf-8")


def test_only_runs_on_other_data_is_an_error_naming_them(tmp_path):
    """No run on this data and no practitioner data to report instead (a corpus-only tree): an error naming
    the runs left out. With practitioner data the study's own report is written (tests/test_study_report.py)."""
    from sources import DEMO_ITEMS

    from tcmqa.build import build

    build([str(DEMO_ITEMS)], tmp_path / "tree")
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=300, n_raters=6, n_responses=450, seed=5), MODELS)
    _constant_run(sim / "data", tmp_path / "runs" / "elsewhere", "C")
    with pytest.warns(UserWarning, match="always-C"), pytest.raises(SystemExit, match=r"no run .*always-C"):
        _run_cli(tmp_path / "tree", [tmp_path / "runs"], tmp_path / "report")


def test_two_runs_of_one_model_are_told_apart_in_every_table(demo_tree, tmp_path):
    runs = tmp_path / "runs"
    _constant_run(demo_tree, runs / "b-vllm", "B", engine="vllm")
    _constant_run(demo_tree, runs / "b-hf", "B", engine="transformers")
    _constant_run(demo_tree, runs / "d-1", "D", engine="vllm")
    _constant_run(demo_tree, runs / "d-2", "D", engine="vllm", limit=20)  # same engine: the folder tells
    _run_cli(demo_tree, [runs], tmp_path / "report")
    names = {"always-B (vllm)", "always-B (transformers)", "always-D (vllm, d-1)", "always-D (vllm, d-2)"}
    for table in ("table4_leaderboard", "table5_multi_answer", "agreement_kappa", "intervals"):
        frame = pd.read_csv(tmp_path / "report" / "tables" / f"{table}.csv")
        assert set(frame["model"]) == names, table
    tests = pd.read_csv(tmp_path / "report" / "tables" / "neighbour_tests.csv")
    assert len(tests) == 3 and set(tests["model"]) | set(tests["next"]) == names
    board = pd.read_csv(tmp_path / "report" / "tables" / "table4_leaderboard.csv").set_index("model")
    assert board.loc["always-D (vllm, d-2)", "n"] == 20 < board.loc["always-D (vllm, d-1)", "n"]
    fig4 = json.loads((tmp_path / "report" / "figures" / "fig4_subset.json").read_text())
    assert set(fig4["models"]) == names


def test_report_over_a_corpus_only_tree(tmp_path):
    """No platform database: the model tables and figures are written; the practitioner ones are named as skipped."""
    from sources import DEMO_ITEMS

    from tcmqa.build import build

    tree = tmp_path / "tree"
    build([str(DEMO_ITEMS)], tree)
    assert not (tree / "responses").exists() and not (tree / "subset").exists()
    for letter in "AB":
        _constant_run(tree, tmp_path / "runs" / f"always-{letter}", letter)
    _run_cli(tree, [tmp_path / "runs"], tmp_path / "report")
    out = tmp_path / "report"
    text = (out / "report.md").read_text(encoding="utf-8")
    skipped = text.split(f"## {report.PRACTITIONER_TABLES_SKIPPED}")[1].split("\n## ", 1)[0]
    for name in ("Table 1", "Table 3", "Table 6", "Cohen's κ of each model with the practitioner majority"):
        assert name in skipped, name
    for number in (4, 5, 6, 7, 8):
        assert f"Figure {number} (" in skipped
    for heading in (
        "Table 2.",
        "Table 4.",
        "Table 5.",
        "Cohen's κ between model pairs",
        "Bootstrap 95%",
        "Neighbours on the board",
    ):
        assert f"## {heading}" in text, heading
    assert "## Table 1." not in text and "## Table 3." not in text and "## Table 6." not in text
    board = pd.read_csv(out / "tables" / "table4_leaderboard.csv")
    assert set(board["model"]) == {"always-A", "always-B"} and "subset" not in board and board["full"].notna().all()
    for name, figure in FIGURES.items():
        assert (out / "figures" / f"{name}.png").exists() != figure.practitioners, name
