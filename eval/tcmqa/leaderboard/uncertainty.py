"""How sure the board is of its ranking: interval text, and whether a row is separated from the next by Full.

**Intervals.** A results row carries 95% percentile bootstrap intervals of Full and Subset
(``tcmqa.results.interval``): the items are resampled, so an interval says how far the accuracy
would move on another draw of items like these. Decoding is greedy, so the model's own sampling is
not in it; nor is another prompt, another protocol or another corpus.

**Separation mark.** Two overlapping intervals do not say two models are tied: both models answered
the same items, and the items' difficulty is shared. The mark is a paired test on those items: the
exact McNemar test (:func:`tcmqa.stats.mcnemar`) on the two models' per-item correctness over their
common items. Its null: the two models have the same accuracy on these items, so each item that one
gets right and the other wrong (a discordant item) is equally likely to favour either. A row is
marked "≈ <model>" when p >= 0.05 against <model>, the next better comparable evaluated row by Full, and
"≠ <model>" when p < 0.05. The mark names that row because the board can be sorted by another column or
filtered: the row shown above is then not the one tested.

What the mark cannot say: "≈" is not evidence that the models are equal (a few hundred discordant
items may not detect a difference of a point); no "≈" does not say the difference matters, nor that
it holds on other items, prompts or data. Only adjacent rows are tested, at 5% each, with no
correction for the many pairs on a board: two rows far apart are not compared, and on a long board
some pairs next to each other by Full are separated by chance. Rows without recorded outputs (imported, reported, the
practitioners) are not tested.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import pandas as pd

from tcmqa.stats import mcnemar

ALPHA = 0.05  # a row is "≈" (not separated from the next better row by Full) when the paired test's p >= ALPHA
SIMILAR, SEPARATED = "≈", "≠"
Key = tuple[str, str]  # (model, revision): two revisions of one model are two rows with their own outputs
Correctness = Mapping[Key, pd.Series]  # per-item correctness (bool), indexed by item_id


def key(model: Any, revision: Any) -> Key:
    """The correctness key of a results row or an outputs row; no revision recorded is ''."""
    return str(model), "" if revision is None or pd.isna(revision) else str(revision)


def interval_text(low: Any, high: Any) -> str:
    """'61.2–63.0' (percent, one decimal), or '' when the row has no interval."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return ""
    return f"{float(low):.1f}–{float(high):.1f}"


def p_text(p: float) -> str:
    """A p-value in two significant digits: 0.41, 0.003, 1.2e-09 (never rounded to 0)."""
    return f"{p:.2g}"


def p_value(below: pd.Series, above: pd.Series) -> float | None:
    """The paired test's p on the items both rows answered; None with no common item (not tested)."""
    if below.index.equals(above.index):  # the usual case, two full runs: no intersection to take
        pair = below.to_numpy(), above.to_numpy()
    else:
        common = below.index.intersection(above.index)
        pair = below[common].to_numpy(), above[common].to_numpy()
    return mcnemar(*pair).p_value if len(pair[0]) else None


def mark(p: float | None, against: str) -> str:
    """'≈ org/a (p=0.41)' when the paired test does not separate the row from ``against``, else
    '≠ org/a (p=0.003)'; '' when not tested."""
    if p is None:
        return ""
    return f"{SIMILAR if p >= ALPHA else SEPARATED} {against} (p={p_text(p)})"


def separation_marks(
    rows: Sequence[Mapping[str, Any]],
    correctness: Correctness,
    cache: dict[tuple[Key, Key], float | None] | None = None,
) -> list[str]:
    """Each row's mark against the next better row by Full, named (``rows``: the comparable evaluated rows).

    The name is the model's, with its revision's first 7 characters where two rows share a model. A row
    without Full, or without outputs on either side of a pair, gets ''. ``cache``: the p-values of pairs
    tested before (a pair's outputs do not change; its owner clears it when they do), so a refresh tests only
    the pairs a new row made.
    """
    ranked = sorted((i for i, r in enumerate(rows) if pd.notna(r.get("full"))), key=lambda i: -float(rows[i]["full"]))
    shared = {m for m, n in Counter(str(rows[i]["model"]) for i in ranked).items() if n > 1}
    marks = [""] * len(rows)
    for above, below in pairwise(ranked):
        pair = (
            key(rows[above]["model"], rows[above].get("revision")),
            key(rows[below]["model"], rows[below].get("revision")),
        )
        if cache is not None and pair in cache:
            p = cache[pair]
        else:
            upper, lower = correctness.get(pair[0]), correctness.get(pair[1])
            p = p_value(lower, upper) if upper is not None and lower is not None else None
            if cache is not None:
                cache[pair] = p
        name = pair[0][0] + (f"@{pair[0][1][:7]}" if pair[0][0] in shared and pair[0][1] else "")
        marks[below] = mark(p, name)
    return marks
