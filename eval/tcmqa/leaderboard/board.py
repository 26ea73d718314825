"""The leaderboard table: the paper's reported rows, the practitioners' reference, every evaluated row.

Pure pandas (no gradio), so the board's logic is tested and benchmarked without a browser. The merged
frame is cached on the store's version (results, outcomes, practice), so a finished evaluation shows up
on the next refresh without a restart and an idle refresh costs three cheap store queries. A refresh
reads no output row: the subset columns and the separation marks are counts over each run's outcome,
aggregated once when it was recorded (:mod:`tcmqa.leaderboard.outcomes`).

Comparability (DESIGN: a row is comparable with another only on the same data fingerprint and
protocol with full coverage). The board has one reference, a data fingerprint and a protocol:

* the protocol is the harness's current one (``tcmqa.prompts.PROTOCOL``) unless ``Board`` is given
  another;
* the fingerprint is the one ``Board`` is given: that of the data the Space serves
  (:func:`served_fingerprint`, computed once), so after a corpus fix the rows run on the fixed data
  rank and the stale ones read ``other data``, however many they are; without one, the fingerprint
  that most full-coverage evaluated rows under that protocol share (a tie goes to the most recently
  evaluated, then to the smaller fingerprint). With no such row nothing is comparable yet.

Every row gets a ``Comparison`` label (:data:`COMPARISONS`): ``comparable`` (that fingerprint, that
protocol, coverage 100%: the rows that may be ranked against each other), ``partial`` (coverage below 100%
or not recorded), ``other protocol``, ``other data`` (another fingerprint), ``data unknown`` (a row that
recorded no fingerprint), or ``reported in the paper`` (the paper's Table 4, computed on its own 38,279-item
corpus). A label is the first of these reasons, read from the end (the paper's rows are always ``reported in
the paper``; a partial run on other data is ``other data``). The label is a visible column with a legend
(:data:`LEGEND`) and a filter (``select(comparisons=...)``), never a hidden sort key: the board's order is
exactly what its sort control says, so sorted by Full, descending, the Full column descends.

The practitioners' reference row sits with the rows it was computed beside: the paper's 64.94 with
the paper's rows, and, when comparable rows carry ``human_reference`` (the majority vote on the same
subset items), a second reference row with that value among the comparable rows.

Besides the results fields the board derives four columns (:data:`DERIVED`): the 95% intervals of
Full and Subset as text, the subset they are on, and the separation mark of each comparable evaluated row
against the next better comparable row by Full, which the mark names, so that sorting or filtering the
board does not change what it says (:mod:`tcmqa.leaderboard.uncertainty` says what the mark tests and what
it cannot say). Subset's interval is always that of the Subset shown: where practitioner mode recounts
Subset, it recounts the interval with it (:meth:`tcmqa.leaderboard.outcomes.Reference.rows`).

A value that means nothing without another on the same items (a results column's ``read_against``: Order
1st and its chance rate, PriDe and the log-prob channel on PriDe's items, Rot. mean and the published order
on the rotated items) is shown in one cell with it, "6.47 (chance 4.17)" (:func:`read_against`): one cell
reads at a glance and survives any choice of columns, a copy of the table or a cropped screenshot; sorting
by such a column sorts by its value.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from tcmqa.fresh.gap import MIN_POOL
from tcmqa.leaderboard import formats, outcomes, uncertainty
from tcmqa.leaderboard.rescored import KEY_REVISION, NOT_RESCORED, Rescorer
from tcmqa.leaderboard.scale import Scale, Scales
from tcmqa.passmark import PASS_MARK, check_mark, verdict
from tcmqa.prompts import PROTOCOL
from tcmqa.quick_anchors import estimate_text
from tcmqa.results import PAPER_HUMAN_REFERENCE, canonical_family
from tcmqa.runs import data_fingerprint
from tcmqa.schema import RATERS_PER_ITEM, RESULT_COLUMNS
from tcmqa.store import Store

HUMAN_SUBSET = PAPER_HUMAN_REFERENCE  # the practitioners' majority vote on the subset (paper, Table 4)
HUMAN_NAME = "Licensed practitioners (majority vote)"

# The board's columns, in order, as the schema declares them (tcmqa.schema.RESULT_COLUMNS).
BOARD_COLUMNS = [c for c in RESULT_COLUMNS if c.board]
COLUMNS: dict[str, str] = {c.label: c.name for c in BOARD_COLUMNS}  # board label -> results field
P_VALUES = [c.label for c in BOARD_COLUMNS if c.name == "order_p"]  # significant digits: 1e-9 is not 0.0
# board label -> (the field its value is read against, the word before that in the cell): one text cell each
READ_AGAINST = {c.label: c.read_against for c in BOARD_COLUMNS if c.read_against}
NUMERIC_COLUMNS = [
    c.label for c in BOARD_COLUMNS if c.dtype != "string" and c.label not in P_VALUES and c.label not in READ_AGAINST
]
ORIGINS = ["reported", "evaluated", "reference"]
LABEL = {c.name: c.label for c in BOARD_COLUMNS}  # results field -> board label
# what the practitioners' responses change (Reference.rows recounts them all)
REFERENCE_FIELDS = ("subset", "human_reference", "delta_human", "n_subset", "subset_ci_low", "subset_ci_high")
ROW = "_row"  # hidden: an evaluated row's position among the merged rows (select() never shows it)


@dataclasses.dataclass(frozen=True)
class DerivedColumn:
    """A board column computed from a results row (not a results field), placed after ``after``; declared like a
    results column (:class:`tcmqa.schema.ResultColumn`), since the About tab's table of columns is generated from it."""

    label: str
    after: str  # the board column it follows
    shown: bool  # on the board by default
    doc: str
    covers: str = ""  # the items it is computed on ('' where not computed on items)
    higher_is_better: bool | None = None  # None: not a score
    numeric: bool = False  # a number (sorted as one), else text

    def __post_init__(self) -> None:
        if not self.doc.strip():
            raise ValueError(f"board column {self.label!r} says nothing: declare its doc")


