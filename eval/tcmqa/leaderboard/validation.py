"""Submission checks: each refusal is one specific message, and nothing is enqueued unless all pass.

Checks run cheapest first and stop at the first failure. Hub facts come from a few ``HfApi`` calls
(``model_info``, ``auth_check``, ``hf_hub_download`` of tokenizer_config.json), so tests pass a thin
fake. A local model folder is accepted only in local mode; it is pinned by ``tcmqa.models.local_revision``,
the revision the harness records for it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
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

from tcmqa import forms
from tcmqa.fresh.scores import release_date
from tcmqa.models import count_parameters, local_revision
from tcmqa.results import canonical_family
from tcmqa.store import EVAL, FINISHED, QUICK, DuplicateError, Job, RateLimited, Store

# Decoder architectures that both engines (vLLM and transformers) load as causal LMs without remote code
# (tests/test_validation.py holds this list to transformers' own mapping).
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
        "DeepseekV2ForCausalLM",
        "DeepseekV3ForCausalLM",
        "GlmForCausalLM",
        "Glm4ForCausalLM",
        "SmolLM3ForCausalLM",
    }
)
# Quantization formats vLLM loads from the checkpoint alone (no extra kernels package to install).
SUPPORTED_QUANTIZATION = frozenset({"fp8", "compressed-tensors"})
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
LOCAL_PREFIXES = ("/", "./", "../", "~")
MAX_MODEL_ID = 4096  # characters: PATH_MAX (a Hub id has at most 96)
MAX_NAME = 255  # characters of one folder name (NAME_MAX), or of a Hub id's owner or name
MAX_REVISION = 255  # a branch, tag or commit sha
MAX_JOB_ID = 64  # characters of a typed job id (the store's are 24)
KINDS = {EVAL: "Full evaluation", QUICK: "Quick estimate"}  # what the submission form offers (job kinds)


class Rejected(Exception):
    """A submission refused, with the message shown to the submitter."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """The Space's configurable limits (see Settings for their environment variables)."""

    hosted: bool
    protocol: str
    max_params_b: float = 16.0
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
    gated: bool = False  # the worker gives the harness a read token for gated models only
    released: str | None = None  # YYYY-MM-DD: given at submission, else the Hub repo's creation ("after release")

    def meta(self) -> dict[str, Any]:
        meta = {"params_b": self.params_b, "family": self.family}
        meta |= {"released": self.released} if self.released else {}
        return meta | ({"path": self.path} if self.path else {}) | ({"gated": True} if self.gated else {})


def submitter(profile: Any, policy: Policy) -> str:
    """Who submits: the OAuth user in hosted mode (required), "local" otherwise."""
    if not policy.hosted:
        return "local"
    if profile is None:
        raise Rejected("Sign in with Hugging Face first: the leaderboard only accepts signed-in submissions.")
    return profile.username


def validate(
    model_id: str,
    revision: str,
    *,
    user: str,
    api: Any,
    store: Store,
    policy: Policy,
    released: str = "",
    kind: str = EVAL,
) -> Accepted:
    """Every check before enqueueing; raises Rejected with the first failure's message. The form of what was
    typed is checked first, before any file-system, database or Hub call (:func:`check_form`).

    ``released``: the model's release date as the submitter gives it (YYYY-MM-DD, optional); without it a Hub
    model's is its repository's creation date. "Fresh after release" counts the pool items accepted after it.
    ``kind``: ``EVAL`` (Full) or ``QUICK`` (an estimate of Full from the anchor items, refused for a model that
    has a full evaluation, pending, running or finished, or a quick one).
    """
    check_kind(kind)
    model_id, revision = check_form(model_id, revision)
    if not model_id:
        raise Rejected("Enter a model id, e.g. Qwen/Qwen2.5-0.5B-Instruct.")
    given = _check_released(released)
    if policy.hosted and store.submitted_within(user, policy.rate_window_s) >= policy.rate_limit:
        raise Rejected(_rate_limit_message(policy))  # cheap early answer; enqueue enforces it atomically
    if model_id.startswith(LOCAL_PREFIXES) or Path(model_id).is_dir():
        if policy.hosted:
            raise Rejected("Local folders are accepted only when the Space runs locally; enter a Hub model id.")
        accepted = _check_folder(Path(model_id).expanduser(), policy)
    else:
        accepted = _check_hub(model_id, revision or "main", api, policy)
    duplicate = store.find(accepted.model, accepted.revision, policy.protocol)
    if duplicate is None and kind == QUICK:
        duplicate = store.find_quick(accepted.model, accepted.revision, policy.protocol)
    if duplicate:
        raise Rejected(_duplicate_message(duplicate, kind))
    return dataclasses.replace(accepted, released=given or accepted.released)


