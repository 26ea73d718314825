"""The answer-set rules of metric/tcmqa_metric.py on hand-computed cases, and their errors."""

import doctest
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest

import tcmqa_metric
from tcmqa_metric import normalize_prediction, normalize_reference, parse_strict, parse_text, score


@pytest.fixture(scope="module")
def metric():
    return tcmqa_metric.TcmqaMetric()


@pytest.mark.parametrize(
    ("text", "letters"),
    [
        ("B", ["B"]),
        ("EDCBA", ["A", "B", "C", "D", "E"]),
        ("答案：B", ["B"]),
        ("答案：ＢＤ", ["B", "D"]),  # full-width letters become A-E
        ("Ⓑ and 𝐃", ["B", "D"]),  # so do circled and mathematical ones
        ("B, D", ["B", "D"]),
        ("BBD", ["B", "D"]),
        ("The answer is B", ["B"]),
        ("Answer: B", ["A", "B"]),  # the scan reads the A of "Answer", as the paper's did
        ("b d", []),  # lower case is not an option letter
        ("F G H", []),
        ("", []),
        ("A\u030a", []),  # NFKC composes A + ring into Å, so no A survives
        ("正确答案是C，因为黄芪补气", ["C"]),
    ],
)
def test_parse_text_is_nfkc_then_the_papers_scan(text, letters):
    assert parse_text(text) == letters


@pytest.mark.parametrize(
    ("text", "nfkc", "paper"),
    [
        ("答案：ＢＤ", ["B", "D"], []),  # the departure: full-width letters count only after NFKC
        ("Ⓑ", ["B"], []),
        ("答案：B", ["B"], ["B"]),
        ("Answer: C", ["A", "C"], ["A", "C"]),
    ],
)
def test_the_papers_literal_scan_reads_the_raw_text(text, nfkc, paper):
    assert normalize_prediction(text) == parse_text(text) == nfkc
    assert normalize_prediction(text, parser="paper") == paper


def test_empty_precision_none_leaves_empty_predictions_out_of_precision():
    results = score(PREDICTIONS, REFERENCES, empty_precision=None, per_item=True)
    multi_sizes = [size for size, ref in zip(results["per_item"]["pred_size"], REFERENCES) if len(ref) > 1]
    assert 0 in multi_sizes  # the fixture has an empty multi-answer prediction
    assert results["precision"] == pytest.approx((1 + 1 + 3 / 5) / 3)  # the three non-empty ones
    assert results["recall"] == pytest.approx(EXPECTED["recall"]) and results["f1"] == pytest.approx(EXPECTED["f1"])


@pytest.mark.parametrize(
    ("text", "letters"),
    [
        ("Answer: B", ["B"]),
        ("The answer is BD.", ["B", "D"]),
        ("答案：ＢＤ", ["B", "D"]),
        ("B,D", ["B", "D"]),
        ("A and C", ["A", "C"]),
        ("DEcoction Because", []),  # letters inside words are not options
        ("Ab", []),
        ("A. 黄芪 B. 党参", ["A", "B"]),  # echoed options still count: a documented limit
    ],
)
def test_parse_strict_ignores_letters_inside_words(text, letters):
    assert parse_strict(text) == letters


def test_parsers_return_fresh_lists():
    parse_text("B").append("X")
    assert parse_text("B") == ["B"]


@pytest.mark.parametrize(
    "pred", [["D", "B"], ("B", "D"), np.array(["B", "D"]), "BD", "B, D", "D B", "答案：DB", ["B", "D", "D"]]
)
def test_normalize_prediction_forms(pred):
    assert normalize_prediction(pred) == ["B", "D"]


def test_normalize_prediction_parser_option():
    assert normalize_prediction(["Answer", "B"]) == ["A", "B"]
    assert normalize_prediction(["Answer", "B"], parser="strict") == ["B"]
    assert normalize_prediction([]) == []
    with pytest.raises(ValueError, match="unknown parser 'regex'"):
        normalize_prediction("B", parser="regex")


@pytest.mark.parametrize("pred", [None, 2, b"B", ["B", 1], [["B"]], {"B": 1}])
def test_normalize_prediction_unsupported_type(pred):
    with pytest.raises(TypeError, match="unsupported prediction"):
        normalize_prediction(pred)


