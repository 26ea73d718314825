"""The hosted worker's hardening (issue 19): one clock (the database's), transient failures, secrets.

Real worker processes on a real SQLite file and a real PostgreSQL server (tests/postgres.py), with the
stand-in harness of tests/stand_in.py.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from postgres import fresh_database
from workers import worker_process

from tcmqa import harness
from tcmqa.runs import EXIT_TRANSIENT, is_transient
from tcmqa.store import FAILED, FINISHED, PENDING, RUNNING, SQLiteStore, open_store
from tcmqa.worker import WorkerConfig, evict_models, hosted_by_environment, hub_cache_folder, run_folder, run_job

SHA = "0123456789abcdef0123456789abcdef01234567"


def _worker(spec: str, tmp_path: Path, command: str, *extra: str) -> subprocess.Popen:
    """A ``tcmqa worker`` process on ``spec``, its store URL passed in the environment (never argv)."""
    argv = [sys.executable, "-m", "tcmqa", "worker", "--data", "demo-tree"]
    argv += ["--runs", str(tmp_path / "runs"), "--command", command, "--heartbeat-s", "0.3", "--poll-s", "0.1", *extra]
    env = {**os.environ, "TCMQA_STORE": spec}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for(predicate, timeout: float = 60.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_clock_skew_fast_worker_requeues_no_healthy_job(
    url: str, tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_STEPS", "12")
    monkeypatch.setenv("STAND_IN_SLEEP", "0.5")
    store = open_store(url)
    job = store.submit("org/m", SHA, "v1", "u")
    healthy = _worker(url, tmp_path, stand_in, "--once")
    _wait_for(lambda: store.get(job.id).status == RUNNING, what="the healthy worker's claim")
    # its own clock ten minutes fast (time.time patched in its process, nowhere else)
    skewed = worker_process(url, tmp_path / "skewed", stand_in, "--stale-after-s", "3", skew_s=600)
    try:
        log = healthy.communicate(timeout=120)[0]
    finally:
        skewed.kill()
        skewed.wait()
    skewed_log = (tmp_path / "skewed" / "worker.log").read_text()
    done = store.get(job.id)
    assert (done.status, done.attempts) == (FINISHED, 1), log + skewed_log
    assert len((tmp_path / "starts.txt").read_text().splitlines()) == 1  # never re-queued, never re-run
    assert abs(done.heartbeat_at - time.time()) < 60  # the database's time, not the fast worker's
    store.close()


def _cfg(tmp_path: Path, command: str, **kw) -> WorkerConfig:
    return WorkerConfig(data="demo-tree", runs=tmp_path / "runs", command=command, heartbeat_s=0.2, poll_s=0.1, **kw)


def test_transient_harness_exit_requeues_without_an_attempt(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_NETWORK_FAILS", "1")
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    cfg = _cfg(tmp_path, stand_in, retry_backoff_s=1.0)
    assert run_job(store, store.claim("w"), cfg) == PENDING
    waiting = store.get(job.id)
    assert (waiting.status, waiting.attempts, waiting.retries, waiting.claim) == (PENDING, 0, 1, "")
    assert store.claim("w") is None and store.waiting()  # the backoff holds it back ...
    time.sleep(1.1)
    again = store.claim("w")  # ... then it is claimable, as its first counted attempt
    assert again is not None and again.attempts == 1
    assert run_job(store, again, cfg) == FINISHED
    assert store.submitted_within("u", 3600) == 1  # one submission on the rate limit, however often retried


def test_transient_permanent_failures_are_failed_at_once(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_FAIL", "1")  # CUDA out of memory: the model's own problem
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    assert run_job(store, store.claim("w"), _cfg(tmp_path, stand_in)) == FAILED
    assert store.get(job.id).reason == "the harness exited with code 3"


def test_transient_errors_are_told_apart() -> None:
    class Response:
        status_code = 503

    class HubDown(Exception):
        response = Response()

    try:
        try:
            raise ConnectionError("huggingface.co unreachable")
        except ConnectionError as err:
            raise OSError("could not download the snapshot") from err
    except OSError as wrapped:
        assert is_transient(wrapped)  # found through the cause
    assert is_transient(HubDown()) and is_transient(TimeoutError())
    assert not is_transient(ValueError("chat template error")) and not is_transient(OSError("no such model"))


def test_transient_the_harness_exits_75_when_the_hub_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    def hub_down(_args: object) -> int:
        raise ConnectionError("huggingface.co unreachable")

    monkeypatch.setattr(harness, "_main", hub_down)
    assert harness.main(argparse.Namespace()) == EXIT_TRANSIENT == 75


def test_transient_a_stopped_worker_hands_its_job_back(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_STEPS", "20")
    monkeypatch.setenv("STAND_IN_SLEEP", "0.3")
    spec = f"sqlite:///{tmp_path / 's' / 'queue.sqlite'}"
    store = open_store(spec)
    job = store.submit("org/m", SHA, "v1", "u")
    first = _worker(spec, tmp_path, stand_in)
    _wait_for(lambda: (tmp_path / "runs").exists() and any((tmp_path / "runs").rglob("step-1")), what="a step")
    first.send_signal(signal.SIGTERM)  # a preempted machine
    assert first.wait(timeout=30) == 0
    back = store.get(job.id)
    assert (back.status, back.attempts, back.retries) == (PENDING, 0, 1)
    second = _worker(spec, tmp_path, stand_in, "--once")
    log = second.communicate(timeout=120)[0]
    done = store.get(job.id)
    assert (done.status, done.attempts) == (FINISHED, 1), log
    _, second_start = (line.split() for line in (tmp_path / "starts.txt").read_text().splitlines())
    assert int(second_start[3]) > 0  # resumed where the stopped one left off


def test_outage_mid_job_finishes_later_with_no_attempt_counted(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_NETWORK_FAILS", "2")  # the Hub is down for the first two starts of each model
    spec = f"sqlite:///{tmp_path / 's' / 'queue.sqlite'}"
    store = open_store(spec)
    jobs = [store.submit(f"org/m{i}", SHA, "v1", "u") for i in range(3)]
    worker = _worker(spec, tmp_path, stand_in, "--once", "--retry-backoff-s", "0.2")
    log = worker.communicate(timeout=180)[0]
    assert worker.returncode == 0, log
    for job in jobs:
        done = store.get(job.id)
        assert (done.status, done.attempts, done.retries) == (FINISHED, 1, 2), log
    assert len(store.results()) == 3 and len((tmp_path / "starts.txt").read_text().splitlines()) == 9


def test_postgres_timeouts_cut_a_hung_statement(postgres_url: str) -> None:
    url = fresh_database(postgres_url)
    store = open_store(url)
    with store._read() as conn:
        assert conn.execute(sa.text("SHOW statement_timeout")).scalar_one() == "2min"  # the default
        assert conn.execute(sa.text("SHOW idle_in_transaction_session_timeout")).scalar_one() == "1min"
    store.close()
    short = open_store(url + "?options=-c%20statement_timeout%3D300")  # an operator's own, in the URL
    started = time.monotonic()
    with pytest.raises(sa.exc.OperationalError, match="statement timeout"), short._read() as conn:
        conn.execute(sa.text("SELECT pg_sleep(30)"))
    assert time.monotonic() - started < 10
    short.close()


def test_hosted_worker_refuses_limit_and_local_folders(tmp_path: Path, stand_in: str) -> None:
    with pytest.raises(ValueError, match="partial row"):
        WorkerConfig(hosted=True, limit=5)
    assert hosted_by_environment({"SPACE_ID": "org/space"}) and hosted_by_environment({"TCMQA_HOSTED": "1"})
    assert not hosted_by_environment({"TCMQA_HOSTED": "0"}) and not hosted_by_environment({})
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("my-model", SHA, "v1", "u", {"path": str(tmp_path / "my-model")})
    assert run_job(store, store.claim("w"), _cfg(tmp_path, stand_in, hosted=True)) == FAILED
    assert "upload the model to the Hub" in store.get(job.id).reason
    assert not (tmp_path / "starts.txt").exists()  # never started


def test_hosted_flag_defaults_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tcmqa import flags

    monkeypatch.setenv("SPACE_ID", "org/space")
    parser = argparse.ArgumentParser()
    flags.add_flags(parser, WorkerConfig)
    assert flags.from_args(WorkerConfig, parser.parse_args([])).hosted
    assert not flags.from_args(WorkerConfig, parser.parse_args(["--no-hosted", "--limit", "3"])).hosted


def test_a_resubmitted_model_resumes_its_earlier_run(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_STEPS", "6")
    monkeypatch.setenv("STAND_IN_SLEEP", "0.3")
    store = SQLiteStore(tmp_path / "s")
    first = store.submit("org/m", SHA, "v1", "u")
    assert run_job(store, store.claim("w"), _cfg(tmp_path, stand_in, timeout_s=1.2)) == FAILED  # a few steps
    again = store.submit("org/m", SHA, "v1", "u")  # the submitter tries again
    assert again.id != first.id
    assert run_job(store, store.claim("w"), _cfg(tmp_path, stand_in)) == FINISHED
    _, second = ((tmp_path / "starts.txt").read_text().splitlines()[i].split() for i in (0, 1))
    assert int(second[3]) > 0  # resumed the failed job's run, not from zero
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_folder(tmp_path / "runs", again).name]


def test_transient_retry_reuses_the_models_cache(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_NETWORK_FAILS", "1")
    monkeypatch.setenv("STAND_IN_DUMP", str(tmp_path / "child.json"))
    store = SQLiteStore(tmp_path / "s")
    store.submit("org/m", SHA, "v1", "u")
    cfg = _cfg(tmp_path, stand_in, retry_backoff_s=0.0, models_cache=tmp_path / "models")
    assert run_job(store, store.claim("w"), cfg) == PENDING
    first = json.loads((tmp_path / "child.json").read_text())["env"]["HF_HUB_CACHE"]
    assert run_job(store, store.claim("w"), cfg) == FINISHED
    assert json.loads((tmp_path / "child.json").read_text())["env"]["HF_HUB_CACHE"] == first == str(tmp_path / "models")


def test_the_models_cache_evicts_the_least_recently_used(tmp_path: Path) -> None:
    cache = tmp_path / "models"
    for age, model in enumerate(["org/new", "org/mid", "org/old", "org/running"]):
        folder = hub_cache_folder(cache, model)
        (folder / "blobs").mkdir(parents=True)
        (folder / "blobs" / "weights").write_bytes(b"x" * 1000)
        (folder / "snapshots").mkdir()
        (folder / "snapshots" / "weights").symlink_to(folder / "blobs" / "weights")  # counts nothing
        os.utime(folder, (time.time() - 100 * age, time.time() - 100 * age))
    removed = evict_models(cache, 2000, in_use=["org/running"])
    assert removed == [hub_cache_folder(cache, "org/old"), hub_cache_folder(cache, "org/mid")]
    assert sorted(p.name for p in cache.iterdir()) == ["models--org--new", "models--org--running"]
    assert evict_models(cache, 2000) == []
