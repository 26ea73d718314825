"""Fresh items evaluated: the hidden pool after the public items in one engine load, its columns in the
results row, nothing of it published, and back-fills when the pool grows (tiny model, demo tree)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from fresh_items import accept

from tcmqa import harness
from tcmqa.data import load_config
from tcmqa.fresh import backfill
from tcmqa.fresh.hidden import HIDDEN_DIR, read_pool, write_pool
from tcmqa.fresh.pool import retire
from tcmqa.fresh.scores import FRESH_COLUMNS
from tcmqa.harness import EvalConfig
from tcmqa.hub.publisher import Publisher
from tcmqa.models import local_revision
from tcmqa.outputs import read_outputs
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import OUTPUTS
from tcmqa.store import BACKFILL, FAILED, FINISHED, SQLiteStore
from tcmqa.worker import WorkerConfig, hand_pool, work

pytest.importorskip("transformers")

POOL_VERSION = "pool-" + "ab" * 30


def pool_items(demo_tree: Path, n: int = 6) -> list[dict]:
    """Pool items written for the test: demo items' characters (the tiny tokenizer covers them) in new
    stems, new ids, with release dates either side of 2026-06-01."""
    corpus = [item for item in load_config(demo_tree, "corpus").to_list() if not item["flagged"]]
    items = []
    for k, item in enumerate(corpus[:n]):
        stem = "".join(reversed(item["question"])) + f"（新{k}）"
        released = "2026-03-01" if k % 2 else "2026-09-01"
        items.append({**item, "id": f"fresh-{k:04d}", "question": stem, "source": "fresh", "release_date": released})
    return items


def reference(items: list[dict]) -> dict[str, bool]:
    return {item["id"]: k % 3 != 0 for k, item in enumerate(items)}


def test_fresh_pool_is_evaluated_after_the_public_items(tiny_eval, tiny_engine, demo_tree, tmp_path, monkeypatch):
    items = pool_items(demo_tree)
    path = write_pool(tmp_path / "run", POOL_VERSION, items, reference(items))
    assert read_pool(path).items == items
    seen: list[str] = []
    generate = harness.generate_parts
    loads = []
    monkeypatch.setattr(harness, "open_engine", lambda config: loads.append(config) or tiny_engine)

    def spy(engine, chunks, out, name, watch, **kwargs):  # kwargs: progress_dir (where the progress records go)
        seen.extend(item["id"] for chunk in chunks for item in chunk)
        return generate(engine, chunks, out, name, watch, **kwargs)

    monkeypatch.setattr(harness, "generate_parts", spy)
    config = EvalConfig(**{**tiny_eval, "out": tmp_path / "run", "pool": path, "released": "2026-06-01"})
    report = harness.run(config)  # loads the engine once (open_engine), then the public items, then the pool
    n_public = report.results["n"]
    assert len(loads) == 1
    assert seen[n_public:] == [item["id"] for item in items] and not seen[0].startswith("fresh-")
    public = read_outputs(report.out)
    assert not public["item_id"].str.startswith("fresh-").any()  # the public parts hold no pool item
    hidden = read_outputs(report.out / HIDDEN_DIR / POOL_VERSION[:16])
    assert hidden["item_id"].tolist() == [item["id"] for item in items]
    row = json.loads((report.out / "results.json").read_text())
    assert row["n_fresh"] == len(items) and row["pool_version"] == POOL_VERSION
    assert row["fresh"] == pytest.approx(100 * hidden["correct"].mean())
    assert row["public_minus_fresh"] == pytest.approx(row["full"] - row["fresh"])
    assert row["fresh_ci_low"] <= row["fresh"] <= row["fresh_ci_high"]
    after = hidden[hidden["item_id"].isin([i["id"] for i in items if i["release_date"] > "2026-06-01"])]
    assert row["n_fresh_after_release"] == 3
    assert row["fresh_after_release"] == pytest.approx(100 * after["correct"].mean())
    assert row["human_fresh"] == pytest.approx(100 * 4 / 6) and row["model_released"] == "2026-06-01"
    assert row["fresh_gap"] is not None and isinstance(row["fresh_gap_marked"], bool)


REPO = "org/tcmqa"


@pytest.fixture(scope="module")
def evaluated(tiny_dir, demo_tree, tmp_path_factory) -> tuple[SQLiteStore, str, list[dict], WorkerConfig]:
    """A job on the tiny model through the worker and the real harness, with a pool of six accepted items (the
    practitioners' blind answers: items 0 and 3 wrong by majority)."""
    tmp_path = tmp_path_factory.mktemp("fresh-job")
    store = SQLiteStore(tmp_path / "s")
    accept(store, pool_items(demo_tree), right={0: [True, False, False], 3: [False, False, True]})
    meta = {"path": str(tiny_dir), "released": "2026-06-01"}
    job = store.submit("tiny", local_revision(tiny_dir), PROTOCOL, "u", meta)
    cfg = WorkerConfig(
        data=str(demo_tree), runs=tmp_path / "runs", engine="transformers", dtype="float32",
        engine_args={"batch_size": 8}, skip_probes=True, heartbeat_s=0.5, poll_s=0.1, hosted=False,
    )  # fmt: skip
    assert work(store, cfg, "w", once=True) == 1
    assert store.get(job.id).status == FINISHED, store.get(job.id).log_tail
    return store, job.id, store.accepted_fresh_items(), cfg


def publish_and_check(store: SQLiteStore, items: list[dict]) -> dict[str, bytes]:
    """Publish what is pending; no file of the commits holds a pool item's id or text, raw or in a Parquet cell."""
    hub = FakeHub()
    hub.create_repo(REPO)
    assert Publisher(store, hub, REPO, sleep=lambda s: None).publish_pending() == 1
    files = hub.files(REPO)
    secrets = [item["id"] for item in items] + [item["question"] for item in items]
    for path, data in files.items():
        for secret in secrets:
            assert secret.encode() not in data, (path, secret)
        if path.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(data))
            cells = [str(v) for column in table.columns for v in column.to_pylist()]
            assert not [c for c in cells if any(secret in c for secret in secrets)], path
    return files


