"""Fresh items through the running Space (local mode behind the identity guard, a fake Hub, the tiny model):
every step a practitioner or the study lead takes is a call of the Space's own functions over HTTP.

* ``-k fresh_review``: the writer's checks answer at their fields, a near-duplicate shows the public item, and
  a reviewer reads the key and the explanation only once their blind answer is stored;
* ``-k fresh_hidden``: once an item is written, answered blind, accepted and evaluated by a job, every
  registered function called as a stranger and as an unrelated practitioner, the fake Hub's commits, ``tcmqa
  report`` over the runs, the study's export, the job's log tail, the logs and the error texts hold none of
  its stem, options, explanation or key (nor those of an item still in review);
* ``-k fresh_lifecycle``: the board then shows Fresh with its n; the study lead's console counts it by id;
  retired, it is in the next public revision (``tcmqa build --store``) with its release and retired dates.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fakehub import FakeHub
from gradio_calls import Page
from sources import DEMO_ITEMS
from space_fixtures import hub_models, launch, local_settings

from tcmqa import cli
from tcmqa.build import build
from tcmqa.data import load_config
from tcmqa.hub.publisher import Publisher
from tcmqa.leaderboard import board as board_lib
from tcmqa.models import local_revision
from tcmqa.prompts import PROTOCOL
from tcmqa.store import FINISHED, SQLiteStore
from tcmqa.worker import WorkerConfig, work

WRITER, REVIEWERS, RATER, OTHER, LEAD = "wen-writer", ("li-reviewer", "ma-reviewer"), "he-rater", "zhou-other", "lead"
TOKEN = "operator-token-0123456789abcdef"
# an item written for this test (not from any paper or book); its key (C, D, E) is no public item's
STEM = "一位患者久病后心悸怔忡，夜寐多梦，面色无华，舌淡脉细弱，下列治法中适用的是"
OPTIONS = ["疏散风热兼以透疹", "清泻肝胆实火为主", "补益心脾以养血", "养血安神以定悸", "益气生血兼宁心"]
KEY = ["C", "D", "E"]
EXPLANATION = "心脾两虚、血不养心，当补益心脾、养血安神、益气生血；A 属表证之法，B 属肝胆实热之法，皆不合。"
# a second item, left in review: its text is as hidden as the accepted one's
STEM_2 = "针刺治疗急性腰扭伤时，远道取穴常选用的经验效穴位于手背第二三掌骨之间，其名称是"
OPTIONS_2 = ["腰痛点穴位", "后溪穴位置", "养老穴位置", "合谷穴位置", "外关穴位置"]
EXPLANATION_2 = "腰痛点为经外奇穴，主治急性腰扭伤；后溪、养老、合谷、外关虽为常用穴，其主治与此题所问不同。"
KEY_RENDERED = re.compile(r"(?<![A-Za-z0-9])C[^A-Za-z0-9]{0,6}D[^A-Za-z0-9]{0,6}E(?![A-Za-z0-9])")
CHOICE_LISTS = re.compile(r'"A",\s*"B",\s*"C",\s*"D",\s*"E"')  # the answer controls' own letters, A to E


def form(stem: str = STEM, options: list[str] = OPTIONS, key: list[str] = KEY, explanation: str = EXPLANATION) -> dict:
    """The writing form's fields by elem_id."""
    values = {f"fresh-option-{letter}": text for letter, text in zip("abcde", options, strict=True)}
    return values | {
        "fresh-stem": stem,
        "fresh-key": key,
        "fresh-explanation": explanation,
        "fresh-domains": ["internal_medicine", "diagnosis_patterns"],
        "fresh-difficulty": 3,
        "fresh-own-work": True,
    }


def secrets_in(text: str) -> list[str]:
    """The hidden items' stems, options, explanations and the key that ``text`` holds."""
    found = [s for s in (STEM, EXPLANATION, STEM_2, EXPLANATION_2, *OPTIONS, *OPTIONS_2) if s in text]
    if KEY_RENDERED.search(CHOICE_LISTS.sub("", text)):
        found.append("the key")
    return found