FULL_CI = "Full 95% CI"
SUBSET_CI = "Subset 95% CI"
SUBSET_ON = "Subset on"
SEPARATION = "≈ next by Full"
FRESH_CI = "Fresh 95% CI"
GAP_CI = "Gap 95% CI"
GAP_MARK = "⚑"  # the Gap vs human interval lies above 0
ABILITY = "Ability"
ABILITY_SE = "Ability SE"
PASSES = "Passes"
ESTIMATE = "Quick estimate"
DERIVED = (
    DerivedColumn(FULL_CI, "Full", True, "95% bootstrap interval of Full, percent (items resampled)", "Full's items"),
    DerivedColumn(
        SEPARATION,
        FULL_CI,
        True,
        "'≈ <model> (p=…)' when a paired exact McNemar test on the common items does not separate the row from "
        "<model>, the next better comparable evaluated row by Full (p >= 0.05); '≠ <model> (p=…)' when it does; "
        "empty when not tested. The mark names the row it was tested against, so it keeps its meaning however "
        "the board is sorted or filtered",
        "the items both rows answered",
    ),
    DerivedColumn(
        KEY_REVISION,
        SEPARATION,
        True,
        "the keys Full is scored on: their data fingerprint (12 characters); '(rescored)' after it for a row run "
        "before the served data's errata and rescored on its corrected keys from its stored predictions, without "
        "rerunning (a corrected key's items scored again, dropped items out of n); 'not rescored' for a row without "
        "per-item outputs here (imported, or the paper's), whose Full is as recorded on the keys before the errata",
        "Full's items",
    ),
    DerivedColumn(
        SUBSET_CI,
        "Subset",
        False,
        "95% bootstrap interval of Subset, percent (items resampled), recounted with Subset whenever practitioners' "
        "responses change the subset",
        "Subset's items",
    ),
    DerivedColumn(
        SUBSET_ON,
        SUBSET_CI,
        False,
        "the subset Subset and Δ human are on: 'current <version>' (counted from the row's outputs on the subset "
        "as it stands, practitioner mode) or 'as recorded' (no outputs here: what its run recorded back then)",
    ),
    DerivedColumn(
        FRESH_CI,
        "Fresh",
        True,
        f"95% bootstrap interval of Fresh and its n (pool items); 'pool too small (n)' while the hidden pool holds "
        f"fewer than {MIN_POOL} accepted items (the fresh columns are then empty); 'on pool <version>' when the row's "
        "fresh columns are on another pool version than the board's (its back-fill is queued)",
        "Fresh's items",
    ),
    DerivedColumn(
        GAP_CI,
        "Gap vs human",
        True,
        f"95% normal interval of Gap vs human; {GAP_MARK} where it lies above 0: the model gains on the public items "
        "more than the practitioners do, which points at memorisation",
        "Gap vs human's items",
    ),
    DerivedColumn(
        ABILITY,
        SEPARATION,
        True,
        "ability on the one scale of models and practitioners (a 2PL item-response fit over the comparable models' "
        "per-item outcomes and every practitioner's answers, refitted in the background as rows arrive; the Plots "
        "tab draws both); the practitioners' comparable reference row: the median practitioner's. Empty until "
        "fitted",
        "the comparable models' items; each practitioner's answered items",
        True,
        numeric=True,
    ),
    DerivedColumn(ABILITY_SE, ABILITY, True, "standard error of Ability", "Ability's", False, numeric=True),
    DerivedColumn(
        PASSES,
        ABILITY_SE,
        True,
        "whether the row reaches the licensing exam's pass mark (TCMQA_PASS_MARK, default 60%: 360 of 600 points) "
        "on the full corpus (Full), on fresh items where it has them (Fresh), and in how many units (the corpus's "
        "domains) of those with items; the model page lists each",
        "Full's, Fresh's and each unit's items",
    ),
    DerivedColumn(
        ESTIMATE,
        "Full",
        True,
        "a quick job's estimate of Full from its anchor items only, '≈ value ± error': the error is the root mean "
        "square error of the estimate when each of the board's models is left out in turn (measured, not assumed); "
        "with too few models to fit, the default anchors and the estimate's binomial standard error. Quick rows "
        "have no Full: they are never ranked, plotted, compared or tested against full rows, and a full run of the "
        "same model and revision replaces its estimate",
        "the anchor items (a quick job's)",
        True,
    ),
)