@pytest.mark.parametrize(
    "ref", ["BD", "B,D", "B D", "B、D", " B ; D ", ["D", "B"], ("B", "D"), "ＢＤ", "Ｂ，Ｄ", "DBD"]
)
def test_normalize_reference_forms(ref):
    assert normalize_reference(ref) == ["B", "D"]


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("", "empty reference"),
        (" , ", "empty reference"),
        ([], "empty reference"),
        ("F", "outside A-E: 'F'"),
        ("BF", "outside A-E: 'F'"),
        (["B", "G"], "outside A-E: 'G'"),
        ("b", "outside A-E: 'b'"),  # strict: not silently upper-cased or dropped
        ("B.", r"outside A-E: '\.'"),
        ("答案B", "outside A-E: '案答'"),
    ],
)
def test_normalize_reference_rejects_bad_keys(ref, message):
    with pytest.raises(ValueError, match=message):
        normalize_reference(ref)


@pytest.mark.parametrize("ref", [None, 3, ["B", None], np.array([1, 2])])
def test_normalize_reference_unsupported_type(ref):
    with pytest.raises(TypeError, match="unsupported reference"):
        normalize_reference(ref)


# Six items, by hand. Single: B/B right, C/B wrong. Multi (P, R, F1):
#   AB/AB (1, 1, 1) right; A/ABC (1, 1/3, 1/2); empty/CD (0, 0, 0); ABCDE/ACE (3/5, 1, 3/4).
PREDICTIONS = ["B", "C", "AB", "A", "", "ABCDE"]
REFERENCES = ["B", "B", "AB", "ABC", "CD", "ACE"]
EXPECTED = {
    "exact_match": 2 / 6,
    "exact_match_single": 1 / 2,
    "exact_match_multi": 1 / 4,
    "precision": (1 + 1 + 0 + 3 / 5) / 4,
    "recall": (1 + 1 / 3 + 0 + 1) / 4,
    "f1": (1 + 1 / 2 + 0 + 3 / 4) / 4,
    "mean_pred_size": (2 + 1 + 0 + 5) / 4,
    "n": 6,
    "n_single": 2,
    "n_multi": 4,
}


def test_score_hand_computed():
    assert score(PREDICTIONS, REFERENCES) == pytest.approx(EXPECTED)


def test_score_per_item_hand_computed():
    per_item = score(PREDICTIONS, REFERENCES, per_item=True)["per_item"]
    assert per_item["exact_match"] == [True, False, True, False, False, False]
    assert per_item["precision"] == pytest.approx([1, 0, 1, 1, 0, 3 / 5])
    assert per_item["recall"] == pytest.approx([1, 0, 1, 1 / 3, 0, 1])
    assert per_item["f1"] == pytest.approx([1, 0, 1, 1 / 2, 0, 3 / 4])
    assert per_item["pred_size"] == [1, 1, 2, 1, 0, 5]


def test_empty_precision_changes_only_precision_of_empty_predictions():
    results = score(PREDICTIONS, REFERENCES, empty_precision=1.0)
    assert results["precision"] == pytest.approx((1 + 1 + 1 + 3 / 5) / 4)
    assert results["recall"] == pytest.approx(EXPECTED["recall"])
    assert results["f1"] == pytest.approx(EXPECTED["f1"])
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="empty_precision"):
            score(PREDICTIONS, REFERENCES, empty_precision=bad)


def test_f1_is_a_mean_of_item_f1s_not_the_f1_of_means():
    # Table 5 reports the mean of per-item F1s, which is why its F1 sits below 2PR/(P+R) of its own P and R.
    results = score(PREDICTIONS, REFERENCES)
    p, r = results["precision"], results["recall"]
    assert results["f1"] == pytest.approx(0.5625)
    assert 2 * p * r / (p + r) == pytest.approx(0.6149, abs=1e-4)


# The paper's Table 5 (P, R, F1 in %): every row obeys the same inequality, a check on how it was averaged.
TABLE5 = {
    "Qwen2.5-14B-Inst.": (92.4, 90.4, 90.1),
    "Qwen2-7B-Inst.": (92.5, 86.9, 88.3),
    "Qwen3.5-9B": (85.3, 93.2, 87.7),
    "Qwen3.5-2B": (81.3, 42.2, 51.4),
    "Gemma-3-12B-It": (76.3, 83.4, 77.8),
    "OLMo-2-13B-Inst.": (74.2, 77.2, 73.6),
    "Gemma-3-270M-It": (69.0, 20.2, 30.7),
}


@pytest.mark.parametrize(("p", "r", "f1"), TABLE5.values(), ids=TABLE5.keys())
def test_table5_rows_are_means_of_item_f1s(p, r, f1):
    assert f1 <= 2 * p * r / (p + r)


