"""``tcmqa merge RUN... --out DIR``: join the run folders of ``tcmqa eval --shard I/N`` into one.

The shards must be of one run: their manifests (``run.json``) agree on everything but the shard
itself (model, revision, protocol, chat template, data and its fingerprint, item selection, engine,
engine version, dtype, engine args), and their outputs cover every item of the selection exactly once
(a missing or doubled item is refused, with its id named). DIR then holds what the unsharded run would
have written: the output rows in corpus order, in parts of the run's chunk size, its ``run.json``, and
a results row computed by ``tcmqa.harness.summarise`` (the same code as an unsharded run's, so the rows
are identical but for the date). Merging again into a fresh DIR gives the same folder.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tcmqa import harness
from tcmqa import outputs as outputs_mod
from tcmqa.outputs import MANIFEST, RESULTS_FILE
from tcmqa.runs import data_fingerprint

# Manifest keys that differ between the shards of one run.
PER_SHARD = frozenset({"shard", "data_fingerprint", "n_items", "chunk_size"})
# Results-row keys that the shards' rows must agree on; the merged row takes them over.
FACTS = (
    "family",
    "params_b",
    "engine",
    "engine_version",
    "dtype",
    "engine_args",
    "batch_invariant",
    "data",
    "data_revision",
    "data_fingerprint",
    "n_corpus",
)
SHOWN_IDS = 20  # item ids named in a refusal


class MergeError(SystemExit):
    """The shards cannot be merged (the message says why)."""


def _read_json(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        raise MergeError(f"{path.parent} has no {path.name}: {what}")
    return json.loads(path.read_text())


def _named(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN_IDS])
    return shown + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")


def check_manifests(runs: list[Path], manifests: list[dict[str, Any]]) -> None:
    """Refuse shards of different runs, naming each key that differs and its value in each folder."""
    keys = sorted(set().union(*manifests) - PER_SHARD)
    differ = [key for key in keys if len({json.dumps(m.get(key), sort_keys=True) for m in manifests}) > 1]
    if differ:
        lines = [
            f"  {key}: " + "; ".join(f"{run}: {m.get(key)!r}" for run, m in zip(runs, manifests)) for key in differ
        ]
        raise MergeError("cannot merge: the runs are not shards of one run\n" + "\n".join(lines))


def check_coverage(selection_ids: list[str], shard_ids: dict[Path, list[str]]) -> None:
    """Refuse unless the shards' rows hold every selected item exactly once (and nothing else)."""
    counts = Counter(item_id for ids in shard_ids.values() for item_id in ids)
    wanted = set(selection_ids)
    missing = [item_id for item_id in selection_ids if item_id not in counts]
    doubled = [item_id for item_id in selection_ids if counts[item_id] > 1]
    extra = sorted(item_id for item_id in counts if item_id not in wanted)
    problems = []
    if missing:
        problems.append(f"{len(missing)} items in no shard (a shard is missing or unfinished): {_named(missing)}")
    if doubled:
        where = {
            item_id: [str(run) for run, ids in shard_ids.items() if item_id in set(ids)] for item_id in doubled[:3]
        }
        problems.append(
            f"{len(doubled)} items in more than one shard (a shard given twice?): {_named(doubled)}; e.g. {where}"
        )
    if extra:
        problems.append(f"{len(extra)} items outside the run's selection: {_named(extra)}")
    if problems:
        raise MergeError("cannot merge: the shards do not cover the items exactly once\n  " + "\n  ".join(problems))


def merge(runs: list[str | Path], out: str | Path) -> dict[str, Any]:
    """Merge the shard folders ``runs`` into ``out``; returns the results row (also in ``out``)."""
    runs = [Path(run) for run in runs]
    out = Path(out)
    if not runs:
        raise MergeError("tcmqa merge needs at least one run folder")
    if out.resolve() in {run.resolve() for run in runs}:
        raise MergeError(f"--out {out} is one of the runs; merge into a new folder")
    if outputs_mod.part_files(out) or (out / MANIFEST).exists():
        raise MergeError(f"{out} already holds a run; merge into an empty --out")
    manifests = [_read_json(run / MANIFEST, "not a `tcmqa eval` run folder") for run in runs]
    rows = [_read_json(run / RESULTS_FILE, "this shard has not finished (rerun it with --resume)") for run in runs]
    check_manifests(runs, manifests)
    first = manifests[0]

    # The selection the shards were cut from, as the shards saw it.
    config = harness.EvalConfig(
        model=first["model"],
        data=first["data"],
        data_revision=first.get("data_revision"),
        limit=first.get("limit"),
        subset_only=bool(first.get("subset_only")),
    )
    selection, subset, _ = harness.select_items(config)
    if data_fingerprint(selection) != first.get("selection_fingerprint"):
        raise MergeError(
            f"the items of {first['data']} are no longer those the shards evaluated (selection fingerprint "
            f"{data_fingerprint(selection)} now, {first.get('selection_fingerprint')} then)"
        )
    tables = {run: outputs_mod.read_outputs_table(run) for run in runs}
    check_coverage(
        [item["id"] for item in selection], {run: t.column("item_id").to_pylist() for run, t in tables.items()}
    )

    facts = {key: rows[0].get(key) for key in FACTS}
    for run, row in zip(runs[1:], rows[1:]):
        differ = [key for key in FACTS if row.get(key) != facts[key]]
        if differ:
            raise MergeError(f"cannot merge: {run}'s results row differs from {runs[0]}'s in {differ}")

    import pyarrow as pa

    combined = pa.concat_tables(tables.values())
    position = {item_id: k for k, item_id in enumerate(combined.column("item_id").to_pylist())}
    ordered = combined.take([position[item["id"]] for item in selection])
    chunk = int(first["chunk_size"])
    out.mkdir(parents=True, exist_ok=True)
    for index, start in enumerate(range(0, len(selection), chunk)):
        outputs_mod.write_part(out, index, ordered.slice(start, chunk).to_pylist())
    manifest = {
        **first,
        "shard": None,
        "data_fingerprint": first["selection_fingerprint"],
        "n_items": first["n_selection"],
        "chunk_size": chunk,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1))
    accepted = {key: value for key, value in facts.items() if key in _results_keywords()}
    return harness.summarise(out, selection, subset, accepted)


def _results_keywords() -> set[str]:
    import inspect

    from tcmqa.results import results_row

    return set(inspect.signature(results_row).parameters)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="the shards' run folders (tcmqa eval --shard I/N)")
    parser.add_argument("--out", required=True, type=Path, help="the merged run folder (new or empty)")


def main(args: argparse.Namespace) -> int:
    results = merge(args.runs, args.out)
    print(harness.format_row(results))
    print(f"merged {len(args.runs)} shards into {args.out}")
    return 0
