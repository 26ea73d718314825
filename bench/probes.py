"""The probes on a real model and real items: Gemma 3 270M on the platform sample, every probe column
and the cost of each probe against the v1 pass, in one engine load.

    python bench/probes.py                       # vLLM, the CPU's dtype, 200 items, 24 orders
    python bench/probes.py --engine transformers --items 100 --orders 119

It runs ``tcmqa eval`` (the harness's ``run``) on the first ``--items`` scorable sample items, then
``tcmqa probe`` (``run_probes``) on that run with every item rotated and order-tested, and prints:
the items/s of the v1 pass, of the rotation probe (four generations per item) and of the order test
(prefill of ``--orders`` + 1 texts per item), each probe's cost in v1 passes, and the probe columns.
Gemma 270M is a base model at chance on these items: the columns show what the probes print, not a
finding about it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import REPO, cpu_name, sample_tree, set_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="vllm", choices=["vllm", "transformers"])
    parser.add_argument("--dtype", help="default: bfloat16 where the CPU computes it natively, else float32")
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--orders", type=int, default=23, help="other option orders per item (119: all)")
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "bench" / "probes")
    args = parser.parse_args()
    set_env()

    import shutil

    from tcmqa.engines.base import native_bf16
    from tcmqa.harness import EvalConfig, open_engine, run
    from tcmqa.local_models import gemma_270m
    from tcmqa.probes.run import ProbeConfig, format_probes, run_probes

    dtype = args.dtype or ("bfloat16" if native_bf16() else "float32")
    shutil.rmtree(args.out, ignore_errors=True)
    config = EvalConfig(
        model=str(gemma_270m()),
        data=str(sample_tree()),
        engine=args.engine,
        dtype=dtype,
        limit=args.items,
        enforce_eager=True,
        batch_size=25,
        out=args.out,
        engine_args={"max_model_len": 1024} if args.engine == "vllm" else {},
    )
    start = time.perf_counter()
    engine = open_engine(config)
    load_s = time.perf_counter() - start
    try:
        start = time.perf_counter()
        report = run(config, engine)
        v1_s = time.perf_counter() - start
        probe = ProbeConfig(args.out, rotations="all", order_items="all", orders=args.orders)
        results = run_probes(probe, engine)
    finally:
        engine.close()
    seconds = json.loads((args.out / "probes.json").read_text())["seconds"]
    n = report.results["n"]
    print(f"\n{cpu_name()}; Gemma 3 270M, {args.engine} {dtype}, {n} sample items, load {load_s:.0f} s")
    print("| pass | work per item | items/s | seconds | cost in v1 passes |")
    print("|---|---|---:|---:|---:|")
    print(f"| v1 (protocol) | 1 generation | {n / v1_s:.2f} | {v1_s:.1f} | 1.00 |")
    print(f"| rotations | 4 generations | {n / seconds['rotation']:.2f} | {seconds['rotation']:.1f} | "
          f"{seconds['rotation'] / v1_s:.2f} |")  # fmt: skip
    print(f"| order test | prefill of {args.orders + 1} texts | {n / seconds['order']:.2f} | {seconds['order']:.1f} | "
          f"{seconds['order'] / v1_s:.2f} |")  # fmt: skip
    print("| calibration | none (stored log-probs) | — | 0 | 0 |")
    print()
    print(format_probes(results))


if __name__ == "__main__":
    main()
