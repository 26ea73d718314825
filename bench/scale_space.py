"""Bench: the Space's one scale (tcmqa.leaderboard.scale) at 1,000 models, cold and warm.

    .venv/bin/python bench/scale_space.py [--models 1000] [--items 38279] [--practitioners 101]

Plants a 2PL study (every model on every item, as comparable rows are; each practitioner on three 150-item
blocks), holds the models' outcomes in the board's in-memory matrices (:class:`tcmqa.leaderboard.outcomes.
Outcomes`, as the store's outcomes fill them) and times :meth:`tcmqa.leaderboard.scale.Scales.refresh`: the
first fit (cold), a refit with one model added (warm, from the previous fit), and a request with nothing
changed (the cache). Prints the times, the steps, the peak memory and how well the planted abilities are
recovered. docs/benchmarks.md, "The scale in the Space".
"""

from __future__ import annotations

import argparse
import resource
import threading
import time

import numpy as np
import pandas as pd

from tcmqa.leaderboard.outcomes import Outcomes, Reference
from tcmqa.leaderboard.scale import Scales
from tcmqa.store.outcomes import RunInfo


class Store:
    """What :class:`Outcomes` asks of a store once its matrices are filled: an index that never changes."""

    def __init__(self, outcomes: Outcomes):
        self.outcomes = outcomes

    def outcome_index(self) -> dict[str, RunInfo]:
        return {r.run: r for r in self.outcomes.runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, default=38279)
    parser.add_argument("--practitioners", type=int, default=101)
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.35, args.items), rng.normal(0, 1, args.items)
    theta = rng.normal(0, 1, args.models + 1)
    correct = np.empty((args.models + 1, args.items), dtype=bool)
    for j, t in enumerate(theta):
        correct[j] = rng.random(args.items) < 1 / (1 + np.exp(-a * (t - b)))
    ids = [f"q{i}" for i in range(args.items)]
    responses = []
    for k, t in enumerate(rng.normal(0.5, 0.5, args.practitioners)):
        items = rng.choice(args.items, 450, replace=False)
        right = rng.random(450) < 1 / (1 + np.exp(-a[items] * (t - b[items])))
        responses.append(
            pd.DataFrame({"practitioner_id": f"p{k}", "item_id": [ids[i] for i in items], "correct": right})
        )
    answers = pd.concat(responses, ignore_index=True)

    outcomes = Outcomes(Store(None))  # pyright: ignore[reportArgumentType]
    outcomes.store = Store(outcomes)  # pyright: ignore[reportAttributeAccessIssue]
    outcomes.lock = threading.RLock()
    outcomes.items, outcomes.number = ids, {item: i for i, item in enumerate(ids)}
    outcomes.present = np.ones_like(correct)
    outcomes.correct = correct
    outcomes.runs = [
        RunInfo(f"run{j}", f"org/m{j}", "r", "p", "recorded", float(j), args.items, 0) for j in range(len(theta))
    ]
    outcomes.row = {r.run: j for j, r in enumerate(outcomes.runs)}
    domains = pd.Series([["basic"]] * args.items, index=ids)
    scales = Scales(Reference(outcomes), lambda: answers, lambda: domains)
    runs = [r.run for r in outcomes.runs]

    for label, chosen in (("cold", runs[:-1]), ("warm, one model added", runs), ("unchanged (cached)", runs)):
        start, cpu = time.perf_counter(), time.process_time()
        scale = scales.refresh(chosen)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert scale is not None
        fitted = scale.by_run()["theta"].reindex(chosen).to_numpy()
        r = np.corrcoef(fitted, theta[: len(chosen)])[0, 1]
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(
            f"{label}: {seconds:.1f} s wall, {cpu:.1f} s CPU, {scale.fit.iterations} steps, "
            f"{scale.outcome.y.shape[0]:,} items x {scale.outcome.y.shape[1]:,} respondents, abilities r = {r:.4f}, "
            f"peak RSS {peak:.2f} GiB"
        )


if __name__ == "__main__":
    main()
