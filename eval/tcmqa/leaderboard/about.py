"""The About tab: the protocol, the departures from the paper, links and citation (``ABOUT``), the table of
every board column, and its section on the probe, uncertainty and fresh columns, built from their declarations.

What a column *is* is said once, in its declaration (``tcmqa.schema.RESULT_COLUMNS``: its meaning, the items it
covers, whether higher is better; ``board.DERIVED`` and ``board.COMPARISON_COLUMN`` for the columns the board
derives): :func:`columns_markdown` is generated from them, so it cannot fall behind the board, and this module
adds only what a probe column can and cannot show.
"""

from __future__ import annotations

from tcmqa.fresh.gap import MIN_POOL
from tcmqa.leaderboard.board import (
    BOARD_COLUMNS,
    CHOICES,
    COMPARISON,
    COMPARISON_COLUMN,
    DEFAULT_COLUMNS,
    DERIVED,
    FRESH_CI,
    FULL_CI,
    GAP_CI,
    HUMAN_SUBSET,
    SEPARATION,
    SUBSET_CI,
)
from tcmqa.schema import CITATION, HOMEPAGE, RESULT_COLUMNS

ABOUT = """
## Protocol ({protocol})
Each model answers every item once: its own chat template with thinking disabled, greedy decoding
(temperature 0), 16 new tokens. Two predictions come from that one generation: the letters A–E found
in the text after NFKC normalisation (exact match on the answer set: **Full**, **Single**, **Multi**,
**Subset**), and the argmax over A–E of the first token's log-probs, read by token id for all five
letters (**LP Full**). Multi-answer items also get precision/recall/F1. **Δ human** is Subset minus the
practitioners' majority vote ({human}). Rows marked *reported* are the paper's Table 4; *evaluated*
rows were run by this Space.

## Departures from the paper
*Evaluated* rows are scored with three departures from the paper's Section 2.3 (*reported* rows are
the paper's own numbers):

- **(a) Letter scan.** The text is NFKC-normalised before the scan, so full-width `Ｂ` or circled `Ⓑ`
  counts as `B`; the paper scans the raw text. Effect: Full, Single, Multi, Subset and Multi P/R/F1
  change only for a model whose text holds such characters. The paper's behaviour: re-score
  `generated_text` in the `outputs` config with the metric's `parser="paper"`.
- **(b) Letter log-probs.** All five letters are read by token id, each summed (log-sum-exp) over its
  single-token spellings; the paper takes the engine's top-k log-probs and sets letters outside them to
  −∞. Effect: LP Full can differ, and margins are always finite here, so **Conf. gap** is not comparable
  with the paper's. The paper's behaviour cannot be recovered from the stored `letter_logprobs`: it
  needs a re-run with the engine returning its top-k log-probs.
- **(c) Empty predictions.** An answer with no letter scores precision 0 in Multi P/R/F1; the paper's
  Table 5 reads as if such answers were left out of precision. Effect: multi-answer precision is lower
  here when a model gives empty answers. The paper's behaviour: drop rows with an empty `prediction`
  before averaging `precision`, or score with the metric's `empty_precision=None`.

{columns}
{probes}
## Links
- Dataset: [{homepage}]({homepage}) (configs `corpus`, `responses`, `subset`, `outputs`, `results`)
- Metric: `evaluate.load("tcmqa_metric")` — exact match over answer sets, P/R/F1

## Citation
```bibtex
{citation}```
"""

