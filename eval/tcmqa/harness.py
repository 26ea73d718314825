"""``tcmqa eval``: evaluate a model under the frozen protocol (``tcmqa.prompts``) in a single pass.

Writes ``OUT/outputs/part-*.parquet`` (the ``outputs`` config), ``OUT/results.json`` (one ``results``
row) and ``OUT/run.json`` (what was run, so that ``--resume`` continues only the same run), then
prints the leaderboard row. Items are written in chunks, one output part each (by default 2048 items
on a GPU, 256 on a CPU); a crashed run resumes from its last written chunk, with the chunk size it
started with. The engine is fed across chunk boundaries (``Engine.generate_chunks``), so the chunk size
sets how much a crash can lose, not the batch the engine computes.

``--shard I/N`` evaluates the items whose id hashes to I modulo N (:func:`shard_of`: stable when the
corpus grows by appending), each shard in its own run folder; ``tcmqa merge`` (``tcmqa.merge``) joins
the N folders into the folder an unsharded run would have written. ``--ray [ADDRESS] --shards N`` runs
the N shards as Ray tasks and merges them (``tcmqa.ray_shards``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import inspect
import json
import logging
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from tcmqa import flags, progress, prompts
from tcmqa import outputs as outputs_mod
from tcmqa.engines import DTYPES, ENGINES, Engine, check_options, load_engine
from tcmqa.engines.base import Prompt
from tcmqa.fresh.hidden import HiddenPool, hidden_log, read_pool
from tcmqa.fresh.scores import release_date
from tcmqa.models import count_parameters
from tcmqa.outputs import MANIFEST
from tcmqa.probes.run import ProbeConfig, format_probes, run_probes
from tcmqa.results import results_row
from tcmqa.runs import EXIT_TRANSIENT, chunked, data_fingerprint, is_transient
from tcmqa.schema import HUB_ID, RESULT_COLUMNS

logger = logging.getLogger(__name__)

STAGES = ("load", "render", "generate", "score", "write")


@dataclass
class EvalConfig:
    """One evaluation under the frozen protocol; every field is the ``tcmqa eval`` flag of the same name.

    The library API is ``run(EvalConfig(model=..., data=...))``; the CLI and the worker build this too.
    """

    model: str = field(metadata={"help": "Hub model id or a local model folder"})
    data: str = field(default=HUB_ID, metadata={"help": "Hub dataset id or a tree written by `tcmqa build`"})
    engine: str = field(default="vllm", metadata={"help": "inference engine", "choices": sorted(ENGINES)})
    revision: str | None = field(default=None, metadata={"help": "model revision on the Hub (branch, tag or commit)"})
    data_revision: str | None = field(default=None, metadata={"help": "dataset revision on the Hub"})
    dtype: str = field(
        default="bfloat16",
        metadata={
            "help": "weights dtype; float32 on CPUs without native bf16, where bf16 is emulated and slow",
            "choices": DTYPES,
        },
    )
    limit: int | None = field(default=None, metadata={"help": "evaluate only the first N items", "metavar": "N"})
    subset_only: bool = field(default=False, metadata={"help": "only the practitioners' comparison subset"})
    items: Path | None = field(
        default=None,
        metadata={
            "help": "evaluate only the items FILE lists (ids, one a line): a quick job's anchors (tcmqa.quick_anchors)",
            "metavar": "FILE",
        },
    )
    out: Path | None = field(
        default=None,
        metadata={
            "help": "run folder (default: runs/<model name>): new or empty; one holding a run is refused "
            "unless --resume"
        },
    )
    resume: bool = field(default=False, metadata={"help": "continue an interrupted run in --out"})
    dry_run: bool = field(default=False, metadata={"help": "print three rendered prompts and stop"})
    chat_template: Path | None = field(
        default=None, metadata={"help": "Jinja chat template for models without one", "metavar": "FILE"}
    )
    chunk_size: int | None = field(
        default=None,
        metadata={
            "help": "items per engine call and per output part (default: 2048 on a GPU, 256 on a CPU; "
            "--resume keeps the run's own)",
            "metavar": "N",
        },
    )
    batch_size: int = field(default=32, metadata={"help": "transformers engine: sequences per forward pass"})
    enforce_eager: bool = field(default=False, metadata={"help": "vLLM: skip graph compilation (faster start)"})
    engine_args: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "flag": "--engine-arg",
            "help": "an engine option, repeatable; VALUE is read as JSON where it parses. vLLM: any field of "
            "EngineArgs or parameter of vllm.LLM (tensor_parallel_size=2, data_parallel_size=4, max_model_len=4096, "
            "gpu_memory_utilization=0.9, quantization=fp8); transformers: batch_size, device, attn_implementation, "
            "device_map, low_cpu_mem_usage, max_memory, offload_folder, offload_state_dict, use_safetensors",
        },
    )
    shard: str | None = field(
        default=None,
        metadata={
            "help": "evaluate shard I of N (0 <= I < N) of the items, by item id; join with `tcmqa merge`",
            "metavar": "I/N",
        },
    )
    ray: str | None = field(
        default=None,
        metadata={
            "help": "run the --shards as Ray tasks on the cluster at ADDRESS (its head's host:port, ray://host:10001, "
            "auto: the one `ray start` began on this machine), or on a local Ray without ADDRESS, and merge them into "
            "--out; --resume skips the shards that finished (tcmqa.ray_shards; pip install 'tcmqa[ray]')",
            "metavar": "ADDRESS",
            "const": "local",
        },
    )
    shards: int | None = field(
        default=None,
        metadata={"help": "with --ray: how many shards, one Ray task each (one GPU each where there are GPUs)"},
    )
    ray_retries: int = field(
        default=2,
        metadata={"help": "with --ray: times Ray reruns a shard whose worker or node died (it resumes the shard)"},
    )
    probes: bool = field(
        default=False,
        metadata={
            "help": "then run the probes (rotations, option-order test; `tcmqa probe` with its defaults) in the "
            "same engine load"
        },
    )
    pool: Path | None = field(
        default=None,
        metadata={
            "help": "the hidden pool (hidden/pool.json, written by the worker from its store): evaluated after the "
            "public items in the same engine load, its outputs under OUT/hidden (never recorded as parts, never "
            "published); fills the fresh columns",
            "metavar": "FILE",
        },
    )
    pool_only: bool = field(
        default=False,
        metadata={
            "help": "a back-fill: evaluate only --pool; OUT/outputs already holds the model's recorded public outputs"
        },
    )
    released: str | None = field(
        default=None,
        metadata={"help": "the model's release date (YYYY-MM-DD): 'Fresh after release' counts pool items after it"},
    )
    name: str | None = field(
        default=None, metadata={"help": "model name in the rows (default: the Hub id, or a local folder's name)"}
    )
    family: str | None = field(default=None, metadata={"help": "model family shown on the leaderboard, e.g. Qwen2"})

    def __post_init__(self) -> None:
        self.model = str(self.model)
        self.data = str(self.data)
        self.out = None if self.out is None else Path(self.out)
        self.chat_template = None if self.chat_template is None else Path(self.chat_template)
        self.pool = None if self.pool is None else Path(self.pool)
        self.items = None if self.items is None else Path(self.items)
        self.released = release_date(self.released)
        if self.pool_only and self.pool is None:
            raise ValueError("--pool-only evaluates the hidden pool: give it with --pool FILE")
        if self.pool is not None and self.shard is not None:
            raise ValueError("--pool evaluates the whole pool in one run; `tcmqa merge` joins no pool: drop --shard")
        self.engine_args = dict(self.engine_args or {})
        flags.refuse_credentials(self.engine_args)  # the results row publishes every engine arg
        if self.shard is not None:
            parse_shard(self.shard)
        check_ray_flags(self)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EvalConfig:
        return flags.from_args(cls, args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_flags(parser, EvalConfig)


@dataclass
class Report:
    """What a run produced: the results row, seconds per stage and how many items were generated now."""

    results: dict[str, Any]
    out: Path
    generated: int
    timings: dict[str, float] = field(default_factory=dict)


class Stopwatch:
    """Accumulates wall-clock seconds per stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - start

    @contextlib.contextmanager
    def excluding(self, stage: str, inner: tuple[str, ...]) -> Iterator[None]:
        """Time ``stage`` less the ``inner`` stages timed within it (they interleave with it)."""
        before = sum(self.seconds[name] for name in inner)
        with self(stage):
            yield
        self.seconds[stage] -= sum(self.seconds[name] for name in inner) - before


