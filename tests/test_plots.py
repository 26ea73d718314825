"""The Plots tab's figures (tcmqa.leaderboard.plots), checked on the matplotlib Axes. Figure 2: Full against
parameters on a log axis, one line per family through its models sorted by size, the paper's rows and the
comparable evaluated rows (dashed, in their family's colour) on separate axes, the practitioners one series.
Subset: bars per model, the paper's and the evaluated rows apart, the practitioners one series (a line), the
figure as tall as its labels need."""

from __future__ import annotations

import itertools

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.plots import (
    EVALUATED,
    HUMAN,
    family_lines,
    figure2,
    left_off,
    subset_bars,
    subset_figure,
)
from tcmqa.prompts import PROTOCOL

FP = "fingerprint-of-the-served-data"
COMMON = {
    "origin": "evaluated",
    "protocol": PROTOCOL,
    "data_fingerprint": FP,
    "coverage": 100.0,
    "human_reference": 70.0,
}
ROWS = [
    {**COMMON, "model": "org/qwen-7b", "family": "Qwen2", "params_b": 7.0, "full": 61.0, "subset": 66.0},
    {**COMMON, "model": "org/qwen-0.5b", "family": "Qwen2", "params_b": 0.5, "full": 30.0, "subset": 33.0},
    {**COMMON, "model": "org/new-1b", "family": "Newfam", "params_b": 1.0, "full": 20.0, "subset": 22.0},
    {**COMMON, "model": "org/partial", "family": "Qwen2", "params_b": 3.0, "full": 90.0, "coverage": 50.0},
    {**COMMON, "model": "org/unsized", "family": "Qwen2", "params_b": None, "full": 50.0},
]


