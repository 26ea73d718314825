"""The metric loads the ways its users load it (a path, a folder name, a copy of the folder alone) and its
Space folder (card, app, requirements) is consistent with it."""

import ast
import os
import re
import runpy
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import evaluate
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tcmqa_metric

METRIC_DIR = Path(__file__).resolve().parents[1] / "metric"
SPACE_FILES = ("tcmqa_metric.py", "README.md", "app.py", "requirements.txt")
EXAMPLE = {
    "predictions": ["答案：B", "B, D", ["A", "C"], "ＡＣＥ"],
    "references": ["B", "BD", "ACE", ["A", "D"]],
}


def copy_space(destination: Path) -> Path:
    """The metric folder as it is uploaded: its own files only (no build leftovers)."""
    destination.mkdir(parents=True)
    for name in SPACE_FILES:
        shutil.copy(METRIC_DIR / name, destination / name)
    return destination


def test_load_by_path():
    metric = evaluate.load(str(METRIC_DIR / "tcmqa_metric.py"))
    assert metric.name == "tcmqa_metric"
    assert metric.compute(**EXAMPLE) == pytest.approx(tcmqa_metric.score(**EXAMPLE))


def test_load_by_folder_name_from_the_working_directory(tmp_path, monkeypatch):
    copy_space(tmp_path / "tcmqa_metric")
    monkeypatch.chdir(tmp_path)
    metric = evaluate.load("tcmqa_metric")
    assert metric.compute(**EXAMPLE)["exact_match"] == 0.5


def evaluate_alone(site_dir: Path) -> Path:
    """A folder holding links to evaluate and its dependencies only: what `pip install evaluate` gives."""
    site_dir.mkdir()
    seen, todo = {}, ["evaluate"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name not in seen:
            seen[name] = dist = distribution(name)
            requirements = map(Requirement, dist.requires or [])
            todo += [r.name for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]
    for dist in seen.values():
        for top in {Path(f).parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            link = site_dir / top
            if not link.exists():
                link.symlink_to(dist.locate_file(top))
    return site_dir


ISOLATED = """
import importlib.util
import site

site.addsitedir({site_dir!r})  # evaluate and its dependencies only
hidden = ("tcmqa", "tcmqa_metric", "torch", "transformers")
present = [name for name in hidden if importlib.util.find_spec(name)]
assert not present, f"importable: {{present}}"
import evaluate

for source in ("tcmqa_metric", "tcmqa_metric/tcmqa_metric.py"):
    metric = evaluate.load(source)
    results = metric.compute(predictions={predictions!r}, references={references!r})
    print(source, results["exact_match"], results["n_multi"])
"""


def test_load_from_a_copy_of_the_folder_alone(tmp_path):
    # -I -S: no PYTHON* variables, no working directory, no site-packages and no .pth files (the project's
    # editable install is one) on the path; then only evaluate and its dependencies are added.
    alone = tmp_path / "alone"
    copy_space(alone / "tcmqa_metric")
    script = ISOLATED.format(site_dir=str(evaluate_alone(tmp_path / "site")), **EXAMPLE)
    env = {"PATH": os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], cwd=alone, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["tcmqa_metric 0.5 3", "tcmqa_metric/tcmqa_metric.py 0.5 3"]


def test_module_imports_only_what_the_space_installs():
    source = (METRIC_DIR / "tcmqa_metric.py").read_text()
    nodes = list(ast.walk(ast.parse(source)))
    imported = {alias.name.split(".")[0] for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in nodes if isinstance(node, ast.ImportFrom)}
    assert imported - set(sys.stdlib_module_names) == {"evaluate", "datasets", "numpy"}
    # evaluate's import scanner misreads "import a, b" as a package named "a,"
    assert not re.search(r"^\s*import \w+\s*,", source, re.MULTILINE)
    requirements = (METRIC_DIR / "requirements.txt").read_text().split()
    assert {re.split(r"[<>=]", r)[0] for r in requirements} == {"evaluate", "datasets", "numpy"}


def test_app_launches_the_widget_on_this_metric_only_when_run(monkeypatch):
    launched = []
    monkeypatch.setattr(evaluate.utils, "launch_gradio_widget", launched.append)
    runpy.run_path(str(METRIC_DIR / "app.py"), run_name="app")
    assert launched == []  # importing it (as pytest's doctest collection does) launches nothing
    runpy.run_path(str(METRIC_DIR / "app.py"), run_name="__main__")
    (metric,) = launched
    assert metric.name == "tcmqa_metric"
    assert metric.compute(**EXAMPLE)["n"] == 4


def test_card_front_matter_and_example():
    card = (METRIC_DIR / "README.md").read_text()
    front, body = re.match(r"---\n(.*?)\n---\n(.*)", card, re.DOTALL).groups()
    meta = yaml.safe_load(front)
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert {"evaluate", "metric"} <= set(meta["tags"])
    assert meta["description"]
    for section in ("## Metric Description", "NFKC", "## How to Use", "## Limitations and Bias", "## Citation"):
        assert section in body
    # The output shown in the card is what the example computes.
    shown = ast.literal_eval(re.search(r"### Output Values.*?```python\n(.*?)```", body, re.DOTALL).group(1))
    results = tcmqa_metric.score(**EXAMPLE)
    assert shown == {key: round(value, 3) for key, value in results.items()}


def test_the_metric_cites_the_dataset_as_the_schema_does() -> None:
    """The metric imports nothing of the project, so it keeps its own copy of the citation."""
    from tcmqa.schema import CITATION, HOMEPAGE
    from tcmqa_metric import TcmqaMetric

    metric = TcmqaMetric()
    assert metric.citation == CITATION and HOMEPAGE in metric.reference_urls
