"""Protocol v1 rendering, prompt hashes and letter token ids (fast: tiny tokenizers only)."""

from __future__ import annotations

import math

import pytest

from tcmqa import prompts
from tcmqa.engines.base import LetterTokens

ITEM = {
    "id": "x1",
    "question": "五脏中主藏血的是",
    "options": {"A": "心", "B": "肝", "C": "脾", "D": "肺", "E": "肾"},
    "answer": ["B"],
    "answer_type": "single",
}


@pytest.fixture(scope="module")
def tokenizer(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dir)


def test_user_message_has_instruction_stem_and_options_in_order():
    text = prompts.render_user(ITEM)
    lines = text.splitlines()
    assert lines[0] == prompts.INSTRUCTIONS["single"]
    assert lines[1] == "" and lines[2] == ITEM["question"]
    assert lines[3:] == [f"{letter}. {ITEM['options'][letter]}" for letter in "ABCDE"]
    assert prompts.render_messages(ITEM) == [{"role": "user", "content": text}]


def test_single_and_multi_instructions_differ_and_unknown_type_is_refused():
    multi = prompts.render_user({**ITEM, "answer_type": "multi"})
    assert multi.startswith(prompts.INSTRUCTIONS["multi"]) and prompts.INSTRUCTIONS["single"] not in multi
    with pytest.raises(ValueError, match="answer_type"):
        prompts.render_user({**ITEM, "answer_type": "Multi"})


def test_prompt_uses_generation_prompt_and_disables_thinking(tokenizer):
    text = prompts.render_prompt(tokenizer, prompts.render_messages(ITEM))
    # the tiny model's ChatML template closes an empty think block only when enable_thinking is False
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert prompts.render_user(ITEM) in text


def test_missing_chat_template_is_a_clear_error_unless_one_is_given(tokenizer):
    template, tokenizer.chat_template = tokenizer.chat_template, None
    try:
        with pytest.raises(ValueError, match="--chat-template"):
            prompts.render_prompt(tokenizer, prompts.render_messages(ITEM))
        text = prompts.render_prompt(tokenizer, prompts.render_messages(ITEM), "[{{ messages[0]['content'] }}]")
        assert text == f"[{prompts.render_user(ITEM)}]"
    finally:
        tokenizer.chat_template = template


def test_prompt_hash_is_sha256_of_the_text():
    assert prompts.prompt_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert prompts.prompt_hash("abc ") != prompts.prompt_hash("abc")


def test_letter_ids_decode_to_their_letter_and_never_overlap(tokenizer):
    letters = LetterTokens.from_tokenizer(tokenizer)
    assert len(letters.all_ids) == len(set(letters.all_ids))
    for letter, ids in letters.ids.items():
        assert ids, letter
        assert {tokenizer.decode([i]).strip() for i in ids} <= {letter, chr(ord(letter) + 0xFEE0)}
    assert tokenizer.encode("A", add_special_tokens=False)[0] in letters.ids["A"]


def test_letter_variants_combine_by_log_sum_exp():
    letters = LetterTokens({"A": (1, 2), "B": (3,), "C": (4,), "D": (5,), "E": (6,)})
    logprobs = {
        1: math.log(0.1),
        2: math.log(0.2),
        3: math.log(0.3),
        4: -math.inf,
        5: math.log(0.05),
        6: math.log(0.01),
    }
    combined = letters.combine(logprobs)
    assert combined["A"] == pytest.approx(math.log(0.3))
    assert combined["B"] == pytest.approx(math.log(0.3))
    assert combined["C"] == -math.inf


def test_tokenizer_without_single_letter_tokens_is_refused():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "答案": 1, "AB": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(ValueError, match="no single token for the letter 'A'"):
        LetterTokens.from_tokenizer(PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]"))
