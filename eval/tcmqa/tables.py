"""The paper's Tables 1-6 and the report's agreement and uncertainty tables, from a :class:`Study`.

Each function returns a DataFrame of plain numbers (percentages as 0-100); formatting is the
report's job. Model rows follow the paper: grouped by family, ordered by size within a family; a
model is named as :class:`Study` names its run (``model (engine)`` where one model ran twice).

Tables 1, 3 and 6 and Cohen's κ with the practitioner majority need practitioner data; over a corpus
only (:attr:`Study.has_subset` false) the subset columns of the others are NaN.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from tcmqa import stats
from tcmqa.schema import DOMAINS, RATERS_PER_ITEM
from tcmqa.study import Study

DIFFICULTY_LEVELS = (1, 2, 3, 4, 5)


def accuracy(study: Study, rows: np.ndarray | None = None, values: np.ndarray | None = None) -> np.ndarray:
    """Percent of covered cells that are right, per model, over ``rows`` (default: all scored items)."""
    values = study.correct if values is None else values
    covered = study.covered if rows is None else study.covered[rows]
    values = values if rows is None else values[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100 * (values & covered).sum(axis=0) / covered.sum(axis=0)


def subset_view(study: Study) -> tuple[np.ndarray, pd.DataFrame]:
    """Matrix rows of the subset items that were scored, and those subset rows."""
    keep = study.subset_rows >= 0
    return study.subset_rows[keep], study.subset.loc[keep].reset_index(drop=True)


def board_order(study: Study) -> np.ndarray:
    """Model column order of the paper's Table 4: family, then size."""
    models = study.models.assign(params=study.models["params_b"].astype(float))
    return models.sort_values(["family", "params", "model"], na_position="last").index.to_numpy()


def domain_portfolio(study: Study) -> pd.DataFrame:
    """Table 1: subset items assigned each domain by at least one of their raters."""
    assigned = study.subset["rater_domains"].map(lambda raters: {d for r in raters for d in r})
    n = len(study.subset)
    counts = [int(assigned.map(lambda s, key=key: key in s).sum()) for key in DOMAINS]
    return pd.DataFrame(
        {
            "#": range(1, len(DOMAINS) + 1),
            "domain": list(DOMAINS),
            "label": list(DOMAINS.values()),
            "items": counts,
            "share": [100 * c / n if n else np.nan for c in counts],
        }
    )


def corpus_composition(study: Study) -> pd.DataFrame:
    """Table 2: item counts by answer type and by which optional fields are present."""
    c = study.corpus
    rows = {
        "Total items": len(c),
        "single-answer": int((c["answer_type"] == "single").sum()),
        "multi-answer": int((c["answer_type"] == "multi").sum()),
        "Items with five options": int(c["five_options"].sum()),
        "Items with reference explanation": int(c["has_explanation"].sum()),
        "Items with source difficulty": int(c["source_difficulty"].notna().sum()),
        "Items flagged by a practitioner (excluded from results)": int(c["flagged"].sum()),
    }
    return pd.DataFrame(
        {
            "property": list(rows),
            "count": list(rows.values()),
            "share": [100 * v / max(len(c), 1) for v in rows.values()],
        }
    )


def practitioner_difficulty(study: Study) -> pd.DataFrame:
    """Table 3: responses, share, accuracy and median seconds per difficulty rating, and overall."""
    r = study.responses
    rated = r[r["difficulty"].notna()]
    groups = [(str(level), rated[rated["difficulty"] == level]) for level in DIFFICULTY_LEVELS] + [("all", r)]
    return pd.DataFrame(
        [
            {
                "rating": name,
                "responses": len(g),
                "share": 100 * len(g) / max(len(r), 1),
                "accuracy": 100 * g["correct"].mean() if len(g) else np.nan,
                "median_seconds": g["seconds"].median() if len(g) else np.nan,
            }
            for name, g in groups
        ]
    )


def human_reference(study: Study) -> float:
    """Practitioner majority-vote accuracy on the scored subset items (percent)."""
    _, subset = subset_view(study)
    return 100 * float(subset["majority_correct"].mean()) if len(subset) else np.nan


def leaderboard(study: Study) -> pd.DataFrame:
    """Table 4: Full, Single, Multi, Subset and Δ human for every model."""
    rows, _ = subset_view(study)
    subset_acc = accuracy(study, rows)
    table = study.models[["model", "family", "params_b"]].assign(
        full=accuracy(study),
        single=accuracy(study, np.flatnonzero(~study.multi)),
        multi=accuracy(study, np.flatnonzero(study.multi)),
        subset=subset_acc,
        delta_human=subset_acc - human_reference(study),
        n=study.covered.sum(axis=0),
    )
    return table.loc[board_order(study)].reset_index(drop=True)


def multi_answer(study: Study) -> pd.DataFrame:
    """Table 5: single and multi exact match, and P/R/F1 and mean |ŷ| on multi-answer items."""
    multi = np.flatnonzero(study.multi)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a partial run may cover no multi-answer item
        means = {
            k: np.nanmean(getattr(study, k), axis=0) if len(multi) else np.full(len(study.models), np.nan)
            for k in ("precision", "recall", "f1", "pred_size")
        }
    table = study.models[["model"]].assign(
        single_em=accuracy(study, np.flatnonzero(~study.multi)),
        multi_em=accuracy(study, multi),
        precision=100 * means["precision"],
        recall=100 * means["recall"],
        f1=100 * means["f1"],
        mean_pred_size=means["pred_size"],
    )
    return table.loc[board_order(study)].reset_index(drop=True)


