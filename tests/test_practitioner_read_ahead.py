"""No read-ahead (issue 24): nothing of an open practitioner block leaves the store, a block reopened after
it was published is retired, and a study lead cannot rate.

Real SQLite stores, the demo items built with an imported study, a fake Hub (tests/fakehub.py) read back
commit by commit. The review's wait is checked through the running Space in
tests/test_practitioner_open_block.py (``-k review_waits``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_practitioner_reference import answer_all, confirm, corpus, study, study_tree_of

from tcmqa.leaderboard.practice import NotAllowed, Practice, open_block_items
from tcmqa.store import SQLiteStore


@pytest.fixture(scope="module")
def study_tree(tmp_path_factory) -> Path:
    """The demo items with a study (three raters) over the first 16."""
    return study_tree_of(tmp_path_factory.mktemp("study"))


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
    letters = ["B"] if view.answer_type == "single" else ["B", "C"]
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
