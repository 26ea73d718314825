"""Rescoring without rerunning: every row recomputed from its stored answers under the errata.

A wrong key found after the runs does not call for new runs: each model's stored predictions and each
practitioner's selections are scored again against the corrected keys, through the metric's one rule
(``tcmqa_metric.score``), and the errata are applied by the builder's one rule
(``tcmqa.errata.apply_errata``): a wrong key is replaced, a dropped item leaves every denominator. Each
row carries the key revision it is scored on: the data fingerprint of the keys as published (the one
the runs recorded) and that of the corrected keys (what ``tcmqa build --errata`` makes). The board's
ranking before and after is compared (rank changes, Kendall's tau) and the errata's error rate (items
not found ``key_correct`` / items reviewed) is given with its exact 95% interval (Clopper-Pearson).

The study must be loaded from the tree the runs were computed on: a tree rebuilt with the errata has
another fingerprint, and its runs would be left out as computed on other data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from tcmqa.answers import NOT_ANSWERED, Answers, letters, load_answers
from tcmqa.errata import apply_errata
from tcmqa.runs import data_fingerprint
from tcmqa.study import Study, read_config
from tcmqa_metric import score

RESCORE_FILE = "errata_rescore"  # tables/<name>.csv: one row per model and practitioner
SUMMARY_FILE = "errata_summary"  # tables/<name>.csv: Kendall's tau and the error rate with its interval


@dataclass
class Rescored:
    """Every row before and after the errata, and what the errata found."""

    rows: pd.DataFrame  # kind, name, key_revision_{before,after}, n_/accuracy_ before and after, ranks, ...
    tau: float  # Kendall's tau between the models' rankings before and after (NaN under two models)
    tau_p: float
    n_reviewed: int
    n_errors: int  # verdict other than key_correct
    error_rate: float
    error_low: float
    error_high: float

    def summary(self) -> pd.DataFrame:
        return pd.DataFrame(
            [{"kendall_tau": self.tau, "tau_p_value": self.tau_p, "items_reviewed": self.n_reviewed,
              "errors_found": self.n_errors, "error_rate": self.error_rate, "error_rate_low": self.error_low,
              "error_rate_high": self.error_high}]
        )  # fmt: skip


def _exact(choices: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per pair, whether the choice (bitmask; 0: nothing chosen) matches the key: the metric's rule."""
    preds = [letters(int(m)).strip("-") for m in choices]
    return np.asarray(score(preds, [letters(int(m)) for m in key], per_item=True)["per_item"]["exact_match"], bool)


def accuracies(choices: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(answered items, exact-match percent) per column of ``choices`` (items x respondents, bitmasks,
    NOT_ANSWERED where none) against ``key`` (bitmask per item), scored by ``tcmqa_metric.score``."""
    n, acc = np.zeros(choices.shape[1], dtype=np.int64), np.full(choices.shape[1], np.nan)
    for j in range(choices.shape[1]):
        rows = np.flatnonzero(choices[:, j] != NOT_ANSWERED)
        n[j] = len(rows)
        if len(rows):
            acc[j] = 100 * _exact(choices[rows, j], key[rows]).mean()
    return n, acc


def corrected(run: pd.DataFrame, errata: list[dict]) -> pd.DataFrame:
    """One run's per-item rows (``item_id``, ``correct``; ``prediction`` at least on the errata's items) under
    ``errata``: a dropped item's row left out, a corrected key's item scored again from its stored prediction by
    the metric's rule (``tcmqa_metric.score``), every other row as recorded. What the board and the model page
    show a run by, without rerunning it."""
    if not errata:
        return run
    old = {e["item_id"]: list(e["old_key"]) for e in errata}
    keys, dropped = apply_errata([{"id": i, "answer": key} for i, key in old.items()], errata)
    new_key = {item["id"]: "".join(item["answer"]) for item in keys if item["answer"] != old[item["id"]]}
    out = run[~run["item_id"].isin({e["item_id"] for e in dropped})].copy()
    again = out["item_id"].isin(set(new_key)).to_numpy()
    if again.any():
        preds = ["".join(p) if isinstance(p, list | tuple | np.ndarray) else "" for p in out.loc[again, "prediction"]]
        refs = [new_key[i] for i in out.loc[again, "item_id"]]
        out.loc[again, "correct"] = score(preds, refs, per_item=True)["per_item"]["exact_match"]
    out["correct"] = out["correct"].astype(bool)
    return out


def ranking_change(names: list[str], before: np.ndarray, after: np.ndarray) -> tuple[pd.DataFrame, float, float]:
    """Ranks (1: highest accuracy; ties share the best rank) before and after, the change (positive:
    moved up) and Kendall's tau (with its p-value) between the two orderings."""
    rank_before = stats.rankdata(-before, method="min").astype(int)
    rank_after = stats.rankdata(-after, method="min").astype(int)
    frame = pd.DataFrame({"name": names, "rank_before": rank_before, "rank_after": rank_after,
                          "rank_change": rank_before - rank_after})  # fmt: skip
    if len(names) < 2:
        return frame, float("nan"), float("nan")
    result = stats.kendalltau(before, after)
    return frame, float(result.statistic), float(result.pvalue)


