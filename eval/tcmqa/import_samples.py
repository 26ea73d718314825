"""``tcmqa import-samples``: a run of the TCMQA tasks in lm-eval or lighteval (:mod:`tcmqa.tasks`) as a run
folder of this project, so a researcher's own run sits beside the board's in ``tcmqa report``.

    tcmqa import-samples LM_EVAL_OUTPUT_PATH --data runs/sample-tree --out runs/my-model-lm-eval
    tcmqa import-samples LIGHTEVAL_OUTPUT_DIR --data runs/sample-tree --out runs/my-model-lighteval

The input is what the tool wrote with its samples: lm-eval's ``--output_path`` after ``--log_samples``
(``results_*.json`` and ``samples_tcmqa_gen_*.jsonl``, ``samples_tcmqa_loglik_*.jsonl``), or lighteval's
``--output-dir`` after ``--save-details`` (``details/.../details_*tcmqa_gen*.parquet`` and ``*tcmqa_loglik*``).
Both tasks are needed: the row has both channels. Each item's output row is built by
``tcmqa.outputs.build_rows`` from the tool's generated text, its prompt (hashed) and the letters'
log-probs (the letters' log-likelihoods, :func:`tcmqa.tasks.core.letter_logprobs`), and scored on the
keys of ``--data``, which must be the keys the tool scored on (an item whose key differs is refused). The
tool does not report why a generation stopped nor the prompt's length: ``finish_reason`` and
``n_prompt_tokens`` are null.

lighteval's transformers backend records no prompt text (its ``input`` is empty), only the prompt's tokens
after its left padding (``input_tokens``, ``padded_tokens_count``): the prompt is those tokens less the
padding, decoded with the model's tokenizer keeping special tokens (the chat template's ``<bos>`` and turn
markers are part of the text ``tcmqa eval`` hashes). Where that tokenizer cannot be loaded here, or a detail
has neither text nor tokens, ``prompt_hash`` is null (unknown), never the hash of a placeholder.

The results row (``tcmqa.harness.summarise``, the one ``tcmqa eval`` writes) has ``origin`` "self-reported",
``engine`` the tool (``lm-eval`` or ``lighteval``) and its version, and ``engine_args`` the tool's model
arguments. A self-reported row is the researcher's claim, not a run of this project's harness: nothing
here publishes it (only the Space's worker records runs for publication), and the model is named
``NAME (self-reported)`` wherever it is shown.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcmqa import harness, prompts
from tcmqa import outputs as outputs_mod
from tcmqa.engines.base import Completion, Prompt
from tcmqa.tasks import core

logger = logging.getLogger(__name__)

SELF_REPORTED = "self-reported"
TASKS = ("tcmqa_gen", "tcmqa_loglik")


@dataclass(frozen=True)
class Sample:
    """What a tool recorded of one item: its prompt, generated text, and each choice's log-likelihood."""

    item_id: str
    answer: list[str]
    prompt: str | None  # None: the tool did not record it
    text: str
    logliks: list[float]


@dataclass(frozen=True)
class ToolRun:
    """One tool's run of both tasks."""

    tool: str  # "lm-eval" | "lighteval"
    version: str
    model: str
    model_args: str
    samples: list[Sample]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("samples", type=Path, help="lm-eval's --output_path or lighteval's --output-dir")
    parser.add_argument("--data", required=True, help="the data the tool ran on: a Hub id or a tree by `tcmqa build`")
    parser.add_argument("--data-revision", help="the Hub dataset revision the tool ran on")
    parser.add_argument("--out", type=Path, required=True, help="the run folder to write (new or empty)")
    parser.add_argument("--name", help="the model's name (default: the tool's model name, a local folder's name)")


def main(args: argparse.Namespace) -> int:
    results = import_samples(args.samples, args.data, args.out, name=args.name, data_revision=args.data_revision)
    print(harness.format_row(results))
    print(f"outputs and results in {args.out} (self-reported: never published)")
    return 0


