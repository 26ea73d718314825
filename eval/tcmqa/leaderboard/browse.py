"""Browse and search the explorer's items: a text search, filters, one model's outcome beside the
practitioners', and pages of results. Pure pandas, so it is tested and timed without a browser.

:func:`corpus_table` turns the corpus into one row per item (once per process: most of the cost), and
:func:`item_table` adds what the practitioners said (the responses and the subset; once per practice
version); :func:`select` filters it and :func:`page` cuts one page. Everything is in memory: a search is
one substring scan of a precomputed column (stem and options, NFKC-normalised and case-folded, so
full-width ``Ａ`` finds ``A``); a model's outcome needs only that model's correctness per item
(``ModelOutputs.of``), never every output row.

What each filter reads:

* **domain**: the practitioners' domains (the union over an item's responses, keys of
  :data:`tcmqa.schema.DOMAINS`); an item without responses: the corpus's own ``domains``;
* **answer type**: ``single`` or ``multi``;
* **rated difficulty**: the mean of the practitioners' 1-5 ratings, rounded to a level (1.5 is level 2);
  **source difficulty**: the corpus's ``source_difficulty``;
* **consensus**: ``n_correct`` of ``n_raters`` in the subset config (only subset items have one);
* **outcome**: the chosen model against the practitioners' majority (``majority_correct``) on the subset
  items it answered: :data:`OUTCOMES`.

Independence (:mod:`tcmqa.leaderboard.explorer`'s module doc). An item in an open practitioner block
keeps only what the corpus publishes (its stem and options for the search, answer type, source
difficulty, the corpus's domains); what the practitioners or the models said of it (consensus, rated
difficulty, the model's outcome) is blank in its row, and a filter on any of them leaves it out
entirely, so no count or page can tell how it was answered.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from collections.abc import Iterable

import numpy as np
import pandas as pd

from tcmqa.leaderboard import lang
from tcmqa.leaderboard.board import COMPARABLE, COMPARISON
from tcmqa.schema import DOMAINS

PAGE_SIZE = 25
STEM_CHARS = 60  # a result row's stem is cut to this many characters
# outcome label -> (practitioners' majority correct, model correct)
OUTCOMES: dict[str, tuple[bool, bool]] = {
    "practitioners right, model wrong": (True, False),
    "model right, practitioners wrong": (False, True),
    "both right": (True, True),
    "both wrong": (False, False),
}
ANSWER_TYPES = ("single", "multi")
RATED_LEVELS = (1, 2, 3, 4, 5)
ROW_COLUMNS = ["id", "stem", "answer type", "domain", "consensus", "model outcome", "difficulty", "discrimination"]
PARAMETERS = ("difficulty", "discrimination")  # the one scale's, per item (tcmqa.leaderboard.scale)


class Refused(ValueError):
    """A query the explorer cannot answer; the message is for the visitor (it names only what they sent)."""


@dataclasses.dataclass(frozen=True)
class Filters:
    """One browse query; None (or an empty search) leaves that filter off."""

    search: str = ""
    domain: str | None = None  # a key of tcmqa.schema.DOMAINS
    answer_type: str | None = None  # "single" | "multi"
    rated_difficulty: int | None = None  # 1..5, the practitioners' mean rounded
    source_difficulty: int | None = None
    consensus: int | None = None  # practitioners correct (n_correct)
    outcome: str | None = None  # a key of OUTCOMES

    def __post_init__(self) -> None:
        if self.domain is not None and self.domain not in DOMAINS:
            raise Refused(f"unknown domain {self.domain!r}: one of {', '.join(DOMAINS)}")
        if self.answer_type is not None and self.answer_type not in ANSWER_TYPES:
            raise Refused(f"unknown answer type {self.answer_type!r}: single or multi")
        if self.rated_difficulty is not None and self.rated_difficulty not in RATED_LEVELS:
            raise Refused(f"rated difficulty {self.rated_difficulty!r} is not a level 1-5")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise Refused(f"unknown outcome {self.outcome!r}: one of {'; '.join(OUTCOMES)}")


@dataclasses.dataclass(frozen=True)
class Page:
    """One page of results: its rows (:data:`ROW_COLUMNS`), the total matching, and where it is."""

    rows: pd.DataFrame
    total: int
    number: int  # 1-based, clamped to the pages there are
    pages: int

    def summary(self) -> str:
        return f"{self.total:,} items · page {self.number} of {self.pages}"


def folded(text: str) -> str:
    """What the search compares: NFKC (full-width letters and digits become ASCII) and case-folded."""
    return unicodedata.normalize("NFKC", text or "").casefold()


def _keys(domains: Iterable[str] | None) -> tuple[str, ...]:
    """Domain keys in DOMAINS order, unknown ones dropped."""
    found = set(domains if domains is not None else ())
    return tuple(k for k in DOMAINS if k in found)


def _rater_domains(responses: pd.DataFrame) -> pd.Series:
    """item id -> the union of its responses' domain keys (a tuple in DOMAINS order; empty when none
    ticked one). Vectorised: each distinct (item, domain) pair adds its domain's bit, and each distinct
    bit mask is spelled out once."""
    bit = {key: 1 << i for i, key in enumerate(DOMAINS)}
    pairs = responses[["item_id", "domains"]].explode("domains")
    pairs = pairs[pairs["domains"].isin(list(DOMAINS))].drop_duplicates()
    masks = pairs["domains"].map(bit).groupby(pairs["item_id"]).sum()
    spelled = {m: tuple(k for k, b in bit.items() if m & b) for m in masks.unique()}
    return pd.Series({**dict.fromkeys(responses["item_id"].unique(), ()), **masks.map(spelled).to_dict()})


def corpus_table(corpus: pd.DataFrame) -> pd.DataFrame:
    """What the corpus alone gives, one row per item (corpus order), indexed by id: ``stem``, ``text`` (what
    the search scans), ``answer_type``, ``corpus_domains`` (a tuple of keys), ``source_difficulty``. Built once
    per process: the NFKC pass over every stem and option is most of the browse table's cost."""
    options = corpus["options"].map(lambda o: " ".join(str(v) for v in (o or {}).values())).to_numpy()
    stems = corpus["question"].fillna("").astype(str).to_numpy()
    return pd.DataFrame(
        {
            "stem": stems,
            "text": [folded(f"{q} {o}") for q, o in zip(stems, options)],
            "answer_type": corpus["answer_type"].astype(str).to_numpy(),
            "corpus_domains": corpus["domains"].map(_keys).to_numpy(),
            "source_difficulty": pd.to_numeric(corpus["source_difficulty"], errors="coerce").to_numpy(),
        },
        index=pd.Index(corpus["id"].astype(str).to_numpy(), name="id"),
    )


