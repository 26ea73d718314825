"""Suspect keys: for every item, the evidence that its published key is wrong, and a ranked list.

The items were extracted from exam papers by a language model; public benchmarks built that way
carry wrong keys (MMLU-Redux: 6.49% of MMLU). A wrong key leaves a trace: those who know the item
agree on another answer. The evidence, each part with its number (in nats, summed into the score):

* **votes** of the models and of the practitioners, each group on its own: the IRT audit's count of
  the key against the leading alternative (the other answer with most ability-weighted votes),
  made a likelihood ratio. Respondent ``j`` answers an item right with probability
  ``sigmoid(logit(p_j) + delta)``: ``p_j`` its expected accuracy on the one scale (``tcmqa.irt``,
  items of the same answer type), ``delta`` how much easier or harder this item is for the group;
  wrong, it picks one of ``n_alt`` other answers at random. The evidence is the log-likelihood
  ratio of "the alternative is right" against "the key is right", each with its own ``delta``
  (maximised, a ``N(0, 3^2)`` prior keeping it finite): ``l_alt - l_key + (n_chose_alt -
  n_chose_key) * log(n_alt)``, ``l`` the Bernoulli log-likelihood of who chose the hypothesised
  answer. An able respondent's vote weighs more (its ``p_j`` is higher), one at chance weighs
  nothing. A hard item with its key right draws many wrong answers spread over the other options:
  the key is then explained by a low ``delta``, and no alternative gathers enough to beat it; a
  wrong key draws the able respondents' agreement on one answer. ``n_alt`` is the effective number
  of wrong answers, 1 / (the chance that two of the models' wrong answers to an item agree), per
  answer type over all items (errors on multi-answer items cluster on near sets; wrong keys only
  make it smaller, which asks for more agreement).
* **discrimination**: the 2PL fit's ``a`` and its z (``a / se``); on a wrong key the able are the ones
  scored wrong, so ``a`` comes out near zero or negative. Adds ``max(0, -z)`` nats.
* **flags and comments**: practitioners' flags (from the responses) and comments (the store's, where
  given); each adds :data:`FLAG_NATS`. A flagged item is out of the results and no model answered it
  (the harness skips it), so it is ranked on the practitioners' evidence alone.

The list is ranked by the score, each row with its reason (the parts that raised it, largest first).

The fit and the votes use at most :data:`AUDIT_MODELS` models (those with the most items answered,
then the highest Full) and every practitioner: the fit's time grows with the respondents, and a
board of a thousand models would take the report minutes for little more evidence. The list's
``attrs["models_audited"]`` and ``attrs["models"]`` say how many were used, of how many.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from tcmqa.answers import NOT_ANSWERED, Answers, letters, load_answers
from tcmqa.irt import Fit, Outcomes, fit_2pl, outcomes
from tcmqa.study import Study

log = logging.getLogger(__name__)

FLAG_NATS = 2.0  # what one flag or comment adds: about one able practitioner's vote against the key
DELTA_SD = 3.0  # prior sd of an item's shift in log-odds for a group (see the module docstring)
_N_MASKS = 32
# Models the audit fits and counts votes over. The 2PL fit costs time in proportion to the answered
# cells (25 s at 29 models and 101 practitioners, about 15 min at 1,000 models, docs/benchmarks.md),
# while a hundred able models already agree on an item's answer as clearly as a thousand do, and the
# practitioners' evidence does not depend on the board's size.
AUDIT_MODELS = 100


def expected_logits(outcome: Outcomes, fit: Fit, multi: np.ndarray) -> dict[bool, np.ndarray]:
    """Per answer type (multi: True/False), each respondent's log-odds of its expected accuracy on
    the fit's items of that type (the offset of the votes' model, see the module docstring)."""
    expected = fit.p()  # items x respondents
    logits = {}
    for is_multi in (False, True):
        rows = multi == is_multi
        p = np.clip(expected[rows].mean(axis=0), 1e-3, 1 - 1e-3) if rows.any() else np.full(fit.theta.shape, 0.5)
        logits[is_multi] = np.log(p / (1 - p))
    return logits


def effective_alternatives(choices: np.ndarray, key: np.ndarray) -> float:
    """1 / the chance that two wrong answers (anything but the key, choosing nothing aside) to one item
    agree, estimated without bias per item and averaged over items with two or more: ``choices``
    items x respondents (bitmasks, NOT_ANSWERED where none), ``key`` per item."""
    wrong = (choices != key[:, None]) & (choices > 0)
    rows, cols = np.nonzero(wrong)
    counts = np.bincount(rows * _N_MASKS + choices[rows, cols], minlength=len(key) * _N_MASKS).reshape(-1, _N_MASKS)
    total = counts.sum(axis=1)
    some = total >= 2
    if not some.any():
        return 4.0
    agree = (counts[some] * (counts[some] - 1)).sum(axis=1) / (total[some] * (total[some] - 1))
    return float(1 / max(agree.mean(), 1e-3))


def _profile(rows: np.ndarray, offsets: np.ndarray, right: np.ndarray, n: int) -> np.ndarray:
    """Per item, the maximum over ``delta`` of the Bernoulli log-likelihood of ``right`` (one cell per
    respondent, row ``rows``) at log-odds ``offsets + delta``, with the prior on ``delta``."""
    delta = np.zeros(n)
    for _ in range(25):  # Newton on a concave function of one variable per item
        p = 1 / (1 + np.exp(-(offsets + delta[rows])))
        grad = np.bincount(rows, right - p, n) - delta / DELTA_SD**2
        info = np.bincount(rows, p * (1 - p), n) + 1 / DELTA_SD**2
        delta += np.clip(grad / info, -2.0, 2.0)
    z = offsets + delta[rows]
    loglik = right * z - np.logaddexp(0.0, z)
    return np.bincount(rows, loglik, n) - delta**2 / (2 * DELTA_SD**2)


def _evidence(
    rows: np.ndarray, choices: np.ndarray, offsets: np.ndarray, key: np.ndarray, alt: np.ndarray, log_alt: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nats, chose the alternative, chose the key) per item for one group of respondents."""
    n = len(key)
    on_key, on_alt = choices == key[rows], choices == alt[rows]
    n_key, n_alt = np.bincount(rows, on_key, n), np.bincount(rows, on_alt, n)
    nats = (
        _profile(rows, offsets, on_alt.astype(float), n)
        - _profile(rows, offsets, on_key.astype(float), n)
        + (n_alt - n_key) * log_alt
    )
    return nats, n_alt.astype(np.int64), n_key.astype(np.int64)


