"""``tcmqa publish``: validate a built tree, then upload it to the Hub in one commit.

The dataset repo has two owners: ``tcmqa build`` (this command) owns the ``corpus``, ``responses``
and ``subset`` configs and the card; the leaderboard's publisher (``tcmqa.hub``) appends the
``outputs``, ``results`` and ``probes`` configs (``tcmqa.card.APPENDED_CONFIGS``), files per evaluation.
A publish replaces the built configs' shards and never touches the appended configs' folders.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq
from datasets import Features
from huggingface_hub import DatasetCard, HfApi

from tcmqa.build import REPORT_NAME
from tcmqa.card import APPENDED_CONFIGS, BUILT_CONFIGS
from tcmqa.schema import FEATURES, RATERS_PER_ITEM
from tcmqa_metric import LETTERS


class InvalidTree(ValueError):
    """A tree that must not be published; the message lists every problem found."""


def _read(folder: Path) -> tuple[Features | None, list[dict]]:
    files = sorted(folder.glob("*.parquet"))
    if not files:
        return None, []
    features = Features.from_arrow_schema(pq.read_schema(files[0]))
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    return features, rows


def validate_tree(tree: str | Path) -> list[str]:
    """Every reason ``tree`` is not a publishable TCMQA repo; an empty list means it is."""
    tree = Path(tree)
    problems: list[str] = []
    readme = tree / "README.md"
    if not readme.is_file():
        return [f"{readme} is missing: rebuild the tree with `tcmqa build`"]
    declared = {c["config_name"]: c for c in (DatasetCard.load(readme).data.to_dict().get("configs") or [])}
    if "corpus" not in declared:
        problems.append("README.md declares no 'corpus' config")
    rows: dict[str, list[dict]] = {}
    for name in declared:
        if name not in FEATURES:
            problems.append(f"README.md declares unknown config '{name}'")
            continue
        features, rows[name] = _read(tree / name)
        if features is None:
            if name not in APPENDED_CONFIGS:  # declared for the Space to append to
                problems.append(f"config '{name}' is declared but {tree / name} has no Parquet files")
        elif features != FEATURES[name]:
            problems.append(
                f"config '{name}': Parquet columns {sorted(features)} do not match the "
                f"declared features {sorted(FEATURES[name])}"
            )
    for folder in (p for p in tree.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if folder.name not in declared:
            problems.append(f"folder '{folder.name}' is not declared in README.md configs")
    report_path = tree / REPORT_NAME
    if not report_path.is_file():
        problems.append(f"{REPORT_NAME} is missing")
    else:
        counts = json.loads(report_path.read_text(encoding="utf-8")).get("counts", {})
        for name, config_rows in rows.items():
            if name in counts and counts[name] != len(config_rows):
                problems.append(f"{REPORT_NAME} says {counts[name]} {name} rows, the Parquet holds {len(config_rows)}")
    corpus = rows.get("corpus", [])
    ids = [r["id"] for r in corpus]
    if len(set(ids)) != len(ids):
        problems.append(f"corpus has {len(ids) - len(set(ids))} duplicated ids")
    for r in corpus:
        if any(not (r["options"] or {}).get(k) for k in LETTERS):
            problems.append(f"corpus item {r['id']}: an option is empty")
        if not r["answer"] or r["answer"] != sorted(set(r["answer"])) or not set(r["answer"]) <= set(LETTERS):
            problems.append(f"corpus item {r['id']}: answer {r['answer']} is not a sorted set of A-E")
    known = set(ids)
    for name in ("responses", "subset", "outputs", "probes"):
        unknown = {r["item_id"] for r in rows.get(name, [])} - known
        if unknown:
            problems.append(f"{name} refers to {len(unknown)} item(s) not in corpus, e.g. {sorted(unknown)[:3]}")
    for r in rows.get("subset", []):
        raters = r.get("n_raters") or RATERS_PER_ITEM  # the item's own N (a Space may run blocks of 2 or 4)
        if len(r["practitioner_ids"]) != raters:
            problems.append(f"subset item {r['item_id']} has {len(r['practitioner_ids'])} raters, not {raters}")
    return problems


def publish(
    tree: str | Path, repo_id: str, dry_run: bool = False, api: HfApi | None = None, private: bool = False
) -> str | None:
    """Upload ``tree`` to the dataset repo ``repo_id`` in one commit; returns the commit URL.

    Stale shards of the built configs (``delete_patterns``) are deleted in the same commit, so those
    configs end up holding exactly the tree; the Space's appended configs (``outputs/``, ``results/``,
    ``probes/``) stay.
    """
    problems = validate_tree(tree)
    if problems:
        raise InvalidTree(f"refusing to publish {tree}:\n- " + "\n- ".join(problems))
    if dry_run:
        return None
    api = api or HfApi()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private)
    commit = api.upload_folder(
        folder_path=str(tree),
        repo_id=repo_id,
        repo_type="dataset",
        commit_message="Build TCMQA configs with `tcmqa build`",
        delete_patterns=delete_patterns(),
    )
    return getattr(commit, "commit_url", str(commit))


def delete_patterns() -> list[str]:
    """The Hub files a publish replaces: the shards of the configs ``tcmqa build`` owns, and no others.

    ``upload_folder`` matches these with ``fnmatch``, where ``*`` crosses ``/`` (``*/*.parquet`` would
    match ``results/…``, ``outputs/…`` and ``probes/…`` too), so every pattern is anchored on its config's
    folder.
    A built config absent from the tree is deleted too: the card no longer declares it.
    """
    return [f"{config}/*.parquet" for config in BUILT_CONFIGS]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tree", help="a tree written by `tcmqa build`")
    parser.add_argument("--repo", required=True, help="dataset repo id, e.g. TechTCM/TCMQA")
    parser.add_argument("--dry-run", action="store_true", help="validate and list the files, upload nothing")
    parser.add_argument("--private", action="store_true", help="create the repo as private if it is new")


def main(args: argparse.Namespace) -> int:
    try:
        url = publish(args.tree, args.repo, args.dry_run, private=args.private)
    except InvalidTree as err:
        print(err)
        return 2
    files = sorted(str(p.relative_to(args.tree)) for p in Path(args.tree).rglob("*") if p.is_file())
    if args.dry_run:
        print(f"{args.tree} is valid; would upload {len(files)} files to {args.repo} in one commit:")
        print("\n".join(f"  {f}" for f in files))
        kept = ", ".join(f"{config}/" for config in APPENDED_CONFIGS)
        print(f"replacing the Hub's files matching {', '.join(delete_patterns())}; {kept} stay")
    else:
        print(f"published {len(files)} files to {args.repo}: {url}")
    return 0
