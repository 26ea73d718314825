"""A human reference that holds (issue 18), on a real store and a fake Hub: provenance across a restart
and republishing, any number of raters per block, one pseudonym per person, publication of finished
blocks only, refilled slots, top-up first, the study lead's console and the store's migration 5."""

from __future__ import annotations

import collections
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from sources import DEMO_ITEMS, demo_interactions, read_jsonl, write_platform_db, wrong_answer
from space_fixtures import evaluated_model

from tcmqa import tables
from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.hub.publisher import Publisher
from tcmqa.ingest import person_pseudonym
from tcmqa.leaderboard.practice import NotAllowed, Practice, PracticeLoader, open_block_items
from tcmqa.leaderboard.settings import Settings
from tcmqa.schema import RESPONSES
from tcmqa.store import SQLiteStore, Store

REPO = "TechTCM/TCMQA"


def study_tree_of(root: Path, interactions: list[tuple] | None = None, rated: int = 16) -> Path:
    """The demo items built with a study (block 0, three raters) over the first ``rated`` items."""
    items = read_jsonl(DEMO_ITEMS)
    keep = {i["question_id"] for i in items[:rated]}
    rows = [r for r in (interactions or demo_interactions(items)) if r[1] in keep]
    db = write_platform_db(root / "p.sqlite", items, rows)
    build([str(DEMO_ITEMS)], root / "tree", str(db))
    return root / "tree"


@pytest.fixture(scope="module")
def study_tree(tmp_path_factory) -> Path:
    return study_tree_of(tmp_path_factory.mktemp("study"))


def corpus(tree: Path) -> list[dict]:
    return load_config(str(tree), "corpus").to_list()


def study(tree: Path) -> list[dict]:
    return load_config(str(tree), "responses").to_list()


def confirm(p: Practice, *accounts: str) -> None:
    for a in accounts:
        p.confirm(a, True)


def answer_all(p: Practice, account: str, right: bool = True, **fields) -> list[str]:
    done = []
    while (view := p.current(account)) is not None:
        key = list(p.items[view.item_id]["answer"])
        letters = key if right else wrong_answer(key)
        record = {"domains": ["diagnosis_patterns"], "difficulty": 2, "seconds": 9.0, "seconds_paused": 1.0, **fields}
        p.submit(account, view.item_id, letters, **record)
        done.append(view.item_id)
    return done


def evaluated(store: Store, items: list[dict], tmp_path: Path) -> dict:
    """A finished evaluation of "org/model" on every item (right on even positions); its results row,
    whose subset figures the practice recomputes."""
    return evaluated_model(store, items, tmp_path, subset=0.0, human_reference=0.0, delta_human=0.0)


def published(hub: FakeHub) -> tuple[Path, dict[str, list[dict]]]:
    folder = Path(hub.snapshot_download(REPO, repo_type="dataset"))
    return folder, {c: load_config(str(folder), c).to_list() for c in ("responses", "subset")}


