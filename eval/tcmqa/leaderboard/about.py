"""The About tab's section on the probe and uncertainty columns, built from their declarations.

What a column *is* is said once, in its declaration (``tcmqa.schema.RESULT_COLUMNS`` docs, and
``board.DERIVED`` for the columns the board derives); this module adds what it can and cannot show,
so the About text follows the board when a column's meaning changes.
"""

from __future__ import annotations

from tcmqa.leaderboard.board import DEFAULT_COLUMNS, DERIVED, FULL_CI, SEPARATION, SUBSET_CI
from tcmqa.schema import RESULT_COLUMNS

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
        "The text of an item as published against the same text with its options reordered, by log-likelihood; "
        "items whose option order follows a convention (numbers in order, options that refer to others) are "
        "left out.",
        {
            "order_first": "Read against chance, 100/(orders scored): a model that never saw the items ranks the "
            "published order first that often.",
            "order_p": "Memorisation here is of the exam papers as published. A large p does not prove the items "
            "were not seen: a model can have read an item without preferring its order, and few tested items give "
            "the test little power.",
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
)


def _declared() -> dict[str, tuple[str, str]]:
    """Field name or derived label -> (board label, what the column is, with what its cell reads it against)."""
    docs = {c.name: c.doc for c in RESULT_COLUMNS}
    fields = {
        c.name: (c.label, c.doc if c.read_against is None else f"{c.doc}. {_against(*c.read_against, docs)}")
        for c in RESULT_COLUMNS
    }
    return fields | {c.label: (c.label, c.doc) for c in DERIVED}


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
