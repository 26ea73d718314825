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


def _constant_run(tree, run, letter: str) -> None:
    """A real-format run from the harness's own row builder: a 'model' that always answers ``letter``."""
    from tcmqa.data import load_config
    from tcmqa.engines.base import Completion, Prompt
    from tcmqa.outputs import build_rows, read_outputs, write_part
    from tcmqa.results import results_row

    items = [i for i in load_config(tree, "corpus") if not i["flagged"]]
    logprobs = {c: (-0.1 if c == letter else -3.0 - k) for k, c in enumerate("ABCDE")}
    rows = build_rows(
        items,
        [Prompt([], f"prompt {i['id']}", []) for i in items],
        [Completion(letter, "stop", 10, logprobs) for _ in items],
        model=f"always-{letter}",
        revision="test",
    )
    write_part(run, 0, rows)
    subset = load_config(tree, "subset").to_pandas()
    row = results_row(read_outputs(run), subset, family="constant", params_b=0.0)
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
