"""GPU check, ready to run on a machine with no network: a 7B-shaped model through tcmqa's engines.

    python bench/gpu.py                 # on a CUDA machine: ~5-8 minutes, nothing downloaded
    python bench/gpu.py --dry-run       # anywhere (CPU): a tiny model, the same table, < 1 minute

What it does, in this order:

1. Measures the dense bf16 matmul throughput of the device on the spot (``torch.matmul`` of two
   8192x8192 bf16 matrices, best of several timed runs; the dry run: fp32 1024x1024 on the CPU).
2. Builds prompts under protocol v1 (``tcmqa.prompts.render_messages``) from the real sample items
   (``../shared/data/tcmqa-platform-sample/items.jsonl`` or ``--items-file``), or, where those are
   absent, from synthetic items with the sample's length distribution (question and option lengths
   log-normal with the sample's parameters, 6% multi-answer), rendered under a real chat template.
3. Builds a model with random weights from a config and saves it to ``--work`` (git-ignored; reused
   when the config matches): Qwen2-7B's shapes (28 layers, hidden 3584, MLP 18944, 28 query / 4 KV
   heads of 128, untied embeddings) in bf16 on the GPU; the dry run: 2 layers, hidden 128, fp32.
   The tokenizer is a byte-level BPE trained on the prompts on the spot (32,768 tokens; dry run
   8,192) with Qwen's ChatML chat template (``tcmqa.local_models.CHATML_TEMPLATE``), or ``--tokenizer
   DIR``, any local tokenizer folder with a chat template (e.g. the local Gemma 3 270M folder); the
   model's vocabulary is that tokenizer's.
4. Runs each engine (``transformers``, and ``vllm`` where it is installed and a GPU is there) through
   tcmqa's ``Engine`` interface (``load_engine``, ``render``, ``generate_chunks``) in chunks until
   ``--items`` are done or ``--seconds-per-engine`` has passed after the first chunk.
5. Prints one table: engine, dtype, items, items/s (generation only; load excluded), load seconds,
   the matmul TFLOP/s measured in step 1, the TFLOP/s the engine reached (FLOPs per item estimated as
   2 x matmul parameters x tokens, tokens = prompt + generated; attention scores are left out, small
   at these lengths), the fraction of the measured matmul peak, and the projected generation time for
   the full corpus (38,279 items) at that rate.

6. In the same engine load, times the probes (``tcmqa.probes``): the rotation probe (each item's four
   other cyclic rotations, generated as in step 4) and the option-order test (prefill only: the item's
   text under 120 option orders, the most an item is compared under, ``Engine.loglikelihood``; the dry
   run: 6 orders), and prints a second table: items/s of each probe and its projected time for the
   full corpus and for the defaults (rotations on the 4,801-item comparison subset, the order test on
   1,000 items; an upper bound, since most items share their features with fewer orders).

Random weights rarely emit EOS, so nearly every generation runs to the protocol's 16 new tokens: the
worst case for generation time, which is what a projection should use.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE_ITEMS = REPO.parent / "shared" / "data" / "tcmqa-platform-sample" / "items.jsonl"
CORPUS_ITEMS = 38_279
COLUMNS = (
    "engine",
    "dtype",
    "items",
    "items/s",
    "load s",
    "matmul TFLOP/s",
    "reached TFLOP/s",
    "fraction",
    "38,279 items",
)
PROBE_COLUMNS = ("engine", "probe", "items", "items/s", "38,279 items", "default")
PROBE_DEFAULT_ITEMS = {"rotation": 4_801, "order": 1_000}  # the comparison subset; tcmqa.probes.order.ITEMS
# Qwen2-7B's shapes (its config.json), vocabulary aside (the tokenizer's).
SHAPES_7B = {
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}
SHAPES_TINY = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,  # vLLM's CPU attention rejects smaller heads
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}
# The platform sample's lengths (4,100 items): log of characters, mean and standard deviation.
SYNTHETIC = {"question": (3.17, 0.72), "options": (3.20, 0.75), "multi_share": 0.06}


def set_env(work: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(work / "vllm-cache"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(work / "inductor"))


# ---------------------------------------------------------------------------------------------
# 1. The device's matmul throughput
# ---------------------------------------------------------------------------------------------


def matmul_tflops(device: str, dtype: Any, n: int, repeats: int) -> float:
    """Best-of-``repeats`` TFLOP/s of an ``n``x``n`` by ``n``x``n`` matmul (2 n^3 FLOPs)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):  # warm-up: kernel selection, clocks
        torch.matmul(a, b)
    sync()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(10):
            torch.matmul(a, b)
        sync()
        best = min(best, (time.perf_counter() - start) / 10)
    return 2 * n**3 / best / 1e12


# ---------------------------------------------------------------------------------------------
# 2. Items with the sample's lengths
# ---------------------------------------------------------------------------------------------


