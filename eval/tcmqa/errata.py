"""Errata as data: the adjudicated verdicts on suspect keys, and the builder's one rule for applying them.

An erratum is one item's verdict, with MMLU-Redux's categories (:data:`VERDICTS`), the key it was given
on (``old_key``), the key it should have (``new_key``, for a wrong key) or ``drop`` (the item cannot be
scored as written), the reviewers, the date decided and the corpus revision it was adjudicated on. The
``errata`` config holds them (``tcmqa build --errata FILE`` publishes it beside the corpus, so
``load_dataset(tree, "errata")`` reads them); the builder applies them to make the next corpus: a wrong
key is replaced, a dropped item leaves the corpus (its responses are dropped with it, named in the build
report), and every corpus row keeps the key as extracted in ``original_answer``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow.parquet as pq

from tcmqa_metric import LETTERS

# MMLU-Redux's categories: the key is right; a wrong key (the right letters in new_key); no option is
# right; several are (beyond the key); the question or options are unclear; the extraction is broken
VERDICTS = ("key_correct", "wrong_key", "no_correct_option", "several_correct", "unclear", "broken_extraction")
MIN_REVIEWERS = 2


def _letters(value: object, what: str, item: str) -> list[str]:
    letters = list(value) if isinstance(value, (list, tuple)) else list(str(value or ""))
    if any(c not in LETTERS for c in letters) or len(set(letters)) != len(letters):
        raise ValueError(f"erratum for item {item}: {what} must be distinct letters of {LETTERS}, not {value!r}")
    return sorted(letters)


def check_erratum(row: dict) -> dict:
    """One erratum as the ``errata`` config stores it, or ValueError saying what to fix."""
    item = str(row.get("item_id") or "")
    if not item:
        raise ValueError(f"an erratum needs the item_id it is about: {row!r}")
    verdict = row.get("verdict")
    if verdict not in VERDICTS:
        raise ValueError(f"erratum for item {item}: verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    old_key = _letters(row.get("old_key"), "old_key", item)
    new_key = _letters(row.get("new_key"), "new_key", item)
    drop = bool(row.get("drop"))
    if not old_key:
        raise ValueError(f"erratum for item {item}: old_key (the key it was adjudicated on) is required")
    if verdict == "key_correct" and (new_key or drop):
        raise ValueError(f"erratum for item {item}: a key found correct takes no new_key and no drop")
    if verdict == "wrong_key" and not drop and (not new_key or new_key == old_key):
        raise ValueError(f"erratum for item {item}: a wrong key needs the right letters in new_key (or drop)")
    if verdict not in ("key_correct", "wrong_key") and not drop:
        raise ValueError(f"erratum for item {item}: an item judged {verdict} cannot be scored as written: set drop")
    if drop and new_key:
        raise ValueError(f"erratum for item {item}: give new_key or drop, not both")
    reviewers = [str(r) for r in row.get("reviewers") or []]
    if len(set(reviewers)) < MIN_REVIEWERS:
        raise ValueError(f"erratum for item {item}: at least {MIN_REVIEWERS} distinct reviewers, not {reviewers}")
    revision = str(row.get("corpus_revision") or "")
    if not revision:
        raise ValueError(f"erratum for item {item}: corpus_revision (the revision it was adjudicated on) is required")
    return {
        "item_id": item,
        "verdict": verdict,
        "old_key": old_key,
        "new_key": new_key,
        "drop": drop,
        "reviewers": reviewers,
        "decided_date": str(row.get("decided_date") or "") or None,
        "corpus_revision": revision,
        "comment": str(row.get("comment") or "") or None,
    }


def read_errata(path: str | os.PathLike) -> list[dict]:
    """The errata of a JSONL file or a Parquet file (or folder of them), each checked; one item twice is
    refused."""
    path = Path(path)
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        rows = pq.read_table(sorted(path.glob("*.parquet")) if path.is_dir() else path).to_pylist()
    errata = [check_erratum(row) for row in rows]
    seen: set[str] = set()
    for erratum in errata:
        if erratum["item_id"] in seen:
            raise ValueError(f"two errata for item {erratum['item_id']}: keep the latest verdict only")
        seen.add(erratum["item_id"])
    return errata


def data_errata(data: str | os.PathLike) -> list[dict]:
    """The errata a built tree (or Hub dataset) publishes as its ``errata`` config, each checked; none when it
    has no such config (a corpus never corrected)."""
    from tcmqa.data import has_config
    from tcmqa.study import read_config

    if not has_config(str(data), "errata"):
        return []
    return [check_erratum(row) for row in read_config(data, "errata").to_pylist()]


def apply_errata(corpus: list[dict], errata: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    """(the corrected corpus, the dropped items' errata). Each erratum must name a corpus item whose key is
    its ``old_key`` (else it was adjudicated on another revision: ValueError naming the item)."""
    by_id = {item["id"]: item for item in corpus}
    dropped, drop_ids = [], set()
    for erratum in errata:
        item = by_id.get(erratum["item_id"])
        if item is None:
            raise ValueError(f"erratum for item {erratum['item_id']}: no such item in the corpus")
        if list(item["answer"]) != erratum["old_key"]:
            raise ValueError(
                f"erratum for item {erratum['item_id']}: adjudicated on key {''.join(erratum['old_key'])} but the "
                f"corpus has {''.join(item['answer'])}: it was made on another revision ({erratum['corpus_revision']})"
            )
        if erratum["drop"]:
            dropped.append(erratum)
            drop_ids.add(erratum["item_id"])
        elif erratum["verdict"] == "wrong_key":
            item["answer"] = list(erratum["new_key"])
            item["answer_type"] = "multi" if len(item["answer"]) > 1 else "single"
    return [item for item in corpus if item["id"] not in drop_ids], dropped