def item_table(items: pd.DataFrame, responses: pd.DataFrame, subset: pd.DataFrame) -> pd.DataFrame:
    """:func:`corpus_table`'s ``items`` (left as they are) with what the practitioners said:
    ``rater_domains`` (a tuple of keys; NaN without a response), ``level`` (the mean rating's level, 0
    unrated), ``n_correct`` and ``n_raters`` (-1 off the subset), ``majority_correct`` (NA off the subset)."""
    table = items.copy()
    table["rater_domains"] = pd.Series(dtype=object)
    table["level"] = 0
    if len(responses):
        responses = responses.assign(item_id=responses["item_id"].astype(str))
        table["rater_domains"] = _rater_domains(responses)
        mean = pd.to_numeric(responses["difficulty"], errors="coerce").groupby(responses["item_id"]).mean()
        table["level"] = mean.dropna().map(rated_level).reindex(table.index).fillna(0).astype(int)
    table["n_correct"], table["n_raters"] = -1, -1
    table["majority_correct"] = pd.Series(pd.NA, index=table.index, dtype=object)
    if len(subset):
        rows = subset.assign(item_id=subset["item_id"].astype(str)).set_index("item_id")
        known = table.index.intersection(rows.index)
        table.loc[known, "n_correct"] = rows.loc[known, "n_correct"].astype(int).to_numpy()
        table.loc[known, "n_raters"] = rows.loc[known, "n_raters"].astype(int).to_numpy()
        table.loc[known, "majority_correct"] = rows.loc[known, "majority_correct"].astype(bool).to_numpy()
    return table


def rated_level(mean: float) -> int:
    """The level of a mean rating: rounded half up (1.5 is 2), within 1-5."""
    return min(5, max(1, math.floor(mean + 0.5)))