def check_ray_flags(config: EvalConfig) -> None:
    """Refuse --ray/--shards combinations that cannot run, before anything is read or written."""
    if config.shards is not None and config.ray is None:
        raise ValueError("--shards N runs the shards as Ray tasks: add --ray [ADDRESS], or run each with --shard I/N")
    if config.ray is None:
        return
    if config.shards is None or config.shards < 1:
        raise ValueError(f"--ray needs --shards N with N >= 1, got {config.shards}")
    if config.shard is not None:
        raise ValueError("--ray runs every shard of --shards N itself: drop --shard")
    if config.pool is not None:
        raise ValueError("--pool evaluates the whole pool in one run; `tcmqa merge` joins no pool: drop --ray")
    if config.ray_retries < 0:
        raise ValueError(f"--ray-retries takes a count >= 0, got {config.ray_retries}")


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N``.

    >>> parse_shard("2/3")
    (2, 3)
    """
    index, sep, count = str(text).partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or not 0 <= i < n:
        raise ValueError(f"--shard takes I/N with 0 <= I < N (e.g. 0/4), got {text!r}")
    return i, n


def shard_of(item_id: str, n_shards: int) -> int:
    """The shard an item belongs to: SHA-256 of its id, modulo N.

    It depends on the id alone, so an item keeps its shard when the corpus grows by appending, and
    every process (whatever its PYTHONHASHSEED) computes the same partition.

    >>> [shard_of(item_id, 3) for item_id in ("q-0001", "q-0002", "q-0003")] == [
    ...     shard_of(item_id, 3) for item_id in ("q-0001", "q-0002", "q-0003")]
    True
    """
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n_shards


def shard_items(items: list[dict[str, Any]], shard: str | None) -> list[dict[str, Any]]:
    """The items of ``shard`` ("I/N"), in their order; all of them when ``shard`` is None."""
    if shard is None:
        return items
    index, count = parse_shard(shard)
    return [item for item in items if shard_of(item["id"], count) == index]


def model_name(config: EvalConfig) -> str:
    if config.name:
        return config.name
    path = Path(config.model).expanduser()
    return path.resolve().name if path.is_dir() else config.model


def run_dir(config: EvalConfig) -> Path:
    """``--out``, else ``runs/<model name>`` (``-shardIofN`` for a shard)."""
    if config.out is not None:
        return config.out
    shard = f"-shard{config.shard.replace('/', 'of')}" if config.shard else ""
    return Path("runs") / (model_name(config).replace("/", "__") + shard)


def select_items(config: EvalConfig) -> tuple[list[dict[str, Any]], Any, list[dict[str, Any]]]:
    """The items to evaluate, in corpus order (flagged items excluded), the subset table or None, and
    the whole scorable corpus they were drawn from (every unflagged item, before --subset-only/--limit)."""
    from tcmqa.data import has_config, load_config

    corpus = load_config(config.data, "corpus", config.data_revision)
    subset = None
    if has_config(config.data, "subset"):
        subset = load_config(config.data, "subset", config.data_revision).to_pandas()
    elif config.subset_only:
        raise SystemExit(
            f"--subset-only needs a 'subset' config and {config.data} has none; rebuild it with "
            "`tcmqa build --platform-db ...`"
        )
    scorable = [item for item in corpus.to_list() if not item["flagged"]]
    items = scorable
    if config.subset_only:
        wanted = set(subset["item_id"])
        items = [item for item in items if item["id"] in wanted]
    if config.items is not None:
        listed = set(config.items.read_text(encoding="utf-8").split())
        items = [item for item in items if item["id"] in listed]
    if config.limit is not None:
        items = items[: config.limit]
    if not items:
        raise SystemExit(f"no items to evaluate in {config.data} (after --subset-only/--items/--limit)")
    return items, subset, scorable


def data_facts(config: EvalConfig, scorable: list[dict[str, Any]]) -> dict[str, Any]:
    """What the results row says about the data: where, which revision, its fingerprint and size."""
    return {
        "data": str(config.data),
        "data_revision": config.data_revision,  # resolved before the items were read (read_revision)
        "data_fingerprint": data_fingerprint(scorable),
        "n_corpus": len(scorable),
    }


def read_revision(config: EvalConfig, out: Path) -> str | None:
    """The data revision the items are read at, fixed once before any is read, and recorded (``run.json``, the
    results row). Resuming without ``--data-revision``: the run's own, since the head of a Hub dataset moves
    under a long run (the leaderboard's Publisher commits to it all day). Otherwise ``--data-revision``, or
    the head, resolved to its commit (:func:`resolve_data_revision`)."""
    manifest_file = out / MANIFEST
    if config.resume and config.data_revision is None and manifest_file.exists():
        return json.loads(manifest_file.read_text()).get("data_revision")  # None: a run read at the head, as before
    return resolve_data_revision(config.data, config.data_revision)


def resolve_data_revision(data: str, revision: str | None) -> str | None:
    """The Hub dataset's commit sha for ``revision``; as requested for a local tree or when the Hub
    cannot be asked (offline)."""
    if Path(data).expanduser().exists():
        return revision
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(data, revision=revision).sha or revision
    except Exception:  # offline, or no access: the fingerprint still identifies the data
        return revision


def read_template(config: EvalConfig) -> str | None:
    if config.chat_template is None:
        return None
    if not config.chat_template.is_file():
        raise SystemExit(f"--chat-template {config.chat_template} is not a file")
    return config.chat_template.read_text(encoding="utf-8")


def dry_run(config: EvalConfig, items: list[dict[str, Any]]) -> None:
    """Print three rendered prompts (two single-answer and a multi-answer one where possible)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(config.model, revision=config.revision)
    multi = [item for item in items if item["answer_type"] == "multi"][:1]
    shown = [item for item in items if item["answer_type"] == "single"][: 3 - len(multi)] + multi
    template = read_template(config)
    for item in shown:
        text = prompts.render_prompt(tokenizer, prompts.render_messages(item), template)
        print(
            f"----- {item['id']} ({item['answer_type']}) protocol {prompts.PROTOCOL} "
            f"sha256 {prompts.prompt_hash(text)[:12]}"
        )
        print(text)


def check_out_dir(out: Path, manifest: dict[str, Any], resume: bool) -> None:
    """Refuse to mix runs: an existing run folder continues only with --resume and the same run."""
    manifest_file = out / MANIFEST
    has_parts = bool(outputs_mod.part_files(out))
    if not manifest_file.exists():
        if has_parts:
            raise SystemExit(f"{out} holds output parts but no {MANIFEST}; choose an empty --out")
        return
    if not resume:
        if has_parts:
            raise SystemExit(f"{out} already holds a run; pass --resume to continue it or choose another --out")
        return
    previous = json.loads(manifest_file.read_text())
    # a key an older tcmqa did not record is not compared, so an upgrade does not strand a run
    differ = {
        key: (previous.get(key), value) for key, value in manifest.items() if key in previous and previous[key] != value
    }
    if differ:
        detail = "; ".join(f"{key}: {old!r} there, {new!r} now" for key, (old, new) in differ.items())
        raise SystemExit(f"cannot resume: {out} holds a different run ({detail}). Use another --out.")


def engine_options(config: EvalConfig) -> dict[str, Any]:
    """The options the engine is loaded with: its flags (--batch-size, --enforce-eager), then --engine-arg."""
    if config.engine == "transformers":
        options: dict[str, Any] = {"batch_size": config.batch_size}
    else:
        options = {"enforce_eager": True} if config.enforce_eager else {}
    return {**options, **config.engine_args}


def engine_args_text(options: dict[str, Any]) -> str:
    """The engine options as the results row records them: JSON, keys sorted."""
    return json.dumps(options, sort_keys=True, ensure_ascii=False)


def open_engine(config: EvalConfig) -> Engine:
    """Load the engine ``config`` asks for (its options are checked before the model loads)."""
    return load_engine(
        config.engine,
        config.model,
        revision=config.revision,
        dtype=config.dtype,
        chat_template=read_template(config),
        **engine_options(config),
    )


def chunk_size(config: EvalConfig, engine: Engine, out: Path) -> int:
    """--chunk-size; else, resuming, the run's own; else the engine's default for its hardware."""
    if config.chunk_size:
        return config.chunk_size
    manifest_file = out / MANIFEST
    if config.resume and manifest_file.exists():
        recorded = json.loads(manifest_file.read_text()).get("chunk_size")
        if recorded:
            return int(recorded)
    return engine.default_chunk_size


def run_manifest(
    config: EvalConfig, engine: Engine, selection: list[dict[str, Any]], items: list[dict[str, Any]], chunk: int
) -> dict[str, Any]:
    """What was run (``run.json``): --resume continues only the same run, ``tcmqa merge`` joins only
    shards of the same run. ``selection`` is every item the run (all its shards) covers; ``items`` this
    shard's."""
    chat_template = read_template(config)
    return {
        "model": model_name(config),
        "model_source": config.model,  # what `tcmqa probe` loads: the Hub id or the local folder
        **engine.describe(),
        "engine_args": engine_options(config),
        "protocol": prompts.PROTOCOL,
        "chat_template": None if chat_template is None else prompts.prompt_hash(chat_template)[:16],
        "data": str(config.data),
        "data_revision": config.data_revision,
        "data_fingerprint": data_fingerprint(items),
        "n_items": len(items),
        "chunk_size": chunk,
        "limit": config.limit,
        "subset_only": config.subset_only,
        "shard": config.shard,
        "selection_fingerprint": data_fingerprint(selection),
        "n_selection": len(selection),
    }


def run_facts(engine: Engine, config: EvalConfig) -> dict[str, Any]:
    """What the results row says about the model and the engine (everything but the data and the rows)."""
    described = engine.describe()
    accepted = inspect.signature(results_row).parameters
    facts = {key: value for key, value in described.items() if key in accepted}  # engine, version, dtype, ...
    return {
        **facts,
        "family": config.family,
        "params_b": count_parameters(engine.path) / 1e9,
        "engine_args": engine_args_text(engine_options(config)),
    }


def run(config: EvalConfig, engine: Engine | None = None) -> Report:
    """Evaluate; ``engine`` lets a caller reuse a loaded engine (it must match ``config``)."""
    watch = Stopwatch()
    name = model_name(config)
    out = run_dir(config)
    check_options(config.engine, engine_options(config))  # an unknown --engine-arg fails before any load or write
    loading = None if config.dry_run else progress.Phase(out, "loading", 1)
    with watch("load"):
        config = dataclasses.replace(config, data_revision=read_revision(config, out))  # fixed before any read
        selection, subset, scorable = select_items(config)
        items = shard_items(selection, config.shard)
        if not items:
            raise SystemExit(f"shard {config.shard} holds none of the {len(selection)} items; use fewer shards")
        if config.dry_run:
            dry_run(config, items)
            return Report({}, Path(), 0)
        chat_template = read_template(config)
        if engine is None:
            engine = open_engine(config)
        elif (engine.name, engine.model_id, engine.chat_template) != (config.engine, config.model, chat_template) or (
            config.dtype != "auto" and engine.dtype != config.dtype
        ):
            raise ValueError("the engine passed in was loaded for another engine, model, dtype or chat template")
        elif engine.requested_options != engine_options(config):
            raise ValueError(
                f"the engine passed in was loaded with other options ({engine.requested_options}) than the run "
                f"asks for ({engine_options(config)})"
            )
    if loading is not None:
        loading.step(1)
    chunk = chunk_size(config, engine, out)
    pool = read_pool(config.pool) if config.pool is not None else None
    generated = 0
    if not config.pool_only:  # a back-fill's public parts are the model's recorded run (summarise checks them)
        manifest = run_manifest(config, engine, selection, items, chunk)
        check_out_dir(out, manifest, config.resume)
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1))
        generated = generate_parts(engine, chunked(items, chunk), out, name, watch, progress_dir=out)
    if pool is not None and pool.items:  # after the public items, in the same engine load; its log and size apart
        with hidden_log(out):
            generated += generate_parts(engine, chunked(pool.items, chunk), pool.outputs_dir(out), name, watch)
    with watch("write"):
        facts = {**run_facts(engine, config), **data_facts(config, scorable)}
        results = summarise(out, items, subset, facts, pool, config.released)
    return Report(results, out, generated, dict(watch.seconds))


