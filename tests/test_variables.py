"""The operator's table of environment variables (docs/operating.md) is generated from the declarations in
tcmqa/variables.py, and every ``TCMQA_`` name the code reads is declared there (issue 24: the manual had
left out ``TCMQA_HOSTED`` and ``TCMQA_MODELS_CACHE``, which the worker reads)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tcmqa import variables

REPO = Path(__file__).resolve().parents[1]
MANUAL = REPO / "docs" / "operating.md"
NAME = re.compile(r"TCMQA_[A-Z0-9_]+")
ENVIRON_READ = re.compile(r"""(?:environ(?:\.get)?|getenv|\benv)\s*[(\[]\s*["'](TCMQA_[A-Z0-9_]+)["']""")


def names_in_code() -> dict[str, str]:
    """Every ``TCMQA_`` name the Python code of eval/ and space/ spells whole (a string, a keyword, a flag's
    ``env``): name -> the first file that does."""
    found: dict[str, str] = {}
    for path in sorted([*(REPO / "eval").rglob("*.py"), *(REPO / "space").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else getattr(node, "arg", None)
            if isinstance(text, str) and NAME.fullmatch(text):
                found.setdefault(text, str(path.relative_to(REPO)))
    return found


def test_variables_table_in_the_manual_is_generated() -> None:
    page = MANUAL.read_text(encoding="utf-8")
    assert variables.replace_table(page) == page, "run: python -m tcmqa.variables --write docs/operating.md"
    assert variables.markdown_table() in page


def test_variables_every_tcmqa_name_the_code_reads_is_declared() -> None:
    read = names_in_code()
    grepped = {m for path in [*(REPO / "eval").rglob("*.py"), *(REPO / "space").rglob("*.py")]
               for m in ENVIRON_READ.findall(path.read_text(encoding="utf-8"))}  # fmt: skip
    assert {"TCMQA_HOSTED", "TCMQA_MODELS_CACHE", "TCMQA_STORE", "TCMQA_PRACTICE"} <= set(read)  # the scan sees
    assert grepped <= set(read) and "TCMQA_HOSTED" in grepped  # ... what a grep of the environ reads sees
    undeclared = {name: where for name, where in read.items() if name not in variables.NAMES}
    assert not undeclared, f"declare these in tcmqa/variables.py: {undeclared}"
    stale = {v.name for v in variables.VARIABLES if v.name.startswith("TCMQA_")} - set(read)
    assert not stale, f"declared but read nowhere: {sorted(stale)}"
    table = MANUAL.read_text(encoding="utf-8")
    assert all(f"| `{name}`" in table for name in read)
