"""``tcmqa worker``: claim queued evaluations, run the harness in a child process, record the outcome.

The worker is its own process (the Space's web process never loads an engine, and ``gr.Timer`` only
runs while a browser is connected). Several may run at once against one store. Each job's harness is a
child process in its own session, under a time limit, killed if this worker dies (PR_SET_PDEATHSIG);
a job whose worker died is re-queued by any other worker once its heartbeat is stale, and its next
attempt resumes the run folder the last one left (``tcmqa eval --resume``), so a crash costs at most a
chunk. The harness also runs the probes (``--probes``: rotations and the option-order test, in the same
engine load, resumed like the evaluation) unless ``--skip-probes``; the store records their parts beside
the outputs, and the publisher commits both with the results row. The store's parts are the record:
run folders are pruned to the newest ``keep_runs``. Model snapshots are not in them: each worker has one
Hub cache (``models_cache``), shared by attempts and jobs, so a retry never downloads the model again;
the least recently used models are evicted once it holds more than ``models_cache_bytes``. Store errors
are logged and retried, never fatal.

Failures are transient or permanent. Transient ones are not the submitter's fault and cost no attempt:
the job goes back to PENDING and waits a backoff (``retry_backoff_s``, doubling per retry up to an hour),
and the submission counts once against the rate limit however often it is retried. They are: the harness
exiting with ``EXIT_TRANSIENT`` (75, EX_TEMPFAIL: the harness saw the Hub or the network fail, see
:func:`tcmqa.runs.is_transient`), the harness stopped by SIGTERM, SIGINT or SIGHUP (a preempted machine),
and this worker being stopped by SIGTERM (it releases its job before it exits). Everything else is
permanent and the job is FAILED with the log's tail: a model that does not load, a chat-template error,
a results row that does not validate, a timeout. A worker that dies without a word (SIGKILL) cannot
release its job: another worker re-queues it once the heartbeat is stale, and that does count an attempt
(so a model that kills its worker cannot loop for ever).

Secrets stay with the worker: its children (``--gpus`` workers, the Space's local worker) get the store
URL in ``TCMQA_STORE``, never on a command line; help and logs show it without its password; the
harness gets :func:`child_env` (an allow-list, no credential); engine args that look like credentials
are refused (they are published).
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import dataclasses
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcmqa import flags, quick_anchors, variables
from tcmqa.engines import DTYPES, ENGINES
from tcmqa.fresh.backfill import queue_backfills
from tcmqa.fresh.hidden import pool_parts, write_pool
from tcmqa.fresh.scores import FRESH_COLUMNS
from tcmqa.outputs import MANIFEST as RUN_MANIFEST
from tcmqa.outputs import OUTPUTS_DIR, part_files, read_outputs_table
from tcmqa.quick_anchors import N_QUICK
from tcmqa.runs import EXIT_TRANSIENT
from tcmqa.schema import HUB_ID, RATERS_PER_ITEM, RESULTS
from tcmqa.store import BACKFILL, FAILED, FINISHED, QUICK, RUNNING, Job, Store, open_store

STORE_VARIABLE = "TCMQA_STORE"  # how a worker's children are given the store URL (it may hold a password)
READ_TOKEN_VARIABLE = "TCMQA_HF_READ_TOKEN"  # a read-only Hub token, given to the harness for gated models only
CHILD_ENV_VARIABLE = "TCMQA_CHILD_ENV"  # the operator's additions to the harness's environment: NAME,PREFIX*,...
# The harness's environment is an allow-list by name (it loads untrusted model files): what an evaluation on a GPU
# needs, and of the project's own only what the harness reads (tcmqa.variables), less anything whose name or value
# looks like a credential (flags.looks_secret) and the never-list below.
_CHILD_NAMES = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP", "TEMP"),
        *("LD_LIBRARY_PATH", "VIRTUAL_ENV", "XDG_CACHE_HOME", "CC", "CXX"),  # CUDA libraries; Triton's compiler
        *("HF_HOME", "HF_ENDPOINT", "TOKENIZERS_PARALLELISM"),
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"),  # a site's own CA
        *("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy"),
        *variables.harness_names(),
    }
)
_CHILD_PREFIXES = (
    *("LC_", "PYTHON", "HF_HUB_", "HF_DATASETS_", "HF_XET_", "TRANSFORMERS_"),
    *("CUDA_", "NVIDIA_", "NCCL_", "HIP_", "ROCR_", "ROCM_", "VLLM_", "TORCH", "PYTORCH_", "TRITON_"),
    *("OMP_", "KMP_", "MKL_", "OPENBLAS_"),
)
# never passed, whatever the lists (and TCMQA_CHILD_ENV) say: the store, the read token (given as HF_TOKEN to
# gated models only), the practitioners' pseudonym key, and credentials by another name
_CHILD_SECRETS = frozenset(
    {STORE_VARIABLE, READ_TOKEN_VARIABLE, "TCMQA_PSEUDONYM_KEY", "DATABASE_URL", "PGPASSWORD", "PGPASSFILE"}
)
PREEMPTED = {-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP}  # the harness stopped from outside: retry
DEFAULT_COMMAND = "{python} -m tcmqa eval --model {model} --data {data} --out {out}"
LOG_TAIL_CHARS = 4000
logger = logging.getLogger(__name__)


@dataclasses.dataclass
class WorkerConfig:
    """A worker: where its jobs come from and how it runs them; every field is a ``tcmqa worker`` flag."""

    store: str = dataclasses.field(
        default=".cache/space",
        metadata={
            "env": STORE_VARIABLE,
            "help": "the queue: a folder or sqlite:///path (embedded), or postgresql://user:pw@host/db (a worker pool)",
        },
    )
    data: str = dataclasses.field(
        default=HUB_ID, metadata={"env": "TCMQA_DATA", "help": "Hub id or built tree passed to the harness"}
    )
    runs: Path = dataclasses.field(
        default=Path(".cache/space-runs"), metadata={"env": "TCMQA_RUNS", "help": "where run folders and logs go"}
    )
    command: str = dataclasses.field(
        default=DEFAULT_COMMAND,
        metadata={
            "env": "TCMQA_WORKER_COMMAND",
            "help": "harness command template; placeholders {python} {model} {data} {out}; "
            "--revision, --name, --family, --engine, --dtype, --limit, --probes, --engine-arg are appended",
        },
    )
    engine: str | None = dataclasses.field(
        default=None,
        metadata={"env": "TCMQA_ENGINE", "choices": sorted(ENGINES), "help": "harness engine (default: the harness's)"},
    )
    dtype: str | None = dataclasses.field(
        default=None,
        metadata={
            "env": "TCMQA_DTYPE",
            "choices": DTYPES,
            "help": "harness dtype (float32 on CPUs without native bf16, where bf16 is emulated and slow)",
        },
    )
    limit: int | None = dataclasses.field(
        default=None, metadata={"help": "evaluate only the first N items (smoke runs)", "metavar": "N"}
    )
    engine_args: dict[str, Any] = dataclasses.field(
        default_factory=dict,
        metadata={
            "flag": "--engine-arg",
            "help": "an engine option passed to every harness run as --engine-arg KEY=VALUE (repeatable; VALUE read "
            "as JSON where it parses), e.g. tensor_parallel_size=2",
        },
    )
    skip_probes: bool = dataclasses.field(
        default=False,
        metadata={"help": "evaluate only: no --probes (rotations, option-order test) after the evaluation"},
    )
    quick_anchors: int = dataclasses.field(
        default=N_QUICK,
        metadata={"help": "anchor items a quick job evaluates (tcmqa.quick_anchors; docs/benchmarks.md: its error)"},
    )
    timeout_s: float = dataclasses.field(
        default=4 * 3600, metadata={"help": "seconds a harness run (the probes included) may take"}
    )
    heartbeat_s: float = dataclasses.field(default=10.0, metadata={"help": "seconds between heartbeats"})
    stale_after_s: float = dataclasses.field(
        default=120.0, metadata={"help": "re-queue RUNNING jobs silent this many seconds"}
    )
    max_attempts: int = dataclasses.field(default=3, metadata={"help": "attempts before a job is FAILED"})
    retry_backoff_s: float = dataclasses.field(
        default=60.0,
        metadata={"help": "seconds a job waits after a transient failure (the Hub down); doubles per retry, to 1 h"},
    )
    poll_s: float = dataclasses.field(default=2.0, metadata={"help": "seconds between polls of an empty queue"})
    keep_runs: int = dataclasses.field(
        default=3, metadata={"help": "run folders (with their model snapshots) kept after their job ends"}
    )
    models_cache: Path = dataclasses.field(
        default=Path(".cache/space-models"),
        metadata={"env": "TCMQA_MODELS_CACHE", "help": "the Hub cache of model snapshots, shared by every job"},
    )
    models_cache_bytes: int = dataclasses.field(
        default=200 * 2**30,
        metadata={"help": "bytes of snapshots the models cache keeps; least recently used models are evicted"},
    )
    gpus: str | None = dataclasses.field(
        default=None,
        metadata={"help": "comma-separated GPU ids: one worker process per GPU, pinned with CUDA_VISIBLE_DEVICES"},
    )
    raters: int = dataclasses.field(
        default=RATERS_PER_ITEM,
        metadata={"env": "TCMQA_RATERS", "help": "blind answers per fresh item in the practitioners' reference (N)"},
    )
    once: bool = dataclasses.field(default=False, metadata={"help": "exit when the queue is empty"})
    name: str | None = dataclasses.field(
        default=None, metadata={"help": "worker name in claims (default host-pid-random)"}
    )
    hosted: bool = dataclasses.field(
        default_factory=lambda: hosted_by_environment(os.environ),
        metadata={
            "help": "a leaderboard's worker, whose rows are published: refuses --limit and local-folder jobs "
            "(default: on in a Space, SPACE_ID, or with TCMQA_HOSTED=1)"
        },
    )

    def __post_init__(self) -> None:
        self.runs = Path(self.runs).expanduser()
        self.models_cache = Path(self.models_cache).expanduser()
        if self.quick_anchors < 1:
            raise ValueError(f"--quick-anchors is a number of items, at least 1, not {self.quick_anchors}")
        if self.hosted and self.limit:
            raise ValueError(
                "--limit on a hosted worker would publish a partial row as the model's result; run smoke tests "
                "on a worker of your own (--no-hosted, or unset SPACE_ID and TCMQA_HOSTED)"
            )
        flags.refuse_credentials(self.engine_args)


def hosted_by_environment(environ: Mapping[str, str]) -> bool:
    """Whether this worker serves a hosted leaderboard: inside a Space, or told so by ``TCMQA_HOSTED``."""
    return bool(environ.get("SPACE_ID")) or environ.get("TCMQA_HOSTED", "").lower() not in ("", "0", "false", "no")


def run_folder(runs: Path, job: Job) -> Path:
    """A job's run folder, keyed by what it evaluates (model, revision, protocol) rather than by job id, so a
    resubmission of a model whose run failed (a timeout after hours) resumes that run instead of starting over.
    A quick job's is its own (a full run never resumes from the anchors)."""
    quick = "\nquick" if job.kind == QUICK else ""
    key = hashlib.sha256(f"{job.model}\n{job.revision}\n{job.protocol}{quick}".encode()).hexdigest()[:12]
    return runs / f"{re.sub(r'[^A-Za-z0-9._-]+', '--', job.model)[-80:]}-{key}"


