"""Fresh items: the near-duplicate check and the public − fresh gap, on planted positives and negatives."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tcmqa.fresh.duplicates import THRESHOLD, DuplicateIndex, canonical_text
from tcmqa.fresh.gap import fresh_gap

# Written for this test, not taken from any paper or book: the planted originals.
ORIGINALS = [  # (stem, options A-E)
    (
        "患者晨起口苦，午后潮热，夜间盗汗，舌红少苔，宜首先考虑的治法是",
        ["滋阴降火", "清热燥湿", "疏肝理气", "温阳化饮", "健脾益气"],
    ),
    (
        "针刺足三里时，为避免伤及深部组织，下列说法最恰当的是",
        ["直刺一至二寸", "斜刺三寸以上", "平刺五分", "点刺出血", "禁用灸法"],
    ),
    ("煎煮含有矿石类药物的方剂时，这类药物一般应当", ["先煎", "后下", "包煎", "另炖", "烊化"]),
    (
        "一位老年患者久咳气短，动则尤甚，腰膝酸软，其病位主要在",
        ["肺与肾", "心与肝", "脾与胃", "胆与膀胱", "大肠与小肠"],
    ),
]


@pytest.fixture(scope="module")
def sample_items(sample_dir) -> list[dict]:
    with open(sample_dir / "items.jsonl", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def public_index(sample_items) -> DuplicateIndex:
    index = DuplicateIndex()
    index.extend((str(item["question_id"]), item["question"], item["choices"]) for item in sample_items)
    return index


def _light_edit(item: dict, rng: random.Random) -> tuple[str, dict[str, str]]:
    """Two options swapped, full-width punctuation restyled, two characters of the stem changed."""
    options = dict(item["choices"])
    first, second = rng.sample(sorted(options), 2)
    options[first], options[second] = options[second], options[first]
    stem = list(item["question"].replace("，", ",").replace("。", ".").replace("（", "(").replace("）", ")"))
    for position in rng.sample(range(len(stem)), min(2, len(stem))):
        stem[position] = "某"
    return "".join(stem) + "?", options


def test_fresh_duplicate_light_edits_of_public_items_are_refused(sample_items, public_index):
    rng = random.Random(0)
    edited = rng.sample(sample_items, 300)
    refused = 0
    for item in edited:
        match = public_index.nearest(*_light_edit(item, rng))
        if match is None:
            continue
        refused += 1
        # the nearest is the item edited, or a public twin with the same text
        source = canonical_text(item["question"], item["choices"])
        twin = next(i for i in sample_items if str(i["question_id"]) == match.item_id)
        assert match.item_id == str(item["question_id"]) or canonical_text(twin["question"], twin["choices"]) == source
    assert refused >= 0.98 * len(edited), f"only {refused} of {len(edited)} light edits refused at {THRESHOLD}"


def test_fresh_duplicate_originals_are_accepted(public_index):
    for question, texts in ORIGINALS:
        options = dict(zip("ABCDE", texts))
        assert public_index.nearest(question, options) is None, question
        # a pool item does not refuse itself when rechecked after a revision, but does refuse a copy
        pool = DuplicateIndex()
        pool.add("fresh-1", question, options)
        assert pool.nearest(question, options, exclude="fresh-1") is None
        assert pool.nearest(question, options).item_id == "fresh-1"


def test_fresh_duplicate_ignores_option_order_and_punctuation_only():
    index = DuplicateIndex()
    index.add("a", "下列属于六淫的是", {"A": "风", "B": "寒", "C": "暑", "D": "湿", "E": "七情"})
    swapped = index.similarities("下列属于六淫的是：", {"A": "七情", "B": "寒", "C": "暑", "D": "湿", "E": "风"})
    assert swapped.tolist() == [1.0]
    other = index.similarities("下列属于七情的是", {"A": "喜", "B": "怒", "C": "忧", "D": "思", "E": "风"})
    assert 0 < other[0] < THRESHOLD


def _simulated(seed: int, theta_model: float, shift: float, memorised: float = 0.0, theta_human: float = 0.8):
    """Rasch items (fresh ones ``shift`` logits harder for everyone), three practitioners' majority, one model."""
    rng = np.random.default_rng(seed)
    public_b, fresh_b = rng.normal(0, 1.2, 800), rng.normal(shift, 1.2, 200)

    def right(theta: float, b: np.ndarray, raters: int = 1) -> np.ndarray:
        correct = rng.random((raters, len(b))) < 1 / (1 + np.exp(b - theta))
        return (2 * correct.sum(0) > raters).astype(int) if raters > 1 else correct[0].astype(int)

    human_public, human_fresh = right(theta_human, public_b, 3), right(theta_human, fresh_b, 3)
    if memorised:  # right on the public items it memorised, at chance (one in five) on everything else
        model_public = np.where(rng.random(800) < memorised, 1, rng.random(800) < 0.2).astype(int)
        model_fresh = (rng.random(200) < 0.2).astype(int)
    else:
        model_public, model_fresh = right(theta_model, public_b), right(theta_model, fresh_b)
    return fresh_gap(model_public, human_public, model_fresh, human_fresh)


def test_fresh_gap_marks_a_memoriser():
    marked = [_simulated(seed, 0.0, shift=1.0, memorised=0.7).marked for seed in range(20)]
    assert sum(marked) >= 19


@pytest.mark.parametrize("theta", [-0.5, 0.8, 2.0])
@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_fresh_gap_does_not_mark_a_clean_model(theta, shift):
    """Planted negatives: models weaker, equal and stronger than the practitioners, on a pool as hard and harder."""
    marked = sum(_simulated(seed, theta, shift).marked for seed in range(20))
    assert marked <= 3


def test_fresh_gap_by_hand():
    gap = fresh_gap(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]), np.array([1, 0]), np.array([0, 0]))
    # model 50 − 50, practitioners 25 − 0: D = −25; paired differences [0, 1, 0, 0] and [1, 0]
    assert (gap.model_gap, gap.human_gap, gap.difference) == (0.0, 25.0, -25.0)
    se = np.sqrt(np.var([0, 1, 0, 0], ddof=1) / 4 + np.var([1, 0], ddof=1) / 2)
    assert gap.low == pytest.approx(-25 - 196 * se, rel=1e-3) and not gap.marked
    with pytest.raises(ValueError, match="same items"):
        fresh_gap(np.array([1, 0]), np.array([1]), np.array([1]), np.array([1]))
    with pytest.raises(ValueError, match="0 or 1"):
        fresh_gap(np.array([2]), np.array([1]), np.array([1]), np.array([1]))


def test_fresh_duplicate_similarity_is_the_exact_jaccard_before_and_after_settling(sample_items, monkeypatch):
    from tcmqa.fresh import duplicates

    monkeypatch.setattr(duplicates, "SETTLE_AFTER", 20)  # 30 rows settle by column, the rest are searched by row
    items = sample_items[:45]
    texts = [canonical_text(i["question"], i["choices"]) for i in items]
    hashed = [set(row.indices) for row in duplicates._HASHER.transform(texts)]  # each item's hashed trigram set
    index = DuplicateIndex()
    index.extend((str(i["question_id"]), i["question"], i["choices"]) for i in items[:30])
    index.similarities("先", {"A": "后"})  # settles the first 30
    index.extend((str(i["question_id"]), i["question"], i["choices"]) for i in items[30:])
    for k in range(0, len(items), 7):
        expected = [len(h & hashed[k]) / len(h | hashed[k]) for h in hashed]
        assert np.allclose(index.similarities(items[k]["question"], items[k]["choices"]), expected)
