"""TCMQA as a task of the evaluation tools researchers already run: lm-evaluation-harness and lighteval.

Both run protocol v1 (:mod:`tcmqa.prompts`: the prompt, the model's chat template, greedy 16 new tokens)
and score with ``tcmqa_metric`` through :mod:`tcmqa.tasks.core`, so a number from either tool is the
number ``tcmqa eval`` computes on the same items and generations::

    lm_eval --model vllm --model_args pretrained=MODEL,enable_thinking=False --apply_chat_template \\
            --tasks tcmqa --include_path "$(python -c 'import tcmqa.tasks as t; print(t.lm_eval_path())')"
    lighteval accelerate "model_name=MODEL" "tcmqa_gen|0" \\
            --custom-tasks "$(python -c 'import tcmqa.tasks as t; print(t.lighteval_path())')"

The items are ``TechTCM/TCMQA`` (its unflagged ``corpus`` rows, in order); :data:`DATA_VAR` (a Hub id or a
tree written by ``tcmqa build``), or lm-eval's ``--metadata '{"data": ...}'``, points either tool elsewhere.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def lm_eval_path() -> Path:
    """The folder to pass to lm-eval's ``--include_path`` (or ``TaskManager(include_path=...)``): tasks
    ``tcmqa_gen`` (the generative channel) and ``tcmqa_loglik`` (the letters' log-likelihoods), group ``tcmqa``."""
    return _HERE / "lm_eval"


def lighteval_path() -> Path:
    """The module to pass to lighteval's ``--custom-tasks``: tasks ``tcmqa_gen`` and ``tcmqa_loglik``."""
    return _HERE / "lighteval_tcmqa.py"