class Records(logging.Handler):
    """Every log record of the module's run, formatted (what an operator's log would hold)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class Space:
    """The launched Space, its store and who is signed in (name -> key)."""

    def __init__(self, tmp: Path, tree: Path, hub: FakeHub, records: Records):
        self.records = records
        self.store = SQLiteStore(tmp / "store")
        settings = local_settings(self.store.root, tree, practice_block_size=5, practice_admins=(LEAD,))
        self.settings = settings.__class__(**{**settings.__dict__, "admin_token": TOKEN})
        self.demo, self.url = launch(self.settings, self.store, hub)
        self.page = Page(self.url)
        self.keys: dict[str, str] = {LEAD: TOKEN}

    def start(self, name: str) -> None:
        """``name`` signs in and confirms a licence; the browser's key kept."""
        out = self.page.run("practice_start", {"practice-name": name, "practice-licence": True})
        self.keys[name] = out["practice-key"] if isinstance(out["practice-key"], str) else out["practice-key"]["value"]
        assert self.keys[name], out

    def run(self, who: str, api_name: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.page.run(api_name, {"practice-name": who, "practice-key": self.keys.get(who, ""), **(values or {})})

    def review(self, who: str, item_id: str, answer: list[str], judge: bool = True) -> dict[str, Any]:
        """``who`` opens their review of ``item_id``, answers it blind (difficulty 2) and, as a reviewer, accepts it."""
        (seat,) = [r["id"] for r in self.store.fresh_reviews(item_id=item_id, reviewer=who) if r["released_at"] is None]
        opened = self.run(who, "fresh_open_review", {"fresh-open-id": seat})
        assert value(opened["fresh-review-id"]) == seat, opened
        answered = self.run(
            who,
            "fresh_answer",
            {"fresh-review-id": seat, "fresh-review-multi": answer, "fresh-review-difficulty": 2},
        )
        if judge:
            held = ["key_correct", "keyed_exact", "clear", "sound", "original"]
            self.run(who, "fresh_judge", {"fresh-review-id": seat, "fresh-holds": held, "fresh-comment": ""})
        return answered


def value(output: Any) -> Any:
    """An output's value, whether sent as a plain value or an update."""
    return output.get("value") if isinstance(output, dict) and "__type__" in output else output


@pytest.fixture(scope="module")
def space(tmp_path_factory, demo_tree) -> Iterator[Space]:
    """The Space over the demo tree with its practitioners signed in: the writer and two reviewers (the study's
    N = 3: a rater joins later); the board shows the pool from one item; every log record kept."""
    records = Records()
    logging.getLogger().addHandler(records)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(board_lib, "MIN_POOL", 1)
        space = Space(tmp_path_factory.mktemp("fresh-space"), demo_tree, hub_models(), records)
        try:
            for name in (WRITER, *REVIEWERS):
                space.start(name)
            yield space
        finally:
            space.demo.close()
            logging.getLogger().removeHandler(records)


def test_fresh_review_checks_then_blind_answer_then_key(space: Space, demo_items: list[dict]) -> None:
    """The checks answer at their fields; a light edit of a public item is refused with that item shown; a
    reviewer's screens hold the stem and options, and the key and explanation only after the blind answer."""
    bad = form(options=[OPTIONS_2[0]] * 2 + OPTIONS_2[2:], key=[]) | {"fresh-own-work": False, "fresh-stem": ""}
    out = space.run(WRITER, "fresh_write", bad)
    assert "empty" in out["fresh-error-question"] and "repeats option A" in out["fresh-error-option-b"]
    assert "letters A to E" in out["fresh-error-answer"] and "own work" in out["fresh-error-own-work"]
    assert out["fresh-error-domains"] == "" and "Not stored" in out["fresh-note"]
    public = demo_items[0]  # two options swapped and the punctuation changed: a near-duplicate
    options = dict(public["choices"])
    options["A"], options["B"] = options["B"], options["A"]
    copied = form(stem=public["question"] + "？", options=list(options.values()), key=["B"])
    out = space.run(WRITER, "fresh_write", copied)
    assert (
        f"public item **{public['question_id']}**" in out["fresh-duplicate"]
        and "similarity 1.00" in out["fresh-duplicate"]
    )
    assert public["question"] in out["fresh-duplicate"]  # the public item shown in full
    assert space.store.fresh_duplicates_refused() == 1
    # the second item: written, and read by its first reviewer blind, then with the key
    out = space.run(WRITER, "fresh_write", form(STEM_2, OPTIONS_2, ["A"], EXPLANATION_2))
    assert "is in review" in out["fresh-note"] and value(out["fresh-stem"]) == "", out
    (item,) = space.store.fresh_items(state="in_review")
    reviewer = next(r["reviewer"] for r in space.store.fresh_reviews(item_id=item.id))
    opened = json.dumps(space.run(reviewer, "fresh_open_review"), ensure_ascii=False)
    assert STEM_2[:10] in opened and OPTIONS_2[1] in opened
    assert EXPLANATION_2[:10] not in opened and "Key:" not in opened
    seat = next(r["id"] for r in space.store.fresh_reviews(reviewer=reviewer))
    judged = space.run(reviewer, "fresh_judge", {"fresh-review-id": seat, "fresh-holds": list(HELD)})
    assert "blind answer before judging" in judged["fresh-review-note"]  # no judging, so no key, before answering
    answered = space.run(
        reviewer, "fresh_answer", {"fresh-review-id": seat, "fresh-review-single": "B", "fresh-review-difficulty": 4}
    )
    assert "**Key: A**" in answered["fresh-revealed"] and EXPLANATION_2[:10] in answered["fresh-revealed"]
    (stored,) = [r for r in space.store.fresh_reviews(reviewer=reviewer) if r["id"] == seat]
    assert stored["selected"] == "B" and stored["blind_difficulty"] == 4 and stored["seconds"] >= 0
    # the writer is never their own item's reviewer; a stranger opens nothing
    assert WRITER not in {r["reviewer"] for r in space.store.fresh_reviews(item_id=item.id)}
    stranger = space.page.run("fresh_open_review", {"practice-name": "", "practice-key": ""})
    assert "sign in first" in stranger["fresh-review-note"]


HELD = ("key_correct", "keyed_exact", "clear", "sound", "original")


@pytest.fixture(scope="module")
def evaluated(space: Space, tiny_dir: Path, demo_tree: Path, tmp_path_factory) -> dict[str, Any]:
    """The item written, answered blind and accepted by its two reviewers, answered blind by a third rater,
    then evaluated by a job on the tiny model (the pool after the public items); the pool shown from one item."""
    space.start(RATER)
    out = space.run(WRITER, "fresh_write", form())
    assert "is in review" in out["fresh-note"], out
    item_id = re.search(r"\*\*(fresh-\d+)\*\*", out["fresh-note"]).group(1)
    seated = [r["reviewer"] for r in space.store.fresh_reviews(item_id=item_id)]
    assert len(seated) == 2 and WRITER not in seated
    for who in seated:
        space.review(who, item_id, KEY)
    assert space.store.fresh_item(item_id).state == "accepted"
    (rater,) = [r["reviewer"] for r in space.store.fresh_reviews(item_id=item_id) if r["role"] == "rater"]
    space.review(rater, item_id, ["C", "D"], judge=False)
    assert space.store.fresh_reference() == {item_id: True}
    runs = tmp_path_factory.mktemp("fresh-runs")
    job = space.store.submit("tiny", local_revision(tiny_dir), PROTOCOL, "u", {"path": str(tiny_dir)})
    config = WorkerConfig(
        data=str(demo_tree), runs=runs, engine="transformers", dtype="float32", engine_args={"batch_size": 8},
        skip_probes=True, heartbeat_s=0.5, poll_s=0.1, hosted=False,
    )  # fmt: skip
    assert work(space.store, config, "w", once=True) == 1, space.records.lines[-3:]  # a failure is logged
    done = space.store.get(job.id)
    assert done is not None and done.status == FINISHED, done and done.log_tail
    return {"item_id": item_id, "job": job.id, "runs": runs}


def sweep(space: Space, names: list[str], keys: list[str], texts: dict[str, list[Any]], numbers: list[int]) -> str:
    """Every registered function, called with every plausible combination of its inputs (8 at most): the
    completion messages, outputs and errors, as one text."""
    page, seen = space.page, []
    for dependency in page.config["dependencies"]:
        options = [plausible(page, cid, names, keys, texts, numbers) for cid in dependency["inputs"]]
        for data in itertools.islice(itertools.product(*options), 8):
            seen.append(json.dumps(page.call(dependency["id"], list(data)), ensure_ascii=False, default=str))
    return "\n".join(seen)


def plausible(
    page: Page, cid: int, names: list[str], keys: list[str], texts: dict[str, list[Any]], numbers: list[int]
) -> list[Any]:
    """What a caller would try in this input: the names and keys given, the ids they know (``texts`` by a word of
    the field's elem_id or label), the review ids, every choice."""
    component = page.components[cid]
    kind, props, elem = component["type"], component.get("props", {}), page.elem(cid)
    if kind == "textbox":
        if any(w in elem for w in ("key", "token")) and "fresh" not in elem:
            return keys
        if any(w in elem for w in ("name", "account")):
            return names
        return next((v for w, v in texts.items() if w in elem), ["a caller's text"])
    if kind == "checkbox":
        return [True]
    if kind == "number":
        return numbers
    if kind in ("radio", "dropdown", "checkboxgroup"):
        choices = [c[1] if isinstance(c, list | tuple) else c for c in props.get("choices") or []]
        if not choices:
            return [props.get("value")]
        return [choices[:3]] if kind == "checkboxgroup" or props.get("multiselect") else [choices[0]]
    return [props.get("value")]


def test_fresh_hidden_nothing_of_a_hidden_item_leaves(space: Space, evaluated: dict[str, Any], demo_tree: Path,
                                                      tmp_path: Path) -> None:  # fmt: skip
    item_id, runs = evaluated["item_id"], evaluated["runs"]
    reviews = [r["id"] for r in space.store.fresh_reviews()]
    space.start(OTHER)  # an unrelated practitioner: confirmed, neither writer, reviewer nor rater of either item
    assert OTHER not in {r["reviewer"] for r in space.store.fresh_reviews()}
    texts = {"item": [item_id, "fresh-00002"], "job": [evaluated["job"]], "fresh-to": [OTHER]}
    strangers = sweep(space, [WRITER, LEAD], ["", "guess"], texts, reviews)
    other = sweep(space, [OTHER], [space.keys[OTHER]], texts, reviews)
    assert len(space.page.config["dependencies"]) > 50
    assert secrets_in(strangers) == [], "a stranger read a hidden item"
    assert secrets_in(other) == [], "an unrelated practitioner read a hidden item"
    assert "not assigned to you" in other  # the unrelated practitioner did reach the review handlers
    # the Hub's commits: the results row, its outputs and the practitioners' configs
    hub = FakeHub()
    hub.create_repo("org/tcmqa")
    publisher = Publisher(space.store, hub, "org/tcmqa", sleep=lambda s: None)
    assert publisher.publish_pending() == 1
    files = hub.files("org/tcmqa")
    cells = []
    for path, data in files.items():
        if path.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(data))
            cells += [json.dumps(v, ensure_ascii=False, default=str) for c in table.columns for v in c.to_pylist()]
    assert any(p.startswith("outputs/") for p in files)
    assert secrets_in("\n".join(d.decode("utf-8", "replace") for d in files.values())) == []
    assert secrets_in("\n".join(cells)) == []
    # the exports: the paper's report over every run, the study's platform database
    report = tmp_path / "report"
    assert cli.main(["report", "--data", str(demo_tree), "--outputs", str(runs), "--out", str(report)]) == 0
    written = [p.read_bytes().decode("utf-8", "replace") for p in report.rglob("*") if p.is_file()]
    assert secrets_in("\n".join(written)) == []
    export = space.run(LEAD, "practice_export")["console-export-file"]
    exported = sqlite3.connect(value(export)["path"] if isinstance(value(export), dict) else value(export))
    dump = "\n".join(exported.iterdump())
    assert secrets_in(dump) == []
    # the job's log tail, and every log record of the run (the Space's, the worker's)
    job = space.store.get(evaluated["job"])
    assert job is not None and secrets_in(job.log_tail or "") == []
    assert secrets_in("\n".join(space.records.lines)) == []