def test_practitioner_restart_exclusion(tmp_path: Path, study_tree: Path) -> None:
    """Publish, restart over the published tree, exclude: gone from the published configs, the subset,
    the reference row and Δ human, and it holds across another restart; re-include: back."""
    hub = FakeHub()
    hub.create_repo(REPO)
    hub.upload_folder(repo_id=REPO, folder_path=str(study_tree), repo_type="dataset")
    store = SQLiteStore(tmp_path / "store")
    options = {"block_size": 4, "admins": ["admin"]}
    p = PracticeLoader(str(study_tree), store, **options).get()
    model_row = evaluated(store, corpus(study_tree), tmp_path)
    confirm(p, "ann", "bo", "cy")
    block_items = answer_all(p, "ann")
    answer_all(p, "bo")
    answer_all(p, "cy", right=False)
    publisher = Publisher(store, hub, REPO, sleep=lambda s: None)
    assert publisher.publish_responses(p.published_version(), p.configs, force=True)
    folder, on_hub = published(hub)
    n_study = len(study(study_tree))
    assert len(on_hub["responses"]) == n_study + 12
    assert {r["item_id"] for r in on_hub["subset"]} >= set(block_items)
    [before] = p.reference_rows([model_row])

    def restart(tree: Path) -> Practice:
        """The Space rebuilt: a new store object and loader over the published tree, the study pinned."""
        practice = PracticeLoader(str(tree), SQLiteStore(tmp_path / "store"), study=str(study_tree), **options).get()
        assert len(practice.imported) == n_study  # the published Space rows never count as the study
        return practice

    p = restart(folder)
    # even pointed at the published tree itself, the Space's own rows are not taken for the study
    assert len(PracticeLoader(str(folder), store, **options).get().imported) == n_study
    bo = person_pseudonym(store.practitioner("bo")["number"], p.pseudonym_key)
    p.exclude("admin", "bo", "answers copied from a colleague")
    for rows in (p.configs()["responses"], p.configs()["subset"]):
        assert not any(bo in str(r) for r in rows)
    assert not set(block_items) & {r["item_id"] for r in p.configs()["subset"]}
    [after] = p.reference_rows([model_row])
    assert after["n_subset"] == before["n_subset"] - 4
    assert (after["human_reference"], after["delta_human"]) != (before["human_reference"], before["delta_human"])
    assert publisher.publish_responses(p.published_version(), p.configs, force=True)
    folder, on_hub = published(hub)
    assert len(on_hub["responses"]) == n_study and not any(r["source"] == "space" for r in on_hub["responses"])
    assert not set(block_items) & {r["item_id"] for r in on_hub["subset"]}

    p = restart(folder)  # the exclusion holds after another restart and republishing
    assert not set(block_items) & {r["item_id"] for r in p.configs()["subset"]}
    assert p.reference_rows([model_row]) == [after]
    p.include("admin", "bo", "reviewed: the answers were his own")
    assert p.reference_rows([model_row]) == [before]
    assert publisher.publish_responses(p.published_version(), p.configs, force=True)
    _, on_hub = published(hub)
    assert len(on_hub["responses"]) == n_study + 12 and any(r["practitioner_id"] == bo for r in on_hub["responses"])
    decisions = p.decisions("admin")
    assert decisions[["account", "decision", "decided_by"]].values.tolist() == [
        ["bo", "excluded", "admin"],
        ["bo", "re-included", "admin"],
    ]
    assert decisions["reason"].tolist() == ["answers copied from a colleague", "reviewed: the answers were his own"]


