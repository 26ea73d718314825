"""TCMQA as a task of lm-evaluation-harness and lighteval (``tcmqa.tasks``), against ``tcmqa eval``.

The engine tests run the real Gemma 3 270M (float32, on the CPU) over a tree of :data:`N_ITEMS` sample items
(``tcmqa build`` of the first N scorable ones): ``tcmqa eval`` once on the transformers engine, lm-eval once
through its own command line (``lm_eval --model hf ... --tasks tcmqa --include_path ... --log_samples``) and
lighteval once (its pipeline, transformers backend, the custom-task module), each once per session. Both tools'
models run transformers too, so the generated texts must be identical, not merely the predictions. Each path's
wall time for the items is written to ``artifacts/tool_tasks_times.json``.

The suite runs 8 items (CI's time: lm-eval alone took 527 s for 20 under load); the issue's 20-item check is
``TCMQA_TASK_ITEMS=20 pytest tests/test_tool_tasks.py``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tcmqa import harness, prompts
from tcmqa.outputs import lp_prediction, read_outputs
from tcmqa.schema import HUB_ID
from tcmqa.tasks import core, lm_eval_path
from tcmqa.tasks.compat import lighteval_custom_tasks_only
from tcmqa_metric import LETTERS, parse_text

REPO = Path(__file__).resolve().parents[1]
N_ITEMS = int(os.environ.get("TCMQA_TASK_ITEMS", "8"))
DTYPE = "float32"
TIMES: dict[str, float] = {}
LM_EVAL_BATCH = 4  # lm-eval's hf model keeps every position's logits of a batch: 20 prompts would hold ~10 GB
LIGHTEVAL_SAMPLE = 4  # items of lighteval's log-likelihood run (lighteval_run says why not all)


def _write_times() -> None:
    out = REPO / "artifacts" / "tool_tasks_times.json"
    out.parent.mkdir(exist_ok=True)
    previous = json.loads(out.read_text()) if out.exists() else {}
    out.write_text(json.dumps({**previous, **TIMES, "items": N_ITEMS}, indent=1))


# ---------------------------------------------------------------------------------------------
# The task definitions (no engine)
# ---------------------------------------------------------------------------------------------


def _yaml(name: str) -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load((lm_eval_path() / name).read_text(), Loader=Loader)


def test_lm_eval_task_yaml_states_the_protocol():
    gen, loglik = _yaml("tcmqa_gen.yaml"), _yaml("tcmqa_loglik.yaml")
    assert gen["generation_kwargs"] == {
        "until": [],
        "do_sample": False,
        "temperature": prompts.TEMPERATURE,
        "max_gen_toks": prompts.MAX_NEW_TOKENS,
    }
    assert gen["metadata"]["protocol"] == loglik["metadata"]["protocol"] == prompts.PROTOCOL
    assert [m["metric"] for m in gen["metric_list"]] == list(core.GENERATIVE_METRICS)
    assert [m["metric"] for m in loglik["metric_list"]] == list(core.LOGPROB_METRICS)
    assert loglik["target_delimiter"] == ""


def test_lm_eval_task_manager_finds_the_group_and_reads_the_tree_asked_for(sample_tree, monkeypatch):
    from lm_eval.tasks import TaskManager

    monkeypatch.delenv(core.DATA_VAR, raising=False)
    assert core.task_data() == HUB_ID
    monkeypatch.setenv(core.DATA_VAR, "somewhere/else")
    assert core.task_data() == "somewhere/else"
    manager = TaskManager(include_path=str(lm_eval_path()), metadata={"data": str(sample_tree)})
    assert {"tcmqa_gen", "tcmqa_loglik"} <= set(manager.all_subtasks) and "tcmqa" in manager.all_groups
    loaded = manager.load(["tcmqa"])["tasks"]
    gen, loglik = loaded["tcmqa_gen"], loaded["tcmqa_loglik"]
    scorable = harness.select_items(harness.EvalConfig(model="m", data=str(sample_tree)))[0]
    docs = list(gen.eval_docs)
    assert [d["id"] for d in docs] == [item["id"] for item in scorable]  # metadata wins over the variable
    assert gen.doc_to_text(docs[0]) == prompts.render_user(docs[0])
    assert loglik.doc_to_choice(docs[0]) == core.CHOICES == list(LETTERS)


def test_lm_eval_task_scores_with_the_metric():
    doc = {"answer": ["B", "D"], "answer_type": "multi", "in_subset": True}
    assert core.generative_scores(doc, "答案：ＢＤ") == {
        "full": 1.0,
        "single": None,
        "multi": 1.0,
        "subset": 1.0,
        "multi_f1": 1.0,
    }
    logliks = [-9.0, -1.0, -1.0, -9.0, -9.0]  # a tie: the first letter, as tcmqa.outputs.build_rows reads it
    assert core.letter_logprobs(logliks) == dict(zip(LETTERS, logliks))
    assert core.logprob_scores({"answer": ["B"], "answer_type": "single"}, logliks) == {"lp_full": 1.0}
    assert core.logprob_scores({"answer": ["C"], "answer_type": "single"}, logliks) == {"lp_full": 0.0}
    assert core.average_applicable([1.0, None, 0.0, float("nan")]) == 0.5


def test_lighteval_task_module_reads_the_tree_asked_for(sample_tree, monkeypatch):
    from lighteval.tasks.registry import Registry

    from tcmqa.tasks import lighteval_path

    monkeypatch.setenv(core.DATA_VAR, str(sample_tree))  # read when lighteval imports the module
    with lighteval_custom_tasks_only():
        tasks = Registry(tasks="tcmqa_gen|0,tcmqa_loglik|0", custom_tasks=str(lighteval_path())).load_tasks()
    gen, loglik = (tasks[name] for name in sorted(tasks))
    docs = gen.eval_docs()
    scorable = harness.select_items(harness.EvalConfig(model="m", data=str(sample_tree)))[0]
    assert [d.specific["id"] for d in docs] == [item["id"] for item in scorable]
    assert docs[0].query == prompts.render_user(scorable[0])
    assert gen.generation_size == prompts.MAX_NEW_TOKENS and list(gen.stop_sequence) == []
    doc = next(d for d in loglik.eval_docs() if len(d.specific["answer"]) > 1)
    assert doc.choices == core.CHOICES and [doc.choices[k] for k in doc.gold_index] == list(doc.specific["answer"])


# ---------------------------------------------------------------------------------------------
# The real model: tcmqa eval against lm-eval and lighteval on one 20-item tree
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree20(sample_tree, tmp_path_factory) -> Path:
    """``tcmqa build`` of the sample's first N_ITEMS scorable items, with the platform's responses."""
    from sources import SAMPLE_DB, SAMPLE_ITEMS

    from tcmqa.build import build

    wanted = set(core.items(str(sample_tree))["id"][:N_ITEMS])
    folder = tmp_path_factory.mktemp("tree20")
    lines = [line for line in SAMPLE_ITEMS.read_text().splitlines() if str(json.loads(line)["question_id"]) in wanted]
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    build([str(folder / "items.jsonl")], folder / "tree", str(SAMPLE_DB))
    assert len(core.items(str(folder / "tree"))) == N_ITEMS
    return folder / "tree"


@pytest.fixture(scope="module")
def tcmqa_run(gemma_dir, tree20, tmp_path_factory) -> harness.Report:
    """``tcmqa eval`` on the transformers engine over the tree."""
    config = harness.EvalConfig(
        model=str(gemma_dir),
        data=str(tree20),
        engine="transformers",
        dtype=DTYPE,
        batch_size=N_ITEMS,
        out=tmp_path_factory.mktemp("tcmqa") / "run",
    )
    start = time.perf_counter()
    report = harness.run(config)
    TIMES["tcmqa eval (transformers, in process, model load included) s"] = time.perf_counter() - start
    _write_times()
    return report


@pytest.fixture(scope="module")
def lm_eval_run(gemma_dir, tree20, tmp_path_factory) -> Path:
    """lm-eval's own command line, both tasks (the group), its ``--log_samples`` output folder."""
    out = tmp_path_factory.mktemp("lm-eval")
    model_args = f"pretrained={gemma_dir},dtype={DTYPE},add_bos_token=False,enable_thinking=False"
    argv = [sys.executable, "-m", "lm_eval", "run", "--model", "hf", "--model_args", model_args, "--device", "cpu"]
    argv += ["--tasks", "tcmqa", "--include_path", str(lm_eval_path()), "--metadata", json.dumps({"data": str(tree20)})]
    argv += ["--apply_chat_template", "--batch_size", str(LM_EVAL_BATCH), "--log_samples", "--output_path", str(out)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=out)
    TIMES["lm-eval hf, both tasks (a process, imports and model load included) s"] = time.perf_counter() - start
    _write_times()
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def lm_eval_files(out: Path) -> tuple[dict, dict[str, list[dict]]]:
    """lm-eval's results file and its samples per task, as ``--output_path`` laid them out."""
    (results_file,) = out.rglob("results_*.json")
    samples = {}
    for task in ("tcmqa_gen", "tcmqa_loglik"):
        (file,) = results_file.parent.glob(f"samples_{task}_*.jsonl")
        rows = [json.loads(line) for line in file.read_text().splitlines()]
        samples[task] = sorted(rows, key=lambda s: s["doc_id"])
    return json.loads(results_file.read_text()), samples