def harness_command(
    cfg: WorkerConfig, job: Job, out: Path, pool: Path | None = None, items: Path | None = None
) -> list[str]:
    """The child's argv: the command template with this job's values, then the job's flags.

    A Hub model is pinned with ``--revision``; a local folder (local mode) has no commits, so its
    fingerprint stays in the store and the folder path is passed as the model. ``pool``: the hidden pool's
    file in the run folder (:func:`hand_pool`). A back-fill evaluates only the pool, with the engine, dtype
    and engine args its row recorded (``settings`` in its meta), no probes and no limit. A quick job evaluates
    only ``items`` (its anchors' ids, :func:`hand_anchors`): no pool, no probes, no limit.
    """
    path = job.meta.get("path")
    backfill = job.kind == BACKFILL
    partial = backfill or job.kind == QUICK  # no probes, no limit
    settings = job.meta.get("settings") or {}
    values = {"python": sys.executable, "model": path or job.model, "data": cfg.data, "out": str(out)}
    argv = [token.format(**values) for token in shlex.split(cfg.command)]
    if not path:
        argv += ["--revision", job.revision]
    argv += ["--name", job.model]
    if job.meta.get("family"):
        argv += ["--family", job.meta["family"]]
    if settings.get("engine") or cfg.engine:
        argv += ["--engine", settings.get("engine") or cfg.engine]
    if settings.get("dtype") or cfg.dtype:
        argv += ["--dtype", settings.get("dtype") or cfg.dtype]
    if cfg.limit and not partial:
        argv += ["--limit", str(cfg.limit)]
    if items is not None:
        argv += ["--items", str(items)]
    if pool is not None:
        argv += ["--pool", str(pool)] + (["--pool-only"] if backfill else [])
    if job.meta.get("released"):
        argv += ["--released", job.meta["released"]]
    if not cfg.skip_probes and not partial:
        argv.append("--probes")
    for key, value in settings.get("engine_args", cfg.engine_args).items():
        argv += ["--engine-arg", flags.format_key_value(key, value)]
    return argv