@pytest.mark.parametrize("raters", [2, 3, 4])
def test_practitioner_n_raters(tmp_path: Path, study_tree: Path, raters: int) -> None:
    """N raters per block: the subset holds the Space's items with exactly N responses (majority strictly
    more than N/2) beside the study's three-rater items; ids and blocks never collide with the study's."""
    items = corpus(study_tree)
    p = Practice(SQLiteStore(tmp_path / "s"), items, study(study_tree), raters=raters, block_size=4)
    accounts = [f"r{k}" for k in range(raters)]
    confirm(p, *accounts)
    for k, a in enumerate(accounts):
        answer_all(p, a, right=k < raters // 2 + (raters % 2))  # N=2: one right (a tie), 3: two, 4: two (a tie)
    configs = p.configs()
    space = [r for r in configs["responses"] if r["source"] == "space"]
    assert len(space) == 4 * raters and {r["block"] for r in space} == {1}
    assert sorted({r["rater_slot"] for r in space}) == list(range(raters))
    study_ids = {r["practitioner_id"] for r in configs["responses"] if r["source"] == "study"}
    space_ids = {r["practitioner_id"] for r in space}
    assert len(space_ids) == raters and not space_ids & study_ids
    assert all(i.startswith("S") for i in space_ids) and all(i.startswith("P") for i in study_ids)
    by_item = {r["item_id"]: r for r in configs["subset"]}
    block = p.store.practice_block_items(1)
    right = raters // 2 + (raters % 2)
    for item_id in block:
        row = by_item[item_id]
        assert (row["n_raters"], row["n_correct"]) == (raters, right)
        assert row["majority_correct"] is (2 * right > raters)  # a tie (N even, N/2 right) is no majority
    study_subset = [r for r in configs["subset"] if r["item_id"] not in block]
    assert study_subset and all(r["n_raters"] == 3 for r in study_subset)  # the study's subset is unchanged
    human, n = p.human_reference(block)
    assert (human, n) == (100.0 * (2 * right > raters), 4)
    row = evaluated(p.store, items, tmp_path)
    [reference] = p.reference_rows([row])
    subset = {r["item_id"]: r["majority_correct"] for r in configs["subset"] if not p.items[r["item_id"]]["flagged"]}
    assert reference["n_subset"] == len(subset)
    assert reference["human_reference"] == pytest.approx(100 * sum(subset.values()) / len(subset))


def test_practitioner_n_raters_table6_and_figure6_follow_n() -> None:
    """Table 6's binomial and Figure 6's levels take N from the subset, and refuse a subset of mixed N."""
    import pandas as pd

    four = pd.DataFrame({"n_raters": [4, 4, 4], "n_correct": [0, 2, 4], "practitioner_ids": [["a"] * 4] * 3})
    assert tables.subset_raters(four) == 4
    legacy = pd.DataFrame({"n_correct": [1, 3], "practitioner_ids": [["a", "b", "c"]] * 2})
    assert tables.subset_raters(legacy) == 3
    mixed = pd.DataFrame({"n_raters": [3, 4], "n_correct": [1, 2], "practitioner_ids": [["a"] * 3, ["a"] * 4]})
    with pytest.raises(ValueError, match=r"mixes items with \[3, 4\] raters"):
        tables.subset_raters(mixed)
    from tcmqa import stats

    with pytest.raises(ValueError, match="do not fit 3 raters"):
        stats.binomial_agreement([0, 4], n_raters=3)
    assert stats.binomial_agreement([0, 2, 4, 3], n_raters=4).df == 4


def test_practitioner_pseudonym_per_person(tmp_path: Path, study_tree: Path) -> None:
    """A practitioner with two blocks is one pseudonym; a key change renames and duplicates nothing."""
    items = corpus(study_tree)
    store = SQLiteStore(tmp_path / "s")
    p = Practice(store, items, study(study_tree), block_size=3, pseudonym_key="key-one")
    confirm(p, "ann", "bo", "cy", "di", "ed")
    for a in ("ann", "bo", "cy"):
        answer_all(p, a)
    assert p.assignment("ann", next_block=True)["block"] == 2  # ann's second block, with di and ed
    for a in ("ann", "di", "ed"):
        answer_all(p, a)
    rows = p.configs()["responses"]
    ann = person_pseudonym(store.practitioner("ann")["number"], "key-one")
    assert {r["block"] for r in rows if r["practitioner_id"] == ann} == {1, 2}
    assert len({r["practitioner_id"] for r in rows if r["source"] == "space"}) == 5
    renamed = Practice(store, items, study(study_tree), block_size=3, pseudonym_key="key-two")
    again = renamed.configs()
    assert len(again["responses"]) == len(rows)
    assert len({r["response_id"] for r in again["responses"]}) == len(rows)
    assert {r["item_id"] for r in again["subset"]} == {r["item_id"] for r in p.configs()["subset"]}
    assert not {r["practitioner_id"] for r in again["responses"] if r["source"] == "space"} & {
        r["practitioner_id"] for r in rows
    }
    # published under the old key, restarted under the new one: the Space's rows are not imported twice
    tree = tmp_path / "published"
    build([str(DEMO_ITEMS)], tree)
    (tree / "responses").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=RESPONSES.arrow_schema), tree / "responses" / "part.parquet")
    restarted = PracticeLoader(str(tree), store, study=str(study_tree), block_size=3, pseudonym_key="key-two").get()
    assert len(restarted.configs()["responses"]) == len(rows)