def load_items(path: Path | None, n: int, seed: int) -> tuple[list[dict[str, Any]], str]:
    """``n`` items as corpus rows (id, question, options, answer, answer_type): the real sample's, else
    synthetic (answer A, or A and C)."""
    from tcmqa_metric import LETTERS

    if path is not None and path.is_file():
        items = []
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                raw = json.loads(line)
                options = raw.get("options") or raw.get("choices") or {}
                if not raw.get("question") or any(not options.get(letter) for letter in LETTERS):
                    continue
                answer = sorted(raw.get("answer") or "A")
                answer_type = raw.get("answer_type") or ("multi" if len(answer) > 1 else "single")
                items.append(
                    {"id": str(raw.get("question_id", raw.get("id", len(items)))), "question": raw["question"],
                     "options": options, "answer": answer, "answer_type": answer_type}
                )  # fmt: skip
        if items:
            return (items * math.ceil(n / len(items)))[:n], f"real sample items ({path})"
    rng = random.Random(seed)
    common = "气血阴阳脏腑经络寒热虚实表里辨证论治方剂药性归经功效主治病机症状舌脉治法"

    def text(mu: float, sigma: float) -> str:
        return "".join(rng.choice(common) for _ in range(max(1, round(rng.lognormvariate(mu, sigma)))))

    items = []
    for _ in range(n):
        option_chars = SYNTHETIC["options"]
        options = {letter: text(option_chars[0] - math.log(5), option_chars[1]) for letter in LETTERS}
        answer_type = "multi" if rng.random() < SYNTHETIC["multi_share"] else "single"
        items.append(
            {"id": f"synthetic-{len(items)}", "question": text(*SYNTHETIC["question"]), "options": options,
             "answer": ["A", "C"] if answer_type == "multi" else ["A"], "answer_type": answer_type}
        )  # fmt: skip
    return items, "synthetic items with the sample's length distribution"


# ---------------------------------------------------------------------------------------------
# 3. A random-weight model
# ---------------------------------------------------------------------------------------------


def tokenizer_for(args: argparse.Namespace, texts: list[str]) -> tuple[Any, str]:
    """A tokenizer with a real chat template, needing no download."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from tcmqa.local_models import CHATML_TEMPLATE

    if args.tokenizer is not None:
        return AutoTokenizer.from_pretrained(args.tokenizer), f"{args.tokenizer} (its chat template)"
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8192 if args.dry_run else 32768,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator([*texts, "A B C D E", "答案是A。"], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer, "byte-level BPE trained on the prompts here, ChatML (Qwen) chat template"


def build_model(args: argparse.Namespace, tokenizer: Any, folder: Path) -> tuple[int, int]:
    """Save a random-weight Qwen2 model (and the tokenizer) in ``folder``; return (parameters, matmul parameters)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    shapes = SHAPES_TINY if args.dry_run else SHAPES_7B
    vocab = 128 * math.ceil(len(tokenizer) / 128)
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    config = Qwen2Config(
        vocab_size=vocab,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        dtype=str(dtype).removeprefix("torch."),
        **shapes,
    )
    marker = folder / "bench_config.json"
    wanted = json.dumps(config.to_dict(), sort_keys=True, default=str)
    if not (marker.is_file() and marker.read_text() == wanted and (folder / "config.json").is_file()):
        torch.manual_seed(0)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(args.device):
                model = Qwen2ForCausalLM(config)
        finally:
            torch.set_default_dtype(previous)
        model.generation_config = GenerationConfig(
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
        )
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        marker.write_text(wanted)
        del model
        if args.device == "cuda":
            torch.cuda.empty_cache()
    h, layers, inter = shapes["hidden_size"], shapes["num_hidden_layers"], shapes["intermediate_size"]
    q = shapes["num_attention_heads"] * shapes["head_dim"]
    kv = shapes["num_key_value_heads"] * shapes["head_dim"]
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * inter  # q, k, v, o, gate, up, down
    matmul = layers * per_layer + vocab * h  # + the LM head; the input embedding is a lookup
    total = matmul + (0 if shapes["tie_word_embeddings"] else vocab * h) + layers * 2 * h + h
    return total, matmul


# ---------------------------------------------------------------------------------------------
# 4. The engines
# ---------------------------------------------------------------------------------------------


