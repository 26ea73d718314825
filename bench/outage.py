"""A Hub outage of N minutes during a 5-job run (issue 19): every job FINISHED, each published once, no attempt counted.

    python bench/outage.py [--minutes 10] [--jobs 5] [--workers 2] [--store postgresql://...]

The real queue (SQLite in a temporary folder, or ``--store`` a PostgreSQL URL), real ``tcmqa worker``
processes running the stand-in harness (tests/stand_in.py: each job takes ``--job-s``), and the Publisher
thread as the Space runs it, publishing to the fake Hub (tests/fakehub.py, loaded by its path: it stays out
of the package). The Hub goes down once a job is mid-run and stays down ``--minutes``: publications are
refused, and the jobs claimed meanwhile fail in their model download (the harness exits 75: back to PENDING
with backoff, no attempt counted). The worker's and the Publisher's backoffs are their defaults unless
given, so the times after the outage are what an operator would see. Prints a table per job and the totals;
exits 1 unless every job FINISHED on its first counted attempt and was published once, after the outage.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before any Hugging Face import reads it

from tcmqa.hub.publisher import Publisher
from tcmqa.prompts import PROTOCOL
from tcmqa.store import FAILED, FINISHED, Store, open_store
from tcmqa.worker import CHILD_ENV_VARIABLE, WorkerConfig

TESTS = Path(__file__).resolve().parents[1] / "tests"
REPO, REQUESTS = "bench/TCMQA", "bench/requests"
STEPS = 10  # the stand-in's steps per job: a job is mid-run once one is done
PROGRESS = re.compile(r"^(\d+)/(\d+) items")


def from_tests(name: str) -> ModuleType:
    """A helper module of the test suite (tests/NAME.py), loaded by its path."""
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # registered first, as import does
    spec.loader.exec_module(module)
    return module


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = WorkerConfig(hosted=False)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0, help="how long the Hub is down")
    p.add_argument("--jobs", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--store", help="the queue's URL (default: a new SQLite file in --work)")
    p.add_argument("--work", type=Path, help="folder for the queue, workers and runs (default: a temporary one)")
    p.add_argument("--job-s", type=float, default=20.0, help="seconds the stand-in harness takes per job")
    p.add_argument("--failure", default="503", help="what every Hub call gets during the outage: a status or connect")
    p.add_argument("--retry-after", type=float, help="the Retry-After (s) of the outage's answers (default: none)")
    p.add_argument("--retry-backoff-s", type=float, default=defaults.retry_backoff_s, help="the workers' backoff")
    p.add_argument("--publish-backoff-s", type=float, default=30.0, help="the Publisher's backoff after a failure")
    p.add_argument("--poll-s", type=float, default=10.0, help="the Publisher's poll of the outbox")
    p.add_argument("--skew-s", type=float, default=0.0, help="the last worker's clock runs this many seconds fast")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="give up this long after the outage ends")
    return p.parse_args(argv)


def mid_run(store: Store) -> bool:
    """Whether a job is RUNNING with at least one of its steps done (its harness reports ``k/N items``);
    exits if a job FAILED (nothing failed yet that an outage could explain)."""
    for job in store.jobs():
        if job.status == FAILED:
            sys.exit(f"{job.model} FAILED before the outage: {job.reason}\n{job.log_tail}")
        found = PROGRESS.match(job.progress or "") if job.status == "RUNNING" else None
        if found and int(found.group(1)) >= 2:
            return True
    return False


def wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            sys.exit(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fakehub, stand_in, workers_lib = from_tests("fakehub"), from_tests("stand_in"), from_tests("workers")
    work = args.work or Path(tempfile.mkdtemp(prefix="tcmqa-outage-"))
    work.mkdir(parents=True, exist_ok=True)
    url = args.store or f"sqlite:///{work / 'queue.sqlite'}"
    hub = fakehub.FakeHub(clock=time.time)  # wall time, like the store's (the database's) clock here
    hub.create_repo(REPO)
    (work / "stand_in.py").write_text(stand_in.STAND_IN)
    os.environ |= {
        "STAND_IN_STARTS": str(work / "starts.txt"),
        "STAND_IN_STEPS": str(STEPS),
        "STAND_IN_SLEEP": str(args.job_s / STEPS),
        "STAND_IN_HUB_DOWN": str(hub.down_flag),
        "TCMQA_HOSTED": "1",
        CHILD_ENV_VARIABLE: "STAND_IN_*",  # the harness's environment is an allow-list: let the stand-in's in
    }
    command = f"{{python}} {work / 'stand_in.py'} --model {{model}} --data {{data}} --out {{out}}"

    store = open_store(url)
    jobs = [store.submit(f"bench/model-{i}", f"{i:040x}", PROTOCOL, "bench") for i in range(args.jobs)]
    stop = threading.Event()
    publisher = Publisher(store, hub, REPO, requests_repo=REQUESTS, fail_base_s=args.publish_backoff_s)
    thread = threading.Thread(target=publisher.run_forever, args=(stop, args.poll_s), name="publisher", daemon=True)
    thread.start()
    flags = ("--retry-backoff-s", str(args.retry_backoff_s))
    workers = [
        workers_lib.worker_process(
            url, work / f"worker-{n}", command, *flags, skew_s=args.skew_s if n == args.workers - 1 else 0.0
        )
        for n in range(args.workers)
    ]
    failure: int | str = int(args.failure) if args.failure.isdigit() else args.failure
    try:
        wait(lambda: mid_run(store), 600, "a job to be mid-run")
        hub.go_down(failure, args.retry_after)
        print(f"the Hub is down ({failure}) for {args.minutes * 60:.0f} s", file=sys.stderr, flush=True)
        time.sleep(args.minutes * 60)
        hub.come_back()
        print("the Hub is back", file=sys.stderr, flush=True)

        def done() -> bool:
            ended = [store.get(j.id) for j in jobs]
            finished = [j for j in ended if j is not None and j.status == FINISHED]
            if any(j is None or j.status == FAILED for j in ended):
                return True
            return len(finished) == len(jobs) and all(results_commits(hub, j.id) for j in finished)

        wait(done, args.timeout_s, "every job finished and published")
    finally:
        workers_lib.stop_workers(workers)
        stop.set()
        thread.join(timeout=60)
    ok = report(store, hub, jobs, work, args)
    store.close()
    return 0 if ok else 1


def results_commits(hub: Any, job_id: str) -> list[Any]:
    """The commits that added the job's results file."""
    return [c for c in hub.commits_to(REPO) if f"results/{job_id}.parquet" in c.added]


