"""``bench/gpu.py --dry-run``: the GPU check runs end to end on the CPU and prints its table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COLUMNS = [
    "engine",
    "dtype",
    "items",
    "items/s",
    "load s",
    "matmul TFLOP/s",
    "reached TFLOP/s",
    "fraction",
    "38,279 items",
]
PROBE_COLUMNS = ["engine", "probe", "items", "items/s", "38,279 items", "default"]


def test_gpu_bench_dry_run_prints_the_table(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TCMQA_CACHE": str(tmp_path)}
    command = [sys.executable, str(REPO / "bench" / "gpu.py"), "--dry-run", "--items", "8", "--chunk-size", "4"]
    command += ["--work", str(tmp_path / "work"), "--items-file", str(tmp_path / "absent.jsonl")]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    second = next(k for k in range(1, len(lines)) if lines[k].startswith("| engine"))  # the probes' table
    lines, probe_table = lines[:second], lines[second:]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == COLUMNS
    rows = {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}
    assert all(len(cells) == len(COLUMNS) for cells in rows.values())
    hf = rows["transformers"]
    assert hf[1] == "float32" and hf[2] == "8"
    assert float(hf[3]) > 0 and float(hf[5]) > 0 and float(hf[6]) > 0
    assert hf[7].endswith("%") and hf[8].count(":") == 2  # a fraction, a projected h:mm:ss
    assert "synthetic items with the sample's length distribution" in done.stdout  # no items file: synthetic
    # the probes' table, timed in the same engine load
    assert [c.strip() for c in probe_table[0].strip("|").split("|")] == PROBE_COLUMNS
    probes = {
        cells[1]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in probe_table[2:])
    }
    assert set(probes) == {"rotation", "order"}
    for cells in probes.values():
        assert cells[0] == "transformers" and cells[2] == "4" and float(cells[3]) > 0
        assert cells[4].count(":") == 2 and cells[5].count(":") == 2