def hand_pool(store: Store, run_dir: Path, raters: int) -> Path | None:
    """Write the store's accepted pool into ``run_dir``'s hidden part for the harness, with the practitioners'
    reference of ``raters`` blind answers per item; None when it is empty.

    The harness reads the pool from here, never from the Hub; of ``hidden/``, only the pool's output parts are
    recorded, apart from the public ones, and published once their items retire (``tcmqa.fresh.hidden``).
    """
    items = store.accepted_fresh_items()
    if not items:
        return None
    return write_pool(run_dir, store.fresh_pool_version(), items, store.fresh_reference(raters))


def hand_anchors(store: Store, cfg: WorkerConfig, job: Job, run_dir: Path) -> tuple[quick_anchors.AnchorSet, Path]:
    """A quick job's anchor set (the board's as it stands, :func:`tcmqa.quick_anchors.anchor_set`) and the file of
    its item ids the harness evaluates (``--items``) in ``run_dir``."""
    from tcmqa.harness import EvalConfig, data_facts, select_items

    config = EvalConfig(model="-", data=cfg.data)
    _, _, scorable = select_items(config)
    fingerprint = data_facts(config, scorable)["data_fingerprint"]
    item_ids = [item["id"] for item in scorable]
    anchors = quick_anchors.anchor_set(
        store, item_ids, fingerprint, job.protocol, min(cfg.quick_anchors, len(item_ids))
    )
    path = run_dir / "anchors.txt"
    path.write_text("\n".join(anchors.item_ids) + "\n", encoding="utf-8")
    return anchors, path


