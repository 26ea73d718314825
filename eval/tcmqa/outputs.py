"""Per-item output rows (the ``outputs`` config): building them from completions, writing them in
chunks that a crashed run resumes from, and reading them back.

A run folder holds ``outputs/part-00000.parquet``, ``part-00001.parquet``, ... Each part is one chunk
of items, written to a temporary name and renamed, so a part either exists whole or not at all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tcmqa import prompts
from tcmqa.engines.base import Completion, Prompt
from tcmqa.schema import OUTPUTS
from tcmqa_metric import LETTERS, parse_text, score

OUTPUTS_DIR = "outputs"  # a run folder: OUTPUTS_DIR/part-NNNNN.parquet and RESULTS_FILE
RESULTS_FILE = "results.json"
MANIFEST = "run.json"  # what was run, so that --resume continues only the same run
_SCHEMA: pa.Schema = OUTPUTS.arrow_schema


def lp_prediction(letter_logprobs: Mapping[str, float]) -> str:
    """The log-prob channel's prediction: the letter of highest log-prob, the first in A-E on a tie."""
    return max(LETTERS, key=letter_logprobs.__getitem__)


def build_rows(
    items: Sequence[Mapping[str, Any]],
    rendered: Sequence[Prompt],
    completions: Sequence[Completion],
    *,
    model: str,
    revision: str,
) -> list[dict[str, Any]]:
    """Score both channels of each completion with the metric and lay the rows out as ``OUTPUTS``."""
    answers = [list(item["answer"]) for item in items]
    types = [item["answer_type"] for item in items]
    predictions = [parse_text(c.text) for c in completions]
    generative = score(predictions, answers, types, per_item=True)["per_item"]
    lp_predictions = [lp_prediction(c.letter_logprobs) for c in completions]
    lp_correct = score(lp_predictions, answers, types, per_item=True)["per_item"]["exact_match"]
    rows = []
    for k, (item, prompt, completion) in enumerate(zip(items, rendered, completions, strict=True)):
        top, second = sorted(completion.letter_logprobs.values(), reverse=True)[:2]
        rows.append(
            {
                "model": model,
                "item_id": item["id"],
                "answer_type": item["answer_type"],
                "generated_text": completion.text,
                "prediction": predictions[k],
                "correct": bool(generative["exact_match"][k]),
                "precision": generative["precision"][k],
                "recall": generative["recall"][k],
                "f1": generative["f1"][k],
                "letter_logprobs": completion.letter_logprobs,
                "lp_prediction": lp_predictions[k],
                "lp_correct": bool(lp_correct[k]),
                "margin": top - second,
                "finish_reason": completion.finish_reason,
                "n_prompt_tokens": completion.n_prompt_tokens,
                "prompt_hash": prompts.prompt_hash(prompt.text),
                "protocol": prompts.PROTOCOL,
                "revision": revision,
            }
        )
    return rows


def part_path(run_dir: Path, index: int) -> Path:
    return Path(run_dir) / OUTPUTS_DIR / f"part-{index:05d}.parquet"


def write_part(run_dir: Path, index: int, rows: list[dict[str, Any]]) -> Path:
    """Write one chunk atomically (temporary file, then rename)."""
    path = part_path(run_dir, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=_SCHEMA), tmp)
    os.replace(tmp, path)
    return path


def part_item_ids(run_dir: Path, index: int) -> list[str] | None:
    """The item ids a finished chunk holds, or None if the chunk is not there."""
    path = part_path(run_dir, index)
    if not path.exists():
        return None
    return pq.read_table(path, columns=["item_id"]).column("item_id").to_pylist()


def part_files(run_dir: str | Path) -> list[Path]:
    """A run's finished chunks in order; ``run_dir`` may also be its ``outputs/`` folder itself."""
    folder = Path(run_dir)
    parts_dir = folder / OUTPUTS_DIR if (folder / OUTPUTS_DIR).is_dir() else folder
    return sorted(parts_dir.glob("part-*.parquet"))


def required_parts(run_dir: str | Path) -> list[Path]:
    """:func:`part_files` of a run that must have some: a folder without is an error naming it."""
    parts = part_files(run_dir)
    if not parts:
        raise FileNotFoundError(f"no output parts (part-*.parquet) in {run_dir}; was `tcmqa eval --out` run?")
    return parts


def read_outputs_table(*dirs: str | Path, columns: list[str] | None = None) -> pa.Table:
    """Output rows of one or more run folders as one Arrow table (``columns`` reads only those).

    In memory: for one run. Analyses across many runs query the parts where they lie
    (:class:`tcmqa.outputs_query.OutputsQuery`).
    """
    parts = [part for folder in dirs for part in required_parts(folder)]
    return pa.concat_tables(pq.read_table(part, schema=_SCHEMA, columns=columns) for part in parts)


def read_outputs(*dirs: str | Path) -> pd.DataFrame:
    """All output rows of one or more run folders (or of ``outputs/`` folders themselves), in order."""
    return read_outputs_table(*dirs).to_pandas()
