"""The Plots tab's Figure 2 (tcmqa.leaderboard.plots): Full against parameters on a log axis, one line per
family through its models sorted by size (the paper's rows solid, the comparable evaluated rows dashed in
their family's colour), and the practitioners' reference lines; checked on the matplotlib Axes."""

from __future__ import annotations

import pandas as pd

from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.plots import EVALUATED, family_lines, figure2, subset_bars
from tcmqa.prompts import PROTOCOL

FP = "fingerprint-of-the-served-data"
COMMON = {"origin": "evaluated", "protocol": PROTOCOL, "data_fingerprint": FP, "coverage": 100.0}
ROWS = [
    {**COMMON, "model": "org/qwen-7b", "family": "Qwen2", "params_b": 7.0, "full": 61.0, "human_reference": 70.0},
    {**COMMON, "model": "org/qwen-0.5b", "family": "Qwen2", "params_b": 0.5, "full": 30.0, "human_reference": 70.0},
    {**COMMON, "model": "org/new-1b", "family": "Newfam", "params_b": 1.0, "full": 20.0, "human_reference": 70.0},
    {**COMMON, "model": "org/partial", "family": "Qwen2", "params_b": 3.0, "full": 90.0, "coverage": 50.0},
    {**COMMON, "model": "org/unsized", "family": "Qwen2", "params_b": None, "full": 50.0},
]


def test_figure2_log_axis_one_line_per_family_and_the_practitioners() -> None:
    frame = board_lib.merge(ROWS, FP)
    ax = figure2(frame).axes[0]
    assert ax.get_xscale() == "log"
    lines = {line.get_label(): line for line in ax.get_lines()}
    reported = board_lib.reported_rows()
    families = set(reported["family"])
    drawn = {
        label for label in lines if not label.startswith(("Practitioners", "Pass mark")) and EVALUATED not in label
    }
    assert drawn == families
    for family in families:  # each family's line runs through its paper rows, sorted by size
        rows = reported[reported["family"] == family].sort_values("params_b")
        assert list(lines[family].get_xdata()) == rows["params_b"].tolist()
        assert list(lines[family].get_ydata()) == rows["full"].tolist()
        assert lines[family].get_linestyle() == "-"
    # the comparable evaluated rows: dashed, sorted by size, Qwen2's in the paper's Qwen2 colour; the partial
    # run and the row without a size are not drawn
    qwen = lines["Qwen2" + EVALUATED]
    assert list(qwen.get_xdata()) == [0.5, 7.0] and list(qwen.get_ydata()) == [30.0, 61.0]
    assert qwen.get_linestyle() == "--" and qwen.get_color() == lines["Qwen2"].get_color()
    assert list(lines["Newfam" + EVALUATED].get_xdata()) == [1.0]
    references = {label: line for label, line in lines.items() if label.startswith("Practitioners")}
    assert sorted(line.get_ydata()[0] for line in references.values()) == [64.94, 70.0]
    assert "Practitioners 64.94 (paper)" in references
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(lines)


def test_family_lines_leave_out_rows_without_a_positive_size() -> None:
    points = pd.DataFrame(
        {"model": ["b", "a", "c", "d"], "params_b": [2.0, 1.0, 0.0, 3.0], "full": [20, 10, 5, 30], "family": "F"}
    )
    assert family_lines(points) == {"F": {"models": ["a", "b", "d"], "params_b": [1.0, 2.0, 3.0], "full": [10, 20, 30]}}


def test_subset_bars_name_each_reference_for_where_it_was_computed() -> None:
    """Two practitioners' references (the paper's 64.94, this board's 70.0) are two bars, not one stacked bar."""
    bars = subset_bars(board_lib.merge(ROWS, FP))
    references = bars[bars["origin"] == "reference"].set_index("model")["subset"]
    assert references.to_dict() == {
        f"{board_lib.HUMAN_NAME} (paper)": 64.94,
        f"{board_lib.HUMAN_NAME} (this board's subset)": 70.0,
    }
    assert bars["model"].is_unique
