"""Time ``tcmqa build`` over the real platform sample: the whole command (interpreter start, imports,
build, write) and, in process, each stage of the build. Target: the whole command under 10 s.

    .venv/bin/python bench/build.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(os.environ.get("TCMQA_SAMPLE", REPO.parent / "shared" / "data" / "tcmqa-platform-sample"))
ITEMS, DB = SAMPLE / "items.jsonl", SAMPLE / "annotation_platform.sqlite"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not ITEMS.is_file():
        sys.exit(f"no platform sample at {SAMPLE} (set TCMQA_SAMPLE)")
    with tempfile.TemporaryDirectory() as tmp:
        walls = []
        for i in range(args.repeats):
            start = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tcmqa",
                    "build",
                    "--items",
                    str(ITEMS),
                    "--platform-db",
                    str(DB),
                    "--out",
                    f"{tmp}/cli{i}",
                ],
                check=True,
                capture_output=True,
            )
            walls.append(time.perf_counter() - start)

        start = time.perf_counter()
        from tcmqa.build import build, write_config  # noqa: F401  (imports timed on their own)
        from tcmqa.ingest import build_tables

        import_s = time.perf_counter() - start
        start = time.perf_counter()
        tables, report = build_tables([ITEMS], DB)
        tables_s = time.perf_counter() - start
        start = time.perf_counter()
        for config, rows in tables.items():
            write_config(Path(tmp) / "stages", config, rows)
        write_s = time.perf_counter() - start
    records = report.items_read
    responses = report.counts["responses"] + sum(
        d["reason"] in ("item_dropped", "unknown_item") for d in report.dropped
    )
    print(f"tcmqa build over {records:,} item records + {responses:,} responses")
    print(
        f"  whole command: best {min(walls):.2f} s, "
        f"median {sorted(walls)[len(walls) // 2]:.2f} s over {len(walls)} runs"
    )
    print(
        f"  in process: import {import_s:.2f} s, read+filter+responses+subset {tables_s:.3f} s "
        f"({records / tables_s:,.0f} records/s), write Parquet {write_s:.3f} s"
    )


if __name__ == "__main__":
    main()