def import_samples(
    samples: Path, data: str, out: Path, *, name: str | None = None, data_revision: str | None = None
) -> dict[str, Any]:
    """Write ``out`` (output parts and ``results.json``) from a tool's samples; return the results row."""
    samples, out = Path(samples), Path(out)
    if not samples.is_dir():
        raise SystemExit(f"{samples} is not a folder: give lm-eval's --output_path or lighteval's --output-dir")
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty; choose a new --out")
    run = read_run(samples)
    config = harness.EvalConfig(model=run.model, data=data, data_revision=data_revision, name=name)
    corpus, subset, scorable = harness.select_items(config)
    by_id = {item["id"]: item for item in corpus}
    recorded = {sample.item_id: sample for sample in run.samples}
    unknown = sorted(set(recorded) - set(by_id))
    if unknown:
        raise SystemExit(f"{len(unknown)} item(s) of the samples are not scorable items of {data}: {unknown[:5]}")
    items = [item for item in corpus if item["id"] in recorded]  # corpus order, as tcmqa eval writes them
    rekeyed = [item["id"] for item in items if sorted(item["answer"]) != sorted(recorded[item["id"]].answer)]
    if rekeyed:
        raise SystemExit(
            f"{len(rekeyed)} item(s) were scored on other keys than {data} holds ({rekeyed[:5]}): import onto the "
            "data the tool ran on (--data, --data-revision)"
        )
    model = f"{name or harness.model_name(config)} ({SELF_REPORTED})"
    rows = outputs_mod.build_rows(
        items,
        [Prompt(prompts.render_messages(item), recorded[item["id"]].prompt or "", []) for item in items],
        [_completion(recorded[item["id"]]) for item in items],
        model=model,
        revision=SELF_REPORTED,
    )
    for row in rows:
        if recorded[row["item_id"]].prompt is None:
            row["prompt_hash"] = None  # unknown: build_rows hashed the placeholder
    out.mkdir(parents=True, exist_ok=True)
    outputs_mod.write_part(out, 0, rows)
    facts = {
        "engine": run.tool,
        "engine_version": run.version,
        "engine_args": run.model_args,
        **harness.data_facts(harness.EvalConfig(model=run.model, data=data, data_revision=data_revision), scorable),
    }
    results = harness.summarise(out, items, subset, facts)
    results["origin"] = SELF_REPORTED
    (out / outputs_mod.RESULTS_FILE).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    logger.info("imported %d items of %s's run of %s into %s", len(items), run.tool, run.model, out)
    return results


def _completion(sample: Sample) -> Completion:
    return Completion(sample.text, None, None, core.letter_logprobs(sample.logliks))  # type: ignore[arg-type]


def read_run(folder: Path) -> ToolRun:
    """The tool's run in ``folder``: lm-eval's where a ``results_*.json`` is, else lighteval's details."""
    if next(folder.rglob("results_*.json"), None) is not None and next(folder.rglob("samples_*.jsonl"), None):
        return read_lm_eval(folder)
    if next(folder.rglob("details_*.parquet"), None) is not None:
        return read_lighteval(folder)
    raise SystemExit(
        f"{folder} holds neither lm-eval's samples (results_*.json, samples_*.jsonl: run lm_eval with --log_samples "
        "--output_path) nor lighteval's details (details_*.parquet: run lighteval with --save-details)"
    )


def _one(files: list[Path], what: str, folder: Path) -> Path:
    if len(files) != 1:
        found = ", ".join(str(f.relative_to(folder)) for f in files) or "none"
        raise SystemExit(f"expected one {what} in {folder}, found {found}: import one run at a time")
    return files[0]


def _joined(gen: dict[str, dict], loglik: dict[str, dict], folder: Path) -> Iterator[tuple[dict, dict]]:
    if not gen or not loglik:
        missing = [task for task, rows in zip(TASKS, (gen, loglik)) if not rows]
        raise SystemExit(f"{folder} has no samples of {missing}: run both tasks (the group tcmqa)")
    if set(gen) != set(loglik):
        raise SystemExit(f"the two tasks in {folder} ran on different items ({len(gen)} and {len(loglik)})")
    for item_id, row in gen.items():
        yield row, loglik[item_id]


