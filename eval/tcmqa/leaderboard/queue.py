"""What the Submit and Queue tabs show of the store: the requests table and one job's status.

A FAILED job shows its reason and the harness's log tail, so the submitter can act on it.
"""

from __future__ import annotations

import time

import pandas as pd

from tcmqa.store import FAILED, Store

QUEUE_COLUMNS = ["id", "model", "revision", "status", "progress", "attempts", "user", "submitted", "updated"]
LOG_TAIL_SHOWN = 3000  # characters of the harness log shown with a failure


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) if t else ""


def jobs_frame(store: Store) -> pd.DataFrame:
    """Every request, newest first, with UTC timestamps and short revisions."""
    rows = [
        {
            **job.__dict__,
            "revision": job.revision[:12],
            "submitted": _stamp(job.submitted_at),
            "updated": _stamp(job.updated_at),
        }
        for job in store.jobs()
    ]
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS)


def job_markdown(store: Store, job_id: str) -> str:
    """One job's status line, progress, and for a failure the reason and the log tail."""
    job_id = (job_id or "").strip()
    if not job_id:
        return "Submit a model, or enter a job id."
    job = store.get(job_id)
    if job is None:
        return f"No job `{job_id}`."
    text = f"**{job.status}** · `{job.model}` @ `{job.revision[:12]}` · job `{job.id}` · attempt {job.attempts}"
    if job.progress:
        text += f"\n\nProgress: {job.progress}"
    if job.status == FAILED:
        text += f"\n\n**Reason:** {job.reason}\n\nYou may fix the model and resubmit."
        if job.log_tail:
            text += f"\n\n```text\n{job.log_tail[-LOG_TAIL_SHOWN:]}\n```"
    return text
