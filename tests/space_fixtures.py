"""What the Space's tests share: fake Hub models (one per refusal), local settings, a launched app.

``space/app.py`` (``APP``) is the Space's entry point, run by its path; the app it launches is
:func:`tcmqa.leaderboard.space.build_app`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from gradio_client import Client

from tcmqa.data import load_config
from tcmqa.leaderboard.settings import Settings
from tcmqa.leaderboard.space import build_app
from tcmqa.leaderboard.space import launch as launch_app
from tcmqa.prompts import PROTOCOL
from tcmqa.runs import data_fingerprint
from tcmqa.schema import OUTPUTS
from tcmqa.store import SQLiteStore, Store

APP = Path(__file__).resolve().parents[1] / "space" / "app.py"


CHROMIUM = "/usr/bin/chromium"  # Debian's: `playwright install` cannot download browsers here
# CI sets TCMQA_REQUIRE_REAL_PARTS=1: there a missing Chromium fails the run instead of skipping its tests
if os.environ.get("TCMQA_REQUIRE_REAL_PARTS") and not Path(CHROMIUM).exists():
    raise RuntimeError(f"no Chromium at {CHROMIUM} and TCMQA_REQUIRE_REAL_PARTS is set: apt-get install -y chromium")
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"
BROWSER = [  # pytestmark of a browser test module
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}: apt-get install -y chromium"),
]


def open_chromium(playwright: Any) -> Any:
    """Headless Chromium through Playwright, no sandbox (tests run as root), no background traffic."""
    return playwright.chromium.launch(
        executable_path=CHROMIUM,
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )


SHA = "c" * 40


def hub_models() -> FakeHub:
    """One model per refusal, named for it; 'org/good' passes every check."""
    hub = FakeHub()
    hub.add_model("org/good", sha=SHA, revisions=("main", "v1.0"))
    hub.add_model("org/gated", gated="manual", access=False)
    hub.add_model("org/gated-ok", sha="d" * 40, gated="auto", access=True)
    hub.add_model("org/pickle", files=("config.json", "pytorch_model.bin", "tokenizer_config.json"))
    hub.add_model("org/noweights", files=("config.json", "tokenizer_config.json"))
    hub.add_model("org/custom", config={"architectures": ["Qwen2ForCausalLM"], "auto_map": {"AutoModel": "m.M"}})
    hub.add_model("org/huge", params=70_000_000_000)
    hub.add_model("org/nometa", params=None)
    hub.add_model("org/notemplate", tokenizer_config={"eos_token": "</s>"})
    hub.add_model("org/jinja", sha="f" * 40, files=("config.json", "model.safetensors", "chat_template.jinja"))
    hub.add_model("org/bert", config={"architectures": ["BertForMaskedLM"], "model_type": "bert"})
    hub.add_model("org/badsha", sha="main")
    hub.add_model("org/private", private=True)
    hub.add_model("org/disabled", disabled=True)
    hub.add_model(
        "org/awq", config={"architectures": ["Qwen2ForCausalLM"], "quantization_config": {"quant_method": "awq"}}
    )
    hub.add_model(
        "org/fp8",
        sha="9" * 40,
        config={"architectures": ["Qwen2ForCausalLM"], "quantization_config": {"quant_method": "fp8"}},
    )
    hub.add_model("org/customtok", tokenizer_config={"chat_template": "{{ m }}", "auto_map": {"AutoTokenizer": "t.T"}})
    return hub


# (model id, revision, what the refusal says): checked in-process and through gradio_client
REFUSALS = [
    ("", "", "Enter a model id"),
    ("not-an-id", "", "is not a model id: use the form owner/name"),
    ("org/bad name!", "", "is not a valid model id"),
    ("org/missing", "", "was not found on the Hub"),
    ("org/good", "no-such-branch", "Revision 'no-such-branch' does not exist"),
    ("org/badsha", "", "did not resolve to a commit sha"),
    ("org/gated", "", "is gated and this leaderboard has not been granted access"),
    ("org/pickle", "", "has only pickle weights"),
    ("org/noweights", "", "has no weight files"),
    ("org/custom", "", "needs custom code (auto_map"),
    ("org/huge", "", "has 70B parameters; this Space's GPU takes at most 8B"),
    ("org/nometa", "", "parameter count is not available"),
    ("org/notemplate", "", "has no chat template"),
    ("org/bert", "", "architecture BertForMaskedLM is not supported"),
    ("org/private", "", "is private: its outputs would be published"),
    ("org/disabled", "", "is disabled on the Hub"),
    ("org/awq", "", "quantized with awq, which the evaluation engine cannot load"),
    ("org/customtok", "", "needs a custom tokenizer (auto_map in tokenizer_config.json)"),
]


ALL_ORIGINS = ["reported", "evaluated", "reference"]
BOARD_COLUMNS = ["Origin", "Family", "Params (B)", "Full", "Subset"]


def local_settings(store_dir: Path, data: Path | str, **changes: Any) -> Settings:
    base = Settings(
        hosted=False,
        store=str(store_dir),
        data=str(data),
        start_worker=False,
        worker_args="",
        max_params_b=8,
        rate_limit=5,
        rate_window_h=24,
        refresh_s=1,
    )
    return dataclasses.replace(base, **changes)


def launch(settings: Settings, store: SQLiteStore, api: Any) -> tuple[Any, str]:
    """Build and launch the app on a free loopback port, without blocking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_app(settings, store, api)
    launch_app(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return demo, f"http://127.0.0.1:{port}/"


def board(
    client: Client,
    search: str = "",
    families: list[str] | None = None,
    size_min: float | None = None,
    size_max: float | None = None,
) -> list[dict]:
    table = client.predict(
        search, families or [], size_min, size_max, ALL_ORIGINS, BOARD_COLUMNS, "Full", True, api_name="/board"
    )
    return [dict(zip(table["headers"], row)) for row in table["data"]]


def write_folder(
    path: Path,
    *,
    shape: tuple[int, ...] = (1000, 270),
    template: bool = True,
    architectures: tuple[str, ...] = ("Gemma3ForCausalLM",),
    weights: str = "model.safetensors",
) -> Path:
    """A model folder with a real safetensors header (the weights themselves are never read)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"architectures": list(architectures), "model_type": "gemma3_text"}))
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"} if template else {}))
    header = json.dumps(
        {"w": {"dtype": "BF16", "shape": list(shape), "data_offsets": [0, 0]}, "__metadata__": {}}
    ).encode()
    (path / weights).write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def evaluated_model(
    store: Store, items: Path | list[dict], tmp_path: Path, model: str = "org/model", **row: Any
) -> dict:
    """A finished evaluation of ``model`` on every item (right on even positions), with its outputs in
    the store; ``items`` are corpus rows or a built tree; ``row`` overrides results fields. Its results row."""
    corpus = load_config(str(items), "corpus").to_list() if isinstance(items, Path) else items
    rows = [
        {
            "model": model,
            "item_id": item["id"],
            "answer_type": item["answer_type"],
            "generated_text": "",
            "prediction": item["answer"] if i % 2 == 0 else ["E"],
            "correct": i % 2 == 0 or item["answer"] == ["E"],
        }
        for i, item in enumerate(corpus)
    ]
    path = tmp_path / "part-00000.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), path)
    store.submit(model, "a" * 40, PROTOCOL, "local")
    job = store.claim("w")
    results = {
        "model": model,
        "origin": "evaluated",
        "family": "Qwen2",
        "params_b": 0.5,
        "full": 50.0,
        "subset": 50.0,
        "human_reference": 60.0,
        "delta_human": -10.0,
        "protocol": PROTOCOL,
        "data_fingerprint": data_fingerprint([item for item in corpus if not item.get("flagged")]),
        "coverage": 100.0,
        "revision": "a" * 40,
    } | row
    assert store.finish(job, results, [path])
    return results


def record_fetch_streams(name: str) -> str:
    """A page init script that keeps the text of every fetch response, streamed ones included (gradio's
    queue streams its results), in ``window[name]``: what a test reads to know all the page received."""
    return f"""
window.{name} = [];
const originalFetch = window.fetch;
window.fetch = async (...args) => {{
  const response = await originalFetch(...args);
  try {{
    const reader = response.clone().body.getReader();
    const decoder = new TextDecoder();
    (async () => {{
      for (;;) {{
        const {{ done, value }} = await reader.read();
        if (done) break;
        window.{name}.push(decoder.decode(value, {{ stream: true }}));
      }}
    }})();
  }} catch (e) {{}}
  return response;
}};
"""


def as_a_space(monkeypatch: Any) -> None:
    """The environment a Space with ``hf_oauth: true`` provides (SYSTEM, SPACE_ID and the OAuth app)."""
    import gradio.oauth

    monkeypatch.setenv("SYSTEM", "spaces")
    monkeypatch.setenv("SPACE_ID", "TechTCM/leaderboard")
    for key, value in {
        "OAUTH_CLIENT_ID": "id",
        "OAUTH_CLIENT_SECRET": "secret",
        "OPENID_PROVIDER_URL": "https://huggingface.co",
        "OAUTH_SCOPES": "openid profile",
    }.items():
        monkeypatch.setattr(gradio.oauth, key, value)
