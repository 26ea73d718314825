"""What the CPU benches share: the environment vLLM runs in here, the real sample tree, the CPU's name.

The benches run as scripts (``python bench/NAME.py``), so this folder is on ``sys.path`` and they
``from common import ...``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(os.environ.get("TCMQA_SAMPLE", REPO.parent / "shared" / "data" / "tcmqa-platform-sample"))
TREE = REPO / ".cache" / "bench" / "sample-tree"
# vLLM on CPU as FIELD-NOTES measured it (both cores, 2 GiB of KV cache), caches inside the work tree, no Hub
ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_CACHE_ROOT": str(REPO / ".cache" / "vllm"),
    "TORCHINDUCTOR_CACHE_DIR": str(REPO / ".cache" / "inductor"),
    "TCMQA_CACHE": str(REPO / ".cache"),
}


def set_env() -> None:
    """``ENV``, where the caller has not set a variable itself."""
    for key, value in ENV.items():
        os.environ.setdefault(key, value)


def sample_tree() -> Path:
    """The real platform sample, built once by ``tcmqa build`` (cached, git-ignored)."""
    if not (TREE / "corpus").is_dir():
        from tcmqa.build import build

        if not (SAMPLE / "items.jsonl").is_file():
            sys.exit(f"the real TCMQA platform sample is not at {SAMPLE} (set TCMQA_SAMPLE)")
        build([str(SAMPLE / "items.jsonl")], TREE, str(SAMPLE / "annotation_platform.sqlite"))
    return TREE


def sample_items(n: int) -> list[dict[str, Any]]:
    """The first ``n`` scorable items of the real sample, as the harness selects them."""
    from tcmqa.harness import EvalConfig, select_items

    items, _, _ = select_items(EvalConfig(model="-", data=str(sample_tree()), limit=n))
    return items


def cpu_name() -> str:
    """The CPU's model name and whether it computes bf16 natively (the numbers depend on both)."""
    from tcmqa.engines.base import native_bf16

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    return f"{name} ({'native bf16' if native_bf16() else 'no native bf16: bf16 emulated'})"
