"""``tcmqa eval --ray [ADDRESS] --shards N``: the N shards of a run as Ray tasks, merged into ``--out``.

Each shard is a ``tcmqa eval --shard I/N`` run (``tcmqa.harness.run`` in a Ray worker of its own, which
exits after it so that the engine's memory is freed) in ``OUT/shards/shard-I``; when every shard has
finished, ``tcmqa merge`` (``tcmqa.merge``) writes into ``OUT`` the folder an unsharded run would have
written. A task takes one GPU where the cluster has GPUs (``tensor_parallel_size`` x
``pipeline_parallel_size`` of them for a model split over several; none with
``distributed_executor_backend=ray``, whose own Ray workers take them), else one CPU.

Resuming: Ray reruns a shard whose worker or node died (``--ray-retries``), and the rerun continues the
shard's folder from its last written chunk. A run that stopped (its driver or head killed, retries spent)
continues with ``--resume``: shards whose folder holds a results row (written once every item is there)
are not run again, the others resume their folders. ``OUT/shards/plan.json`` records the run's flags
(``--resume`` refuses other ones) and ``OUT/shards/shard-I/ray.json`` every attempt at the shard: the
node, host and process it ran in, when, and the items it generated.

``OUT`` must be on storage that every node mounts at the same path (a shared file system on Slurm, a
ReadWriteMany volume on KubeRay); a task on a node that cannot see it fails, saying so.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tcmqa import harness
from tcmqa.outputs import MANIFEST, OUTPUTS_DIR, RESULTS_FILE

logger = logging.getLogger(__name__)

SHARDS_DIR = "shards"
PLAN = "plan.json"
ATTEMPTS = "ray.json"
LOCAL = "local"  # `--ray` alone: a Ray started for this run on this machine (Ray's own name for it)
# Flags that may change between a run and its --resume: where it runs, not what it computes.
UNPLANNED = frozenset({"ray", "ray_retries", "resume", "out"})
CONNECT_TIMEOUT_S = 10
INSTALL = "pip install 'tcmqa[ray]'"


def shard_dir(out: Path, index: int) -> Path:
    return out / SHARDS_DIR / f"shard-{index}"


def plan_of(config: harness.EvalConfig) -> dict[str, Any]:
    """The flags that make the run what it is (all but where it runs), as JSON values."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in UNPLANNED}
    return json.loads(json.dumps(values, default=str))


def finished(folder: Path) -> bool:
    """Whether a shard is done: ``harness.summarise`` writes its results row only once every item is there."""
    return (folder / RESULTS_FILE).is_file() and (folder / MANIFEST).is_file()


def import_ray() -> Any:
    try:
        import ray  # pyright: ignore[reportMissingImports]
    except ImportError as err:
        raise SystemExit(f"--ray needs Ray here and on every node of the cluster: {INSTALL}") from err
    return ray


def check_reachable(address: str) -> None:
    """Fail in seconds, naming the address, where ``ray.init`` would retry an unreachable head for minutes."""
    if address in (LOCAL, "auto"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"--ray takes host:port (or ray://host:port, auto, or nothing), got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise SystemExit(
            f"cannot reach the Ray cluster at {address} ({err}): start its head (`ray start --head --port {port}`) "
            "or give the address its head printed (`ray status` on the head shows it)"
        ) from err


def prepare(config: harness.EvalConfig, out: Path) -> harness.EvalConfig:
    """Check ``out`` before anything runs and return the config to run, its data revision fixed once for
    every shard: a new run needs ``out`` free; a --resume the flags of the run it continues, and its revision."""
    plan_file = out / SHARDS_DIR / PLAN
    if not plan_file.is_file():
        if config.resume and (out / SHARDS_DIR).exists():
            raise SystemExit(f"cannot resume: {out / SHARDS_DIR} has no {PLAN}; it is no `tcmqa eval --ray` run")
        if (out / MANIFEST).exists() or (out / SHARDS_DIR).exists():
            raise SystemExit(f"{out} already holds a run; choose another --out")
        return dataclasses.replace(
            config, data_revision=harness.resolve_data_revision(config.data, config.data_revision)
        )
    if not config.resume:
        raise SystemExit(f"{out} already holds a run; pass --resume to continue it or choose another --out")
    previous = json.loads(plan_file.read_text())
    if config.data_revision is None:  # the revision the run was fixed to, as `tcmqa eval --resume`
        config = dataclasses.replace(config, data_revision=previous.get("data_revision"))
    differ = {key: (previous.get(key), value) for key, value in plan_of(config).items() if previous.get(key) != value}
    if differ:
        detail = "; ".join(f"{key}: {old!r} there, {new!r} now" for key, (old, new) in differ.items())
        raise SystemExit(f"cannot resume: {out} holds a different run ({detail}). Use another --out.")
    return config


def connect(ray: Any, address: str) -> None:
    check_reachable(address)
    try:
        if address == LOCAL:
            ray.init(address=LOCAL, include_dashboard=False)
        else:
            ray.init(address=address)
    except ConnectionError as err:
        raise SystemExit(f"cannot connect to the Ray cluster at {address}: {err}") from err


