"""Bench: the quick estimate's leave-one-model-out error, as a quick job measures it (the board's models only).

    .venv/bin/python bench/quick.py [--root DIR] [--anchors 50 100 200]

Two studies, each a 2PL fit over the models alone (what ``tcmqa.quick_anchors`` fits for a quick job: the
board holds models, not practitioners), then every model left out in turn (``tcmqa.quick.leave_one_model_out``):

* ``simulated``: the SIMULATED 29-model study at the paper's scale (``tcmqa simulate``, seed 0: 38,279 items;
  cached under ``--root``);
* ``sample``: the real platform sample's items (``bench/common.sample_tree``: the 4,100 items built, flagged ones
  out) with SIMULATED answers of the paper's 29 models: each model right with ``sigmoid(c + e)``, ``e`` an item
  difficulty all models share (sd 1, as ``tcmqa simulate``), ``c`` solved per model and answer type to hit its
  reported single- and multi-answer accuracy. The sample has no model runs of its own.

Prints, per study and number of anchors, the error of each estimator in points of Full (mean absolute, root
mean square, largest) beside the binomial standard error of as many items drawn at random, as a Markdown table
(docs/benchmarks.md, "The quick estimate").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import sample_tree, set_env

set_env()

from tcmqa import irt, quick  # noqa: E402  (after the environment is set)
from tcmqa.simulate import SimulationConfig, reported_models, simulate, solve_intercepts  # noqa: E402
from tcmqa.study import load_study  # noqa: E402


def models_only(outcome: irt.Outcomes) -> irt.Outcomes:
    keep = (outcome.respondents["kind"] == "model").to_numpy()
    return irt.Outcomes(outcome.y[:, keep], outcome.item_ids, outcome.respondents[keep].reset_index(drop=True))


def simulated(root: Path) -> irt.Outcomes:
    out = root / "sim-29"
    if not (out / "SIMULATION.json").exists():
        start = time.perf_counter()
        simulate(out, SimulationConfig(seed=0))
        print(f"simulated in {time.perf_counter() - start:.0f} s")
    return models_only(irt.outcomes(load_study(out / "data", [out / "runs"])))


def sample(seed: int = 0) -> irt.Outcomes:
    study = load_study(sample_tree())
    models = reported_models()
    rng = np.random.default_rng(seed)
    offset = rng.normal(0, 1, len(study.item_ids))
    offset -= offset.mean()
    logit = np.empty((len(study.item_ids), len(models)))
    for kind, rows in (("single", ~study.multi), ("multi", study.multi)):
        targets = np.clip(models[kind].to_numpy() / 100, 1e-3, 1 - 1e-3)
        logit[rows] = solve_intercepts(targets, offset[rows])[None, :] + offset[rows, None]
    y = (rng.random(logit.shape) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return irt.Outcomes(y, study.item_ids, pd.DataFrame({"name": models["model"], "kind": "model"}))


def table(name: str, outcome: irt.Outcomes, anchors: list[int]) -> pd.DataFrame:
    start = time.perf_counter()
    fit = irt.fit_2pl(outcome.y)
    fitted = time.perf_counter() - start
    loo = quick.leave_one_model_out(outcome, fit, anchors)
    print(
        f"{name}: {outcome.y.shape[0]:,} items x {outcome.y.shape[1]} models; fit {fitted:.1f} s "
        f"({fit.iterations} steps), leave one model out {time.perf_counter() - start - fitted:.0f} s"
    )
    full = np.nanmean(outcome.y, axis=0)
    summary = quick.error_summary(loo)
    summary["random"] = [100 * np.sqrt(full * (1 - full) / n).mean() for n in summary["anchors"]]
    return summary.assign(study=name, items=outcome.y.shape[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("/tmp/tcmqa-bench-quick"))
    parser.add_argument("--anchors", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--studies", nargs="+", default=["simulated", "sample"], choices=["simulated", "sample"])
    args = parser.parse_args()
    studies = {"simulated": lambda: simulated(args.root), "sample": sample}
    rows = pd.concat([table(name, studies[name](), args.anchors) for name in args.studies])
    print("\n| study | items | anchors | estimator | models | MAE | RMSE | max | random |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows.itertuples():
        print(
            f"| {r.study} | {r.items:,} | {r.anchors} | {r.estimator} | {r.models} | {r.mae:.2f} | {r.rmse:.2f} "
            f"| {r.max:.2f} | {r.random:.2f} |"
        )


if __name__ == "__main__":
    main()
