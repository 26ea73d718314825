"""Secrets stay with the worker (issue 19): help text, children's command lines and environments, engine args.

Real worker processes on a real SQLite file, with the stand-in harness of tests/stand_in.py, which dumps
its argv and environment where ``$STAND_IN_DUMP`` says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tcmqa.store import open_store
from tcmqa.worker import WorkerConfig

SHA = "0123456789abcdef0123456789abcdef01234567"


def _worker(spec: str, tmp_path: Path, command: str, *extra: str) -> subprocess.Popen:
    """A ``tcmqa worker --once`` process on ``spec``, given in the environment as an operator would."""
    argv = [sys.executable, "-m", "tcmqa", "worker", "--data", "demo-tree", "--runs", str(tmp_path / "runs")]
    argv += ["--command", command, "--poll-s", "0.1", "--once", *extra]
    env = {**os.environ, "TCMQA_STORE": spec}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


PASSWORD = "s3cr3t-pw"
STORE_WITH_PASSWORD = f"postgresql://tcmqa:{PASSWORD}@db.example:5432/queue"


def test_secrets_worker_help_shows_no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "TCMQA_STORE": STORE_WITH_PASSWORD}
    shown = subprocess.run(
        [sys.executable, "-m", "tcmqa", "worker", "--help"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert PASSWORD not in shown and "tcmqa:***@db.example" in shown.replace("\n", "").replace(" ", "")


def test_secrets_the_child_gets_no_store_url_and_no_write_token(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "child.json"
    monkeypatch.setenv("STAND_IN_DUMP", str(dump))
    monkeypatch.setenv("HF_TOKEN", "hf_write_token")
    monkeypatch.setenv("TCMQA_HF_READ_TOKEN", "hf_read_token")
    spec = f"sqlite:///{tmp_path / 's' / 'queue.sqlite'}"
    store = open_store(spec)
    store.submit("org/open", SHA, "v1", "u")
    worker = _worker(spec, tmp_path, stand_in)
    log = worker.communicate(timeout=120)[0]
    seen = json.loads(dump.read_text())
    assert "TCMQA_STORE" not in seen["env"] and spec not in json.dumps(seen), log
    assert "hf_write_token" not in json.dumps(seen) and "hf_read_token" not in json.dumps(seen)
    assert seen["env"]["PATH"] and seen["env"]["HF_HUB_OFFLINE"] == "1"
    store.submit("org/gated", SHA, "v1", "u", {"gated": True})  # validation found it gated
    worker = _worker(spec, tmp_path, stand_in)
    worker.communicate(timeout=120)
    seen = json.loads(dump.read_text())
    assert seen["env"]["HF_TOKEN"] == "hf_read_token" and "hf_write_token" not in json.dumps(seen)


def test_secrets_gpu_workers_get_the_store_url_in_their_environment(tmp_path: Path) -> None:
    script = tmp_path / "args.py"
    script.write_text("import os, sys; open(sys.argv[1], 'a').write(open('/proc/%d/cmdline' % os.getppid()).read())")
    spec = f"sqlite:///{tmp_path / 's' / 'queue.sqlite'}"
    store = open_store(spec)
    store.submit("org/m", SHA, "v1", "u")
    seen = tmp_path / "seen.txt"
    worker = _worker(spec, tmp_path, f"{{python}} {script} {seen}", "--gpus", "0")
    log = worker.communicate(timeout=120)[0]
    cmdline = seen.read_text()
    assert "--gpus" not in cmdline and "worker" in cmdline, log  # the per-GPU worker's own command line ...
    assert spec not in cmdline and "--store" not in cmdline  # ... holds no store URL


def test_secrets_engine_args_with_credentials_are_refused() -> None:
    for bad in ({"hf_token": "x"}, {"api_key": "x"}, {"endpoint": "https://u:pw@host/"}):
        with pytest.raises(ValueError, match="credential"):
            WorkerConfig(engine_args=bad)
    assert WorkerConfig(engine_args={"max_num_batched_tokens": 4096}).engine_args  # "tokens" is no credential
