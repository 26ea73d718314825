"""A normal install (a wheel, not the editable checkout) carries everything the commands need."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from sources import DEMO_ITEMS, REPO


def test_the_wheel_runs_build_from_anywhere(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a copy, so the build's scratch folders stay out of the checkout
    for folder in ("eval", "metric"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for file in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / file, source / file)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(source),
            "-w",
            str(tmp_path / "dist"),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    [wheel] = (tmp_path / "dist").glob("tcmqa-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "tcmqa_metric.py",
        "tcmqa/card_template.md",
        "tcmqa/data/reported.csv",
        "tcmqa/__main__.py",
        "tcmqa/engines/transformers.py",
        "tcmqa/leaderboard/board.py",
        "tcmqa/tasks/lm_eval/_tcmqa.yaml",  # lm-eval's --include_path (tcmqa.tasks.lm_eval_path)
        "tcmqa/tasks/lm_eval/tcmqa_gen.yaml",
        "tcmqa/tasks/lm_eval/tcmqa_loglik.yaml",
        "tcmqa/tasks/lm_eval/utils.py",
        "tcmqa/tasks/lighteval_tcmqa.py",
    } <= names
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    # the installed copy comes first on the path, and the working directory is not the checkout
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import tcmqa, tcmqa_metric; print(tcmqa.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(site / "tcmqa" / "__init__.py")
    built = subprocess.run(
        [sys.executable, "-m", "tcmqa", "build", "--items", str(DEMO_ITEMS), "--out", "tree"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert "corpus 32" in built.stdout and (tmp_path / "tree" / "README.md").read_text().startswith("---\n")
