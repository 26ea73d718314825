"""``tcmqa eval``: evaluate a model under the frozen protocol (``tcmqa.prompts``) in a single pass.

Writes ``OUT/outputs/part-*.parquet`` (the ``outputs`` config), ``OUT/results.json`` (one ``results``
row) and ``OUT/run.json`` (what was run, so that ``--resume`` continues only the same run), then
prints the leaderboard row. Items are processed in chunks; a crashed run resumes from its last
finished chunk.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from tcmqa import outputs as outputs_mod
from tcmqa import prompts
from tcmqa.engines import ENGINES, Engine, load_engine

MANIFEST = "run.json"
STAGES = ("load", "render", "generate", "score", "write")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="Hub model id or a local model folder")
    parser.add_argument("--data", default="TechTCM/TCMQA", help="Hub dataset id or a tree written by `tcmqa build`")
    parser.add_argument("--engine", choices=sorted(ENGINES), default="vllm")
    parser.add_argument("--revision", help="model revision on the Hub (branch, tag or commit)")
    parser.add_argument("--data-revision", help="dataset revision on the Hub")
    parser.add_argument("--dtype", choices=("bfloat16", "float32", "auto"), default="bfloat16")
    parser.add_argument("--limit", type=int, metavar="N", help="evaluate only the first N items")
    parser.add_argument("--subset-only", action="store_true", help="only the practitioners' comparison subset")
    parser.add_argument("--out", type=Path, help="run folder (default: runs/<model name>)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    parser.add_argument("--dry-run", action="store_true", help="print three rendered prompts and stop")
    parser.add_argument("--chat-template", type=Path, metavar="FILE", help="Jinja chat template for models without one")
    parser.add_argument("--chunk-size", type=int, default=256, help="items per engine call and per output part")
    parser.add_argument("--batch-size", type=int, default=32, help="transformers engine: sequences per forward pass")
    parser.add_argument("--enforce-eager", action="store_true", help="vLLM: skip graph compilation (faster start)")
    parser.add_argument("--name", help="model name in the rows (default: the Hub id, or a local folder's name)")
    parser.add_argument("--family", help="model family shown on the leaderboard, e.g. Qwen2")


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


def model_name(args: argparse.Namespace) -> str:
    if args.name:
        return args.name
    path = Path(args.model).expanduser()
    return path.resolve().name if path.is_dir() else args.model


def select_items(args: argparse.Namespace) -> tuple[list[dict[str, Any]], Any]:
    """The items to evaluate, in corpus order (flagged items excluded), and the subset table or None."""
    from tcmqa.data import has_config, load_config

    corpus = load_config(args.data, "corpus", args.data_revision)
    subset = None
    if has_config(args.data, "subset"):
        subset = load_config(args.data, "subset", args.data_revision).to_pandas()
    elif args.subset_only:
        raise SystemExit(f"--subset-only needs a 'subset' config and {args.data} has none; rebuild it with "
                         "`tcmqa build --platform-db ...`")
    items = [item for item in corpus.to_list() if not item["flagged"]]
    if args.subset_only:
        wanted = set(subset["item_id"])
        items = [item for item in items if item["id"] in wanted]
    if args.limit is not None:
        items = items[: args.limit]
    if not items:
        raise SystemExit(f"no items to evaluate in {args.data} (after --subset-only/--limit)")
    return items, subset


def data_fingerprint(items: list[dict[str, Any]]) -> str:
    """Hash of what the model is asked and scored against, in order."""
    digest = hashlib.sha256()
    for item in items:
        fields = [item["id"], item["question"], item["options"], item["answer"], item["answer_type"]]
        digest.update(json.dumps(fields, ensure_ascii=False, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def read_template(args: argparse.Namespace) -> str | None:
    if args.chat_template is None:
        return None
    if not args.chat_template.is_file():
        raise SystemExit(f"--chat-template {args.chat_template} is not a file")
    return args.chat_template.read_text(encoding="utf-8")


def dry_run(args: argparse.Namespace, items: list[dict[str, Any]]) -> None:
    """Print three rendered prompts (two single-answer and a multi-answer one where possible)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model, revision=args.revision)
    multi = [item for item in items if item["answer_type"] == "multi"][:1]
    shown = [item for item in items if item["answer_type"] == "single"][: 3 - len(multi)] + multi
    template = read_template(args)
    for item in shown:
        text = prompts.render_prompt(tokenizer, prompts.render_messages(item), template)
        print(f"----- {item['id']} ({item['answer_type']}) protocol {prompts.PROTOCOL} "
              f"sha256 {prompts.prompt_hash(text)[:12]}")
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
    differ = {key: (previous.get(key), value) for key, value in manifest.items() if previous.get(key) != value}
    if differ:
        detail = "; ".join(f"{key}: {old!r} there, {new!r} now" for key, (old, new) in differ.items())
        raise SystemExit(f"cannot resume: {out} holds a different run ({detail}). Use another --out.")


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.engine == "transformers":
        return {"batch_size": args.batch_size}
    return {"enforce_eager": True} if args.enforce_eager else {}


