"""Key adjudication through the running Space (local mode behind the identity guard, SQLite, a simulated study with
planted wrong keys, its three models' outputs recorded in the store): every step the study lead or a reviewer
takes is a call of the Space's own functions over HTTP.

* ``-k errata``: the round trip: two reviewers agree on a wrong key, two disagree and a third decides, two find
  an item unclear, two find a key correct; the console's export and ``tcmqa errata export`` give the same errata;
  ``tcmqa build --errata`` makes the next tree, whose ``errata`` config ``load_dataset`` reads; the rescored
  numbers equal ``tcmqa_metric`` run from scratch on the corrected keys;
* ``-k adjudicat``: the evidence reaches a reviewer only with their saved verdict; a rater of the item, or one
  person twice, is refused as a reviewer; a stranger and a practitioner not assigned the item get nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pandas as pd
import pyarrow.parquet as pq
import pytest
from gradio_calls import Page
from space_fixtures import BROWSER, SHOTS, hub_models, launch, local_settings, open_chromium

from tcmqa.build import build
from tcmqa.cli import main as cli_main
from tcmqa.data import load_config
from tcmqa.errata import read_errata
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.prompts import PROTOCOL
from tcmqa.rescore import rescore
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.store import SQLiteStore
from tcmqa.study import load_study
from tcmqa_metric import score

LEAD, LI, MA, WU, HE, ZHOU = "lead", "li-reviewer", "ma-reviewer", "wu-third", "he-rater", "zhou-other"
TOKEN = "operator-token-0123456789abcdef"
MODELS = pd.DataFrame(
    {"model": ["weak", "middle", "strong"], "family": ["F", "F", "F"], "params_b": [1.0, 4.0, 9.0],
     "single": [45.0, 55.0, 70.0], "multi": [10.0, 25.0, 40.0]}
)  # fmt: skip
ADJUDICATION = ["adjudication_suspects", "adjudication_assign", "adjudication_add", "adjudication_export",
                "adjudication_open", "adjudication_verdict", "adjudication_mine"]  # fmt: skip
EVIDENCE_MARKS = ["### Evidence", " chose ", "discrimination", "Why it ranks here"]


def value(output: Any) -> Any:
    """An output's value, whether sent as a plain value or an update."""
    return output.get("value") if isinstance(output, dict) and "__type__" in output else output


def rows(output: Any) -> list[dict]:
    """A table's rows keyed by field name (the Space shows "item id" for item_id: tcmqa.leaderboard.formats)."""
    table = value(output) or {}
    fields = [str(h).replace(" ", "_") for h in table.get("headers") or []]
    return [dict(zip(fields, row)) for row in table.get("data") or []]


