"""What every engine shares: model resolution, tokenizer facts, and turning raw generations into
``Completion``s, so that the vLLM and transformers engines produce identical rows by construction.

Letter log-probs are read by token id. Each letter A-E may have several single-token spellings in
a vocabulary: the bare letter, the letter after a space (``" A"``, ``"▁A"``, ``"ĠA"``) and the
full-width letter (``"Ａ"``), alone or after a space. A letter's log-prob is the log of the summed
probability of all its spellings (log-sum-exp), i.e. the probability that the first generated
token names that letter in any form. A tokenizer with no single-token spelling of some letter
cannot be scored this way and is rejected.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcmqa import prompts
from tcmqa.models import resolve_model
from tcmqa_metric import LETTERS

logger = logging.getLogger(__name__)

DTYPES = ("bfloat16", "float32", "auto")
CHUNK_ACCELERATED = 2048  # default chunk size on CUDA/ROCm
CHUNK_CPU = 256  # default chunk size on a CPU
_FULL_WIDTH = {letter: chr(ord(letter) + 0xFEE0) for letter in LETTERS}  # A -> Ａ
_SPACE_MARKS = ("", "▁", "Ġ", " ")  # sentencepiece and byte-level BPE spellings of a leading space


@dataclass(frozen=True)
class LetterTokens:
    """Token ids of every single-token spelling of each letter."""

    ids: dict[str, tuple[int, ...]]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> LetterTokens:
        vocab = tokenizer.get_vocab()
        ids: dict[str, tuple[int, ...]] = {}
        for letter in LETTERS:
            forms = (letter, _FULL_WIDTH[letter])
            found: set[int] = set()
            for form in forms:
                found.update(vocab[mark + form] for mark in _SPACE_MARKS if mark + form in vocab)
                for text in (form, " " + form):
                    encoded = tokenizer.encode(text, add_special_tokens=False)
                    if len(encoded) == 1:
                        found.add(encoded[0])
            found = {i for i in found if tokenizer.decode([i]).strip() in forms}
            if not found:
                raise ValueError(
                    f"{getattr(tokenizer, 'name_or_path', 'this tokenizer')} has no single token for the letter "
                    f"{letter!r}; first-token letter log-probs cannot be read. This model cannot be scored under "
                    f"protocol {prompts.PROTOCOL}."
                )
            ids[letter] = tuple(sorted(found))
        every = [i for letter_ids in ids.values() for i in letter_ids]
        if len(every) != len(set(every)):
            raise ValueError(f"a token id spells more than one letter: {ids}")
        return cls(ids)

    @property
    def all_ids(self) -> list[int]:
        """Every letter token id, in a fixed order (what an engine is asked to score)."""
        return [i for letter in LETTERS for i in self.ids[letter]]

    def combine(self, logprob_by_id: dict[int, float]) -> dict[str, float]:
        """Per-letter log-prob: log-sum-exp over the letter's spellings."""
        out = {}
        for letter in LETTERS:
            values = [logprob_by_id[i] for i in self.ids[letter]]
            top = max(values)
            out[letter] = top if top == -math.inf else top + math.log(sum(math.exp(v - top) for v in values))
        return out


@dataclass(frozen=True)
class Prompt:
    """One item's conversation, its rendered text and its token ids (no BOS added on top)."""

    messages: list[dict[str, str]]
    text: str
    token_ids: list[int]


Raw = tuple[list[int], str, dict[int, float]]  # generated token ids, finish reason, first-step log-prob by letter id


@dataclass(frozen=True)
class Completion:
    """What the protocol keeps of one generation."""

    text: str
    finish_reason: str  # "stop" | "length"
    n_prompt_tokens: int
    letter_logprobs: dict[str, float]


