"""Fresh items evaluated: the hidden pool after the public items in one engine load, its columns in the
results row, nothing of it published, and back-fills when the pool grows (tiny model, demo tree)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tcmqa import harness
from tcmqa.data import load_config
from tcmqa.fresh.hidden import HIDDEN_DIR, read_pool, write_pool
from tcmqa.harness import EvalConfig
from tcmqa.outputs import read_outputs

pytest.importorskip("transformers")

POOL_VERSION = "pool-" + "ab" * 30


def pool_items(demo_tree: Path, n: int = 6) -> list[dict]:
    """Pool items written for the test: demo items' characters (the tiny tokenizer covers them) in new
    stems, new ids, with release dates either side of 2026-06-01."""
    corpus = [item for item in load_config(demo_tree, "corpus").to_list() if not item["flagged"]]
    items = []
    for k, item in enumerate(corpus[:n]):
        stem = "".join(reversed(item["question"])) + f"（新{k}）"
        released = "2026-03-01" if k % 2 else "2026-09-01"
        items.append({**item, "id": f"fresh-{k:04d}", "question": stem, "source": "fresh", "release_date": released})
    return items


def reference(items: list[dict]) -> dict[str, bool]:
    return {item["id"]: k % 3 != 0 for k, item in enumerate(items)}


def test_fresh_pool_is_evaluated_after_the_public_items(tiny_eval, tiny_engine, demo_tree, tmp_path, monkeypatch):
    items = pool_items(demo_tree)
    path = write_pool(tmp_path / "run", POOL_VERSION, items, reference(items))
    assert read_pool(path).items == items
    seen: list[str] = []
    generate = harness.generate_parts

    def spy(engine, chunks, out, name, watch):
        seen.extend(item["id"] for chunk in chunks for item in chunk)
        return generate(engine, chunks, out, name, watch)

    monkeypatch.setattr(harness, "generate_parts", spy)
    config = EvalConfig(**{**tiny_eval, "out": tmp_path / "run", "pool": path, "released": "2026-06-01"})
    report = harness.run(config, engine=tiny_engine)
    n_public = report.results["n"]
    assert seen[n_public:] == [item["id"] for item in items] and not seen[0].startswith("fresh-")
    public = read_outputs(report.out)
    assert not public["item_id"].str.startswith("fresh-").any()  # the public parts hold no pool item
    hidden = read_outputs(report.out / HIDDEN_DIR / POOL_VERSION[:16])
    assert hidden["item_id"].tolist() == [item["id"] for item in items]
    row = json.loads((report.out / "results.json").read_text())
    assert row["n_fresh"] == len(items) and row["pool_version"] == POOL_VERSION
    assert row["fresh"] == pytest.approx(100 * hidden["correct"].mean())
    assert row["public_minus_fresh"] == pytest.approx(row["full"] - row["fresh"])
    assert row["fresh_ci_low"] <= row["fresh"] <= row["fresh_ci_high"]
    after = hidden[hidden["item_id"].isin([i["id"] for i in items if i["release_date"] > "2026-06-01"])]
    assert row["n_fresh_after_release"] == 3
    assert row["fresh_after_release"] == pytest.approx(100 * after["correct"].mean())
    assert row["human_fresh"] == pytest.approx(100 * 4 / 6) and row["model_released"] == "2026-06-01"
    assert row["fresh_gap"] is not None and isinstance(row["fresh_gap_marked"], bool)