def _lines(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


def _fits(fig) -> None:
    """Every text of the figure (titles, tick labels, axis titles, legends) lies inside it, and no two tick
    labels of an axis overlap: the figure is tall (and wide) enough for its labels."""
    canvas = FigureCanvasAgg(fig)  # the Space's figures are let go by pyplot: draw them on their own canvas
    canvas.draw()
    renderer = canvas.get_renderer()
    drawn = fig.get_tightbbox(renderer)  # inches: every artist drawn, tick labels, titles and legends included
    width, height = fig.get_size_inches()
    assert drawn.x0 >= -0.01 and drawn.y0 >= -0.01, drawn
    assert drawn.x1 <= width + 0.01 and drawn.y1 <= height + 0.01, (drawn, width, height)
    for ax in fig.axes:
        ticks = [t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()]
        ticks.sort(key=lambda e: e.y0)
        assert all(low.y1 <= high.y0 + 0.5 for low, high in itertools.pairwise(ticks)), ax.get_title()


def test_figure2_log_axis_one_line_per_family_and_the_practitioners() -> None:
    fig = figure2(board_lib.merge(ROWS, FP))
    paper, here = fig.axes
    assert paper.get_xscale() == here.get_xscale() == "log"
    lines, evaluated = _lines(paper), _lines(here)
    reported = board_lib.reported_rows()
    families = set(reported["family"])
    drawn = {label for label in lines if not label.lstrip("_").startswith((HUMAN, "Pass mark"))}
    assert drawn == families
    for family in families:  # each family's line runs through its paper rows, sorted by size
        rows = reported[reported["family"] == family].sort_values("params_b")
        assert list(lines[family].get_xdata()) == rows["params_b"].tolist()
        assert list(lines[family].get_ydata()) == rows["full"].tolist()
        assert lines[family].get_linestyle() == "-"
    # the comparable evaluated rows, on their own axes: dashed, sorted by size, Qwen2's in the paper's Qwen2
    # colour; the partial run and the row without a size are not drawn
    qwen = evaluated["Qwen2" + EVALUATED]
    assert list(qwen.get_xdata()) == [0.5, 7.0] and list(qwen.get_ydata()) == [30.0, 61.0]
    assert qwen.get_linestyle() == "--" and qwen.get_color() == lines["Qwen2"].get_color()
    assert list(evaluated["Newfam" + EVALUATED].get_xdata()) == [1.0]
    assert here.get_shared_y_axes().joined(paper, here)  # one scale, two sets of items
    # the practitioners: one series (named once), a line on each panel at its own items' majority
    assert [line.get_ydata()[0] for line in paper.get_lines() if HUMAN in line.get_label()] == [64.94]
    assert [line.get_ydata()[0] for line in here.get_lines() if HUMAN in line.get_label()] == [70.0]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend.count(HUMAN) == 1 and f"Qwen2{EVALUATED}" in legend and "Qwen2" in legend
    _fits(fig)
    alone = figure2(board_lib.merge([]))  # no comparable row: the paper's panel alone
    assert len(alone.axes) == 1
    _fits(alone)


def test_demo_tree_row_is_not_on_the_papers_axes() -> None:
    """A 32-item demo run (the served data, so comparable) is drawn on the evaluated panel, titled with its
    data; the paper's panel holds the paper's rows only; a row on other data is drawn nowhere and said."""
    demo = {**COMMON, "model": "gemma-3-270m-it", "family": "Gemma3", "params_b": 0.27, "full": 3.12}
    demo |= {"subset": 4.0, "human_reference": 70.0, "data": "runs/demo-tree"}
    other = {**COMMON, "model": "org/elsewhere", "family": "Gemma3", "params_b": 1.0, "full": 9.0}
    frame = board_lib.merge([demo, other | {"data_fingerprint": "other"}], FP)
    paper, here = figure2(frame).axes
    assert all(3.12 not in line.get_ydata() for line in paper.get_lines())
    assert [list(line.get_ydata()) for line in here.get_lines() if EVALUATED in line.get_label()] == [[3.12]]
    assert "runs/demo-tree" in here.get_title() and "not the paper's corpus" in here.get_title()
    paper_bars, here_bars = subset_figure(frame).axes
    assert "gemma-3-270m-it" not in [t.get_text() for t in paper_bars.get_yticklabels()]
    assert [t.get_text() for t in here_bars.get_yticklabels()] == ["gemma-3-270m-it"]
    assert "**org/elsewhere** (other data)" in left_off(frame)


def test_family_lines_leave_out_rows_without_a_positive_size() -> None:
    points = pd.DataFrame(
        {"model": ["b", "a", "c", "d"], "params_b": [2.0, 1.0, 0.0, 3.0], "full": [20, 10, 5, 30], "family": "F"}
    )
    assert family_lines(points) == {"F": {"models": ["a", "b", "d"], "params_b": [1.0, 2.0, 3.0], "full": [10, 20, 30]}}


def test_subset_chart_has_one_practitioners_series_and_fits_its_labels() -> None:
    """After an evaluation the practitioners are one series (a line per panel at their majority on its items,
    named once), never bars; the chart is as tall as its bars and their names need."""
    frame = board_lib.merge(ROWS, FP)
    bars = subset_bars(frame)
    assert "reference" not in set(bars["origin"]) and board_lib.HUMAN_NAME not in set(bars["model"])
    fig = subset_figure(frame)
    paper, here = fig.axes
    names = [[t.get_text() for t in ax.get_yticklabels()] for ax in (paper, here)]
    assert names[1] == ["org/new-1b", "org/qwen-0.5b", "org/qwen-7b"]  # high on top: barh draws from the bottom
    assert len(names[0]) == len(board_lib.reported_rows())
    practitioners = [
        [line.get_xdata()[0] for line in ax.get_lines() if HUMAN in line.get_label()] for ax in (paper, here)
    ]
    assert practitioners == [[64.94], [70.0]]
    legend = [t.get_text() for t in paper.get_legend().get_texts()]
    assert legend == [HUMAN] and here.get_legend() is None
    assert fig.get_figheight() * fig.dpi >= 20 * (len(names[0]) + len(names[1]))  # not a 50-pixel strip
    assert here.get_xlabel() == "Subset exact match (%)"
    _fits(fig)
