"""The Plots tab's figures, drawn from the board: the paper's Figure 2 (Full accuracy against parameters) and
Subset accuracy, each with the paper's rows and the rows evaluated here on separate axes.

The paper's rows were computed on the paper's own corpus and the rows evaluated here on the data the Space
serves (a demo tree, the sample, a later release): never the same items, so never the same axes. Each
figure has a panel "reported in the paper" and, once a comparable row exists (the served data, the current
protocol, full coverage: the board's ``comparable`` group), a panel "evaluated here", sharing the scales so
they still read side by side. The other evaluated rows (partial runs, other data, other protocol, no size
or no Subset) are drawn on neither; :func:`left_off` says which and why, under the plots.

* Figure 2 feeds the paper's own drawing (:func:`tcmqa.figures.accuracy_by_size_draw`): a log x axis, one
  line per family through its models sorted by size; the evaluated rows are dashed in their family's colour.
* Subset: horizontal bars high to low, one row per model, the figure as tall as its rows need.
* The practitioners are one series on each figure: a line (black) at their majority vote on each
  panel's own subset items: the paper's 64.94 on the paper's panel, the board's comparable reference row
  (the majority on the comparable rows' subset items) on the evaluated panel.
* The pass mark (``TCMQA_PASS_MARK``) is a red line on Figure 2's panels.

:func:`ability_figure` draws the one scale (:mod:`tcmqa.leaderboard.scale`): the comparable models' abilities
(the board's Ability, ± its SE) and every practitioner's on the same axis, and where the pass mark lies on it
(the ability whose expected accuracy over the fitted items is the mark).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec

from tcmqa import figures
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard import empty
from tcmqa.leaderboard.scale import Scale
from tcmqa.passmark import PASS_MARK

TITLE = "Figure 2. Accuracy against parameters"
SUBSET_TITLE = "Subset accuracy beside the licensed practitioners"
EVALUATED = " (evaluated)"  # the legend suffix of an evaluated family's line
PAPER_PANEL = "Reported in the paper (on its own corpus)"
HUMAN = "Licensed practitioners (majority vote)"  # the practitioners' one series on Figure 2 and the Subset bars
BAR_INCHES = 0.24  # a bar's row in the Subset figure: room for its model name
PANEL_INCHES = 0.9  # a Subset panel's title and axis
LEGEND_INCHES = 2.6  # Figure 2's legend, right of the panels
COLOURS = {board_lib.PAPER: "#8c8c8c", board_lib.COMPARABLE: "#4c72b0"}
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


def here_title(frame: pd.DataFrame) -> str:
    """The evaluated panel's title: the data its rows ran on."""
    evaluated = frame[(frame["Origin"] == "evaluated") & (frame[board_lib.COMPARISON] == board_lib.COMPARABLE)]
    data = next((str(d) for d in evaluated["Data"] if isinstance(d, str) and d), "the data served here")
    return f"Evaluated here, on {data} (not the paper's corpus)"


def practitioners(frame: pd.DataFrame, comparison: str) -> float | None:
    """The practitioners' majority vote beside the rows of ``comparison`` (a board reference row's Subset)."""
    rows = frame[(frame["Origin"] == "reference") & (frame[board_lib.COMPARISON] == comparison)]["Subset"].dropna()
    return float(rows.iloc[0]) if len(rows) else None


def _reference(ax: Axes, value: float | None, vertical: bool = False) -> None:
    """The practitioners' line on one panel, with its value; the legend names the series once per figure."""
    if value is None:
        return
    named = any(HUMAN in label for other in ax.figure.axes for label in other.get_legend_handles_labels()[1])
    line = ax.axvline if vertical else ax.axhline
    line(value, ls="--", color="black", lw=1.5, label="_" + HUMAN if named else HUMAN)
    text = f"{value:.2f}"
    if vertical:
        ax.annotate(text, (value, 1.0), xycoords=("data", "axes fraction"), ha="left", va="bottom", fontsize=7)
    else:
        ax.annotate(text, (1.0, value), xycoords=("axes fraction", "data"), ha="right", va="bottom", fontsize=7)


