"""``tcmqa build``: raw sources -> the exact Hub repo tree (Parquet per config, README card, report)."""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tcmqa.card import render_card
from tcmqa.errata import read_errata
from tcmqa.ingest import build_tables
from tcmqa.outdir import replace_output
from tcmqa.schema import FEATURES

REPORT_NAME = "build_report.json"


def parquet_path(out: Path, config: str) -> Path:
    return out / config / "test-00000-of-00001.parquet"


def write_config(out: Path, config: str, rows: list[dict]) -> Path:
    """One config's rows -> one Parquet file typed with the config's features."""
    folder = out / config
    if folder.exists():
        shutil.rmtree(folder)  # stale shards from an earlier build must not be picked up
    path = parquet_path(out, config)
    path.parent.mkdir(parents=True)
    # the features' Arrow schema carries the datasets metadata, and stays typed when rows is empty
    pq.write_table(pa.Table.from_pylist(rows, schema=FEATURES[config].arrow_schema), path)
    return path


def build(
    items: list[str],
    out: str | Path,
    platform_db: str | None = None,
    include_flagged: bool = False,
    store: str | None = None,
    errata: str | None = None,
) -> dict:
    """Build every config into ``out``; returns the report (also written to ``out/build_report.json``).

    ``store``: the fresh pool's store, whose retired items join the corpus with their release and retired dates.
    ``errata``: a file of errata (JSONL or Parquet, ``tcmqa.errata``) applied to the corpus and published as
    the ``errata`` config.
    """
    checked = read_errata(errata) if errata is not None else []
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    retired = []
    if store is not None:
        from tcmqa.store import open_store  # the database driver only when a store is read

        retired = open_store(store).retired_fresh_items()
    tables, report = build_tables(items, platform_db, include_flagged, retired=retired, errata=checked)
    for config, rows in tables.items():
        write_config(out, config, rows)
    report_dict = report.to_dict()
    (out / REPORT_NAME).write_text(json.dumps(report_dict, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / "README.md").write_text(render_card(report_dict), encoding="utf-8")
    return report_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--items",
        action="append",
        required=True,
        metavar="PATH",
        help="item records, JSONL or a JSON list (repeat for several files)",
    )
    parser.add_argument("--platform-db", metavar="PATH", help="the annotation platform's SQLite database")
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="where to write the Hub repo tree: a new or empty folder; an earlier build there is replaced",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="the fresh pool's store (a SQLite directory or a database URL): its retired items join the corpus",
    )
    parser.add_argument(
        "--errata",
        metavar="PATH",
        help="adjudicated errata (JSONL or Parquet, tcmqa.errata): applied to the corpus, published as `errata`",
    )
    parser.add_argument(
        "--include-flagged", action="store_true", help="keep items a practitioner flagged in the subset config"
    )


def main(args: argparse.Namespace) -> int:
    for path in [
        *args.items,
        *([args.platform_db] if args.platform_db else []),
        *([args.errata] if args.errata else []),
    ]:
        if not Path(path).is_file():
            raise SystemExit(f"tcmqa build: no such file: {path}")
    replace_output(args.out, REPORT_NAME, (*FEATURES, "README.md", REPORT_NAME), "tcmqa build")
    start = time.perf_counter()
    report = build(args.items, args.out, args.platform_db, args.include_flagged, args.store, args.errata)
    counts = ", ".join(f"{k} {v}" for k, v in report["counts"].items())
    print(f"built {args.out} in {time.perf_counter() - start:.1f}s: {counts}")
    for reason, n in report["dropped_by_reason"].items():
        print(f"  dropped {n:>6}  {reason}")
    for reason, n in report["notes_by_reason"].items():
        print(f"  noted   {n:>6}  {reason}")
    print(f"report: {Path(args.out) / REPORT_NAME}")
    return 0
