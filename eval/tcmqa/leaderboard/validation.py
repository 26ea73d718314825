"""Submission checks: each refusal is one specific message, and nothing is enqueued unless all pass.

Checks run cheapest first and stop at the first failure. Hub facts come from a few ``HfApi`` calls
(``model_info``, ``auth_check``, ``hf_hub_download`` of tokenizer_config.json), so tests pass a thin
fake. A local model folder is accepted only in local mode; it is pinned by ``tcmqa.models.local_revision``,
the revision the harness records for it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Any

from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HFValidationError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from tcmqa.models import count_parameters, local_revision
from tcmqa.store import DuplicateError, Job, Store

# Decoder architectures that both engines (vLLM and transformers) load as causal LMs.
SUPPORTED_ARCHITECTURES = frozenset(
    {
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Gemma3nForConditionalGeneration",
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Olmo2ForCausalLM",
        "Olmo3ForCausalLM",
        "OlmoForCausalLM",
        "Phi3ForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "GraniteForCausalLM",
        "InternLM2ForCausalLM",
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "GlmForCausalLM",
        "Glm4ForCausalLM",
        "ChatGLMModel",
        "BaichuanForCausalLM",
        "YiForCausalLM",
        "SmolLM3ForCausalLM",
    }
)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
LOCAL_PREFIXES = ("/", "./", "../", "~")


class Rejected(Exception):
    """A submission refused, with the message shown to the submitter."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """The Space's configurable limits (see Settings for their environment variables)."""

    hosted: bool
    protocol: str
    max_params_b: float = 16.0
    remote_code_allowlist: frozenset[str] = frozenset()
    rate_limit: int = 5
    rate_window_s: float = 24 * 3600


@dataclasses.dataclass(frozen=True)
class Accepted:
    """A submission that passed: the model pinned to a commit (or a folder fingerprint)."""

    model: str
    revision: str
    params_b: float
    family: str
    path: str | None = None

    def meta(self) -> dict[str, Any]:
        meta = {"params_b": self.params_b, "family": self.family}
        return meta | ({"path": self.path} if self.path else {})


def submitter(profile: Any, policy: Policy) -> str:
    """Who submits: the OAuth user in hosted mode (required), "local" otherwise."""
    if not policy.hosted:
        return "local"
    if profile is None:
        raise Rejected("Sign in with Hugging Face first: the leaderboard only accepts signed-in submissions.")
    return profile.username


def validate(model_id: str, revision: str, *, user: str, api: Any, store: Store, policy: Policy) -> Accepted:
    """Every check before enqueueing; raises Rejected with the first failure's message."""
    model_id, revision = (model_id or "").strip(), (revision or "").strip()
    if not model_id:
        raise Rejected("Enter a model id, e.g. Qwen/Qwen2.5-0.5B-Instruct.")
    since = time.time() - policy.rate_window_s
    if policy.hosted and store.submitted_since(user, since) >= policy.rate_limit:
        hours = policy.rate_window_s / 3600
        raise Rejected(f"Rate limit: {policy.rate_limit} submissions per {hours:g} h per user; try again later.")
    if model_id.startswith(LOCAL_PREFIXES) or Path(model_id).is_dir():
        if policy.hosted:
            raise Rejected("Local folders are accepted only when the Space runs locally; enter a Hub model id.")
        accepted = _check_folder(Path(model_id).expanduser(), policy)
    else:
        accepted = _check_hub(model_id, revision or "main", api, policy)
    duplicate = store.find(accepted.model, accepted.revision, policy.protocol)
    if duplicate:
        raise Rejected(_duplicate_message(duplicate))
    return accepted


def enqueue(accepted: Accepted, *, user: str, store: Store, policy: Policy) -> Job:
    """Submit; a concurrent duplicate that slipped past ``validate`` is refused here atomically."""
    try:
        return store.submit(accepted.model, accepted.revision, policy.protocol, user, accepted.meta())
    except DuplicateError as err:
        raise Rejected(_duplicate_message(err.job)) from err


def _duplicate_message(job: Job) -> str:
    return (
        f"{job.model} at {job.revision[:12]} under protocol {job.protocol} is already {job.status} "
        f"as job {job.id}; follow it in the Queue tab. Only a FAILED evaluation can be resubmitted."
    )


# ------------------------------------------------------------------------------------------------
# Hub models
# ------------------------------------------------------------------------------------------------