def _labels() -> list[str]:
    """Every column the board offers, in board order: the schema's, each derived one after its ``after``."""
    labels = list(COLUMNS)
    for column in DERIVED:
        labels.insert(labels.index(column.after) + 1, column.label)
    return labels


LABELS = _labels()
CHOICES = LABELS[1:]  # the column chooser (Model is always shown)
_SHOWN = {c.label for c in BOARD_COLUMNS if c.shown} | {c.label for c in DERIVED if c.shown}
DEFAULT_COLUMNS = [label for label in LABELS if label in _SHOWN]

# The Comparison column: always shown, right after Model; the groups in board order.
COMPARISON = "Comparison"
COMPARABLE = "comparable"
PARTIAL = "partial"
OTHER_PROTOCOL = "other protocol"
OTHER_DATA = "other data"
UNKNOWN_DATA = "data unknown"
PAPER = "reported in the paper"
QUICK_ESTIMATE = "quick estimate"  # a quick job's row: an estimate of Full, kept apart from every full row
COMPARISONS = [COMPARABLE, PARTIAL, OTHER_PROTOCOL, OTHER_DATA, UNKNOWN_DATA, PAPER, QUICK_ESTIMATE]
_RANK = {label: rank for rank, label in enumerate(COMPARISONS)}
COMPARISON_COLUMN = DerivedColumn(
    COMPARISON,
    "Model",
    True,
    "what the row can be ranked against: 'comparable' (the data the Space serves, by Data fingerprint; the current "
    "protocol; Coverage 100%), 'partial' (a run on part of the items), 'other protocol', 'other data' (another "
    "fingerprint, e.g. a demo tree or the corpus before a fix), 'data unknown' (a row that recorded no fingerprint) "
    "or 'reported in the paper' (the paper's own corpus); only comparable rows are ranked against each other, the "
    "others are shown for reference; 'quick estimate' rows (a quick job's estimate of Full, no Full) always come "
    "last, whatever the sort",
)
# the board table's label in the Space: how to read the Comparison column
LEGEND = (
    "Leaderboard, in the order the sort control says. Comparison: only 'comparable' rows (the served data, the "
    "current protocol, full coverage) can be ranked against each other; 'partial' (a run on part of the items), "
    "'other protocol', 'other data', 'data unknown' and 'reported in the paper' (the paper's own corpus) are "
    "shown for reference (filter them with Comparison above). ≈ next by Full: a paired test does not separate "
    "the row from the model it names, the next better comparable row by Full, whatever the sort (≠: it does; "
    "see About). 'quick estimate' rows, always last: Full estimated from a few hundred anchor items, "
    "'≈ value ± error' in Quick estimate, never ranked or plotted with full rows; upgrade one in Submit"
)


def reported_rows() -> pd.DataFrame:
    """The paper's Table 4, shipped with the package as tcmqa/data/reported.csv."""
    with resources.files("tcmqa").joinpath("data/reported.csv").open(encoding="utf-8") as f:
        frame = pd.read_csv(f)
    return frame.assign(origin="reported", protocol="paper")


@functools.cache
def _reported_records() -> tuple[dict[str, Any], ...]:
    """:func:`reported_rows` as records with their Comparison label, read once per process."""
    return tuple(reported_rows().assign(comparison=PAPER).to_dict("records"))


FRESH_FIELDS = ("fresh", "public_minus_fresh", "fresh_gap", "fresh_after_release")  # empty while the pool is small


