"""``tcmqa worker`` processes for the tests and benches that run the queue end to end (no tests here).

Each worker is a real process on the store URL, given in ``TCMQA_STORE`` as a hosted worker's would be,
with a folder of its own (its machine's disk: run folders, models cache, log). ``skew_s`` runs it on a
machine whose clock is off by that many seconds: ``time.time`` is patched in that process only, so the
queue stays right only if it takes every time it compares from the database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Runs ``python -m tcmqa ARGS`` with time.time off by SKEW seconds (the first argument).
SKEWED_CLOCK = """
import runpy, sys, time
_real, _skew = time.time, float(sys.argv[1])
time.time = lambda: _real() + _skew
sys.argv = ["tcmqa", *sys.argv[2:]]
runpy.run_module("tcmqa", run_name="__main__")
"""


def worker_process(
    store: str, folder: Path, command: str, *extra: str, data: str = "demo-tree", skew_s: float = 0.0
) -> subprocess.Popen:
    """A ``tcmqa worker`` on ``store`` running harness ``command``, its log in ``folder/worker.log``.

    Heartbeats every 0.3 s and polls every 0.1 s (a test's pace); ``extra`` flags come last and win.
    """
    folder.mkdir(parents=True, exist_ok=True)
    launcher = [sys.executable, "-m", "tcmqa"]
    if skew_s:
        script = folder / "skewed_clock.py"
        script.write_text(SKEWED_CLOCK)
        launcher = [sys.executable, str(script), str(skew_s)]
    argv = [*launcher, "worker", "--data", data, "--runs", str(folder / "runs"), "--command", command]
    argv += ["--models-cache", str(folder / "models"), "--heartbeat-s", "0.3", "--poll-s", "0.1", *extra]
    with (folder / "worker.log").open("ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TCMQA_STORE": store})


def stop_workers(workers: list[subprocess.Popen], timeout_s: float = 30.0) -> None:
    """SIGTERM each worker (it hands back a job it holds, as on a preempted machine) and wait for it."""
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