def _practitioner_choices(answers: Answers, rows: np.ndarray) -> tuple[list[str], np.ndarray, pd.DataFrame]:
    """Practitioners' selections on the scored items (``rows`` maps corpus rows to scored rows, -1 out)."""
    responses = answers.responses.assign(scored_row=rows[answers.responses["row"].to_numpy()])
    responses = responses[responses["scored_row"] >= 0]
    ids = sorted(responses["practitioner_id"].unique().tolist())
    matrix = np.full((int(rows.max()) + 1, len(ids)), NOT_ANSWERED, dtype=np.int8)
    matrix[responses["scored_row"].to_numpy(), pd.Index(ids).get_indexer(responses["practitioner_id"])] = responses[
        "choice"
    ].to_numpy()
    return ids, matrix, responses


def _majority(responses: pd.DataFrame, subset_rows: np.ndarray, key: np.ndarray, keep: np.ndarray) -> float:
    """Practitioner majority-vote accuracy (percent) on the kept subset items: strictly more than half of
    the item's raters exactly right under ``key``."""
    on = responses[np.isin(responses["scored_row"], subset_rows[keep[subset_rows]])]
    if not len(on):
        return float("nan")
    rows = on["scored_row"].to_numpy()
    right = _exact(on["choice"].to_numpy(), key[rows])
    counts = pd.DataFrame({"row": rows, "right": right}).groupby("row")["right"].agg(["sum", "count"])
    return 100 * float((2 * counts["sum"] > counts["count"]).mean())


def rescore(study: Study, data: str | Path, errata: list[dict]) -> Rescored:
    """Every model and practitioner of ``study`` (loaded from ``data``) scored on the published keys and
    on the keys as ``errata`` (checked, ``tcmqa.errata.read_errata``) correct them."""
    if not errata:
        raise ValueError("no errata given: there is nothing to rescore under")
    answers = load_answers(study, data)
    corpus = read_config(data, "corpus", ["id", "question", "options", "answer", "answer_type"]).to_pylist()
    scored_ids = set(study.item_ids.tolist())
    scored = [item | {"answer": list(item["answer"])} for item in corpus if item["id"] in scored_ids]
    before_fp = data_fingerprint(scored)
    corrected, _ = apply_errata([dict(item) for item in scored], errata)
    after_fp = data_fingerprint(corrected)
    new_key = {item["id"]: sum(1 << "ABCDE".index(c) for c in item["answer"]) for item in corrected}
    rows = np.full(len(answers.item_ids), -1)
    rows[answers.scored] = np.arange(int(answers.scored.sum()))
    ids = answers.item_ids[answers.scored]
    key_before = answers.key[answers.scored].astype(np.int64)
    keep = np.array([i in new_key for i in ids])
    key_after = np.array([new_key.get(i, 0) for i in ids], dtype=np.int64)
    models = answers.models[answers.scored]
    dropped = np.where(keep[:, None], models, NOT_ANSWERED)
    n_b, acc_b = accuracies(models, key_before)
    n_a, acc_a = accuracies(dropped, key_after)
    names = study.model_names
    ranks, tau, tau_p = ranking_change(names, acc_b, acc_a)
    model_rows = ranks.assign(kind="model", n_before=n_b, accuracy_before=acc_b, n_after=n_a, accuracy_after=acc_a)
    subset_rows = pd.Index(ids).get_indexer(study.subset["item_id"]) if study.has_subset else np.array([], int)
    subset_rows = subset_rows[subset_rows >= 0]
    frames = [model_rows]
    if study.has_responses:
        p_ids, p_choices, responses = _practitioner_choices(answers, rows)
        p_choices = np.vstack([p_choices, np.full((len(ids) - len(p_choices), len(p_ids)), NOT_ANSWERED, np.int8)])
        pn_b, pacc_b = accuracies(p_choices, key_before)
        pn_a, pacc_a = accuracies(np.where(keep[:, None], p_choices, NOT_ANSWERED), key_after)
        frames.append(pd.DataFrame({"kind": "practitioner", "name": p_ids, "n_before": pn_b, "accuracy_before": pacc_b,
                                    "n_after": pn_a, "accuracy_after": pacc_a}))  # fmt: skip
        if len(subset_rows):
            human_b = _majority(responses, subset_rows, key_before, np.ones(len(ids), bool))
            human_a = _majority(responses, subset_rows, key_after, keep)
            _, sub_b = accuracies(np.where(np.isin(np.arange(len(ids)), subset_rows)[:, None], models, NOT_ANSWERED),
                                  key_before)  # fmt: skip
            on_after = np.isin(np.arange(len(ids)), subset_rows) & keep
            _, sub_a = accuracies(np.where(on_after[:, None], models, NOT_ANSWERED), key_after)
            frames[0] = model_rows.assign(delta_human_before=sub_b - human_b, delta_human_after=sub_a - human_a)
    table = pd.concat(frames, ignore_index=True).assign(key_revision_before=before_fp, key_revision_after=after_fp)
    first = ["kind", "name", "key_revision_before", "key_revision_after", "n_before", "accuracy_before", "n_after",
             "accuracy_after"]  # fmt: skip
    table = table[first + [c for c in table.columns if c not in first]]
    n_errors = sum(e["verdict"] != "key_correct" for e in errata)
    interval = stats.binomtest(n_errors, len(errata)).proportion_ci(0.95)
    return Rescored(table, tau, tau_p, len(errata), n_errors, 100 * n_errors / len(errata),
                    100 * interval.low, 100 * interval.high)  # fmt: skip
