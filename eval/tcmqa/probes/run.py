"""``tcmqa probe RUN_DIR``: the rotation and option-order probes over a finished run, with resume.

Writes ``RUN_DIR/probes/rotation-NNNNN.parquet`` and ``order-NNNNN.parquet`` (the ``probes`` config:
one part per chunk of items, written atomically, skipped when resuming), ``RUN_DIR/probes.json`` (what
was probed, so that a resumed probe continues only the same one, and seconds per probe), and adds the
probe columns to ``RUN_DIR/results.json``. The run's output rows are read, never written.

The model is loaded as the run loaded it (engine, dtype, engine options, chat template) and must be
the revision the run evaluated: a probe of another revision would describe another model.
``tcmqa eval --probes`` runs the same code in the evaluation's own engine load.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from tcmqa import flags, progress, prompts
from tcmqa.engines import Engine, load_engine
from tcmqa.engines.base import Prompt
from tcmqa.outputs import MANIFEST, RESULTS_FILE, read_outputs
from tcmqa.probes import PROBE_VERSION, order, rotation
from tcmqa.results import PROBE_COLUMNS
from tcmqa.runs import chunked, data_fingerprint
from tcmqa.schema import PROBES

PROBES_DIR = "probes"
PROBES_MANIFEST = "probes.json"
ROTATION_SETS = ("subset", "all", "none")
logger = logging.getLogger(__name__)


def _order_items(text: str) -> int | None:
    """``--order-items``: a count, ``all`` (None) or 0 to skip the test."""
    if str(text).lower() == "all":
        return None
    count = int(text)
    if count < 0:
        raise ValueError(f"--order-items takes a count >= 0 or 'all', got {text!r}")
    return count


@dataclasses.dataclass
class ProbeConfig:
    """The probes of one run; every field is the ``tcmqa probe`` flag of the same name."""

    run_dir: Path = dataclasses.field(metadata={"positional": True, "help": "a run folder written by `tcmqa eval`"})
    model: str | None = dataclasses.field(
        default=None, metadata={"help": "the run's model (Hub id or folder); default: as the run recorded it"}
    )
    chat_template: Path | None = dataclasses.field(
        default=None, metadata={"help": "the run's --chat-template FILE, if it had one", "metavar": "FILE"}
    )
    rotations: str = dataclasses.field(
        default="subset",
        metadata={
            "help": "items asked under all five rotations: the comparison subset's (all items when the data has "
            "no subset), all, or none",
            "choices": ROTATION_SETS,
        },
    )
    order_items: str = dataclasses.field(
        default=str(order.ITEMS),
        metadata={"help": "items in the option-order test (a stratified sample): N, all, or 0 to skip it"},
    )
    orders: int | None = dataclasses.field(
        default=None,
        metadata={
            "help": "most other option orders per item in the order test, among those sharing the published order's "
            f"features (default: all, up to {order.ALL_ORDERS}, on a GPU; {order.ORDERS_CPU} on a CPU)",
            "metavar": "K",
        },
    )
    pride_share: float = dataclasses.field(
        default=rotation.PRIDE_SHARE, metadata={"help": "share of rotated items PriDe estimates its letter prior on"}
    )
    seed: int = dataclasses.field(default=0, metadata={"help": "seed of the order sample and the PriDe split"})
    chunk_size: int | None = dataclasses.field(
        default=None, metadata={"help": "items per probe part (default: the engine's chunk size)", "metavar": "N"}
    )
    restart: bool = dataclasses.field(
        default=False, metadata={"help": "discard probe parts of an earlier, different probe of this run"}
    )

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.chat_template = None if self.chat_template is None else Path(self.chat_template)
        self.order_items = str(self.order_items)
        _order_items(self.order_items)  # fail early on a bad value
        if self.rotations not in ROTATION_SETS:
            raise ValueError(f"--rotations takes one of {ROTATION_SETS}, got {self.rotations!r}")
        if not 0 < self.pride_share < 1:
            raise ValueError(f"--pride-share is a share in (0, 1), got {self.pride_share}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flags.add_flags(parser, ProbeConfig)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    if not path.is_file() or not (run_dir / RESULTS_FILE).is_file():
        raise SystemExit(f"{run_dir} holds no finished run ({MANIFEST} and {RESULTS_FILE}); run `tcmqa eval` first")
    manifest = json.loads(path.read_text())
    if manifest.get("shard"):
        raise SystemExit(f"{run_dir} is shard {manifest['shard']} of a run: probe the merged run (`tcmqa merge`)")
    return manifest


def open_run_engine(config: ProbeConfig, manifest: Mapping[str, Any]) -> Engine:
    """The run's model in the run's engine, dtype, options and chat template."""
    template = None if config.chat_template is None else config.chat_template.read_text(encoding="utf-8")
    if (template and prompts.prompt_hash(template)[:16]) != (manifest.get("chat_template") or None):
        raise SystemExit("the run was evaluated with another chat template: pass the run's --chat-template FILE")
    model = config.model or manifest.get("model_source") or manifest["model"]
    local = Path(model).expanduser().is_dir()
    return load_engine(
        manifest["engine"],
        model,
        revision=None if local else manifest.get("revision"),  # a folder's revision is its content hash
        dtype=manifest["dtype"],
        chat_template=template,
        **manifest.get("engine_args", {}),
    )


def check_engine(engine: Engine, manifest: Mapping[str, Any]) -> None:
    """Refuse to probe with another engine, dtype or model revision than the run's."""
    ours = {"engine": engine.name, "dtype": engine.dtype, "revision": engine.revision}
    differ = {key: (manifest.get(key), value) for key, value in ours.items() if manifest.get(key) != value}
    if differ:
        detail = "; ".join(f"{key}: {old!r} in the run, {new!r} here" for key, (old, new) in differ.items())
        raise SystemExit(f"the probes must use the run's engine, dtype and model revision ({detail})")


