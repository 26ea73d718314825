"""Throughput of ``tcmqa eval`` per engine: items/s and seconds per stage on real sample items.

    .venv/bin/python bench/harness.py [--items 500] [--engines vllm,transformers] [--dtype bfloat16]

Each engine runs in its own subprocess (a cold start, nothing else competing for the cores) on
Gemma 3 270M built from the PyPI GGUF and the first N items of the real platform sample. Items/s
excludes start-up (the ``load`` stage): it is N over render + generate + score + write.
Engines: ``vllm`` (eager), ``vllm-compiled`` (graph compilation at start-up), ``transformers``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ENV, REPO, cpu_name, sample_tree

from tcmqa.harness import STAGES


def child(engine: str, model: Path, tree: Path, n_items: int, dtype: str, result: Path) -> None:
    """Run one evaluation and write its stage timings as JSON to ``result`` (engines log to stdout)."""
    from tcmqa import harness

    with tempfile.TemporaryDirectory() as out:
        config = harness.EvalConfig(
            model=str(model),
            data=str(tree),
            engine=engine.removesuffix("-compiled"),
            dtype=dtype,
            limit=n_items,
            out=Path(out),
            enforce_eager=engine == "vllm",
        )
        report = harness.run(config)
    result.write_text(json.dumps({"engine": engine, "dtype": dtype, "n": report.results["n"], **report.timings}))


def measure(engine: str, model: Path, tree: Path, n_items: int, dtype: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "timings.json"
        command = [
            sys.executable,
            __file__,
            "--child",
            engine,
            "--model",
            str(model),
            "--tree",
            str(tree),
            "--items",
            str(n_items),
            "--dtype",
            dtype,
            "--result",
            str(result),
        ]
        done = subprocess.run(command, env={**os.environ, **ENV}, capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0 or not result.exists():
            sys.exit(f"{engine} failed:\n{done.stderr[-4000:]}")
        return json.loads(result.read_text())


def table(rows: list[dict]) -> str:
    header = ["engine", "dtype", "items", "items/s", *(f"{s} s" for s in STAGES)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        busy = sum(row.get(s, 0.0) for s in STAGES if s != "load")
        cells = [row["engine"], row["dtype"], str(row["n"]), f"{row['n'] / busy:.2f}"]
        cells += [f"{row.get(s, 0.0):.2f}" for s in STAGES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--engines", default="vllm,transformers")
    parser.add_argument("--dtype", default="bfloat16", help="bfloat16, float32, or both: float32,bfloat16")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.tree, args.items, args.dtype, args.result)
        return
    from tcmqa.local_models import gemma_270m

    model, tree = gemma_270m(), sample_tree()
    rows = []
    for dtype in args.dtype.split(","):
        for engine in args.engines.split(","):
            rows.append(measure(engine, model, tree, args.items, dtype))
            print(f"{engine} {dtype}: done", file=sys.stderr)
    print(f"Gemma 3 270M, {os.cpu_count()} CPUs, {cpu_name()}; items/s excludes the load stage (start-up)")
    print(table(rows))


if __name__ == "__main__":
    main()
