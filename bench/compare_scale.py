"""Bench: a two-model comparison and one model's page at 38,279 items with M published models (default 1,000).

    .venv/bin/python bench/compare_scale.py [--models 1000] [--root DIR]

Writes (once, cached under ``--root``) a published ``outputs`` config of M SIMULATED models x 38,279
items (each model one row group, as the Hub's Parquet conversion groups rows), then times, in this
process: choosing each model's run (``ModelOutputs.runs``, once per process and store version), three
comparisons (:func:`tcmqa.leaderboard.compare.compare` on both runs read where they lie, the open blocks
read from the store, the tables and a page of differing items) and two model pages
(:func:`tcmqa.leaderboard.model_page.model_page` against a simulated 4,801-item subset, with its three
figures drawn to PNG). Prints each time, the peak RSS and the CPU. Target: a comparison under 2 s.
"""

from __future__ import annotations

import argparse
import io
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from common import REPO, cpu_name, set_env

N_ITEMS, N_SUBSET, PER_FILE = 38_279, 4_801, 100


def write_outputs(root: Path, m: int) -> Path:
    """The data tree with a published outputs config of ``m`` models (right on a per-model share of items)."""
    folder = root / f"outputs-{m}" / "outputs"
    if folder.is_dir():
        return folder.parent
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    ids = pa.array([f"{i:06d}" for i in range(N_ITEMS)])
    offsets = pa.array(np.arange(N_ITEMS + 1, dtype=np.int32))
    for start in range(0, m, PER_FILE):
        with pq.ParquetWriter(folder / f"part-{start // PER_FILE:05d}.parquet", _schema()) as writer:
            for k in range(start, min(m, start + PER_FILE)):
                letters = pa.array(np.array(list("ABCDE"))[rng.integers(0, 5, N_ITEMS)])
                table = pa.table(
                    {
                        "model": pa.array([f"org/model-{k:04d}"] * N_ITEMS),
                        "revision": pa.array(["r"] * N_ITEMS),
                        "item_id": ids,
                        "correct": pa.array(rng.random(N_ITEMS) < rng.uniform(0.2, 0.8)),
                        "prediction": pa.ListArray.from_arrays(offsets, letters),
                    },
                    schema=_schema(),
                )
                writer.write_table(table, row_group_size=N_ITEMS)
    return folder.parent


def _schema() -> pa.Schema:
    fields = [("model", pa.string()), ("revision", pa.string()), ("item_id", pa.string()), ("correct", pa.bool_())]
    return pa.schema([*fields, ("prediction", pa.list_(pa.string()))])


def corpus_and_subset(seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A simulated corpus (the columns a comparison reads) and subset (the columns a model page reads)."""
    from tcmqa.schema import DOMAINS

    rng, keys = np.random.default_rng(seed), list(DOMAINS)
    corpus = pd.DataFrame(
        {
            "id": [f"{i:06d}" for i in range(N_ITEMS)],
            "question": ["以下哪项是五行中木的特性" * 3] * N_ITEMS,
            "answer": [["A"]] * N_ITEMS,
            "answer_type": np.where(rng.random(N_ITEMS) < 0.06, "multi", "single"),
            "domains": [[keys[k]] for k in rng.integers(0, len(keys), N_ITEMS)],
            "flagged": False,
        }
    )
    n_correct = rng.integers(0, 4, N_SUBSET)
    subset = pd.DataFrame(
        {
            "item_id": corpus["id"].sample(N_SUBSET, random_state=seed).to_numpy(),
            "n_raters": 3,
            "n_correct": n_correct,
            "majority_correct": n_correct >= 2,
            "rater_domains": [[[keys[k]] for k in rng.integers(0, len(keys), 3)] for _ in range(N_SUBSET)],
            "rater_difficulty": [list(rng.integers(1, 6, 3)) for _ in range(N_SUBSET)],
        }
    )
    return corpus, subset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--root", type=Path, default=REPO / ".cache" / "bench" / "compare-scale")
    args = parser.parse_args()
    set_env()
    from tcmqa.leaderboard import compare, model_outputs
    from tcmqa.leaderboard.model_page import model_page
    from tcmqa.leaderboard.practice.core import open_block_items
    from tcmqa.store import SQLiteStore

    start = time.perf_counter()
    tree = write_outputs(args.root, args.models)
    print(f"outputs config of {args.models} models x {N_ITEMS:,} items ready in {time.perf_counter() - start:.0f} s")
    store = SQLiteStore(Path(tempfile.mkdtemp(prefix="compare-scale-")))
    corpus, subset = corpus_and_subset()
    outputs = model_outputs.ModelOutputs(str(tree), store, N_ITEMS)
    start = time.perf_counter()
    runs = outputs.runs()
    seconds, peak = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(
        f"runs() of {len(runs)} models, cold (once per process and store version): {seconds:.1f} s, peak {peak:.2f} GB"
    )
    last = args.models - 1
    for a, b in [(1, args.models // 2), (last, 7), (args.models // 3, args.models // 3 + 1)]:
        model_a, model_b = f"org/model-{a:04d}", f"org/model-{b:04d}"
        start = time.perf_counter()
        c = compare.compare(
            corpus,
            outputs.of(model_a, compare.RUN_COLUMNS),
            outputs.of(model_b, compare.RUN_COLUMNS),
            model_a,
            model_b,
            open_block_items(store),
        )
        c.page(3)
        print(f"compare {model_a} with {model_b}: {time.perf_counter() - start:.2f} s ({c.n:,} common items)")
    for k in (2, last):
        model = f"org/model-{k:04d}"
        start = time.perf_counter()
        page = model_page(model, outputs.of(model, ["item_id", "correct"]), subset, {"ece": 3.0})
        tables = time.perf_counter() - start
        for figure in (page.domain_figure(), page.difficulty_figure(), page.consensus_figure()):
            figure.savefig(io.BytesIO(), format="png")
        print(f"model page {model}: tables {tables:.2f} s, with its three figures {time.perf_counter() - start:.2f} s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB; CPU {cpu_name()}")


if __name__ == "__main__":
    main()
