"""The worker as a real process on a real SQLite store, with a stand-in harness command.

The stand-in writes what ``tcmqa eval`` writes (outputs/part-*.parquet and results.json) after a
configurable delay, so crashes, timeouts and concurrency are exercised quickly; the real harness
runs in tests/test_space_e2e.py.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tqdm import tqdm

from tcmqa.schema import PROBES
from tcmqa.store import FAILED, FINISHED, RUNNING, SQLiteStore
from tcmqa.worker import WorkerConfig, _progress, harness_command, run_folder, run_job, work

SHA = "0123456789abcdef0123456789abcdef01234567"


def _starts(tmp_path: Path) -> list[str]:
    path = tmp_path / "starts.txt"
    return path.read_text().splitlines() if path.exists() else []


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie (killed, not yet reaped by its new parent) counts as dead."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _cfg(tmp_path: Path, command: str, **kw) -> WorkerConfig:
    return WorkerConfig(data="demo-tree", runs=tmp_path / "runs", command=command, heartbeat_s=0.2, poll_s=0.1, **kw)


def _spawn_worker(store_dir: Path, tmp_path: Path, command: str, *extra: str) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-m",
        "tcmqa",
        "worker",
        "--store",
        str(store_dir),
        "--data",
        "demo-tree",
        "--runs",
        str(tmp_path / "runs"),
        "--command",
        command,
        "--heartbeat-s",
        "0.3",
        "--poll-s",
        "0.1",
        *extra,
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_harness_command_template(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s")
    cfg = WorkerConfig(data="TechTCM/TCMQA", runs=tmp_path, engine="vllm", dtype="float32", limit=5)
    hub = store.submit("org/m", SHA, "v1", "u", {"family": "qwen2"})
    assert harness_command(cfg, hub, tmp_path / "r")[1:] == [
        "-m",
        "tcmqa",
        "eval",
        "--model",
        "org/m",
        "--data",
        "TechTCM/TCMQA",
        "--out",
        str(tmp_path / "r"),
        "--revision",
        SHA,
        "--name",
        "org/m",
        "--family",
        "qwen2",
        "--engine",
        "vllm",
        "--dtype",
        "float32",
        "--limit",
        "5",
        "--probes",
    ]
    assert "--probes" not in harness_command(dataclasses.replace(cfg, skip_probes=True), hub, tmp_path / "r")
    local = store.submit("m", SHA, "v1", "u", {"path": "/models/m"})
    assert harness_command(cfg, local, tmp_path / "r")[3:9] == [
        "eval",
        "--model",
        "/models/m",
        "--data",
        "TechTCM/TCMQA",
        "--out",
    ]
    assert "--revision" not in harness_command(cfg, local, tmp_path / "r")


def test_finished_records_row_and_outputs(tmp_path: Path, stand_in: str) -> None:
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u", {"params_b": 0.27})
    assert work(store, _cfg(tmp_path, stand_in), "w", once=True) == 1
    assert store.get(job.id).status == FINISHED
    [row] = store.results()
    assert (row["model"], row["origin"], row["revision"], row["protocol"], row["full"]) == (
        "org/m",
        "evaluated",
        SHA,
        "v1",
        20.0,
    )
    assert len(store.outputs_files()) == 1
    [probes] = store.probes_files()  # the harness probed in the same run, and the store kept the part
    rows = pd.read_parquet(probes)
    assert list(rows.columns) == list(PROBES) and (rows.loc[0, "model"], rows.loc[0, "probe"]) == ("org/m", "rotation")
    assert [p.job.id for p in store.unpublished()] == [job.id] and len(store.unpublished()[0].probes) == 1


def test_skip_probes_evaluates_only(tmp_path: Path, stand_in: str) -> None:
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    assert work(store, _cfg(tmp_path, stand_in, skip_probes=True), "w", once=True) == 1
    assert store.get(job.id).status == FINISHED and len(store.outputs_files()) == 1
    assert store.probes_files() == [] and store.unpublished()[0].probes == []


def test_the_queue_shows_which_probe_runs(tmp_path: Path) -> None:
    """The progress line is the last tqdm line of the log: the probes' bars come after the evaluation's."""
    log = tmp_path / "harness.log"
    with log.open("w") as out:
        for desc, total in (("org/m (vllm)", 8), ("rotations", 4), ("order test", 2)):
            with tqdm(total=total, desc=desc, unit="item", file=out, mininterval=0) as bar:
                bar.update(total)
            out.flush()
            assert _progress(log).startswith(f"{desc}: 100%")
        with tqdm(total=4, desc="rotations", unit="item", file=out, mininterval=0) as bar:
            bar.update(1)
            out.flush()
            assert _progress(log).startswith("rotations:  25%") and "1/4" in _progress(log)


def test_a_result_of_another_revision_is_refused(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_REVISION", "local-0123456789abcdef")  # e.g. the folder changed after submission
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    work(store, _cfg(tmp_path, stand_in), "w", once=True)
    failed = store.get(job.id)
    assert failed.status == FAILED and "evaluated revision local-0123456789abcdef" in failed.reason
    assert SHA in failed.reason and store.results() == []


def test_failure_keeps_reason_and_log_tail(tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_FAIL", "1")
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    work(store, _cfg(tmp_path, stand_in), "w", once=True)
    failed = store.get(job.id)
    assert failed.status == FAILED and failed.reason == "the harness exited with code 3"
    assert "CUDA out of memory" in failed.log_tail and "1/1 items" in failed.log_tail
    assert store.results() == []


def test_timeout_kills_the_harness(tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_STEPS", "100")
    monkeypatch.setenv("STAND_IN_SLEEP", "0.1")
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    claimed = store.claim("w")
    assert run_job(store, claimed, _cfg(tmp_path, stand_in, timeout_s=1.5)) == "FAILED"
    assert store.get(job.id).reason == "timed out after 2 s"
    assert not _alive(int(_starts(tmp_path)[0].split()[1]))


def test_missing_results_json_fails(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    work(store, _cfg(tmp_path, "{python} -c pass"), "w", once=True)
    assert "no valid results.json" in store.get(job.id).reason


def test_a_results_row_off_schema_is_refused(tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_BAD_ROW", "1")  # "full" is a string
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("org/m", SHA, "v1", "u")
    work(store, _cfg(tmp_path, stand_in), "w", once=True)
    failed = store.get(job.id)
    assert failed.status == FAILED and "no valid results.json" in failed.reason and store.results() == []


def test_run_folders_are_pruned_to_the_newest(tmp_path: Path, stand_in: str) -> None:
    store = SQLiteStore(tmp_path / "s")
    jobs = [store.submit(f"org/m{i}", SHA, "v1", "u") for i in range(4)]
    assert work(store, _cfg(tmp_path, stand_in, keep_runs=2), "w", once=True) == 4
    # the two that ended last (jobs submitted within a millisecond may be claimed in any order)
    newest = sorted(jobs, key=lambda j: store.get(j.id).updated_at)[-2:]
    assert sorted((tmp_path / "runs").iterdir()) == sorted(run_folder(tmp_path / "runs", j) for j in newest)
    assert len(store.results()) == 4 and len(store.outputs_files()) == 4  # the store keeps the record


def test_one_worker_per_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "gpu.py"
    script.write_text("import os, sys; open(sys.argv[1], 'a').write(os.environ['CUDA_VISIBLE_DEVICES'] + '\\n')")
    store_dir = tmp_path / "s"
    store = SQLiteStore(store_dir)
    for i in range(6):
        store.submit(f"org/m{i}", SHA, "v1", "u")
    seen = tmp_path / "seen.txt"
    worker = _spawn_worker(store_dir, tmp_path, f"{{python}} {script} {seen}", "--gpus", "0,1", "--once")
    worker.communicate(timeout=120)
    # the stand-in writes no results, so every job FAILs; what matters is who ran them
    assert {j.status for j in store.jobs()} == {FAILED} and len(store.jobs()) == 6
    assert set(seen.read_text().split()) == {"0", "1"} and len(seen.read_text().split()) == 6


def test_sigkill_mid_job_rerun_recorded_once(tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_STEPS", "10")
    monkeypatch.setenv("STAND_IN_SLEEP", "0.3")
    store_dir = tmp_path / "s"
    store = SQLiteStore(store_dir)
    job = store.submit("org/m", SHA, "v1", "u")
    first = _spawn_worker(store_dir, tmp_path, stand_in)
    deadline = time.time() + 60
    while not (_starts(tmp_path) and (run_folder(tmp_path / "runs", job) / "step-1").exists()):
        assert time.time() < deadline, "the first worker never started the harness"
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    harness_pid = int(_starts(tmp_path)[0].split()[1])
    time.sleep(0.5)
    assert not _alive(harness_pid)  # PR_SET_PDEATHSIG took the harness down too
    assert store.get(job.id).status == RUNNING  # until its heartbeat goes stale
    time.sleep(2.0)

    second = _spawn_worker(store_dir, tmp_path, stand_in, "--stale-after-s", "2", "--once")
    second_log = second.communicate(timeout=120)[0]
    assert second.returncode == 0, second_log
    done = store.get(job.id)
    assert (done.status, done.attempts) == (FINISHED, 2), second_log
    assert len(_starts(tmp_path)) == 2 and len(store.results()) == 1 and len(store.outputs_files()) == 1
    first_start, second_start = (line.split() for line in _starts(tmp_path))
    assert first_start[3] == "0" and int(second_start[3]) > 0  # the second attempt resumed, not from zero


def test_several_workers_run_each_job_once(tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_SLEEP", "0.2")
    store_dir = tmp_path / "s"
    store = SQLiteStore(store_dir)
    for i in range(6):
        store.submit(f"org/m{i}", SHA, "v1", "u")
    workers = [_spawn_worker(store_dir, tmp_path, stand_in, "--once") for _ in range(3)]
    for w in workers:
        assert w.wait(timeout=180) == 0
    assert sorted(line.split()[0] for line in _starts(tmp_path)) == [f"org/m{i}" for i in range(6)]
    assert {j.status for j in store.jobs()} == {FINISHED} and len(store.results()) == 6


def test_worker_engine_arg_passes_through_to_the_harness(tmp_path: Path) -> None:
    import argparse

    from tcmqa import flags
    from tcmqa.harness import EvalConfig, add_arguments

    parser = argparse.ArgumentParser()
    flags.add_flags(parser, WorkerConfig)
    argv = ["--engine-arg", "tensor_parallel_size=2", "--engine-arg", "quantization=fp8", "--engine-arg", "x={}"]
    cfg = flags.from_args(WorkerConfig, parser.parse_args([*argv, "--runs", str(tmp_path)]))
    assert cfg.engine_args == {"tensor_parallel_size": 2, "quantization": "fp8", "x": {}}
    job = SQLiteStore(tmp_path / "s").submit("org/m", SHA, "v1", "u", {})
    command = harness_command(cfg, job, tmp_path / "r")
    assert command[-6:] == argv
    eval_parser = argparse.ArgumentParser()
    add_arguments(eval_parser)
    parsed = EvalConfig.from_args(eval_parser.parse_args(command[4:]))
    assert parsed.engine_args == cfg.engine_args and parsed.probes  # the real harness takes every flag we pass
    assert flags.to_argv(cfg).count("--engine-arg") == 3  # what a --gpus worker's children are started with
