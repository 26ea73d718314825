"""Results and their Parquet parts: the results rows, the outputs and probes parts, the Hub's results imported.

Parts are stored as bytes (so workers on other machines need no shared disk) and materialised as files
under the store's ``cache_dir`` for local readers. Rows read from the Hub join the store as FINISHED jobs
already published.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tcmqa.store.core import _SUBMIT_LOCK
from tcmqa.store.jobs import FINISHED, Job, JobRows
from tcmqa.store.tables import jobs_t, outputs_t, probes_t, publications_t, results_t

IMPORTED_USER = "hub"  # the submitter recorded for results imported from the Hub
PROBES_CACHE = "probes"  # probes parts are materialised in <cache_dir>/probes/<job id>/


class ResultsStore(JobRows):
    """Results rows and parts: read, materialised as files, imported from the Hub."""

    def results(self) -> list[dict[str, Any]]:
        """Every results row: evaluated here, and imported from the Hub."""
        with self._read() as conn:
            rows = conn.execute(sa.select(results_t.c.row).order_by(results_t.c.recorded_at, results_t.c.job_id))
            return [json.loads(r) for (r,) in rows]

    def version(self) -> str:
        """Changes whenever results change, so readers can cache."""
        with self._read() as conn:
            count, last = conn.execute(sa.select(sa.func.count(), sa.func.max(results_t.c.recorded_at))).one()
        return f"{count}:{last}"

    def outputs_files(self, job_id: str | None = None) -> list[Path]:
        """Local paths of every recorded outputs part (of one job, given ``job_id``), materialised from the
        database into ``cache_dir``.

        Files are ``<cache_dir>/<job id>/part-NNNNN.parquet``; a job's folder is written once, atomically
        (a temporary folder renamed into place), and reused while it is complete.
        """
        return self._part_files(outputs_t, self.cache_dir, job_id)

    def probes_files(self) -> list[Path]:
        """Local paths of every recorded probes part (the ``probes`` config), like :meth:`outputs_files`:
        ``<cache_dir>/probes/<job id>/part-NNNNN.parquet``."""
        return self._part_files(probes_t, self.cache_dir / PROBES_CACHE)

    def _part_files(self, table: sa.Table, folder: Path, job_id: str | None = None) -> list[Path]:
        """The parts of ``table`` (of one job, given ``job_id``) as files under ``folder``, one subfolder per job."""
        query = sa.select(table.c.job_id, table.c.part).order_by(table.c.job_id, table.c.part)
        if job_id is not None:
            query = query.where(table.c.job_id == job_id)
        with self._read() as conn:
            listed = conn.execute(query).all()
        by_job: dict[str, list[int]] = {}
        for job_id, part in listed:
            by_job.setdefault(job_id, []).append(part)
        files: list[Path] = []
        for job_id, parts in by_job.items():
            paths = [folder / job_id / f"part-{part:05d}.parquet" for part in parts]
            if not all(p.is_file() for p in paths):
                self._materialise(table, folder, job_id)
            files.extend(paths)
        return files

    def _materialise(self, table: sa.Table, folder: Path, job_id: str) -> None:
        with self._read() as conn:
            rows = conn.execute(sa.select(table.c.part, table.c.data).where(table.c.job_id == job_id)).all()
        folder.mkdir(parents=True, exist_ok=True)
        staging = folder / f".{job_id}.{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            for part, data in rows:
                (staging / f"part-{part:05d}.parquet").write_bytes(data)
            final = folder / job_id
            for _ in range(3):
                try:
                    os.replace(staging, final)
                    return
                except OSError:  # an incomplete folder (from elsewhere), or another process just wrote it
                    if all((final / f"part-{part:05d}.parquet").is_file() for part, _ in rows):
                        return
                    shutil.rmtree(final, ignore_errors=True)
            raise OSError(f"could not write {final}")
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def import_results(self, rows: list[dict[str, Any]]) -> int:
        """Add results rows read from the Hub, as FINISHED jobs already published; return how many were added.

        A row whose (model, revision, protocol) already has a live job here is skipped. An optional
        ``job_id`` key names the job (it is taken out of the stored row); otherwise the id is derived
        from the key. Imported jobs have ``status_at`` 0, so mirrors of the queue never rewrite them.
        """
        added = 0
        with self._write() as conn:
            self._lock(conn, _SUBMIT_LOCK)
            for original in rows:
                row = dict(original)
                job_id = row.pop("job_id", None)
                key = tuple(str(row.get(name) or "") for name in ("model", "revision", "protocol"))
                if self._live(conn, *key):
                    continue
                job_id = str(job_id or "hub-" + hashlib.sha1("\0".join(key).encode()).hexdigest()[:16])
                when = _date_stamp(row.get("date"))
                now = time.time()
                job = Job(job_id, *key, IMPORTED_USER, FINISHED, when, when, progress="imported from the Hub")
                job.meta = {"imported": True}
                try:
                    with conn.begin_nested():
                        conn.execute(sa.insert(jobs_t).values(**self._values(job)))
                        text = json.dumps(row, ensure_ascii=False, default=_jsonable)
                        conn.execute(sa.insert(results_t).values(job_id=job_id, row=text, recorded_at=now))
                        conn.execute(
                            sa.insert(publications_t).values(
                                job_id=job_id,
                                created_at=now,
                                next_try_at=now,
                                published_at=now,
                                hub_commit="imported",
                                attempts=0,
                            )
                        )
                except IntegrityError:  # that job id is already used here
                    continue
                added += 1
        return added


def _jsonable(value: Any) -> Any:
    """numpy scalars and missing values in rows read from Parquet."""
    if hasattr(value, "item"):
        return value.item()
    if value is None or str(value) in ("<NA>", "NaT", "nan"):
        return None
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _date_stamp(date: Any) -> float:
    """A results row's UTC date (YYYY-MM-DD...) as a time stamp; 0 when absent or unreadable."""
    try:
        return float(calendar.timegm(time.strptime(str(date)[:10], "%Y-%m-%d")))
    except (TypeError, ValueError):
        return 0.0
