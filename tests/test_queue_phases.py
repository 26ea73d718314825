"""The Queue shows a running job's phase, its own progress and the time left (issue 27).

A real job: the tiny model through the worker and the real harness with the probes, on a real SQLite store;
the progress records are the ones the harness, the probes and the worker wrote, and the Queue's table renders
what the store held while the job ran.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tcmqa import progress
from tcmqa.leaderboard import queue
from tcmqa.models import local_revision
from tcmqa.prompts import PROTOCOL
from tcmqa.store import FINISHED, RUNNING, SQLiteStore
from tcmqa.worker import DEFAULT_COMMAND, WorkerConfig, run_folder, work

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def probed_job(tiny_dir: Path, demo_tree: Path, tmp_path_factory: pytest.TempPathFactory):
    """A job run to FINISHED with the probes, the store's progress values polled while it ran, its records."""
    tmp_path = tmp_path_factory.mktemp("phases")
    store = SQLiteStore(tmp_path / "s")
    job = store.submit("tiny", local_revision(tiny_dir), PROTOCOL, "u", {"path": str(tiny_dir)})
    cfg = WorkerConfig(
        data=str(demo_tree), runs=tmp_path / "runs", command=DEFAULT_COMMAND + " --chunk-size 4",
        engine="transformers", dtype="float32", engine_args={"batch_size": 8}, heartbeat_s=0.2, poll_s=0.1,
        hosted=False,
    )  # fmt: skip
    seen: list[str] = []
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.05):
            [status] = store.job_statuses(job.id)
            if status.status == RUNNING and (not seen or seen[-1] != status.progress):
                seen.append(status.progress)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        assert work(store, cfg, "w", once=True) == 1
    finally:
        done.set()
        poller.join()
    assert store.get(job.id).status == FINISHED, store.get(job.id).log_tail
    return store, progress.read(run_folder(cfg.runs, store.get(job.id))), seen


def test_queue_phase_records_of_a_real_job_come_in_order_with_a_time_left(probed_job) -> None:
    _, records, _ = probed_job
    phases = [r.phase for r in records]
    assert list(dict.fromkeys(phases)) == list(progress.PHASES)  # each phase, in the order a job runs them
    assert all(0 <= r.first <= r.done <= r.total and r.started <= r.at for r in records)
    evaluating = [r for r in records if r.phase == "evaluating"]
    assert evaluating[-1].done == evaluating[-1].total > 4  # several chunks of 4
    assert evaluating[0].left_s(evaluating[0].at) is None  # no step yet: estimating
    estimates = [r.left_s(r.at) for r in evaluating if r.done < r.total and r.steps >= progress.MIN_STEPS]
    assert estimates and all(e is not None and e > 0 for e in estimates)


def test_queue_phase_the_store_held_each_phase_while_the_job_ran(probed_job) -> None:
    """The worker's heartbeat hands the store the newest record, so a page polling it sees the phases move."""
    _, _, seen = probed_job
    records = [r for value in seen if (r := progress.parse(value)) is not None]
    assert records, seen
    order = [progress.PHASES.index(r.phase) for r in records]
    assert order == sorted(order) and progress.PHASES.index("evaluating") in order  # never backwards


def test_queue_phase_table_renders_phase_counts_and_time_left(probed_job) -> None:
    """The Queue's table shows a running job as its phase, counts and time left, in the caller's language."""
    store, records, _ = probed_job
    running = store.submit("org/running", "f" * 40, PROTOCOL, "bob")
    claimed = store.claim("w2")
    assert claimed is not None and claimed.id == running.id
    evaluating = next(r for r in records if r.phase == "evaluating" and r.steps >= progress.MIN_STEPS)
    estimating = next(r for r in records if r.phase == "evaluating")
    for record, en, zh in (
        (estimating, f"Evaluating {estimating.done}/{estimating.total} · estimating…", "评测"),
        (next(r for r in records if r.phase == "loading"), "Loading the model", "加载模型"),
    ):
        assert store.heartbeat(claimed, record.text())
        frame = queue.jobs_frame(store, "en")
        assert list(frame.columns) == ["Model", "Status", "Progress", "Job", "Submitted (UTC)"]
        [row] = frame[frame["Model"] == "org/running"].values.tolist()
        assert row[:4] == ["org/running", RUNNING, en, queue.short_id(running.id)] and len(row[3]) == 8
        assert queue.jobs_frame(store, "zh-CN")["进度"].tolist()[0].startswith(zh)
    # at the phase's own rate: 2 of 10 chunks in 60 s leave 240 s, i.e. about 4 minutes
    record = progress.Record("rotations", 20, 100, started=1000.0, at=1060.0, steps=2)
    assert queue.progress_text(record.text(), "en", now=1060.0) == "Rotations 20/100 · about 4 min left"
    assert queue.progress_text(record.text(), "zh-TW", now=1060.0) == "選項輪換 20/100 · 約剩 4 分鐘"
    assert queue.progress_text(record.text(), "en", now=1250.0) == "Rotations 20/100 · under a minute left"
    assert queue.progress_text("done", "zh-CN") == "完成" and queue.progress_text("chunk 3", "en") == "chunk 3"
    assert store.heartbeat(claimed, evaluating.text())
    assert "left" in queue.jobs_frame(store, "en")["Progress"].tolist()[0] or evaluating.done == evaluating.total
