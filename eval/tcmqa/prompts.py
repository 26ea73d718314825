"""The evaluation protocol: the one place where what a model sees and how it decodes is defined.

Protocol v1 (frozen; any change to the text, the rendering or the decoding needs a new version):

* one user message: a Chinese instruction that says whether the item has one or several correct
  options, a blank line, the stem, then the options one per line as ``A. ...`` to ``E. ...``;
* rendered with the model's own chat template and its generation prompt, with
  ``enable_thinking=False`` (templates without that switch ignore it); the template is responsible
  for special tokens, so the rendered text is tokenized with no added BOS (no doubled BOS);
* greedy decoding, temperature 0, 16 new tokens, stopping at the tokenizer's and the model's
  end-of-sequence ids; every sampling parameter is passed explicitly, so a model's
  ``generation_config`` cannot change them.

Every output row stores ``PROTOCOL`` and ``prompt_hash`` (SHA-256 of the rendered prompt text).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tcmqa_metric import LETTERS

PROTOCOL = "v1"
MAX_NEW_TOKENS = 16
TEMPERATURE = 0.0
CHAT_TEMPLATE_KWARGS: dict[str, Any] = {"enable_thinking": False}

INSTRUCTIONS: dict[str, str] = {
    "single": "以下是一道中医执业资格考试的单项选择题，只有一个正确答案。请从A、B、C、D、E中选出正确答案，只回答选项字母。",  # noqa: E501 - frozen protocol text
    "multi": "以下是一道中医执业资格考试的多项选择题，有两个或两个以上正确答案。请从A、B、C、D、E中选出所有正确答案，只回答选项字母。",  # noqa: E501 - frozen protocol text
}


def render_user(item: Mapping[str, Any]) -> str:
    """The user message for one corpus row (needs ``question``, ``options``, ``answer_type``)."""
    answer_type = item["answer_type"]
    if answer_type not in INSTRUCTIONS:
        raise ValueError(f"answer_type must be one of {sorted(INSTRUCTIONS)}, got {answer_type!r}")
    return f"{INSTRUCTIONS[answer_type]}\n\n{render_item(item)}"


def render_item(item: Mapping[str, Any]) -> str:
    """The stem, then the options one per line as ``A. ...`` to ``E. ...`` (the item's text, no instruction).

    >>> render_item({"question": "Q", "options": dict(zip("ABCDE", "vwxyz"))})
    'Q\\nA. v\\nB. w\\nC. x\\nD. y\\nE. z'
    """
    options = "\n".join(f"{letter}. {item['options'][letter]}" for letter in LETTERS)
    return f"{item['question']}\n{options}"


def render_messages(item: Mapping[str, Any]) -> list[dict[str, str]]:
    """The conversation an engine receives for one item."""
    return [{"role": "user", "content": render_user(item)}]


def render_prompt(tokenizer: Any, messages: list[dict[str, str]], chat_template: str | None = None) -> str:
    """The exact prompt text: the chat template (or ``chat_template``) with the generation prompt."""
    if chat_template is None and not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            f"{getattr(tokenizer, 'name_or_path', 'this model')} has no chat template; the protocol needs one. "
            "Pass --chat-template FILE (a Jinja template) to supply it."
        )
    return tokenizer.apply_chat_template(
        messages,
        chat_template=chat_template,
        tokenize=False,
        add_generation_prompt=True,
        **CHAT_TEMPLATE_KWARGS,
    )


def prompt_hash(prompt: str) -> str:
    """SHA-256 (hex) of a rendered prompt: equal hashes mean the model saw the same text."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()
