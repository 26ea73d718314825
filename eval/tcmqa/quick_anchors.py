"""The anchor set a quick job evaluates, and the estimate of Full it turns the job's answers into.

The anchors are chosen from the board's models the tinyBenchmarks way (:mod:`tcmqa.quick`): a 2PL fit
(:mod:`tcmqa.irt`) over the per-item correctness of the board's comparable rows (the served data, the
protocol, full coverage: :func:`tcmqa.leaderboard.board.comparison`), at most :data:`MAX_MODELS` of them, the
latest; the estimate is the anchor (stratified) estimator, the one docs/benchmarks.md measured closest ("The
quick estimate"). Its error is measured on that same board, not assumed: every fitted model left out in turn
(:func:`tcmqa.quick.leave_one_model_out`), and the set carries its mean absolute, root mean square and
largest error in points of Full.

With fewer than :data:`MIN_MODELS` comparable models there is nothing to fit: the set is the fixed default,
the first items of the served corpus by a hash of their ids (the same items on every board of that data),
equally weighted; its error cannot be measured, and what is stated is the binomial standard error of the
estimate itself (``basis`` says which).

An anchor set is chosen once per board state (the data, the protocol, the fitted runs, the number of
anchors: :func:`board_key`) and stored under its version (:meth:`tcmqa.store.Store.save_anchor_set`): every
estimate names the version it used, and a job on an unchanged board reuses the set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tcmqa.store import Store

if TYPE_CHECKING:  # the fit (scikit-learn, the study loader) is imported by the worker's quick jobs only
    from tcmqa.irt import Outcomes

log = logging.getLogger(__name__)

N_QUICK = 200  # anchors of a quick job (docs/benchmarks.md: the anchor estimator's error falls to ~2-3 points)
MIN_MODELS = 5  # fewer comparable models on the board: the default anchor set, no fit
MAX_MODELS = 40  # the latest comparable models fitted: each one left out is a refit
FIT, DEFAULT = "fit", "default"


@dataclasses.dataclass(frozen=True)
class AnchorSet:
    """Anchor items with their weights (summing to 1), where they came from and their measured error."""

    version: str
    item_ids: tuple[str, ...]
    weights: tuple[float, ...]
    basis: str  # FIT (chosen from the board's models) or DEFAULT (too few models: the fixed set)
    models: tuple[str, ...]  # the board's models fitted (and left out in turn)
    error: Mapping[str, float]  # mae, rmse, max: points of Full, leave one model out; empty for DEFAULT
    data_fingerprint: str
    protocol: str
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "error": dict(self.error)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnchorSet:
        tuples = {k: tuple(data[k]) for k in ("item_ids", "weights", "models")}
        return cls(**{**data, **tuples, "error": dict(data["error"])})


def _version(item_ids: list[str], weights: list[float]) -> str:
    text = json.dumps([item_ids, [round(w, 9) for w in weights]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def board_key(fingerprint: str, protocol: str, runs: list[str], n_anchors: int) -> str:
    """What an anchor set is chosen from: the data, the protocol, the fitted runs and the number of anchors."""
    return hashlib.sha256(json.dumps([fingerprint, protocol, sorted(runs), n_anchors]).encode()).hexdigest()[:24]


def board_outcomes(store: Store, item_ids: list[str], fingerprint: str, protocol: str) -> tuple[Outcomes, list[str]]:
    """The outcome matrix (``item_ids`` x models, NaN where a run did not answer) of the board's latest
    :data:`MAX_MODELS` comparable rows that have per-item outcomes, and their runs."""
    from tcmqa.irt import Outcomes
    from tcmqa.leaderboard import board, outcomes  # the board's own rules: which rows compare, which run a row reads

    reader = outcomes.Outcomes(store)
    reader.refresh()
    rows = [r for r in store.results() if board.comparison(r, fingerprint, protocol) == board.COMPARABLE]
    latest: dict[str, tuple[Any, str]] = {}
    for row in rows:  # one run per model: its latest comparable row's
        run = reader.run_of(row.get("model"), row.get("revision"))
        if run is not None:
            latest[str(row["model"])] = (str(row.get("date") or ""), run)
    chosen = sorted(latest.items(), key=lambda kv: kv[1])[-MAX_MODELS:]
    columns = [reader.number.get(item, -1) for item in item_ids]
    known = np.array(columns) >= 0
    y = np.full((len(item_ids), len(chosen)), np.nan, dtype=np.float32)
    for j, (_, (_, run)) in enumerate(chosen):
        i = reader.row[run]
        cells = np.array(columns)[known]
        y[known, j] = np.where(reader.present[i, cells], reader.correct[i, cells], np.nan)
    names = pd.DataFrame({"name": [model for model, _ in chosen], "kind": "model"})
    return Outcomes(y, np.asarray(item_ids), names), [run for _, (_, run) in chosen]


def default_anchors(item_ids: list[str], n_anchors: int, fingerprint: str, protocol: str) -> AnchorSet:
    """The fixed default set: the ``n_anchors`` items first by the hash of their id, equally weighted."""
    chosen = sorted(item_ids, key=lambda item: hashlib.sha256(item.encode()).hexdigest())[:n_anchors]
    weights = [1 / len(chosen)] * len(chosen)
    return AnchorSet(
        _version(chosen, weights), tuple(chosen), tuple(weights), DEFAULT, (), {}, fingerprint, protocol, time.time()
    )


def fitted_anchors(outcome: Outcomes, n_anchors: int, fingerprint: str, protocol: str) -> AnchorSet:
    """Anchors chosen from the 2PL fit of ``outcome`` (the board's models), with their leave-one-model-out error."""
    from tcmqa import irt, quick

    fit = irt.fit_2pl(outcome.y)
    anchors = quick.choose_anchors(fit, n_anchors)
    loo = quick.leave_one_model_out(outcome, fit, n_anchors)
    summary = quick.error_summary(loo).set_index("estimator").loc["anchor"]
    chosen = [str(outcome.item_ids[i]) for i in anchors.rows]
    weights = [float(w) for w in anchors.weights]
    error = {k: round(float(summary[k]), 3) for k in ("mae", "rmse", "max")}
    models = tuple(str(m) for m in outcome.respondents["name"])
    version = _version(chosen, weights)
    return AnchorSet(version, tuple(chosen), tuple(weights), FIT, models, error, fingerprint, protocol, time.time())


def anchor_set(
    store: Store, item_ids: list[str], fingerprint: str, protocol: str, n_anchors: int = N_QUICK
) -> AnchorSet:
    """The anchor set of the board as it stands for the served items ``item_ids`` (fingerprint ``fingerprint``):
    the stored one of this board state, else chosen now and stored."""
    if not 1 <= n_anchors <= len(item_ids):
        raise ValueError(f"a quick job evaluates between 1 and the {len(item_ids):,} items, not {n_anchors}")
    outcome, runs = board_outcomes(store, item_ids, fingerprint, protocol)
    key = board_key(fingerprint, protocol, runs, n_anchors)
    stored = store.board_anchor_set(key)
    if stored is not None:
        return AnchorSet.from_json(stored)
    if len(runs) < MIN_MODELS:
        log.info("%d comparable model(s) on the board (< %d): the default anchor set", len(runs), MIN_MODELS)
        chosen = default_anchors(item_ids, n_anchors, fingerprint, protocol)
    else:
        start = time.perf_counter()
        chosen = fitted_anchors(outcome, n_anchors, fingerprint, protocol)
        log.info(
            "anchors chosen from %d models in %.1f s: error %s", len(runs), time.perf_counter() - start, chosen.error
        )
    store.save_anchor_set(key, chosen.to_json())
    return chosen


def estimate(anchors: AnchorSet, correct: Mapping[str, bool]) -> dict[str, Any]:
    """The estimate of Full (percent) from a model's ``correct`` by item id on every anchor, with its error
    (points): the measured leave-one-model-out one, or (default set) the binomial standard error."""
    missing = [item for item in anchors.item_ids if item not in correct]
    if missing:
        n = len(anchors.item_ids)
        raise ValueError(f"the run answered {n - len(missing)} of the {n} anchors (missing e.g. {missing[0]})")
    right = np.array([float(correct[item]) for item in anchors.item_ids])
    full = 100 * float(np.asarray(anchors.weights) @ right)
    if anchors.basis == FIT:
        error = dict(anchors.error)
    else:
        error = {"se": round(float(np.sqrt(full * (100 - full) / len(right))), 3)}
    return {
        "full": round(full, 3),
        "error": error,
        "anchors": len(right),
        "right": int(right.sum()),
        "anchors_version": anchors.version,
        "basis": anchors.basis,
        "models": len(anchors.models),
        "data_fingerprint": anchors.data_fingerprint,
        "protocol": anchors.protocol,
    }


def estimate_text(estimate: Mapping[str, Any]) -> str:
    """How the board shows an estimate: '≈ 41.2 ± 2.5 (200 anchors 1a2b3c4d, LOMO RMSE over 29 models)'."""
    error = estimate["error"]
    if estimate["basis"] == FIT:
        spread = f"± {error['rmse']:.1f} ({estimate['anchors']} anchors {estimate['anchors_version'][:8]}, "
        spread += f"leave-one-out RMSE over {estimate['models']} models, max {error['max']:.1f})"
    else:
        spread = f"± {error['se']:.1f} ({estimate['anchors']} default anchors {estimate['anchors_version'][:8]}, "
        spread += f"binomial SE: under {MIN_MODELS} models to measure the error)"
    return f"≈ {estimate['full']:.1f} {spread}"
