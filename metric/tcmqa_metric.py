"""TCMQA answer-set metric: the one home of the rules that turn a model's answer into a set of option
letters and score that set against the key (exact match, precision, recall, F1, predicted-set size).

The harness, the analyses, the dataset builder and the metric Space all import these rules from here;
nothing re-implements them. The module imports only evaluate, datasets, numpy and the standard library so
that it still loads when copied on its own (a metric Space, `evaluate.load(path)`).
"""

import re
import sys
import unicodedata

import numpy as np

LETTERS = "ABCDE"

_CITATION = """\
@misc{tcmqa,
  title  = {TCMQA: A 38K-Question Traditional Chinese Medicine Benchmark with a Licensed-Practitioner Reference},
  author = {TechTCM},
  year   = {2026},
  url    = {https://huggingface.co/datasets/TechTCM/TCMQA}
}
"""

_DESCRIPTION = """\
Scores answers to TCMQA's five-option (A-E) questions as sets of letters. A prediction may be a list of
letters, a string of letters ("BD", "B, D") or the model's raw text, which is read by default as: NFKC-normalise,
then keep every character in A-E, deduplicated and sorted (a departure from the paper, which scans the raw text:
parser="paper" gives its literal rule). Exact set match is the primary
metric, reported over all items and split into single- and multi-answer items; multi-answer items also get
per-item precision |pred & ref| / |pred|, recall |pred & ref| / |ref| and F1, averaged over items, and the
mean predicted-set size.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: one per item: a list of letters, a string of letters, or raw model text. A list is read as
        its items joined by commas, so ["B", "D"], "B,D" and "BD" are the same answer.
    references: one per item: the answer key as a list of letters or a string such as "BD", "B,D", "B D"
        or full-width "ＢＤ". A reference must be non-empty and use only A-E (else ValueError).
    answer_types (optional): "single" or "multi" per item; inferred from the reference size if omitted.
    parser (optional): "nfkc" (default) NFKC-normalises, then reads every A-E, so full-width "Ｂ" counts;
        "paper" is the paper's literal rule, every A-E of the raw text (full-width letters do not count);
        both read the "A" of "Answer". "strict" keeps only runs of A-E that stand apart from other Latin
        letters, after NFKC ("Answer: B" -> B).
    empty_precision (optional): precision of an empty prediction, 0.0 by default (its recall and F1 are 0);
        None leaves empty predictions out of the precision mean, as the paper's Table 5 reads.
    per_item (optional): if True, also return "per_item": a dict of lists over all items, exact_match,
        precision, recall, f1 and pred_size.
Returns:
    exact_match, exact_match_single, exact_match_multi: fraction of items whose predicted set equals the key,
        over all, single- and multi-answer items.
    precision, recall, f1: means of the per-item values over multi-answer items (as in the paper's Table 5,
        so f1 is a mean of per-item F1s, not the F1 of the mean precision and recall).
    mean_pred_size: mean number of letters predicted on multi-answer items.
    n, n_single, n_multi: item counts. A mean over no items is nan.
Examples:
    Load it with `evaluate.load("tcmqa_metric")` or a path to this file, or import the class:

    >>> from tcmqa_metric import TcmqaMetric
    >>> tcmqa = TcmqaMetric()
    >>> results = tcmqa.compute(
    ...     predictions=["答案：B", "B, D", ["A", "C"], "ＡＣＥ"],
    ...     references=["B", "BD", "ACE", ["A", "D"]],
    ... )
    >>> results["exact_match"], results["exact_match_single"], results["exact_match_multi"]
    (0.5, 1.0, 0.3333333333333333)
    >>> round(results["precision"], 4), round(results["recall"], 4), round(results["f1"], 4)
    (0.7778, 0.7222, 0.7333)
    >>> results["mean_pred_size"], results["n"], results["n_single"], results["n_multi"]
    (2.3333333333333335, 4, 1, 3)

    Every capital A-E counts, so "Answer: B" names A and B; the strict parser does not:

    >>> tcmqa.compute(predictions=["Answer: B"], references=["B"])["exact_match"]
    0.0
    >>> tcmqa.compute(predictions=["Answer: B"], references=["B"], parser="strict")["exact_match"]
    1.0
    >>> tcmqa.compute(predictions=["BD", "C"], references=["BCD", "C"], per_item=True)["per_item"]["f1"]
    [0.8, 1.0]

    The two departures from the paper's literal scoring, and the options that undo them:

    >>> tcmqa.compute(predictions=["ＢＤ"], references=["BD"])["exact_match"]
    1.0
    >>> tcmqa.compute(predictions=["ＢＤ"], references=["BD"], parser="paper")["exact_match"]
    0.0
    >>> tcmqa.compute(predictions=["无法确定", "BD"], references=["BD", "BCD"])["precision"]
    0.5
    >>> tcmqa.compute(predictions=["无法确定", "BD"], references=["BD", "BCD"], empty_precision=None)["precision"]
    1.0
"""

