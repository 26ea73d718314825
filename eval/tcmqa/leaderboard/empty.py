"""What the Space says where a table or a plot would be empty: why it is empty and what to do instead.

One home for every empty state's words, so the Board, the Model page, the Item explorer and the Plots
say the same thing the same way; the tabs hide the empty component and show the sentence (pure text
and pandas here, no gradio: :func:`tcmqa.leaderboard.tabs.table` does the hiding).

The commonest empty state is the practitioners' subset: a model's Subset, Δ human and the whole of its
model page are computed on the subset items it was scored on, and a freshly evaluated model (a demo
tree, a partial run, a corpus the practitioners have not reached) may have none yet.
"""

from __future__ import annotations

import pandas as pd

from tcmqa.leaderboard import board as board_lib

SUBSET_GROWS = "the subset grows as practitioners answer (Practitioners tab)"
ELSEWHERE = "Its Full accuracy is on the Board; Compare sets it beside another model item by item"


def no_subset_items(model: str, n_items: int, subset_items: int) -> str:
    """The model page of ``model`` (``n_items`` scored) when none of its items is in the subset
    (``subset_items`` items so far)."""
    if not subset_items:
        why = "the practitioners' subset is empty so far, so there is nothing to set it beside yet"
    else:
        why = (
            f"this model's items are not in the practitioners' subset ({subset_items:,} items so far), so there is "
            "nothing to set it beside yet"
        )
    return f"**{model}**: {n_items:,} items scored; {why}: {SUBSET_GROWS}. {ELSEWHERE}."


def no_facts(model: str, calibration: bool, probes: bool) -> str:
    """What the model page says of the calibration and probe tables it hides (empty: not recorded)."""
    missing = [name for name, shown in (("calibration", calibration), ("probe", probes)) if not shown]
    if not missing:
        return ""
    return (
        f"No {' or '.join(missing)} values for **{model}**: its results row records none (they come from the "
        "letter log-probs and the probe passes of a full run)."
    )


def blank_subset(frame: pd.DataFrame) -> str:
    """The board's note on its evaluated rows whose Subset and Δ human are blank, each with its reason.

    ``frame``: board rows (:func:`tcmqa.leaderboard.board.select` with every column); '' when no row's Subset
    is blank."""
    label = board_lib.LABEL
    blank = frame[(frame[label["origin"]] == "evaluated") & frame[label["subset"]].isna()]
    if blank.empty:
        return ""
    rows = []
    for _, row in blank.iterrows():
        qualifier, coverage = str(row[board_lib.COMPARISON]), row[label["coverage"]]
        if qualifier == board_lib.PARTIAL and pd.notna(coverage):
            qualifier = f"partial run, {float(coverage):.0f}% of the items"
        rows.append(f"**{row[label['model']]}** ({qualifier})")
    return (
        f"Subset and Δ human are blank for {', '.join(rows)}: none of the items it was scored on is in the "
        f"practitioners' subset yet; {SUBSET_GROWS}, and the cells fill in once it holds one of them."
    )


def no_responses() -> str:
    """The item page when no practitioner has answered the item."""
    return f"**Practitioners' answers**: none yet. This item is not in the practitioners' subset; {SUBSET_GROWS}."


def no_outputs() -> str:
    """The item page when no model has outputs here."""
    return "**Models' outputs**: none yet. No model has per-item outputs here; submit one (Submit tab)."
