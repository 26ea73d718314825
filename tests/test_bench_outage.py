"""``bench/outage.py`` in its short form: a 24-second Hub outage during a 5-job run, backoffs shortened to fit.

The outage outlasts the first two jobs by far, even on a loaded 2-core machine (their harness's imports
alone take seconds there), so the jobs after them are claimed during it and meet it.

The bench's own verdict is checked from what it prints: every job FINISHED, each published exactly once
and after the outage, no attempt counted; the table's rows must agree with the totals.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_bench_outage_short_run_prints_every_job_finished_and_published_once(tmp_path: Path) -> None:
    command = [sys.executable, str(REPO / "bench" / "outage.py"), "--minutes", "0.4", "--job-s", "2"]
    command += ["--retry-backoff-s", "0.5", "--publish-backoff-s", "1", "--poll-s", "0.5", "--work", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines, printed = done.stdout.splitlines(), done.stdout
    assert lines[0].startswith("Hub outage of 24 s (503) during a 5-job run"), printed
    assert "jobs FINISHED: 5/5" in lines, printed
    assert "published exactly once: 5/5 (5 after the outage)" in lines, printed
    assert "extra attempts: 0" in lines, printed
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("| bench/")]
    assert len(rows) == 5, printed
    assert {(status, attempts, publications) for _, status, attempts, _, _, publications, *_ in rows} == {
        ("FINISHED", "1", "1")
    }
    retries = [int(row[3]) for row in rows]
    assert all(int(starts) == int(tries) + 1 for _, _, _, tries, starts, *_ in rows), printed  # a retry, a start
    assert sum(retries) > 0 and f"retries (transient, no attempt counted): {sum(retries)}" in lines, printed
    refused = next(line for line in lines if line.startswith("commits refused during the outage:"))
    assert re.search(r"bench/TCMQA [1-9]", refused), printed  # the publication met the outage