# (section title, its lead, {results field or derived label: what the column can and cannot show})
SECTIONS: tuple[tuple[str, str, dict[str, str]], ...] = (
    (
        "Option order (rotations)",
        "Each item asked again under the four other cyclic rotations of its options (`tcmqa probe`); "
        "null until that probe has run on the row's run.",
        {
            "circular": "Robustness to the option order, not knowledge: it is lower than the published order's "
            "accuracy on the same items for any model whose answers move with the letters.",
            "rotation_mean": "What the accuracy on these items would be with the options shuffled; its gap to the "
            "published order on the same items is what that order gives or takes. Not comparable with Full, which "
            "is on every item, not on these.",
            "circular_drop": "Sensitivity to option order, not knowledge: a large drop says answers follow the "
            "letters; a small drop does not say the answers are right.",
            "recall_std": "Letter preference (selection bias), descriptive, with no test: near 0 means no letter is "
            "favoured, not that the answers are right.",
            "pride": "The log-prob channel with the model's letter prior divided out: above the same channel on "
            "the same items, the prior cost accuracy. Not comparable with LP Full, which also counts the "
            "multi-answer items the log-prob channel always misses: LP Full can be far below PriDe with no letter "
            "prior at all.",
        },
    ),
    (
        "Memorisation (option-order test)",
        "The text of an item as published against the same text with its options reordered, by log-likelihood, "
        "but only against the orders that keep every declared feature of the published one in place: each "
        "option's length (characters and display width), its number, its place in a canonical TCM sequence "
        "(五行 木火土金水, 五脏 肝心脾肺肾, 轻/中/重, 上/中/下, 甲乙丙丁 and others), an option that refers to the "
        "others (以上都是), which options are right, and what every two options share in characters. Items with "
        "no such other order, or whose options name others by letter (AB, A和C), are left out. Null: the model "
        "has not seen the items, and whatever it prefers about option orders (short options first, numbers or "
        "organs in sequence, similar options together, the answer off E, graded or strict, however strong) "
        "depends on an order only through those features; the orders compared then score highest equally "
        "often.",
        {
            "order_first": "Read against Order chance, the mean over tested items of 100/(orders compared): a model "
            "that never saw the items ranks the published order first that often, whatever its habits about "
            "the declared features.",
            "order_p": "Exact for each item's own chance. Memorisation here is of the exam papers as published. A "
            "habit about something not declared (Unicode or dictionary order, meaning without shared characters) "
            "can still lower p. A large p does not prove the items were not seen: a model can have read an item "
            "without preferring its order, and the items left out and the small number of orders an item keeps "
            "give the test less power.",
        },
    ),
    (
        "Calibration (log-prob channel)",
        "Read from the stored letter log-probs of every evaluated row; single-answer items only.",
        {
            "ece": "How far confidence is from accuracy (0: calibrated); it says nothing of accuracy itself.",
            "acc_top10": "Whether confidence ranks right answers first: what the model would score if it answered "
            "only where it is surest.",
            "acc_coverage_area": "The same over every coverage, not only the top 10%.",
        },
    ),
    (
        "Uncertainty",
        "On evaluated rows only: the paper's rows and the practitioners' reference carry no intervals or marks.",
        {
            FULL_CI: "Item resampling, not model sampling: how far Full would move on another draw of items "
            "like these. Decoding is greedy, so the model's run-to-run variation, the prompt and the corpus are "
            "not in it. Overlapping intervals do not mean a tie: both models answered the same items, which the "
            "separation mark uses.",
            SUBSET_CI: "The same on the practitioners' subset: fewer items, so wider.",
            SEPARATION: "Null: the two models have the same accuracy on these items. '≈' is not evidence that they "
            "are equal, and '≠' does not say the difference matters or holds on other items; only each row and the "
            "next better by Full are tested, each at 5%, with no correction for the many pairs. Sorted by another "
            "column or filtered, the row shown above may not be the one named. Rows without recorded outputs are "
            "not tested.",
        },
    ),
    (
        "Fresh items (the hidden pool)",
        "Items licensed practitioners write in the Practitioners tab, each answered blind and accepted by two "
        "reviewers, then kept hidden: never on the Hub, in the explorer, a model page or an export. Every job "
        "evaluates them after the public items, under protocol v1; when the pool grows, every comparable row is "
        "evaluated on it again (a back-fill, queued below submissions). The fresh columns are shown once the pool "
        f"holds {MIN_POOL} accepted items. The practitioners' reference row shows, under Fresh, their own blind "
        "answers' accuracy on the pool, beside their Subset.",
        {
            "fresh": "What a model answers on items it cannot have read: not contaminated, but on fewer items than "
            "Full (a wider interval), and on items that need not be as hard as the exam's.",
            FRESH_CI: "Read it before comparing two rows' Fresh: with a pool of a few hundred items, intervals of "
            "±5 points are usual.",
            "public_minus_fresh": "Not a memorisation measure alone: a harder pool lowers every model's Fresh, and "
            "the practitioners' own.",
            "fresh_gap": "What points at memorisation. It assumes a change of difficulty moves the model's and the "
            "practitioners' accuracy by the same number of points; far from the practitioners (near 0 or 100%) a "
            "harder pool moves a model less, so it errs toward marking a weaker model and not a stronger one.",
            GAP_CI: "A mark is not proof of memorisation: the pool can differ from the exam in kind (what these "
            "practitioners write about) as well as in difficulty. No mark does not clear a model: a small pool gives "
            "the test little power.",
            "fresh_after_release": "Only items written after the model's release, which no training set of it can "
            "hold (LiveCodeBench's reading). The release date is the Hub repository's creation unless the submitter "
            "gave one; a training cut-off is earlier, so this is conservative.",
            "pool_version": "A row on an older version says so in Fresh 95% CI until its back-fill has run.",
        },
    ),
)


