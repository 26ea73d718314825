"""What the Submit and Queue tabs show of the store: the requests table and one job's status.

Both poll (every few seconds, on every open page), so both read the store's small status view
(:meth:`tcmqa.store.Store.job_statuses`: status, progress, times), never a job's log tail or meta.

A running job's progress is its newest record (:mod:`tcmqa.progress`), shown as its phase, its own counts and
the time left at that phase's rate ("Rotations 120/320 · about 2 min left"), in the caller's language. The
table keeps what a visitor scans for (model, status, progress, job, submitted) so it fits the page.

A FAILED job shows its reason, so the submitter can act on it; the harness's log tail is fetched on
demand (:func:`job_log`) and shown as plain text, never as Markdown: a chat template's error message
could otherwise close a code fence and inject links. Text from a job (its reason) is escaped likewise.
"""

from __future__ import annotations

import re
import time

import pandas as pd

from tcmqa import forms, progress
from tcmqa.leaderboard import formats, lang
from tcmqa.quick_anchors import estimate_text
from tcmqa.store import FAILED, FINISHED, QUICK, Store

# keys of lang's "queue_col_*" headers; what a visitor scans for first, so a phone shows it before scrolling
QUEUE_COLUMNS = ["model", "status", "progress", "job", "submitted"]
LOG_TAIL_SHOWN = 3000  # characters of the harness log shown with a failure
MAX_JOB_ID = 64  # characters of a typed job id (the store's are 24)
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#+!|~-])")


def escaped(text: str) -> str:
    """``text`` shown literally in Markdown: every character Markdown or HTML reads is backslash-escaped."""
    return _MARKDOWN.sub(r"\\\1", text)


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)) if t else ""


STORE_WORDS = ("claimed", "done")  # progress values the store itself sets (lang's "progress_*")


def short_id(job_id: str) -> str:
    """A job id as the table shows it: its random part (``20261201T201652-1a2b3c4d`` -> ``1a2b3c4d``); the
    submission time is a column of its own."""
    return job_id.rsplit("-", 1)[-1]


def progress_text(value: str, locale: str | None = None, now: float | None = None) -> str:
    """A job's progress as a person reads it: a record as its phase, counts and time left (in the caller's
    language, or ``locale``); the store's own words ("claimed", "done") translated; any other value (a reason
    to retry, a harness's own line) as it is."""
    record = progress.parse(value)
    if record is None:
        return lang.text(f"progress_{value}", locale) if value in STORE_WORDS else value
    name = lang.text(f"phase_{record.phase.replace(' ', '_')}", locale)
    if record.total <= 1:  # loading, publishing: one step, nothing to count
        return name
    text = f"{name} {record.done}/{record.total}"
    if record.done >= record.total:
        return text
    left = record.left_s(now)
    if left is None:
        return f"{text} · {lang.text('progress_estimating', locale)}"
    minutes = formats.minutes_left(left)
    if minutes is None:
        return f"{text} · {lang.text('progress_under_a_minute', locale)}"
    return f"{text} · {lang.text('progress_minutes_left', locale, minutes=minutes)}"


def jobs_frame(store: Store, locale: str | None = None) -> pd.DataFrame:
    """Every request, newest first: short ids, progress in words, UTC submission times; headers in the caller's
    language (or ``locale``)."""
    rows = [
        [job.model, job.status, progress_text(job.progress, locale), short_id(job.id), _stamp(job.submitted_at)]
        for job in store.job_statuses()
    ]
    return pd.DataFrame(rows, columns=[lang.text(f"queue_col_{key}", locale) for key in QUEUE_COLUMNS])


def job_markdown(store: Store, job_id: str) -> str:
    """One job's status line, progress, and for a failure the reason (escaped); the log tail is :func:`job_log`."""
    try:
        job_id = typed_job_id(store, job_id)
    except forms.FormError as err:
        return f"❌ {escaped(str(err))}"
    if not job_id:
        return "Submit a model, or enter a job id."
    found = store.job_statuses(job_id)
    if not found:
        return f"No job `{job_id}`."
    job = found[0]
    text = f"**{job.status}** · `{job.model}` @ `{job.revision[:12]}` · job `{job.id}` · attempt {job.attempts}"
    if job.progress:
        text += f"\n\nProgress: {escaped(progress_text(job.progress))}"
    if job.status == FINISHED and (full := store.get(job.id)) is not None and full.kind == QUICK:
        text += f"\n\nQuick estimate of Full: **{escaped(estimate_text(full.meta['estimate']))}**, shown apart on the "
        text += "board; **Upgrade to a full run** replaces it with Full."
    if job.status == FAILED:
        text += f"\n\n**Reason:** {escaped(job.reason)}\n\nYou may fix the model and resubmit."
        if job.has_log:
            text += " The harness's log is shown on request (**Show log**)."
    return text


NO_LOG = "Nothing logged for this job: the store keeps the harness's log only when a job fails."
NO_JOB = "Enter a job id to show its log."


def job_log(store: Store, job_id: str) -> str:
    """The end of a job's harness log, as plain text for a text box; a sentence when there is none, never an
    empty box."""
    try:
        job_id = typed_job_id(store, job_id)
    except forms.FormError as err:
        return str(err)
    if not job_id:
        return NO_JOB
    job = store.get(job_id)
    if job is None:
        return f"No job {job_id}."
    return job.log_tail[-LOG_TAIL_SHOWN:] if job.log_tail else NO_LOG


def checked_job_id(text: str | None) -> str:
    """A typed job id, stripped, or :class:`tcmqa.forms.FormError` before the store is asked (a NUL would make
    PostgreSQL raise; a page of text is no job id)."""
    return forms.checked("job id", text, max_chars=MAX_JOB_ID)


def typed_job_id(store: Store, text: str | None) -> str:
    """The full id of a job typed whole or as the Queue shows it (:func:`short_id`, what an admin copies from
    the table); :class:`tcmqa.forms.FormError` as :func:`checked_job_id`."""
    typed = checked_job_id(text)
    return store.full_job_id(typed) if typed and "-" not in typed else typed
