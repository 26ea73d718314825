"""No read-ahead (issue 24): nothing of an open practitioner block leaves the store, a block reopened after
it was published is retired, and a study lead cannot rate.

Real SQLite stores, the demo items built with an imported study, a fake Hub (tests/fakehub.py) read back
commit by commit. The review's wait is checked through the running Space in
tests/test_practitioner_open_block.py (``-k review_waits``).
"""

from __future__ import annotations

import collections
import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from sources import DEMO_ITEMS, demo_interactions, read_jsonl
from test_hub_publication import run_job
from test_practitioner_reference import answer_all, confirm, corpus, study, study_tree_of

from tcmqa.hub.publisher import Publisher
from tcmqa.leaderboard.practice import NotAllowed, Practice, open_block_items
from tcmqa.store import SQLiteStore

REPO = "TechTCM/TCMQA"


@pytest.fixture(scope="module")
def study_tree(tmp_path_factory) -> Path:
    """The demo items with a study (three raters) over the first 16."""
    return study_tree_of(tmp_path_factory.mktemp("study"))


def _items_in(files: dict[str, bytes], folder: str) -> collections.Counter[str]:
    """Rows per item id over the Parquet files under ``folder`` of a repo's files."""
    found: collections.Counter[str] = collections.Counter()
    for path, data in files.items():
        if path.startswith(folder + "/") and path.endswith(".parquet"):
            found.update(pq.read_table(io.BytesIO(data), columns=["item_id"]).column("item_id").to_pylist())
    return found


def test_open_block_publication_withholds_outputs_probes_and_responses(tmp_path: Path) -> None:
    """A finished run and the first practitioner's open top-up block: no commit holds an output row, a probe row
    or a response (the study's included) of the block's items; once the block is finished, all of them are
    published (the run's parts again, in full)."""
    items = read_jsonl(DEMO_ITEMS)
    ids = [i["question_id"] for i in items]
    rows = [r for r in demo_interactions(items) if not (r[1] in ids[:4] and r[0] == 3)]  # 4 items: 2 raters
    tree = study_tree_of(tmp_path, rows, rated=16)
    store = SQLiteStore(tmp_path / "store")
    p = Practice(store, corpus(tree), study(tree), block_size=5)
    confirm(p, "ann")
    block = p.assignment("ann")["block"]
    open_items = set(store.practice_block_items(block))
    assert open_items and open_items <= {str(i) for i in ids[:4]}  # a top-up block of the study's short items
    view = p.current("ann")
    p.submit("ann", view.item_id, ["A", "B"] if view.answer_type == "multi" else ["A"], ["other"], 2, seconds=5.0)
    every = [i["id"] for i in corpus(tree)]
    run_job(store, tmp_path, 1, item_ids=every, parts=2, probe_parts=2)
    hub = FakeHub()
    hub.create_repo(REPO)
    publisher = Publisher(store, hub, REPO, sleep=lambda s: None)
    assert publisher.publish_pending() == 1
    assert publisher.publish_responses(p.published_version(), p.configs, force=True)
    commits = hub.commits_to(REPO)
    assert len(commits) == 2
    for commit in commits:
        files = hub.files(REPO, commit.sha)
        for folder in ("outputs", "probes", "responses", "subset"):
            assert not set(_items_in(files, folder)) & open_items, (commit.message, folder)
    files = hub.files(REPO)
    assert set(_items_in(files, "outputs")) == set(every) - open_items  # the rest is published: not vacuous
    assert set(_items_in(files, "probes")) == set(every) - open_items
    assert _items_in(files, "responses")[str(ids[5])] == 3  # the study's rows of other items
    # the block is finished: the next rounds publish what was withheld
    answer_all(p, "ann")
    assert open_block_items(store) == set()
    assert publisher.publish_pending() == 1
    assert publisher.publish_responses(p.published_version(), p.configs, force=True)
    files = hub.files(REPO)
    assert set(_items_in(files, "outputs")) == set(every) and set(_items_in(files, "probes")) == set(every)
    published = _items_in(files, "responses")
    assert all(published[i] == 3 for i in open_items)  # the study's two raters and ann
    assert publisher.publish_pending() == 0  # nothing is withheld any more: no further commit


