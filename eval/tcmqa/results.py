"""The results row (the ``results`` config, one leaderboard row) from a model's output rows.

Every number is an aggregate of per-row values the metric module computed when the rows were built,
so the row can be recomputed from the ``outputs`` config alone. Accuracies and P/R/F1 are percentages;
the mean predicted size is a count of letters; the confidence gap is in nats. The row also says what
it was computed on (data, data revision, data fingerprint, corpus size and coverage, protocol): two
rows are comparable only on the same data fingerprint and protocol with full coverage.

Model families are spelled one way everywhere (:func:`canonical_family`): as the paper spells them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom

from tcmqa.fresh.hidden import HiddenPool
from tcmqa.fresh.scores import FRESH_COLUMNS, fresh_columns
from tcmqa.probes import calibration
from tcmqa.schema import RESULTS

PAPER_HUMAN_REFERENCE = 64.94  # practitioners' majority vote on the paper's 4,801-item subset
MARGIN_CAP_QUANTILE = 0.99  # Appendix B: margins are capped at their 99th percentile
INTERVAL_LEVEL = 0.95  # of the bootstrap intervals of Full and Subset
# Columns a probe pass fills in (tcmqa.probes); the v1 pass leaves them null.
PROBE_COLUMNS = (
    "circular",
    "rotation_mean",
    "rotation_published",
    "circular_drop",
    "recall_std",
    "pride",
    "pride_lp",
    "n_rotation",
    "order_first",
    "order_chance",
    "order_p",
    "order_percentile",
    "n_order",
    "order_excluded",
    "probe_version",
)


def confidence_gap(
    margins: Sequence[float], correct: Sequence[bool], cap_quantile: float = MARGIN_CAP_QUANTILE
) -> float:
    """Mean margin on correct answers minus mean margin on wrong ones (Appendix B).

    Margins are capped at their ``cap_quantile`` quantile so that a few extreme margins cannot
    dominate. NaN when either group is empty.
    """
    margins = np.asarray(margins, dtype=float)
    correct = np.asarray(correct, dtype=bool)
    if margins.shape != correct.shape:
        raise ValueError(f"margins and correct differ in shape: {margins.shape} vs {correct.shape}")
    if not correct.any() or correct.all():
        return math.nan
    capped = np.minimum(margins, np.quantile(margins, cap_quantile))
    return float(capped[correct].mean() - capped[~correct].mean())


# Model lines as the paper spells them (tcmqa/data/reported.csv: Gemma3, OLMo2, Qwen2.5, ...), keyed by
# the lower-case stem of a Hub ``config.model_type`` or of a model's name.
FAMILY_NAMES: dict[str, str] = {
    "qwen": "Qwen",
    "gemma": "Gemma",
    "olmo": "OLMo",
    "llama": "Llama",
    "mistral": "Mistral",
    "ministral": "Ministral",
    "phi": "Phi",
    "smollm": "SmolLM",
    "granite": "Granite",
    "internlm": "InternLM",
    "deepseek": "DeepSeek",
    "glm": "GLM",
    "falcon": "Falcon",
}
# Lines whose minor releases are families of their own (Qwen1.5, Qwen2.5, Qwen3.5); elsewhere the
# major version names the family (Llama-3.1 and Llama-3.2 are Llama3).
MINOR_VERSION_FAMILIES = frozenset({"Qwen"})
_TYPE = re.compile(r"([a-z]+)[-_ ]?(\d+(?:[._]\d+)?)?")
# a stem then a version in a model's name; "qwen-7b" or "gemma-2b" name a size, not a version
_NAMED = re.compile(rf"(?<![a-z])({'|'.join(FAMILY_NAMES)})[-_ ]?(\d+(?:[._]\d+)?)(?![\d.]|[bm](?![a-z]))")


def _family_name(stem: str, version: str | None) -> str:
    name = FAMILY_NAMES[stem]
    if not version:
        return name
    version = version.replace("_", ".")
    return name + (version if name in MINOR_VERSION_FAMILIES else version.split(".")[0])


def canonical_family(model_type: str | None = None, model_id: str | None = None) -> str:
    """A model's family as the paper spells it, from a Hub ``config.model_type`` and/or a model id.

    ``model_type`` gives the line (``qwen2``, ``gemma3_text``, ``llama``, ``olmo2``); the model id's
    name refines its release where the name says one and the architecture agrees (Qwen1.5 and
    Qwen2.5 models declare ``qwen2``). A family already spelled canonically maps to itself; a type
    outside the known lines is returned as given; nothing known gives ``"unknown"``.

    >>> canonical_family("qwen2"), canonical_family("gemma3_text"), canonical_family("olmo2")
    ('Qwen2', 'Gemma3', 'OLMo2')
    >>> canonical_family("qwen2", "Qwen/Qwen2.5-7B-Instruct"), canonical_family("qwen2", "Qwen/Qwen1.5-4B-Chat")
    ('Qwen2.5', 'Qwen1.5')
    >>> canonical_family("llama", "meta-llama/Llama-3.1-8B-Instruct"), canonical_family("llama")
    ('Llama3', 'Llama')
    >>> canonical_family("Qwen2.5"), canonical_family("gemma", "google/gemma-2b-it"), canonical_family("gpt_oss")
    ('Qwen2.5', 'Gemma', 'gpt_oss')
    """
    typed = _TYPE.match(model_type.strip().lower()) if model_type and model_type.strip() else None
    if typed and typed[1] not in FAMILY_NAMES:
        typed = None
    named = _NAMED.search(model_id.rsplit("/", 1)[-1].lower()) if model_id else None
    if named and ((typed is None and not model_type) or (typed and typed[1] == named[1])):
        return _family_name(named[1], named[2])
    if typed:
        return _family_name(typed[1], typed[2])
    return model_type.strip() if model_type and model_type.strip() else "unknown"


def _percent(values: pd.Series) -> float | None:
    return float(values.mean()) * 100 if len(values) else None


def interval(correct: pd.Series) -> tuple[float | None, float | None]:
    """95% percentile bootstrap interval of an accuracy (percent), items resampled; (None, None) if empty."""
    if not len(correct):
        return None, None
    low, high = counted_intervals(np.array([int(correct.sum())]), np.array([len(correct)]))
    return float(low[0]), float(high[0])


def counted_intervals(right: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`interval` of ``right`` items right out of ``n``, for many accuracies at once (percent; NaN where
    n is 0): all it depends on, so a count kept elsewhere (the board's Subset, recounted as practitioners'
    responses change the subset) gets the interval a results row records on the same items.

    The number right in a resample of n items is Binomial(n, right/n), so the bootstrap's percentiles are that
    distribution's quantiles: computed exactly (what endless resamples would give, 14 ms for 1,000 accuracies)
    rather than drawn (1.9 s for 38,279 items, per interval, resampling items; 0.14 ms drawing counts). The
    interval always contains right/n, the mean of the distribution its bounds are quantiles of.
    """
    right, n = np.asarray(right, dtype=float), np.asarray(n, dtype=float)
    tail = (1 - INTERVAL_LEVEL) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        bounds = 100 * binom.ppf([[tail], [1 - tail]], n, right / n) / n
    return bounds[0], bounds[1]