def assert_same_as_tcmqa(report: harness.Report, by_item: dict[str, tuple], scores: dict | None = None) -> None:
    """Per item (prompt, text, the choices' log-likelihoods or None) and the tool's scores over the whole tree
    (fractions; None: the tool ran a sample) against tcmqa eval's run."""
    ours = read_outputs(report.out).set_index("item_id")
    assert set(by_item) <= set(ours.index)
    for item_id, (prompt, text, logliks) in by_item.items():
        row = ours.loc[item_id]
        assert prompts.prompt_hash(prompt) == row["prompt_hash"], item_id
        assert text == row["generated_text"], item_id  # the same engine library: the same text
        assert parse_text(text) == list(row["prediction"])
        if logliks is not None:  # the bare letters' log-likelihoods: the argmax of tcmqa's summed spellings here
            assert lp_prediction(core.letter_logprobs(logliks)) == row["lp_prediction"], item_id
    for metric, got in (scores or {}).items():
        expected = report.results[metric]
        if expected is None:  # no item of the kind in the tree (tcmqa: None); the tools average nothing to NaN
            assert got is None or math.isnan(got), metric
        else:
            assert got * 100 == pytest.approx(expected, nan_ok=True), metric


@pytest.mark.engine
def test_lm_eval_task_gives_tcmqa_evals_texts_predictions_and_scores(tcmqa_run, lm_eval_run):
    results, samples = lm_eval_files(lm_eval_run)
    gen, loglik = samples["tcmqa_gen"], samples["tcmqa_loglik"]
    assert [s["doc"]["id"] for s in gen] == [s["doc"]["id"] for s in loglik]
    by_item = {
        g["doc"]["id"]: (g["arguments"]["gen_args_0"]["arg_0"], g["resps"][0][0], [float(r[0][0]) for r in lp["resps"]])
        for g, lp in zip(gen, loglik)
    }
    scores = {**results["results"]["tcmqa_gen"], **results["results"]["tcmqa_loglik"]}
    metrics = ("full", "single", "multi", "subset", "lp_full")
    assert len(by_item) == N_ITEMS
    assert_same_as_tcmqa(tcmqa_run, by_item, {metric: scores[f"{metric},none"] for metric in metrics})


