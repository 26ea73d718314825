"""The local Space supervises its worker: the stuck-RUNNING case of public leaderboards, as a test.

``tcmqa serve`` runs the app and its worker as real processes; a submission starts (the stand-in
harness from stand_in.py), the worker is SIGKILLed mid-job, and with nobody touching the app the job
still ends FINISHED: the app restarts its worker, which re-queues the stale job and resumes its run
folder instead of starting from item zero.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gradio_client import Client
from space_fixtures import APP, write_folder
from stand_in import STAND_IN

from tcmqa.store import FINISHED, SQLiteStore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def test_a_killed_local_worker_is_restarted_and_its_job_resumed(tmp_path: Path, demo_tree: Path) -> None:
    model = write_folder(tmp_path / "my-model")
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    starts = tmp_path / "starts.txt"
    command = f"{{python}} {script} --model {{model}} --data {{data}} --out {{out}}"
    worker_args = shlex.join(["--runs", str(tmp_path / "runs"), "--command", command, "--heartbeat-s", "0.5",
                              "--poll-s", "0.5", "--stale-after-s", "3"])  # fmt: skip
    port = _free_port()
    env = {**os.environ, "STAND_IN_STARTS": str(starts), "STAND_IN_STEPS": "12", "STAND_IN_SLEEP": "0.5"}
    store_dir = tmp_path / "store"
    app = subprocess.Popen(
        [sys.executable, "-m", "tcmqa", "serve", "--app", str(APP), "--store", str(store_dir), "--data",
         str(demo_tree), "--port", str(port), "--worker-args", worker_args],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = _wait(lambda: _client(f"http://127.0.0.1:{port}/"), 120, "the app to serve")
        feedback, job_id = client.predict(str(model), "", api_name="/submit")
        assert feedback.startswith("✅"), feedback
        store = SQLiteStore(store_dir)
        _wait(lambda: starts.exists() and "items" in store.get(job_id).progress, 120, "the first attempt to run")
        time.sleep(1.5)  # a few steps done
        worker_pid = int(starts.read_text().split()[2])  # the stand-in's parent
        os.kill(worker_pid, signal.SIGKILL)

        job = _wait(lambda: (j := store.get(job_id)).status == FINISHED and j, 180, "the job to finish")
        first, second = (line.split() for line in starts.read_text().splitlines())
        assert job.attempts == 2 and first[3] == "0" and int(second[3]) > 0  # resumed, not from zero
        assert int(second[2]) != worker_pid  # run by the restarted worker
        assert len(store.results()) == 1 and len(store.probes_files()) == 1  # probed in the same harness run
    finally:
        app.terminate()
        app.wait(timeout=30)


def _client(url: str) -> Client | None:
    try:
        return Client(url, verbose=False)
    except Exception:
        return None