def probe_items(config: ProbeConfig, manifest: Mapping[str, Any], outputs: pd.DataFrame) -> tuple[list, list]:
    """The run's items to rotate and to order-test, in run order."""
    from tcmqa.data import has_config, load_config

    data, revision = manifest["data"], manifest.get("data_revision")
    evaluated = set(outputs["item_id"])
    items = [item for item in load_config(data, "corpus", revision).to_list() if item["id"] in evaluated]
    by_id = {item["id"]: item for item in items}
    items = [by_id[i] for i in outputs["item_id"]]
    rotate: list = []
    if config.rotations == "all":
        rotate = items
    elif config.rotations == "subset":
        if has_config(data, "subset"):
            wanted = set(load_config(data, "subset", revision).to_pandas()["item_id"])
            rotate = [item for item in items if item["id"] in wanted]
        else:
            logger.warning("%s has no subset config: rotating every evaluated item", data)
            rotate = items
    return rotate, order.sample_items(items, _order_items(config.order_items), config.seed)


def _write(path: Path, rows: list[dict[str, Any]], facts: Mapping[str, Any]) -> None:
    """One probe part, atomically; each row gets the run's facts and every ``PROBES`` column."""
    path.parent.mkdir(parents=True, exist_ok=True)
    full = [{name: None for name in PROBES} | dict(facts) | row for row in rows]
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(full, schema=PROBES.arrow_schema), tmp)
    tmp.replace(path)


def _done(path: Path, ids: list[str]) -> bool:
    """Whether a part an earlier attempt wrote holds exactly these items."""
    if not path.exists():
        return False
    return list(dict.fromkeys(pq.read_table(path, columns=["item_id"]).column("item_id").to_pylist())) == ids