def suspect_items(
    answers: Answers,
    outcome: Outcomes,
    fit: Fit,
    multi: np.ndarray,
    comments: pd.Series | None = None,
) -> pd.DataFrame:
    """Every item's evidence against its key, ranked (most suspect first; ``rank`` from 1).

    ``outcome`` and ``fit``: the study's outcome matrix (``tcmqa.irt.outcomes``) and its 2PL fit; its
    rows are the scored items, its columns the models then the practitioners. ``multi``: per corpus
    item (answers' rows), multi-answer. ``comments``: practitioners' comments per item id (the store's).
    """
    n, m = len(answers.item_ids), answers.models.shape[1]
    if outcome.respondents["kind"].iloc[:m].ne("model").any() or len(outcome.item_ids) != answers.scored.sum():
        raise ValueError("the outcome matrix is not of these answers' study: fit it on the same study")
    logits = expected_logits(outcome, fit, multi[answers.scored])
    key = answers.key.astype(np.int64)
    n_eff = {t: effective_alternatives(answers.models[multi == t], key[multi == t]) for t in (False, True)}
    log_alt = np.log(np.where(multi, n_eff[True], n_eff[False]))
    model_rows, model_cols = np.nonzero(answers.models != NOT_ANSWERED)
    model_choice = answers.models[model_rows, model_cols].astype(np.int64)
    model_offset = np.where(multi[model_rows], logits[True][model_cols], logits[False][model_cols])
    people = pd.Index(outcome.respondents["name"].iloc[m:])
    resp = answers.responses
    column = people.get_indexer(resp["practitioner_id"])
    resp_rows, resp_choice = resp["row"].to_numpy(), resp["choice"].to_numpy(np.int64)
    # a practitioner only on flagged items is not on the scale: taken as the typical practitioner
    typical = {t: float(np.median(logits[t][m:])) if len(people) else 0.0 for t in (False, True)}
    resp_offset = np.where(
        column < 0,
        np.where(multi[resp_rows], typical[True], typical[False]),
        np.where(multi[resp_rows], logits[True][m + column], logits[False][m + column]),
    )
    # the leading alternative: most votes weighted by ability above chance, ties to the most chosen
    idx = np.arange(n)
    weight = np.concatenate([model_offset, resp_offset]) + np.concatenate([log_alt[model_rows], log_alt[resp_rows]])
    cells = np.concatenate([model_rows, resp_rows]) * _N_MASKS + np.concatenate([model_choice, resp_choice])
    votes = np.bincount(cells, np.maximum(weight, 0.0), n * _N_MASKS).reshape(n, _N_MASKS)
    counts = np.bincount(cells, minlength=n * _N_MASKS).reshape(n, _N_MASKS)
    votes = votes + counts * 1e-6
    votes[idx, key] = -np.inf
    votes[:, 0] = -np.inf  # choosing nothing is no alternative answer
    alt = np.argmax(votes, axis=1)
    model_nats, models_alt, models_key = _evidence(model_rows, model_choice, model_offset, key, alt, log_alt)
    person_nats, people_alt, people_key = _evidence(resp_rows, resp_choice, resp_offset, key, alt, log_alt)

    a = np.full(n, np.nan)
    a_se = np.full(n, np.nan)
    b = np.full(n, np.nan)
    a[answers.scored], a_se[answers.scored], b[answers.scored] = fit.a, fit.a_se, fit.b
    irt_nats = np.nan_to_num(np.maximum(0.0, -a / a_se))
    flags = np.bincount(resp_rows[resp["flagged"].to_numpy()], minlength=n)
    n_comments = (
        comments.reindex(answers.item_ids).fillna(0).to_numpy(np.int64) if comments is not None else np.zeros(n, int)
    )
    flag_nats = FLAG_NATS * (flags + n_comments)
    score = model_nats + person_nats + irt_nats + flag_nats
    frame = pd.DataFrame(
        {
            "item_id": answers.item_ids,
            "score": score,
            "key": [letters(k) for k in key],
            "alternative": [letters(x) for x in alt],
            "model_nats": model_nats,
            "models_alternative": models_alt,
            "models_key": models_key,
            "models_answered": (answers.models != NOT_ANSWERED).sum(axis=1),
            "practitioner_nats": person_nats,
            "practitioners_alternative": people_alt,
            "practitioners_key": people_key,
            "practitioners_answered": np.bincount(resp_rows, minlength=n),
            "discrimination": a,
            "discrimination_se": a_se,
            "difficulty": b,
            "irt_nats": irt_nats,
            "flags": flags,
            "comments": n_comments,
            "scored": answers.scored,
        }
    )
    frame["practitioner_majority_elsewhere"] = 2 * frame["practitioners_alternative"] > frame["practitioners_answered"]
    frame["reason"] = [_reason(row) for row in frame.itertuples(index=False)]
    frame = frame.sort_values(["score", "item_id"], ascending=[False, True], kind="stable").reset_index(drop=True)
    frame.insert(0, "rank", np.arange(1, n + 1))
    return frame


