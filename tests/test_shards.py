"""Sharded runs (``tcmqa eval --shard I/N``, ``tcmqa merge``), ``--engine-arg`` and the automatic chunk
size, on the tiny random model and the demo tree (fast, transformers engine)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time

import pandas as pd
import pytest
import raynodes

from tcmqa import cli, harness, ray_shards
from tcmqa.engines import check_options, load_engine
from tcmqa.engines.base import CHUNK_CPU
from tcmqa.harness import EvalConfig, parse_shard, shard_items, shard_of
from tcmqa.merge import MergeError, merge
from tcmqa.outputs import MANIFEST, RESULTS_FILE, part_files, read_outputs

pytest.importorskip("transformers")
N_SHARDS = 3
RAY_SHARDS = 2  # one on each node of the test's Ray cluster


@pytest.fixture(scope="module")
def engine(tiny_engine):
    return tiny_engine


@pytest.fixture(scope="module")
def base(tiny_eval):
    return tiny_eval


@pytest.fixture(scope="module")
def whole(base, engine, tmp_path_factory):
    return harness.run(EvalConfig(**base, out=tmp_path_factory.mktemp("whole")), engine=engine)


@pytest.fixture(scope="module")
def shards(base, engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    return [
        harness.run(EvalConfig(**base, shard=f"{i}/{N_SHARDS}", out=root / f"shard-{i}"), engine=engine).out
        for i in range(N_SHARDS)
    ]


def test_shard_partition_is_stable_and_complete(demo_tree):
    from tcmqa.data import load_config

    ids = load_config(demo_tree, "corpus")["id"]
    items = [{"id": item_id} for item_id in ids]
    for n in (1, 2, 3, 7):
        parts = [shard_items(items, f"{i}/{n}") for i in range(n)]
        assert sorted(item["id"] for part in parts for item in part) == sorted(ids)  # every item exactly once
        for part in parts:  # each shard keeps the corpus order
            assert [item["id"] for item in part] == [i for i in ids if i in {x["id"] for x in part}]
    # appending items moves no existing item to another shard
    grown = items + [{"id": f"new-{k}"} for k in range(50)]
    for i in range(N_SHARDS):
        before = [x["id"] for x in shard_items(items, f"{i}/{N_SHARDS}")]
        assert [x["id"] for x in shard_items(grown, f"{i}/{N_SHARDS}")][: len(before)] == before
    assert (
        shard_of("q-1", 5) == shard_of("q-1", 5) == int(__import__("hashlib").sha256(b"q-1").hexdigest()[:16], 16) % 5
    )
    assert sum(len(shard_items(grown, f"{i}/{N_SHARDS}")) > 0 for i in range(N_SHARDS)) == N_SHARDS
    for bad in ("3/3", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(ValueError, match="I/N"):
            parse_shard(bad)


def test_shard_run_folders_record_the_shard(shards, whole):
    whole_manifest = json.loads((whole.out / MANIFEST).read_text())
    for i, out in enumerate(shards):
        manifest = json.loads((out / MANIFEST).read_text())
        assert manifest["shard"] == f"{i}/{N_SHARDS}"
        assert manifest["selection_fingerprint"] == whole_manifest["data_fingerprint"]
        assert manifest["n_selection"] == whole_manifest["n_items"] > manifest["n_items"]
        same = {k: v for k, v in manifest.items() if k not in {"shard", "data_fingerprint", "n_items"}}
        assert same == {k: whole_manifest[k] for k in same}


def assert_same_rows(merged, whole) -> None:
    """Row for row: the same items, texts and predictions; log-probs equal up to float32 noise (the
    batch an item shares changes its padding, hence the last bits of its log-probs)."""
    exact = ["item_id", "generated_text", "prediction", "correct", "lp_prediction", "lp_correct", "prompt_hash"]
    pd.testing.assert_frame_equal(merged[exact], whole[exact])
    lp = "letter_logprobs"
    pd.testing.assert_frame_equal(merged.drop(columns=lp), whole.drop(columns=lp), check_exact=False, atol=1e-5, rtol=0)
    for got, want in zip(merged[lp], whole[lp], strict=True):
        assert got == pytest.approx(want, abs=1e-5)


def same_results(a: dict, b: dict) -> bool:
    keys = set(a) - {"date"}
    return keys == set(b) - {"date"} and all(
        a[k] == pytest.approx(b[k], abs=1e-5) if isinstance(a[k], float) else a[k] == b[k] for k in keys
    )


def test_shard_merge_of_3_equals_the_unsharded_run(shards, whole, tmp_path):
    merged = merge(shards, tmp_path / "merged")
    assert_same_rows(read_outputs(tmp_path / "merged"), read_outputs(whole.out))
    written = json.loads((tmp_path / "merged" / RESULTS_FILE).read_text())
    assert written == merged
    assert same_results(merged, whole.results)
    assert json.loads((tmp_path / "merged" / MANIFEST).read_text()) == json.loads((whole.out / MANIFEST).read_text())
    assert [p.name for p in part_files(tmp_path / "merged")] == [p.name for p in part_files(whole.out)]
    # the command line does the same; merging again gives the same rows
    assert cli.main(["merge", *map(str, shards), "--out", str(tmp_path / "again")]) == 0
    pd.testing.assert_frame_equal(read_outputs(tmp_path / "again"), read_outputs(tmp_path / "merged"))


def test_shard_merge_refuses_a_missing_shard_naming_its_items(shards, tmp_path):
    missing = read_outputs(shards[1])["item_id"].tolist()
    with pytest.raises(MergeError, match="in no shard") as err:
        merge([shards[0], shards[2]], tmp_path / "m")
    assert all(item_id in str(err.value) for item_id in missing[:5])
    assert not part_files(tmp_path / "m")


def test_shard_merge_refuses_a_doubled_shard_naming_its_items(shards, tmp_path):
    copy = tmp_path / "copy-of-shard-0"
    shutil.copytree(shards[0], copy)
    doubled = read_outputs(shards[0])["item_id"].tolist()
    with pytest.raises(MergeError, match="more than one shard") as err:
        merge([*shards, copy], tmp_path / "m")
    assert all(item_id in str(err.value) for item_id in doubled[:5])


def test_shard_merge_refuses_shards_of_different_runs(shards, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(shards[2], other)
    manifest = json.loads((other / MANIFEST).read_text())
    (other / MANIFEST).write_text(json.dumps({**manifest, "dtype": "bfloat16", "engine_args": {"batch_size": 8}}))
    with pytest.raises(MergeError, match="not shards of one run") as err:
        merge([shards[0], shards[1], other], tmp_path / "m")
    assert "dtype" in str(err.value) and "engine_args" in str(err.value)
    with pytest.raises(MergeError, match="not finished"):
        (unfinished := tmp_path / "unfinished").mkdir()
        shutil.copy(shards[0] / MANIFEST, unfinished / MANIFEST)
        merge([unfinished, shards[1], shards[2]], tmp_path / "m2")


def test_engine_arg_flags_parse_as_json_else_text():
    import argparse

    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    args = parser.parse_args(
        [
            *("--model", "m", "--engine-arg", "max_model_len=512", "--engine-arg", "enforce_eager=true"),
            *("--engine-arg", "quantization=fp8", "--engine-arg", 'hf_overrides={"a": [1, 2]}', "--shard", "1/4"),
        ]
    )
    config = EvalConfig.from_args(args)
    assert config.engine_args == {
        "max_model_len": 512,
        "enforce_eager": True,
        "quantization": "fp8",
        "hf_overrides": {"a": [1, 2]},
    }
    assert config.shard == "1/4" and config.chunk_size is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--model", "m", "--engine-arg", "no-equals-sign"])


def test_engine_arg_unknown_key_fails_before_the_model_loads(tiny_dir, demo_tree, monkeypatch, tmp_path):
    import transformers

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_load)
    with pytest.raises(ValueError, match="unknown --engine-arg for the transformers engine: no_such_option"):
        load_engine("transformers", str(tiny_dir), dtype="float32", no_such_option=1)
    with pytest.raises(ValueError, match="trust_remote_code is not allowed"):
        load_engine("transformers", str(tiny_dir), dtype="float32", trust_remote_code=True)
    with pytest.raises(ValueError, match="set by tcmqa itself"):
        check_options("transformers", {"torch_dtype": "float16"})
    config = EvalConfig(
        model=str(tiny_dir), data=str(demo_tree), engine="transformers", engine_args={"no_such_option": 1}
    )
    with pytest.raises(ValueError, match="no_such_option"):
        harness.run(config)
    with pytest.raises(SystemExit, match="unknown --engine-arg"):  # the command line says the same
        try:
            cli.main(
                [
                    "eval",
                    "--model",
                    str(tiny_dir),
                    "--data",
                    str(demo_tree),
                    "--engine",
                    "transformers",
                    "--out",
                    str(tmp_path / "x"),
                    "--engine-arg",
                    "no_such_option=1",
                ]
            )
        except ValueError as err:
            raise SystemExit(str(err)) from err
    assert not (tmp_path / "x").exists()


def test_engine_arg_reaches_from_pretrained_and_the_run_records_it(base, tmp_path):
    config = EvalConfig(
        **base,
        limit=6,
        out=tmp_path / "r",
        engine_args={"attn_implementation": "eager", "low_cpu_mem_usage": True},
    )
    engine = harness.open_engine(config)
    assert engine.model.config._attn_implementation == "eager"
    report = harness.run(config, engine=engine)
    recorded = {"attn_implementation": "eager", "batch_size": 4, "low_cpu_mem_usage": True}
    assert json.loads((report.out / MANIFEST).read_text())["engine_args"] == recorded
    assert json.loads(report.results["engine_args"]) == recorded
    # --resume refuses another set of engine args
    with pytest.raises(SystemExit, match="engine_args"):
        harness.run(EvalConfig(**{**base, "limit": 6}, out=tmp_path / "r", resume=True), engine=_engine(base))
    # an engine loaded with other options is refused
    with pytest.raises(ValueError, match="other options"):
        harness.run(EvalConfig(**base, limit=6, out=tmp_path / "s"), engine=engine)


def _engine(base):
    return load_engine("transformers", base["model"], dtype="float32", batch_size=4)


def test_chunk_size_auto_is_small_on_cpu_and_resume_keeps_the_recorded_one(base, engine, whole, tmp_path):
    assert engine.default_chunk_size == CHUNK_CPU  # no GPU here
    auto = {**base, "chunk_size": None}
    out = tmp_path / "auto"
    report = harness.run(EvalConfig(**auto, limit=6, out=out), engine=engine)
    assert json.loads((out / MANIFEST).read_text())["chunk_size"] == CHUNK_CPU and len(part_files(out)) == 1
    assert report.generated == 6
    # a run started with 4-item chunks resumes with them when the chunk size is left to the hardware
    out = tmp_path / "resumed"
    shutil.copytree(whole.out, out)
    for part in part_files(out)[2:]:
        part.unlink()
    (out / RESULTS_FILE).unlink()
    resumed = harness.run(EvalConfig(**auto, out=out, resume=True), engine=engine)
    assert resumed.generated == whole.results["n"] - 8
    pd.testing.assert_frame_equal(read_outputs(out), read_outputs(whole.out))  # the same chunks: exact
    with pytest.raises(SystemExit, match="chunk_size"):
        harness.run(EvalConfig(**{**base, "chunk_size": 5}, out=out, resume=True), engine=engine)


def ray_eval_argv(base: dict, out, *flags: str) -> list[str]:
    """``tcmqa eval`` of the tiny model over the demo tree (``base``), with ``flags`` (--ray ...)."""
    argv = ["eval", "--model", base["model"], "--data", base["data"], "--engine", base["engine"]]
    argv += ["--dtype", base["dtype"], "--batch-size", str(base["batch_size"]), "--chunk-size", str(base["chunk_size"])]
    return [*argv, "--out", str(out), *flags]


def ray_attempts(out, index: int) -> list[dict]:
    path = ray_shards.shard_dir(out, index) / ray_shards.ATTEMPTS
    try:
        return json.loads(path.read_text())["attempts"]
    except (FileNotFoundError, json.JSONDecodeError):  # not yet written, or being written
        return []


def wait_for(condition, timeout: float, what: str, process, log):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert process.poll() is None, f"the run ended before {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        time.sleep(0.2)
    return found


@pytest.fixture
def ray_cluster():
    """A head and a second node, one CPU each, as processes of their own (tests/raynodes.py)."""
    with raynodes.RayCluster() as cluster:
        cluster.add_node()
        cluster.add_node()
        yield cluster


def test_ray_cluster_runs_the_shards_on_two_nodes_and_resumes_after_losing_one(ray_cluster, base, whole, tmp_path):
    """`tcmqa eval --ray ADDRESS --shards 2` on a head and a second node (one CPU each): the shards land on both;
    the second node is killed while it runs a shard (no retries: the run fails, naming it), and --resume on the
    head alone runs only that shard and merges the rows of an unsharded run."""
    second = ray_cluster.nodes[1]
    out = tmp_path / "run"
    flags = ("--ray", ray_cluster.address, "--shards", str(RAY_SHARDS))
    argv = [sys.executable, "-m", "tcmqa", *ray_eval_argv(base, out, *flags)]
    log = tmp_path / "first.log"
    with log.open("w") as sink:
        first = subprocess.Popen([*argv, "--ray-retries", "0"], stdout=sink, stderr=subprocess.STDOUT)
    try:

        def on_second():
            return [(i, a) for i in range(RAY_SHARDS) for a in ray_attempts(out, i) if second.holds(a["pid"])]

        [(lost, lost_attempt)] = wait_for(on_second, 240, "shard on the second node", first, log)
        second.kill()
        assert first.wait(timeout=240) != 0
    finally:
        first.kill()
    said = log.read_text()
    assert f"1 of {RAY_SHARDS} shards failed" in said and f"shard {lost}/{RAY_SHARDS}:" in said, said[-3000:]
    assert "rerun with --resume" in said
    done = [i for i in range(RAY_SHARDS) if ray_shards.finished(ray_shards.shard_dir(out, i))]
    assert done == [i for i in range(RAY_SHARDS) if i != lost]
    before = {i: (ray_attempts(out, i), (ray_shards.shard_dir(out, i) / RESULTS_FILE).stat().st_mtime) for i in done}
    head_nodes = {a["node_id"] for i in done for a in ray_attempts(out, i)}
    assert lost_attempt["node_id"] not in head_nodes and len(head_nodes) == 1  # the shards landed on both nodes
    assert not (out / RESULTS_FILE).exists()

    rerun = subprocess.run([*argv, "--resume"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{RAY_SHARDS - 1} of {RAY_SHARDS} shards finished already; running [{lost}]" in rerun.stderr
    for i, (attempts, mtime) in before.items():  # the finished shards were not run again
        assert ray_attempts(out, i) == attempts
        assert (ray_shards.shard_dir(out, i) / RESULTS_FILE).stat().st_mtime == mtime
    again = ray_attempts(out, lost)
    assert [a["node_id"] for a in again] == [lost_attempt["node_id"], *head_nodes] and "finished" in again[-1]
    assert_same_rows(read_outputs(out), read_outputs(whole.out))
    assert same_results(json.loads((out / RESULTS_FILE).read_text()), whole.results)
    assert json.loads((out / MANIFEST).read_text()) == json.loads((whole.out / MANIFEST).read_text())

    # a run folder continues only with --resume and the same flags
    with pytest.raises(SystemExit, match="pass --resume"):
        cli.main(ray_eval_argv(base, out, *flags))
    with pytest.raises(SystemExit, match=r"cannot resume: .* \(limit: None there, 5 now\)"):
        cli.main(ray_eval_argv(base, out, *flags, "--limit", "5", "--resume"))


def test_ray_cluster_local_without_address_runs_and_merges(base, whole, tmp_path):
    """`--ray` alone: a Ray started for the run on this machine, its shards merged into the unsharded rows."""
    out = tmp_path / "run"
    argv = ray_eval_argv(base, out, "--ray", "--shards", "2", "--limit", "8")
    done = subprocess.run([sys.executable, "-m", "tcmqa", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_rows(read_outputs(out), read_outputs(whole.out).iloc[:8].reset_index(drop=True))
    assert all(len(ray_attempts(out, i)) == 1 for i in range(2))


def test_ray_cluster_refuses_an_unreachable_address_in_seconds(base, tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.2", 0))
        address = f"127.0.0.2:{free.getsockname()[1]}"
    start = time.monotonic()
    with pytest.raises(SystemExit, match=f"cannot reach the Ray cluster at {address}"):
        cli.main(ray_eval_argv(base, tmp_path / "x", "--ray", address, "--shards", "2"))
    assert time.monotonic() - start < 30
    assert not (tmp_path / "x").exists()


def test_ray_cluster_without_ray_says_how_to_install(base, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where the extra is not installed
    with pytest.raises(SystemExit, match=r"pip install 'tcmqa\[ray\]'"):
        cli.main(ray_eval_argv(base, tmp_path / "x", "--ray", "--shards", "2"))
    assert not (tmp_path / "x").exists()


def test_ray_cluster_flags_are_refused_before_anything_runs(base):
    for flags, message in [
        ({"shards": 2}, "add --ray"),
        ({"ray": "local"}, "needs --shards N"),
        ({"ray": "local", "shards": 0}, "needs --shards N"),
        ({"ray": "local", "shards": 2, "shard": "0/2"}, "drop --shard"),
        ({"ray": "local", "shards": 2, "ray_retries": -1}, "--ray-retries"),
    ]:
        with pytest.raises(ValueError, match=message):
            EvalConfig(**base, **flags)
    parser = __import__("argparse").ArgumentParser()
    harness.add_arguments(parser)
    assert parser.parse_args(["--model", "m", "--ray", "--shards", "2"]).ray == "local"
    assert parser.parse_args(["--model", "m", "--ray", "auto", "--shards", "2"]).ray == "auto"