def test_fresh_hidden_job_evaluates_the_pool_and_publishes_none_of_it(evaluated):
    """The pool after the public items, the row's Fresh with its n; the commits the publisher makes hold no pool
    item's text, id or outputs."""
    store, job_id, items, _ = evaluated
    [row] = store.results()
    assert row["n_fresh"] == len(items) == 6 and row["fresh"] is not None
    assert row["pool_version"] == store.fresh_pool_version() and row["human_fresh"] == pytest.approx(100 * 4 / 6)
    assert row["n_fresh_after_release"] == 6 and row["model_released"] == "2026-06-01"  # accepted after it
    stored = read_outputs(*{part.parent for part in store.outputs_files(job_id)})
    assert not stored["item_id"].isin([item["id"] for item in items]).any()  # the store's parts are the public ones
    files = publish_and_check(store, items)
    assert any(path.startswith("outputs/") for path in files)


def test_fresh_hidden_publisher_withholds_any_row_of_a_pool_item(demo_tree, tmp_path):
    """Should a job's stored part ever hold a pool item's row, the publisher's one rule for what is withheld
    (tcmqa.hub.withheld: open practice blocks and the hidden pool) cuts it from the commit."""
    store = SQLiteStore(tmp_path / "s")
    [pooled] = accept(store, pool_items(demo_tree, n=1))
    part = tmp_path / "outputs" / "part-00000.parquet"
    part.parent.mkdir()
    rows = [dict.fromkeys(OUTPUTS) | {"model": "m", "item_id": item, "answer_type": "single"} for item in ("1", pooled)]
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), part)
    store.submit("m", "1" * 40, PROTOCOL, "u")
    job = store.claim("w")
    assert job is not None and store.finish(job, {"model": "m", "n": 1, "n_corpus": 1, "coverage": 100.0}, [part])
    hub = FakeHub()
    hub.create_repo(REPO)
    assert Publisher(store, hub, REPO, sleep=lambda s: None).publish_pending() == 1
    [published] = [data for path, data in hub.files(REPO).items() if path.startswith("outputs/")]
    assert pq.read_table(io.BytesIO(published)).column("item_id").to_pylist() == ["1"]