def check_kind(kind: str) -> str:
    """A job kind the form offers (:data:`KINDS`), or Rejected naming them."""
    if kind not in KINDS:
        offered = ", ".join(f"{k!r} ({label})" for k, label in KINDS.items())
        raise Rejected(f"The kind of evaluation is one of {offered}, not {forms.shown(str(kind))}.")
    return kind


def _check_released(text: str) -> str | None:
    """The submitted release date as YYYY-MM-DD, None when not given; a malformed or future one is refused."""
    if not (text or "").strip():
        return None
    try:
        released = release_date(text.strip()[:40])
    except ValueError:
        raise Rejected(f"The release date is YYYY-MM-DD, e.g. 2025-04-29, not {text.strip()[:40]!r}.") from None
    if released is not None and released > dt.datetime.now(dt.timezone.utc).date().isoformat():
        raise Rejected(f"The release date {released} is in the future; give the date the model was released.")
    return released


def check_form(model_id: str | None, revision: str | None) -> tuple[str, str]:
    """The model id and revision stripped, or Rejected: control characters, or longer than a path may be
    (:data:`MAX_MODEL_ID` characters, :data:`MAX_NAME` a folder name) or a revision (:data:`MAX_REVISION`), so
    ``Path.is_dir`` never meets a name the OS refuses and a message never repeats a long value whole."""
    try:
        model_id = forms.checked("model id", model_id, max_chars=MAX_MODEL_ID)
        revision = forms.checked("revision", revision, max_chars=MAX_REVISION)
    except forms.FormError as err:
        raise Rejected(f"{err} (a model id is owner/name or a local folder).") from None
    if any(len(part) > MAX_NAME for part in model_id.split("/")):
        raise Rejected(
            f"The model id {forms.shown(model_id)} has a part longer than {MAX_NAME} characters: no Hub id or "
            "folder name is; give owner/name or a local folder."
        )
    return model_id, revision


def enqueue(
    accepted: Accepted, *, user: str, store: Store, policy: Policy, kind: str = EVAL, meta: dict[str, Any] | None = None
) -> Job:
    """Submit a job of ``kind``; a concurrent duplicate, or a submission past the rate limit, is refused here
    atomically. ``meta``: added to the accepted model's."""
    limit = {"rate_limit": policy.rate_limit, "rate_window_s": policy.rate_window_s} if policy.hosted else {}
    meta = accepted.meta() | (meta or {})
    try:
        return store.submit(accepted.model, accepted.revision, policy.protocol, user, meta, kind=kind, **limit)
    except DuplicateError as err:
        raise Rejected(_duplicate_message(err.job, kind)) from err
    except RateLimited as err:
        raise Rejected(_rate_limit_message(policy)) from err


def upgrade(job_id: str | None, *, user: str, store: Store, policy: Policy) -> Job:
    """Queue the full evaluation of a finished quick job's model at its revision (validated when the quick job
    was submitted); its row replaces the estimate on the board when it lands. Rejected: no such job, not a
    finished quick job, or a full evaluation already live."""
    try:
        job_id = forms.checked("job id", job_id, max_chars=MAX_JOB_ID)
    except forms.FormError as err:
        raise Rejected(str(err)) from None
    if not job_id:
        raise Rejected("Enter the job id of a finished quick estimate to upgrade it to a full evaluation.")
    quick = store.get(job_id)
    if quick is None:
        raise Rejected(f"No job {forms.shown(job_id)}.")
    if quick.kind != QUICK:
        raise Rejected(f"Job {quick.id} is not a quick estimate: there is nothing to upgrade.")
    if quick.status != FINISHED:
        raise Rejected(
            f"Job {quick.id} is {quick.status}: a quick estimate is upgraded once it has FINISHED; or submit "
            f"{quick.model} for a full evaluation."
        )
    meta = {k: v for k, v in quick.meta.items() if k != "estimate"}
    accepted = Accepted(
        quick.model,
        quick.revision,
        meta.get("params_b", 0.0),
        meta.get("family", ""),
        path=meta.get("path"),
        gated=bool(meta.get("gated")),
        released=meta.get("released"),
    )
    return enqueue(accepted, user=user, store=store, policy=policy, meta={"upgrades": quick.id})


def _rate_limit_message(policy: Policy) -> str:
    hours = policy.rate_window_s / 3600
    return f"Rate limit: {policy.rate_limit} submissions per {hours:g} h per user; try again later."


def _duplicate_message(job: Job, kind: str = EVAL) -> str:
    """Why a submission of ``kind`` is refused, ``job`` being the live one of its key."""
    where = f"{job.model} at {job.revision[:12]} under protocol {job.protocol}"
    if job.kind == QUICK:
        return (
            f"A quick estimate of {where} is already {job.status} as job {job.id}. Once it has finished, upgrade it "
            "to a full evaluation with **Upgrade to a full run** (job id in the box below the form)."
        )
    if kind == QUICK:
        return (
            f"{where} already has a full evaluation, {job.status} as job {job.id}: its Full "
            f"{'is' if job.status == FINISHED else 'will be'} on the board; a quick estimate would only approximate it."
        )
    return (
        f"{where} is already {job.status} as job {job.id}; follow it in the Queue tab. Only a FAILED "
        "evaluation can be resubmitted."
    )