def _declared() -> dict[str, tuple[str, str]]:
    """Field name or derived label -> (board label, what the column is, with what its cell reads it against)."""
    docs = {c.name: c.doc for c in RESULT_COLUMNS}
    fields = {
        c.name: (c.label, c.doc if c.read_against is None else f"{c.doc}. {_against(*c.read_against, docs)}")
        for c in RESULT_COLUMNS
    }
    return fields | {c.label: (c.label, c.doc) for c in (COMPARISON_COLUMN, *DERIVED)}


def _against(field: str, word: str, docs: dict[str, str]) -> str:
    """How a value's cell shows what it is read against (``ResultColumn.read_against``)."""
    return f"Its cell reads 'x ({word} y)', never x alone, y being the {docs[field]}"


def probes_markdown() -> str:
    """The About section: each probe and uncertainty column, what it is and what it can and cannot show."""
    declared = _declared()
    labels = [declared[name][0] for _, _, notes in SECTIONS for name in notes]
    shown = ", ".join(f"**{label}**" for label in labels if label in DEFAULT_COLUMNS)
    lines = ["## Probes and uncertainty", f"Shown by default: {shown}; the others are in the board's column chooser."]
    for title, lead, notes in SECTIONS:
        lines += ["", f"### {title}", lead, ""]
        for name, note in notes.items():
            label, doc = declared[name]
            lines.append(f"- **{label}**: {doc}. {note}")
    return "\n".join(lines) + "\n"


HIGHER = {True: "yes", False: "no (lower is better)", None: "—"}  # a column's higher_is_better, in words
NOT_ON_ITEMS = "—"  # a column not computed on items (an id, a fact about the run)


def column_rows() -> list[tuple[str, str, str, str]]:
    """(column, what it means, the items it covers, higher is better) for every board column, in board order,
    each read from its declaration."""
    declared = _declared()
    by_label = {c.label: (c.name, c.covers, c.higher_is_better) for c in BOARD_COLUMNS}
    by_label |= {c.label: (c.label, c.covers, c.higher_is_better) for c in (COMPARISON_COLUMN, *DERIVED)}
    rows = []
    for label in ["Model", COMPARISON, *CHOICES]:
        key, covers, higher = by_label[label]
        rows.append((label, declared[key][1], covers or NOT_ON_ITEMS, HIGHER[higher]))
    return rows


def _cell(text: str) -> str:
    """Text in a Markdown table cell: a '|' would end the cell, '<model>' would be read as an HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def columns_markdown() -> str:
    """The About section defining every board column, one table row per declaration."""
    lines = [
        "## The board's columns",
        "Every column the board offers (the column chooser shows the rest), defined where it is declared.",
        "",
        "| Column | What it means | Items it covers | Higher is better |",
        "| --- | --- | --- | --- |",
    ]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in column_rows()]
    return "\n".join(lines) + "\n"


def about_markdown(protocol: str) -> str:
    """The About tab's text for the Space's ``protocol``."""
    return ABOUT.format(
        protocol=protocol,
        human=HUMAN_SUBSET,
        columns=columns_markdown(),
        probes=probes_markdown(),
        homepage=HOMEPAGE,
        citation=CITATION,
    )
