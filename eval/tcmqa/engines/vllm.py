"""vLLM engine: the protocol's token ids through ``LLM.generate``, prefix caching on, letter log-probs
by token id.

The prompts go in as token ids (``TokensPrompt``), exactly the ids ``Engine.render`` produced from the
protocol's rendering, so vLLM neither re-renders the chat template nor re-tokenizes (what ``LLM.chat``
did, a second time, for every item), and what the model sees is the protocol's rendering by construction.

vLLM starts worker processes by spawn: a script that creates this engine needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tcmqa import prompts
from tcmqa.engines.base import Engine, Prompt


class VLLMEngine(Engine):
    """Options: ``enforce_eager`` (skip graph compilation: faster start, slower run), ``batch_invariant``
    (vLLM's batch-invariant kernels, ``VLLM_BATCH_INVARIANT=1``: an item's output does not depend on which
    other items share its batch; CUDA only, refused on CPU), and any other keyword of ``vllm.LLM`` (e.g.
    ``max_model_len``, ``gpu_memory_utilization``)."""

    name = "vllm"

    @property
    def version(self) -> str:
        import vllm

        return vllm.__version__

    def _load(self) -> None:
        from tcmqa.engines import require_vllm

        require_vllm()  # an older vLLM lacks SamplingParams(logprob_token_ids=...): say which is needed
        from vllm import LLM, SamplingParams
        from vllm.platforms import current_platform

        self.batch_invariant = bool(self.options.pop("batch_invariant", False))
        if self.batch_invariant:
            if not current_platform.is_cuda_alike():
                raise ValueError(
                    "batch_invariant needs vLLM's batch-invariant kernels, which run on CUDA/ROCm GPUs only "
                    f"(this vLLM runs on {current_platform.device_type or 'CPU'}); drop the option here"
                )
            # Read by vLLM when the engine starts, in this process and in the workers it spawns.
            os.environ["VLLM_BATCH_INVARIANT"] = "1"
        if current_platform.is_cpu():
            # The CPU default (128-token blocks) is longer than the instruction all prompts share,
            # so prefix caching would never hit; 32 is the smallest block the CPU kernels run well.
            self.options.setdefault("block_size", 32)
        self.llm = LLM(
            model=str(self.path),
            tokenizer=str(self.path),
            dtype=self.dtype,
            enable_prefix_caching=True,
            generation_config="vllm",  # the checkpoint's sampling defaults play no part
            max_logprobs=len(self.letters.all_ids) + 1,
            seed=0,
            **self.options,
        )
        # logprob_token_ids scores exactly these ids at every step, whatever their rank.
        self.sampling = SamplingParams(
            n=1,
            temperature=prompts.TEMPERATURE,
            top_p=1.0,
            top_k=0,
            min_p=0.0,
            repetition_penalty=1.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            max_tokens=prompts.MAX_NEW_TOKENS,
            stop_token_ids=self.stop_ids,
            logprob_token_ids=self.letters.all_ids,
            detokenize=False,  # text is decoded once, in the shared code, for both engines
        )

    def _generate(self, batch: Sequence[Prompt]) -> list[tuple[list[int], str, dict[int, float]]]:
        from vllm.inputs import TokensPrompt

        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(prompt.token_ids)) for prompt in batch],
            self.sampling,
            use_tqdm=False,
        )
        results = []
        for prompt, output in zip(batch, outputs, strict=True):
            if list(output.prompt_token_ids) != prompt.token_ids:
                raise RuntimeError(
                    f"vLLM ran {len(output.prompt_token_ids)} prompt tokens where the protocol rendered "
                    f"{len(prompt.token_ids)}; outputs came back out of order or altered."
                )
            completion = output.outputs[0]
            first = completion.logprobs[0]
            logprobs = {i: first[i].logprob for i in self.letters.all_ids}
            results.append((list(completion.token_ids), completion.finish_reason, logprobs))
        return results

    def describe(self) -> dict[str, Any]:
        """Engine facts recorded with every run, and whether it ran batch-invariant."""
        return {**super().describe(), "batch_invariant": self.batch_invariant}

    def close(self) -> None:
        """Shut the engine's worker processes down."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del self.llm
