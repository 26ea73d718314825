"""``tcmqa pool``: the study lead's commands on the fresh pool (status, import, retire); no item text is printed.

    tcmqa pool status                                   items by state
    tcmqa pool import BATCH.jsonl --public TREE         externally written items (corpus shape) into review
    tcmqa pool retire --older-than 180                  accepted items older than 180 days made public
    tcmqa pool retire --keep-newest 300                 all but the newest 300 accepted items made public

The store is ``--store``, else ``$TCMQA_STORE``, else the local Space's; the study's N and the study
lead's accounts (who never review) are the Space's ``TCMQA_RATERS`` and ``TCMQA_ADMINS``. Retired items
join the next corpus revision through ``tcmqa build --store``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from tcmqa.fresh.pool import FreshPool, retire
from tcmqa.schema import RATERS_PER_ITEM
from tcmqa.store import open_store

DEFAULT_STORE = ".cache/space"  # the local Space's (tcmqa serve)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # no default shown: TCMQA_STORE may be a database URL with its password
    parser.add_argument(
        "--store", help=f"a SQLite directory or a database URL (default: $TCMQA_STORE or {DEFAULT_STORE})"
    )
    parser.add_argument("--by", default=None, help="who acts, recorded in the pool's events (default: your login)")
    sub = parser.add_subparsers(dest="pool_command", required=True)
    sub.add_parser("status", help="items by state")
    imported = sub.add_parser("import", help="externally written items (JSONL, the corpus's shape) into review")
    imported.add_argument("file", type=Path, metavar="FILE")
    imported.add_argument(
        "--public",
        action="append",
        required=True,
        metavar="PATH",
        help="the public corpus for the near-duplicate check: a tree built by `tcmqa build`, or item files (repeat)",
    )
    imported.add_argument(
        "--own-work",
        action="store_true",
        help="state that the batch's records are their writers' own unpublished work (else each record's own_work)",
    )
    retired = sub.add_parser("retire", help="make accepted items public")
    how = retired.add_mutually_exclusive_group(required=True)
    how.add_argument("--older-than", type=float, metavar="DAYS", help="accepted more than DAYS days ago")
    how.add_argument("--keep-newest", type=int, metavar="N", help="all but the newest N accepted items")


def public_items(paths: list[str]) -> list[dict]:
    """The public corpus's rows: from built trees (their corpus config) or item files (the builder's filter)."""
    from tcmqa.data import load_config
    from tcmqa.ingest import BuildReport, filter_items, read_item_records

    rows: list[dict] = []
    files = []
    for path in paths:
        if Path(path).is_dir():
            rows.extend(load_config(path, "corpus").to_list())
        elif Path(path).is_file():
            files.append(path)
        else:
            raise SystemExit(f"tcmqa pool import: no such tree or file: {path}")
    return rows + filter_items(read_item_records(files, BuildReport()), BuildReport())


def main(args: argparse.Namespace) -> int:
    store = open_store(args.store or os.environ.get("TCMQA_STORE") or DEFAULT_STORE)
    by = args.by or getpass.getuser()
    if args.pool_command == "status":
        counts = store.fresh_counts()
        print("  ".join(f"{state} {n}" for state, n in counts.items()), f"(pool version {store.fresh_pool_version()})")
        return 0
    if args.pool_command == "retire":
        try:
            ids = retire(store, by, older_than_days=args.older_than, keep_newest=args.keep_newest)
        except ValueError as err:
            print(f"tcmqa pool retire: {err}", file=sys.stderr)
            return 2
        print(f"retired {len(ids)} items{': ' + ', '.join(ids) if ids else ''}; `tcmqa build --store` publishes them")
        return 0
    if not args.file.is_file():
        print(f"tcmqa pool import: no such file: {args.file}", file=sys.stderr)
        return 2
    admins = [a.strip() for a in os.environ.get("TCMQA_ADMINS", "").split(",") if a.strip()]
    raters = int(os.environ.get("TCMQA_RATERS") or RATERS_PER_ITEM)
    pool = FreshPool(store, public_items(args.public), raters=raters, exclude=[by, *admins])
    report = pool.import_jsonl(args.file, by, own_work=args.own_work)
    for number, item_id in report.imported:
        print(f"line {number}: {item_id} in review")
    for number, errors in report.refused:
        print(f"line {number}: refused: " + "; ".join(f"{field}: {message}" for field, message in errors.items()))
    print(f"imported {len(report.imported)}, refused {len(report.refused)} of {args.file}")
    return 1 if report.refused else 0