def select(
    items: pd.DataFrame,
    filters: Filters,
    open_items: Iterable[str] = (),
    correct: pd.Series | None = None,
    parameters: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The items matching ``filters`` (corpus order) with their shown columns: ``domains`` (the
    practitioners', else the corpus's), ``consensus`` (e.g. ``2/3``), ``outcome`` (:func:`outcomes`) and the
    item's :data:`PARAMETERS`, blank where unknown or where the item is in ``open_items`` (module doc:
    independence). ``correct``: the chosen model's correctness by item id (None: no model chosen);
    ``parameters``: the one scale's items, indexed by item id (None: not fitted yet)."""
    hidden = items.index.isin(list(open_items))
    keep = np.ones(len(items), dtype=bool)
    query = folded(filters.search).strip()
    if query:
        keep &= items["text"].str.contains(query, regex=False).to_numpy(dtype=bool)
    domains = items["rater_domains"].where(items["rater_domains"].notna() & ~hidden, items["corpus_domains"])
    if filters.domain is not None:
        keep &= np.array([filters.domain in d for d in domains], dtype=bool)
    if filters.answer_type is not None:
        keep &= (items["answer_type"] == filters.answer_type).to_numpy()
    if filters.rated_difficulty is not None:
        keep &= ~hidden & (items["level"] == filters.rated_difficulty).to_numpy()
    if filters.source_difficulty is not None:
        keep &= (items["source_difficulty"] == filters.source_difficulty).to_numpy(dtype=bool)
    in_subset = (items["n_raters"] >= 0).to_numpy() & ~hidden
    if filters.consensus is not None:
        keep &= in_subset & (items["n_correct"] == filters.consensus).to_numpy()
    labels = outcomes(items, correct, hidden)
    if filters.outcome is not None:
        keep &= labels == filters.outcome
    chosen = items[keep]
    consensus = chosen["n_correct"].astype(str) + "/" + chosen["n_raters"].astype(str)
    fitted = pd.DataFrame(index=chosen.index, columns=list(PARAMETERS), dtype=float)
    if parameters is not None:
        fitted = parameters.reindex(chosen.index)[list(PARAMETERS)].astype(float)
        fitted.loc[hidden[keep]] = np.nan  # what the respondents said of an open block's item: withheld
    return pd.DataFrame(
        {
            "id": chosen.index,
            "stem": chosen["stem"].to_numpy(),
            "answer_type": chosen["answer_type"].to_numpy(),
            "domains": domains[keep].to_numpy(),
            "consensus": np.where(in_subset[keep], consensus.to_numpy(), ""),
            "outcome": labels[keep],
            **{name: fitted[name].to_numpy(float) for name in PARAMETERS},
        }
    )


def outcomes(items: pd.DataFrame, correct: pd.Series | None, hidden: np.ndarray) -> np.ndarray:
    """Each item's outcome text for the model of ``correct`` (by item id): an :data:`OUTCOMES` label on the
    subset items, ``model right``/``model wrong`` off the subset, blank where the model has no output, the
    item is ``hidden`` (in an open block) or no model is chosen."""
    labels = np.full(len(items), "", dtype=object)
    if correct is None:
        return labels
    model = correct.reindex(items.index)
    answered = model.notna().to_numpy() & ~hidden
    right = model.fillna(False).astype(bool).to_numpy()
    human = items["majority_correct"].fillna(False).astype(bool).to_numpy()
    subset = (items["n_raters"] >= 0).to_numpy()
    off = answered & ~subset
    labels[off] = np.where(right[off], "model right", "model wrong")
    for label, (practitioners, model_right) in OUTCOMES.items():
        labels[answered & subset & (human == practitioners) & (right == model_right)] = label
    return labels


def page(selected: pd.DataFrame, number: int = 1, size: int = PAGE_SIZE) -> Page:
    """Page ``number`` (1-based; clamped to the pages there are) of :func:`select`'s rows, as shown:
    :data:`ROW_COLUMNS`, the stem cut to :data:`STEM_CHARS`, domains by their names in the caller's language."""
    total = len(selected)
    pages = max(1, math.ceil(total / size))
    number = min(max(1, int(number)), pages)
    rows = selected.iloc[(number - 1) * size : number * size]
    shown = pd.DataFrame(
        {
            "id": rows["id"].to_numpy(),
            "stem": rows["stem"].map(lambda s: s if len(s) <= STEM_CHARS else s[: STEM_CHARS - 1] + "…").to_numpy(),
            "answer type": rows["answer_type"].to_numpy(),
            "domain": rows["domains"].map(lambda keys: "、".join(lang.domain(k) for k in keys)).to_numpy(),
            "consensus": rows["consensus"].to_numpy(),
            "model outcome": rows["outcome"].to_numpy(),
            **{name: _blank(rows[name].round(2)) for name in PARAMETERS},
        },
        columns=ROW_COLUMNS,
    )
    return Page(shown, total, number, pages)


def _blank(values: pd.Series) -> np.ndarray:
    """Numbers as shown in a row: blank where unknown, like the row's other cells."""
    return values.astype(object).where(values.notna(), "").to_numpy()


def model_choices(board: pd.DataFrame, with_outputs: Iterable[str]) -> list[str]:
    """The models with outputs, in the order the outcome filter offers them: the board's comparable rows
    first (board order, so the first is the leading comparable model, the default), then the board's other
    rows, then the rest by name. ``board``: ``Board.frame()`` (its Model and Comparison columns)."""
    available = set(with_outputs)
    ranked = board.assign(_later=board[COMPARISON] != COMPARABLE).sort_values("_later", kind="stable")
    ordered = [m for m in dict.fromkeys(ranked["Model"].astype(str)) if m in available]
    return ordered + sorted(available - set(ordered))
