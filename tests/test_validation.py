"""Submission checks, one refusal each, on a real SQLite store and a thin fake of the Hub's model API."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakehub import FakeHub
from space_fixtures import REFUSALS, SHA, hub_models, write_folder

from tcmqa.leaderboard.validation import Policy, Rejected, enqueue, submitter, validate
from tcmqa.models import local_revision
from tcmqa.store import SQLiteStore

LOCAL = Policy(hosted=False, protocol="v1", max_params_b=8)
HOSTED = Policy(hosted=True, protocol="v1", max_params_b=8, rate_limit=2)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "store")


@pytest.mark.parametrize(("model", "revision", "message"), REFUSALS, ids=[r[2][:30] for r in REFUSALS])
def test_each_refusal_has_its_message(store: SQLiteStore, model: str, revision: str, message: str) -> None:
    with pytest.raises(Rejected) as err:
        validate(model, revision, user="local", api=hub_models(), store=store, policy=LOCAL)
    assert message in str(err.value)
    assert store.jobs() == []


@pytest.mark.parametrize(
    ("model", "revision", "sha"),
    [
        ("org/good", "", SHA),
        ("org/good", "v1.0", SHA),
        ("org/good", SHA, SHA),
        ("org/gated-ok", "", "d" * 40),
        ("org/jinja", "", "f" * 40),
        ("org/fp8", "", "9" * 40),  # a quantization vLLM loads from the checkpoint alone
    ],
)
def test_accepted_pinned_to_sha(store: SQLiteStore, model: str, revision: str, sha: str) -> None:
    accepted = validate(model, revision, user="local", api=hub_models(), store=store, policy=LOCAL)
    assert (accepted.model, accepted.revision, accepted.params_b) == (model, sha, 0.27)
    assert accepted.meta().get("gated", False) == (model == "org/gated-ok")  # the worker's cue for a read token


def test_the_hubs_spelling_of_the_id_is_stored_so_case_cannot_dodge_duplicates(store: SQLiteStore) -> None:
    api = hub_models()
    accepted = validate("ORG/Good", "", user="local", api=api, store=store, policy=LOCAL)
    assert accepted.model == "org/good"
    enqueue(accepted, user="local", store=store, policy=LOCAL)
    with pytest.raises(Rejected, match="already PENDING"):
        validate("Org/GOOD", "main", user="local", api=api, store=store, policy=LOCAL)


def test_every_supported_architecture_loads_without_remote_code() -> None:
    from transformers.models.auto import modeling_auto

    from tcmqa.leaderboard.validation import SUPPORTED_ARCHITECTURES

    native = set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    native |= set(modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.values())
    assert native >= SUPPORTED_ARCHITECTURES, sorted(SUPPORTED_ARCHITECTURES - native)


def test_duplicate_points_to_job_and_failed_is_resubmittable(store: SQLiteStore) -> None:
    api = hub_models()
    job = enqueue(
        validate("org/good", "", user="local", api=api, store=store, policy=LOCAL),
        user="local",
        store=store,
        policy=LOCAL,
    )
    with pytest.raises(Rejected, match=f"already PENDING as job {job.id}"):
        validate("org/good", "main", user="local", api=api, store=store, policy=LOCAL)
    store.fail(store.claim("w"), "boom")
    again = enqueue(
        validate("org/good", "", user="local", api=api, store=store, policy=LOCAL),
        user="local",
        store=store,
        policy=LOCAL,
    )
    assert again.id != job.id


def test_hosted_needs_sign_in_and_refuses_folders(store: SQLiteStore, tmp_path: Path) -> None:
    with pytest.raises(Rejected, match="Sign in with Hugging Face"):
        submitter(None, HOSTED)
    assert submitter(SimpleNamespace(username="alice"), HOSTED) == "alice"
    assert submitter(None, LOCAL) == "local"
    with pytest.raises(Rejected, match="Local folders are accepted only when the Space runs locally"):
        validate(str(tmp_path), "", user="alice", api=hub_models(), store=store, policy=HOSTED)


def test_rate_limit_per_user(store: SQLiteStore) -> None:
    api = hub_models()
    for i in range(2):
        store.submit(f"org/m{i}", SHA, "v1", "alice")
    with pytest.raises(Rejected, match="Rate limit: 2 submissions per 24 h"):
        validate("org/good", "", user="alice", api=api, store=store, policy=HOSTED)
    assert validate("org/good", "", user="bob", api=api, store=store, policy=HOSTED).revision == SHA
    old = Policy(hosted=True, protocol="v1", rate_limit=2, rate_window_s=0.001)
    time.sleep(0.01)
    assert validate("org/good", "", user="alice", api=api, store=store, policy=old).revision == SHA


def test_50_concurrent_submissions_of_one_user_stop_at_the_rate_limit_exactly(store: SQLiteStore) -> None:
    api = hub_models()
    for i in range(50):
        api.add_model(f"org/c{i}", sha=f"{i:040x}")
    policy = Policy(hosted=True, protocol="v1", rate_limit=5)

    def submit(i: int) -> str:
        try:  # validate's early check races; the store's check-and-insert is one transaction
            enqueue(validate(f"org/c{i}", "", user="alice", api=api, store=store, policy=policy),
                    user="alice", store=store, policy=policy)  # fmt: skip
            return "queued"
        except Rejected as err:
            return str(err)

    with ThreadPoolExecutor(max_workers=50) as pool:
        outcomes = list(pool.map(submit, range(50)))
    assert outcomes.count("queued") == 5 and len(store.jobs()) == 5
    assert all(o.startswith("Rate limit: 5 submissions per 24 h") for o in outcomes if o != "queued")


def test_local_folder_counts_params_and_fingerprints(store: SQLiteStore, tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "my-model", shape=(1000, 270_000))
    accepted = validate(str(folder), "", user="local", api=FakeHub(), store=store, policy=LOCAL)
    assert (accepted.model, accepted.params_b, accepted.path) == ("my-model", 0.27, str(folder.resolve()))
    # pinned by the revision the harness records for the same folder (tcmqa.models.local_revision)
    assert accepted.revision == local_revision(folder) and accepted.revision.startswith("local-")
    assert accepted.meta()["path"] == str(folder.resolve())
    assert (
        validate(str(folder), "", user="local", api=FakeHub(), store=store, policy=LOCAL).revision == accepted.revision
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}!"}))
    assert (
        validate(str(folder), "", user="local", api=FakeHub(), store=store, policy=LOCAL).revision != accepted.revision
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"template": False}, "has no chat template"),
        ({"architectures": ("T5ForConditionalGeneration",)}, "not supported"),
        ({"weights": "pytorch_model.bin"}, "only pickle weights"),
        ({"shape": (9_000_000, 1000)}, "9B parameters"),
    ],
)
def test_local_folder_refusals(store: SQLiteStore, tmp_path: Path, kwargs: dict, message: str) -> None:
    folder = write_folder(tmp_path / "m", **kwargs)
    with pytest.raises(Rejected, match=message):
        validate(str(folder), "", user="local", api=FakeHub(), store=store, policy=LOCAL)
    with pytest.raises(Rejected, match=r"no config\.json"):
        validate(str(tmp_path), "", user="local", api=FakeHub(), store=store, policy=LOCAL)


def test_fresh_release_date_from_the_hub_or_given_at_submission(store: SQLiteStore) -> None:
    """'Fresh after release' needs the model's release date: the Hub repo's creation, or the submitter's."""
    api = hub_models()
    api.add_model("org/dated", created_at="2024-09-19T10:00:00Z")
    accepted = validate("org/dated", "", user="local", api=api, store=store, policy=LOCAL)
    assert accepted.meta()["released"] == "2024-09-19"
    given = validate("org/dated", "", user="local", api=api, store=store, policy=LOCAL, released="2024-06-07")
    job = enqueue(given, user="local", store=store, policy=LOCAL)
    assert job.meta["released"] == "2024-06-07"
    for bad, message in (("7 June 2024", "YYYY-MM-DD"), ("2999-01-01", "in the future"), ("\x00" * 50, "YYYY-MM-DD")):
        with pytest.raises(Rejected, match=message):
            validate("org/dated", "", user="local", api=api, store=store, policy=LOCAL, released=bad)
