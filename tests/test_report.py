"""``tcmqa report`` renders every table and figure: over a simulated study and over the real sample."""

from __future__ import annotations

import argparse
import json

import pandas as pd
import pytest

from tcmqa import report
from tcmqa.figures import FIGURES
from tcmqa.simulate import SimulationConfig
from tcmqa.simulate import simulate

MODELS = pd.DataFrame({"model": ["m1", "m2"], "family": ["F", "F"], "params_b": [1.0, 4.0],
                       "single": [40.0, 60.0], "multi": [10.0, 30.0]})


def _run_cli(data, outputs, out) -> None:
    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    assert report.main(parser.parse_args(["--data", str(data), *sum((["--outputs", str(o)] for o in outputs), []),
                                          "--out", str(out), "--n-boot", "200"])) == 0


def _check_report(out) -> str:
    text = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("Table 1.", "Table 2.", "Table 3.", "Table 4.", "Table 5.", "Table 6.", "Cohen's κ",
                    "Bootstrap 95%", "McNemar"):
        assert heading in text
    for name in FIGURES:
        assert (out / "figures" / f"{name}.png").stat().st_size > 5000
        assert "title" in json.loads((out / "figures" / f"{name}.json").read_text(encoding="utf-8"))
        assert f"figures/{name}.png" in text
    return text


def test_report_over_a_simulated_study(tmp_path):
    sim = simulate(tmp_path / "sim", SimulationConfig(n_items=1500, n_raters=15, n_responses=2250, seed=2), MODELS)
    _run_cli(sim / "data", [sim / "runs" / "m1", sim / "runs" / "m2"], tmp_path / "report")
    _check_report(tmp_path / "report")
    fig4 = json.loads((tmp_path / "report" / "figures" / "fig4_subset.json").read_text())
    assert fig4["models"] == ["m2", "m1"] and 0 < fig4["human"] < 100


def _constant_run(tree, run, letter: str) -> None:
    """A real-format run from the harness's own row builder: a 'model' that always answers ``letter``."""
    from tcmqa.data import load_config
    from tcmqa.engines.base import Completion
    from tcmqa.engines.base import Prompt
    from tcmqa.outputs import build_rows
    from tcmqa.outputs import read_outputs
    from tcmqa.outputs import write_part
    from tcmqa.results import results_row

    items = [i for i in load_config(tree, "corpus") if not i["flagged"]]
    logprobs = {c: (-0.1 if c == letter else -3.0 - k) for k, c in enumerate("ABCDE")}
    rows = build_rows(items, [Prompt([], f"prompt {i['id']}", []) for i in items],
                      [Completion(letter, "stop", 10, logprobs) for _ in items], model=f"always-{letter}",
                      revision="test")
    write_part(run, 0, rows)
    subset = load_config(tree, "subset").to_pandas()
    row = results_row(read_outputs(run), subset, family="constant", params_b=0.0)
    (run / "results.json").write_text(json.dumps(row), encoding="utf-8")


def test_report_over_the_real_sample(sample_tree, tmp_path):
    for letter in "AC":
        _constant_run(sample_tree, tmp_path / "runs" / f"always-{letter}", letter)
    _run_cli(sample_tree, [tmp_path / "runs"], tmp_path / "report")
    text = _check_report(tmp_path / "report")
    assert "always-A" in text and "always-C" in text