def test_practitioner_open_block_not_published(tmp_path: Path, study_tree: Path) -> None:
    """A block's responses enter the configs and the Hub only once all its raters have finished it."""
    store = SQLiteStore(tmp_path / "s")
    p = Practice(store, corpus(study_tree), study(study_tree), block_size=3)
    hub = FakeHub()
    hub.create_repo(REPO)
    publisher = Publisher(store, hub, REPO, sleep=lambda s: None)
    confirm(p, "ann", "bo", "cy")
    answer_all(p, "ann")
    answer_all(p, "bo")
    view = p.current("cy")
    p.submit("cy", view.item_id, list(p.items[view.item_id]["answer"]), ["diagnosis_patterns"], 3, seconds=4.0)
    n_study = len(p.imported)
    assert len(p.configs()["responses"]) == n_study and len(p.response_rows()) == 0
    assert open_block_items(store) == set(store.practice_block_items(view.block))
    version = p.published_version()
    assert publisher.publish_responses(version, p.configs, force=True)
    files = hub.files(REPO)
    on_hub = pq.read_table(pa.BufferReader(files["responses/test-00000-of-00001.parquet"])).to_pylist()
    assert len(on_hub) == n_study and not any(r["source"] == "space" for r in on_hub)
    answer_all(p, "cy")
    assert open_block_items(store) == set()
    assert p.published_version() != version
    assert len(p.configs()["responses"]) == n_study + 9


def test_practitioner_refill_excluded_and_inactive_slots(tmp_path: Path, study_tree: Path) -> None:
    """An excluded practitioner's slot and an inactive one's go to the next new practitioners; their
    responses leave the configs; an admin can release and reassign a slot."""
    store = SQLiteStore(tmp_path / "s")
    p = Practice(store, corpus(study_tree), study(study_tree), block_size=3, admins=["admin"], abandon_after_s=0.5)
    confirm(p, "ann", "bo", "cy", "di", "ed", "fay", "gil")
    assert [p.assignment(a)["slot"] for a in ("ann", "bo", "cy")] == [0, 1, 2]
    answer_all(p, "ann")
    answer_all(p, "bo")
    view = p.current("cy")
    p.submit("cy", view.item_id, list(p.items[view.item_id]["answer"]), ["diagnosis_patterns"], 3, seconds=4.0)
    p.exclude("admin", "bo", "test account")
    time.sleep(0.6)  # cy answered one item, then nothing for longer than abandon_after_s
    di, ed = p.assignment("di"), p.assignment("ed")
    assert (di["block"], di["slot"]) == (1, 1) and (ed["block"], ed["slot"]) == (1, 2)
    released = {a["account"]: a for a in store.practice_assignments() if a["released_at"] is not None}
    assert released.keys() == {"bo", "cy"} and released["bo"]["released_reason"] == "excluded"
    assert "inactive" in released["cy"]["released_reason"]
    answer_all(p, "di")
    answer_all(p, "ed")
    space = [r for r in p.configs()["responses"] if r["source"] == "space"]
    names = p._pseudonyms()
    assert {r["practitioner_id"] for r in space} == {names["ann"], names["di"], names["ed"]}
    assert collections.Counter(r["item_id"] for r in space) == dict.fromkeys(store.practice_block_items(1), 3)
    with pytest.raises(NotAllowed, match="not in your block"):  # a released slot takes no more answers
        p.submit("cy", store.practice_block_items(1)[-1], ["A"], ["other"], 3, seconds=2.0)
    assert p.assignment("cy")["block"] != 1  # cy comes back to a new block
    # an admin releases fay's slot and gives it to gil
    fay = p.assignment("fay")
    with pytest.raises(NotAllowed):
        p.release_slot("fay", "fay", fay["block"], "no")
    with pytest.raises(ValueError, match="reason"):
        p.reassign_slot("admin", fay["block"], fay["slot"], "gil", " ")
    given = p.reassign_slot("admin", fay["block"], fay["slot"], "gil", "fay asked to stop")
    assert (given["account"], given["block"], given["slot"]) == ("gil", fay["block"], fay["slot"])
    slots = p.slots_table("admin")
    assert slots[slots["account"] == "fay"]["state"].tolist() == ["released"]
    assert p.assignment("gil")["block"] == fay["block"]
    p.release_slot("admin", "gil", fay["block"], "moved to another study")
    with pytest.raises(ValueError, match="holds no slot"):
        p.release_slot("admin", "gil", fay["block"], "again")