def figure2(frame: pd.DataFrame, mark: float = PASS_MARK) -> Figure:
    """Figure 2 from the board's merged frame (:meth:`tcmqa.leaderboard.board.Board.frame`): the paper's rows
    on the left, the comparable rows evaluated here on the right (module doc), the pass mark ``mark`` (percent)
    a line on each."""
    scatter, _ = board_lib.plot_frames(frame)
    reported = scatter[scatter["origin"] == "reported"]
    evaluated = scatter[(scatter["origin"] == "evaluated") & (scatter["comparison"] == board_lib.COMPARABLE)]
    fig = figures.accuracy_by_size_draw({"title": PAPER_PANEL, "families": family_lines(reported)})
    paper = fig.axes[0]
    colours = {line.get_label(): line.get_color() for line in paper.get_lines()}
    _reference(paper, practitioners(frame, board_lib.PAPER))
    lines = family_lines(evaluated)
    if lines:
        grid = GridSpec(1, 2, figure=fig)
        paper.set_subplotspec(grid[0])
        here = fig.add_subplot(grid[1], sharex=paper, sharey=paper)
        for family, line in lines.items():
            style = {"color": colours[family]} if family in colours else {}
            here.plot(
                line["params_b"], line["full"], ls="--", marker="o", mfc="white", label=family + EVALUATED, **style
            )
        _reference(here, practitioners(frame, board_lib.COMPARABLE))
        here.set_title(here_title(frame), fontsize=10)
        here.set_xlabel(paper.get_xlabel())
        here.grid(axis="y", alpha=0.3)
    for at, ax in enumerate(fig.axes):
        ax.axhline(mark, label="_" if at else f"Pass mark {mark:g}%", **PASS_STYLE)
        ax.set_xscale("log")
        ax.set_ylim(0, 100)
    paper.set_ylabel("Full exact match (%)")
    paper.set_title(PAPER_PANEL, fontsize=10)
    fig.suptitle(TITLE)
    fig.set_size_inches(14 if lines else 9.5, 5.2)
    handles = [h for ax in fig.axes for h in ax.get_legend_handles_labels()[0]]
    if paper.get_legend():
        paper.get_legend().remove()
    right = 1 - LEGEND_INCHES / fig.get_figwidth()  # the legend on the right, outside the lines
    fig.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(right, 0.9))
    fig.tight_layout(rect=(0, 0, right, 1))
    plt.close(fig)  # drawn on request: pyplot must not keep every one
    return fig


def subset_bars(frame: pd.DataFrame) -> pd.DataFrame:
    """The Subset bars (:func:`tcmqa.leaderboard.board.plot_frames`' second frame) that are drawn: the models of the
    paper's rows and of the comparable rows evaluated here, high to low (the practitioners are a line)."""
    bars = board_lib.plot_frames(frame)[1]
    return bars[(bars["origin"] != "reference") & bars["comparison"].isin(list(COLOURS))].reset_index(drop=True)


def subset_figure(frame: pd.DataFrame) -> Figure:
    """Subset accuracy, one panel per group (the paper's rows; the comparable rows evaluated here), one bar per
    model high to low, the practitioners a line on each panel; as tall as its rows need (module doc)."""
    bars = subset_bars(frame)
    groups = [(c, bars[bars["comparison"] == c]) for c in (board_lib.PAPER, board_lib.COMPARABLE)]
    groups = [(c, rows) for c, rows in groups if len(rows)]
    sizes = [len(rows) + 1 for _, rows in groups] or [1]
    height = BAR_INCHES * sum(sizes) + PANEL_INCHES * len(sizes) + 0.6
    fig, axes = plt.subplots(len(sizes), 1, figsize=(9.5, height), sharex=True, height_ratios=sizes, squeeze=False)
    for ax, (comparison, rows) in zip(axes[:, 0], groups):
        rows = rows.sort_values("subset")  # barh draws from the bottom: the highest on top
        y = np.arange(len(rows))
        ax.barh(y, rows["subset"], color=COLOURS[comparison], height=0.7)
        ax.set_yticks(y, rows["model"], fontsize=8)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_title(PAPER_PANEL if comparison == board_lib.PAPER else here_title(frame), fontsize=9, loc="left")
        _reference(ax, practitioners(frame, comparison), vertical=True)
        ax.grid(axis="x", alpha=0.3)
    if not groups:
        axes[0, 0].set_axis_off()
    bottom = axes[-1, 0]
    bottom.set_xlim(0, 100)
    bottom.set_xlabel("Subset exact match (%)")
    fig.suptitle(SUBSET_TITLE)
    if axes[0, 0].get_legend_handles_labels()[0]:
        axes[0, 0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    plt.close(fig)
    return fig


def left_off(frame: pd.DataFrame) -> str:
    """What the plots do not draw and why: the evaluated rows outside the comparable group, and the comparable
    rows without a size (Figure 2) or a Subset (the bars)."""
    evaluated = frame[frame["Origin"] == "evaluated"]
    apart = evaluated[evaluated[board_lib.COMPARISON] != board_lib.COMPARABLE]
    lines = [f"**{row['Model']}** ({row[board_lib.COMPARISON]})" for _, row in apart.iterrows()]
    notes = []
    if lines:
        notes.append(
            f"Not drawn: {', '.join(lines)}: the plots draw the paper's rows and the comparable rows evaluated here "
            "(the served data, the current protocol, full coverage), each on its own axes."
        )
    comparable = evaluated[evaluated[board_lib.COMPARISON] == board_lib.COMPARABLE]
    unsized = comparable[~(comparable["Params (B)"] > 0)]["Model"].tolist()
    if unsized:
        notes.append(f"Not in Figure 2 (no parameter count): {', '.join(f'**{m}**' for m in unsized)}.")
    blank = empty.blank_subset(comparable)
    if blank:
        notes.append(f"Not in the Subset bars. {blank}")
    return "\n\n".join(notes)


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