@dataclasses.dataclass(frozen=True)
class PoolFacts:
    """The hidden pool as the board shows it: its version, its accepted items and the practitioners' blind-answer
    verdicts (majority correct) on those that have one. Never an item's text."""

    version: str = ""
    size: int = 0
    human: tuple[bool, ...] = ()

    @property
    def shown(self) -> bool:
        """The fresh columns are shown once the pool holds ``MIN_POOL`` items."""
        return self.size >= MIN_POOL

    @classmethod
    def of(cls, store: Any, raters: int) -> PoolFacts:
        """The store's accepted pool now, its reference the majority of the study's N (``raters``) blind answers."""
        return cls(
            store.fresh_pool_version(),
            len(store.accepted_fresh_items()),
            tuple(store.fresh_reference(raters).values()),
        )


def fresh_text(row: dict[str, Any], pool: PoolFacts) -> str:
    """The "Fresh 95% CI" text of an evaluated row (:data:`DERIVED`)."""
    if not pool.shown:
        return f"pool too small ({pool.size})"
    if row.get("fresh") is None or pd.isna(row["fresh"]):
        return ""
    text = f"{uncertainty.interval_text(row.get('fresh_ci_low'), row.get('fresh_ci_high'))} n={row.get('n_fresh')}"
    version = row.get("pool_version")
    return text if version == pool.version else f"{text}, on pool {str(version)[:12]}"


def gap_text(row: dict[str, Any], pool: PoolFacts) -> str:
    """The "Gap 95% CI" text of an evaluated row: its interval, marked where it lies above 0."""
    low, high = row.get("fresh_gap_low"), row.get("fresh_gap_high")
    if not pool.shown or low is None or pd.isna(low):
        return ""
    return f"{uncertainty.interval_text(low, high)}{' ' + GAP_MARK if low > 0 else ''}"


def human_fresh(pool: PoolFacts) -> dict[str, Any]:
    """The practitioners' reference row's fresh cells: their blind answers' accuracy on the pool, with its interval."""
    if not pool.shown or not pool.human:
        return {}
    from tcmqa.results import interval

    correct = pd.Series(pool.human, dtype=float)
    low, high = interval(correct)
    return {"fresh": 100 * correct.mean(), FRESH_CI: f"{uncertainty.interval_text(low, high)} n={len(correct)}"}


def human_row(subset: float = HUMAN_SUBSET, **facts: Any) -> dict[str, Any]:
    """The practitioners' reference row: the paper's by default, or one computed on other items."""
    return {"model": HUMAN_NAME, "origin": "reference", "family": "Human", "subset": subset, "delta_human": 0.0} | facts


def coverage(row: dict[str, Any]) -> float | None:
    """A row's coverage in percent: recorded, or n / n_corpus; None when neither was recorded."""
    value = row.get("coverage")
    if value is None and row.get("n") and row.get("n_corpus"):
        value = 100 * row["n"] / row["n_corpus"]
    return None if value is None or pd.isna(value) else float(value)


def is_full(row: dict[str, Any]) -> bool:
    value = coverage(row)
    return value is not None and value >= 100 - 1e-6


def served_fingerprint(data: str) -> str:
    """The fingerprint a full run on ``data`` records: that of its scorable corpus (every unflagged item, in
    order), by the harness's own rule."""
    from tcmqa.data import load_config

    return data_fingerprint([item for item in load_config(data, "corpus").to_list() if not item["flagged"]])


def reference_fingerprint(rows: Sequence[dict[str, Any]], protocol: str = PROTOCOL) -> str | None:
    """The fingerprint most full-coverage evaluated rows under ``protocol`` share (see the module doc)."""
    full = [r for r in rows if r.get("data_fingerprint") and r.get("protocol") == protocol and is_full(r)]
    if not full:
        return None
    counts = Counter(r["data_fingerprint"] for r in full)
    latest: dict[str, str] = {}
    for r in full:
        latest[r["data_fingerprint"]] = max(latest.get(r["data_fingerprint"], ""), str(r.get("date") or ""))
    return max(sorted(counts), key=lambda f: (counts[f], latest[f]))  # max keeps the first of equals


def comparison(row: dict[str, Any], data_fingerprint: str | None, protocol: str = PROTOCOL) -> str:
    """The row's Comparison label against the board's reference (data fingerprint, protocol)."""
    if row.get("origin") == "reported":
        return PAPER
    if not row.get("data_fingerprint"):
        return UNKNOWN_DATA
    if (row.get("key_revision") or row["data_fingerprint"]) != data_fingerprint:  # rescored: on the served keys
        return OTHER_DATA
    if row.get("protocol") != protocol:
        return OTHER_PROTOCOL
    return COMPARABLE if is_full(row) else PARTIAL


