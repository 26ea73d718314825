"""Key adjudication's rules over the store (SQLite and PostgreSQL): who may review, the evidence withheld until a
verdict is saved, a third reviewer when two disagree, the decision and its erratum. ``-k adjudicat``."""

from __future__ import annotations

import pytest
from space_fixtures import evaluated_model

from tcmqa.adjudication import DECIDED, DISAGREE, WAITING, errata_rows
from tcmqa.data import load_config
from tcmqa.errata import read_errata
from tcmqa.ingest import DEFAULT_PSEUDONYM_KEY, person_pseudonym
from tcmqa.leaderboard.practice import NotAllowed, Practice
from tcmqa.store import Store

LEAD, LI, MA, WU, HE, ZHOU = "lead", "li-reviewer", "ma-reviewer", "wu-third", "he-rater", "zhou-other"


@pytest.fixture
def practice(url, demo_tree, tmp_path) -> Practice:
    """The demo corpus over an empty store with one evaluated model; five confirmed practitioners, of whom
    ``he-rater`` answered a whole block (one rater per block: it is finished)."""
    store = Store(url)
    evaluated_model(store, demo_tree, tmp_path)
    p = Practice(store, load_config(str(demo_tree), "corpus").to_list(), admins=(LEAD,), raters=1, block_size=5)
    p.data = str(demo_tree)
    for account in (LI, MA, WU, HE, ZHOU):
        p.confirm(account, True)
    while (view := p.current(HE)) is not None:
        p.submit(HE, view.item_id, ["A"] if view.answer_type == "single" else ["A", "B"], ["other"], 3, True,
                 "選項不清", 10.0, 0.0)  # fmt: skip
    return p


def test_adjudication_reviewers_verdicts_and_the_decision(practice: Practice) -> None:
    p = practice
    ranked = p.suspects(LEAD)
    assert list(ranked["rank"][:3]) == [1, 2, 3] and ranked["reason"].str.len().gt(0).all()
    rated = {r["item_id"] for r in p.store.practice_responses(account=HE)}
    top, second, third = [i for i in ranked["item_id"] if i not in rated][:3]
    with pytest.raises(NotAllowed, match="admins only"):
        p.suspects(LI)
    with pytest.raises(NotAllowed, match="admins only"):
        p.assign_adjudication(LI, top, [MA, WU])
    with pytest.raises(ValueError, match="named twice"):
        p.assign_adjudication(LEAD, top, [LI, LI])
    he_item = sorted(rated)[0]
    with pytest.raises(ValueError, match=f"'{HE}' rated item {he_item}: a reviewer must not be one of the item's"):
        p.assign_adjudication(LEAD, he_item, [HE, LI])
    with pytest.raises(ValueError, match="cannot review: a study lead"):
        p.assign_adjudication(LEAD, top, [LEAD, LI])
    assert p.store.adjudications() == []  # every refusal before anything is stored
    for item in (top, second, third):
        p.assign_adjudication(LEAD, item, [LI, MA])
    with pytest.raises(ValueError, match="already being adjudicated"):
        p.assign_adjudication(LEAD, top, [WU, ZHOU])

    # before the verdict: the item and its published key, no evidence; others read nothing
    view = p.adjudication_view(LI, top)
    key = "".join(sorted(p.items[top]["answer"]))
    assert view["key"] == key and view["evidence"] is None and view["verdict"] is None
    for who in (WU, None):
        with pytest.raises(NotAllowed):
            p.adjudication_view(who, top)
    with pytest.raises(NotAllowed):
        p.record_adjudication_verdict(WU, top, "key_correct", [], "不是我的")
    with pytest.raises(ValueError, match="needs the right letters"):
        p.record_adjudication_verdict(LI, top, "wrong_key", [], "答案應為他項")
    with pytest.raises(ValueError, match="add a comment"):
        p.record_adjudication_verdict(LI, top, "key_correct", [], " ")
    other = "E" if key != "E" else "D"
    after = p.record_adjudication_verdict(LI, top, "wrong_key", [other], "教材所載為他項")
    assert after["evidence"]["rank"] == int(ranked.set_index("item_id").at[top, "rank"])
    assert after["evidence"]["reason"] and after["verdict"] == f"wrong_key → {other}"
    assert p.adjudication_view(MA, top)["evidence"] is None  # one reviewer's verdict shows the other nothing
    with pytest.raises(ValueError, match="already saved"):
        p.record_adjudication_verdict(LI, top, "key_correct", [], "改主意")
    p.record_adjudication_verdict(MA, top, "wrong_key", [other], "同意")
    # a disagreement goes to a third reviewer, assigned by the lead only then
    p.record_adjudication_verdict(LI, second, "key_correct", [], "答案無誤")
    with pytest.raises(ValueError, match="awaiting verdicts: another reviewer is assigned only when"):
        p.add_adjudication_reviewer(LEAD, second, WU)
    p.record_adjudication_verdict(MA, second, "unclear", [], "題幹含糊")
    table = p.adjudication_table(LEAD).set_index("item_id")
    assert table.at[top, "status"] == DECIDED and table.at[second, "status"] == DISAGREE
    assert table.at[third, "status"] == WAITING
    with pytest.raises(ValueError, match="already reviews"):
        p.add_adjudication_reviewer(LEAD, second, LI)
    p.add_adjudication_reviewer(LEAD, second, WU)
    assert p.adjudication_table(LEAD).set_index("item_id").at[second, "status"] == WAITING
    p.record_adjudication_verdict(WU, second, "unclear", [], "選項重疊")
    assert p.suspects(LEAD).set_index("item_id").at[second, "adjudication"] == DECIDED

    # the decided items as errata: the agreeing reviewers by pseudonym, the key they were given on
    errata = {e["item_id"]: e for e in errata_rows(p.store)}
    assert set(errata) == {top, second}
    names = {r["account"]: person_pseudonym(r["number"], DEFAULT_PSEUDONYM_KEY) for r in p.store.practitioners()}
    assert errata[top]["new_key"] == [other] and errata[top]["old_key"] == list(key) and not errata[top]["drop"]
    assert errata[top]["reviewers"] == [names[LI], names[MA]]
    assert errata[second]["verdict"] == "unclear" and errata[second]["drop"]
    assert errata[second]["reviewers"] == [names[MA], names[WU]] and LI not in str(errata)
    path = p.export_errata(LEAD, p.store.cache_dir / "errata.jsonl")
    assert read_errata(path) == list(errata.values())
