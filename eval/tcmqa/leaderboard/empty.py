"""What the Space says where a table or a plot would be empty: why it is empty and what to do instead.

One home for every empty state's words, so the Board, the Model page, the Item explorer and the Plots
say the same thing the same way, in the caller's language (:func:`tcmqa.leaderboard.lang.text`); the tabs
hide the empty component and show the sentence (:func:`tcmqa.leaderboard.tabs.table` does the hiding).

The commonest empty state is the practitioners' subset: a model's Subset, Δ human and the whole of its
model page are computed on the subset items it was scored on, and a freshly evaluated model (a demo
tree, a partial run, a corpus the practitioners have not reached) may have none yet.
"""

from __future__ import annotations

import pandas as pd

from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.lang import text


def no_subset_items(model: str, n_items: int, subset_items: int) -> str:
    """The model page of ``model`` (``n_items`` scored) when none of its items is in the subset
    (``subset_items`` items so far)."""
    why = text("empty_subset_not_in", size=f"{subset_items:,}") if subset_items else text("empty_subset_none")
    return text("empty_model_page", model=model, n=f"{n_items:,}", why=why, grows=text("empty_subset_grows"))


def no_facts(model: str, calibration: bool, probes: bool) -> str:
    """What the model page says of the calibration and probe tables it hides (empty: not recorded)."""
    missing = [text(key) for key, shown in (("empty_calibration", calibration), ("empty_probe", probes)) if not shown]
    if not missing:
        return ""
    return text("empty_facts", model=model, what=text("empty_or").join(missing))


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
    return text("empty_blank_subset", rows=", ".join(rows), grows=text("empty_subset_grows"))


def no_responses() -> str:
    """The item page when no practitioner has answered the item."""
    return text("empty_no_responses", grows=text("empty_subset_grows"))


def no_outputs() -> str:
    """The item page when no model has outputs here."""
    return text("empty_no_outputs")