def read_against(value: Any, against: Any, word: str) -> str:
    """A value with what it is read against, in one cell: '6.47 (chance 4.17)'; '' without a value.

    >>> read_against(6.4712, 100 / 24, "chance"), read_against(None, 4.17, "chance"), read_against(3.0, None, "LP")
    ('6.47 (chance 4.17)', '', '3.00 (LP not recorded)')
    """
    if value is None or pd.isna(value):
        return ""
    other = "not recorded" if against is None or pd.isna(against) else f"{float(against):.2f}"
    return f"{float(value):.2f} ({word} {other})"


def _sort_key(values: pd.Series) -> pd.Series:
    """A read-against cell sorts by its value, the number before the parenthesis; any other column as it is."""
    if values.name in READ_AGAINST:
        return pd.to_numeric(values.str.partition(" ")[0], errors="coerce")
    return values


def order(frame: pd.DataFrame, sort_by: str = "Full", descending: bool = True) -> pd.DataFrame:
    """Sort by ``sort_by`` alone (empty cells last); ties keep the Comparison groups' order (comparable first),
    which is a tie-break, never a key above the sort the visitor chose."""
    ranks = frame[COMPARISON].map(_RANK).fillna(len(_RANK)).to_numpy()
    frame = frame.iloc[np.argsort(ranks, kind="stable")]
    if sort_by in frame:
        frame = frame.sort_values(sort_by, ascending=not descending, na_position="last", kind="stable", key=_sort_key)
    # an estimate is never ranked among full rows: the quick rows come after every other, whatever the sort
    return frame.iloc[np.argsort((frame[COMPARISON] == QUICK_ESTIMATE).to_numpy(), kind="stable")]


def subset_on(row: dict[str, Any]) -> str:
    """The "Subset on" text of a row (:data:`DERIVED`); '' where the board does not recount (no practitioner mode)."""
    version = row.get("subset_version")
    return "" if not version else version if version == "as recorded" else f"current {version}"


def human_value(rows: Sequence[dict[str, Any]]) -> float | None:
    """The practitioners' comparable reference: the majority vote on the comparable rows' own subset items
    (their most common ``human_reference``); None when no comparable row carries one."""
    humans = [r["human_reference"] for r in rows if r["comparison"] == COMPARABLE and r.get("human_reference")]
    return Counter(round(float(v), 6) for v in humans).most_common(1)[0][0] if humans else None


def with_reference(frame: pd.DataFrame, evaluated: Sequence[dict[str, Any]]) -> pd.DataFrame | None:
    """``frame`` (a :func:`merge` of rows like ``evaluated``) with the subset columns of ``evaluated``: what a
    practitioner's response changes, set in place of a whole merge. None when the comparable reference row
    would appear or vanish (a merge then places it)."""
    rows = [r for r in evaluated if r.get("origin") != "reported"]
    at = frame[ROW].dropna().astype(int)
    if len(at) != len(rows):
        return None
    comparisons = frame.loc[at.index, COMPARISON].tolist()
    value = human_value([{**rows[i], "comparison": c} for i, c in zip(at, comparisons, strict=True)])
    human = (frame["Origin"] == "reference") & (frame[COMPARISON] == COMPARABLE)
    if (value is None) == bool(human.any()):
        return None
    frame = frame.copy()
    for field in REFERENCE_FIELDS:
        label = LABEL.get(field)
        if label is not None:
            values = pd.to_numeric(pd.Series([rows[i].get(field) for i in at], index=at.index), errors="coerce")
            frame.loc[at.index, label] = values.round(2)
    for label in (SUBSET_CI, SUBSET_ON):
        frame.loc[at.index, label] = [_derived(rows[i])[label] for i in at]
    if value is not None:
        frame.loc[human, "Subset"] = round(value, 2)
    return frame


def _derived(row: dict[str, Any]) -> dict[str, str]:
    """The text columns of an evaluated row that are not results fields: the intervals, the subset they are on,
    and each value with what it is read against (keyed by its results field, renamed with the rest)."""
    against = {
        COLUMNS[label]: read_against(row.get(COLUMNS[label]), row.get(field), word)
        for label, (field, word) in READ_AGAINST.items()
    }
    return {
        FULL_CI: uncertainty.interval_text(row.get("full_ci_low"), row.get("full_ci_high")),
        SUBSET_CI: uncertainty.interval_text(row.get("subset_ci_low"), row.get("subset_ci_high")),
        SUBSET_ON: subset_on(row),
        **against,
    }