@pytest.mark.engine
def test_import_samples_round_trip_of_lm_eval_equals_lm_evals_numbers(lm_eval_run, tree20, tmp_path):
    from tcmqa.cli import main as cli
    from tcmqa.import_samples import SELF_REPORTED
    from tcmqa.study import load_study

    out = tmp_path / "imported"
    assert cli(["import-samples", str(lm_eval_run), "--data", str(tree20), "--out", str(out)]) == 0
    row = json.loads((out / "results.json").read_text())
    results, samples = lm_eval_files(lm_eval_run)
    theirs = {**results["results"]["tcmqa_gen"], **results["results"]["tcmqa_loglik"]}
    for metric in ("full", "single", "multi", "subset", "multi_f1", "lp_full"):
        got, expected = row[metric], theirs[f"{metric},none"]
        assert got == pytest.approx(expected * 100, nan_ok=True) if got is not None else math.isnan(expected), metric
    assert (row["origin"], row["engine"], row["n"]) == (SELF_REPORTED, "lm-eval", N_ITEMS)
    assert row["model"].endswith(f"({SELF_REPORTED})") and row["revision"] == SELF_REPORTED
    rows = read_outputs(out)
    texts = {s["doc"]["id"]: s["resps"][0][0] for s in samples["tcmqa_gen"]}
    assert rows["generated_text"].tolist() == [texts[i] for i in rows["item_id"]]
    study = load_study(str(tree20), [out])  # what `tcmqa report` reads: the run is one of its models
    assert study.models["model"].tolist() == [row["model"]]
    with pytest.raises(SystemExit, match="not empty"):
        cli(["import-samples", str(lm_eval_run), "--data", str(tree20), "--out", str(out)])


