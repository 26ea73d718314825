"""vLLM engine: the protocol's token ids through vLLM's scheduler, prefix caching on, letter log-probs
by token id.

Chunks are streamed (``_generate_chunks``): the next chunk's requests join the scheduler's queue while
the current chunk is still generating, so the batch never drains at a chunk boundary. Calling
``LLM.generate`` once per chunk instead let the batch run down to a few sequences at the end of every
chunk: 2.80 against 3.42 items/s at 32-item chunks on 2 AVX2 cores (``bench/where_time_goes.py``).

The prompts go in as token ids (``TokensPrompt``), exactly the ids ``Engine.render`` produced from the
protocol's rendering, so vLLM neither re-renders the chat template nor re-tokenizes (what ``LLM.chat``
did, a second time, for every item), and what the model sees is the protocol's rendering by construction.

vLLM starts worker processes by spawn: a script that creates this engine needs an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tcmqa import prompts
from tcmqa.engines.base import Engine, Prompt, Raw


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
        from vllm.sampling_params import RequestOutputKind

        self._batch_invariant = bool(self.options.pop("batch_invariant", False))
        if self._batch_invariant:
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
            output_kind=RequestOutputKind.FINAL_ONLY,  # one output per request, when it ends
        )
        self._request_ids = itertools.count()

    @property
    def batch_invariant(self) -> bool:
        return self._batch_invariant

    def _generate(self, batch: Sequence[Prompt]) -> list[Raw]:
        return next(self._generate_chunks([batch]))[1]

    def _generate_chunks(self, chunks: Iterable[Sequence[Prompt]]) -> Iterator[tuple[Sequence[Prompt], list[Raw]]]:
        """Keep at least twice the scheduler's batch (``max_num_seqs``) in flight, pulling chunks as
        room frees up, and hand each chunk back once all of its requests have finished."""
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        window = 2 * engine.vllm_config.scheduler_config.max_num_seqs
        source = iter(chunks)
        open_chunks: deque[tuple[Sequence[Prompt], list[str]]] = deque()
        finished: dict[str, Any] = {}
        in_flight = 0
        try:
            while True:
                while in_flight < window and (chunk := next(source, None)) is not None:
                    ids = [f"tcmqa-{next(self._request_ids)}" for _ in chunk]
                    inputs = self.llm.renderer.render_cmpl([TokensPrompt(prompt_token_ids=p.token_ids) for p in chunk])
                    for request_id, engine_input in zip(ids, inputs, strict=True):
                        engine.add_request(request_id, engine_input, self.sampling)
                    open_chunks.append((chunk, ids))
                    in_flight += len(chunk)
                while open_chunks and all(i in finished for i in open_chunks[0][1]):
                    chunk, ids = open_chunks.popleft()
                    yield chunk, [self._raw(prompt, finished.pop(i)) for prompt, i in zip(chunk, ids, strict=True)]
                if not open_chunks:
                    return
                for output in engine.step():
                    if output.finished:
                        finished[output.request_id] = output
                        in_flight -= 1
        finally:  # closed early (an error or a crash in the caller): cancel what is still running
            pending = [i for _, ids in open_chunks for i in ids if i not in finished]
            if pending:
                engine.abort_request(pending)

    def _loglikelihood(self, sequences: Sequence[Sequence[int]], context: Sequence[int]) -> list[float]:
        """Prefill only: one token generated, the prompt tokens' own log-probs returned
        (``prompt_logprobs=0``). vLLM skips its prefix cache for such requests and scores every
        position, so the context costs the same as the rest here."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(s)) for s in sequences], params, use_tqdm=False)
        sums = []
        for sequence, start, output in zip(sequences, context, outputs, strict=True):
            positions = output.prompt_logprobs  # position 0 is None: nothing before it
            sums.append(sum(positions[t][sequence[t]].logprob for t in range(start, len(sequence))))
        return sums

    def _raw(self, prompt: Prompt, output: Any) -> Raw:
        if list(output.prompt_token_ids) != prompt.token_ids:
            raise RuntimeError(
                f"vLLM ran {len(output.prompt_token_ids)} prompt tokens where the protocol rendered "
                f"{len(prompt.token_ids)}; outputs came back altered or mismatched."
            )
        completion = output.outputs[0]
        first = completion.logprobs[0]
        return list(completion.token_ids), completion.finish_reason, {i: first[i].logprob for i in self.letters.all_ids}

    def close(self) -> None:
        """Shut the engine's worker processes down."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del self.llm
