"""Time the TCMQA metric on 1,000,000 items: the module-level `score` and `TcmqaMetric.compute` (which
round-trips the inputs through Arrow), for predictions given as letter strings (what the harness stores),
as lists of letters, and as raw model text that is all distinct (the worst case for the parse cache).
items/s is per wall-clock second.

    python bench/metric.py [--n 1000000]
"""

import argparse
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import tcmqa_metric

TEMPLATES = ["{}", "答案：{}", "The answer is {}.", "正确答案是{}，因为", "{}. 黄芪"]


def make_inputs(n: int, seed: int = 0) -> dict:
    """References with the corpus's mix (6.2% multi-answer) and noisy predictions in three forms."""
    rng = random.Random(seed)
    letters = tcmqa_metric.LETTERS
    refs, preds = [], []
    for _ in range(n):
        size = rng.choice((2, 3, 4, 5)) if rng.random() < 0.062 else 1
        refs.append("".join(sorted(rng.sample(letters, size))))
        preds.append("".join(sorted(rng.sample(letters, rng.choice((1, 1, 1, 2, 3))))))
    return {
        "references": refs,
        "letter strings": preds,
        "lists of letters": [list(p) for p in preds],
        "distinct raw text": [rng.choice(TEMPLATES).format(p) + f" #{i}" for i, p in enumerate(preds)],
    }


def timed(fn) -> tuple[float, float, dict]:
    """Wall and CPU seconds: on a shared machine the CPU time is the steadier of the two."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    n = parser.parse_args().n
    inputs = make_inputs(n)
    refs = inputs.pop("references")
    metric = tcmqa_metric.TcmqaMetric()
    print(f"{'predictions':<20} {'path':<16} {'wall s':>7} {'cpu s':>7} {'items/s':>11}")
    for form, preds in inputs.items():
        for path, fn in (
            ("score()", lambda preds=preds: tcmqa_metric.score(preds, refs)),
            ("metric.compute()", lambda preds=preds: metric.compute(predictions=preds, references=refs)),
        ):
            wall, cpu, result = timed(fn)
            print(f"{form:<20} {path:<16} {wall:>7.2f} {cpu:>7.2f} {n / wall:>11,.0f}")
        assert result["n"] == n


if __name__ == "__main__":
    main()
