"""The leaderboard table: the paper's reported rows, the practitioners' reference, every evaluated row.

Pure pandas (no gradio), so the board's logic is tested and benchmarked without a browser. The merged
frame is cached on the store's version, so a finished evaluation shows up on the next refresh without
a restart and an idle refresh costs one cheap store query.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any

import pandas as pd

from tcmqa.results import PAPER_HUMAN_REFERENCE
from tcmqa.schema import RESULT_COLUMNS
from tcmqa.store import Store

HUMAN_SUBSET = PAPER_HUMAN_REFERENCE  # the practitioners' majority vote on the subset (paper, Table 4)
HUMAN_NAME = "Licensed practitioners (majority vote)"

# The board's columns, in order, as the schema declares them (tcmqa.schema.RESULT_COLUMNS).
BOARD_COLUMNS = [c for c in RESULT_COLUMNS if c.board]
COLUMNS: dict[str, str] = {c.label: c.name for c in BOARD_COLUMNS}  # board label -> results field
DEFAULT_COLUMNS = [c.label for c in BOARD_COLUMNS if c.shown]
NUMERIC_COLUMNS = [c.label for c in BOARD_COLUMNS if c.dtype != "string"]
ORIGINS = ["reported", "evaluated", "reference"]


def reported_rows() -> pd.DataFrame:
    """The paper's Table 4, shipped with the package as tcmqa/data/reported.csv."""
    with resources.files("tcmqa").joinpath("data/reported.csv").open(encoding="utf-8") as f:
        frame = pd.read_csv(f)
    return frame.assign(origin="reported", protocol="paper")


def human_row() -> dict[str, Any]:
    return {"model": HUMAN_NAME, "origin": "reference", "family": "Human", "subset": HUMAN_SUBSET, "delta_human": 0.0}


def merge(evaluated: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Reported + reference + evaluated rows, in board columns, best Full first."""
    rows = [r for r in evaluated if r.get("origin") != "reported"]  # the paper's rows come from the CSV
    frame = pd.concat([reported_rows(), pd.DataFrame([human_row(), *rows])], ignore_index=True)
    frame = frame.reindex(columns=list(COLUMNS.values())).rename(columns={v: k for k, v in COLUMNS.items()})
    frame["Origin"] = frame["Origin"].fillna("evaluated")
    frame["Family"] = frame["Family"].fillna("unknown")
    frame["Revision"] = frame["Revision"].astype(object).fillna("").astype(str).str[:12]
    for name in NUMERIC_COLUMNS:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").round(2)
    return frame.sort_values("Full", ascending=False, na_position="last", kind="stable").reset_index(drop=True)


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
) -> pd.DataFrame:
    """The visible board: filter by model text, family, parameter range and origin; choose and sort columns.

    The practitioners' reference row has no size and is kept whenever its origin is selected, so it
    stays on the board as the line to beat.
    """
    keep = frame["Origin"].isin(origins)
    if search.strip():
        keep &= frame["Model"].str.contains(search.strip(), case=False, regex=False)
    if families:
        keep &= frame["Family"].isin(families) | (frame["Origin"] == "reference")
    sized = frame["Params (B)"]
    if size_min is not None:
        keep &= (sized >= size_min) | sized.isna()
    if size_max is not None:
        keep &= (sized <= size_max) | sized.isna()
    shown = frame[keep]
    if sort_by in shown:
        shown = shown.sort_values(sort_by, ascending=not descending, na_position="last", kind="stable")
    wanted = ["Model", *[c for c in COLUMNS if c in columns and c != "Model"]]
    return shown[wanted].reset_index(drop=True)


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
        }
    )
    subset = frame.dropna(subset=["Subset"]).sort_values("Subset", ascending=False)
    bars = pd.DataFrame({"model": subset["Model"], "subset": subset["Subset"], "origin": subset["Origin"]})
    return scatter, bars


class Board:
    """The merged board for one store, rebuilt only when the store's results change."""

    def __init__(self, store: Store):
        self.store = store
        self._lock = threading.Lock()
        self._version: str | None = None
        self._frame = merge([])

    def frame(self) -> pd.DataFrame:
        version = self.store.version()
        with self._lock:
            if version != self._version:
                self._frame, self._version = merge(self.store.results()), version
            return self._frame

    def families(self) -> list[str]:
        return sorted(set(self.frame()["Family"]) - {"Human"})