def read_lm_eval(folder: Path) -> ToolRun:
    """lm-eval's ``--output_path``: its results file (model, version) and both tasks' samples."""
    results = json.loads(_one(sorted(folder.rglob("results_*.json")), "lm-eval results file", folder).read_text())
    rows = {}
    for task in TASKS:
        files = sorted(folder.rglob(f"samples_{task}_*.jsonl"))
        lines = _one(files, f"samples_{task}_*.jsonl", folder).read_text(encoding="utf-8").splitlines()
        rows[task] = {(s := json.loads(line))["doc"]["id"]: s for line in lines if line.strip()}
    samples = [
        Sample(
            item_id=g["doc"]["id"],
            answer=list(g["doc"]["answer"]),
            prompt=g["arguments"]["gen_args_0"]["arg_0"],
            text=g["resps"][0][0],
            logliks=[float(resp[0][0]) for resp in lp["resps"]],
        )
        for g, lp in _joined(rows["tcmqa_gen"], rows["tcmqa_loglik"], folder)
    ]
    config = results.get("config", {})
    model_args = config.get("model_args") or ""
    model = results.get("model_name") or _pretrained(model_args) or "unknown"
    return ToolRun("lm-eval", str(results.get("lm_eval_version") or ""), model, _args_text(model_args), samples)


def _pretrained(model_args: Any) -> str | None:
    if isinstance(model_args, dict):
        return model_args.get("pretrained")
    for part in str(model_args).split(","):
        key, _, value = part.partition("=")
        if key.strip() == "pretrained":
            return value.strip()
    return None


def _args_text(model_args: Any) -> str:
    return (
        json.dumps(model_args, sort_keys=True, ensure_ascii=False) if isinstance(model_args, dict) else str(model_args)
    )


def read_lighteval(folder: Path) -> ToolRun:
    """lighteval's ``--output-dir`` after ``--save-details``: both tasks' details and its results file."""
    import pandas as pd

    rows = {}
    for task in TASKS:
        frame = pd.read_parquet(_one(sorted(folder.rglob(f"details_*{task}*.parquet")), f"{task} details", folder))
        rows[task] = {record["doc"]["specific"]["id"]: record for record in frame.to_dict("records")}
    results_file = _one(sorted(folder.rglob("results_*.json")), "lighteval results file", folder)
    general = json.loads(results_file.read_text()).get("config_general", {})
    model_config = general.get("model_config") or {}
    model = general.get("model_name") or model_config.get("model_name") or "unknown"
    tokenizer = _tokenizer(model_config.get("tokenizer") or model_config.get("model_name") or model)
    samples = [
        Sample(
            item_id=g["doc"]["specific"]["id"],
            answer=list(g["doc"]["specific"]["answer"]),
            prompt=lighteval_prompt(g["model_response"], tokenizer),
            text=str(g["model_response"]["text"][0]),
            logliks=[float(v) for v in lp["model_response"]["logprobs"]],
        )
        for g, lp in _joined(rows["tcmqa_gen"], rows["tcmqa_loglik"], folder)
    ]
    return ToolRun("lighteval", str(general.get("lighteval_sha") or ""), model, _args_text(model_config), samples)


def _tokenizer(model: str) -> Any:
    """The tokenizer lighteval's model used, to decode the prompt tokens it recorded; None where not loadable."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as error:
        logger.warning("cannot load the tokenizer of %s (%s): the imported prompt_hash is null", model, error)
        return None


def lighteval_prompt(response: dict[str, Any], tokenizer: Any) -> str | None:
    """The prompt text of one lighteval detail: its ``input`` where recorded, else its input tokens less the
    left padding, decoded as they are (special tokens kept, no clean-up); None where neither is known."""
    if response.get("input"):
        return str(response["input"])
    tokens = response.get("input_tokens")
    if tokenizer is None or tokens is None or len(tokens) == 0:
        return None
    padding = int(response.get("padded_tokens_count") or 0)
    ids = [int(t) for t in tokens[padding:]]
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
