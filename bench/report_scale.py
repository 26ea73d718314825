"""Bench: ``tcmqa report`` at scale: M = 100, 300 and 1,000 SIMULATED models x 38,279 items.

    .venv/bin/python bench/report_scale.py [--models 100 300 1000] [--root DIR] [--n-boot 1000] [--audit-models K]

One SIMULATED study of max(M) models is written once (``tcmqa simulate``'s own code, the paper's 29
reported rows cycled with jittered targets; cached under ``--root``); the report over its first M runs
is then made for each M in a fresh child process (so each peak RSS is that report's alone), timing
each stage: load (``load_study``: the outputs queried where they lie), the key audit (``tcmqa.suspects.audit``
over at most ``--audit-models`` models, default its own bound), tables, figures (their data, drawing and
PNG) and write (CSV, JSON, report.md). Prints one row per M: rows/s (output rows per
second of the whole report), the process's CPU seconds (all threads), its peak RSS, and the 1-minute
load average at the end (on a shared machine wall time grows with it); then the CPU. Targets at
M = 1,000 on 2 cores: under 2 minutes and 4 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tcmqa.suspects import AUDIT_MODELS

REPO = Path(__file__).resolve().parents[1]


def scaled_models(m: int, seed: int = 0) -> pd.DataFrame:
    """``m`` simulated models: the paper's 29 rows, then copies of them (``<name>-v<k>``) with targets
    jittered by up to 3 points, so that accuracies differ as on a real board."""
    from tcmqa.simulate import reported_models

    base = reported_models()[["model", "family", "params_b", "single", "multi"]]
    rows = base.iloc[np.arange(m) % len(base)].reset_index(drop=True)
    copy = np.arange(m) // len(base)
    rows["model"] = [name if k == 0 else f"{name}-v{k}" for name, k in zip(rows["model"], copy)]
    jitter = np.random.default_rng(seed).uniform(-3, 3, (m, 2)) * (copy > 0)[:, None]
    rows[["single", "multi"]] = np.clip(rows[["single", "multi"]].to_numpy() + jitter, 0.5, 99.5)
    return rows


def study_runs(root: Path, m: int) -> tuple[Path, list[Path]]:
    """The data tree and the first ``m`` run folders of the cached study of at least ``m`` models."""
    from tcmqa.simulate import _slug, simulate

    study = root / "study"
    models = json.loads((study / "models.json").read_text()) if (study / "models.json").is_file() else []
    if len(models) < m:
        start = time.perf_counter()
        frame = scaled_models(m)
        simulate(study, models=frame)
        models = frame["model"].tolist()
        (study / "models.json").write_text(json.dumps(models))
        print(f"simulated {m} models x 38,279 items in {time.perf_counter() - start:.0f} s (not part of the report)")
    return study / "data", [study / "runs" / _slug(name) for name in models[:m]]


def measure(root: Path, m: int, n_boot: int, audit_models: int) -> dict:
    """One report over ``m`` runs, in this process: seconds per stage and the peak RSS (GB)."""
    from tcmqa.report import is_simulated, write_report
    from tcmqa.study import load_study
    from tcmqa.suspects import audit

    data, runs = study_runs(root, m)
    start = time.perf_counter()
    study = load_study(data, runs)
    timings = {"load": time.perf_counter() - start}
    suspects = audit(study, data, max_models=audit_models)
    timings["audit"] = time.perf_counter() - start - timings["load"]
    simulated = is_simulated(data, runs[:1])
    write_report(study, root / f"report-{m}", n_boot, simulated=simulated, timings=timings, suspects=suspects)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "models": m,
        "rows": int(study.covered.sum()),
        **timings,
        "total": time.perf_counter() - start,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_gb": usage.ru_maxrss / 2**20,
        "loadavg": os.getloadavg()[0],
    }


def cpu() -> str:
    info = Path("/proc/cpuinfo").read_text()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    return f"{name}, {len([line for line in info.splitlines() if line.startswith('processor')])} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--root", type=Path, default=REPO / ".cache" / "bench" / "report-scale")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--audit-models", type=int, default=AUDIT_MODELS, help="the key audit's bound on models")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: one report, JSON on stdout
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.root, args.one, args.n_boot, args.audit_models)))
        return
    study_runs(args.root, max(args.models))  # simulate once, before any timing
    print(f"CPU: {cpu()}")
    print(f"{'models':>6} {'rows':>11} {'load s':>7} {'audit s':>7} {'tables s':>8} {'figures s':>9} {'write s':>7} "
          f"{'total s':>7} {'rows/s':>9} {'CPU s':>6} {'peak GB':>7} {'loadavg':>7}")  # fmt: skip
    for m in args.models:
        child = [sys.executable, __file__, "--one", str(m), "--root", str(args.root), "--n-boot", str(args.n_boot),
                 "--audit-models", str(args.audit_models)]  # fmt: skip
        r = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        print(
            f"{r['models']:>6} {r['rows']:>11,} {r['load']:>7.1f} {r['audit']:>7.1f} {r['tables']:>8.1f} "
            f"{r['figures']:>9.1f} {r['write']:>7.1f} {r['total']:>7.1f} {r['rows'] / r['total']:>9,.0f} "
            f"{r['cpu']:>6.0f} {r['peak_gb']:>7.2f} {r['loadavg']:>7.1f}"
        )


if __name__ == "__main__":
    main()