def quick_estimate(run_dir: Path, row: dict[str, Any], anchors: quick_anchors.AnchorSet) -> dict[str, Any]:
    """The estimate a finished quick run records (:func:`tcmqa.quick_anchors.estimate`), with what the board shows of
    the model beside it."""
    table = read_outputs_table(run_dir, columns=["item_id", "correct"]).to_pydict()
    correct = {item: bool(c) for item, c in zip(table["item_id"], table["correct"], strict=True)}
    facts = {k: row.get(k) for k in ("family", "params_b", "engine", "engine_version", "dtype", "date", "revision")}
    return {**quick_anchors.estimate(anchors, correct), **facts}


def restore_public_parts(store: Store, job_id: str, run_dir: Path) -> None:
    """Put the finished job's recorded public output parts into ``run_dir`` (a back-fill's Public − Fresh and gap
    are computed against them): the store is the record, whatever an earlier run left in the folder."""
    outputs = run_dir / OUTPUTS_DIR
    shutil.rmtree(outputs, ignore_errors=True)
    outputs.mkdir(parents=True)
    for part in store.outputs_files(job_id):
        shutil.copyfile(part, outputs / part.name)


def die_with_parent() -> None:
    """In a child (``preexec_fn``): get SIGKILL when its parent dies, so a killed parent leaves no orphan."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class LocalWorker:
    """The local Space's worker: a ``tcmqa worker`` process beside the app, restarted if it dies.

    A killed worker leaves its job RUNNING; the restarted worker re-queues it once its heartbeat is
    stale and resumes it, so nobody has to touch the app. Restarts back off (1 s doubling to a minute)
    and the backoff resets once a worker has lived a minute.
    """

    def __init__(self, store: str, data: str, extra_args: list[str] | None = None) -> None:
        self.argv = [sys.executable, "-m", "tcmqa", "worker", "--data", data, *(extra_args or [])]
        self.env = {**os.environ, STORE_VARIABLE: store}  # never on the command line, where ps shows it
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name="tcmqa-local-worker", daemon=True)

    def start(self) -> LocalWorker:
        self._thread.start()
        atexit.register(self.stop)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def _supervise(self) -> None:
        delay = 1.0
        while not self._stop.is_set():
            started = time.monotonic()
            self.process = subprocess.Popen(self.argv, env=self.env, preexec_fn=die_with_parent)
            code = self.process.wait()
            if self._stop.is_set():
                return
            if time.monotonic() - started > 60:
                delay = 1.0
            self.restarts += 1
            logger.warning("the local worker exited with %s; restart %d in %.0f s", code, self.restarts, delay)
            self._stop.wait(delay)
            delay = min(delay * 2, 60.0)


def child_env(job: Job, hub_cache: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The harness's environment: only what an evaluation needs of the worker's (``environ``, default
    ``os.environ``), since the harness loads untrusted model files.

    Passed: the names and prefixes of ``_CHILD_NAMES``/``_CHILD_PREFIXES`` (locale, paths, the Hub's and the
    engines' settings, the GPU's, the ``TCMQA_`` variables the harness reads) and those the operator lists in
    ``TCMQA_CHILD_ENV`` (``NAME`` or ``PREFIX*``), each unless its name or value looks like a credential
    (:func:`tcmqa.flags.looks_secret`: ``HF_HUB_ACCESSTOKEN``, ``TCMQA_DBPASSWORD``, an ``HF_ENDPOINT`` with
    ``?password=``). Never: the store URL, ``HF_TOKEN`` (the Space's is write-scoped; nor the token file under
    ``HF_HOME``), the pseudonym key. A gated model gets the read-only ``TCMQA_HF_READ_TOKEN`` as its ``HF_TOKEN``.
    """
    environ = os.environ if environ is None else environ
    extra = [p.strip() for p in environ.get(CHILD_ENV_VARIABLE, "").split(",") if p.strip()]
    names = _CHILD_NAMES | {p for p in extra if not p.endswith("*")}
    prefixes = _CHILD_PREFIXES + tuple(p[:-1] for p in extra if p.endswith("*") and len(p) > 1)
    env = {
        k: v
        for k, v in environ.items()
        if (k in names or k.startswith(prefixes)) and k not in _CHILD_SECRETS and not flags.looks_secret(k, v)
    }
    left_out = sorted(set(environ) - set(env))
    logger.debug("the harness's environment leaves out %s", ", ".join(left_out))
    env |= {"HF_HUB_CACHE": str(hub_cache), "HF_TOKEN_PATH": str(hub_cache / "no-token")}
    read_token = environ.get(READ_TOKEN_VARIABLE)
    if job.meta.get("gated") and read_token:
        env["HF_TOKEN"] = read_token
    return env