def generate_parts(
    engine: Engine,
    chunks: list[list[dict[str, Any]]],
    out: Path,
    name: str,
    watch: Stopwatch,
    progress_dir: Path | None = None,
) -> int:
    """Write one output part per chunk, skipping parts an earlier attempt wrote; return the items generated.
    With ``progress_dir`` each chunk is reported there as the "evaluating" phase (:mod:`tcmqa.progress`; the
    hidden pool's pass reports nothing, so the Queue never shows its size).

    Chunks are rendered as the engine asks for them and stream into it (``Engine.generate_chunks``),
    so the next chunk is queued while the last one still generates and each part lands as soon as its
    chunk is complete.
    """
    generated = 0
    total = sum(map(len, chunks))
    with tqdm(total=total, desc=f"{name} ({engine.name})", unit="item") as bar:
        todo = []
        for index, part in enumerate(chunks):
            if outputs_mod.part_item_ids(out, index) == [item["id"] for item in part]:
                bar.update(len(part))  # written by an earlier attempt
            else:
                todo.append((index, part))
        phase = None if progress_dir is None else progress.Phase(progress_dir, "evaluating", total, bar.n)
        rendered: deque[list[Prompt]] = deque()

        def render_next() -> Iterator[list[Prompt]]:
            for _, part in todo:
                with watch("render"):
                    rendered.append(engine.render([prompts.render_messages(item) for item in part]))
                yield rendered[-1]

        stream = engine.generate_chunks(render_next())
        with contextlib.closing(stream), watch.excluding("generate", ("render", "score", "write")):
            for (index, part), completions in zip(todo, stream, strict=True):
                with watch("score"):
                    rows = outputs_mod.build_rows(
                        part, rendered.popleft(), completions, model=name, revision=engine.revision
                    )
                with watch("write"):
                    outputs_mod.write_part(out, index, rows)
                generated += len(part)
                bar.update(len(part))
                if phase is not None:
                    phase.step(len(part))
    return generated