def run_rotations(
    engine: Engine,
    chunks: list[list[Mapping[str, Any]]],
    published: Callable[[list[Mapping[str, Any]]], list[dict[str, Any]]],
    folder: Path,
    facts: Mapping[str, Any],
) -> int:
    """Generate rotations 1-4 of each chunk's items, streamed through the engine; a part per chunk holds
    the chunk's five rotations (rotation 0 copied by ``published``). Returns the items generated now."""
    todo = [(i, chunk) for i, chunk in enumerate(chunks) if not _done(folder / f"rotation-{i:05d}.parquet",
                                                                       [item["id"] for item in chunk])]  # fmt: skip
    turned = {
        i: [rotation.rotate(item, k) for item in chunk for k in range(1, rotation.ROTATIONS)] for i, chunk in todo
    }
    rendered: deque[list[Prompt]] = deque()

    def render_next() -> Iterator[list[Prompt]]:
        for i, _ in todo:
            rendered.append(engine.render([prompts.render_messages(item) for item in turned[i]]))
            yield rendered[-1]

    done = 0
    total = sum(map(len, chunks))
    with tqdm(total=total, desc="rotations", unit="item") as bar:
        bar.update(total - sum(len(chunk) for _, chunk in todo))
        phase = progress.Phase(folder.parent, "rotations", total, bar.n)  # the run folder: the Queue's record
        with contextlib.closing(engine.generate_chunks(render_next())) as stream:
            for (i, chunk), completions in zip(todo, stream, strict=True):
                ks = [k for _ in chunk for k in range(1, rotation.ROTATIONS)]
                rows = rotation.probe_rows(
                    turned[i], rendered.popleft(), completions, ks, model=facts["model"], revision=facts["revision"]
                )
                _write(folder / f"rotation-{i:05d}.parquet", published(chunk) + rows, facts)
                done += len(chunk)
                bar.update(len(chunk))
                phase.step(len(chunk))
    return done


def run_order_test(
    engine: Engine,
    chunks: list[list[Mapping[str, Any]]],
    orders: int,
    seed: int,
    folder: Path,
    facts: Mapping[str, Any],
) -> int:
    """Score each chunk's items as published and under at most ``orders`` other orders; a part per chunk."""
    done = 0
    total = sum(map(len, chunks))
    with tqdm(total=total, desc="order test", unit="item") as bar:
        phase = progress.Phase(folder.parent, "order test", total)  # the run folder: the Queue's record
        for i, chunk in enumerate(chunks):
            path = folder / f"order-{i:05d}.parquet"
            if _done(path, [item["id"] for item in chunk]):
                bar.update(len(chunk))
                phase.skip(len(chunk))
                continue
            reasons = [order.convention(item) for item in chunk]
            tested = [item for item, reason in zip(chunk, reasons, strict=True) if not reason]
            sequences: list[list[int]] = []
            contexts: list[int] = []
            spans: dict[str, slice] = {}
            for item in tested:
                tokens, context = order.token_sequences(engine.tokenizer, item, orders, seed)
                spans[item["id"]] = slice(len(sequences), len(sequences) + len(tokens))
                sequences.extend(tokens)
                contexts.extend([context] * len(tokens))
            # one call for the chunk: the engine batches across items
            scores = engine.loglikelihood(sequences, contexts)
            by_item = {item_id: scores[span] for item_id, span in spans.items()}
            rows = [order.order_row(item, by_item.get(item["id"]), reason) for item, reason in zip(chunk, reasons)]
            _write(path, rows, facts)
            done += len(chunk)
            bar.update(len(chunk))
            phase.step(len(chunk))
    return done


def read_probes(run_dir: Path) -> pd.DataFrame:
    """Every probe row of a run folder (empty with the ``PROBES`` columns when there is none)."""
    parts = sorted((Path(run_dir) / PROBES_DIR).glob("*.parquet"))
    if not parts:
        return pd.DataFrame(columns=list(PROBES))
    return pa.concat_tables(pq.read_table(p, schema=PROBES.arrow_schema) for p in parts).to_pandas()


def summarise(rows: pd.DataFrame, pride_share: float, seed: int) -> dict[str, Any]:
    """The results row's probe columns from a run's probe rows."""
    rotated = rows[rows["probe"] == "rotation"]
    tested = rows[rows["probe"] == "order"]
    return {
        **rotation.summarise(rotated, pride_share, seed),
        **order.summarise(tested),
        "probe_version": PROBE_VERSION,
    }


