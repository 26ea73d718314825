"""The Plots tab's figure: the paper's Figure 2 (Full accuracy against parameters) drawn from the board.

The board's rows (:func:`tcmqa.leaderboard.board.plot_frames`' data) feed the paper's own drawing
(:func:`tcmqa.figures.accuracy_by_size_draw`): a log x axis, one line per family through its models
sorted by size. The paper's reported rows are solid lines; the rows evaluated here that are comparable
(the served data, the current protocol, full coverage) are dashed lines in their family's colour
(their Full is on the served corpus, not the paper's, so the two are never joined). Each practitioners'
reference row is a horizontal line: their majority vote on the subset, the paper's 64.94 and, when
comparable rows carry one, the majority on their own subset items. The pass mark is a red line.

:func:`ability_figure` draws the one scale (:mod:`tcmqa.leaderboard.scale`): the comparable models' abilities
(the board's Ability, ± its SE) and every practitioner's on the same axis, and where the pass mark lies on it
(the ability whose expected accuracy over the fitted items is the mark).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tcmqa import figures
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.scale import Scale
from tcmqa.passmark import PASS_MARK

TITLE = "Figure 2. Accuracy against parameters"
EVALUATED = " (evaluated)"  # the legend suffix of an evaluated family's line
REFERENCE_STYLES = ("--", ":")
PASS_STYLE = {"color": "tab:red", "lw": 1.5, "ls": "-."}
ABILITY_TITLE = "One scale: models and practitioners (2PL ability)"
MODELS, PRACTITIONERS = "Comparable models", "Practitioners"


def family_lines(points: pd.DataFrame) -> dict[str, dict[str, list]]:
    """family -> its models, sizes and Full, sorted by size (what ``accuracy_by_size_draw`` draws); rows
    without a positive size are left out (a log axis)."""
    points = points[points["params_b"] > 0].sort_values(["family", "params_b", "model"], kind="stable")
    return {
        str(family): {
            "models": rows["model"].tolist(),
            "params_b": rows["params_b"].astype(float).tolist(),
            "full": rows["full"].astype(float).tolist(),
        }
        for family, rows in points.groupby("family", sort=True)
    }


def computed_on(comparison: str) -> str:
    """Where a practitioners' reference row (by its Comparison label) was computed."""
    return "paper" if comparison == board_lib.PAPER else "this board's subset"


def subset_bars(frame: pd.DataFrame) -> pd.DataFrame:
    """The Subset bars (:func:`tcmqa.leaderboard.board.plot_frames`' second frame), each practitioners'
    reference row named for where it was computed: two references share one name, and a bar plot would
    stack them into one bar above 100%."""
    bars = board_lib.plot_frames(frame)[1].copy()
    references = bars["origin"] == "reference"
    bars.loc[references, "model"] = bars.loc[references, "model"] + bars.loc[references, "comparison"].map(
        lambda comparison: f" ({computed_on(comparison)})"
    )
    return bars


def figure2(frame: pd.DataFrame, mark: float = PASS_MARK) -> Figure:
    """Figure 2 from the board's merged frame (:meth:`tcmqa.leaderboard.board.Board.frame`), the pass mark
    ``mark`` (percent) a line."""
    scatter, _ = board_lib.plot_frames(frame)
    reported = scatter[scatter["origin"] == "reported"]
    evaluated = scatter[(scatter["origin"] == "evaluated") & (scatter["comparison"] == board_lib.COMPARABLE)]
    fig = figures.accuracy_by_size_draw({"title": TITLE, "families": family_lines(reported)})
    ax = fig.axes[0]
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for family, line in family_lines(evaluated).items():
        style = {"color": colours[family]} if family in colours else {}
        ax.plot(line["params_b"], line["full"], ls="--", marker="o", mfc="white", label=family + EVALUATED, **style)
    references = frame[frame["Origin"] == "reference"].dropna(subset=["Subset"]).drop_duplicates("Subset")
    for style, (_, row) in zip(REFERENCE_STYLES, references.iterrows()):
        label = f"Practitioners {row['Subset']:.2f} ({computed_on(row[board_lib.COMPARISON])})"
        ax.axhline(row["Subset"], ls=style, color="black", lw=1.5, label=label)
    ax.axhline(mark, label=f"Pass mark {mark:g}%", **PASS_STYLE)
    ax.set_xscale("log")
    ax.set_ylabel("Full exact match (%)")
    fig.set_size_inches(9.5, 4.8)  # room on the right for the legend, outside the lines
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    plt.close(fig)  # drawn on request: pyplot must not keep every one
    return fig


def ability_figure(frame: pd.DataFrame, scale: Scale | None, mark: float = PASS_MARK) -> Figure:
    """The comparable models (the board's Ability ± Ability SE, top row) and the practitioners (bottom row, each
    ± its SE) on one ability axis, with the pass mark's ability as a vertical line; a note while not fitted."""
    fig, ax = plt.subplots(figsize=(9.5, 3.6))
    ax.set_title(ABILITY_TITLE)
    models = frame[(frame[board_lib.COMPARISON] == board_lib.COMPARABLE) & (frame["Origin"] == "evaluated")]
    models = models.dropna(subset=[board_lib.ABILITY])
    if scale is None or models.empty:
        ax.text(0.5, 0.5, "Not fitted yet: the scale is fitted in the background", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        plt.close(fig)
        return fig
    people = scale.practitioners()
    rng = np.random.default_rng(0)  # a fixed jitter: the same board draws the same picture
    for y, name, theta, se in (
        (1.0, MODELS, models[board_lib.ABILITY].to_numpy(float), models[board_lib.ABILITY_SE].to_numpy(float)),
        (0.0, PRACTITIONERS, people["theta"].to_numpy(float), people["theta_se"].to_numpy(float)),
    ):
        if not len(theta):
            continue
        rows = y + rng.uniform(-0.18, 0.18, len(theta))
        ax.errorbar(theta, rows, xerr=se, fmt="none", ecolor="0.7", lw=0.8, zorder=1)
        ax.plot(theta, rows, "o", ms=5, alpha=0.85, label=f"{name} (n={len(theta)})", zorder=2)
    at = scale.ability_at(mark)
    ax.axvline(at, label=f"Pass mark {mark:g}% (expected Full) at {at:.2f}", **PASS_STYLE)
    ax.set_yticks([0.0, 1.0], [PRACTITIONERS, MODELS])
    ax.set_ylim(-0.5, 1.5)
    ax.set_xlabel("Ability (2PL, the scale of models and practitioners)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    plt.close(fig)
    return fig
