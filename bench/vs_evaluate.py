"""The TCMQA metric against stock scorers on the same single-answer inputs: equal values, and the time each
takes on 1,000,000 items.

evaluate's `exact_match` is not shipped with the `evaluate` package: `evaluate.load("exact_match")` fetches it
from the Hub. This script fetches nothing; it tries the load offline (it works only if the module is already
in the local cache) and otherwise says so in the table and compares with scikit-learn's `accuracy_score` and a
numpy baseline instead.

    python bench/vs_evaluate.py [--n 1000000]
"""

import argparse
import os
import random
import time

os.environ["HF_HUB_OFFLINE"] = "1"  # never reach the network, whatever the environment says

import evaluate
import numpy as np
from sklearn.metrics import accuracy_score

import tcmqa_metric


def stock_exact_match():
    """evaluate's exact_match from the local cache, or the reason it is not available."""
    try:
        return evaluate.load("exact_match"), None
    except Exception as error:  # offline, evaluate raises several kinds of error for a missing module
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:70]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    n = parser.parse_args().n
    rng = random.Random(0)
    refs = [rng.choice(tcmqa_metric.LETTERS) for _ in range(n)]
    preds = [r if rng.random() < 0.6 else rng.choice(tcmqa_metric.LETTERS) for r in refs]

    exact_match, unavailable = stock_exact_match()
    tcmqa = tcmqa_metric.TcmqaMetric()
    scorers = {
        "tcmqa_metric.score()": lambda: tcmqa_metric.score(preds, refs)["exact_match"],
        "TcmqaMetric.compute()": lambda: tcmqa.compute(predictions=preds, references=refs)["exact_match"],
        "sklearn accuracy_score": lambda: float(accuracy_score(refs, preds)),
        "numpy ==, mean": lambda: float((np.asarray(preds) == np.asarray(refs)).mean()),
    }
    if exact_match is not None:
        scorers["evaluate exact_match"] = lambda: exact_match.compute(predictions=preds, references=refs)["exact_match"]

    print(f"{n:,} single-answer items")
    print(f"{'scorer':<24} {'value':>10} {'wall s':>7} {'cpu s':>7} {'items/s':>12}")
    values = []
    for name, fn in scorers.items():
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        values.append(value)
        print(f"{name:<24} {value:>10.6f} {wall:>7.2f} {cpu:>7.2f} {n / wall:>12,.0f}")
    if unavailable:
        print(f"{'evaluate exact_match':<24} not run: not shipped with evaluate, and offline ({unavailable})")
    assert max(values) - min(values) < 1e-12, values
    print("all values equal")


if __name__ == "__main__":
    main()