def run_engine(name: str, folder: Path, args: argparse.Namespace, conversations: list) -> dict[str, Any]:
    """Load ``name`` on ``folder``, generate chunks within the time budget; timings and tokens."""
    from tcmqa.engines import load_engine

    options: dict[str, Any]
    if name == "vllm":
        options = {"enforce_eager": not args.vllm_compiled, "max_model_len": 2048}
        if args.device == "cuda":
            options["gpu_memory_utilization"] = 0.85
    else:
        options = {"batch_size": args.hf_batch_size, "device": args.device}
    start = time.perf_counter()
    engine = load_engine(name, str(folder), dtype=args.dtype, **options)
    load_s = time.perf_counter() - start
    try:
        done = tokens = 0
        start = time.perf_counter()
        chunks = (
            engine.render(conversations[k : k + args.chunk_size]) for k in range(0, len(conversations), args.chunk_size)
        )
        # as the harness does: chunks stream into the engine, so its batch stays full across them
        stream = engine.generate_chunks(chunks)
        for completions in stream:
            done += len(completions)
            for completion in completions:
                generated = len(engine.tokenizer(completion.text, add_special_tokens=False)["input_ids"])
                tokens += completion.n_prompt_tokens + generated + (completion.finish_reason == "stop")
            if time.perf_counter() - start > args.seconds_per_engine:
                break
        stream.close()  # past the budget: cancel what is still in flight
        generate_s = time.perf_counter() - start
        version = engine.version
        probes = time_probes(engine, args, conversations_items(args, conversations))
    finally:
        engine.close()
        del engine
        _free(args.device)
    return {
        "engine": name,
        "version": version,
        "items": done,
        "tokens": tokens,
        "load_s": load_s,
        "gen_s": generate_s,
        "probes": probes,
    }


def conversations_items(args: argparse.Namespace, conversations: list) -> list[dict[str, Any]]:
    """The items behind the prompts (kept on ``args`` by ``main``), for the probes."""
    return args.probe_items[: len(conversations)]


