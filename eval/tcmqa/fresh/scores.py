"""The fresh columns of a results row: a model's accuracy on the hidden pool, beside its public accuracy.

Computed where the results row is (:func:`tcmqa.results.results_row`), from the pool's output rows (the
run folder's hidden part) and the pool the worker handed the run (:class:`tcmqa.fresh.hidden.HiddenPool`). The
row carries numbers only: no item of the pool, no output of one.

- Fresh (its 95% bootstrap interval, n): exact match over the pool items evaluated.
- Public − Fresh: Full minus Fresh, points.
- Gap vs human: :func:`tcmqa.fresh.gap.fresh_gap` over the subset items with a practitioners' reference
  and the pool items with a blind-answer reference (its interval; marked where the interval lies above 0).
- Human fresh: the practitioners' majority of blind answers correct on those pool items.
- Fresh after release: Fresh on the pool items released after the model's release date.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd

from tcmqa.fresh.gap import fresh_gap
from tcmqa.fresh.hidden import HiddenPool

# results fields this module fills (tcmqa.schema.RESULT_COLUMNS declares them); null on a row without a pool
FRESH_COLUMNS = (
    "fresh",
    "fresh_ci_low",
    "fresh_ci_high",
    "n_fresh",
    "pool_version",
    "public_minus_fresh",
    "fresh_gap",
    "fresh_gap_low",
    "fresh_gap_high",
    "fresh_gap_marked",
    "human_fresh",
    "fresh_after_release",
    "n_fresh_after_release",
    "model_released",
)


def release_date(text: str | None) -> str | None:
    """An ISO date (YYYY-MM-DD) from a date or a date-time; None for none. A malformed one is refused."""
    if text is None or not str(text).strip():
        return None
    value = str(text).strip()
    try:
        return dt.date.fromisoformat(value[:10]).isoformat()
    except ValueError:
        raise ValueError(f"a release date is YYYY-MM-DD (or an ISO date-time), not {value[:40]!r}") from None


def fresh_columns(
    pool: HiddenPool, pool_outputs: pd.DataFrame, public: pd.DataFrame, on_subset: pd.DataFrame, released: str | None
) -> dict[str, Any]:
    """The fresh fields of a row. ``pool_outputs``: the pool's output rows; ``public``: the public ones;
    ``on_subset``: the public rows on subset items with the practitioners' ``majority_correct``."""
    from tcmqa.results import interval  # the row's module; imported here, it imports this one

    if sorted(pool_outputs["item_id"]) != sorted(item["id"] for item in pool.items):
        raise RuntimeError("the pool's output rows are not one per pool item; rerun into an empty --out")
    correct = pool_outputs["correct"].astype(bool)
    fresh = 100 * float(correct.mean())
    low, high = interval(correct)
    reference = pool_outputs["item_id"].map(pool.reference)
    referenced = reference.notna()
    gap = None
    if referenced.sum() > 1 and len(on_subset) > 1:
        gap = fresh_gap(
            on_subset["correct"].to_numpy(dtype=int),
            on_subset["majority_correct"].to_numpy(dtype=int),
            correct[referenced].to_numpy(dtype=int),
            reference[referenced].to_numpy(dtype=int),
        )
    released = release_date(released)
    after = pd.Series(False, index=pool_outputs.index)
    if released is not None:
        dates = {item["id"]: release_date(item["release_date"]) for item in pool.items}
        after = pool_outputs["item_id"].map(dates) > released
    return {
        "fresh": fresh,
        "fresh_ci_low": low,
        "fresh_ci_high": high,
        "n_fresh": len(pool_outputs),
        "pool_version": pool.version,
        "public_minus_fresh": 100 * float(public["correct"].mean()) - fresh,
        "fresh_gap": None if gap is None else gap.difference,
        "fresh_gap_low": None if gap is None else gap.low,
        "fresh_gap_high": None if gap is None else gap.high,
        "fresh_gap_marked": None if gap is None else gap.marked,
        "human_fresh": 100 * float(reference[referenced].astype(bool).mean()) if referenced.any() else None,
        "fresh_after_release": 100 * float(correct[after].mean()) if after.any() else None,
        "n_fresh_after_release": int(after.sum()) if released is not None else None,
        "model_released": released,
    }