class Space:
    """The launched Space over the simulated study, its store, and who is signed in (name -> key)."""

    def __init__(self, tmp: Path):
        self.sim = simulate(tmp / "sim", SimulationConfig(n_items=800, n_raters=12, n_responses=1600,
                            swapped_keys=0.05, seed=3), MODELS)  # fmt: skip
        self.data = self.sim / "data"
        self.store = SQLiteStore(tmp / "store")
        for run in sorted((self.sim / "runs").iterdir()):
            row = json.loads((run / "results.json").read_text(encoding="utf-8"))
            self.store.submit(row["model"], "a" * 40, PROTOCOL, "local")
            job = self.store.claim("w")
            assert job is not None
            parts = sorted((run / "outputs").glob("*.parquet"))
            assert self.store.finish(job, row | {"protocol": PROTOCOL, "revision": "a" * 40}, parts)
        settings = local_settings(
            self.store.root, self.data, practice_block_size=5, practice_raters=1, practice_admins=(LEAD,)
        )
        self.settings = settings.__class__(**{**settings.__dict__, "admin_token": TOKEN})
        self.demo, self.url = launch(self.settings, self.store, hub_models())
        self.page = Page(self.url)
        self.keys: dict[str, str] = {LEAD: TOKEN}
        self.rated: list[str] = []  # the items he-rater answered
        self.planted = pq.read_table(self.sim / "raw" / "planted.parquet").to_pandas().set_index("item_id")

    def start(self, name: str) -> None:
        """``name`` signs in and confirms a licence; the browser's key kept."""
        out = self.page.run("practice_start", {"practice-name": name, "practice-licence": True})
        self.keys[name] = value(out["practice-key"])
        assert self.keys[name], out

    def run(self, who: str, api_name: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.page.run(api_name, {"practice-name": who, "practice-key": self.keys.get(who, ""), **(values or {})})

    def suspects(self) -> list[dict]:
        out = self.run(LEAD, "adjudication_suspects")
        return rows(out["adjudication-suspects"])

    def assign(self, item: str, first: str, second: str) -> str:
        values = {"adjudication-item": item, "adjudication-first": first, "adjudication-second": second}
        return value(self.run(LEAD, "adjudication_assign", values)["adjudication-lead-note"])

    def verdict(self, who: str, item: str, verdict: str, letters: str = "", comment: str = "理由見教材") -> dict:
        opened = self.run(who, "adjudication_open", {"adjudication-open-id": item})
        assert value(opened["adjudication-item-id"]) == item, opened
        values = {"adjudication-item-id": item, "adjudication-verdict": verdict,
                  "adjudication-new-key": list(letters), "adjudication-comment": comment}  # fmt: skip
        return {"opened": opened, "saved": self.run(who, "adjudication_verdict", values)}


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Iterator[Space]:
    """The Space with its practitioners signed in; ``he-rater`` answered a whole block (one rater: finished)."""
    space = Space(tmp_path_factory.mktemp("errata-space"))
    try:
        for name in (LI, MA, WU, HE, ZHOU):
            space.start(name)
        practice = PracticeLoader(str(space.data), space.store, block_size=5, raters=1).get()
        while (view := practice.current(HE)) is not None:
            letters = ["A"] if view.answer_type == "single" else ["A", "B"]
            practice.submit(HE, view.item_id, letters, ["other"], 3, False, "", 10.0, 0.0)
        space.rated = sorted({r["item_id"] for r in space.store.practice_responses(account=HE)})
        yield space
    finally:
        space.demo.close()


def _free(space: Space, ranked: list[dict], swapped: bool, taken: set[str]) -> str:
    """The most suspect item (a planted wrong key, or a key right) no test adjudicates yet and he did not rate."""
    adjudicated = {a["item_id"] for a in space.store.adjudications()} | taken | set(space.rated)
    return next(
        r["item_id"]
        for r in ranked
        if r["item_id"] not in adjudicated and space.planted.at[r["item_id"], "swapped"] == swapped
    )


def test_errata_round_trip_adjudicated_in_the_space(space: Space, tmp_path: Path) -> None:
    ranked = space.suspects()
    assert ranked[0]["rank"] == 1 and all(r["reason"] for r in ranked[:20])
    taken: set[str] = set()
    agreed, split, unclear, right = [], [], [], []
    for chosen, swapped in ((agreed, True), (split, True), (unclear, True), (right, False)):
        chosen.append(_free(space, ranked, swapped, taken))
        taken.add(chosen[0])
    (agreed,), (split,), (unclear,), (right,) = agreed, split, unclear, right
    truth = {i: space.planted.at[i, "answer"] for i in (agreed, split)}
    for item in (agreed, split, unclear, right):
        assert "✅" in space.assign(item, LI, MA)
    space.verdict(LI, agreed, "wrong_key", truth[agreed])
    space.verdict(MA, agreed, "wrong_key", truth[agreed])
    space.verdict(LI, split, "wrong_key", truth[split])
    space.verdict(MA, split, "key_correct")
    table = rows(space.run(LEAD, "adjudication_suspects")["adjudication-table"])
    assert {r["item_id"]: r["status"] for r in table}[split].startswith("disagreement")
    added = space.run(LEAD, "adjudication_add", {"adjudication-item": split, "adjudication-third": WU})
    assert "✅" in value(added["adjudication-lead-note"]), added
    space.verdict(WU, split, "wrong_key", truth[split])
    for who in (LI, MA):
        space.verdict(who, unclear, "unclear", comment="題意不明")
        space.verdict(who, right, "key_correct")

    # the console's export and the command's are the same errata
    exported = space.run(LEAD, "adjudication_export")
    console_file = Path(value(exported["adjudication-export-file"])["path"])
    command_file = tmp_path / "errata.jsonl"
    assert cli_main(["errata", "export", "--store", str(space.store.root), "--out", str(command_file)]) == 0
    assert read_errata(console_file) == read_errata(command_file)
    errata = {e["item_id"]: e for e in read_errata(command_file)}
    assert set(errata) == {agreed, split, unclear, right}
    assert errata[split]["new_key"] == list(truth[split]) and len(errata[split]["reviewers"]) == 2
    assert errata[unclear]["drop"] and errata[right]["verdict"] == "key_correct"
    assert not any(name in command_file.read_text(encoding="utf-8") for name in (LI, MA, WU))  # pseudonyms only

    # the next tree, and its errata config
    rebuilt = tmp_path / "rebuilt"
    raw = space.sim / "raw"
    build([str(raw / "items.jsonl")], rebuilt, str(raw / "annotation_platform.sqlite"), errata=str(command_file))
    published = {r["item_id"]: r for r in datasets.load_dataset(str(rebuilt), "errata", split="test")}
    assert {i: r["verdict"] for i, r in published.items()} == {agreed: "wrong_key", split: "wrong_key",
                                                                unclear: "unclear", right: "key_correct"}  # fmt: skip
    assert published[agreed]["new_key"] == list(truth[agreed]) and published[unclear]["drop"]

    # rescored from the stored predictions = the metric from scratch on the rebuilt tree's keys
    study = load_study(space.data, [space.sim / "runs"])
    result = rescore(study, space.data, read_errata(rebuilt / "errata")).rows.set_index(["kind", "name"])
    fixed = {row["id"]: row for row in load_config(rebuilt, "corpus") if not row["flagged"]}
    assert unclear not in fixed and fixed[agreed]["answer"] == list(truth[agreed])
    for run in sorted((space.sim / "runs").iterdir()):
        outputs = pq.read_table(sorted((run / "outputs").glob("*.parquet"))).to_pandas()
        outputs = outputs[outputs["item_id"].isin(list(fixed))]
        expected = score(
            ["".join(p) for p in outputs["prediction"]], ["".join(fixed[i]["answer"]) for i in outputs["item_id"]]
        )
        model = outputs["model"].iloc[0]
        assert result.at[("model", model), "accuracy_after"] == pytest.approx(100 * expected["exact_match"])
        assert result.at[("model", model), "n_after"] == expected["n"]
    responses = load_config(rebuilt, "responses").to_pandas()
    by_rater = responses[responses["item_id"].isin(list(fixed))].groupby("practitioner_id")["correct"].mean()
    assert result.xs("practitioner").loc[by_rater.index, "accuracy_after"].to_numpy() == pytest.approx(100 * by_rater)


def test_adjudication_evidence_only_after_the_verdict(space: Space) -> None:
    item = _free(space, space.suspects(), True, set())
    assert "✅" in space.assign(item, LI, WU)
    shown = space.verdict(LI, item, "wrong_key", space.planted.at[item, "answer"])
    before, after = json.dumps(shown["opened"], ensure_ascii=False), json.dumps(shown["saved"], ensure_ascii=False)
    assert "Published key" in before and not [m for m in EVIDENCE_MARKS if m in before]
    assert value(shown["opened"]["adjudication-evidence"]) == ""
    assert all(m in value(shown["saved"]["adjudication-evidence"]) for m in EVIDENCE_MARKS), after
    # the other reviewer still reads none of it; a second verdict is refused (a verdict is final)
    other = json.dumps(space.run(WU, "adjudication_open", {"adjudication-open-id": item}), ensure_ascii=False)
    assert "Published key" in other and not [m for m in EVIDENCE_MARKS if m in other]
    again = space.verdict(LI, item, "key_correct")["saved"]
    assert "already saved" in value(again["adjudication-note"])


def test_adjudication_raters_and_one_person_twice_refused(space: Space) -> None:
    rated = space.rated[0]
    note = space.assign(rated, HE, LI)
    assert f"'{HE}' rated item {rated}: a reviewer must not be one of the item's raters" in note
    item = _free(space, space.suspects(), False, set())
    assert "named twice" in space.assign(item, MA, MA)
    assert not space.store.adjudications(item_id=rated) and not space.store.adjudications(item_id=item)


def test_adjudication_stranger_and_unassigned_practitioner_get_nothing(space: Space) -> None:
    item = _free(space, space.suspects(), True, set())
    assert "✅" in space.assign(item, LI, MA)
    space.verdict(LI, item, "wrong_key", space.planted.at[item, "answer"])  # the evidence exists for LI now
    question = load_config(str(space.data), "corpus").to_pandas().set_index("id").at[item, "question"]
    for who, key in (("", ""), (ZHOU, space.keys[ZHOU]), (LI, "a wrong key")):
        for api_name in ADJUDICATION:
            values = {"practice-name": who, "practice-key": key, "adjudication-item": item,
                      "adjudication-open-id": item, "adjudication-item-id": item, "adjudication-first": ZHOU,
                      "adjudication-second": WU, "adjudication-verdict": "key_correct",
                      "adjudication-comment": "x"}  # fmt: skip
            dependency = space.page.fn(api_name)
            done = space.page.call(dependency["id"], space.page.by_elem(dependency, values))
            text = json.dumps(done, ensure_ascii=False)
            leaked = [m for m in [*EVIDENCE_MARKS, question, "rank"] if m in text]
            assert not leaked, (who, api_name, leaked)
    assert len(space.store.adjudications(item_id=item)[0]["reviews"]) == 2  # nobody was added
    assert [r["verdict"] for r in space.store.adjudications(item_id=item)[0]["reviews"]] == ["wrong_key", None]


def shoot(page: Any, selector: str, name: str) -> None:
    """A screenshot of one part of the page, cut from the whole page (the Space's timers re-render it, so an
    element never holds still long enough for an element screenshot)."""
    page.wait_for_timeout(500)
    box = page.evaluate(
        "s => { const r = document.querySelector(s).getBoundingClientRect();"
        " return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; }",
        selector,
    )
    page.screenshot(path=SHOTS / name, full_page=True, clip=box)


@BROWSER[0]
@BROWSER[1]
def test_adjudication_browser_suspect_list_and_evidence_after_the_verdict(space: Space) -> None:
    """In Chromium: the study lead's suspect list in the console; a reviewer's item before and after the verdict
    (the evidence appears only then). Screenshots: adjudication-01-suspects, -02-before, -03-after."""
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    item = _free(space, space.suspects(), True, set())
    assert "✅" in space.assign(item, MA, WU)
    with sync_playwright() as p:
        browser = open_chromium(p)
        lead = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
        lead.set_default_timeout(90_000)  # a busy CI machine: the Space's page is slow to settle
        lead.goto(space.url)
        lead.get_by_role("tab", name="Practitioners").click()
        lead.locator("#practice-name textarea, #practice-name input").first.fill(LEAD)
        lead.locator("#practice-key input, #practice-key textarea").first.fill(TOKEN)
        lead.locator("#practice-start").click()
        expect(lead.locator("#practice-note")).to_contain_text("study lead", timeout=30_000)
        lead.locator("#adjudication-suspects-refresh").click()
        expect(lead.locator("#adjudication-suspects")).to_contain_text("chose", timeout=60_000)
        expect(lead.locator("#adjudication-table")).to_contain_text(item)
        shoot(lead, "#adjudication-console", "adjudication-01-suspects.png")
        lead.close()  # one page's timers at a time

        reviewer = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
        reviewer.set_default_timeout(90_000)
        reviewer.goto(space.url)
        reviewer.get_by_role("tab", name="Practitioners").click()
        reviewer.locator("#practice-name textarea, #practice-name input").first.fill(MA)
        reviewer.locator("#practice-key input, #practice-key textarea").first.fill(space.keys[MA])
        reviewer.get_by_text("Adjudicate keys").click()
        reviewer.locator("#adjudication-open-id textarea, #adjudication-open-id input").first.fill(item)
        reviewer.locator("#adjudication-open").click()
        expect(reviewer.locator("#adjudication-text")).to_contain_text("Published key", timeout=30_000)
        shown = reviewer.locator("#adjudication-review").inner_text()
        assert not [m for m in EVIDENCE_MARKS if m.strip() in shown], shown
        reviewer.locator("#adjudication-verdict").get_by_text("Wrong key").click()
        for letter in space.planted.at[item, "answer"]:
            reviewer.locator("#adjudication-new-key").get_by_text(letter, exact=True).click()
        reviewer.locator("#adjudication-comment textarea").fill("教材所載答案為他項")
        shoot(reviewer, "#adjudication-review", "adjudication-02-before.png")
        reviewer.locator("#adjudication-save").click()
        expect(reviewer.locator("#adjudication-evidence")).to_contain_text("Why it ranks here", timeout=30_000)
        expect(reviewer.locator("#adjudication-note")).to_contain_text("Verdict saved")
        shoot(reviewer, "#adjudication-review", "adjudication-03-after.png")
        browser.close()
