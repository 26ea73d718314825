"""Reproducible rows: how many items change their output when only the chunk size or the sharding changes.

    .venv/bin/python bench/row_stability.py [--items 300] [--dtype float32] [--chunks all,256,32] [--shards 3]
    .venv/bin/python bench/row_stability.py --items 16 --dtype bfloat16 --chunks all,4
    .venv/bin/python bench/row_stability.py --chunks 256 --baseline OLD_vllm.py   # before/after an engine change

One engine (vLLM, eager, by default; ``--engine transformers`` also works) is loaded once on Gemma 3
270M and the first ``--items`` items of the real platform sample; the same rendered prompts are then
generated as the harness generates them (``Engine.generate_chunks``) at each ``--chunks`` size (``all``:
one chunk). vLLM streams chunks into its scheduler, so the chunk size no longer sets the batch it
computes, but which requests share a step still varies with timing. ``--shards N`` adds a run of the
N shards one after the other, each alone in the engine (what ``--shard I/N`` runs do), merged back in
corpus order. Each run is compared with the first, item by item: the share of items whose generated
text, text prediction or log-prob prediction changed, and the largest letter log-prob difference.

``--baseline FILE`` is the check that an engine change changed no output row: FILE is another version
of the engine module (e.g. ``git show HEAD:eval/tcmqa/engines/vllm.py > /tmp/vllm_before.py``); the
same items are run through both at ``--baseline-chunk`` (default 256, the harness's CPU chunk) and every
``OUTPUTS`` column of every row is compared (float columns exactly, no tolerance). It can share one run
with ``--chunks`` (the current engine loads once); ``--chunks ''`` runs the comparison alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from common import sample_items, set_env


def load(engine: str, model: Path, dtype: str, module_file: Path | None = None, batch_invariant: bool = False):
    """The engine, from the installed package or (``module_file``) from another version of its module."""
    from tcmqa.engines import ENGINES, load_engine

    options: dict[str, Any] = {"enforce_eager": True} if engine == "vllm" else {"batch_size": 32}
    if batch_invariant:
        options["batch_invariant"] = True
    if module_file is None:
        return load_engine(engine, str(model), dtype=dtype, **options)
    spec = importlib.util.spec_from_file_location("baseline_engine", module_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, ENGINES[engine][1])(str(model), dtype=dtype, **options)


def run_rows(
    engine: Any, items: list[dict[str, Any]], rendered: list, chunk: int, fresh: bool = True
) -> tuple[list[dict], float]:
    """Output rows generated as the harness generates them (``Engine.generate_chunks`` over chunks of
    ``chunk`` items); and seconds."""
    from tcmqa.outputs import build_rows

    if fresh:
        forget_prompts(engine)
    rows: list[dict] = []
    starts = range(0, len(items), chunk)
    start = time.perf_counter()
    stream = engine.generate_chunks(rendered[k : k + chunk] for k in starts)
    for k, completions in zip(starts, stream, strict=True):
        rows += build_rows(items[k : k + chunk], rendered[k : k + chunk], completions, model="m", revision="r")
    return rows, time.perf_counter() - start


def forget_prompts(engine: Any) -> None:
    """Empty vLLM's prefix cache, so that each run computes its prompts afresh, as a new run would
    (a rerun of the same prompts would otherwise reuse their cached KV blocks: faster, other numerics)."""
    llm = getattr(engine, "llm", None)
    if llm is not None:
        llm.reset_prefix_cache()


def run_sharded(engine: Any, items: list[dict[str, Any]], rendered: list, chunk: int, n_shards: int) -> list[dict]:
    """The rows of ``n_shards`` shard runs (``--shard I/N``: each shard's items alone through the engine),
    put back in corpus order as ``tcmqa merge`` does."""
    from tcmqa.harness import shard_of

    by_id: dict[str, dict] = {}
    forget_prompts(engine)
    for index in range(n_shards):
        mine = [k for k, item in enumerate(items) if shard_of(item["id"], n_shards) == index]
        rows, _ = run_rows(engine, [items[k] for k in mine], [rendered[k] for k in mine], chunk, fresh=False)
        by_id.update((row["item_id"], row) for row in rows)
    return [by_id[item["id"]] for item in items]


def diff(reference: list[dict], other: list[dict]) -> dict[str, Any]:
    """Share of items whose text / prediction / log-prob prediction changed; max |Δ letter log-prob|."""
    n = len(reference)
    text = sum(a["generated_text"] != b["generated_text"] for a, b in zip(reference, other, strict=True))
    first = sum(
        a["generated_text"][:1] != b["generated_text"][:1] for a, b in zip(reference, other, strict=True)
    )  # diverge at the very first character
    pred = sum(a["prediction"] != b["prediction"] for a, b in zip(reference, other, strict=True))
    lp = sum(a["lp_prediction"] != b["lp_prediction"] for a, b in zip(reference, other, strict=True))
    delta = max(
        abs(a["letter_logprobs"][letter] - b["letter_logprobs"][letter])
        for a, b in zip(reference, other, strict=True)
        for letter in a["letter_logprobs"]
    )
    exact = sum(a == b for a, b in zip(reference, other, strict=True))
    return {
        "n": n,
        "text_changed": text / n,
        "text_changed_first_char": first / n,
        "prediction_changed": pred / n,
        "lp_prediction_changed": lp / n,
        "max_abs_delta_logprob": delta,
        "rows_identical": exact / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--engine", default="vllm", choices=("vllm", "transformers"))
    parser.add_argument("--chunks", default="all,256,32", help="chunk sizes; the first is the reference")
    parser.add_argument(
        "--shards", type=int, default=0, help="also compare a run in N shards (--shard I/N) with the first"
    )
    parser.add_argument("--baseline", type=Path, help="another version of the engine module to compare with")
    parser.add_argument("--baseline-chunk", type=int, default=256)
    parser.add_argument("--model", type=Path, help="model folder (default: the local Gemma 3 270M)")
    parser.add_argument("--batch-invariant", action="store_true", help="vLLM's batch-invariant kernels (GPU only)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    set_env()

    from tcmqa import prompts
    from tcmqa.local_models import gemma_270m

    model = (args.model or gemma_270m()).resolve()
    items = sample_items(args.items)
    load_avg = [os.getloadavg()[0]]
    summary: dict[str, Any] = {"items": len(items), "dtype": args.dtype, "engine": args.engine, "cpus": os.cpu_count()}

    engine = load(args.engine, model, args.dtype, batch_invariant=args.batch_invariant)
    summary["engine_version"] = engine.version
    rendered = engine.render([prompts.render_messages(item) for item in items])
    sizes = [len(items) if c == "all" else int(c) for c in args.chunks.split(",")] if args.chunks else []
    runs: dict[Any, list[dict]] = {}
    seconds: dict[Any, float] = {}
    for size in sizes:
        runs[size], seconds[size] = run_rows(engine, items, rendered, size)
        load_avg.append(os.getloadavg()[0])
        print(f"chunk {size}: {len(items) / seconds[size]:.2f} items/s", file=sys.stderr, flush=True)
    if args.baseline and args.baseline_chunk not in runs:
        runs[args.baseline_chunk], seconds[args.baseline_chunk] = run_rows(engine, items, rendered, args.baseline_chunk)
    labels = [f"chunk {size}" for size in sizes]
    if args.shards and sizes:
        start = time.perf_counter()
        sharded = run_sharded(engine, items, rendered, sizes[0], args.shards)
        labels.append(f"{args.shards} shards")
        runs[labels[-1]], seconds[labels[-1]] = sharded, time.perf_counter() - start  # type: ignore[index]
        load_avg.append(os.getloadavg()[0])
    engine.close()
    del engine
    if sizes:
        reference = sizes[0]
        table = []
        for label, key in zip(labels, [*sizes, *labels[len(sizes) :]], strict=True):
            table.append({"run": label, "items_per_s": len(items) / seconds[key], **diff(runs[reference], runs[key])})
        summary["chunkings"] = table
        print(
            f"{len(items)} sample items, Gemma 3 270M, {args.engine} {summary['engine_version']} {args.dtype}, "
            f"{os.cpu_count()} CPUs; each run against chunk {reference} (the harness streams chunks into the engine)"
        )
        header = ["run", "items/s", "text changed", "1st char changed", "prediction changed", "LP prediction changed"]
        print("| " + " | ".join(header) + " | max abs Δ letter log-prob |")
        print("|" + "---|" * (len(header) + 1))
        for row in table:
            print(
                f"| {row['run']} | {row['items_per_s']:.2f} | {row['text_changed']:.1%} | "
                f"{row['text_changed_first_char']:.1%} | {row['prediction_changed']:.1%} | "
                f"{row['lp_prediction_changed']:.1%} | {row['max_abs_delta_logprob']:.2g} |"
            )
    if args.baseline:
        current = runs[args.baseline_chunk]
        old = load(args.engine, model, args.dtype, args.baseline)
        before, seconds["baseline"] = run_rows(old, items, rendered, args.baseline_chunk)
        old.close()
        load_avg.append(os.getloadavg()[0])
        result = diff(before, current)
        differing = [a["item_id"] for a, b in zip(before, current, strict=True) if a != b]
        summary["baseline"] = {
            "module": str(args.baseline),
            "chunk": args.baseline_chunk,
            **result,
            "differing": differing,
        }
        print(
            f"against {args.baseline} ({len(items)} items, {args.engine} {args.dtype}, chunk {args.baseline_chunk}): "
            f"rows identical {result['rows_identical']:.1%} (every OUTPUTS column, floats exact); "
            f"{len(items) / seconds['baseline']:.2f} items/s before, "
            f"{len(items) / seconds[args.baseline_chunk]:.2f} after (one run each, shared CPU)"
        )
        if differing:
            print(f"differing item ids: {differing[:20]}")
    summary["load_average_1min"] = load_avg
    print(f"load average (1 min) during the run: {', '.join(f'{x:.1f}' for x in load_avg)}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
