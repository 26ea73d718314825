"""The hidden pool's cost: per job (the pool after the public items, one engine load) and per back-fill.

    python bench/fresh_pool.py [--model .cache/models/gemma-3-270m-bf16] [--limit 200] [--pool 100]
                               [--engine transformers] [--dtype float32] [--models 1000]

Runs ``tcmqa eval`` (the library: ``tcmqa.harness.run``) on the real sample with ``--limit`` public items and a
pool of ``--pool`` items (the sample's last scorable items under new ids: as long as written items), then a
back-fill of the same model (``--pool-only``: the pool alone, the engine loaded again, as a back-fill job does).
Prints seconds and items/s of the public pass and of the pool pass, the back-fill's seconds, and what a
back-fill of every model on a board of ``--models`` costs at that rate (one worker). The CPU's name is printed.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from common import REPO, cpu_name, sample_tree, set_env

set_env()

from tcmqa import harness  # noqa: E402  (after the environment is set)
from tcmqa.fresh.hidden import write_pool  # noqa: E402
from tcmqa.harness import EvalConfig, select_items  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO / ".cache" / "models" / "gemma-3-270m-bf16"), help="or 'tiny'")
    parser.add_argument("--limit", type=int, default=200, help="public items")
    parser.add_argument("--pool", type=int, default=100, help="pool items")
    parser.add_argument("--engine", default="transformers")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--models", type=int, default=1000, help="models on the board a back-fill of all covers")
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "bench" / "fresh-pool")
    args = parser.parse_args()
    data = str(sample_tree())
    scorable = select_items(EvalConfig(model="-", data=data))[2]
    if args.model == "tiny":  # the tests' 2-layer random model, its tokenizer trained on the items
        from tcmqa.local_models import tiny_random

        texts = [item["question"] + "".join(item["options"].values()) for item in scorable]
        args.model = str(tiny_random(REPO / ".cache" / "bench" / "tiny", texts))
    last = scorable[-args.pool :]
    pool = [{**item, "id": f"bench-fresh-{k:04d}", "release_date": "2026-12-01"} for k, item in enumerate(last)]
    shutil.rmtree(args.out, ignore_errors=True)
    path = write_pool(args.out, "bench-v1", pool, {item["id"]: k % 2 == 0 for k, item in enumerate(pool)})
    config = EvalConfig(model=args.model, data=data, engine=args.engine, dtype=args.dtype, limit=args.limit,
                        out=args.out, pool=path)  # fmt: skip
    print(f"{cpu_name()}; {args.engine} {args.dtype}; {args.limit} public items, {len(pool)} pool items")
    seconds: dict[str, float] = {}
    generate = harness.generate_parts

    def timed(engine, chunks, out, name, watch):  # the public pass, then the pool's (its outputs in hidden/)
        start = time.perf_counter()
        done = generate(engine, chunks, out, name, watch)
        seconds["pool" if "hidden" in str(out) else "public"] = time.perf_counter() - start
        return done

    harness.generate_parts = timed
    start = time.perf_counter()
    report = harness.run(config)
    job = time.perf_counter() - start
    public, fresh = seconds["public"], seconds["pool"]
    print(f"job: {job:.1f} s (load {report.timings.get('load', 0):.1f} s); public pass {public:.1f} s "
          f"({args.limit / public:.2f} items/s); pool pass {fresh:.1f} s ({len(pool) / fresh:.2f} items/s), "
          f"+{100 * fresh / job:.0f}% of the job; n_fresh {report.results['n_fresh']}")  # fmt: skip
    path = write_pool(args.out, "bench-v2", pool, {})  # a new version: its pool runs afresh
    start = time.perf_counter()
    harness.run(EvalConfig(**{**config.__dict__, "pool": path, "pool_only": True, "resume": True}))
    backfill = time.perf_counter() - start
    print(f"back-fill (engine load + pool): {backfill:.1f} s; of {args.models} models on one worker: "
          f"{args.models * backfill / 3600:.1f} h")  # fmt: skip


if __name__ == "__main__":
    main()
