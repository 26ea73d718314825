"""The option-order test's null: a model with a habit about option orders, and no memory of the items,
is not flagged. Planted negatives over the real sample's items: scorers whose log-likelihood of an
order is a surface preference plus noise, never a memory of the published order.

Each scorer is run as ``tcmqa probe`` would run a model: the same sample of items (``sample_items``), the
same orders compared (``convention``, ``other_orders`` at the CPU's default K), and the same summary
(``summarise``); only the engine is replaced by the scorer, vectorised over items and seeds so that the
20 seeds x 1,000 items of each scorer take well under a second. The memoriser that must still be caught
is the trained model in test_memorisation.py.
"""

from __future__ import annotations

import itertools
import json
import unicodedata
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pytest
from sources import SAMPLE_ITEMS

from tcmqa.ingest import InvalidRecord, clean_item
from tcmqa.probes import order
from tcmqa_metric import LETTERS

SEEDS = 20
ITEMS = 1000
MOST_FLAGGED = 3  # of 20 seeds at p < 0.05: a calibrated test is flagged in about 1
# the examples of sequences a model can prefer in their canonical order, matched at an option's start
SEQUENCES = ("木火土金水", "肝心脾肺肾", "轻中重", "上中下", "寒热温凉")

Texts = Sequence[str]


def short_first(texts: Texts) -> float:
    """Pairs of options shorter before longer minus pairs longer before shorter (-10 to 10)."""
    lengths = np.array([len(text) for text in texts])
    pairs = np.sign(lengths[None, :] - lengths[:, None])
    return float(np.triu(pairs, 1).sum())


def canonical_first(texts: Texts) -> float:
    """Pairs of options from one of ``SEQUENCES`` in its order minus pairs against it."""
    score = 0.0
    for sequence in SEQUENCES:
        places = [sequence.index(t[0]) for t in (unicodedata.normalize("NFKC", x).strip() for x in texts)
                  if t and t[0] in sequence]  # fmt: skip
        score += sum(np.sign(b - a) for i, a in enumerate(places) for b in places[i + 1 :])
    return score


def similar_adjacent(texts: Texts) -> float:
    """Runs of two characters each option shares with the next (exam papers put similar options together)."""
    runs = [{text[k : k + 2] for k in range(len(text) - 1)} for text in texts]
    return float(sum(len(a & b) for a, b in itertools.pairwise(runs)))


@pytest.fixture(scope="module")
def compared() -> tuple[list[dict], list[str], list[list[tuple[int, ...]]], list[np.ndarray]]:
    """The sample's items, why each is left out, the orders each is compared under (the published one
    first) and, per seed, the indices of the items ``tcmqa probe`` samples."""
    if not SAMPLE_ITEMS.is_file():
        pytest.skip(f"the real TCMQA platform sample is not at {SAMPLE_ITEMS.parent}")
    items = []
    for line in SAMPLE_ITEMS.read_text(encoding="utf-8").splitlines():
        try:
            items.append(clean_item(json.loads(line)))
        except InvalidRecord:
            continue
    reasons = [order.convention(item) for item in items]
    orders = [[] if reason else [tuple(range(len(LETTERS))), *order.other_orders(item, order.ORDERS_CPU)]
              for item, reason in zip(items, reasons)]  # fmt: skip
    index = {item["id"]: k for k, item in enumerate(items)}
    samples = [
        np.array([index[item["id"]] for item in order.sample_items(items, ITEMS, seed)]) for seed in range(SEEDS)
    ]
    return items, reasons, orders, samples


def habit(items: list[dict], orders: list[list[tuple[int, ...]]], feature: Callable[[Texts], float]) -> np.ndarray:
    """``feature`` of every order compared (items x orders; NaN past an item's last order)."""
    found = np.full((len(items), max(map(len, orders))), np.nan)
    for k, (item, compared) in enumerate(zip(items, orders, strict=True)):
        options = [item["options"][letter] for letter in LETTERS]
        found[k, : len(compared)] = [feature([options[j] for j in o]) for o in compared]
    return found


def p_values(reasons: list[str], features: np.ndarray, samples: list[np.ndarray], strength: float) -> list[float]:
    """The order test's p-value on each seed's sample for a scorer giving each order
    ``strength * feature + N(0, 1)``."""
    valid = ~np.isnan(features)
    found = []
    for seed, chosen in enumerate(samples):
        scores = strength * features[chosen] + np.random.default_rng(seed).standard_normal(
            (len(chosen), features.shape[1])
        )
        above = ((scores[:, 1:] > scores[:, :1]) & valid[chosen, 1:]).sum(axis=1)
        n_orders = valid[chosen].sum(axis=1)
        tested = n_orders > 0
        rows = pd.DataFrame(
            {
                "convention": [reasons[k] for k in chosen],
                "n_orders": np.where(tested, n_orders, np.nan),
                "order_rank": np.where(tested, 1 + above, np.nan),
                "order_percentile": np.where(
                    tested, 100 * (n_orders - 1 - above) / np.maximum(n_orders - 1, 1), np.nan
                ),
            }
        )
        found.append(order.summarise(rows)["order_p"])
    return found


@pytest.mark.parametrize(
    "feature,strength",
    [(short_first, 0.2), (short_first, 0.4), (canonical_first, 1.0), (similar_adjacent, 1.0)],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_order_convention_a_habit_without_memory_is_not_flagged(compared, feature, strength):
    items, reasons, orders, samples = compared
    features = habit(items, orders, feature)
    found = p_values(reasons, features, samples, strength)
    flagged = sum(p < 0.05 for p in found)
    print(
        f"\n{feature.__name__} x {strength}: flagged in {flagged} of {SEEDS}; p =", ", ".join(f"{p:.2g}" for p in found)
    )
    assert flagged <= MOST_FLAGGED, found
    # why: every order an item is compared under has the same habit score, so only noise (or memory) ranks them
    spread = np.array(
        [np.ptp(row[~np.isnan(row)]) if len(compared) else 0.0 for row, compared in zip(features, orders)]
    )
    assert (spread == 0).all(), [items[k]["options"] for k in np.flatnonzero(spread > 0)[:3]]
