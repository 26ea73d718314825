"""transformers engine: batched, left-padded greedy generation (portable: laptops, CI, any device)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from tcmqa import prompts
from tcmqa.engines.base import Engine, Prompt


class TransformersEngine(Engine):
    """Options: ``batch_size`` (default 32), ``device`` (default: CUDA if available, else CPU), and the
    ``from_pretrained`` keywords in ``FROM_PRETRAINED`` (with ``device_map`` the model stays where
    accelerate places it and ``device`` is ignored)."""

    name = "transformers"
    OWN_OPTIONS = frozenset({"batch_size", "device"})
    # from_pretrained keywords an --engine-arg may set: placement and memory, never the weights' values
    # (dtype and revision are tcmqa's own flags) and never trust_remote_code (remote code never runs).
    FROM_PRETRAINED = frozenset(
        {
            "attn_implementation",
            "device_map",
            "low_cpu_mem_usage",
            "max_memory",
            "offload_folder",
            "offload_state_dict",
            "use_safetensors",
        }
    )

    @property
    def version(self) -> str:
        import transformers

        return transformers.__version__

    def _load(self) -> None:
        from transformers import AutoModelForCausalLM, GenerationConfig

        self.batch_size = int(self.options.get("batch_size", 32))
        self.device = self.options.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        load = {key: value for key, value in self.options.items() if key in self.FROM_PRETRAINED}
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=getattr(torch, self.dtype), **load)
        if load.get("device_map") is None:
            self.model.to(self.device)
        else:  # placed by accelerate; inputs go to the first device
            self.device = str(self.model.device)
        self.model.eval()
        pad_id = self.tokenizer.pad_token_id
        self.pad_id = pad_id if pad_id is not None else self.stop_ids[0]
        # Replace the checkpoint's generation defaults: generate() fills every unset field from them.
        self.model.generation_config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=prompts.MAX_NEW_TOKENS,
            repetition_penalty=1.0,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
        )

    @property
    def accelerated(self) -> bool:
        return not str(self.device).startswith("cpu")

    def _generate(self, batch: Sequence[Prompt]) -> list[tuple[list[int], str, dict[int, float]]]:
        # Similar lengths share a batch, so little compute goes to padding.
        order = sorted(range(len(batch)), key=lambda i: len(batch[i].token_ids), reverse=True)
        results: dict[int, tuple[list[int], str, dict[int, float]]] = {}
        letter_ids = torch.tensor(self.letters.all_ids)
        stops = set(self.stop_ids)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(batch[i].token_ids) for i in rows)
            input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, i in enumerate(rows):  # left padding: the generated tokens line up on the right
                ids = batch[i].token_ids
                input_ids[r, width - len(ids) :] = torch.tensor(ids)
                mask[r, width - len(ids) :] = 1
            first_step = _FirstStepLogprobs(letter_ids.to(self.device))
            with torch.inference_mode():
                sequences = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    logits_processor=LogitsProcessorList([first_step]),
                )
            first = first_step.logprobs.cpu()
            generated = sequences[:, width:].cpu().tolist()
            for r, i in enumerate(rows):
                tokens = generated[r]
                end = next((k for k, t in enumerate(tokens) if t in stops), None)
                finish = "length" if end is None else "stop"
                tokens = tokens if end is None else tokens[: end + 1]
                results[i] = (tokens, finish, dict(zip(self.letters.all_ids, first[r].tolist())))
        return [results[i] for i in range(len(batch))]

    # Scored positions per forward pass of the log-likelihood: their float32 logits (positions x vocabulary)
    # stay near 1 GB whatever the vocabulary (Gemma's 262k: 1,024 positions), never above 8,192 tokens.
    LOGIT_BUDGET = 2**28

    def _loglikelihood(self, sequences: Sequence[Sequence[int]], context: Sequence[int]) -> list[float]:
        # Left padding lines the sequences' ends up, so ``logits_to_keep`` computes the output layer
        # (a 262k-word LM head for Gemma: most of the cost) only at the scored tail of each sequence.
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]) - context[i], reverse=True)
        vocab = self.model.config.get_text_config().vocab_size
        budget = min(8192, max(1, self.LOGIT_BUDGET // vocab))
        out = [0.0] * len(sequences)
        start = 0
        while start < len(order):
            keep = len(sequences[order[start]]) - context[order[start]] + 1  # the longest tail in the batch
            rows = order[start : start + max(1, budget // keep)]
            start += len(rows)
            width = max(len(sequences[i]) for i in rows)
            input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            scored = torch.zeros((len(rows), keep - 1), dtype=torch.bool)
            for r, i in enumerate(rows):
                ids = sequences[i]
                input_ids[r, width - len(ids) :] = torch.tensor(list(ids))
                mask[r, width - len(ids) :] = 1
                scored[r, keep - 1 - (len(ids) - context[i]) :] = True
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = (
                    self.model(
                        input_ids=input_ids.to(self.device),
                        attention_mask=mask.to(self.device),
                        position_ids=positions.to(self.device),
                        logits_to_keep=keep,
                    )
                    .logits[:, -keep:-1]
                    .float()
                )  # position p predicts token p + 1
                targets = input_ids[:, width - keep + 1 :].to(self.device)
                picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
                # unscored positions (padding, context) are dropped, not multiplied by 0: -inf * 0 is NaN
                sums = picked.double().masked_fill(~scored.to(self.device), 0.0).sum(dim=1).cpu().tolist()
            for r, i in enumerate(rows):
                out[i] = sums[r]
        return out


class _FirstStepLogprobs(LogitsProcessor):
    """Keeps the first generated position's log-probs of the letter ids, from the raw logits.

    Cheaper than ``output_logits=True``, which keeps the whole vocabulary for every step. With the
    protocol's generation config no other processor runs, so the scores seen here are the raw logits.
    """

    def __init__(self, letter_ids: torch.Tensor) -> None:
        self.letter_ids = letter_ids
        self.logprobs: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.logprobs is None:
            self.logprobs = torch.log_softmax(scores.float(), dim=-1)[:, self.letter_ids]
        return scores