def _tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - chars))
        return flags.redact(f.read().decode("utf-8", "replace"))  # the tail is shown in the Queue tab


def _progress(log: Path) -> str:
    """The harness's last progress line (tqdm rewrites with \\r): what the Queue tab shows. The probes'
    bars ("rotations", "order test") follow the evaluation's, so a probing job shows which pass it is in."""
    lines = [line.strip() for line in _tail(log, 2000).replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1][:160] if lines else "starting"


def _results_row(run_dir: Path, job: Job) -> dict[str, Any]:
    """The harness's results row, marked as evaluated here; it must be of the revision the job pinned."""
    row = json.loads((run_dir / "results.json").read_text())
    if isinstance(row, list):
        row = row[0]
    if set(row) != set(RESULTS):
        raise ValueError(f"its columns differ from the results schema: {sorted(set(row) ^ set(RESULTS))}")
    pa.Table.from_pylist([row], schema=RESULTS.arrow_schema)  # every value has its column's type
    # the row is published: engine args with a credential in them (a harness of the operator's own, a model's
    # code that rewrote the file) fail the job, by the rule that refused them on the way in
    flags.refuse_credentials({"engine_args": _json_or_text(row.get("engine_args"))})
    if row.get("revision") != job.revision:
        raise ValueError(
            f"the harness evaluated revision {row.get('revision')}, but the submission pinned "
            f"{job.revision}: the model changed after it was submitted; resubmit it"
        )
    return {**row, "model": job.model, "origin": "evaluated", "protocol": job.protocol}