def test_fresh_lifecycle_board_console_retire_and_publish(
    space: Space, evaluated: dict[str, Any], tmp_path: Path
) -> None:
    item_id = evaluated["item_id"]
    columns = ["Full", "Fresh", "Public − Fresh", board_lib.FRESH_CI]
    table = space.page.run("board", {"board-search": "", "board-columns": columns})["board-table"]
    rows = [dict(zip(table["headers"], row, strict=True)) for row in table["data"]]
    (tiny,) = [r for r in rows if "tiny" in str(r.get("Model"))]
    assert "n=1" in tiny[board_lib.FRESH_CI] and tiny["Fresh"] in (0.0, 100.0)
    assert tiny["Public − Fresh"] == pytest.approx(tiny["Full"] - tiny["Fresh"], abs=0.01)
    # the study lead's console: the pool by state and id, no text
    console = space.run(LEAD, "pool_console")
    summary = dict(value(console["pool-summary"])["data"])
    assert summary["items accepted (hidden)"] == "1" and summary["near-duplicates refused"] == "1"
    assert item_id in json.dumps(console["pool-items"]) and secrets_in(json.dumps(console, ensure_ascii=False)) == []
    # retired, it joins the next public revision with its dates
    assert cli.main(["pool", "--store", str(space.store.root), "--by", LEAD, "retire", "--keep-newest", "0"]) == 0
    out = tmp_path / "tree"
    build([str(DEMO_ITEMS)], out, store=str(space.store.root))
    corpus = {row["id"]: row for row in load_config(str(out), "corpus").to_list()}
    row = corpus[item_id]
    assert row["question"] == STEM and row["answer"] == KEY and row["source"] == "fresh"
    assert row["release_date"] and row["retired_date"] and row["release_date"] <= row["retired_date"]


