"""The engine interface on a tiny random model (fast): padding, explicit decoding, BOS, completions.

The real engines on the real model are compared in ``test_harness_real.py``.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tcmqa import prompts
from tcmqa.engines import load_engine

pytest.importorskip("transformers")


def _items(demo_items, n):
    return [
        {
            "id": str(r["question_id"]),
            "question": r["question"],
            "options": r["choices"],
            "answer": sorted(r["answer"]),
            "answer_type": "multi" if len(r["answer"]) > 1 else "single",
        }
        for r in demo_items[:n]
    ]


@pytest.fixture(scope="module")
def engine(tiny_dir):
    return load_engine("transformers", str(tiny_dir), dtype="float32", batch_size=4)


@pytest.fixture(scope="module")
def rendered(engine, demo_items):
    return engine.render([prompts.render_messages(item) for item in _items(demo_items, 8)])


def test_completions_follow_the_protocol(engine, rendered):
    completions = engine.generate(rendered)
    assert len(completions) == len(rendered)
    for prompt, completion in zip(rendered, completions):
        assert completion.n_prompt_tokens == len(prompt.token_ids)
        assert completion.finish_reason in {"stop", "length"}
        assert set(completion.letter_logprobs) == set("ABCDE")
        assert all(v <= 0 for v in completion.letter_logprobs.values())
        n_tokens = len(engine.tokenizer(completion.text, add_special_tokens=False)["input_ids"])
        assert n_tokens <= prompts.MAX_NEW_TOKENS


def test_left_padding_does_not_change_results(engine, rendered):
    batched = engine.generate(rendered)
    alone = [engine.generate([prompt])[0] for prompt in rendered]
    assert [c.text for c in batched] == [c.text for c in alone]
    for b, a in zip(batched, alone):
        assert b.letter_logprobs == pytest.approx(a.letter_logprobs, abs=1e-4)


def test_generation_config_of_the_checkpoint_cannot_change_decoding(engine, rendered, tiny_dir, tmp_path):
    hostile = tmp_path / "hostile"
    shutil.copytree(tiny_dir, hostile)
    config = json.loads((hostile / "generation_config.json").read_text())
    config.update(
        do_sample=True, temperature=5.0, top_k=3, repetition_penalty=5.0, max_new_tokens=2, no_repeat_ngram_size=1
    )
    (hostile / "generation_config.json").write_text(json.dumps(config))
    other = load_engine("transformers", str(hostile), dtype="float32", batch_size=4)
    assert other.generate(rendered) == engine.generate(rendered)
    assert other.revision != engine.revision  # a local folder's revision is a hash of its files


def test_template_bos_is_not_doubled(tiny_dir, tmp_path):
    from tokenizers import processors
    from transformers import AutoTokenizer

    with_bos = tmp_path / "with-bos"
    shutil.copytree(tiny_dir, with_bos)
    tokenizer = AutoTokenizer.from_pretrained(with_bos)
    bos = "<|endoftext|>"
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tokenizer.convert_tokens_to_ids(bos))]
    )
    tokenizer.bos_token = bos
    tokenizer.chat_template = "{{ bos_token }}" + tokenizer.chat_template
    tokenizer.save_pretrained(with_bos)
    engine = load_engine("transformers", str(with_bos), dtype="float32")
    bos_id = engine.tokenizer.bos_token_id
    [prompt] = engine.render([[{"role": "user", "content": "问"}]])
    assert engine.tokenizer(prompt.text)["input_ids"][:2] == [bos_id, bos_id]  # what a naive encode does
    assert prompt.token_ids[0] == bos_id and prompt.token_ids.count(bos_id) == 1


def test_unknown_engine_and_dtype_are_refused(tiny_dir):
    with pytest.raises(ValueError, match="unknown engine"):
        load_engine("llama.cpp", str(tiny_dir))
    with pytest.raises(ValueError, match="dtype"):
        load_engine("transformers", str(tiny_dir), dtype="float16")


def test_generate_chunks_reads_chunks_as_it_goes_and_equals_generate(engine, rendered):
    pulled = []

    def chunks():
        for start in range(0, len(rendered), 3):
            pulled.append(start)
            yield rendered[start : start + 3]

    stream = engine.generate_chunks(chunks())
    first = next(stream)
    assert pulled == [0]  # the next chunk is not rendered before the engine has room for it
    rest = list(stream)
    assert pulled == [0, 3, 6] and [len(c) for c in [first, *rest]] == [3, 3, 2]
    assert [c.text for c in [*first, *(c for chunk in rest for c in chunk)]] == [
        c.text for start in (0, 3, 6) for c in engine.generate(rendered[start : start + 3])
    ]


def test_describe_says_the_engine_is_not_batch_invariant(engine):
    described = engine.describe()
    assert described["batch_invariant"] is False and described["engine"] == "transformers"


def test_bf16_on_a_cpu_without_native_bf16_warns_and_names_the_fast_dtype(tiny_dir, monkeypatch, caplog):
    from tcmqa.engines import base

    monkeypatch.setattr(base, "native_bf16", lambda: False)
    with caplog.at_level("WARNING", logger="tcmqa.engines.base"):
        load_engine("transformers", str(tiny_dir), dtype="bfloat16", batch_size=4)
    assert "emulated" in caplog.text and "--dtype float32" in caplog.text
    caplog.clear()
    monkeypatch.setattr(base, "native_bf16", lambda: True)
    with caplog.at_level("WARNING", logger="tcmqa.engines.base"):
        load_engine("transformers", str(tiny_dir), dtype="bfloat16", batch_size=4)
    assert "emulated" not in caplog.text
