"""Where vLLM's time goes in ``tcmqa eval``: one engine, the same rendered prompts, one change at a time.

    .venv/bin/python bench/where_time_goes.py [--items 192] [--chunk 64] [--block-sizes 32,128] [--repeats 2]

For each KV block size (32 is what the engine sets on a CPU, so that prefix caching holds the shared
instruction; 128 is vLLM's CPU default, what lm-eval runs with), one vLLM engine (eager) is loaded on
Gemma 3 270M and the first ``--items`` items of the real platform sample are rendered once. Then,
each ``--repeats`` times, in turn, each after emptying the prefix cache (otherwise a second pass over
the same prompts finds them all cached and measures decoding alone), items/s over generation only, the
best repeat shown:

* ``first pass``: the first generation after start-up (kernels created for new batch shapes, the
  sampler's compiled log-prob kernel: paid once per engine);
* ``LLM.generate per chunk``: what the harness did before it streamed (one call per ``--chunk``);
* ``streamed chunks``: what it does now (``Engine.generate_chunks``, ``--chunk`` items per part);
* ``one call``: all items in one ``LLM.generate`` (what lm-eval does);
* ``one call, no letter ids``: the same without ``logprob_token_ids`` (the cost of scoring the five
  letters, which vLLM computes at every step, not only the first);
* ``prefill only``: ``max_tokens=1`` (what the prompts alone cost; the rest is decoding).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from common import cpu_name, sample_items, set_env


def measure(engine: Any, rendered: list, chunk: int, repeats: int) -> dict[str, float]:
    """Best items/s of each way of generating the same prompts on one loaded engine."""
    from vllm.inputs import TokensPrompt

    def direct(sampling: Any) -> Callable[[list], Any]:
        return lambda batch: engine.llm.generate(
            [TokensPrompt(prompt_token_ids=p.token_ids) for p in batch], sampling, use_tqdm=False
        )

    plain = copy.copy(engine.sampling)
    plain.logprob_token_ids = None
    prefill = copy.copy(engine.sampling)
    prefill.max_tokens = 1
    chunks = [rendered[k : k + chunk] for k in range(0, len(rendered), chunk)]
    ways: dict[str, Callable[[], Any]] = {
        f"LLM.generate per chunk of {chunk}": lambda: [direct(engine.sampling)(c) for c in chunks],
        f"streamed chunks of {chunk}": lambda: list(engine.generate_chunks(chunks)),
        "one call": lambda: direct(engine.sampling)(rendered),
        "one call, no letter ids": lambda: direct(plain)(rendered),
        "prefill only (max_tokens=1)": lambda: direct(prefill)(rendered),
    }
    best: dict[str, float] = {}
    start = time.perf_counter()
    list(engine.generate_chunks(chunks))
    best["first pass (streamed)"] = len(rendered) / (time.perf_counter() - start)
    for _ in range(repeats):
        for name, way in ways.items():
            engine.llm.reset_prefix_cache()  # every way computes the prompts afresh, as a new run does
            start = time.perf_counter()
            way()
            best[name] = max(best.get(name, 0.0), len(rendered) / (time.perf_counter() - start))
            print(f"  {name}: {best[name]:.2f} items/s (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=192)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--block-sizes", default="32,128")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    args = parser.parse_args()
    set_env()

    from tcmqa import prompts
    from tcmqa.engines import load_engine
    from tcmqa.local_models import gemma_270m

    items = sample_items(args.items)
    table: dict[int, dict[str, float]] = {}
    for block in (int(b) for b in args.block_sizes.split(",")):
        engine = load_engine("vllm", str(gemma_270m()), dtype=args.dtype, enforce_eager=True, block_size=block)
        try:
            rendered = engine.render([prompts.render_messages(item) for item in items])
            print(f"block size {block}:", file=sys.stderr)
            table[block] = measure(engine, rendered, args.chunk, args.repeats)
        finally:
            engine.close()
    blocks = list(table)
    print(
        f"{len(items)} sample items, Gemma 3 270M {args.dtype}, vLLM eager, {os.cpu_count()} CPUs, {cpu_name()}; "
        f"items/s, best of {args.repeats} (first pass: once)"
    )
    print("| way | " + " | ".join(f"block {b}" for b in blocks) + " |")
    print("|---|" + "---:|" * len(blocks))
    for name in table[blocks[0]]:
        print(f"| {name} | " + " | ".join(f"{table[b][name]:.2f}" for b in blocks) + " |")


if __name__ == "__main__":
    main()
