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

from tcmqa.harness import EvalConfig
from tcmqa.store import Job, open_store
from tcmqa.worker import WorkerConfig, child_env

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
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    spec = f"sqlite:///{tmp_path / 's' / 'queue.sqlite'}"
    store = open_store(spec)
    store.submit("org/open", SHA, "v1", "u")
    worker = _worker(spec, tmp_path, stand_in)
    log = worker.communicate(timeout=120)[0]
    seen = json.loads(dump.read_text())
    assert "TCMQA_STORE" not in seen["env"] and spec not in json.dumps(seen), log
    assert "hf_write_token" not in json.dumps(seen) and "hf_read_token" not in json.dumps(seen)
    assert seen["env"]["PATH"] and seen["env"]["HF_HUB_OFFLINE"] == "1"
    assert not set(PLANTED) & set(seen["env"]) and "planted-" not in json.dumps(seen)
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


def test_secrets_engine_args_with_credentials_are_refused(tmp_path: Path) -> None:
    for bad in ({"hf_token": "x"}, {"api_key": "x"}, {"endpoint": "https://u:pw@host/"}):
        with pytest.raises(ValueError, match="credential"):
            WorkerConfig(engine_args=bad)
        with pytest.raises(ValueError, match="credential"):  # a direct evaluation, by the same rule
            EvalConfig(model="org/m", engine_args=bad)
    fine = {"max_num_batched_tokens": 4096, "tokenizer_mode": "auto"}  # "tokens", "tokenizer": no credential
    assert WorkerConfig(engine_args=fine).engine_args == EvalConfig(model="org/m", engine_args=fine).engine_args
    argv = [sys.executable, "-m", "tcmqa", "eval", "--model", "org/m", "--engine", "transformers"]
    argv += ["--engine-arg", "hf_token=planted-token", "--out", str(tmp_path / "run")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "--engine-arg hf_token: looks like a credential" in done.stderr, done.stderr
    assert "planted-token" not in done.stderr + done.stdout and not (tmp_path / "run").exists()


# Secret-looking and unlisted variables a worker's machine may hold; none reaches the evaluation child.
PLANTED = {
    "AWS_SECRET_ACCESS_KEY": "planted-aws",
    "MY_DB_PASSWORD": "planted-db",
    "GITHUB_PAT": "planted-pat",  # no secret-looking name, but on no allow-list either
    "DATABASE_URL": "postgresql://u:planted-pg@db/x",
    "TCMQA_PSEUDONYM_KEY": "planted-pseudonym",
    "TCMQA_OAUTH_CLIENT_SECRET": "planted-oauth",  # a TCMQA_ variable, but a secret by its name
    "HTTPS_PROXY": "http://me:planted-proxy@proxy:3128",  # an allowed name with a password in its value
}


def test_secrets_the_child_environment_is_an_allow_list() -> None:
    worker_env = {
        **PLANTED,
        "PATH": "/usr/bin",
        "HOME": "/home/w",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": "/scratch",
        "CUDA_VISIBLE_DEVICES": "3",
        "NVIDIA_DRIVER_CAPABILITIES": "compute",
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "OMP_NUM_THREADS": "8",
        "TORCHINDUCTOR_CACHE_DIR": "/scratch/inductor",
        "PYTHONHASHSEED": "0",
        "HF_HOME": "/data/hf",
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_CACHE": "/data/datasets",
        "TCMQA_CACHE": "/data/tcmqa",
        "TCMQA_STORE": STORE_WITH_PASSWORD,
        "HF_TOKEN": "hf_write_token",
        "TCMQA_HF_READ_TOKEN": "hf_read_token",
        "SITE_SCRATCH": "/site",  # the operator's addition below
        "SITE_TOKEN": "planted-site",  # added by the operator's prefix, still refused: a credential's name
        "UNLISTED": "x",
        "TCMQA_CHILD_ENV": "SITE_*, UNLISTED_OTHER",
    }
    open_job = Job("j", "org/open", SHA, "v1", "u")
    env = child_env(open_job, Path("/cache"), worker_env)
    passed = {k for k in worker_env if k in env}
    assert passed == {
        "PATH",
        "HOME",
        "LC_ALL",
        "TMPDIR",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "VLLM_WORKER_MULTIPROC_METHOD",
        "OMP_NUM_THREADS",
        "TORCHINDUCTOR_CACHE_DIR",
        "PYTHONHASHSEED",
        "HF_HOME",
        "HF_HUB_OFFLINE",
        "HF_DATASETS_CACHE",
        "TCMQA_CACHE",
        "SITE_SCRATCH",
        "TCMQA_CHILD_ENV",
    }
    assert env["HF_HUB_CACHE"] == "/cache" and env["HF_TOKEN_PATH"] == "/cache/no-token"  # no token file read
    assert "HF_TOKEN" not in env and "planted" not in json.dumps(env) and PASSWORD not in json.dumps(env)
    gated = child_env(Job("g", "org/gated", SHA, "v1", "u", meta={"gated": True}), Path("/cache"), worker_env)
    assert gated["HF_TOKEN"] == "hf_read_token" and set(gated) == set(env) | {"HF_TOKEN"}
    assert "HF_TOKEN" not in child_env(
        Job("g", "org/gated", SHA, "v1", "u", meta={"gated": True}), Path("/cache"), {"HF_TOKEN": "hf_write_token"}
    )  # a gated model with no read token configured gets no token at all, never the write token