def _check_hub(model_id: str, revision: str, api: Any, policy: Policy) -> Accepted:
    if model_id.count("/") != 1:
        raise Rejected(f"'{model_id}' is not a model id: use the form owner/name, e.g. google/gemma-3-1b-it.")
    try:
        validate_repo_id(model_id)
    except HFValidationError as err:
        raise Rejected(f"'{model_id}' is not a valid model id: {err}") from err
    try:
        info = api.model_info(model_id, revision=revision, securityStatus=False, files_metadata=False)
    except RepositoryNotFoundError as err:
        raise Rejected(f"Model {model_id} was not found on the Hub (or it is private).") from err
    except RevisionNotFoundError as err:
        raise Rejected(
            f"Revision '{revision}' does not exist in {model_id}: give a branch, tag or commit sha."
        ) from err
    sha = info.sha
    if not sha or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise Rejected(f"Revision '{revision}' of {model_id} did not resolve to a commit sha.")
    if info.gated:
        try:
            api.auth_check(model_id)
        except GatedRepoError as err:
            raise Rejected(
                f"{model_id} is gated and this leaderboard has not been granted access; it cannot download the weights."
            ) from err
    files = [s.rfilename for s in (info.siblings or [])]
    _check_weights(model_id, files)
    config = info.config or {}
    _check_remote_code(model_id, config, policy)
    params = getattr(info.safetensors, "total", None) if info.safetensors else None
    params_b = _check_params(model_id, params, policy)
    if not _has_chat_template(files, lambda: _hub_tokenizer_config(api, model_id, sha)):
        raise Rejected(
            f"{model_id} has no chat template (tokenizer_config.json 'chat_template' or chat_template.jinja); "
            "the protocol renders every prompt with the model's own template."
        )
    _check_architecture(model_id, config)
    return Accepted(model_id, sha, params_b, _family(config))


def _hub_tokenizer_config(api: Any, model_id: str, sha: str) -> dict[str, Any]:
    try:
        return json.loads(Path(api.hf_hub_download(model_id, "tokenizer_config.json", revision=sha)).read_text())
    except (EntryNotFoundError, ValueError):
        return {}


# ------------------------------------------------------------------------------------------------
# Local folders (local mode only)
# ------------------------------------------------------------------------------------------------


def _check_folder(path: Path, policy: Policy) -> Accepted:
    if not (path / "config.json").is_file():
        raise Rejected(f"{path} is not a model folder: it has no config.json.")
    files = [p.name for p in path.iterdir() if p.is_file()]
    _check_weights(str(path), files)
    config = json.loads((path / "config.json").read_text())
    _check_remote_code(path.name, config, policy)
    params_b = _check_params(str(path), count_parameters(path), policy)
    tokenizer_config = path / "tokenizer_config.json"
    if not _has_chat_template(
        files, lambda: json.loads(tokenizer_config.read_text()) if tokenizer_config.exists() else {}
    ):
        raise Rejected(f"{path} has no chat template (tokenizer_config.json 'chat_template' or chat_template.jinja).")
    _check_architecture(str(path), config)
    return Accepted(path.name, local_revision(path), params_b, _family(config), str(path.resolve()))


# ------------------------------------------------------------------------------------------------
# Shared rules
# ------------------------------------------------------------------------------------------------


def _check_weights(name: str, files: list[str]) -> None:
    if any(f.endswith(".safetensors") for f in files):
        return
    if any(f.endswith(PICKLE_SUFFIXES) for f in files):
        raise Rejected(
            f"{name} has only pickle weights (.bin/.pt); the leaderboard loads safetensors only. "
            "Convert the weights to safetensors and resubmit."
        )
    raise Rejected(f"{name} has no weight files.")


def _check_remote_code(name: str, config: dict[str, Any], policy: Policy) -> None:
    if not config.get("auto_map"):
        return
    owner = name.split("/")[0] + "/*"
    if name not in policy.remote_code_allowlist and owner not in policy.remote_code_allowlist:
        raise Rejected(
            f"{name} needs custom code (auto_map in config.json); remote code runs only for allowlisted models."
        )


def _check_params(name: str, params: int | None, policy: Policy) -> float:
    if not params:
        raise Rejected(f"{name}: the parameter count is not available from its safetensors metadata.")
    params_b = round(params / 1e9, 2)
    if params / 1e9 > policy.max_params_b:
        raise Rejected(f"{name} has {params_b:g}B parameters; this Space's GPU takes at most {policy.max_params_b:g}B.")
    return params_b


def _has_chat_template(files: list[str], tokenizer_config: Any) -> bool:
    if "chat_template.jinja" in files or "chat_template.json" in files:
        return True
    return "tokenizer_config.json" in files and bool(tokenizer_config().get("chat_template"))


def _check_architecture(name: str, config: dict[str, Any]) -> None:
    architectures = config.get("architectures") or []
    if not set(architectures) & SUPPORTED_ARCHITECTURES:
        shown = ", ".join(architectures) or "none declared"
        raise Rejected(f"{name}: architecture {shown} is not supported by the evaluation engines.")


def _family(config: dict[str, Any]) -> str:
    return str(config.get("model_type") or "unknown")