def summarise(
    out: Path,
    items: list[dict[str, Any]],
    subset: Any,
    facts: dict[str, Any],
    pool: HiddenPool | None = None,
    released: str | None = None,
) -> dict[str, Any]:
    """Check the run folder holds exactly one row per item in order, then write its results row.

    ``facts`` are the row's keywords beyond the output rows (:func:`run_facts` and :func:`data_facts`).
    ``tcmqa eval`` and ``tcmqa merge`` both end here, so a merged run's row is an unsharded run's. With a
    ``pool`` its output rows (the run's hidden part) fill the fresh columns.
    """
    frame = outputs_mod.read_outputs(out)
    if frame["item_id"].tolist() != [item["id"] for item in items]:
        raise RuntimeError(f"{out} does not hold exactly one row per item in order; rerun into an empty --out")
    if pool is not None and pool.items:
        hidden = outputs_mod.read_outputs(pool.outputs_dir(out))
        facts = {**facts, "pool": pool, "pool_outputs": hidden, "released": released}
    results = results_row(frame, subset, **facts)
    (out / outputs_mod.RESULTS_FILE).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    return results


def format_row(results: dict[str, Any]) -> str:
    """The leaderboard row as two aligned lines of text (the columns marked ``cli`` in the schema)."""
    columns = [c for c in RESULT_COLUMNS if c.cli]
    values = [results.get(c.name) for c in columns]
    cells = ["—" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v) for v in values]
    labels = [c.label for c in columns]
    widths = [max(len(label), len(cell)) for label, cell in zip(labels, cells)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)) for line in (labels, cells))


