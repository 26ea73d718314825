"""Secrets stay with the worker (issue 19): help text, children's command lines and environments, engine args.

Real worker processes on a real SQLite file, with the stand-in harness of tests/stand_in.py, which dumps
its argv and environment where ``$STAND_IN_DUMP`` says.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tcmqa import flags, worker
from tcmqa.harness import EvalConfig
from tcmqa.store import FAILED, Job, open_store, version_t
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
    }
    assert env["HF_HUB_CACHE"] == "/cache" and env["HF_TOKEN_PATH"] == "/cache/no-token"  # no token file read
    assert "HF_TOKEN" not in env and "planted" not in json.dumps(env) and PASSWORD not in json.dumps(env)
    gated = child_env(Job("g", "org/gated", SHA, "v1", "u", meta={"gated": True}), Path("/cache"), worker_env)
    assert gated["HF_TOKEN"] == "hf_read_token" and set(gated) == set(env) | {"HF_TOKEN"}
    assert "HF_TOKEN" not in child_env(
        Job("g", "org/gated", SHA, "v1", "u", meta={"gated": True}), Path("/cache"), {"HF_TOKEN": "hf_write_token"}
    )  # a gated model with no read token configured gets no token at all, never the write token


# A credential in every place a URL carries one, in several schemes: the userinfo, the query string, a Hub token.
URL_FORMS = {
    "postgresql://u@db.example/q?password=pw-query": "pw-query",
    "postgres://u@db.example/q?sslmode=require&token=pw-token": "pw-token",
    "postgresql+psycopg://u@db.example/q?secret=pw-secret": "pw-secret",
    "postgresql://u:pw-user@db.example:5432/q?key=pw-key": "pw-user",
    "mysql://u:p@ss-word@db.example/q": "ss-word",
    "https://hub.example/api?api_key=pw-api&x=1": "pw-api",
    "redis://:pw-redis@cache.example:6379/0": "pw-redis",
    "s3://bucket/x?sslpassword=pw-ssl;authtoken=pw-auth": "pw-ssl",
    "https://hub.example/?hftoken=hf_" + "a" * 34: "a" * 34,
}


def test_secrets_url_forms_redacted_by_the_one_rule() -> None:
    for url, secret in URL_FORMS.items():
        shown = flags.redact(f"opening {url} failed")
        assert secret not in shown and "***" in shown and shown.startswith("opening ") and shown.endswith(" failed")
        assert flags.looks_secret("TCMQA_STORE", url)
    harmless = "postgresql://u@db.example/q?sslmode=require&options=-c statement_timeout=3 max_num_batched_tokens=8"
    assert flags.redact(harmless) == harmless and not flags.looks_secret("TCMQA_STORE", harmless)


def test_secrets_url_forms_redacted_in_help_logs_repr_and_errors(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A live PostgreSQL store named with its password in the query and in the userinfo (trust authentication
    ignores it): the worker's help, its start log, the store's repr and the "newer schema" error show neither."""
    from postgres import fresh_database

    query, userinfo = (sa.engine.make_url(fresh_database(postgres_url)) for _ in range(2))
    specs = {
        query.render_as_string(hide_password=False) + "?password=pw-in-query": "pw-in-query",
        userinfo.set(password="pw-in-userinfo").render_as_string(hide_password=False): "pw-in-userinfo",
    }
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        for spec, secret in specs.items():
            monkeypatch.setenv("TCMQA_STORE", spec)
            parser = argparse.ArgumentParser()
            worker.add_arguments(parser)
            assert secret not in parser.format_help() and "***" in parser.format_help()
            store = open_store(spec)
            assert secret not in repr(store) and "127.0.0.1" in repr(store)
            caplog.clear()
            with caplog.at_level(logging.DEBUG):
                worker.main(parser.parse_args(["--once", "--runs", str(tmp_path / "runs"), "--poll-s", "0.1"]))
            assert "worker on" in caplog.text and secret not in caplog.text
            with store._write() as conn:
                conn.execute(sa.update(version_t).values(version=999))
            with pytest.raises(RuntimeError, match="newer than this code") as raised:
                open_store(spec)
            assert secret not in str(raised.value) and "***" in str(raised.value)
            store.close()
    finally:
        signal.signal(signal.SIGTERM, sigterm)