def run_lighteval(gemma_dir: Path, tree: Path, out: Path, tasks: str, max_samples: int | None) -> Path:
    """lighteval's pipeline (transformers backend) on ``tasks`` of the custom-task module; its output folder."""
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.models.model_input import GenerationParameters
    from lighteval.models.transformers.transformers_model import TransformersModelConfig
    from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

    from tcmqa.tasks import lighteval_path

    model = TransformersModelConfig(
        model_name=str(gemma_dir),
        dtype=DTYPE,
        device="cpu",
        batch_size=N_ITEMS,
        add_special_tokens=False,  # the chat template writes the BOS
        generation_parameters=GenerationParameters(temperature=0.0),
    )
    parameters = PipelineParameters(
        launcher_type=ParallelismManager.ACCELERATE,
        custom_tasks_directory=str(lighteval_path()),
        max_samples=max_samples,
    )
    with pytest.MonkeyPatch.context() as patch, lighteval_custom_tasks_only():
        patch.setenv(core.DATA_VAR, str(tree))  # read when lighteval imports the module
        pipeline = Pipeline(
            tasks=tasks,
            pipeline_parameters=parameters,
            evaluation_tracker=EvaluationTracker(output_dir=str(out), save_details=True),
            model_config=model,
        )
        pipeline.evaluate()
        pipeline.save_and_push_results()
    return out


@pytest.fixture(scope="module")
def lighteval_run(gemma_dir, tree20, tmp_path_factory) -> tuple[Path, Path]:
    """lighteval's generative task over the tree, and both tasks over a sample of LIGHTEVAL_SAMPLE items: lighteval
    scores each of an item's 5 choices as a sequence of its own (lm-eval shares one forward pass among choices of
    one token), so its log-likelihood task costs 5 forward passes an item."""
    start = time.perf_counter()
    gen = run_lighteval(gemma_dir, tree20, tmp_path_factory.mktemp("lighteval-gen"), "tcmqa_gen|0", None)
    TIMES["lighteval transformers, tcmqa_gen (in process, model load included) s"] = time.perf_counter() - start
    start = time.perf_counter()
    both = tmp_path_factory.mktemp("lighteval-both")
    run_lighteval(gemma_dir, tree20, both, "tcmqa_gen|0,tcmqa_loglik|0", LIGHTEVAL_SAMPLE)
    TIMES[f"lighteval transformers, both tasks on {LIGHTEVAL_SAMPLE} items (model load included) s"] = (
        time.perf_counter() - start
    )
    _write_times()
    return gen, both