def test_fresh_backfill_evaluates_only_the_grown_pool_into_the_row(evaluated, demo_tree, monkeypatch):
    store, job_id, _, cfg = evaluated
    [before] = store.results()
    accept(store, pool_items(demo_tree, n=8)[6:])
    grown = store.accepted_fresh_items()
    monkeypatch.setattr(backfill, "MIN_POOL", len(grown))
    assert work(store, cfg, "w", once=True) == 1  # queued by the worker's loop, then run
    [job] = [j for j in store.jobs() if j.kind == BACKFILL]
    assert job.status == FINISHED and job.meta["of"] == job_id, job.log_tail
    [row] = store.results()  # one row per model, on the new pool
    assert row["pool_version"] == store.fresh_pool_version() != before["pool_version"]
    assert row["n_fresh"] == len(grown) == 8
    assert {k: v for k, v in row.items() if k not in FRESH_COLUMNS} == {
        k: v for k, v in before.items() if k not in FRESH_COLUMNS
    }  # the public columns are the recorded run's
    assert row["public_minus_fresh"] == pytest.approx(row["full"] - row["fresh"])
    publish_and_check(store, grown)  # the row is published again, with nothing of the pool


def test_fresh_hidden_a_template_raising_with_the_prompt_leaves_nothing_in_the_log_tail(tiny_dir, demo_tree, tmp_path):
    """A submitted model's chat template can raise with the prompt in its message: on a pool item, the job fails
    with a log tail (shown in the Queue tab) that holds nothing of it; the detail stays in the hidden log."""
    from transformers import AutoTokenizer

    hostile = tmp_path / "hostile"
    shutil.copytree(tiny_dir, hostile)
    tokenizer = AutoTokenizer.from_pretrained(hostile)
    raises = (
        "{% if '新' in messages[0]['content'] %}{{ raise_exception('leak: ' + messages[0]['content']) }}{% endif %}"
    )
    tokenizer.chat_template = raises + tokenizer.chat_template  # the pool's stems end in （新k）, no public one has 新
    tokenizer.save_pretrained(hostile)
    store = SQLiteStore(tmp_path / "s")
    accept(store, pool_items(demo_tree, n=2))
    job = store.submit("hostile", local_revision(hostile), PROTOCOL, "u", {"path": str(hostile)})
    cfg = WorkerConfig(
        data=str(demo_tree), runs=tmp_path / "runs", engine="transformers", dtype="float32",
        engine_args={"batch_size": 8}, skip_probes=True, heartbeat_s=0.5, poll_s=0.1, hosted=False,
    )  # fmt: skip
    work(store, cfg, "w", once=True)
    failed = store.get(job.id)
    assert failed is not None and failed.status == FAILED
    assert "evaluating the hidden pool failed; its log stays on the worker" in failed.log_tail
    for item in store.accepted_fresh_items():
        for text in (item["question"], item["question"][:8], *item["options"].values(), item["id"]):
            assert text not in failed.log_tail and text not in failed.reason and text not in failed.progress, text
    [hidden_log] = (tmp_path / "runs").glob(f"*/{HIDDEN_DIR}/pool.log")
    assert "leak: " in hidden_log.read_text()  # it did raise with the prompt: the detail stayed on the worker


def record(store: SQLiteStore, model: str, **row) -> str:
    job = store.submit(model, "1" * 40, PROTOCOL, "u")
    claimed = store.claim("w")
    assert claimed is not None and claimed.id == job.id
    values = {"model": model, "protocol": PROTOCOL, "data_fingerprint": "f" * 16, "n": 10, "n_corpus": 10}
    values |= {"coverage": 100.0, "engine": "transformers", "dtype": "float32", "engine_args": '{"batch_size": 4}'}
    assert store.finish(claimed, values | row, [])
    return job.id


def test_fresh_backfills_are_queued_below_submissions_when_the_pool_grows(demo_tree, tmp_path, monkeypatch):
    monkeypatch.setattr(backfill, "MIN_POOL", 2)
    items = pool_items(demo_tree, n=3)
    store = SQLiteStore(tmp_path / "s")
    accept(store, items[:1])
    stale = record(store, "org/stale")  # evaluated before the pool reached MIN_POOL
    record(store, "org/partial", n=5, coverage=50.0)  # not comparable: no back-fill
    assert backfill.queue_backfills(store) == []  # below MIN_POOL the board shows no fresh column
    accept(store, items[1:2])
    current = record(store, "org/current", pool_version=store.fresh_pool_version())
    queued = backfill.queue_backfills(store)
    assert [(j.model, j.kind, j.meta["of"]) for j in queued] == [("org/stale", BACKFILL, stale)]
    settings = {"engine": "transformers", "dtype": "float32", "engine_args": {"batch_size": 4}}
    assert queued[0].meta["settings"] == settings
    assert backfill.queue_backfills(store) == []  # that version is done
    accept(store, items[2:])
    queued = backfill.queue_backfills(store)  # org/stale's back-fill still waits: it will read the pool when claimed
    assert [(j.model, j.meta["of"]) for j in queued] == [("org/current", current)]
    submission = store.submit("org/new", "2" * 40, PROTOCOL, "u")  # submitted after the back-fills
    claims = [store.claim("w") for _ in range(3)]
    assert [(j.model, j.kind) for j in claims if j] == [("org/new", "eval"), ("org/stale", BACKFILL),
                                                         ("org/current", BACKFILL)]  # fmt: skip
    assert claims[0] is not None and claims[0].id == submission.id