def time_probes(engine: Any, args: argparse.Namespace, items: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seconds per item of the rotation probe and the option-order test, in the loaded engine."""
    from tcmqa import prompts
    from tcmqa.probes import order, rotation

    rotated = [rotation.rotate(item, k) for item in items[: args.probe_items_n] for k in range(1, rotation.ROTATIONS)]
    start = time.perf_counter()
    chunks = (
        engine.render([prompts.render_messages(item) for item in rotated[k : k + 4 * args.chunk_size]])
        for k in range(0, len(rotated), 4 * args.chunk_size)
    )
    for _ in engine.generate_chunks(chunks):
        pass
    rotation_s = time.perf_counter() - start
    tested = items[: args.probe_items_n]
    start = time.perf_counter()
    # one call per item: the published order and the first --orders others, sharing the stem, scored after
    # it; the test itself compares an item with at most this many (those sharing its features)
    every = order.PERMUTATIONS[1 : args.orders + 1]
    for item in tested:
        engine.loglikelihood(*order.tokenize_orders(engine.tokenizer, item, every))
    order_s = time.perf_counter() - start
    n = len(tested)
    return {"rotation": {"items": n, "seconds": rotation_s}, "order": {"items": n, "seconds": order_s}}


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


def available(name: str, args: argparse.Namespace, explicit: bool) -> str | None:
    """None when ``name`` can run here, else why not."""
    import importlib.util

    if name == "transformers":
        return None
    if importlib.util.find_spec("vllm") is None:
        return "vLLM not installed"
    if args.dry_run and not explicit:
        return "dry run (vLLM CPU start-up takes minutes; pass --engines vllm to include it)"
    return None


# ---------------------------------------------------------------------------------------------
# 5. The table
# ---------------------------------------------------------------------------------------------


def hms(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def table_rows(results: list[dict[str, Any]], peak: float, matmul_params: int, dtype: str) -> list[list[str]]:
    rows = []
    for r in results:
        if "skipped" in r:
            rows.append([r["engine"], dtype, "0", "—", "—", f"{peak:.2f}", "—", "—", f"skipped: {r['skipped']}"])
            continue
        rate = r["items"] / r["gen_s"]
        reached = 2 * matmul_params * r["tokens"] / r["gen_s"] / 1e12
        rows.append(
            [
                r["engine"],
                dtype,
                str(r["items"]),
                f"{rate:.2f}",
                f"{r['load_s']:.1f}",
                f"{peak:.2f}",
                f"{reached:.3f}",
                f"{reached / peak:.1%}",
                hms(CORPUS_ITEMS / rate),
            ]
        )
    return rows


def probe_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in results:
        for probe, timing in r.get("probes", {}).items():
            rate = timing["items"] / timing["seconds"]
            full, default = hms(CORPUS_ITEMS / rate), hms(PROBE_DEFAULT_ITEMS[probe] / rate)
            rows.append([r["engine"], probe, str(timing["items"]), f"{rate:.2f}", full, default])
    return rows


def print_table(rows: list[list[str]], columns: tuple[str, ...] = COLUMNS) -> None:
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" if k < 2 else "---:" for k in range(len(columns))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny model, fp32 on the CPU: checks the script")
    parser.add_argument("--engines", help="comma-separated (default: transformers,vllm; dry run: transformers)")
    parser.add_argument("--items", type=int, help="items per engine at most (default 1024; dry run 16)")
    parser.add_argument(
        "--chunk-size", type=int, help="items per chunk streamed into the engine (default 512; dry run 8)"
    )
    parser.add_argument(
        "--seconds-per-engine", type=float, default=90.0, help="stop an engine after this much generation"
    )
    parser.add_argument("--hf-batch-size", type=int, default=64, help="transformers engine: sequences per forward pass")
    parser.add_argument("--vllm-compiled", action="store_true", help="vLLM with graph capture (slower start-up)")
    parser.add_argument("--items-file", type=Path, default=SAMPLE_ITEMS, help="JSON lines of items (the sample's)")
    parser.add_argument("--tokenizer", type=Path, help="a local tokenizer folder with a chat template")
    parser.add_argument("--work", type=Path, default=REPO / ".cache" / "bench" / "gpu", help="model folder goes here")
    parser.add_argument("--probe-items", type=int, help="items per probe (default 64; dry run 4)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    wall = time.perf_counter()
    set_env(args.work)

    import torch

    from tcmqa import prompts

    if args.dry_run:
        # One thread: a tiny model gains nothing from more, and on a shared CPU (other jobs' threads
        # spinning) two OpenMP threads ran this ~15x slower than one.
        torch.set_num_threads(1)
        args.device, args.dtype = "cpu", "float32"
        args.items = args.items or 16
        args.chunk_size = args.chunk_size or 8
        args.hf_batch_size = min(args.hf_batch_size, 8)
        args.probe_items_n, args.orders = args.probe_items or 4, 5
    else:
        if not torch.cuda.is_available():
            sys.exit("no CUDA device: run `python bench/gpu.py --dry-run` on a CPU machine")
        args.device, args.dtype = "cuda", "bfloat16"
        args.items = args.items or 1024
        args.chunk_size = args.chunk_size or 512
        args.probe_items_n, args.orders = args.probe_items or 64, 119
    engines = (args.engines or ("transformers" if args.dry_run else "transformers,vllm")).split(",")

    if args.dry_run:
        peak = matmul_tflops("cpu", torch.float32, 1024, 3)
    else:
        peak = matmul_tflops("cuda", torch.bfloat16, 8192, 5)
    print(f"matmul: {peak:.2f} TFLOP/s ({'fp32 CPU' if args.dry_run else 'bf16 ' + torch.cuda.get_device_name()})")

    items, source = load_items(args.items_file, args.items, seed=0)
    args.probe_items = items
    conversations = [prompts.render_messages(item) for item in items]
    tokenizer, tokenizer_source = tokenizer_for(args, [c[0]["content"] for c in conversations])
    folder = args.work / ("model-tiny" if args.dry_run else "model-7b")
    t0 = time.perf_counter()
    params, matmul_params = build_model(args, tokenizer, folder)
    lengths = sorted(
        len(tokenizer(prompts.render_prompt(tokenizer, c), add_special_tokens=False)["input_ids"])
        for c in conversations
    )
    print(
        f"model: {params / 1e9:.4g} B parameters ({matmul_params / 1e9:.4g} B in matmuls), ready in "
        f"{time.perf_counter() - t0:.1f} s, {folder}"
    )
    print(
        f"prompts: {len(items)} {source}; tokenizer {tokenizer_source}; prompt tokens median "
        f"{lengths[len(lengths) // 2]}, 95th percentile {lengths[int(0.95 * (len(lengths) - 1))]}"
    )

    results = []
    for name in engines:
        reason = available(name, args, explicit=args.engines is not None)
        if reason:
            results.append({"engine": name, "skipped": reason})
            continue
        print(f"{name}: running ...", flush=True)
        results.append(run_engine(name, folder, args, conversations))
    rows = table_rows(results, peak, matmul_params, args.dtype)
    print(
        f"\n{'DRY RUN (tiny model, CPU fp32) - ' if args.dry_run else ''}items/s: generation only (load excluded); "
        f"FLOPs/item = 2 x {matmul_params / 1e9:.3g} B matmul params x (prompt + generated tokens); "
        f"projection: {CORPUS_ITEMS:,} items at that rate; whole script {time.perf_counter() - wall:.0f} s"
    )
    print_table(rows)
    print(
        f"\nprobes, in the same engine load: rotation = 4 more generations per item; order = prefill of "
        f"{args.orders + 1} option orders per item; default = {PROBE_DEFAULT_ITEMS['rotation']:,} rotated items, "
        f"{PROBE_DEFAULT_ITEMS['order']:,} order-tested"
    )
    print_table(probe_rows(results), PROBE_COLUMNS)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "peak_tflops": peak,
                    "params": params,
                    "matmul_params": matmul_params,
                    "results": results,
                    "rows": rows,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