def audit_models(study: Study, bound: int = AUDIT_MODELS) -> np.ndarray:
    """The columns (in the study's order) of the at most ``bound`` models the audit uses: the most
    items answered first (a comparable run covers every scored item), then the highest Full, then the
    study's order."""
    if bound < 1:
        raise ValueError(f"the audit needs at least one model to bound it by, not {bound}")
    order = np.lexsort((np.arange(len(study.models)), -study.correct.sum(axis=0), -study.covered.sum(axis=0)))
    return np.sort(order[:bound])


def audit(
    study: Study, data: str | Path, comments: pd.Series | None = None, *, max_models: int = AUDIT_MODELS
) -> pd.DataFrame:
    """The ranked suspect list of ``study`` (loaded from ``data``): its answers read, the one scale
    fitted over at most ``max_models`` models (:func:`audit_models`) and every practitioner, every
    item's evidence (:func:`suspect_items`)."""
    n_models, columns = len(study.models), audit_models(study, max_models)
    if len(columns) < n_models:
        study = study.with_models(columns)
        log.info("key audit over %d of %d models (most items answered, then highest Full)", len(columns), n_models)
    outcome = outcomes(study)
    if not outcome.y.shape[1]:
        raise ValueError("no model and no practitioner answered a scored item: there is no evidence on any key")
    answers = load_answers(study, data)
    fit = fit_2pl(outcome.y)
    multi = study.corpus.set_index("id")["answer_type"].reindex(answers.item_ids).eq("multi").to_numpy()
    ranked = suspect_items(answers, outcome, fit, multi, comments)
    ranked.attrs.update(models_audited=len(study.models), models=n_models)
    return ranked


def _reason(row) -> str:
    """The parts of the evidence that raise the item's score, largest first."""
    parts = [
        (
            row.model_nats,
            f"models {row.models_alternative} of {row.models_answered} chose {row.alternative}, "
            f"{row.models_key} the key {row.key} ({row.model_nats:+.1f})",
        ),
        (
            row.practitioner_nats,
            f"practitioners {row.practitioners_alternative} of {row.practitioners_answered} chose "
            f"{row.alternative}, {row.practitioners_key} the key {row.key} ({row.practitioner_nats:+.1f})",
        ),
        (
            row.irt_nats,
            f"discrimination {row.discrimination:.2f} ± {row.discrimination_se:.2f} (+{row.irt_nats:.1f})",
        ),
        (
            FLAG_NATS * (row.flags + row.comments),
            f"{row.flags} flag(s), {row.comments} comment(s) (+{FLAG_NATS * (row.flags + row.comments):.1f})",
        ),
    ]
    shown = [text for nats, text in sorted(parts, key=lambda p: -p[0]) if nats > 0]
    return "; ".join(shown) or "no evidence against the key"
