"""Local mode end to end: the real Gemma 270M folder submitted through gradio_client, evaluated by a
real ``tcmqa worker`` process running the real ``tcmqa eval`` (transformers) on the built demo tree,
and its row on the board and its outputs in the item explorer."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from fakehub import FakeHub
from gradio_client import Client
from space_fixtures import board, launch, local_settings

from tcmqa.models import local_revision
from tcmqa.store import FINISHED, SQLiteStore

LIMIT = 8


@pytest.mark.engine
def test_local_gemma_evaluated_and_on_the_board(
    tmp_path: Path, demo_tree: Path, demo_items: list[dict], gemma_dir: Path
) -> None:
    store = SQLiteStore(tmp_path / "store")
    demo, url = launch(local_settings(store.root, demo_tree), store, FakeHub())
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tcmqa",
            "worker",
            "--store",
            str(store.root),
            "--data",
            str(demo_tree),
            "--runs",
            str(tmp_path / "runs"),
            "--engine",
            "transformers",
            "--dtype",
            "float32",
            "--limit",
            str(LIMIT),
            "--heartbeat-s",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        client = Client(url, verbose=False)
        feedback, job_id = client.predict(str(gemma_dir), "", api_name="/submit")
        assert feedback.startswith("✅") and "0.27B" in feedback, feedback
        seen = set()
        deadline = time.time() + 900
        while (job := store.get(job_id)).status not in (FINISHED, "FAILED"):
            seen.add(client.predict(job_id, api_name="/job").split("**")[1])
            assert time.time() < deadline, "the evaluation did not finish in 15 minutes"
            time.sleep(1)
        assert job.status == FINISHED, (job.reason, job.log_tail)
        # FINISHED may be seen once: the job can end between the loop's store read and its /job call
        assert seen <= {"PENDING", "RUNNING", "FINISHED"} and "RUNNING" in seen

        rows = [r for r in board(client) if r["Origin"] == "evaluated"]
        assert [r["Model"] for r in rows] == [gemma_dir.name]
        assert 0 <= rows[0]["Full"] <= 100 and rows[0]["Params (B)"] == pytest.approx(0.27, abs=0.01)
        [result] = store.results()
        assert (result["n"], result["protocol"], result["engine"]) == (LIMIT, "v1", "transformers")
        # one identity for a local folder: the submission, the results row and every output row agree
        outputs = pd.concat(pd.read_parquet(p) for p in store.outputs_files())
        assert job.revision == result["revision"] == local_revision(gemma_dir)
        assert set(outputs["revision"]) == {job.revision}

        item = str(demo_items[0]["question_id"])
        _, _, outputs = client.predict(item, api_name="/item")
        assert [row[0] for row in outputs["data"]] == [gemma_dir.name]
    finally:
        worker.kill()
        worker.wait()
        demo.close()