def lighteval_files(out: Path) -> tuple[dict, dict[str, dict[str, dict]]]:
    """lighteval's results (per task) and its details per task and item, as ``--output-dir`` laid them out."""
    import pandas as pd

    (results_file,) = out.rglob("results_*.json")
    details = {}
    for file in out.rglob("details_*.parquet"):
        task = next(task for task in ("tcmqa_gen", "tcmqa_loglik") if task in file.name)
        details[task] = {r["doc"]["specific"]["id"]: r for r in pd.read_parquet(file).to_dict("records")}
    results = json.loads(results_file.read_text())["results"]
    return {key.split("|")[0]: value for key, value in results.items()}, details


@pytest.mark.engine
def test_lighteval_task_gives_tcmqa_evals_texts_predictions_and_scores(gemma_dir, tcmqa_run, lighteval_run):
    from transformers import AutoTokenizer

    from tcmqa.import_samples import lighteval_prompt

    tokenizer = AutoTokenizer.from_pretrained(gemma_dir)  # lighteval records the prompt's tokens, not its text
    gen_only, both = lighteval_run
    results, details = lighteval_files(gen_only)
    by_item = {
        item_id: (lighteval_prompt(g["model_response"], tokenizer), str(g["model_response"]["text"][0]), None)
        for item_id, g in details["tcmqa_gen"].items()
    }
    assert len(by_item) == N_ITEMS
    scores = results["tcmqa_gen"]
    assert_same_as_tcmqa(
        tcmqa_run, by_item, {metric: scores[metric] for metric in ("full", "single", "multi", "subset")}
    )
    results, details = lighteval_files(both)
    by_item = {
        item_id: (
            lighteval_prompt(g["model_response"], tokenizer),
            str(g["model_response"]["text"][0]),
            [float(v) for v in details["tcmqa_loglik"][item_id]["model_response"]["logprobs"]],
        )
        for item_id, g in details["tcmqa_gen"].items()
    }
    assert len(by_item) == LIGHTEVAL_SAMPLE
    assert_same_as_tcmqa(tcmqa_run, by_item)


# ---------------------------------------------------------------------------------------------
# import-samples: the tools' own output as this project's run folder
# ---------------------------------------------------------------------------------------------


@pytest.mark.engine
def test_import_samples_of_lighteval_equals_lightevals_numbers(lighteval_run, tcmqa_run, tree20, tmp_path):
    from tcmqa.import_samples import import_samples

    _, both = lighteval_run
    row = import_samples(both, str(tree20), tmp_path / "imported")
    results, _ = lighteval_files(both)
    theirs = {**results["tcmqa_gen"], **results["tcmqa_loglik"]}
    for metric in ("full", "single", "multi", "subset", "lp_full"):
        got, expected = row[metric], theirs[metric]
        assert got == pytest.approx(expected * 100, nan_ok=True) if got is not None else math.isnan(expected), metric
    assert (row["engine"], row["n"]) == ("lighteval", LIGHTEVAL_SAMPLE)
    imported = read_outputs(tmp_path / "imported").set_index("item_id")["prompt_hash"]
    ours = read_outputs(tcmqa_run.out).set_index("item_id")["prompt_hash"]
    assert imported.to_dict() == ours[imported.index].to_dict()  # the prompt the model saw, from its tokens


def test_import_samples_of_lighteval_hashes_no_prompt_it_cannot_recover():
    from tcmqa.import_samples import lighteval_prompt

    assert lighteval_prompt({"input": None, "input_tokens": [0, 0, 2, 7]}, None) is None
    assert lighteval_prompt({"input": None, "input_tokens": []}, object()) is None
    assert lighteval_prompt({"input": "<bos>问", "input_tokens": []}, None) == "<bos>问"


def test_import_samples_refuses_a_folder_without_samples(tmp_path, demo_tree):
    from tcmqa.import_samples import import_samples

    with pytest.raises(SystemExit, match="neither lm-eval's samples"):
        import_samples(tmp_path, str(demo_tree), tmp_path / "out")