def test_reopened_block_is_retired_not_handed_out_again(tmp_path: Path, study_tree: Path) -> None:
    """Excluding or releasing a rater of a published block retires it: the next practitioners get new blocks
    with none of its items, no slot of it is given again, and its items never count twice in the subset."""
    store = SQLiteStore(tmp_path / "s")
    p = Practice(store, corpus(study_tree), study(study_tree), block_size=4, admins=["lead"])
    confirm(p, "ann", "bo", "cy", "di", "ed", "fay", "gil")
    for who in ("ann", "bo", "cy"):
        answer_all(p, who)
    block = p.assignment("ann")["block"]
    published = set(store.practice_block_items(block))
    before = [r["item_id"] for r in p.configs()["subset"]]
    assert published <= set(before)
    p.exclude("lead", "bo", "answers copied")
    p.release_slot("lead", "cy", block, "asked to leave")
    assert p.next_block_completes("di") == 4
    new = {who: p.assignment(who)["block"] for who in ("di", "ed", "fay")}
    assert set(new.values()) == {block + 1}  # one new block for the next three, not the retired one's slots
    progress = p.progress("lead").set_index("block")
    assert progress.loc[block, "retired"] and progress.loc[block, "open_slots"] == 0
    assert not published & open_block_items(store)  # retired: its items are public, not open
    assert not set(store.practice_block_items(block + 1)) & published
    with pytest.raises(ValueError, match="published"):
        p.reassign_slot("lead", block, 1, "gil", "fill the gap")
    for who in ("di", "ed", "fay"):
        answer_all(p, who)
    subset = [r["item_id"] for r in p.configs()["subset"]]
    assert len(subset) == len(set(subset))  # no item twice
    assert set(subset) == set(before) - published | set(store.practice_block_items(block + 1))
    p.include("lead", "bo", "reviewed: his own answers")  # cy's slot stays released: still short of a rater
    assert not published & {r["item_id"] for r in p.configs()["subset"]}
    assert p.assignment("gil")["block"] != block


def test_admin_not_rater_and_console_shows_no_open_block(tmp_path: Path, study_tree: Path) -> None:
    """A study lead cannot confirm, take a block or answer; the console lists no flag, comment or reference of
    an item in an open block until the block is finished."""
    store = SQLiteStore(tmp_path / "s")
    p = Practice(store, corpus(study_tree), study(study_tree), block_size=4, admins=["lead"])
    for call in (lambda: p.confirm("lead", True), lambda: p.assignment("lead"), lambda: p.current("lead")):
        with pytest.raises(NotAllowed, match=r"study lead .* cannot answer"):
            call()
    confirm(p, "ann", "bo", "cy")
    answer_all(p, "ann")
    view = p.current("bo")
    letters = ["B", "C"] if view.answer_type == "multi" else ["B"]
    p.submit("bo", view.item_id, letters, ["diagnosis_patterns"], 4, True, "SECRET-COMMENT", 20.0)
    # an account made a lead after it answered is refused from then on
    with pytest.raises(NotAllowed, match="cannot answer"):
        Practice(store, corpus(study_tree), study(study_tree), block_size=4, admins=["bo"]).current("bo")
    flagged = p.flagged_items("lead")
    assert view.item_id not in set(flagged["item_id"]) and "SECRET-COMMENT" not in flagged.to_string()
    people = p.practitioners_table("lead").set_index("account")
    assert people.loc["bo", "flags"] == 0 and people.loc["bo", "flag_comments"] == []
    assert people.loc["bo", "answered"] == 1  # the counts stay
    answer_all(p, "bo")
    answer_all(p, "cy")
    flagged = p.flagged_items("lead").set_index("item_id")
    assert flagged.loc[view.item_id, "comments"] == ["bo: SECRET-COMMENT"]
    assert p.practitioners_table("lead").set_index("account").loc["bo", "flags"] == 1
