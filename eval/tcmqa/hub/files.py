"""The files the publisher writes to the Hub: their folders, a results row as Parquet, a job as a public
request file (no log tail, no local paths)."""

from __future__ import annotations

import datetime as dt
import io
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tcmqa import flags
from tcmqa.schema import RESULTS

RESULTS_DIR = "results"
OUTPUTS_DIR = "outputs"
PROBES_DIR = "probes"
REQUESTS_DIR = "requests"


def results_parquet(row: dict[str, Any]) -> bytes:
    """One results row as Parquet typed with ``RESULTS`` (the ``results`` config); unknown keys are dropped."""
    full = RESULTS.encode_example({name: row.get(name) for name in RESULTS})
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([full], schema=RESULTS.arrow_schema), buf)
    return buf.getvalue()


_PATH = re.compile(r"(?<![\w.:/~-])(?:~|[A-Za-z]:)?(?:[/\\][\w.@+-]+){2,}[/\\]?")


def redact(text: str, limit: int = 500) -> str:
    """A reason fit for a public file: credentials (:func:`tcmqa.flags.redact`) and local paths replaced, length
    capped."""
    text = _PATH.sub("<path>", flags.redact(text or ""))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _iso(t: float | None) -> str | None:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def request_json(job: Any) -> dict[str, Any]:
    """A job as a public request file (Open LLM Leaderboard convention): no log tail, no local paths."""
    meta = getattr(job, "meta", None) or {}
    status_at = getattr(job, "status_at", None) or job.updated_at
    return {
        "job_id": job.id,
        "model": job.model,
        "revision": job.revision,
        "protocol": job.protocol,
        "status": job.status,
        "reason": redact(job.reason),
        "attempts": job.attempts,
        "submitted_time": _iso(job.submitted_at),
        "updated_time": _iso(status_at),
        **{key: meta[key] for key in ("family", "params_b") if meta.get(key) is not None},
    }