def run(args: argparse.Namespace, engine: Engine | None = None) -> Report:
    """Evaluate; ``engine`` lets a caller reuse a loaded engine (it must match ``args``)."""
    watch = Stopwatch()
    with watch("load"):
        items, subset = select_items(args)
        if args.dry_run:
            dry_run(args, items)
            return Report({}, Path(), 0)
        chat_template = read_template(args)
        if engine is None:
            engine = load_engine(args.engine, args.model, revision=args.revision, dtype=args.dtype,
                                 chat_template=chat_template, **engine_options(args))
        elif (engine.name, engine.model_id, engine.chat_template) != (args.engine, args.model, chat_template) or (
            args.dtype != "auto" and engine.dtype != args.dtype
        ):
            raise ValueError("the engine passed in was loaded for another engine, model, dtype or chat template")
    name = model_name(args)
    out = args.out or Path("runs") / name.replace("/", "__")
    manifest = {
        "model": name,
        **engine.describe(),
        "protocol": prompts.PROTOCOL,
        "chat_template": None if chat_template is None else prompts.prompt_hash(chat_template)[:16],
        "data": str(args.data),
        "data_revision": args.data_revision,
        "data_fingerprint": data_fingerprint(items),
        "n_items": len(items),
        "chunk_size": args.chunk_size,
    }
    check_out_dir(out, manifest, args.resume)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1))

    chunks = [items[start : start + args.chunk_size] for start in range(0, len(items), args.chunk_size)]
    generated = 0
    with tqdm(total=len(items), desc=f"{name} ({engine.name})", unit="item") as bar:
        for index, chunk in enumerate(chunks):
            done = outputs_mod.part_item_ids(out, index)
            if done == [item["id"] for item in chunk]:
                bar.update(len(chunk))
                continue
            with watch("render"):
                rendered = engine.render([prompts.render_messages(item) for item in chunk])
            with watch("generate"):
                completions = engine.generate(rendered)
            with watch("score"):
                rows = outputs_mod.build_rows(chunk, rendered, completions, model=name, revision=engine.revision)
            with watch("write"):
                outputs_mod.write_part(out, index, rows)
            generated += len(chunk)
            bar.update(len(chunk))

    with watch("write"):
        results = summarise(out, items, subset, engine, args)
    return Report(results, out, generated, dict(watch.seconds))


def summarise(out: Path, items: list[dict[str, Any]], subset: Any, engine: Engine,
              args: argparse.Namespace) -> dict[str, Any]:
    """Check the run is complete and exact, then write the results row."""
    from tcmqa.engines.base import count_parameters
    from tcmqa.results import results_row

    frame = outputs_mod.read_outputs(out)
    if frame["item_id"].tolist() != [item["id"] for item in items]:
        raise RuntimeError(f"{out} does not hold exactly one row per item in order; rerun into an empty --out")
    facts = engine.describe()
    results = results_row(frame, subset, family=args.family, params_b=count_parameters(engine.path),
                          engine=facts["engine"], engine_version=facts["engine_version"], dtype=facts["dtype"])
    (out / outputs_mod.RESULTS_FILE).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    return results


def format_row(results: dict[str, Any]) -> str:
    """The leaderboard row as two aligned lines of text."""
    columns = ["model", "full", "single", "multi", "subset", "delta_human", "lp_full", "multi_f1",
               "confidence_gap", "n"]
    cells = [("—" if results[c] is None else f"{results[c]:.2f}" if isinstance(results[c], float) else str(results[c]))
             for c in columns]
    widths = [max(len(c), len(v)) for c, v in zip(columns, cells)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)) for line in (columns, cells))


def main(args: argparse.Namespace) -> int:
    report = run(args)
    if args.dry_run:
        return 0
    print(format_row(report.results))
    print(f"outputs and results in {report.out}")
    return 0
