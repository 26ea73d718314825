"""Two models side by side on their common items: accuracy by domain and answer type, the 2x2 outcome
table with McNemar's exact test and Cohen's κ, and the items where one is right and the other wrong.

Pure pandas (no gradio): :func:`compare` takes the corpus and the two models' rows
(``item_id``, ``correct``, ``prediction``); :class:`Comparator` reads them where they lie (each model's
one run, :meth:`tcmqa.leaderboard.model_outputs.ModelOutputs.of`: only its files, only those columns),
so a comparison costs two runs' reads whatever the number of models.

* Common items: those both runs scored, less flagged items (they are not scored).
* Domains: an item counts in each domain of its corpus ``domains`` (the raters' union); items no rater
  has classified are the ``unrated`` row.
* The statistics have one home, :mod:`tcmqa.stats`: ``mcnemar`` on the discordant items, ``cohen_kappa``
  on the two correctness vectors.
* Independence: an item in a practitioner block still being answered
  (:func:`tcmqa.leaderboard.practice.core.open_block_items`) never appears in the item list (its id
  beside a prediction marked right would give its answer away); it still counts in the aggregates,
  which name no item. The list says how many discordant items it withholds.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from tcmqa import stats
from tcmqa.data import load_config
from tcmqa.leaderboard import model_outputs
from tcmqa.leaderboard.practice.core import open_block_items
from tcmqa.schema import RATERS_PER_ITEM
from tcmqa.store import Store

UNRATED = "unrated"
PAGE_SIZE = 25
STEM_CHARS = 60
OUTCOMES = ("both right", "A only", "B only", "both wrong")
RUN_COLUMNS = ["item_id", "correct", "prediction"]
ITEM_COLUMNS = ["item_id", "right", "stem", "A", "B", "answer"]


def letters(value: Any) -> str:
    """A prediction or answer as shown: its letters joined by commas, an em dash for none."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "—"
    return ", ".join(str(v) for v in value) or "—"


def _percent(values: pd.Series) -> float:
    return round(100 * float(values.mean()), 1) if len(values) else float("nan")


def _accuracy_by(frame: pd.DataFrame, key: str, label: str) -> pd.DataFrame:
    """Per value of ``key``: the common items (n) and each model's exact match, percent."""
    groups = frame.groupby(key, sort=True)
    out = pd.DataFrame(
        {"n": groups.size(), "A %": groups["correct_a"].apply(_percent), "B %": groups["correct_b"].apply(_percent)}
    )
    return out.rename_axis(label).reset_index()


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The comparison of model A with model B on their common items (the module doc)."""

    model_a: str
    model_b: str
    n: int  # common items
    accuracy: pd.DataFrame  # rows "all" and each answer type: n, A %, B %
    by_domain: pd.DataFrame  # domain, n, A %, B %
    outcomes: pd.DataFrame  # the 2x2 table: rows A right / A wrong, columns B right / B wrong
    test: stats.PairedTest  # McNemar's exact test
    kappa: float  # Cohen's κ of the two correctness vectors
    differing: pd.DataFrame  # the discordant items shown (open-block items left out), A's right ones first
    withheld: int  # discordant items left out of the list: in open practitioner blocks

    def listed(self, right: str | None = None) -> pd.DataFrame:
        """The differing items shown, all or only those ``right`` ("A" or "B") got right."""
        if right is None:
            return self.differing
        if right not in ("A", "B"):
            raise ValueError(f"right is 'A', 'B' or None, not {right!r}")
        return self.differing[self.differing["right"] == right]

    def pages(self, size: int = PAGE_SIZE, right: str | None = None) -> int:
        return max(1, -(-len(self.listed(right)) // size))

    def page(self, number: int, size: int = PAGE_SIZE, right: str | None = None) -> pd.DataFrame:
        """Page ``number`` (from 1, clamped to the pages there are) of the differing items (those ``right``
        got right: "A", "B", or None for both): id, which model was right, the stem cut to
        :data:`STEM_CHARS`, A's and B's predictions, the answer."""
        number = min(max(int(number), 1), self.pages(size, right))
        rows = self.listed(right).iloc[(number - 1) * size : number * size].copy()
        rows["stem"] = rows["stem"].map(lambda s: s if len(s) <= STEM_CHARS else s[: STEM_CHARS - 1] + "…")
        for column in ("A", "B", "answer"):
            rows[column] = rows[column].map(letters)
        return rows[ITEM_COLUMNS].reset_index(drop=True)

    def summary(self) -> str:
        """The comparison in two lines of Markdown: the items, McNemar's p and κ."""
        if not self.n:
            return f"**{self.model_a}** and **{self.model_b}** have no scored item in common."
        t = self.test
        return (
            f"**A** = {self.model_a} · **B** = {self.model_b} · **{self.n:,}** common items\n\n"
            f"McNemar's exact test on the {t.only_a + t.only_b:,} discordant items (A only {t.only_a:,}, "
            f"B only {t.only_b:,}): p = {t.p_value:.4g} · Cohen's κ = {self.kappa:.3f}"
        )