def test_secrets_url_forms_child_env_drops_every_secret_looking_name() -> None:
    """Names that hide a credential without a separator, and an allowed name whose value carries one, are left
    out; of the project's own variables the harness gets only those it reads."""
    worker_env = {
        "PATH": "/usr/bin",
        "TCMQA_CACHE": "/data/tcmqa",
        "HF_HUB_OFFLINE": "1",
        "TCMQA_DBPASSWORD": "planted-db",
        "TCMQA_SECRETS": "planted-secrets",
        "HF_HUB_ACCESSTOKEN": "planted-access",
        "HF_ENDPOINT": "https://hub.example/?password=planted-endpoint",
        "HF_HUB_URL": "https://hub.example/?token=planted-url",
        "TORCH_HOME_CREDENTIALS": "planted-credentials",
        "CUDA_APIKEY": "planted-apikey",
        "TCMQA_DATA": "TechTCM/TCMQA",  # the worker's, not the harness's (it gets --data)
        "TCMQA_ADMINS": "lead",
        "SITE_PASSPHRASE": "planted-site",
        "TCMQA_CHILD_ENV": "SITE_*",
    }
    env = child_env(Job("j", "org/m", SHA, "v1", "u"), Path("/cache"), worker_env)
    assert {k for k in worker_env if k in env} == {"PATH", "TCMQA_CACHE", "HF_HUB_OFFLINE"}
    assert "planted" not in json.dumps(env)


CREDENTIAL_ENGINE_ARGS = (
    {"x": {"hf_token": "planted"}},
    {"hftoken": "planted"},
    {"HF_HUB_ACCESSTOKEN": "planted"},
    {"apiKey": "planted"},
    {"endpoint": "https://hub.example/model?token=planted"},
    {"hf_overrides": {"urls": ["https://ok.example", "https://u:planted@hub.example"]}},
    {"tokenizer": "hf_" + "b" * 34},
    {"model_loader_extra_config": "--hf-token=planted"},
)


def test_secrets_url_forms_nested_or_misspelt_engine_args_refused() -> None:
    for bad in CREDENTIAL_ENGINE_ARGS:
        with pytest.raises(ValueError, match="looks like a credential") as raised:
            WorkerConfig(engine_args=bad)
        assert "planted" not in str(raised.value) and "b" * 34 not in str(raised.value)
        with pytest.raises(ValueError, match="looks like a credential"):
            EvalConfig(model="org/m", engine_args=bad)
    fine = {"max_num_batched_tokens": 4096, "hf_overrides": {"rope_scaling": {"type": "linear"}}, "n": [1, "a"]}
    assert WorkerConfig(engine_args=fine).engine_args == fine


def test_secrets_url_forms_no_credential_in_a_published_row(
    tmp_path: Path, stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness that records a credential in its row's engine args (a command of the operator's, a tampered
    run folder) fails its job: no results row, no publication, and the reason does not repeat it."""
    store = open_store(tmp_path / "store")
    cfg = WorkerConfig(command=stand_in, data="demo-tree", runs=tmp_path / "runs", models_cache=tmp_path / "m")
    recorded = tmp_path / "engine_args.json"  # a file: a variable holding a credential never reaches the harness
    monkeypatch.setenv("STAND_IN_ENGINE_ARGS", str(recorded))
    planted = [CREDENTIAL_ENGINE_ARGS[i] for i in (0, 4, 7)]  # nested, a URL's query, a flag in a string
    for n, engine_args in enumerate(planted):
        recorded.write_text(json.dumps(engine_args))
        store.submit(f"org/m{n}", SHA, "v1", "u")
        job = store.claim("w")
        assert job is not None and worker.run_job(store, job, cfg) == "FAILED"
    jobs = store.jobs()
    assert [j.status for j in jobs] == [FAILED] * len(planted)
    assert all("looks like a credential" in (j.reason or "") for j in jobs)
    assert not store.results() and not store.unpublished()
    assert "planted" not in json.dumps([j.reason for j in jobs]) and "b" * 34 not in json.dumps(
        [j.reason for j in jobs]
    )
    recorded.write_text(json.dumps({"max_num_batched_tokens": 4096}))
    store.submit("org/fine", SHA, "v1", "u")
    job = store.claim("w")
    assert job is not None and worker.run_job(store, job, cfg) == "FINISHED" and len(store.results()) == 1


def test_secrets_url_forms_space_start_and_public_reasons(caplog: pytest.LogCaptureFixture) -> None:
    """The Space refuses a store of an unknown scheme at once (no minute of retries into an empty queue), and a
    job's reason in the public requests mirror carries no credential."""
    from tcmqa.hub.files import request_json
    from tcmqa.leaderboard.hosted import open_store_retrying

    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), pytest.raises(ValueError, match="unknown store scheme") as raised:
        open_store_retrying("postgresql+psycopg2://u:pw-typo@db.example/q?password=pw-query", waits_s=(30,))
    assert time.monotonic() - started < 10 and "pw-" not in str(raised.value) + caplog.text
    for url, secret in URL_FORMS.items():
        job = Job("j", "org/m", SHA, "v1", "u", status=FAILED, reason=f"the harness could not reach {url} (exit 1)")
        assert secret not in json.dumps(request_json(job)), url
