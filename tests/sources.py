"""Raw sources for tests: the real sample's paths, the demo items, and platform databases.

Importable from test modules (``from sources import ...``); the fixtures in conftest.py use it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import sys
from pathlib import Path

from tcmqa.ingest import PLATFORM_SCHEMA  # the platform's format has one home

REPO = Path(__file__).resolve().parents[1]
DEMO_ITEMS = REPO / "demo" / "items.jsonl"
SAMPLE = Path(os.environ.get("TCMQA_SAMPLE", REPO.parent / "shared" / "data" / "tcmqa-platform-sample"))
SAMPLE_ITEMS = SAMPLE / "items.jsonl"
SAMPLE_DB = SAMPLE / "annotation_platform.sqlite"
LOADING_SCRIPT = REPO / "loading_script" / "tcmqa.py"


def write_platform_db(path: Path, items: list[dict], interactions: list[tuple]) -> Path:
    """A database in the annotation platform's format (the columns the builder reads)."""
    con = sqlite3.connect(path)
    con.executescript(PLATFORM_SCHEMA)
    con.executemany(
        "INSERT INTO questions VALUES (?, ?, ?, ?)",
        [(r["question_id"], r["question"], json.dumps(r["choices"]), r["answer"]) for r in items],
    )
    users = sorted({row[0] for row in interactions})
    con.executemany("INSERT INTO user VALUES (?, ?, ?)", [(u, f"rater{u}", "[]") for u in users])
    con.executemany("INSERT INTO user_interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", interactions)
    con.commit()
    con.close()
    return path


def demo_interactions(items: list[dict]) -> list[tuple]:
    """Three raters (block 0) answer every demo item; rater u is right unless (i + u) % 3 == 0.

    Single answers are stored as a bare letter and multi answers as a JSON list, as the platform
    did; item 4 is flagged by rater 2.
    """
    rows = []
    for u in (1, 2, 3):
        for i, item in enumerate(items):
            right = (i + u) % 3 != 0
            letters = list(item["answer"]) if right else (["E"] if item["answer"] != "E" else ["A"])
            selected = json.dumps(letters) if len(letters) > 1 else letters[0]
            categories = json.dumps([str(1 + (i % 10))] + ([str(1 + ((i + 3) % 10))] if u == 3 else []))
            rows.append(
                (
                    u,
                    item["question_id"],
                    int(right),
                    selected,
                    10.0 + i,
                    0.0,
                    categories,
                    1 + (i + u) % 5,
                    int(i == 4 and u == 2),
                )
            )
    return rows


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def loading_script():
    """``loading_script/tcmqa.py`` loaded by path, as datasets users load a builder file.

    It is loaded under another name: as ``tcmqa`` it would shadow the package it imports.
    """
    spec = importlib.util.spec_from_file_location("tcmqa_loading_script", LOADING_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def wrong_answer(key: list[str]) -> list[str]:
    """A wrong answer of the key's kind: one letter for a single-answer item, two for a multi-answer one (the
    Space records a multi-answer item's answer only with two or more letters)."""
    wrong = ["E"] if len(key) == 1 else ["D", "E"]
    return wrong if sorted(key) != wrong else ["A", "B"][: len(wrong)]


def half_rated_tree(root: Path) -> Path:
    """A tree of the demo items whose imported study (block 0, three raters) rates the first 16 only: the rest
    make fresh blocks for the Space's practitioners."""
    from tcmqa.build import build

    items = read_jsonl(DEMO_ITEMS)
    rated = {i["question_id"] for i in items[:16]}
    db = write_platform_db(root / "p.sqlite", items, [r for r in demo_interactions(items) if r[1] in rated])
    build([str(DEMO_ITEMS)], root / "tree", str(db))
    return root / "tree"