def compare(
    corpus: pd.DataFrame,
    a: pd.DataFrame,
    b: pd.DataFrame,
    model_a: str = "A",
    model_b: str = "B",
    withheld: Iterable[str] = (),
) -> Comparison:
    """Compare two runs (rows ``item_id``, ``correct``, ``prediction``) on their common scored items.

    ``corpus``: rows ``id``, ``question``, ``answer``, ``answer_type``, ``domains`` and optionally
    ``flagged``; ``withheld``: item ids never listed (open practitioner blocks)."""
    items = corpus[~corpus["flagged"].astype(bool)] if "flagged" in corpus else corpus
    items = items[["id", "question", "answer", "answer_type", "domains"]].rename(columns={"id": "item_id"})
    both = (
        a[RUN_COLUMNS]
        .merge(b[RUN_COLUMNS], on="item_id", suffixes=("_a", "_b"))
        .merge(items, on="item_id")
        .sort_values("item_id", kind="stable")
        .reset_index(drop=True)
    )
    right_a, right_b = both["correct_a"].astype(bool).to_numpy(), both["correct_b"].astype(bool).to_numpy()
    both["correct_a"], both["correct_b"] = right_a, right_b
    accuracy = pd.concat(
        [_accuracy_by(both.assign(all="all"), "all", "items"), _accuracy_by(both, "answer_type", "items")],
        ignore_index=True,
    )
    domains = both.assign(domain=both["domains"].map(lambda d: list(d) if d is not None and len(d) else [UNRATED]))
    by_domain = _accuracy_by(domains.explode("domain"), "domain", "domain")
    cells = [[int((right_a & right_b).sum()), int((right_a & ~right_b).sum())]]
    cells.append([int((~right_a & right_b).sum()), int((~right_a & ~right_b).sum())])
    outcomes = pd.DataFrame(cells, columns=["B right", "B wrong"]).assign(**{"": ["A right", "A wrong"]})
    outcomes = outcomes[["", "B right", "B wrong"]]
    discordant = both[right_a != right_b].assign(right=np.where(right_a[right_a != right_b], "A", "B"))
    hidden = discordant["item_id"].isin(set(withheld))
    listed = discordant[~hidden].sort_values(["right", "item_id"], kind="stable")
    listed = listed.rename(columns={"question": "stem", "prediction_a": "A", "prediction_b": "B"})
    kappa = stats.cohen_kappa(right_a, right_b) if len(both) else float("nan")
    return Comparison(
        model_a,
        model_b,
        len(both),
        accuracy,
        by_domain,
        outcomes,
        stats.mcnemar(right_a, right_b),
        kappa,
        listed[ITEM_COLUMNS].reset_index(drop=True),
        int(hidden.sum()),
    )


class Comparator:
    """Comparisons over the data the Space serves and its store: the corpus is read once per process,
    each model's run where it lies, the open blocks from the store on every call (never cached)."""

    def __init__(self, data: str, store: Store, raters: int = RATERS_PER_ITEM):
        self.data, self.store, self.raters = data, store, int(raters)

    @functools.cached_property
    def corpus(self) -> pd.DataFrame:
        columns = ["id", "question", "answer", "answer_type", "domains", "flagged"]
        return load_config(self.data, "corpus").select_columns(columns).to_pandas()

    @property
    def outputs(self) -> model_outputs.ModelOutputs:
        n_scored = int((~self.corpus["flagged"].astype(bool)).sum())
        return model_outputs.shared(self.store, self.data, n_scored)

    def models(self) -> list[str]:
        """The models with outputs (recorded or published), by name."""
        return sorted(self.outputs.runs())

    def compare(self, model_a: str, model_b: str) -> Comparison:
        runs = self.outputs
        return compare(
            self.corpus,
            runs.of(model_a, RUN_COLUMNS),
            runs.of(model_b, RUN_COLUMNS),
            model_a,
            model_b,
            open_block_items(self.store, self.raters),
        )


PAPER_ROWS = (
    "the paper reports their totals only (its Table 4), and the data served here publishes no per-item outputs for them"
)
NO_RUN = "evaluated, but its per-item outputs are neither recorded here nor published with the data served here"
NOT_A_MODEL = "the practitioners' reference, not a model: each model's Model tab sets it beside them"


def not_comparable(board: pd.DataFrame, models: Iterable[str]) -> dict[str, str]:
    """The board's rows that cannot be compared, by model name, each with why: every row whose model has no
    per-item outputs (``models``: those with outputs; ``board``: the board's rows, Model and Origin)."""
    have = set(models)
    why = {"reported": PAPER_ROWS, "evaluated": NO_RUN, "reference": NOT_A_MODEL}
    return {
        str(row.Model): why.get(str(row.Origin), NO_RUN)
        for row in board[["Model", "Origin"]].itertuples(index=False)
        if str(row.Model) not in have
    }


def availability(board: pd.DataFrame, runs: dict[str, model_outputs.Run]) -> str:
    """What the Compare tab says before any click: the rows that can be compared (those with per-item outputs,
    evaluated here or published), those that cannot and why, and with fewer than two, what can be done."""
    names = sorted(runs)
    kind = {model_outputs.RECORDED: "evaluated here", model_outputs.PUBLISHED: "published outputs"}
    can = ", ".join(f"**{m}** ({kind.get(runs[m].source, runs[m].source)})" for m in names) or "none yet"
    lines = [f"Compare needs each model's per-item outputs. Rows that have them: {can}."]
    if len(names) == 1:
        lines.append(
            f"Compare needs two: meanwhile **{names[0]}**'s Model tab sets it beside the practitioners and the Item "
            "explorer shows its answer on each item; a second model submitted (Submit tab) can be compared with it "
            "once evaluated."
        )
    elif not names:
        lines.append("Submit a model (Submit tab): once evaluated, its outputs can be compared with the next one's.")
    by_reason: dict[str, list[str]] = {}
    for model, why in not_comparable(board, names).items():
        by_reason.setdefault(why, []).append(model)
    if by_reason:
        reasons = "\n".join(f"- {', '.join(models)}: {why}." for why, models in by_reason.items())
        lines.append(f"Rows that cannot be compared:\n\n{reasons}")
    return "\n\n".join(lines)
