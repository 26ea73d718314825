"""The About tab's section on the probe and uncertainty columns, built from their declarations.

What a column *is* is said once, in its declaration (``tcmqa.schema.RESULT_COLUMNS`` docs, and
``board.DERIVED`` for the columns the board derives); this module adds what it can and cannot show,
so the About text follows the board when a column's meaning changes.
"""

from __future__ import annotations

from tcmqa.leaderboard.board import DEFAULT_COLUMNS, DERIVED
from tcmqa.schema import RESULT_COLUMNS

# (section title, its lead, {results field or derived label: what the column can and cannot show})
SECTIONS: tuple[tuple[str, str, dict[str, str]], ...] = (
    (
        "Option order (rotations)",
        "Each item asked again under the four other cyclic rotations of its options (`tcmqa probe`); "
        "null until that probe has run on the row's run.",
        {
            "circular": "Robustness to the option order, not knowledge: it is lower than Full for any model whose "
            "answers move with the letters.",
            "rotation_mean": "What Full would be with the options shuffled; its gap to Full is what the published "
            "order gives or takes.",
            "circular_drop": "Sensitivity to option order, not knowledge: a large drop says answers follow the "
            "letters; a small drop does not say the answers are right.",
            "recall_std": "Letter preference (selection bias), descriptive, with no test: near 0 means no letter is "
            "favoured, not that the answers are right.",
            "pride": "The log-prob channel with the model's letter prior divided out: above LP Full, the prior cost "
            "accuracy. It is scored on the items left after estimating the prior, not on all items as LP Full is.",
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
            "Full 95% CI": "Item resampling, not model sampling: how far Full would move on another draw of items "
            "like these. Decoding is greedy, so the model's run-to-run variation, the prompt and the corpus are "
            "not in it. Overlapping intervals do not mean a tie: both models answered the same items, which the "
            "separation mark uses.",
            "Subset 95% CI": "The same on the practitioners' subset (fewer items, wider).",
            "≈ above": "Null: the two models have the same accuracy on these items. '≈' is not evidence that they "
            "are equal, and no '≈' does not say the difference matters or holds on other items; only adjacent rows "
            "are tested, each at 5%, with no correction for the many pairs. Rows without recorded outputs are not "
            "tested.",
        },
    ),
)


def _declared() -> dict[str, tuple[str, str]]:
    """Field name or derived label -> (board label, what the column is)."""
    fields = {c.name: (c.label, c.doc) for c in RESULT_COLUMNS}
    return fields | {c.label: (c.label, c.doc) for c in DERIVED}


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