# ------------------------------------------------------------------------------------------------
# Hub models
# ------------------------------------------------------------------------------------------------


def _check_hub(model_id: str, revision: str, api: Any, policy: Policy) -> Accepted:
    if model_id.count("/") != 1:
        raise Rejected(
            f"{forms.shown(model_id)} is not a model id: use the form owner/name, e.g. google/gemma-3-1b-it."
        )
    try:
        validate_repo_id(model_id)
    except HFValidationError as err:
        raise Rejected(f"{forms.shown(model_id)} is not a valid model id: {err}") from err
    try:
        info = api.model_info(model_id, revision=revision, securityStatus=False, files_metadata=False)
    except RepositoryNotFoundError as err:
        raise Rejected(f"Model {model_id} was not found on the Hub (or it is private).") from err
    except RevisionNotFoundError as err:
        raise Rejected(
            f"Revision '{revision}' does not exist in {model_id}: give a branch, tag or commit sha."
        ) from err
    model_id = info.id or model_id  # the Hub's spelling: "qwen/QWEN2-7b" and "Qwen/Qwen2-7B" are one model
    if info.private:
        raise Rejected(f"{model_id} is private: its outputs would be published on the leaderboard. Make it public.")
    if info.disabled:
        raise Rejected(f"{model_id} is disabled on the Hub.")
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
    _check_loadable(model_id, config)
    params = getattr(info.safetensors, "total", None) if info.safetensors else None
    params_b = _check_params(model_id, params, policy)
    tokenizer_config = _hub_tokenizer_config(api, model_id, sha) if "tokenizer_config.json" in files else {}
    _check_tokenizer(model_id, files, tokenizer_config)
    _check_architecture(model_id, config)
    created = getattr(info, "created_at", None) or getattr(info, "last_modified", None)
    released = release_date(created.isoformat() if isinstance(created, dt.datetime) else created)
    return Accepted(model_id, sha, params_b, _family(model_id, config), gated=bool(info.gated), released=released)


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
    _check_loadable(path.name, config)
    params_b = _check_params(str(path), count_parameters(path), policy)
    tokenizer_file = path / "tokenizer_config.json"
    _check_tokenizer(str(path), files, json.loads(tokenizer_file.read_text()) if tokenizer_file.exists() else {})
    _check_architecture(str(path), config)
    return Accepted(path.name, local_revision(path), params_b, _family(path.name, config), str(path.resolve()))


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


def _check_loadable(name: str, config: dict[str, Any]) -> None:
    """No remote code (the engines never run it), and a quantization the engine loads without extra packages."""
    if config.get("auto_map"):
        raise Rejected(
            f"{name} needs custom code (auto_map in config.json); the leaderboard runs no remote code. "
            "Submit a model whose architecture transformers and vLLM support natively."
        )
    method = (config.get("quantization_config") or {}).get("quant_method")
    if config.get("quantization_config") and method not in SUPPORTED_QUANTIZATION:
        raise Rejected(
            f"{name} is quantized with {method or 'an unnamed method'}, which the evaluation engine cannot load "
            f"as is; submit unquantized weights or one of: {', '.join(sorted(SUPPORTED_QUANTIZATION))}."
        )


def _check_tokenizer(name: str, files: list[str], tokenizer_config: dict[str, Any]) -> None:
    if tokenizer_config.get("auto_map"):
        raise Rejected(
            f"{name} needs a custom tokenizer (auto_map in tokenizer_config.json); no remote code runs here."
        )
    if not ({"chat_template.jinja", "chat_template.json"} & set(files) or tokenizer_config.get("chat_template")):
        raise Rejected(
            f"{name} has no chat template (tokenizer_config.json 'chat_template' or chat_template.jinja); "
            "the protocol renders every prompt with the model's own template."
        )


def _check_params(name: str, params: int | None, policy: Policy) -> float:
    if not params:
        raise Rejected(f"{name}: the parameter count is not available from its safetensors metadata.")
    params_b = round(params / 1e9, 2)
    if params / 1e9 > policy.max_params_b:
        raise Rejected(f"{name} has {params_b:g}B parameters; this Space's GPU takes at most {policy.max_params_b:g}B.")
    return params_b


def _check_architecture(name: str, config: dict[str, Any]) -> None:
    architectures = config.get("architectures") or []
    if not set(architectures) & SUPPORTED_ARCHITECTURES:
        shown = ", ".join(architectures) or "none declared"
        raise Rejected(f"{name}: architecture {shown} is not supported by the evaluation engines.")


def _family(name: str, config: dict[str, Any]) -> str:
    return canonical_family(config.get("model_type"), name)
