"""vLLM engine: ``LLM.chat`` over a chunk of items, prefix caching on, letter log-probs by token id.

vLLM starts worker processes by spawn: a script that creates this engine needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

from collections.abc import Sequence

from tcmqa import prompts
from tcmqa.engines.base import Engine, Prompt


class VLLMEngine(Engine):
    """Options: ``enforce_eager`` (skip graph compilation: faster start, slower run), and any other
    keyword of ``vllm.LLM`` (e.g. ``max_model_len``, ``gpu_memory_utilization``)."""

    name = "vllm"

    @property
    def version(self) -> str:
        import vllm

        return vllm.__version__

    def _load(self) -> None:
        from vllm import LLM, SamplingParams
        from vllm.platforms import current_platform

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
        outputs = self.llm.chat(
            [prompt.messages for prompt in batch],
            self.sampling,
            use_tqdm=False,
            chat_template=self.chat_template,
            chat_template_kwargs=prompts.CHAT_TEMPLATE_KWARGS,
            add_generation_prompt=True,
        )
        results = []
        for prompt, output in zip(batch, outputs, strict=True):
            if list(output.prompt_token_ids) != prompt.token_ids:
                raise RuntimeError(
                    "vLLM rendered a different prompt than the protocol's rendering "
                    f"({len(output.prompt_token_ids)} vs {len(prompt.token_ids)} tokens); check the chat template."
                )
            completion = output.outputs[0]
            first = completion.logprobs[0]
            logprobs = {i: first[i].logprob for i in self.letters.all_ids}
            results.append((list(completion.token_ids), completion.finish_reason, logprobs))
        return results

    def close(self) -> None:
        """Shut the engine's worker processes down."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del self.llm