def test_fresh_review_rejected_item_comes_back_to_its_writer_once(space: Space) -> None:
    """Both reviewers reject with comments: the writer loads the item with the comments, revises it once, and it
    goes back into review (revision 2); nobody else can load it."""
    stem = "小儿脾常不足，饮食不节易致积滞，下列哪一项最能体现其病机特点（本题为测试而写）"
    options = ["乳食停滞中焦", "外感风寒束表", "肝阳上亢化风", "心火亢盛扰神", "肾精亏虚失养"]
    out = space.run(WRITER, "fresh_write", form(stem, options, ["A"], "乳食停滞为积滞之本；余皆与积滞无关。"))
    item_id = re.search(r"\*\*(fresh-\d+)\*\*", out["fresh-note"]).group(1)
    for seat in [r for r in space.store.fresh_reviews(item_id=item_id) if r["role"] == "reviewer"]:
        who = seat["reviewer"]
        space.run(who, "fresh_open_review", {"fresh-open-id": seat["id"]})
        blind = {"fresh-review-id": seat["id"], "fresh-review-single": "A", "fresh-review-difficulty": 1}
        space.run(who, "fresh_answer", blind)
        judged = space.run(
            who,
            "fresh_judge",
            {"fresh-review-id": seat["id"], "fresh-holds": ["key_correct"], "fresh-problems": ["unclear_options"],
             "fresh-comment": f"{who}：选项表述不清"},
        )  # fmt: skip
    assert "now rejected" in judged["fresh-review-note"]
    refused = space.run(REVIEWERS[0], "fresh_revise", {"fresh-revise-item": item_id})
    assert "is not yours" in refused["fresh-comments"] and stem not in json.dumps(refused, ensure_ascii=False)
    loaded = space.run(WRITER, "fresh_revise", {"fresh-revise-item": item_id})
    assert value(loaded["fresh-stem"]) == stem and value(loaded["fresh-editing"]) == item_id
    assert "选项表述不清" in loaded["fresh-comments"] and "Unclear options" in loaded["fresh-comments"]
    revised = form(stem + "（修订）", options, ["A"], "乳食停滞为积滞之本；余皆与积滞无关。")
    out = space.run(WRITER, "fresh_write", revised | {"fresh-editing": item_id})
    assert "is in review" in out["fresh-note"], out
    item = space.store.fresh_item(item_id)
    assert item is not None and item.state == "in_review" and item.revision == 2
