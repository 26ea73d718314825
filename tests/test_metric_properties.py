"""Properties of the answer-set rules (hypothesis) and agreement with scikit-learn's sample-averaged scores."""

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, precision_recall_fscore_support

from tcmqa_metric import LETTERS, normalize_prediction, parse_strict, parse_text, score

answer_sets = st.lists(st.sampled_from(LETTERS), unique=True)
keys = st.lists(st.sampled_from(LETTERS), min_size=1, unique=True)
items = st.lists(st.tuples(answer_sets, keys), min_size=1, max_size=30)
relaxed = settings(deadline=None)  # the machine is shared: a slow example is not a failure


@relaxed
@given(st.text())
def test_any_text_parses_to_a_sorted_subset_of_the_letters(text):
    for parse in (parse_text, parse_strict):
        letters = parse(text)
        assert letters == sorted(set(letters))
        assert set(letters) <= set(LETTERS)


@relaxed
@given(st.text())
def test_parse_text_is_nfkc_then_every_letter(text):
    assert parse_text(text) == sorted({c for c in unicodedata.normalize("NFKC", text) if c in LETTERS})


@relaxed
@given(st.text())
def test_strict_never_finds_more_than_the_papers_rule(text):
    assert set(parse_strict(text)) <= set(parse_text(text))


@relaxed
@given(answer_sets)
def test_list_string_and_joined_forms_agree(letters):
    expected = sorted(letters)
    assert normalize_prediction(letters) == expected
    assert normalize_prediction("".join(reversed(letters))) == expected
    assert normalize_prediction(", ".join(letters)) == expected


@relaxed
@given(items, st.floats(0, 1))
def test_exact_match_and_bounds(pairs, empty_precision):
    preds, refs = map(list, zip(*pairs))
    results = score(preds, refs, empty_precision=empty_precision, per_item=True)
    per_item = results["per_item"]
    assert per_item["exact_match"] == [set(p) == set(r) for p, r in pairs]
    for name in ("precision", "recall", "f1"):
        assert all(0.0 <= v <= 1.0 for v in per_item[name])
    assert results["n_single"] + results["n_multi"] == results["n"] == len(pairs)
    if results["n_multi"]:
        p, r, f1 = results["precision"], results["recall"], results["f1"]
        assert 0.0 <= f1 <= (2 * p * r / (p + r) if p + r else 0.0) + 1e-12  # Jensen: F1 is concave


def _indicators(sets: list[list[str]]) -> np.ndarray:
    return np.array([[letter in s for letter in LETTERS] for s in sets], dtype=int)


@pytest.mark.parametrize("empty_precision", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_sklearn_samples_average(seed, empty_precision):
    rng = np.random.default_rng(seed)
    n = 2000
    truth = rng.random((n, 5)) < 0.4
    truth[np.arange(n), rng.integers(0, 5, n)] = True  # keys are never empty
    pred = rng.random((n, 5)) < rng.choice([0.1, 0.4, 0.8], size=(n, 1))  # many empty predictions at 0.1
    to_sets = lambda m: [[c for c, on in zip(LETTERS, row) if on] for row in m]  # noqa: E731
    preds, refs = to_sets(pred), to_sets(truth)
    assert any(not p for p in preds)

    results = score(preds, refs, ["multi"] * n, empty_precision=empty_precision)  # average over every item
    p, r, f1, _ = precision_recall_fscore_support(
        _indicators(refs), _indicators(preds), average="samples", zero_division=empty_precision
    )
    assert results["precision"] == pytest.approx(p, abs=1e-12)
    assert results["recall"] == pytest.approx(r, abs=1e-12)
    assert results["f1"] == pytest.approx(f1, abs=1e-12)
    assert results["exact_match"] == pytest.approx(accuracy_score(_indicators(refs), _indicators(preds)))