def test_practitioner_top_up_first(tmp_path: Path) -> None:
    """New practitioners finish the items the study left with one or two raters before fresh blocks, in
    top-up blocks with as many slots as the items miss; the tab's number says how many they complete."""
    items = read_jsonl(DEMO_ITEMS)
    ids = [i["question_id"] for i in items]
    rows = [r for r in demo_interactions(items) if not (r[1] in ids[:4] and r[0] == 3)]  # 4 items: 2 raters
    rows = [r for r in rows if not (r[1] in ids[4:7] and r[0] != 1)]  # 3 items: 1 rater
    tree = study_tree_of(tmp_path, rows, rated=16)
    p = Practice(SQLiteStore(tmp_path / "s"), corpus(tree), study(tree), block_size=5, admins=["admin"])
    flagged = {i["id"] for i in corpus(tree) if i["flagged"]}
    one_short = {str(i) for i in ids[:4]} - flagged
    two_short = {str(i) for i in ids[4:7]} - flagged
    before = {r["item_id"] for r in p.configs()["subset"]}
    assert not (one_short | two_short) & before
    assert p.next_block_completes() == len(one_short)
    confirm(p, "ann", "bo", "cy", "di")
    first = p.assignment("ann")
    assert set(p.store.practice_block_items(first["block"])) == one_short
    answer_all(p, "ann")
    assert {r["item_id"] for r in p.configs()["subset"]} == before | one_short
    assert p.next_block_completes("bo") == len(two_short)
    second, third = p.assignment("bo"), p.assignment("cy")
    assert second["block"] == third["block"] and (second["slot"], third["slot"]) == (0, 1)
    assert set(p.store.practice_block_items(second["block"])) == two_short
    progress = p.progress("admin").set_index("block")
    assert progress.loc[first["block"], "kind"] == progress.loc[second["block"], "kind"] == "top_up"
    assert progress.loc[second["block"], "slots"] == 2
    answer_all(p, "bo")
    answer_all(p, "cy")
    subset = {r["item_id"]: r for r in p.configs()["subset"]}
    assert set(subset) == before | one_short | two_short and all(subset[i]["n_raters"] == 3 for i in two_short)
    fresh = p.assignment("di")  # nothing short of raters is left: a fresh block of unrated items
    drawn = set(p.store.practice_block_items(fresh["block"]))
    assert len(drawn) == 5 and not drawn & {r["item_id"] for r in p.imported}
    assert p.next_block_completes("ed") == 5  # ed would join di's block: its five items complete with 3 raters


