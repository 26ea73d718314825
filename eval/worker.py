"""``tcmqa worker``: claim queued evaluations, run the harness in a child process, record the outcome.

The worker is its own process (the Space's web process never loads an engine, and ``gr.Timer`` only
runs while a browser is connected). Several may run at once against one store. Each job's harness is a
child process in its own session, under a time limit, killed if this worker dies (PR_SET_PDEATHSIG);
a job whose worker died is re-queued by any other worker once its heartbeat is stale.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tcmqa.outputs import part_files
from tcmqa.store import Job, Store, open_store

DEFAULT_COMMAND = "{python} -m tcmqa.cli eval --model {model} --data {data} --out {out}"
LOG_TAIL_CHARS = 4000


@dataclasses.dataclass
class WorkerConfig:
    """Everything a worker needs besides its store; every field has a command-line flag."""

    data: str
    runs: Path
    command: str = DEFAULT_COMMAND
    engine: str | None = None
    dtype: str | None = None
    limit: int | None = None
    timeout_s: float = 4 * 3600
    heartbeat_s: float = 10.0
    stale_after_s: float = 120.0
    max_attempts: int = 3
    poll_s: float = 2.0


def harness_command(cfg: WorkerConfig, job: Job, out: Path) -> list[str]:
    """The child's argv: the command template with this job's values, then the job's flags.

    A Hub model is pinned with ``--revision``; a local folder (local mode) has no commits, so its
    fingerprint stays in the store and the folder path is passed as the model.
    """
    path = job.meta.get("path")
    values = {"python": sys.executable, "model": path or job.model, "data": cfg.data, "out": str(out)}
    argv = [token.format(**values) for token in shlex.split(cfg.command)]
    if not path:
        argv += ["--revision", job.revision]
    argv += ["--name", job.model]
    if job.meta.get("family"):
        argv += ["--family", job.meta["family"]]
    if cfg.engine:
        argv += ["--engine", cfg.engine]
    if cfg.dtype:
        argv += ["--dtype", cfg.dtype]
    if cfg.limit:
        argv += ["--limit", str(cfg.limit)]
    return argv


def die_with_parent() -> None:
    """In a child (``preexec_fn``): get SIGKILL when its parent dies, so a killed parent leaves no orphan."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - chars))
        return f.read().decode("utf-8", "replace")


def _progress(log: Path) -> str:
    """The harness's last progress line (tqdm rewrites with \\r): what the Queue tab shows."""
    lines = [line.strip() for line in _tail(log, 2000).replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1][:160] if lines else "starting"


def _results_row(run_dir: Path, job: Job) -> dict[str, Any]:
    """The harness's results row, marked as evaluated here and pinned to the job's revision."""
    row = json.loads((run_dir / "results.json").read_text())
    if isinstance(row, list):
        row = row[0]
    return {**row, "model": job.model, "origin": "evaluated", "revision": job.revision, "protocol": job.protocol}


def run_job(store: Store, job: Job, cfg: WorkerConfig) -> str:
    """Run one claimed job to FINISHED, FAILED or (claim lost) abandoned; return which."""
    run_dir = cfg.runs / f"{job.id}-attempt{job.attempts}"
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "harness.log"
    argv = harness_command(cfg, job, run_dir)
    with log.open("wb") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, preexec_fn=die_with_parent)
    started = last_beat = time.monotonic()
    while child.poll() is None:
        time.sleep(min(1.0, cfg.heartbeat_s))
        now = time.monotonic()
        if now - started > cfg.timeout_s:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            store.fail(job, f"timed out after {cfg.timeout_s:.0f} s", _tail(log))
            return "FAILED"
        if now - last_beat >= cfg.heartbeat_s:
            last_beat = now
            if not store.heartbeat(job, _progress(log)):
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return "ABANDONED"
    if child.returncode != 0:
        store.fail(job, f"the harness exited with code {child.returncode}", _tail(log))
        return "FAILED"
    try:
        row = _results_row(run_dir, job)
    except (OSError, ValueError, IndexError) as err:
        store.fail(job, f"the harness wrote no readable results.json ({err})", _tail(log))
        return "FAILED"
    outputs = part_files(run_dir)
    return "FINISHED" if store.finish(job, row, outputs) else "ABANDONED"


def work(store: Store, cfg: WorkerConfig, name: str, once: bool = False) -> int:
    """Poll, requeue stale jobs, claim and run; with ``once``, stop when the queue is empty."""
    done = 0
    while True:
        for job in store.requeue_stale(cfg.stale_after_s, cfg.max_attempts):
            print(f"[{name}] {job.id} {job.status}: {job.reason or job.progress}", flush=True)
        job = store.claim(name)
        if job is None:
            if once:
                return done
            time.sleep(cfg.poll_s)
            continue
        print(f"[{name}] running {job.id} {job.model}@{job.revision[:12]} (attempt {job.attempts})", flush=True)
        print(f"[{name}] {job.id} {run_job(store, job, cfg)}", flush=True)
        done += 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--store", default=env("TCMQA_STORE", ".cache/space"), help="SQLite store directory, or hub:REQUESTS_REPO,RESULTS_REPO")
    parser.add_argument("--data", default=env("TCMQA_DATA", "TechTCM/TCMQA"), help="Hub id or built tree passed to the harness")
    parser.add_argument("--runs", type=Path, default=Path(env("TCMQA_RUNS", ".cache/space-runs")), help="where run folders and logs go")
    parser.add_argument("--command", default=env("TCMQA_WORKER_COMMAND", DEFAULT_COMMAND),
                        help="harness command template; placeholders {python} {model} {data} {out}; "
                             "--revision, --name, --family, --engine, --dtype, --limit are appended")
    parser.add_argument("--engine", choices=["vllm", "transformers"], default=env("TCMQA_ENGINE"))
    parser.add_argument("--dtype", choices=["bfloat16", "float32", "auto"], default=env("TCMQA_DTYPE"),
                        help="harness dtype (float32 on CPUs without native bf16, where bf16 is emulated and slow)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N items (smoke runs)")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds a harness run may take")
    parser.add_argument("--heartbeat", type=float, default=10.0, help="seconds between heartbeats")
    parser.add_argument("--stale-after", type=float, default=120.0, help="re-queue RUNNING jobs silent this long")
    parser.add_argument("--max-attempts", type=int, default=3, help="attempts before a job is FAILED")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between polls of an empty queue")
    parser.add_argument("--once", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--name", default=None, help="worker name in claims (default host-pid-random)")


def main(args: argparse.Namespace) -> int:
    cfg = WorkerConfig(
        data=args.data, runs=args.runs.expanduser(), command=args.command, engine=args.engine, dtype=args.dtype,
        limit=args.limit,
        timeout_s=args.timeout, heartbeat_s=args.heartbeat, stale_after_s=args.stale_after,
        max_attempts=args.max_attempts, poll_s=args.poll,
    )
    name = args.name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
    store = open_store(args.store)
    print(f"[{name}] worker on {args.store}, data {args.data}", flush=True)
    work(store, cfg, name, once=args.once)
    return 0