_LETTER_SET = frozenset(LETTERS)
_N_MASKS = 1 << len(LETTERS)
# Answer sets are 5-bit masks (A = bit 0 ... E = bit 4): scoring a million items is then table look-ups.
_LETTERS_OF = [[c for i, c in enumerate(LETTERS) if m >> i & 1] for m in range(_N_MASKS)]
_MASK_OF = {frozenset(letters): m for m, letters in enumerate(_LETTERS_OF)}
_SIZE = np.array([len(letters) for letters in _LETTERS_OF])
_STRICT_RUN = re.compile(r"(?<![A-Za-z])[A-E]+(?![A-Za-z])")
_REFERENCE_SEPARATORS = re.compile(r"[\s,;、]+")
_ANSWER_TYPES = ("single", "multi")


def _nfkc(text: str) -> str:
    # ASCII is already NFKC; skipping it saves most of the parsing time on letter strings.
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _nfkc_mask(text: str) -> int:
    # The hot path on raw text, so _nfkc is inlined.
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return _MASK_OF[_LETTER_SET.intersection(text)]


def _paper_mask(text: str) -> int:
    return _MASK_OF[_LETTER_SET.intersection(text)]


def _strict_mask(text: str) -> int:
    return _MASK_OF[frozenset("".join(_STRICT_RUN.findall(_nfkc(text))))]


_PARSERS = {"nfkc": _nfkc_mask, "paper": _paper_mask, "strict": _strict_mask}


def _reference_mask(text: str) -> int:
    letters = _REFERENCE_SEPARATORS.sub("", _nfkc(text))
    if not letters:
        raise ValueError(f"empty reference {text!r}: an answer key needs at least one letter A-E")
    outside = sorted(set(letters) - _LETTER_SET)
    if outside:
        raise ValueError(f"reference {text!r} has characters outside A-E: {''.join(outside)!r}")
    return _MASK_OF[frozenset(letters)]


