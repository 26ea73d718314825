"""Run ``tcmqa eval --shard I/N`` as N Ray tasks, then ``tcmqa merge`` them: a sharded run on a Ray
cluster (or on one machine's local Ray workers). Needs ``pip install 'tcmqa[ray]'``.

    python bench/ray_shards.py --shards 4 --num-gpus 1 --out runs/qwen7b -- \\
        --model Qwen/Qwen2.5-7B-Instruct --engine vllm

Everything after ``--`` goes to every shard's ``tcmqa eval``. Each task runs the harness in a child
process (so each shard's engine starts and exits cleanly) and writes ``OUT/shard-I``; a task that
fails is retried by Ray and resumes its shard folder (``--resume``), so a lost node costs at most a
chunk. When all shards are done, ``tcmqa merge`` writes ``OUT/merged``: the folder and results row an
unsharded run would have written. ``--address auto`` joins a running cluster (``ray start``); without
it a local Ray starts with ``--local-cpus`` CPUs. Prints the merged row and the seconds per stage.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def eval_shard(index: int, shards: int, out: str, eval_args: list[str]) -> str:
    """One shard: ``tcmqa eval ... --shard I/N --out OUT/shard-I`` (resuming what an earlier try left)."""
    folder = Path(out) / f"shard-{index}"
    argv = [sys.executable, "-m", "tcmqa", "eval", *eval_args, "--shard", f"{index}/{shards}", "--out", str(folder)]
    if (folder / "run.json").exists():
        argv.append("--resume")
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"shard {index}/{shards} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, required=True, help="N: how many shards (Ray tasks)")
    parser.add_argument("--out", type=Path, required=True, help="OUT/shard-I per shard, OUT/merged at the end")
    parser.add_argument("--num-gpus", type=float, default=0, help="GPUs per task (1 for one vLLM per GPU)")
    parser.add_argument("--num-cpus", type=float, default=1, help="CPUs per task")
    parser.add_argument("--address", default=None, help="Ray cluster to join (auto: the one `ray start` began)")
    parser.add_argument("--local-cpus", type=int, default=2, help="CPUs of the local Ray started without --address")
    parser.add_argument("--retries", type=int, default=2, help="times Ray retries a failed shard (it resumes)")
    args = parser.parse_args(argv[:split])
    eval_args = argv[split + 1 :]

    import ray  # pyright: ignore[reportMissingImports] (the ray extra)

    from tcmqa import harness
    from tcmqa.merge import merge

    started = time.perf_counter()
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.local_cpus, include_dashboard=False)
    task = ray.remote(num_cpus=args.num_cpus, num_gpus=args.num_gpus, max_retries=args.retries)(eval_shard)
    out = str(args.out.resolve())
    folders = ray.get([task.remote(i, args.shards, out, eval_args) for i in range(args.shards)])
    evaluated = time.perf_counter()
    results = merge(folders, args.out / "merged")
    merged = time.perf_counter()
    ray.shutdown()
    print(harness.format_row(results))
    print(
        f"{args.shards} shards in {evaluated - started:.1f} s, merged in {merged - evaluated:.1f} s: "
        f"{args.out / 'merged'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