def report(store: Store, hub: Any, jobs: list[Any], work: Path, args: argparse.Namespace) -> bool:
    """Print the table per job and the totals; whether the run held (finished, published once, no attempt)."""
    [(began, ended)] = hub.outages
    starts = [line.split()[0] for line in (work / "starts.txt").read_text().splitlines()]
    outage = f"Hub outage of {ended - began:.0f} s ({args.failure})"
    print(f"{outage} during a {len(jobs)}-job run of {args.job_s:g} s jobs, {args.workers} worker(s)")
    print("| job | status | attempts | retries | harness starts | publications | finished (s after outage) "
          "| published (s after outage) |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows, last_finished, last_published = [], ended, ended
    for job in jobs:
        done = store.get(job.id)
        assert done is not None
        commits = results_commits(hub, job.id)
        finished_at = done.status_at if done.status == FINISHED and done.status_at is not None else None
        published_at = commits[0].at if commits else None
        last_finished = max(last_finished, finished_at or ended)
        last_published = max(last_published, published_at or ended)
        rows.append((done, commits))
        print(
            f"| {job.model} | {done.status} | {done.attempts} | {done.retries} | {starts.count(job.model)} "
            f"| {len(commits)} | {_after(finished_at, ended)} | {_after(published_at, ended)} |"
        )
    finished = sum(done.status == FINISHED for done, _ in rows)
    once = sum(len(commits) == 1 for _, commits in rows)
    after = sum(len(commits) == 1 and commits[0].at > ended for _, commits in rows)
    extra = sum(max(0, done.attempts - 1) for done, _ in rows)
    retries = sum(done.retries for done, _ in rows)
    print(f"jobs FINISHED: {finished}/{len(jobs)}")
    print(f"published exactly once: {once}/{len(jobs)} ({after} after the outage)")
    print(f"extra attempts: {extra}")
    print(f"retries (transient, no attempt counted): {retries}")
    refused = ", ".join(f"{repo} {n}" for repo, n in sorted(hub.refused_commits.items())) or "none"
    print(f"commits refused during the outage: {refused}")
    print(
        f"after the outage: every job finished in {last_finished - ended:.0f} s, published in "
        f"{last_published - ended:.0f} s (worker backoff {args.retry_backoff_s:g} s, publisher backoff "
        f"{args.publish_backoff_s:g} s, publisher poll {args.poll_s:g} s, both doubling)"
    )
    return finished == once == after == len(jobs) and extra == 0


def _after(t: float | None, ended: float) -> str:
    """Seconds after the outage ended (negative: during or before it); '-' when it never happened."""
    return "-" if t is None else f"{t - ended:.0f}"


if __name__ == "__main__":
    sys.exit(main())