def subset_raters(subset: pd.DataFrame) -> int:
    """N, the raters of every subset item (``ingest.make_subset``); a subset mixing several N is refused,
    since Table 6's binomial and Figure 6's levels assume one N. An empty subset has the study's N."""
    if subset.empty:
        return RATERS_PER_ITEM
    counts = subset["n_raters"] if "n_raters" in subset else subset["practitioner_ids"].map(len)
    found = sorted({int(n) for n in counts})
    if len(found) > 1:
        raise ValueError(
            f"the subset mixes items with {found} raters: Table 6 and Figure 6 need one N per subset; "
            "rebuild it with one number of raters per item (tcmqa build on one platform database, or one TCMQA_RATERS)"
        )
    return found[0]


def practitioner_agreement(study: Study) -> tuple[stats.BinomialAgreement, float]:
    """Table 6: correct counts against Binomial(N, p), and Fleiss' κ over the subset (N: :func:`subset_raters`)."""
    raters = subset_raters(study.subset)
    n_correct = study.subset["n_correct"].to_numpy(dtype=int)
    counts = np.column_stack([n_correct, raters - n_correct])
    agreement = stats.binomial_agreement(n_correct, n_raters=raters)
    return agreement, stats.fleiss_kappa(counts) if len(counts) else np.nan


def kappa_with_practitioners(study: Study) -> tuple[pd.DataFrame, np.ndarray]:
    """Cohen's κ of each model with the practitioner majority, and the model × model κ matrix."""
    rows, subset = subset_view(study)
    majority = subset["majority_correct"].to_numpy(dtype=bool)
    covered, correct = study.covered[rows], study.correct[rows]
    m = len(study.models)
    vs_human = np.array(
        [
            stats.cohen_kappa(correct[covered[:, j], j], majority[covered[:, j]]) if covered[:, j].any() else np.nan
            for j in range(m)
        ]
    )
    pairs = np.full((m, m), np.nan)
    full = study.covered.all(axis=1)
    if full.any():
        pairs = stats.cohen_kappa_matrix(study.correct[full])
    table = study.models[["model"]].assign(kappa_vs_majority=vs_human, n=covered.sum(axis=0))
    return table.loc[board_order(study)].reset_index(drop=True), pairs


def intervals(study: Study, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Bootstrap 95% intervals (items resampled) for each accuracy and for Δ human.

    Δ human resamples subset items jointly for the model and the practitioner majority, so its
    interval is paired. Uncovered cells are left out of both numerator and denominator.
    """
    out = study.models[["model"]].copy()
    masks = {
        "full": np.arange(len(study.item_ids)),
        "single": np.flatnonzero(~study.multi),
        "multi": np.flatnonzero(study.multi),
    }
    for name, rows in masks.items():
        lo, hi = _ratio_interval(study.correct[rows], study.covered[rows], n_boot, seed)
        out[f"{name}_lo"], out[f"{name}_hi"] = lo, hi
    rows, subset = subset_view(study)
    if not len(rows):  # no practitioner subset (a corpus-only tree)
        for name in ("subset_lo", "subset_hi", "delta_lo", "delta_hi"):
            out[name] = np.nan
        return out.loc[board_order(study)].reset_index(drop=True)
    majority = subset["majority_correct"].to_numpy(dtype=np.float32)
    cov = study.covered[rows]
    values = np.column_stack([study.correct[rows] & cov, cov, majority[:, None] * cov])
    reps = stats.bootstrap_means(values, n_boot, seed)
    m = len(study.models)
    with np.errstate(invalid="ignore", divide="ignore"):
        model_acc = 100 * reps[:, :m] / reps[:, m : 2 * m]
        delta = model_acc - 100 * reps[:, 2 * m :] / reps[:, m : 2 * m]
    (out["subset_lo"], out["subset_hi"]), (out["delta_lo"], out["delta_hi"]) = (
        stats.percentile_interval(model_acc),
        stats.percentile_interval(delta),
    )
    return out.loc[board_order(study)].reset_index(drop=True)


def _ratio_interval(correct: np.ndarray, covered: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    m = correct.shape[1]
    if not len(correct):
        return np.full(m, np.nan), np.full(m, np.nan)
    reps = stats.bootstrap_means(np.column_stack([correct & covered, covered]), n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        return stats.percentile_interval(100 * reps[:, :m] / reps[:, m:])


def neighbour_tests(study: Study) -> pd.DataFrame:
    """McNemar's exact test between each model and the next one down the board (by Full)."""
    board = leaderboard(study).sort_values("full", ascending=False)
    column = {name: j for j, name in enumerate(study.model_names)}
    rows = []
    for upper, lower in zip(board["model"], board["model"].iloc[1:]):
        a, b = column[upper], column[lower]
        both = study.covered[:, a] & study.covered[:, b]
        test = stats.mcnemar(study.correct[both, a], study.correct[both, b])
        rows.append(
            {
                "model": upper,
                "next": lower,
                "difference": 100 * (test.only_a - test.only_b) / max(both.sum(), 1),
                "only_model": test.only_a,
                "only_next": test.only_b,
                "p_value": test.p_value,
            }
        )
    return pd.DataFrame(rows, columns=["model", "next", "difference", "only_model", "only_next", "p_value"])
