"""Pages poll a small view (issue 19): the queue's status read never moves a log tail or a job's meta.

On a real SQLite file and a real PostgreSQL server (the ``url`` fixture). Every statement the store's
reader sends is recorded, so the test sees what the read selects, not only what it returns.
"""

from __future__ import annotations

import sqlalchemy as sa

from tcmqa.leaderboard import queue
from tcmqa.store import FAILED, PENDING, RUNNING, Store

SHA = "0123456789abcdef0123456789abcdef01234567"
LOG = "PLANTED-LOG-TAIL " * 200  # about 3.4 KB, like a real harness log tail
META = "PLANTED-META"


def test_queue_pages_read_status_and_progress_never_the_log_tail(url: str) -> None:
    store = Store(url)
    try:
        failed = store.submit("org/broken", SHA, "v1", "alice", {"note": META})
        claimed = store.claim("w1")
        assert claimed is not None and claimed.id == failed.id
        assert store.fail(claimed, "the chat template raised", LOG)
        running = store.submit("org/running", "f" * 40, "v1", "bob", {"note": META})
        second = store.claim("w2")
        assert second is not None and second.id == running.id and store.heartbeat(second, "chunk 3/10")
        waiting = store.submit("org/waiting", "e" * 40, "v1", "carol")

        sent: list[str] = []
        sa.event.listen(store._reader, "before_cursor_execute", lambda *args: sent.append(str(args[2])))
        statuses = store.job_statuses()
        frame = queue.jobs_frame(store)
        page = queue.job_markdown(store, failed.id)
        polled = " ".join(sent)
        assert sent and "log_tail" not in polled.replace("length(jobs.log_tail)", "")
        assert "meta" not in polled

        assert [s.id for s in statuses] == [waiting.id, running.id, failed.id]  # newest first
        assert [(s.status, s.progress, s.has_log) for s in statuses] == [
            (PENDING, "", False),
            (RUNNING, "chunk 3/10", False),
            (FAILED, "claimed", True),
        ]
        assert not any(marker in repr(statuses) for marker in ("PLANTED", META))
        assert list(frame.columns) == ["Model", "Status", "Progress", "Job", "Submitted (UTC)"]
        assert frame[["Job", "Model", "Status", "Progress"]].values.tolist() == [
            [queue.short_id(waiting.id), "org/waiting", PENDING, ""],
            [queue.short_id(running.id), "org/running", RUNNING, "chunk 3/10"],
            [queue.short_id(failed.id), "org/broken", FAILED, "claimed"],
        ]
        assert "PLANTED" not in frame.to_string()
        assert page.startswith(f"**FAILED** · `org/broken` @ `{SHA[:12]}` · job `{failed.id}` · attempt 1")
        assert "the chat template raised" in page and "**Show log**" in page and "PLANTED" not in page
        assert "Show log" not in queue.job_markdown(store, waiting.id)
        assert queue.job_markdown(store, "no-such-job") == "No job `no-such-job`."
        assert queue.job_log(store, failed.id) == LOG[-queue.LOG_TAIL_SHOWN :]  # the log: on demand only
        # a job with nothing logged, no job, an unknown one: a sentence, never an empty box
        assert queue.job_log(store, waiting.id) == queue.NO_LOG and "Nothing logged" in queue.NO_LOG
        assert queue.job_log(store, "") == queue.NO_JOB and queue.job_log(store, "nope") == "No job nope."
        # the id as the table shows it finds the job (what an admin copies), a part of it does not
        assert queue.job_log(store, queue.short_id(failed.id)) == LOG[-queue.LOG_TAIL_SHOWN :]
        assert f"job `{failed.id}`" in queue.job_markdown(store, queue.short_id(failed.id))
        assert queue.job_log(store, queue.short_id(failed.id)[:4]) == f"No job {queue.short_id(failed.id)[:4]}."
    finally:
        store.close()