def test_fresh_hidden_pool_reaches_the_stand_in_harness_too(demo_tree, tmp_path, stand_in):
    """The worker hands any harness command the pool from its store (the stand-in records its size and version)."""
    store = SQLiteStore(tmp_path / "s")
    accept(store, pool_items(demo_tree, n=2))
    job = store.submit("org/m", "1" * 40, PROTOCOL, "u", {"released": "2025-01-02"})
    cfg = WorkerConfig(data="demo-tree", runs=tmp_path / "runs", command=stand_in, heartbeat_s=0.2, poll_s=0.1)
    assert work(store, cfg, "w", once=True) == 1
    assert store.get(job.id).status == FINISHED
    [row] = store.results()
    assert (row["n_fresh"], row["pool_version"], row["model_released"]) == (2, store.fresh_pool_version(), "2025-01-02")


def test_fresh_retired_outputs_are_published_when_their_item_retires(evaluated, tmp_path):
    """A job's outputs of the hidden pool are kept in the store, none of them committed; once an item retires, the
    publisher commits that item's rows (in a part of the job's own, so the ``outputs`` config holds them) and still
    none of the items still hidden."""
    source, job_id, _, _ = evaluated
    assert source.root is not None
    shutil.copytree(source.root, tmp_path / "s")  # retired in a copy: the module's pool stays as it was
    store = SQLiteStore(tmp_path / "s")
    store.republish([job_id])  # published to another hub by an earlier test
    hub = FakeHub()
    hub.create_repo(REPO)
    publisher = Publisher(store, hub, REPO, sleep=lambda s: None)
    assert publisher.publish_pending() == 1
    items = store.accepted_fresh_items()  # the module's six, or eight once the back-fill test grew the pool
    [retired] = retire(store, "lead", keep_newest=len(items) - 1)
    hidden = [item for item in items if item["id"] != retired]
    assert publisher.publish_pending() == 1  # the retirement queued the job again
    commits = hub.commits_to(REPO)
    assert len(commits) == 2
    pool_ids = {item["id"] for item in items}
    held = [pool_rows(hub.files(REPO, revision=commit.sha), pool_ids) for commit in commits]
    assert held[0] == {} and set(held[1]) == {f"outputs/{job_id}-retired-part-00000.parquet"}
    [rows] = held[1].values()
    assert [row["item_id"] for row in rows] == [retired] and rows[0]["model"] == "tiny"
    secrets = [item["id"] for item in hidden] + [item["question"] for item in hidden]
    for commit in commits:
        for path, data in hub.files(REPO, revision=commit.sha).items():
            assert not [s for s in secrets if s.encode() in data], path
    tree = hub.snapshot_download(REPO, repo_type="dataset")
    outputs = load_config(tree, "outputs").to_pandas()
    assert outputs[outputs["item_id"].isin(pool_ids)]["item_id"].tolist() == [retired]


def pool_rows(files: dict[str, bytes], pool_ids: set[str]) -> dict[str, list[dict]]:
    """The rows of pool items in each outputs file that holds any."""
    found = {}
    for path, data in files.items():
        if path.startswith("outputs/"):
            rows = [row for row in pq.read_table(io.BytesIO(data)).to_pylist() if row["item_id"] in pool_ids]
            if rows:
                found[path] = rows
    return found


def test_fresh_reference_is_of_the_workers_raters(demo_tree, tmp_path):
    """The pool handed to the harness carries the practitioners' reference under the Space's N (``TCMQA_RATERS``,
    the worker's ``--raters``), not the default 3: one right answer of three is right for N = 1, wrong for N = 3."""
    store = SQLiteStore(tmp_path / "s")
    [item] = accept(store, pool_items(demo_tree, n=1), right={0: [True, False, False]})
    for raters, right in ((1, True), (3, False)):
        pool = hand_pool(store, tmp_path / f"run-{raters}", raters)
        assert pool is not None and read_pool(pool).reference == {item: right}
    assert WorkerConfig().raters == 3
