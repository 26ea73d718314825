"""Soak: three real ``tcmqa worker`` processes on PostgreSQL, SIGKILLed at random times and restarted.

60 jobs, each a stand-in harness run of 1-3 s. Whatever the kills interrupt (a claim, a heartbeat, a
harness run, a finish transaction) every job must end FINISHED exactly once: none lost, none recorded
twice, one results row, one outputs part and one publication each. ``pytest -k soak`` runs it.

The stand-in here is a lighter sibling of tests/stand_in.py (same flags, same files written): it
imports nothing heavy, so a run costs its sleep rather than ~2 s of CPU importing pandas, and 60 jobs
plus the restarts fit in about a minute on two cores.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
from postgres import fresh_database

from tcmqa.schema import RESULTS
from tcmqa.store import FAILED, FINISHED, Store
from tcmqa.worker import die_with_parent

SHA = "0123456789abcdef0123456789abcdef01234567"
JOBS, WORKERS = 60, 3
KILL_EVERY_S = (3.0, 7.0)  # a random worker is SIGKILLed this often
DEADLINE_S = 240

SOAK_STAND_IN = r"""
import argparse, json, os, random, shutil, time
from pathlib import Path
p = argparse.ArgumentParser()
for flag in ("--model", "--revision", "--data", "--out", "--name", "--family"):
    p.add_argument(flag)
a, _ = p.parse_known_args()
out = Path(a.out)
out.mkdir(parents=True, exist_ok=True)
with open(os.environ["STAND_IN_STARTS"], "a") as f:
    f.write(f"{a.model} {os.getpid()}\n")
seconds = random.uniform(1.0, 3.0)
steps = 8
for i in range(steps):
    print(f"{i + 1}/{steps} items", flush=True)
    time.sleep(seconds / steps)
(out / "outputs").mkdir(exist_ok=True)
shutil.copyfile(os.environ["SOAK_PART"], out / "outputs" / "part-00000.parquet")
row = json.loads(Path(os.environ["SOAK_ROW"]).read_text())
row |= {"model": a.model, "full": 20.0, "n": 10, "engine": "stand-in", "revision": a.revision}
(out / "results.json").write_text(json.dumps(row))
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_soak_workers_killed_at_random(postgres_url: str, tmp_path: Path) -> None:
    url = fresh_database(postgres_url)
    rng = random.Random(int(os.environ.get("TCMQA_SOAK_SEED", "11")))
    script = tmp_path / "soak_stand_in.py"
    script.write_text(SOAK_STAND_IN)
    part = tmp_path / "part.parquet"
    pd.DataFrame({"model": ["m"], "item_id": ["1"]}).to_parquet(part)
    (tmp_path / "row.json").write_text(json.dumps({name: None for name in RESULTS}))
    starts = tmp_path / "starts.txt"
    env = {
        **os.environ,
        "STAND_IN_STARTS": str(starts),
        "SOAK_PART": str(part),
        "SOAK_ROW": str(tmp_path / "row.json"),
    }
    command = f"{{python}} {script} --model {{model}} --data {{data}} --out {{out}}"

    store = Store(url, cache_dir=tmp_path / "cache")
    try:
        ids = {store.submit(f"org/soak-{i:02d}", SHA, "v1", "soak").id for i in range(JOBS)}
        logs: list[Path] = []

        def spawn(slot: int) -> subprocess.Popen:
            """Worker ``slot`` is a machine: its restarts share its run folders (and resume from them)."""
            log = tmp_path / f"worker-{len(logs):03d}.log"
            logs.append(log)
            runs = tmp_path / ("runs" if os.environ.get("TCMQA_SOAK_SHARED_RUNS") else f"runs-{slot}")
            argv = [sys.executable, "-m", "tcmqa", "worker", "--store", url, "--data", "demo-tree"]
            argv += ["--runs", str(runs), "--command", command, "--heartbeat-s", "0.5"]
            argv += ["--poll-s", "0.2", "--stale-after-s", "3", "--max-attempts", "50"]
            with log.open("wb") as out:
                return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent)

        started = time.monotonic()
        workers = [spawn(slot) for slot in range(WORKERS)]
        kills, next_kill = 0, started + rng.uniform(*KILL_EVERY_S)
        try:
            while True:
                statuses = Counter(job.status for job in store.jobs())
                elapsed = time.monotonic() - started
                assert not statuses[FAILED] and elapsed < DEADLINE_S, (statuses, f"{elapsed:.0f} s", kills)
                if statuses[FINISHED] == JOBS:
                    break
                if time.monotonic() >= next_kill:
                    slot = rng.randrange(WORKERS)
                    workers[slot].send_signal(signal.SIGKILL)
                    workers[slot].wait()
                    kills += 1
                    workers[slot] = spawn(slot)
                    next_kill = time.monotonic() + rng.uniform(*KILL_EVERY_S)
                time.sleep(0.2)
            wall = time.monotonic() - started
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:  # seen once: a worker spawned just before the end, log empty
                    worker.kill()  # the soak's claim is about the jobs, checked below; the stuck start is in the note
                    worker.wait()

        jobs = store.jobs()
        assert {job.id for job in jobs} == ids and {job.status for job in jobs} == {FINISHED}  # none lost
        results = store.results()
        assert sorted(row["model"] for row in results) == sorted(f"org/soak-{i:02d}" for i in range(JOBS))
        assert len(store.outputs_files()) == JOBS  # one part each, no duplicate
        publications = store.unpublished(limit=JOBS + 10)
        assert sorted(p.job.id for p in publications) == sorted(ids)
        # No job was finished twice: across every worker incarnation, at most one FINISHED outcome per job.
        outcomes = Counter(
            m.group(1) for log in logs for m in re.finditer(r"\] (\S+) FINISHED$", log.read_text(), re.MULTILINE)
        )
        assert max(outcomes.values()) == 1 and set(outcomes) <= ids, outcomes.most_common(3)
        runs = [line.split() for line in starts.read_text().splitlines()]
        time.sleep(0.5)
        assert not [pid for _, pid in runs if _alive(int(pid))]  # no harness outlived its killed worker
        attempts = sum(job.attempts for job in jobs)
        print(
            f"\nsoak: {JOBS} jobs, {WORKERS} workers, {kills} SIGKILLs, {len(logs)} worker starts, "
            f"{attempts} attempts ({attempts - JOBS} re-runs, max {max(j.attempts for j in jobs)} on one job), "
            f"{len(runs)} harness starts, {len(outcomes)} FINISHED outcomes logged, wall {wall:.1f} s"
        )
    finally:
        store.close()