def _as_text(value, role: str) -> str:
    """One prediction or reference as a string; a sequence of letters is joined with commas, which every
    rule reads exactly as the union of its items."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        try:
            return ",".join(value)
        except TypeError:
            pass  # an item that is not a string
    raise TypeError(
        f"unsupported {role} {value!r} of type {type(value).__name__}: expected a string or a list of letter strings"
    )


def _texts(values, role: str):
    if values is None:
        return None
    return [v if type(v) is str else _as_text(v, role) for v in values]


def _check_lengths(predictions, references) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references differ in length: {len(predictions)} predictions, {len(references)} references"
        )


def _check_parser(parser: str) -> None:
    if parser not in _PARSERS:
        raise ValueError(f"unknown parser {parser!r}: expected one of {sorted(_PARSERS)}")


def parse_text(text: str) -> list[str]:
    """The default reading of model text: NFKC-normalise, then every character in A-E, deduplicated and sorted.

    The paper's rule (Section 2.3) is the same scan without NFKC; normalising first is a departure that
    also counts full-width letters (``normalize_prediction(text, parser="paper")`` is the literal rule).
    Like the paper's rule it reads the "A" of "Answer".

    >>> parse_text("答案：ＢＤ")
    ['B', 'D']
    >>> parse_text("Answer: C")
    ['A', 'C']
    """
    return list(_LETTERS_OF[_nfkc_mask(_as_text(text, "text"))])


def parse_strict(text: str) -> list[str]:
    """A stricter reading: after NFKC, only runs of A-E that no other Latin letter touches count.

    It ignores capitals inside words ("Answer", "Because", "DEcoction") but still takes option letters that
    the model echoes with their text ("A. 黄芪 B. 党参" gives A and B). The paper's numbers do not use it.

    >>> parse_strict("Answer: C")
    ['C']
    >>> parse_strict("The answer is BD.")
    ['B', 'D']
    >>> parse_strict("答案：ＢＤ")
    ['B', 'D']
    """
    return list(_LETTERS_OF[_strict_mask(_as_text(text, "text"))])


def normalize_prediction(pred, parser: str = "nfkc") -> list[str]:
    """A prediction (list of letters, letter string or raw text) as a sorted list of letters.

    >>> normalize_prediction(["D", "B", "B"])
    ['B', 'D']
    >>> normalize_prediction("B, D")
    ['B', 'D']
    """
    _check_parser(parser)
    return list(_LETTERS_OF[_PARSERS[parser](_as_text(pred, "prediction"))])


def normalize_reference(ref) -> list[str]:
    """An answer key as a sorted list of letters, strictly: separators (spaces, commas, 、 and ;) are allowed,
    anything else outside A-E raises ValueError, never dropped, so a bad key cannot pass unnoticed.

    >>> normalize_reference("ＢＤ")
    ['B', 'D']
    >>> normalize_reference("B,F")
    Traceback (most recent call last):
    ...
    ValueError: reference 'B,F' has characters outside A-E: 'F'
    """
    return list(_LETTERS_OF[_reference_mask(_as_text(ref, "reference"))])


def _encode(values, to_mask, role: str) -> np.ndarray:
    """Masks for a column, parsing each distinct text once (answers repeat a lot)."""
    texts = _texts(values, role)
    masks = {}
    for text in dict.fromkeys(texts):
        try:
            masks[text] = to_mask(text)
        except ValueError as error:
            raise ValueError(f"{role}s[{texts.index(text)}]: {error}") from None
    return np.fromiter(map(masks.__getitem__, texts), dtype=np.intp, count=len(texts))


def _tables(empty_precision: float | None) -> tuple[np.ndarray, ...]:
    """Exact match, precision, recall and F1 for every (prediction mask, reference mask) pair."""
    pred = np.arange(_N_MASKS)[:, None]
    ref = np.arange(_N_MASKS)[None, :]
    overlap = _SIZE[pred & ref]
    pred_size = np.broadcast_to(_SIZE[pred], overlap.shape)
    ref_size = np.maximum(_SIZE[ref], 1)  # a reference is never empty; this only keeps unused cells finite
    precision = np.divide(
        overlap,
        pred_size,
        out=np.full(overlap.shape, np.nan if empty_precision is None else float(empty_precision)),
        where=pred_size > 0,
    )
    recall = overlap / ref_size
    total = precision + recall
    f1 = np.divide(2 * precision * recall, total, out=np.zeros(overlap.shape), where=total > 0)  # nan > 0 is False
    return pred == ref, precision, recall, f1


def _mean(values: np.ndarray) -> float:
    """Mean over the defined values (an empty prediction's precision is undefined with empty_precision=None)."""
    values = values[~np.isnan(values)] if values.dtype.kind == "f" else values
    return float(values.mean()) if values.size else float("nan")


def score(
    predictions,
    references,
    answer_types=None,
    *,
    parser: str = "nfkc",
    empty_precision: float | None = 0.0,
    per_item: bool = False,
) -> dict:
    """Score predictions against references; the fast path that `TcmqaMetric.compute` runs.

    Values are fractions in [0, 1]. See the metric's inputs description for the arguments and results.

    >>> score(["B", "AC"], ["B", "ACD"])["exact_match"]
    0.5
    """
    _check_parser(parser)
    if empty_precision is not None and not 0.0 <= empty_precision <= 1.0:
        raise ValueError(f"empty_precision must lie in [0, 1] or be None, got {empty_precision!r}")
    _check_lengths(predictions, references)
    pred = _encode(predictions, _PARSERS[parser], "prediction")
    ref = _encode(references, _reference_mask, "reference")
    if answer_types is None:
        multi = _SIZE[ref] > 1
    else:
        types = np.asarray(answer_types, dtype=object)
        if types.shape != (len(ref),):
            raise ValueError(f"answer_types must give one type per item ({len(ref)}), got shape {types.shape}")
        unknown = set(types.tolist()) - set(_ANSWER_TYPES)
        if unknown:
            raise ValueError(f"answer_types must be 'single' or 'multi', got {sorted(map(repr, unknown))}")
        multi = types == "multi"

    pair = pred * _N_MASKS + ref
    exact, precision, recall, f1 = (table.ravel()[pair] for table in _tables(empty_precision))
    pred_size = _SIZE[pred]
    results = {
        "exact_match": _mean(exact),
        "exact_match_single": _mean(exact[~multi]),
        "exact_match_multi": _mean(exact[multi]),
        "precision": _mean(precision[multi]),
        "recall": _mean(recall[multi]),
        "f1": _mean(f1[multi]),
        "mean_pred_size": _mean(pred_size[multi]),
        "n": len(ref),
        "n_single": int((~multi).sum()),
        "n_multi": int(multi.sum()),
    }
    if per_item:
        results["per_item"] = {
            "exact_match": exact.tolist(),
            "precision": precision.tolist(),
            "recall": recall.tolist(),
            "f1": f1.tolist(),
            "pred_size": pred_size.tolist(),
        }
    return results


def _metric_class() -> type:
    """Build the evaluate Metric class.

    ``import evaluate`` also imports transformers and torch when they are installed (about 10 s); the
    rules above need neither, so the dataset builder and the Space import them without paying for it.
    """
    import datasets
    import evaluate

    class TcmqaMetric(evaluate.Metric):
        """Exact set match and multi-answer precision, recall and F1 for TCMQA."""

        def _info(self) -> evaluate.MetricInfo:
            # Both columns are strings: a list of letters is joined with commas before it reaches Arrow, which is
            # lossless for every rule and much faster than nested lists.
            return evaluate.MetricInfo(
                description=_DESCRIPTION,
                citation=_CITATION,
                inputs_description=_KWARGS_DESCRIPTION,
                features=datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
                ),
                reference_urls=["https://huggingface.co/datasets/TechTCM/TCMQA"],
            )

        def add_batch(self, *, predictions=None, references=None, **kwargs):
            """Add a batch of predictions and references (lists of letters are stored as comma-joined text)."""
            batch = {"predictions": _texts(predictions, "prediction"), "references": _texts(references, "reference")}
            if kwargs or predictions is None or references is None:
                return super().add_batch(**batch, **kwargs)  # evaluate's own checks and messages
            _check_lengths(batch["predictions"], batch["references"])
            # Open the writer through evaluate, then write the texts as they are: they are strings already, and
            # datasets' per-item encoding of them would take longer than the scoring itself (~5 us an item).
            super().add_batch(predictions=[], references=[])
            self.writer.write_batch(batch)

        def add(self, *, prediction=None, reference=None, **kwargs):
            """Add one prediction and reference (a list of letters is stored as comma-joined text)."""
            super().add(
                prediction=None if prediction is None else _as_text(prediction, "prediction"),
                reference=None if reference is None else _as_text(reference, "reference"),
                **kwargs,
            )

        def _compute(
            self, predictions, references, answer_types=None, parser="nfkc", empty_precision=0.0, per_item=False
        ):
            return score(
                predictions, references, answer_types, parser=parser, empty_precision=empty_precision, per_item=per_item
            )

    return TcmqaMetric


def __getattr__(name: str):
    """``from tcmqa_metric import TcmqaMetric`` builds the class on first use (PEP 562)."""
    if name == "TcmqaMetric":
        globals()[name] = _metric_class()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if "evaluate" in sys.modules:  # under evaluate.load(), which looks for the class in this namespace
    TcmqaMetric = _metric_class()

__test__ = {"inputs_description": _KWARGS_DESCRIPTION}  # its examples are doctests