def _single_value(outputs: pd.DataFrame, column: str) -> str:
    values = outputs[column].unique()
    if len(values) != 1:
        raise ValueError(f"the output rows mix several values of {column!r}: {sorted(values)[:5]}")
    return str(values[0])


def results_row(
    outputs: pd.DataFrame,
    subset: pd.DataFrame | None = None,
    *,
    family: str | None = None,
    params_b: float | None = None,
    engine: str | None = None,
    engine_version: str | None = None,
    dtype: str | None = None,
    engine_args: str | None = None,
    batch_invariant: bool | None = None,
    date: str | None = None,
    data: str | None = None,
    data_revision: str | None = None,
    data_fingerprint: str | None = None,
    n_corpus: int | None = None,
    pool: HiddenPool | None = None,
    pool_outputs: pd.DataFrame | None = None,
    released: str | None = None,
) -> dict[str, Any]:
    """One ``RESULTS`` row for the model whose output rows are given.

    ``data``, ``data_revision`` and ``data_fingerprint`` say what the items were drawn from, and
    ``n_corpus`` how many scorable items it holds (the harness fills all four): coverage is the share
    of them that was scored, in percent. ``family`` is spelled canonically (:func:`canonical_family`).

    Subset accuracy and Δ human use the items of ``subset`` (with ``item_id`` and
    ``majority_correct``) that were evaluated; the human reference is the practitioners' majority
    vote on those same items. Without a subset (or with no evaluated subset item) Subset and Δ human
    are null and the reference is the paper's 64.94. The confidence gap uses the generative channel's
    correctness. Full and Subset carry 95% bootstrap intervals; calibration is read from the stored
    letter log-probs (:mod:`tcmqa.probes.calibration`); the probe columns stay null (a probe pass fills them).

    ``pool`` and ``pool_outputs`` (the hidden pool and its output rows) fill the fresh columns
    (:mod:`tcmqa.fresh.scores`), ``released`` (the model's release date) their "after release" part; without a
    pool they are null. ``outputs`` are the public rows only.
    """
    if outputs.empty:
        raise ValueError("no output rows to summarise")
    if outputs["item_id"].duplicated().any():
        raise ValueError("the output rows repeat some item ids; each item must be scored once")
    single = outputs[outputs["answer_type"] == "single"]
    multi = outputs[outputs["answer_type"] == "multi"]
    on_subset = pd.DataFrame()
    if subset is not None and len(subset):
        on_subset = outputs.merge(subset[["item_id", "majority_correct"]], on="item_id", how="inner")
    subset_accuracy = _percent(on_subset["correct"]) if len(on_subset) else None
    full_ci = interval(outputs["correct"])
    subset_ci = interval(on_subset["correct"]) if len(on_subset) else (None, None)
    human = _percent(on_subset["majority_correct"]) if len(on_subset) else PAPER_HUMAN_REFERENCE
    row = {
        "model": _single_value(outputs, "model"),
        "family": canonical_family(family) if family else None,
        "params_b": params_b,
        "origin": "evaluated",
        "full": _percent(outputs["correct"]),
        "single": _percent(single["correct"]),
        "multi": _percent(multi["correct"]),
        "subset": subset_accuracy,
        "delta_human": None if subset_accuracy is None else subset_accuracy - human,
        "human_reference": human,
        "lp_full": _percent(outputs["lp_correct"]),
        "multi_precision": _percent(multi["precision"]),
        "multi_recall": _percent(multi["recall"]),
        "multi_f1": _percent(multi["f1"]),
        "multi_mean_pred_size": float(multi["prediction"].map(len).mean()) if len(multi) else None,
        "confidence_gap": confidence_gap(outputs["margin"], outputs["correct"]),
        "n": len(outputs),
        "n_single": len(single),
        "n_multi": len(multi),
        "n_subset": len(on_subset),
        "revision": _single_value(outputs, "revision"),
        "engine": engine,
        "engine_version": engine_version,
        "dtype": dtype,
        "engine_args": engine_args,
        "batch_invariant": batch_invariant,
        "protocol": _single_value(outputs, "protocol"),
        "date": date or dt.datetime.now(dt.timezone.utc).date().isoformat(),
        "data": data,
        "data_revision": data_revision,
        "data_fingerprint": data_fingerprint,
        "n_corpus": n_corpus,
        "coverage": 100 * len(outputs) / n_corpus if n_corpus else None,
        "full_ci_low": full_ci[0],
        "full_ci_high": full_ci[1],
        "subset_ci_low": subset_ci[0],
        "subset_ci_high": subset_ci[1],
        **calibration.summarise(outputs),
        **dict.fromkeys(PROBE_COLUMNS),
        **(
            dict.fromkeys(FRESH_COLUMNS)
            if pool is None or pool_outputs is None
            else fresh_columns(pool, pool_outputs, outputs, on_subset, released)
        ),
    }
    row = {key: (None if isinstance(value, float) and math.isnan(value) else value) for key, value in row.items()}
    if set(row) != set(RESULTS):
        raise AssertionError(f"results row keys drifted from RESULTS: {sorted(set(row) ^ set(RESULTS))}")
    return row
