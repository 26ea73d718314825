"""The Practitioners tab of the Space, launched for real and driven with gradio_client: three
practitioners answer the same block (subset majority vote, the practitioners' reference row and
Δ human change), a fourth gets another block, no reference answer in any response before the block
ends, the admin's progress/export/exclusion, and the responses publication through the Publisher."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from gradio_client import Client
from sources import half_rated_tree, wrong_answer
from space_fixtures import ALL_ORIGINS, board, evaluated_model, hub_models, launch, local_settings

from tcmqa.data import load_config
from tcmqa.hub.publisher import Publisher
from tcmqa.leaderboard.practice import ItemClocks, Practice
from tcmqa.store import SQLiteStore

HUMAN = "Licensed practitioners (majority vote)"


@pytest.fixture(scope="module")
def half_tree(tmp_path_factory) -> Path:
    """The demo items; the imported study (block 0, three raters) covers the first 16 only."""
    return half_rated_tree(tmp_path_factory.mktemp("half"))


@pytest.fixture(scope="module")
def space(tmp_path_factory, half_tree: Path):
    store = SQLiteStore(tmp_path_factory.mktemp("practice-store"))
    evaluated_model(store, half_tree, tmp_path_factory.mktemp("outputs"))
    settings = local_settings(
        store.root, half_tree, practice_block_size=5, practice_admins=("admin",), admin_token=TOKEN
    )
    demo, url = launch(settings, store, hub_models())
    yield store, url
    demo.close()


TOKEN = "operator-token-0123456789abcdef"  # local mode: an admin's key is the operator's token
KEY = 14  # the practitioner's key among the start's API outputs: issued by the name's first start
KEYS: dict[str, str] = {}  # the module's practitioners' keys, as their browsers keep them


def start(client: Client, name: str, licence: bool = True, number: str = "") -> tuple:
    """``name`` starts (with the key a first start issued it, kept in KEYS); the screen."""
    result = client.predict(name, KEYS.get(name, ""), licence, number, api_name="/practice_start")
    if isinstance(result[KEY], str) and result[KEY]:
        KEYS[name] = result[KEY]
    return result


FORBIDDEN = ('answer"', "Answer", "accuracy", "correct", "Your accuracy", "explanation")


def leaks(result: object) -> list[str]:
    text = json.dumps(result, ensure_ascii=False, default=str)
    return [word for word in FORBIDDEN if word in text]


def human_rows(client: Client) -> list[dict]:
    return [r for r in board(client) if r["Model"] == HUMAN]


def full_board(client: Client) -> list[dict]:
    columns = ["Origin", "Full", "Subset", "Δ human"]
    table = client.predict("", [], None, None, ALL_ORIGINS, columns, "Full", True, api_name="/board")
    return [dict(zip(table["headers"], row)) for row in table["data"]]


def test_practitioner_space_three_raters_majority_and_reference(space, half_tree: Path) -> None:
    store, url = space
    clients = {name: Client(url, verbose=False) for name in ("ann", "bo", "cy", "dee")}
    before = human_rows(clients["ann"])
    assert sorted(r["Subset"] for r in before) == [60.0, 64.94]  # the paper's and the recorded one
    items = {i["id"]: i for i in load_config(str(half_tree), "corpus").to_list()}
    traffic = []
    # refused before confirming a licence
    refused = start(clients["ann"], "ann", licence=False)
    assert refused[0].startswith("❌ Confirm")
    first_items = {}
    for name in ("ann", "bo", "cy", "dee"):
        result = start(clients[name], name, number=f"LIC-{name}")
        traffic.append(result)
        first_items[name] = result[5]
        assert "item 1 of 5" in result[1]
    blocks = {a["account"]: a["block"] for a in store.practice_assignments()}
    assert blocks["ann"] == blocks["bo"] == blocks["cy"] == 1 and blocks["dee"] == 2  # block 0 is the study's
    assert first_items["ann"] == first_items["bo"] == first_items["cy"] != first_items["dee"]
    block_items = store.practice_block_items(1)
    assert not set(block_items) & set(store.practice_block_items(2))
    rated = {r["item_id"] for r in load_config(str(half_tree), "responses").to_list()}
    assert not set(block_items) & rated  # unrated items first
    # ann and bo right, cy wrong on every item: majority correct everywhere
    for name, right in (("ann", True), ("bo", True), ("cy", False)):
        item_id = first_items[name]
        for step in range(5):
            answer = items[item_id]["answer"] if right else wrong_answer(items[item_id]["answer"])
            multi = items[item_id]["answer_type"] == "multi"
            single, many = (None, answer) if multi else (answer[0], [])
            result = clients[name].predict(
                name, KEYS[name], item_id, single, many, ["materia_medica"], 3, False, "", api_name="/practice_submit"
            )
            if step < 4:
                traffic.append(result)
                assert f"item {step + 2} of 5" in result[1]
                item_id = result[5]
        if name != "cy":  # a co-rater is still answering: the review waits for the block
            traffic.append(result)
            assert "opens once all its 3 raters have finished it" in json.dumps(result, ensure_ascii=False)
            continue
        assert "Your accuracy" in result[-1] and result[5] == ""
        assert "0.0%" in result[-1]
        assert "org/model" in result[-1]  # where the models stood on the same items
    assert [w for t in traffic for w in leaks(t)] == []
    # a replay of a submission records nothing new; the block is finished: ann's review
    again = clients["ann"].predict(
        "ann", KEYS["ann"], block_items[0], "A", [], ["materia_medica"], 1, False, "", api_name="/practice_submit"
    )
    assert "Your accuracy" in again[-1] and "100.0%" in again[-1]
    assert len(store.practice_responses(block=1)) == 15
    # the subset gains the five items, majority correct; the reference row and Δ human follow
    practice = Practice(store, items.values(), load_config(str(half_tree), "responses").to_list())
    subset = {r["item_id"]: r for r in practice.configs()["subset"]}
    assert all(subset[i]["majority_correct"] and subset[i]["n_correct"] == 2 for i in block_items)
    after = full_board(clients["ann"])
    human = [r for r in after if r["Model"] == HUMAN and r["Subset"] != 64.94]
    model = next(r for r in after if r["Model"] == "org/model")
    ordered = list(items)
    on = [i for i in subset if not items[i]["flagged"]]
    expected_human = round(100 * sum(subset[i]["majority_correct"] for i in on) / len(on), 2)
    right = [ordered.index(i) % 2 == 0 or items[i]["answer"] == ["E"] for i in on]  # as evaluated_model
    expected_model = round(100 * sum(right) / len(on), 2)
    assert human[0]["Subset"] == expected_human != 60.0
    assert model["Subset"] == expected_model
    assert model["Δ human"] == pytest.approx(expected_model - expected_human, abs=0.02)


def test_practitioner_space_admin(space, tmp_path: Path) -> None:
    store, url = space
    client = Client(url, verbose=False)
    denied = client.predict("ann", KEYS["ann"], api_name="/practice_console")
    assert denied[0] == "❌ admins only"
    note, people, _flagged, slots, blocks, _decisions = client.predict("admin", TOKEN, api_name="/practice_console")
    assert note == ""
    rows = [dict(zip(blocks["headers"], r, strict=True)) for r in blocks["data"]]
    assert {r["block"] for r in rows} >= {1, 2}
    by_account = {r[0]: dict(zip(people["headers"], r, strict=True)) for r in people["data"]}
    assert by_account["ann"]["answered"] == 5 and by_account["ann"]["accuracy %"] == 100.0
    assert by_account["cy"]["accuracy %"] == 0.0 and by_account["cy"]["agreement %"] == 0.0
    assert {r[slots["headers"].index("account")] for r in slots["data"]} >= {"ann", "bo", "cy", "dee"}
    _note, path = client.predict("admin", TOKEN, api_name="/practice_export")
    assert path and Path(path).is_file()
    con = sqlite3.connect(path)
    users = [u for (u,) in con.execute("SELECT username FROM user")]
    con.close()
    assert users and all(u[0] in "PS" for u in users)  # pseudonyms: the Space's (P) and the study's (S)
    assert "reason" in client.predict("admin", TOKEN, "ann", "", api_name="/practice_exclude")[0]
    assert not store.practitioner("ann")["excluded"]
    message, *_, decisions = client.predict("admin", TOKEN, "cy", "test account", api_name="/practice_exclude")
    assert message.startswith("Excluded") and store.practitioner("cy")["excluded_reason"] == "test account"
    assert [r[:3] for r in decisions["data"]] == [["cy", "excluded", "test account"]]
    refused = start(Client(url, verbose=False), "cy")
    assert "excluded" in refused[0]
    assert client.predict("cy", KEYS["cy"], "cy", "self-service", api_name="/practice_include")[0] == "❌ admins only"
    message, *_, decisions = client.predict("admin", TOKEN, "cy", "appeal upheld", api_name="/practice_include")
    assert message.startswith("Re-included") and not store.practitioner("cy")["excluded"]
    assert [r[:3] for r in decisions["data"]][-1] == ["cy", "re-included", "appeal upheld"]
    back = start(Client(url, verbose=False), "cy")
    assert back[0].startswith("Signed in as")
    # slots: a release needs a reason; released, the slot says so
    assert "reason" in client.predict("admin", TOKEN, "dee", 2, "", api_name="/practice_release")[0]
    message, _people, _flagged, slots, *_ = client.predict(
        "admin", TOKEN, "dee", 2, "left the study", api_name="/practice_release"
    )
    assert message.startswith("Released **dee**'s slot in block 2")
    states = {(r[0], r[2]): dict(zip(slots["headers"], r, strict=True)) for r in slots["data"]}
    assert states[(2, "dee")]["state"] == "released" and states[(2, "dee")]["reason"] == "left the study"
    assert client.predict("ann", KEYS["ann"], "dee", 2, "x", api_name="/practice_release")[0] == "❌ admins only"
    # the released slot given to another practitioner (one who never had block 2), with a reason
    slot = states[(2, "dee")]["slot"]
    assert "reason" in client.predict("admin", TOKEN, "bo", 2, slot, "", api_name="/practice_reassign")[0]
    message, _people, _flagged, slots, *_ = client.predict(
        "admin", TOKEN, "bo", 2, slot, "covering for dee", api_name="/practice_reassign"
    )
    assert message == f"Slot {slot} of block 2 given to **bo**: covering for dee", message
    holders = [dict(zip(slots["headers"], r, strict=True)) for r in slots["data"]]
    assert any(h["block"] == 2 and h["account"] == "bo" and h["state"] != "released" for h in holders)


ERROR = 10  # the inline error's position in the Practitioners tab's screen outputs


def test_practitioner_space_complete_record_pause_and_restart(tmp_path: Path, half_tree: Path) -> None:
    """Answer, difficulty and a domain are required, each named inline (nothing stored); the pause is
    the server's; after a restart the item's lost timer is said, never made up, and the next submit records."""
    store = SQLiteStore(tmp_path / "store")
    settings = local_settings(store.root, half_tree, practice_block_size=5)
    demo, url = launch(settings, store, hub_models())
    try:
        client = Client(url, verbose=False)
        shown = client.predict("kim", "", True, "", api_name="/practice_start")
        item, key = shown[5], shown[KEY]
        one, many = (None, ["A", "B"]) if "multi-answer" in shown[1] else ("A", [])
        cases = [
            ((None, [], ["materia_medica"], 3), "your **answer**"),
            ((one, many, ["materia_medica"], None), "a **difficulty** from 1 to 5"),
            ((one, many, [], 3), "at least one **domain**"),
        ]
        for (single, multi, domains, level), said in cases:
            out = client.predict(
                "kim", key, item, single, multi, domains, level, False, "", api_name="/practice_submit"
            )
            assert said in out[ERROR] and out[ERROR].startswith("⚠️"), out[ERROR]
            assert out[5] in (item, {"__type__": "update"})  # the same item stays on screen
        assert store.practice_responses(account="kim") == []
        paused = client.predict("kim", key, item, api_name="/practice_pause")
        assert "**Paused.**" in json.dumps(paused, ensure_ascii=False)  # (the button's label is no API value)
        resumed = client.predict("kim", key, item, api_name="/practice_pause")
        assert "Paused" not in json.dumps(resumed, ensure_ascii=False)
    finally:
        demo.close()
    demo, url = launch(settings, store, hub_models())  # a restart: the item's clock is gone
    try:
        client = Client(url, verbose=False)
        lost = client.predict(
            "kim", key, item, one, many, ["materia_medica"], 3, False, "", api_name="/practice_submit"
        )
        assert "timer was lost" in lost[ERROR] and store.practice_responses(account="kim") == []
        done = client.predict(
            "kim", key, item, one, many, ["materia_medica"], 3, False, "", api_name="/practice_submit"
        )
        assert done[0] == "✅ Recorded." and "item 2 of 5" in done[1]
        (row,) = store.practice_responses(account="kim")
        assert 0 <= row["seconds_paused"] <= row["seconds"] < 60, row
    finally:
        demo.close()


def test_practitioner_responses_published_coalesced(tmp_path: Path, half_tree: Path) -> None:
    """The rebuilt responses/subset configs go to the Hub in one commit per batch of submissions."""
    store = SQLiteStore(tmp_path / "s")
    items = load_config(str(half_tree), "corpus").to_list()
    practice = Practice(store, items, load_config(str(half_tree), "responses").to_list(), block_size=3)
    hub = FakeHub()
    hub.create_repo("TechTCM/TCMQA")
    clock = [1000.0]
    publisher = Publisher(store, hub, "TechTCM/TCMQA", clock=lambda: clock[0], sleep=lambda s: None)
    for name in ("a", "b", "c"):
        practice.confirm(name, True)
        while (view := practice.current(name)) is not None:
            answer = list(practice.items[view.item_id]["answer"])
            practice.submit(name, view.item_id, answer, ["materia_medica"], 3, seconds=5.0)
            publisher.publish_responses(store.practice_version(), practice.configs, every_s=600)
    assert len(hub.commits_to("TechTCM/TCMQA")) == 1  # the first; the rest coalesce within 600 s
    clock[0] += 601
    assert publisher.publish_responses(store.practice_version(), practice.configs, every_s=600)
    assert not publisher.publish_responses(store.practice_version(), practice.configs, every_s=600, force=True)
    files = hub.files("TechTCM/TCMQA")
    subset = pq.read_table(pa.BufferReader(files["subset/test-00000-of-00001.parquet"])).to_pylist()
    responses = pq.read_table(pa.BufferReader(files["responses/test-00000-of-00001.parquet"])).to_pylist()
    assert len(responses) == len(practice.configs()["responses"])
    assert {r["item_id"] for r in subset} >= set(store.practice_block_items(1))
    assert not any(name in json.dumps(responses, default=str) for name in ('"a"', '"b"', '"c"'))


def test_practitioner_space_item_clock_rules() -> None:
    """The tab's item clock on a made-up timeline: seconds are the whole time on the item, seconds paused
    the part of it paused (a pause, a reload while paused, a page gone longer than away_s)."""
    clocks = ItemClocks(away_s=30.0)
    assert not clocks.show("kim", "i1", 0.0)
    clocks.touch("kim", "i1", 10.0)  # heartbeats while working
    assert clocks.toggle("kim", "i1", 12.0)  # paused at 12
    assert clocks.show("kim", "i1", 15.0)  # a reload while paused: still paused, and the page says so
    assert not clocks.toggle("kim", "i1", 20.0)  # resumed at 20: 8 s paused
    assert clocks.times("kim", "i1", 25.0) == (25.0, 8.0)
    clocks.touch("kim", "i1", 100.0)  # no heartbeat for 75 s (> 30): the page was gone, paused
    assert clocks.times("kim", "i1", 110.0) == (110.0, 83.0)
    clocks.toggle("kim", "i1", 120.0)  # paused at 120, submitted while paused at 130
    assert clocks.times("kim", "i1", 130.0) == (130.0, 93.0)
    clocks.done("kim", "i1")
    assert clocks.times("kim", "i1", 131.0) is None  # submitted: gone; a restart looks the same
    assert not clocks.show("kim", "i2", 131.0)  # the next item starts afresh, unpaused
    assert clocks.times("kim", "i2", 141.0) == (10.0, 0.0)
    clocks.touch("kim", "other", 142.0)  # a heartbeat for an item not on screen starts nothing
    assert clocks.times("kim", "i2", 142.0) == (11.0, 0.0)
    assert clocks.times("lee", "i2", 142.0) is None  # per account


def test_practitioner_space_data_unreachable_said_inline(tmp_path: Path) -> None:
    """Items that cannot be loaded are said in the tab's note, not raised."""
    store = SQLiteStore(tmp_path / "store")
    demo, url = launch(local_settings(store.root, tmp_path / "no-tree"), store, hub_models())
    try:
        note = Client(url, verbose=False).predict("kim", "", True, "", api_name="/practice_start")[0]
    finally:
        demo.close()
    assert note.startswith("❌ The items could not be loaded from") and "Try again later" in note, note