class Engine(ABC):
    """A model behind one engine. Subclasses load the model and implement ``_generate``."""

    name: str

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        dtype: str = "bfloat16",
        chat_template: str | None = None,
        **options: Any,
    ) -> None:
        from transformers import AutoTokenizer

        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        from tcmqa.engines import check_options

        check_options(self.name, options)  # before anything loads
        self.model_id = model
        self.path, self.revision = resolve_model(model, revision)
        self.dtype = resolve_dtype(self.path, dtype)
        self.chat_template = chat_template
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        prompts.render_prompt(self.tokenizer, [{"role": "user", "content": "?"}], chat_template)  # fail fast
        self.letters = LetterTokens.from_tokenizer(self.tokenizer)
        self.stop_ids = stop_token_ids(self.path, self.tokenizer)
        self.options = options
        self.requested_options = dict(options)  # as asked for, before _load adds its defaults or pops its own
        self._load()
        if self.dtype == "bfloat16" and not self.accelerated and not native_bf16():
            logger.warning(
                "bfloat16 on a CPU without AVX-512 BF16 or AMX is emulated, 4-6x slower than float32; "
                "pass --dtype float32 for speed (rows then differ from bf16 runs within bf16 rounding)"
            )

    @property
    @abstractmethod
    def version(self) -> str:
        """The engine library's version."""

    @abstractmethod
    def _load(self) -> None:
        """Load the model from ``self.path`` in ``self.dtype``."""

    @abstractmethod
    def _generate(self, prompts: Sequence[Prompt]) -> list[Raw]:
        """Per prompt: generated token ids, finish reason, first-token log-prob of each letter id."""

    @abstractmethod
    def _loglikelihood(self, sequences: Sequence[Sequence[int]], context: Sequence[int]) -> list[float]:
        """Per token sequence: the sum over positions t >= context of log P(token t | tokens before t)."""

    def loglikelihood(self, sequences: Sequence[Sequence[int]], context: int | Sequence[int] = 1) -> list[float]:
        """Log-likelihood of each token sequence under the model, prefill only (no generation), in nats.

        The first ``context`` tokens of a sequence (one number, or one per sequence) are conditioned on,
        not scored: at least the first, which has nothing before it. The order test
        (``tcmqa.probes.order``) scores only what differs between an item's option orders, the tokens
        after their common prefix, so the stem's positions need no output layer.
        """
        contexts = [context] * len(sequences) if isinstance(context, int) else list(context)
        if len(contexts) != len(sequences):
            raise ValueError(f"{len(contexts)} contexts for {len(sequences)} sequences")
        if any(not 1 <= c < len(s) for s, c in zip(sequences, contexts, strict=True)):
            raise ValueError("each sequence needs a context of at least one token and at least one token after it")
        return self._loglikelihood(sequences, contexts) if sequences else []

    def _generate_chunks(self, chunks: Iterable[Sequence[Prompt]]) -> Iterator[tuple[Sequence[Prompt], list[Raw]]]:
        """Each chunk with its raw generations, in order. One chunk at a time here; an engine with a
        scheduler (vLLM) overrides this to keep its batch full across chunk boundaries."""
        for chunk in chunks:
            yield chunk, self._generate(chunk)

    def render(self, conversations: Sequence[list[dict[str, str]]]) -> list[Prompt]:
        """Apply the chat template and tokenize, as the protocol prescribes."""
        out = []
        for messages in conversations:
            text = prompts.render_prompt(self.tokenizer, messages, self.chat_template)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append(Prompt(messages, text, ids))
        return out

    def generate(self, batch: Sequence[Prompt]) -> list[Completion]:
        """Run the protocol's single greedy pass over ``batch``, in order."""
        return next(self.generate_chunks([batch]))

    def generate_chunks(self, chunks: Iterable[Sequence[Prompt]]) -> Iterator[list[Completion]]:
        """Each chunk's completions, in order, chunk after chunk.

        ``chunks`` is read lazily, as the engine has room for more work, so a caller can render the next
        chunk while the engine works and write each chunk's rows as soon as it is complete (the harness
        writes one output part per chunk). Closing the iterator early cancels what is still in flight.
        """
        with contextlib.closing(self._generate_chunks(chunks)) as stream:
            for chunk, raws in stream:
                yield [self._completion(prompt, raw) for prompt, raw in zip(chunk, raws, strict=True)]

    def _completion(self, prompt: Prompt, raw: Raw) -> Completion:
        """One engine's raw generation as the protocol keeps it (decoded once here, for both engines)."""
        token_ids, finish_reason, first = raw
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        return Completion(text, finish_reason, len(prompt.token_ids), self.letters.combine(first))

    @property
    def accelerated(self) -> bool:
        """Whether the model runs on an accelerator (CUDA or ROCm) rather than on the CPU."""
        import torch

        return torch.cuda.is_available()

    @property
    def default_chunk_size(self) -> int:
        """Items per engine call and output part when ``--chunk-size`` is not given: large on an
        accelerator (the scheduler batches across the whole chunk), small on a CPU (a part lands
        every few minutes, so a crash loses little)."""
        return CHUNK_ACCELERATED if self.accelerated else CHUNK_CPU

    @property
    def batch_invariant(self) -> bool:
        """Whether an item's output is independent of the other items in its batch. Not by default:
        padding (transformers) and batch composition (vLLM's scheduler) change the kernels' reduction
        order, so outputs can move within floating-point noise."""
        return False

    def describe(self) -> dict[str, Any]:
        """Engine facts recorded with every run."""
        return {
            "engine": self.name,
            "engine_version": self.version,
            "dtype": self.dtype,
            "revision": self.revision,
            "batch_invariant": self.batch_invariant,
        }

    def close(self) -> None:  # noqa: B027 - optional: most engines hold nothing to release
        """Release the model (engines with worker processes override this)."""


def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX-512 BF16 or AMX); elsewhere torch emulates it."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: assume the CPU can (Apple silicon and recent x86 do)
        return True
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(path: Path, dtype: str) -> str:
    """``auto`` becomes the dtype the checkpoint declares (float32 when it declares none)."""
    if dtype != "auto":
        return dtype
    config = json.loads((path / "config.json").read_text())
    declared = config.get("dtype") or config.get("torch_dtype") or config.get("text_config", {}).get("dtype")
    return str(declared or "float32").removeprefix("torch.")


def stop_token_ids(path: Path, tokenizer: Any) -> list[int]:
    """The tokenizer's EOS plus the model's generation-config EOS ids (e.g. Gemma's ``<end_of_turn>``)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    config_file = path / "generation_config.json"
    if config_file.exists():
        eos = json.loads(config_file.read_text()).get("eos_token_id")
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if not ids:
        raise ValueError(f"{path} declares no end-of-sequence token; generation could not stop")
    return sorted(ids)