def main(args: argparse.Namespace) -> int:
    """Run the evaluation; exit ``EXIT_TRANSIENT`` when the Hub or the network failed it (the worker retries)."""
    try:
        return _main(args)
    except Exception as err:
        if not is_transient(err):
            raise
        logger.exception("the Hub or the network failed this run; it is worth retrying")
        return EXIT_TRANSIENT


def _main(args: argparse.Namespace) -> int:
    config = EvalConfig.from_args(args)
    if config.probes and (config.shard or config.ray or config.dry_run):
        raise SystemExit("--probes runs on a whole run: probe the merged shards with `tcmqa probe RUN_DIR`")
    if config.probes:  # the engine is loaded here, before run() reads the data
        progress.Phase(run_dir(config), "loading", 1)
    engine = open_engine(config) if config.probes else None
    try:
        if config.ray is not None and not config.dry_run:
            from tcmqa import ray_shards

            report = ray_shards.run(config)
        else:
            report = run(config, engine)
        if config.dry_run:
            return 0
        print(format_row(report.results))
        if engine is not None:
            print(format_probes(run_probes(ProbeConfig(report.out, chat_template=config.chat_template), engine)))
    finally:
        if engine is not None:
            engine.close()
    print(f"outputs and results in {report.out}")
    return 0
