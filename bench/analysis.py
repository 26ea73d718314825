"""Bench: the full report over a full-scale SIMULATED study (38,279 items x 29 models, ~1.1 M output rows).

    .venv/bin/python bench/analysis.py [--study DIR] [--out DIR]

Simulates the study first unless ``--study`` points at one (``tcmqa simulate --out DIR``). Prints
seconds per stage (import, load, tables+figures) and the peak resident memory of this process.
Targets: the report under 60 s and under 4 GB.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

start = time.perf_counter()
from tcmqa.report import is_simulated, write_report  # noqa: E402
from tcmqa.study import load_study  # noqa: E402

import_s = time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, help="a simulated study (default: simulate one into a temp dir)")
    parser.add_argument("--out", type=Path, help="report folder (default: a temp dir)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tcmqa-bench-"))
    study_dir = args.study
    if study_dir is None:
        from tcmqa.simulate import simulate

        t = time.perf_counter()
        study_dir = simulate(tmp / "study")
        print(f"simulate   {time.perf_counter() - t:6.1f} s  (not part of the report)")
    t = time.perf_counter()
    study = load_study(study_dir / "data", [study_dir / "runs"])
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    write_report(study, args.out or tmp / "report", simulated=is_simulated(study_dir / "data"))
    report_s = time.perf_counter() - t
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    rows = int(study.covered.sum())
    print(f"import     {import_s:6.1f} s")
    print(
        f"load       {load_s:6.1f} s  ({rows:,} output rows, {len(study.models)} models, {len(study.item_ids):,} items)"
    )
    print(f"report     {report_s:6.1f} s  (tables, bootstrap, figures)")
    print(
        f"total      {load_s + report_s:6.1f} s  load + report (target < 60 s); "
        f"peak RSS {peak_gb:.2f} GB (target < 4 GB)"
    )


if __name__ == "__main__":
    main()