def gpus_per_shard(config: harness.EvalConfig, cluster_gpus: float) -> int:
    """GPUs a shard's task asks Ray for: none on a cluster without, none when vLLM's own Ray workers take
    them (``distributed_executor_backend=ray``), else one per tensor- and pipeline-parallel rank."""
    args = config.engine_args
    if not cluster_gpus or args.get("distributed_executor_backend") == "ray":
        return 0
    return int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _record(folder: Path, attempt: dict[str, Any], replace_last: bool = False) -> None:
    path = folder / ATTEMPTS
    attempts = json.loads(path.read_text())["attempts"] if path.is_file() else []
    attempts = [*attempts[:-1], attempt] if replace_last else [*attempts, attempt]
    path.write_text(json.dumps({"attempts": attempts}, indent=1))


def run_shard(config: harness.EvalConfig, index: int, out: str) -> dict[str, Any]:
    """One shard, in a Ray worker: ``tcmqa eval --shard I/N`` into ``OUT/shards/shard-I``, resuming what an
    earlier attempt wrote there; its attempt is recorded in the folder's ``ray.json``."""
    import ray  # pyright: ignore[reportMissingImports]

    root = Path(out)
    if not (root / SHARDS_DIR / PLAN).is_file():
        raise RuntimeError(
            f"{root} is not visible on node {socket.gethostname()}: put --out on storage that every node mounts "
            "at the same path (a shared file system on Slurm, a ReadWriteMany volume on KubeRay)"
        )
    folder = shard_dir(root, index)
    folder.mkdir(parents=True, exist_ok=True)
    attempt = {
        "node_id": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _now(),
    }
    _record(folder, attempt)
    start = time.perf_counter()
    shard = dataclasses.replace(
        config, ray=None, shards=None, shard=f"{index}/{config.shards}", out=folder, resume=(folder / MANIFEST).exists()
    )
    try:
        report = harness.run(shard)
    except SystemExit as err:  # a refusal (no items in the shard, another run in its folder): the task's error
        raise RuntimeError(str(err)) from None
    attempt.update(finished=_now(), generated=report.generated, seconds=round(time.perf_counter() - start, 3))
    _record(folder, attempt, replace_last=True)
    return attempt


def merge_into(out: Path, folders: list[Path]) -> dict[str, Any]:
    """``tcmqa merge`` the shards into ``out``, first clearing what a merge that was stopped left there."""
    from tcmqa.merge import merge

    if not (out / RESULTS_FILE).exists():
        shutil.rmtree(out / OUTPUTS_DIR, ignore_errors=True)
        (out / MANIFEST).unlink(missing_ok=True)
    return merge(folders, out)


def run(config: harness.EvalConfig) -> harness.Report:
    """Run the shards of ``config`` (``--ray``, ``--shards``) as Ray tasks and merge them into its run folder."""
    assert config.ray is not None and config.shards is not None  # harness.check_ray_flags
    ray = import_ray()
    out = harness.run_dir(config).resolve()
    config = prepare(config, out)
    if config.resume and (out / RESULTS_FILE).is_file():
        logger.info("%s is merged already", out)
        return harness.Report(json.loads((out / RESULTS_FILE).read_text()), out, 0)
    folders = [shard_dir(out, index) for index in range(config.shards)]
    todo = [index for index, folder in enumerate(folders) if not finished(folder)]
    if config.resume:
        logger.info("%d of %d shards finished already; running %s", len(folders) - len(todo), len(folders), todo)
    watch = harness.Stopwatch()
    generated = 0
    if todo:
        connect(ray, config.ray)
        try:
            with watch("ray"):
                generated = _run_tasks(ray, config, out, todo)
        finally:
            ray.shutdown()
    with watch("merge"):
        results = merge_into(out, folders)
    return harness.Report(results, out, generated, dict(watch.seconds))


def _run_tasks(ray: Any, config: harness.EvalConfig, out: Path, todo: list[int]) -> int:
    """Submit the shards ``todo``, wait for all of them and return the items generated; a shard that failed
    (its retries spent) fails the run once the others are done, so that their work is kept for --resume."""
    (out / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
    (out / SHARDS_DIR / PLAN).write_text(json.dumps(plan_of(config), ensure_ascii=False, indent=1))
    gpus = gpus_per_shard(config, ray.cluster_resources().get("GPU", 0))
    task = ray.remote(max_calls=1)(run_shard).options(  # max_calls=1: a worker per shard, so its engine exits
        num_cpus=1, num_gpus=gpus, max_retries=config.ray_retries, retry_exceptions=False
    )
    logger.info("running shards %s of %d as Ray tasks (%d GPU each)", todo, config.shards, gpus)
    pending = {task.remote(config, index, str(out)): index for index in todo}
    generated, failed = 0, {}
    while pending:
        [ref], _ = ray.wait(list(pending), num_returns=1)
        index = pending.pop(ref)
        try:
            attempt = ray.get(ref)
        except ray.exceptions.RayError as err:
            failed[index] = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            logger.error("shard %d/%d failed: %s", index, config.shards, failed[index])
            continue
        generated += attempt["generated"]
        logger.info("shard %d/%d done on %s: %d items", index, config.shards, attempt["node_id"], attempt["generated"])
    if failed:
        detail = "\n".join(f"  shard {index}/{config.shards}: {reason}" for index, reason in sorted(failed.items()))
        raise SystemExit(
            f"{len(failed)} of {config.shards} shards failed:\n{detail}\n"
            f"the finished shards are kept in {out / SHARDS_DIR}: rerun with --resume to run only the others"
        )
    return generated