def quick_rows(estimates: Sequence[Any], evaluated: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The board rows of finished quick jobs (``estimates``, newest first: :meth:`tcmqa.store.Store.quick_estimates`):
    the latest per model and revision, none for a model and revision that has an evaluated row (its full run
    replaced the estimate). No Full, no row position: the estimate is text, in its own group."""
    full = {(r.get("model"), r.get("revision")) for r in evaluated if r.get("origin") != "reported"}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for job in estimates:
        estimate = job.meta.get("estimate") or {}
        if not estimate or (job.model, job.revision) in full or (job.model, job.revision) in rows:
            continue
        family = estimate.get("family") or job.meta.get("family")
        rows[job.model, job.revision] = {
            "model": job.model,
            "revision": job.revision,
            "origin": "evaluated",
            "family": canonical_family(family)
            if (family := estimate.get("family") or job.meta.get("family"))
            else None,
            "params_b": estimate.get("params_b") or job.meta.get("params_b"),
            "date": estimate.get("date"),
            "engine": estimate.get("engine"),
            "protocol": job.protocol,
            "comparison": QUICK_ESTIMATE,
            ESTIMATE: estimate_text(estimate),
        }
    return list(rows.values())


def merge(
    evaluated: Sequence[dict[str, Any]],
    data_fingerprint: str | None = None,
    protocol: str = PROTOCOL,
    correctness: uncertainty.Correctness | None = None,
    marks: dict[tuple[uncertainty.Key, uncertainty.Key], float | None] | None = None,
    pool: PoolFacts | None = None,
    quick: Sequence[dict[str, Any]] = (),
) -> pd.DataFrame:
    """Reported + reference + evaluated rows, in board columns with a Comparison label, by Full descending; then
    the quick estimates (:func:`quick_rows`), in their own group, with no Full.

    ``pool``: the hidden pool (:class:`PoolFacts`); the fresh columns stay empty while it is too small.

    ``data_fingerprint``: the board's reference data (default: :func:`reference_fingerprint`).
    ``correctness``: per-item correctness by (model, revision) (:class:`tcmqa.leaderboard.outcomes.ByKey`), for
    the separation marks; None or a missing key: no mark. ``marks``: the marks' cache of p-values
    (:func:`uncertainty.separation_marks`).
    """
    pool = pool or PoolFacts()
    rows = [r for r in evaluated if r.get("origin") != "reported"]  # the paper's rows come from the CSV
    reference = data_fingerprint or reference_fingerprint(rows, protocol)
    rows = [
        {
            **r,
            **({} if pool.shown else dict.fromkeys(FRESH_FIELDS)),
            FRESH_CI: fresh_text(r, pool),
            GAP_CI: gap_text(r, pool),
            "family": canonical_family(r["family"]) if r.get("family") else None,
            "comparison": comparison(r, reference, protocol),
            **_derived(r),
            ROW: i,
        }
        for i, r in enumerate(rows)
    ]
    ranked = [r for r in rows if r["comparison"] == COMPARABLE]
    for r, mark in zip(ranked, uncertainty.separation_marks(ranked, correctness or {}, marks), strict=True):
        r[SEPARATION] = mark
    references = [human_row(protocol="paper", comparison=PAPER)]
    value = human_value(rows)
    if value is not None:  # the majority vote on the comparable rows' own subset items
        references.append(
            human_row(
                value,
                data_fingerprint=reference,
                protocol=protocol,
                coverage=100.0,
                comparison=COMPARABLE,
                **human_fresh(pool),
            )
        )
    frame = pd.DataFrame([*_reported_records(), *references, *rows, *quick])  # one frame of dicts: no concat of dtypes
    labels = {v: k for k, v in COLUMNS.items()} | {"comparison": COMPARISON}
    frame = frame.rename(columns=labels).reindex(columns=["Model", COMPARISON, *CHOICES, ROW])
    frame["Origin"] = frame["Origin"].fillna("evaluated")
    frame["Family"] = frame["Family"].fillna("unknown")
    frame["Revision"] = frame["Revision"].astype(object).fillna("").astype(str).str[:12]
    for name in [*[c.label for c in DERIVED if not c.numeric], *READ_AGAINST]:  # text; reported, reference: none
        frame[name] = frame[name].astype(object).fillna("")
    for name in [*NUMERIC_COLUMNS, *[c.label for c in DERIVED if c.numeric]]:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").round(2)
    for name in P_VALUES:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").map(formats.significant)
    frame = order(frame).reset_index(drop=True)
    frame.attrs["reference"] = {"data_fingerprint": reference, "protocol": protocol}
    return frame


def select(
    frame: pd.DataFrame,
    search: str = "",
    families: Sequence[str] = (),
    size_min: float | None = None,
    size_max: float | None = None,
    origins: Sequence[str] = ORIGINS,
    columns: Sequence[str] = DEFAULT_COLUMNS,
    sort_by: str = "Full",
    descending: bool = True,
    comparisons: Sequence[str] = COMPARISONS,
) -> pd.DataFrame:
    """The visible board: filter by model text, family, parameter range, origin and Comparison group;
    choose columns; sort by ``sort_by`` (:func:`order`: the sort chosen is the order shown).

    Model and Comparison are always shown. The practitioners' reference rows have no size and are
    kept whenever their origin is selected, so they stay on the board as the line to beat.
    """
    keep = frame["Origin"].isin(origins) & frame[COMPARISON].isin(comparisons)
    if search.strip():
        keep &= frame["Model"].str.contains(search.strip(), case=False, regex=False)
    if families:
        keep &= frame["Family"].isin(families) | (frame["Origin"] == "reference")
    sized = frame["Params (B)"]
    if size_min is not None:
        keep &= (sized >= size_min) | sized.isna()
    if size_max is not None:
        keep &= (sized <= size_max) | sized.isna()
    shown = order(frame[keep], sort_by, descending)
    wanted = ["Model", COMPARISON, *[c for c in CHOICES if c in columns]]
    return shown[wanted].reset_index(drop=True)


def pass_note(mark: float) -> str:
    """The board's line on the pass mark, under the table."""
    return (
        f"**Pass mark {mark:g}%** (the licensing exam's written test passes at 360 of 600 points, 60%; "
        "TCMQA_PASS_MARK): **Passes** says whether a row reaches it on Full, on Fresh and in how many units; the "
        "Plots tab draws it as a line. **Ability** (± **Ability SE**): the one scale of models and practitioners."
    )


def with_scale(frame: pd.DataFrame, runs: Sequence[str | None], scale: Scale | None, mark: float) -> pd.DataFrame:
    """``frame`` (a :func:`merge`) with the one scale's columns: each comparable evaluated row's Ability and its
    SE (its run, ``runs[row]``, in ``scale``), the comparable practitioners' reference row's (the median
    practitioner), and every comparable or paper row's Passes at ``mark`` (Full, Fresh, and the units of its run)."""
    frame = frame.copy()
    comparable = frame[COMPARISON] == COMPARABLE
    evaluated = comparable & frame[ROW].notna()
    run = frame.loc[evaluated, ROW].astype(int).map(lambda i: runs[i])
    units: dict[str, dict[str, float]] = {}
    if scale is not None:
        fitted = scale.by_run()
        frame.loc[evaluated, ABILITY] = run.map(fitted["theta"]).round(2)
        frame.loc[evaluated, ABILITY_SE] = run.map(fitted["theta_se"]).round(2)
        people = scale.practitioners()
        if len(people):
            median = round(float(people["theta"].median()), 2)
            frame.loc[comparable & (frame["Origin"] == "reference"), ABILITY] = median
        units = scale.units
    scored = (comparable | (frame[COMPARISON] == PAPER)) & frame["Full"].notna() & (frame["Origin"] != "reference")
    frame.loc[scored, PASSES] = [
        verdict(full, fresh, units.get(str(run.get(i)), {}), mark)
        for i, full, fresh in zip(frame.index[scored], frame.loc[scored, "Full"], frame.loc[scored, "Fresh"])
    ]
    return frame


def plot_frames(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Plots tab's data: accuracy against size (rows with both), and Subset accuracy high to low."""
    scored = frame.dropna(subset=["Full", "Params (B)"])
    scatter = pd.DataFrame(
        {
            "model": scored["Model"],
            "params_b": scored["Params (B)"],
            "full": scored["Full"],
            "family": scored["Family"],
            "origin": scored["Origin"],
            "comparison": scored[COMPARISON],
        }
    )
    subset = frame.dropna(subset=["Subset"]).sort_values("Subset", ascending=False)
    bars = pd.DataFrame(
        {
            "model": subset["Model"],
            "subset": subset["Subset"],
            "origin": subset["Origin"],
            "comparison": subset[COMPARISON],
        }
    )
    return scatter, bars


class Board:
    """The merged board for one store, rebuilt only when the store's results change.

    ``data_fingerprint``: the board's reference data (the fingerprint of the data the Space serves,
    when known); by default the fingerprint most full-coverage rows share. ``protocol``: the reference
    protocol, the harness's current one by default.
    """

    def __init__(
        self,
        store: Store,
        data_fingerprint: str | None = None,
        protocol: str = PROTOCOL,
        practice: Any = None,
        raters: int = RATERS_PER_ITEM,
        scales: Scales | None = None,
        pass_mark: float = PASS_MARK,
        rescorer: Rescorer | None = None,
    ):
        self.store = store
        self.scales = scales  # the one scale, fitted in the background (tcmqa.leaderboard.scale)
        self.pass_mark = check_mark(pass_mark)
        self._runs: list[str | None] = []  # the run each evaluated row (its ROW) reads
        self._shown: tuple[pd.DataFrame, Scale | None, pd.DataFrame] | None = None  # (merged, fit, shown)
        self._asked: tuple[str, str] | None = None  # the (store, practice) versions the scale was last asked on
        self.data_fingerprint = data_fingerprint
        self.protocol = protocol
        self.practice = practice  # a tcmqa.leaderboard.practice.Practice: the reference grows with its responses
        self.reference = outcomes.shared(store)  # every run's per-item correctness: the refresh reads no output row
        self._lock = threading.Lock()
        self._version: str | None = None  # of the results and outcomes merged
        self._practice_version = ""  # of the practitioners' responses the subset columns are on
        self._results: list[dict[str, Any]] = []
        self._frame = merge([], data_fingerprint, protocol)
        # p-values of the pairs tested (their runs unchanged)
        self._marks: dict[tuple[uncertainty.Key, uncertainty.Key], float | None] = {}
        self._pool = PoolFacts()  # the hidden pool the fresh columns are shown against
        self._quick: list[Any] = []  # the finished quick jobs (their estimates)
        self.raters = raters  # the study's N: the practitioners' reference on fresh items is their majority
        self.rescorer = rescorer  # the served data's errata: rows run before them rescored on the corrected keys

    def _rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The evaluated rows; with practitioner mode, Subset, Δ human and the practitioners' reference
        on the subset as it stands (the imported study plus the Space's own responses)."""
        if self.practice is not None:
            try:
                rows = self.practice.reference_rows(rows)
            except Exception:  # the data may be unreachable: the rows as recorded
                logging.getLogger("tcmqa.board").exception("recomputing the practitioners' reference failed")
        if self.rescorer is not None:
            rows = self.rescorer.rows(rows, self.reference)
        return rows

    def frame(self) -> pd.DataFrame:
        """The merged board. A finished or imported run merges it anew; a practitioner's response (only the
        practice version changed) sets the subset columns in place (:func:`with_reference`)."""
        pool_version = self.store.fresh_pool_version()
        version = f"{self.store.version()}|{self.store.outcomes_version()}|{pool_version}|{self.store.quick_version()}"
        practice = self.store.practice_version() if self.practice is not None else ""
        with self._lock:
            if version == self._version and practice != self._practice_version:
                frame = with_reference(self._frame, self._rows(self._results))
                if frame is not None:
                    self._frame, self._practice_version = frame, practice
            if version != self._version or practice != self._practice_version:
                changed = self.reference.update()  # models with a run added, re-recorded or withdrawn
                if changed:  # their pairs are tested again (a row without revision reads its model's latest run)
                    self._marks = {pair: m for pair, m in self._marks.items() if not {pair[0][0], pair[1][0]} & changed}
                self._results = self.store.results()
                self._quick = self.store.quick_estimates()
                if pool_version != self._pool.version:
                    self._pool = PoolFacts.of(self.store, self.raters)
                correctness = outcomes.ByKey(self.reference.outcomes)
                rows = self._rows(self._results)
                quick = quick_rows(self._quick, rows)
                self._frame = merge(
                    rows, self.data_fingerprint, self.protocol, correctness, self._marks, self._pool, quick
                )
                if self.rescorer is not None and self.rescorer.errata:  # the paper's rows have no outputs here
                    self._frame.loc[self._frame["Origin"] == "reported", KEY_REVISION] = NOT_RESCORED
                self._version, self._practice_version = version, practice
                evaluated = [r for r in rows if r.get("origin") != "reported"]
                self._runs = [self.reference.outcomes.run_of(r.get("model"), r.get("revision")) for r in evaluated]
            if self.scales is not None and self._asked != (version, practice):  # fitted off the request path
                ranked = self._frame.loc[self._frame[COMPARISON] == COMPARABLE, ROW].dropna().astype(int)
                self.scales.request([run for i in ranked if (run := self._runs[i]) is not None])
                self._asked = (version, practice)
            return self._on_scale()

    def _on_scale(self) -> pd.DataFrame:
        """The merged frame with the latest fit's columns (:func:`with_scale`), recomputed when either changes."""
        latest = self.scales.latest if self.scales is not None else None
        if self._shown is None or self._shown[0] is not self._frame or self._shown[1] is not latest:
            self._shown = (self._frame, latest, with_scale(self._frame, self._runs, latest, self.pass_mark))
        return self._shown[2]

    def families(self) -> list[str]:
        return sorted(set(self.frame()["Family"]) - {"Human"})