def test_practitioner_console_tables(tmp_path: Path, study_tree: Path) -> None:
    """The study lead's tables: per practitioner, flagged items with every comment, slots, decisions."""
    p = Practice(SQLiteStore(tmp_path / "s"), corpus(study_tree), study(study_tree), block_size=4, admins=["lead"])
    confirm(p, "ann", "bo", "cy")
    answer_all(p, "ann")
    answer_all(p, "bo", right=False)
    view = p.current("cy")
    p.submit(
        "cy",
        view.item_id,
        ["B"] if view.answer_type == "single" else ["B", "C"],
        ["diagnosis_patterns"],
        5,
        flagged=True,
        comment="two options are the same",
        seconds=30,
    )
    for call in (p.practitioners_table, p.flagged_items, p.slots_table, p.decisions):
        with pytest.raises(NotAllowed, match="admins only"):
            call("ann")
    people = p.practitioners_table("lead").set_index("account")
    assert people.loc["ann", "answered"] == 4 and people.loc["ann", "accuracy"] == 100.0
    assert people.loc["bo", "accuracy"] == 0.0 and people.loc["ann", "agreement"] == 0.0
    assert people.loc["ann", "median_seconds"] == 9.0 and people.loc["bo", "longest_same_answer_run"] >= 1
    assert people.loc["cy", "flags"] == 0 and people.loc["cy", "flag_comments"] == []  # its block is open
    answer_all(p, "cy")
    people = p.practitioners_table("lead").set_index("account")
    assert people.loc["cy", "flags"] == 1 and people.loc["cy", "flag_comments"] == [
        f"{view.item_id}: two options are the same"
    ]
    assert people.loc["ann", "last_active"].endswith("UTC") and not people.loc["ann", "excluded"]
    p.exclude("lead", "bo", "clicked through")
    people = p.practitioners_table("lead").set_index("account")
    assert people.loc["bo", "excluded"] and people.loc["bo", "excluded_reason"] == "clicked through"
    flags = p.flagged_items("lead").set_index("item_id")
    assert flags.loc[view.item_id, "comments"] == ["cy: two options are the same"]
    assert (flags["study_flags"] > 0).any()  # the study's flags are listed too (without comments)
    slots = p.slots_table("lead")
    assert slots.set_index("account").loc["bo", "state"] == "excluded"
    assert p.decisions("lead")["decision"].tolist() == ["excluded"]


def test_practitioner_hosted_refuses_the_public_pseudonym_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPACE_ID", "TechTCM/leaderboard")
    for name in ("TCMQA_PSEUDONYM_KEY", "TCMQA_DATA", "TCMQA_STUDY", "TCMQA_PRACTICE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="TCMQA_PSEUDONYM_KEY"):
        Settings.from_env()
    monkeypatch.setenv("TCMQA_PSEUDONYM_KEY", "tcmqa-public-v1")
    with pytest.raises(ValueError, match="TCMQA_PSEUDONYM_KEY"):
        Settings.from_env()
    monkeypatch.setenv("TCMQA_PSEUDONYM_KEY", "a-real-secret")
    monkeypatch.delenv("TCMQA_STUDY_REVISION", raising=False)
    with pytest.raises(ValueError, match="TCMQA_STUDY_REVISION"):  # the study would come from the publish target
        Settings.from_env()
    monkeypatch.setenv("TCMQA_STUDY_REVISION", "b" * 40)
    hosted = Settings.from_env()
    assert hosted.practice_options()["pseudonym_key"] == "a-real-secret"
    assert hosted.practice_options()["study_revision"] == "b" * 40


def test_practitioner_hub_study_needs_a_pinned_revision(tmp_path: Path) -> None:
    loader = PracticeLoader("TechTCM/TCMQA", SQLiteStore(tmp_path / "s"))
    with pytest.raises(ValueError, match="TCMQA_STUDY_REVISION"):
        loader.study_rows()


def test_practitioner_stratified_draw_by_exam_source_for_unrated_items() -> None:
    """Unrated items have no domains: their exam source stands in, so a draw mirrors the pool's sources."""
    from tcmqa.leaderboard.practice import stratified_draw

    pool = [
        {"id": f"{k}-{i}", "domains": [], "source_difficulty": 1, "answer_type": "single", "source": f"{k}/exam/{i}"}
        for k, n in (("pharmacist", 30), ("physician", 10))
        for i in range(n)
    ]
    drawn = stratified_draw(pool, 8, seed=3)
    assert collections.Counter(i["source"].split("/")[0] for i in drawn) == {"pharmacist": 6, "physician": 2}
