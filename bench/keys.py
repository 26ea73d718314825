"""Bench: the key audit, the one scale and the quick estimate over a full-scale SIMULATED study.

    .venv/bin/python bench/keys.py [--root DIR] [--anchors 30 100 200] [--swapped 0.03] [--hard 0.01]

Writes (once, cached under ``--root``) a SIMULATED study at the paper's scale (38,279 items, 29 models,
101 raters) with wrong keys and hard items planted (``tcmqa simulate``'s ``swapped_keys`` and
``hard_items``), then prints: the 2PL fit's time and steps over every model and practitioner
(``tcmqa.irt``); the key audit's time and how it finds the planted keys (``tcmqa.suspects``: share of
the swapped in the list's top 5%, precision and recall of its top 200, where the planted hard items
rank); the quick estimate's leave-one-model-out error for each number of anchors (``tcmqa.quick``),
beside the binomial error of as many items drawn at random. docs/benchmarks.md, "Keys and one scale".
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tcmqa import irt, quick
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import load_study
from tcmqa.suspects import audit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("/tmp/tcmqa-bench-keys"))
    parser.add_argument("--anchors", type=int, nargs="+", default=[30, 100, 200])
    parser.add_argument("--swapped", type=float, default=0.03)
    parser.add_argument("--hard", type=float, default=0.01)
    args = parser.parse_args()
    out = args.root / f"sim-{args.swapped}-{args.hard}"
    if not (out / "raw" / "planted.parquet").exists():
        start = time.perf_counter()
        simulate(out, SimulationConfig(swapped_keys=args.swapped, hard_items=args.hard, seed=7))
        print(f"simulated in {time.perf_counter() - start:.1f} s")
    study = load_study(out / "data", [out / "runs"])
    start = time.perf_counter()
    outcome = irt.outcomes(study)
    fit = irt.fit_2pl(outcome.y)
    cells = int(outcome.observed.sum())
    print(
        f"2PL fit: {outcome.y.shape[0]:,} items x {outcome.y.shape[1]} respondents ({cells:,} answered cells): "
        f"{time.perf_counter() - start:.1f} s, {fit.iterations} steps, converged {fit.converged}"
    )
    start = time.perf_counter()
    ranked = audit(study, out / "data")
    print(f"audit (answers read, fit, evidence, reasons): {time.perf_counter() - start:.1f} s")
    planted = pq.read_table(out / "raw" / "planted.parquet").to_pandas().set_index("item_id").drop(columns="key")
    ranked = ranked.join(planted, on="item_id")
    swapped = ranked["swapped"].to_numpy()
    top5 = ranked["rank"].to_numpy() <= 0.05 * len(ranked)
    print(
        f"{swapped.sum()} swapped of {len(ranked):,}: {swapped[top5].sum() / swapped.sum():.1%} in the top 5%; "
        f"top 200 precision {swapped[:200].mean():.1%}, recall {swapped[:200].sum() / swapped.sum():.1%}; "
        f"top {swapped.sum()} precision {swapped[: swapped.sum()].mean():.1%}"
    )
    hard = ranked[ranked["hard"]]
    print(
        f"{len(hard)} hard: {(hard['rank'] <= 0.05 * len(ranked)).sum()} in the top 5%, median rank "
        f"{hard['rank'].median():.0f} (swapped: {ranked.loc[swapped, 'rank'].median():.0f})"
    )
    full = np.nanmean(outcome.y[:, outcome.respondents["kind"] == "model"], axis=0)
    start = time.perf_counter()
    loo = quick.leave_one_model_out(outcome, fit, args.anchors)
    print(f"leave one model out, {args.anchors} anchors: {time.perf_counter() - start:.1f} s")
    summary = quick.error_summary(loo)
    summary["random"] = [100 * np.sqrt(full * (1 - full) / n).mean() for n in summary["anchors"]]
    print(summary.round(2).to_string(index=False))
    print("  (random: the binomial standard error of as many items drawn at random, points, mean over models)")


if __name__ == "__main__":
    main()
