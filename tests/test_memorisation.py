"""The option-order test can fail: a model made to memorise items is caught, and the same model is not
flagged on items it never saw, nor on items it saw only with their options in other orders.

A tiny random model (tcmqa.local_models.tiny_random: 2 layers, a byte-level BPE trained on the training
texts) is trained on the CPU on the text of real sample items, as the order test scores it (stem and
options, no instruction): ``MEMORISED`` items in their published order, ``SHUFFLED`` items in a fresh
random order at every step that is never the published one. It is then loaded in the transformers
engine and probed with the code ``tcmqa probe`` runs (``run_order_test``), 24 orders per item (chance
1/24). The unseen control uses more items than the others, so that a preference learned from the
published orders of other items (a convention of these exam papers) would show if the model had one.

Sizes, steps and seconds are printed (``pytest -s``) and the numbers go into docs/benchmarks.md.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from pathlib import Path

import pandas as pd
import pytest
from sources import SAMPLE_ITEMS

from tcmqa import prompts
from tcmqa.engines import load_engine
from tcmqa.ingest import InvalidRecord, clean_item
from tcmqa.local_models import tiny_random
from tcmqa.probes import order
from tcmqa.probes.run import run_order_test

MEMORISED, SHUFFLED, UNSEEN = 32, 32, 96
STEPS = 150
ORDERS = 23
MAX_CHARS = 120  # short items keep the training to seconds on any CPU


def _items(sample_dir: Path) -> list[dict]:
    """Short sample items without an order convention, in a seeded random order."""
    items = []
    for line in SAMPLE_ITEMS.read_text(encoding="utf-8").splitlines():
        try:
            item = clean_item(json.loads(line))
        except InvalidRecord:
            continue
        if not order.convention(item) and len(prompts.render_item(item)) <= MAX_CHARS:
            items.append(item)
    random.Random(0).shuffle(items)
    return items


def _train(dest: Path, memorised: list[dict], shuffled: list[dict]) -> tuple[float, float]:
    """Train until the published texts of ``memorised`` are memorised; return (final loss, seconds)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    tiny_random(dest, [prompts.render_item(item) for item in memorised + shuffled])
    tokenizer = AutoTokenizer.from_pretrained(dest)
    model = AutoModelForCausalLM.from_pretrained(dest, dtype=torch.float32)
    others = [p for p in itertools.permutations(range(5)) if p != tuple(range(5))]  # never the published order
    torch.manual_seed(0)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(STEPS):
        pick = random.Random(step)
        texts = [prompts.render_item(item) for item in memorised]
        texts += [prompts.render_item(order.reorder(item, pick.choice(others))) for item in shuffled]
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.save_pretrained(dest)
    return loss.item(), time.perf_counter() - start


def test_the_order_test_catches_memorisation_and_nothing_else(sample_dir, tmp_path):
    items = _items(sample_dir)
    memorised, shuffled = items[:MEMORISED], items[MEMORISED : MEMORISED + SHUFFLED]
    unseen = items[MEMORISED + SHUFFLED : MEMORISED + SHUFFLED + UNSEEN]
    loss, train_s = _train(tmp_path / "model", memorised, shuffled)
    assert loss < 0.3, f"the model did not memorise its training texts (loss {loss:.3f} after {STEPS} steps)"

    engine = load_engine("transformers", str(tmp_path / "model"), dtype="float32")
    facts = {"model": "memoriser", "revision": engine.revision, "probe_version": "test"}
    found = {}
    for name, group in (("memorised", memorised), ("unseen", unseen), ("shuffled", shuffled)):
        start = time.perf_counter()
        run_order_test(engine, [group], ORDERS, 0, tmp_path / name, facts)
        rows = pd.concat(pd.read_parquet(part) for part in sorted((tmp_path / name).glob("*.parquet")))
        found[name] = order.summarise(rows) | {"seconds": round(time.perf_counter() - start, 1)}
    print(f"\ntrained {MEMORISED}+{SHUFFLED} items, {STEPS} steps, loss {loss:.3f}, {train_s:.0f} s; {found}")

    assert found["memorised"]["n_order"] == MEMORISED
    assert found["memorised"]["order_p"] < 1e-3, found["memorised"]
    assert found["unseen"]["order_p"] > 0.05, found["unseen"]
    assert 35 < found["unseen"]["order_percentile"] < 65, found["unseen"]  # near 50: no preference
    assert found["shuffled"]["order_p"] > 0.05, found["shuffled"]


@pytest.mark.parametrize("first,n,chance", [(0, 10, 0.1), (3, 10, 0.1), (40, 40, 1 / 24), (7, 200, 1 / 24)])
def test_the_p_value_is_scipys_exact_one_sided_binomial_test_when_chances_are_equal(first, n, chance):
    from scipy import stats

    expected = stats.binomtest(first, n, chance, alternative="greater").pvalue
    assert order.poisson_binomial_p(first, [chance] * n) == pytest.approx(expected, rel=1e-9)