def _json_or_text(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return text


def run_job(store: Store, job: Job, cfg: WorkerConfig) -> str:
    """Run one claimed job to FINISHED, FAILED or (claim lost) abandoned; return which."""
    if cfg.hosted and job.meta.get("path"):
        reason = "a hosted leaderboard does not evaluate local folders: upload the model to the Hub and submit its id"
        store.fail(job, reason)
        return "FAILED"
    run_dir = run_folder(cfg.runs, job)  # every attempt (and resubmission) shares it, so a later one resumes
    if job.kind == QUICK:  # a few hundred items, on anchors that may have changed since: never resumed
        shutil.rmtree(run_dir, ignore_errors=True)
    resume = (run_dir / RUN_MANIFEST).exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "harness.log"
    anchors, items = None, None
    if job.kind == QUICK:
        try:
            anchors, items = hand_anchors(store, cfg, job, run_dir)
        except (Exception, SystemExit) as err:  # the served data unreadable, a fit that failed: the job says why
            store.fail(job, f"the quick job's anchor items could not be chosen: {err}")
            return "FAILED"
    pool = None if job.kind == QUICK else hand_pool(store, run_dir, cfg.raters)
    if job.kind == BACKFILL:
        if pool is None:
            store.fail(job, "nothing to back-fill: the hidden pool holds no accepted item now")
            return "FAILED"
        restore_public_parts(store, job.meta["of"], run_dir)
    argv = harness_command(cfg, job, run_dir, pool, items) + (["--resume"] if resume else [])
    if not job.meta.get("path"):  # most recently used: evicted last
        hub_cache_folder(cfg.models_cache, job.model).mkdir(parents=True, exist_ok=True)
        os.utime(hub_cache_folder(cfg.models_cache, job.model))
    env = child_env(job, cfg.models_cache)
    with log.open("ab") as out:
        out.write(f"--- attempt {job.attempts}\n$ {shlex.join(argv)}\n".encode())
        out.flush()
        child = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    try:
        ended = _watch(store, job, cfg, child, log)
    except Stopped as stop:
        _kill(child)
        _release(store, job, str(stop), backoff_s=0.0)
        raise
    if ended:
        return ended
    if child.returncode == EXIT_TRANSIENT or child.returncode in PREEMPTED:
        reason = f"the harness exited with code {child.returncode} (transient)"
        return _release(store, job, reason, _backoff(cfg, job))
    if child.returncode != 0:
        store.fail(job, f"the harness exited with code {child.returncode}", _tail(log))
        return "FAILED"
    try:
        row = _results_row(run_dir, job)
    except (OSError, ValueError, IndexError, TypeError, pa.ArrowException) as err:
        store.fail(job, f"the harness wrote no valid results.json ({err})", _tail(log))
        return "FAILED"
    if job.kind == QUICK:  # an estimate, never a results row
        try:
            estimate = quick_estimate(run_dir, row, anchors)
        except (OSError, ValueError, pa.ArrowException) as err:
            store.fail(job, f"the quick run did not answer its anchors ({err})", _tail(log))
            return "FAILED"
        finished = store.finish_quick(job, estimate)
    elif job.kind == BACKFILL:  # the pool's columns go into the row it back-fills
        finished = store.finish_backfill(job, {name: row[name] for name in FRESH_COLUMNS}, pool_parts(run_dir, pool))
    else:
        finished = store.finish(job, row, part_files(run_dir), probe_parts(run_dir), pool_parts(run_dir, pool))
    return "FINISHED" if finished else "ABANDONED"


def _watch(store: Store, job: Job, cfg: WorkerConfig, child: subprocess.Popen, log: Path) -> str | None:
    """Heartbeat while the harness runs; the outcome if the job ended here (timed out, claim lost), else None."""
    started = last_beat = time.monotonic()
    while child.poll() is None:
        time.sleep(min(1.0, cfg.heartbeat_s))
        now = time.monotonic()
        if now - started > cfg.timeout_s:
            _kill(child)
            store.fail(job, f"timed out after {cfg.timeout_s:.0f} s", _tail(log))
            return "FAILED"
        if now - last_beat >= cfg.heartbeat_s:
            last_beat = now
            try:
                owned = store.heartbeat(job, _progress(log))
            except Exception:
                logger.exception("heartbeat for %s failed; retrying at the next beat", job.id)
                continue
            if not owned:
                _kill(child)
                return "ABANDONED"
    return None


def _kill(child: subprocess.Popen) -> None:
    """Kill the harness and everything it started (its own session)."""
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()


class Stopped(BaseException):
    """This worker was asked to stop (SIGTERM: a preempted machine, a restart); it hands its job back first.

    A BaseException, so the store-error retry loop of :func:`work` does not swallow it.
    """


def _stop_on_sigterm() -> None:
    def stop(signum: int, _frame: Any) -> None:
        raise Stopped(f"the worker was stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)


def _backoff(cfg: WorkerConfig, job: Job) -> float:
    """Seconds a transiently failed job waits: ``retry_backoff_s`` doubling per retry, at most an hour."""
    return min(3600.0, cfg.retry_backoff_s * 2**job.retries)


def _release(store: Store, job: Job, reason: str, backoff_s: float) -> str:
    """Hand a job that failed for a passing cause back to the queue; no attempt counted."""
    logger.warning("%s: %s; back to PENDING, retried in %.0f s", job.id, reason, backoff_s)
    return "PENDING" if store.release(job, reason, backoff_s) else "ABANDONED"


def probe_parts(run_dir: Path) -> list[Path]:
    """The probes parts the harness wrote (``--probes``); none when it did not probe."""
    from tcmqa.probes.run import PROBES_DIR  # imported once a job has run: it pulls in scipy and the engines

    return sorted((run_dir / PROBES_DIR).glob("*.parquet"))


def prune_runs(store: Store, runs: Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` run folders of jobs that have ended; returns what was removed.

    Several workers may share ``runs`` (``--gpus``): a RUNNING or PENDING job's folder is never touched,
    since its next attempt resumes from it.
    """
    jobs = store.jobs()
    live = {run_folder(runs, job) for job in jobs if job.status not in (FINISHED, FAILED)}
    # newest by when the job ended (the database's clock: fine-grained, one for every worker), else the folder's
    # mtime (coarse: jobs ending within a few milliseconds tie on it)
    ended_at = {run_folder(runs, job): job.updated_at or 0.0 for job in jobs if job.status in (FINISHED, FAILED)}
    ended = [p for p in runs.iterdir() if p.is_dir() and p not in live]
    folders = sorted(ended, key=lambda p: ended_at.get(p) or p.stat().st_mtime)
    removed = folders[: max(0, len(folders) - keep)]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed


def hub_cache_folder(cache: Path, model: str) -> Path:
    """Where the Hub library keeps ``model``'s snapshots in ``cache`` (``models--org--name``)."""
    return cache / ("models--" + model.replace("/", "--"))


def evict_models(cache: Path, limit_bytes: int, in_use: Collection[str] = ()) -> list[Path]:
    """Remove the least recently used models until ``cache`` holds at most ``limit_bytes``; returns them.

    A model that a RUNNING job uses (``in_use``, on any worker sharing the cache) is never removed.
    """
    folders = sorted((p for p in cache.glob("models--*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    sizes = {folder: _disk_bytes(folder) for folder in folders}
    total, keep = sum(sizes.values()), {hub_cache_folder(cache, model) for model in in_use}
    removed = []
    for folder in folders:
        if total <= limit_bytes:
            break
        if folder not in keep:
            shutil.rmtree(folder, ignore_errors=True)
            total -= sizes[folder]
            removed.append(folder)
    if removed:
        logger.info("evicted %d model(s) from %s to stay under %d bytes", len(removed), cache, limit_bytes)
    return removed


def _disk_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder``; symbolic links (the snapshots' links to blobs) count nothing."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def work(store: Store, cfg: WorkerConfig, name: str, once: bool = False) -> int:
    """Poll, requeue stale jobs, claim and run; with ``once``, stop when no job is PENDING (backoffs included).

    An error talking to the store is logged and retried with backoff (up to a minute): a database
    restart or a network blip must not leave the queue without its worker.
    """
    done, failures = 0, 0
    while True:
        try:
            for job in store.requeue_stale(cfg.stale_after_s, cfg.max_attempts):
                logger.warning("[%s] %s %s: %s", name, job.id, job.status, job.reason or job.progress)
            queue_backfills(store)  # the pool changed: every comparable row gets a back-fill, below submissions
            job = store.claim(name)
            if job is None:
                if once and not store.waiting():
                    return done
                time.sleep(cfg.poll_s)
                continue
            logger.info("[%s] running %s %s@%s (attempt %d)", name, job.id, job.model, job.revision[:12], job.attempts)
            logger.info("[%s] %s %s", name, job.id, run_job(store, job, cfg))
            prune_runs(store, cfg.runs, cfg.keep_runs)
            running = [j.model for j in store.jobs() if j.status == RUNNING]
            evict_models(cfg.models_cache, cfg.models_cache_bytes, running)
            done, failures = done + 1, 0
        except Exception:
            failures += 1
            delay = min(60.0, cfg.poll_s * 2**failures)
            logger.exception("[%s] store error (%d in a row); retrying in %.0f s", name, failures, delay)
            time.sleep(delay)


def run_per_gpu(cfg: WorkerConfig) -> int:
    """One worker process per GPU id in ``cfg.gpus``, each seeing only its GPU; returns the first failure."""
    children = []
    for gpu in [g.strip() for g in (cfg.gpus or "").split(",") if g.strip()]:
        one = dataclasses.replace(cfg, gpus=None, name=f"{cfg.name or socket.gethostname()}-gpu{gpu}")
        argv = [sys.executable, "-m", "tcmqa", "worker", *flags.to_argv(one, skip=("store",))]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, STORE_VARIABLE: cfg.store}
        children.append(subprocess.Popen(argv, env=env, preexec_fn=die_with_parent))
    return next((code for code in (child.wait() for child in children) if code), 0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_flags(parser, WorkerConfig)


def main(args: argparse.Namespace) -> int:
    cfg = flags.from_args(WorkerConfig, args)
    if cfg.gpus:
        return run_per_gpu(cfg)
    name = cfg.name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
    _stop_on_sigterm()
    logger.info("[%s] worker on %s, data %s", name, flags.redact(cfg.store), cfg.data)
    try:
        work(open_store(cfg.store), cfg, name, once=cfg.once)
    except Stopped as stop:
        logger.warning("[%s] %s", name, stop)
    return 0
