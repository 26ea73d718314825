"""``data_revision`` is the revision the items were read from (issue 19): resolved once, before any read.

The dataset is the demo tree published to the fake Hub (tests/fakehub.py); the harness's two Hub calls are
answered from it: ``HfApi().dataset_info`` (the head's commit) and the read of a config at a revision (a
snapshot of the fake repo at that commit, read by the real ``load_config``). Right after the harness resolved
the revision, a commit replaces the corpus with a shorter one (as the leaderboard's Publisher commits to the
same repo all day): the run must read, score and record the commit it resolved, never the newer head.
The model is the tiny random one in the real transformers engine.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import huggingface_hub
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from huggingface_hub import CommitOperationAdd

from tcmqa import data as data_module
from tcmqa import harness
from tcmqa.harness import EvalConfig
from tcmqa.publish import publish

REPO = "org/TCMQA"
KEPT = 10  # items the later commit's corpus keeps


class HubDatasets:
    """``HfApi`` as far as the harness asks it about a dataset, answered by the fake Hub; ``then`` runs once,
    right after the first answer (a commit landing between the resolution and the read)."""

    def __init__(self, hub: FakeHub, then: Any = None):
        self.hub, self.then, self.asked = hub, then, []

    def dataset_info(self, repo_id: str, revision: str | None = None, **_: Any) -> SimpleNamespace:
        self.asked.append(revision)
        sha = revision or self.hub.repo_info(repo_id, repo_type="dataset").sha
        if self.then is not None:
            then, self.then = self.then, None
            then()
        return SimpleNamespace(sha=sha)


def shorten_corpus(hub: FakeHub) -> None:
    """A commit whose corpus holds only its first ``KEPT`` items."""
    [path] = [name for name in hub.files(REPO) if name.startswith("corpus/")]
    buf = io.BytesIO()
    pq.write_table(pq.read_table(io.BytesIO(hub.files(REPO)[path])).slice(0, KEPT), buf)
    hub.create_commit(REPO, [CommitOperationAdd(path, buf.getvalue())], commit_message="a corpus fix")


@pytest.fixture
def hub(demo_tree: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeHub, HubDatasets, list]:
    fake = FakeHub()
    publish(demo_tree, REPO, api=fake)
    api = HubDatasets(fake, then=lambda: shorten_corpus(fake))
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda *a, **k: api)
    reads: list[tuple[str, str | None]] = []
    read_local = data_module.load_config

    def read(data: str | Path, config: str, revision: str | None = None) -> Any:
        if str(data) != REPO:
            return read_local(data, config, revision)
        reads.append((config, revision))
        return read_local(fake.snapshot_download(REPO, repo_type="dataset", revision=revision), config)

    monkeypatch.setattr(data_module, "load_config", read)
    return fake, api, reads


def test_data_revision_is_resolved_before_the_items_are_read(hub, tiny_eval, tiny_engine, demo_tree, tmp_path):
    fake, api, reads = hub
    first = fake.repo_info(REPO).sha
    report = harness.run(EvalConfig(**{**tiny_eval, "data": REPO, "out": tmp_path / "run"}), engine=tiny_engine)
    local = harness.run(EvalConfig(**{**tiny_eval, "out": tmp_path / "local"}), engine=tiny_engine)  # same items
    row = report.results
    assert fake.repo_info(REPO).sha != first  # the head moved during the run
    assert api.asked == [None] and row["data_revision"] == first  # resolved once, recorded
    assert {revision for _, revision in reads} == {first} and {c for c, _ in reads} == {"corpus", "subset"}
    assert (row["n_corpus"], row["data_fingerprint"]) == (local.results["n_corpus"], local.results["data_fingerprint"])
    assert row["n_corpus"] > KEPT and row["coverage"] == 100.0
    assert local.results["data_revision"] is None  # a local tree: what it records today


def test_a_resumed_run_reads_the_revision_it_started_on(hub, tiny_eval, tiny_engine, tmp_path, monkeypatch):
    fake, api, reads = hub
    first = fake.repo_info(REPO).sha
    config = EvalConfig(**{**tiny_eval, "data": REPO, "out": tmp_path / "run"})
    real_generate, calls = tiny_engine._generate, {"n": 0}

    def crash_on_second_chunk(batch: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("simulated crash")
        return real_generate(batch)

    monkeypatch.setattr(tiny_engine, "_generate", crash_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        harness.run(config, engine=tiny_engine)
    monkeypatch.setattr(tiny_engine, "_generate", real_generate)
    reads.clear()
    resumed = harness.run(
        EvalConfig(**{**tiny_eval, "data": REPO, "out": tmp_path / "run", "resume": True}), tiny_engine
    )
    assert api.asked == [None]  # the resume asked nothing: it reads the run's own revision, not the new head
    assert {revision for _, revision in reads} == {first} != {fake.repo_info(REPO).sha}
    assert resumed.results["data_revision"] == first and resumed.results["n_corpus"] > KEPT


def test_a_results_file_from_before_a_column_was_added_still_loads(tmp_path):
    """A local tree keeps results files of every schema it was published under: the new column reads as null."""
    (tmp_path / "results").mkdir()
    pq.write_table(pa.table({"model": ["old/model"], "full": [50.0]}), tmp_path / "results" / "a.parquet")
    pq.write_table(
        pa.table({"model": ["new/model"], "full": [60.0], "pride_lp": [61.0]}), tmp_path / "results" / "b.parquet"
    )
    rows = data_module.load_config(tmp_path, "results").to_pandas().sort_values("model")
    assert rows["model"].tolist() == ["new/model", "old/model"]
    assert rows["pride_lp"].iloc[0] == 61.0 and pd.isna(rows["pride_lp"].iloc[1])