def test_a_model_naming_one_right_option_has_high_precision_low_recall():
    # Gemma-3-270M's pattern in Table 5: |y^| below 1 on keys of ~3.5 letters.
    results = score(["B", "A", "", "C"], ["ABC", "ACDE", "BD", "CD"])
    assert results["exact_match_multi"] == 0.0
    assert results["precision"] == pytest.approx(3 / 4)
    assert results["recall"] == pytest.approx((1 / 3 + 1 / 4 + 0 + 1 / 2) / 4)
    assert results["mean_pred_size"] == 0.75


def test_answer_types_given_override_inference():
    # A one-letter key typed "multi" (it happens in some exam sources) is scored with the multi-answer items.
    results = score(["B", "BD"], ["B", "BD"], ["multi", "single"])
    assert (results["n_single"], results["n_multi"]) == (1, 1)
    assert results["mean_pred_size"] == 1.0
    with pytest.raises(ValueError, match="'single' or 'multi'"):
        score(["B"], ["B"], ["mcq"])
    with pytest.raises(ValueError, match="one type per item"):
        score(["B", "C"], ["B", "C"], ["single"])


def test_no_multi_answer_items_gives_nan():
    results = score(["B", "C"], ["B", "D"])
    assert results["exact_match_single"] == 0.5
    assert all(math.isnan(results[k]) for k in ("exact_match_multi", "precision", "recall", "f1", "mean_pred_size"))
    assert results["n_multi"] == 0


def test_score_errors_name_the_item():
    with pytest.raises(ValueError, match="differ in length: 2 predictions, 1 references"):
        score(["B", "C"], ["B"])
    with pytest.raises(ValueError, match=r"references\[2\]: reference 'F' has characters outside A-E"):
        score(["B", "C", "D"], ["B", "C", "F"])
    with pytest.raises(ValueError, match=r"references\[1\]: empty reference"):
        score(["B", "C"], ["B", ""])
    with pytest.raises(TypeError, match="unsupported prediction 3"):
        score(["B", 3], ["B", "C"])


def test_compute_matches_score_for_every_input_form(metric):
    preds = ["B", ["C"], ("A", "B"), "答案：A", np.array([], dtype=str), "ABCDE"]
    results = metric.compute(predictions=preds, references=[["B"], "B", "A,B", "A B C", "CD", "ＡＣＥ"])
    assert results == pytest.approx(EXPECTED)


def test_compute_passes_options(metric):
    results = metric.compute(
        predictions=["Answer: B", "", "BD"],
        references=["B", "CD", "BD"],
        answer_types=["single", "multi", "multi"],
        parser="strict",
        empty_precision=1.0,
        per_item=True,
    )
    assert results["exact_match_single"] == 1.0
    assert results["precision"] == 1.0
    assert results["per_item"]["pred_size"] == [1, 0, 2]


def test_add_and_add_batch_match_compute(metric):
    for pred, ref in zip(PREDICTIONS[:2], REFERENCES[:2]):
        metric.add(prediction=list(pred), reference=ref)
    metric.add_batch(predictions=PREDICTIONS[2:4], references=[list(r) for r in REFERENCES[2:4]])
    metric.add_batch(predictions=PREDICTIONS[4:], references=REFERENCES[4:])
    assert metric.compute() == pytest.approx(EXPECTED)


def test_compute_errors(metric):
    with pytest.raises(ValueError, match="differ in length"):
        metric.compute(predictions=["B", "C"], references=["B"])
    with pytest.raises(ValueError, match="outside A-E: 'F'"):
        metric.compute(predictions=["B"], references=["F"])
    with pytest.raises(ValueError, match="empty reference"):
        metric.compute(predictions=["B"], references=[[]])
    with pytest.raises(TypeError, match="unsupported prediction"):
        metric.compute(predictions=[1], references=["B"])
    with pytest.raises(TypeError, match="unsupported reference"):
        metric.compute(predictions=["B"], references=[None])


def test_metric_info(metric):
    info = metric.info
    assert "NFKC" in info.description
    assert "TCMQA" in info.citation
    assert set(info.features) == {"predictions", "references"}


def test_inputs_description_examples_run(metric):
    # pytest's --doctest-modules runs them too; this keeps them checked on the loaded metric's own text.
    test = doctest.DocTestParser().get_doctest(
        metric.info.inputs_description, {"TcmqaMetric": tcmqa_metric.TcmqaMetric}, "inputs_description", None, 0
    )
    runner = doctest.DocTestRunner()
    runner.run(test)
    assert runner.summarize(verbose=False) == (0, len(test.examples))
    assert len(test.examples) >= 5