def run_probes(config: ProbeConfig, engine: Engine | None = None) -> dict[str, Any]:
    """Probe the run in ``config.run_dir`` and return its updated results row; ``engine`` lets
    ``tcmqa eval --probes`` reuse the evaluation's engine (it must be the run's)."""
    run_dir = config.run_dir
    manifest = read_manifest(run_dir)
    outputs = read_outputs(run_dir)
    rotate, tested = probe_items(config, manifest, outputs)
    owned = engine is None
    if engine is None:
        engine = open_run_engine(config, manifest)
    try:
        check_engine(engine, manifest)
        orders = min(
            order.ALL_ORDERS, config.orders or (order.ORDERS_ACCELERATED if engine.accelerated else order.ORDERS_CPU)
        )
        chunk = config.chunk_size or engine.default_chunk_size
        plan = {
            "probe_version": PROBE_VERSION,
            "rotations": config.rotations,
            "rotation_items": data_fingerprint(rotate),
            "n_rotation_items": len(rotate),
            "order_items": data_fingerprint(tested),
            "n_order_items": len(tested),
            "orders": orders,
            "seed": config.seed,
            "chunk_size": chunk,
        }
        folder = run_dir / PROBES_DIR
        manifest_file = run_dir / PROBES_MANIFEST
        if manifest_file.exists():
            before = json.loads(manifest_file.read_text()).get("plan")
            if before != plan:
                if not config.restart:
                    raise SystemExit(
                        f"{run_dir} holds probes of another plan ({before}); pass --restart to discard them"
                    )
                shutil.rmtree(folder, ignore_errors=True)
        manifest_file.write_text(json.dumps({"plan": plan}, indent=1))
        facts = {"model": manifest["model"], "revision": engine.revision, "probe_version": PROBE_VERSION}
        by_id = {item["id"]: item for item in rotate}
        v1 = outputs[outputs["item_id"].isin(by_id)].set_index("item_id", drop=False)

        def published(chunk: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
            return rotation.published_rows(v1.loc[[item["id"] for item in chunk]], by_id)

        seconds: dict[str, float] = {}
        start = time.perf_counter()
        rotated = run_rotations(engine, chunked(rotate, chunk), published, folder, facts)
        seconds["rotation"] = time.perf_counter() - start
        start = time.perf_counter()
        ordered = run_order_test(engine, chunked(tested, max(1, chunk // 8)), orders, config.seed, folder, facts)
        seconds["order"] = time.perf_counter() - start
    finally:
        if owned:
            engine.close()
    columns = summarise(read_probes(run_dir), config.pride_share, config.seed)
    results = json.loads((run_dir / RESULTS_FILE).read_text()) | columns
    (run_dir / RESULTS_FILE).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    timing = {"seconds": seconds, "generated_now": {"rotation": rotated, "order": ordered}}
    manifest_file.write_text(json.dumps({"plan": plan, **timing}, indent=1))
    return results


def format_probes(results: Mapping[str, Any]) -> str:
    """The probe and calibration columns as aligned text lines (what ``tcmqa probe`` prints)."""
    from tcmqa.schema import RESULT_COLUMNS

    lines = []
    for column in RESULT_COLUMNS:
        if column.name in PRINTED:
            value = results.get(column.name)
            text = "—" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
            lines.append(f"{column.label:<16} {text}")
    return "\n".join(lines)


PRINTED = (*PROBE_COLUMNS[:-1], "ece", "acc_top10", "acc_coverage_area")


def main(args: argparse.Namespace) -> int:
    config = flags.from_args(ProbeConfig, args)
    results = run_probes(config)
    print(format_probes(results))
    print(f"probe rows in {config.run_dir / PROBES_DIR}; columns added to {config.run_dir / RESULTS_FILE}")
    return 0
