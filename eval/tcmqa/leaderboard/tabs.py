"""The Space's Plots, Compare and Model tabs: their gradio components and handlers (:mod:`tcmqa.leaderboard.space`
calls one function per tab; the logic lives in :mod:`~tcmqa.leaderboard.plots`,
:mod:`~tcmqa.leaderboard.compare` and :mod:`~tcmqa.leaderboard.model_page`).

Every handler goes through the app's ``safe`` wrapper, the guard's public declaration
(:meth:`tcmqa.leaderboard.identity.Guard.public`: anyone may call it; a failure reaches the visitor as its
kind and an id). What each endpoint returns of an item is listed in
tests/test_practitioner_open_block.py (``ENDPOINTS``): ``/plots`` and ``/model_page`` are aggregates;
``/compare`` lists items, never one in an open practitioner block; ``model_choices`` the model names;
``open_item`` the id of the row a visitor clicked, which the Item explorer then shows by its own rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.compare import PAGE_SIZE, Comparator
from tcmqa.leaderboard.lang import t
from tcmqa.leaderboard.model_page import ModelPages
from tcmqa.leaderboard.plots import figure2, subset_bars
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.leaderboard.settings import Settings
from tcmqa.store import Store

Safe = Callable[[Callable[..., Any]], Callable[..., Any]]
# which differing items the Compare tab lists: the model that got them right (None: either)
WHICH = {"one is right, the other wrong": None, "A right, B wrong": "A", "B right, A wrong": "B"}
WHICH_CHOICES = list(WHICH)
WHICH_KEYS = dict(zip(WHICH_CHOICES, ("compare_either", "compare_a_right", "compare_b_right"), strict=True))

# after a differing item is clicked (its id is in the explorer's box): open the Item explorer and show it
OPEN_ITEM_JS = """() => {
  const tab = document.querySelector("#tab-explorer-button");
  if (tab) tab.click();
  let tries = 0;
  const show = () => {
    const button = document.querySelector("#item-show");
    if (button && button.checkVisibility()) button.click();
    else if (tries++ < 40) setTimeout(show, 50);
  };
  setTimeout(show, 50);
}"""


def plots_tab(board: board_lib.Board, demo: gr.Blocks, timer: gr.Timer, safe: Safe) -> None:
    """The Plots tab: the paper's Figure 2 from the board, and Subset accuracy high to low."""

    @safe
    def show_plots() -> tuple[Any, pd.DataFrame]:
        frame = board.frame()
        return figure2(frame), subset_bars(frame)

    with gr.Tab(t("tab_plots"), elem_id="tab-plots"):
        size = gr.Plot(label=t("plots_figure2"), elem_id="plots-figure2")
        bars = gr.BarPlot(
            x="model",
            y="subset",
            color="origin",
            sort="-y",
            y_title=t("plots_subset_axis"),
            label=t("plots_subset"),
            x_label_angle=-60,
        )
    gr.on([demo.load, timer.tick], show_plots, None, [size, bars], api_name="plots", show_progress="hidden")


def _no_comparison(text: str) -> tuple[Any, ...]:
    return text, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), ""


def analysis_tabs(
    settings: Settings, store: Store, practice: PracticeLoader, item_id: gr.Textbox, demo: gr.Blocks, safe: Safe
) -> None:
    """The Compare and Model tabs. ``practice``: the Space's ``PracticeLoader`` (used in practitioner mode
    only); ``item_id``: the Item explorer's id box, which a clicked differing item fills."""
    comparator = Comparator(settings.data, store, settings.practice_raters)
    pages = ModelPages(comparator, practice if settings.practice else None)

    @safe
    def model_choices() -> tuple[Any, Any, Any]:
        names = comparator.models()
        return gr.update(choices=names), gr.update(choices=names), gr.update(choices=names)

    @safe
    def show_compare(
        model_a: str | None, model_b: str | None, which: str | None, page: float | None
    ) -> tuple[Any, ...]:
        if not model_a or not model_b:
            return _no_comparison("Choose two models.")
        known = comparator.outputs.runs()
        missing = [m for m in (model_a, model_b) if m not in known]
        if missing:
            return _no_comparison(f"No outputs for {', '.join(f'`{m}`' for m in missing)}.")
        c = comparator.compare(model_a, model_b)
        right = WHICH.get(which or "")
        pages = c.pages(right=right)
        number = min(max(int(page or 1), 1), pages)
        note = (
            f"{len(c.listed(right)):,} items where {which or WHICH_CHOICES[0]}; page {number} of {pages} "
            f"({PAGE_SIZE} a page). Click a row to open the item."
        )
        if c.withheld:
            note += f" {c.withheld:,} more are withheld: they are in practitioner blocks still being answered."
        return c.summary(), c.accuracy, c.by_domain, c.outcomes, c.page(number, right=right), note

    @safe
    def open_item(event: gr.SelectData) -> str:
        """The id of the clicked row of the differing items (its first column)."""
        if event is None or not event.row_value:
            return gr.update()  # pyright: ignore[reportReturnType]
        return str(event.row_value[0])

    @safe
    def show_model(model: str | None) -> tuple[Any, ...]:
        if not model:
            return ("Choose a model.", *[None] * 8)
        if model not in comparator.outputs.runs():
            return (f"No outputs for `{model}`.", *[None] * 8)
        p = pages.page(model)
        if not p.n_subset:
            return (
                p.summary(),
                p.by_domain,
                None,
                p.by_difficulty,
                None,
                p.by_consensus,
                None,
                p.calibration,
                p.probes,
            )
        return (
            p.summary(),
            p.by_domain,
            p.domain_figure(),
            p.by_difficulty,
            p.difficulty_figure(),
            p.by_consensus,
            p.consensus_figure(),
            p.calibration,
            p.probes,
        )

    with gr.Tab(t("tab_compare"), elem_id="tab-compare"):
        with gr.Row():
            model_a = gr.Dropdown([], label=t("compare_a"), filterable=True, elem_id="compare-a")
            model_b = gr.Dropdown([], label=t("compare_b"), filterable=True, elem_id="compare-b")
            which = gr.Radio(
                [(t(WHICH_KEYS[w]), w) for w in WHICH_CHOICES],
                value=WHICH_CHOICES[0],
                label=t("compare_which"),
                elem_id="compare-which",
            )
            page = gr.Number(1, label=t("compare_page"), minimum=1, precision=0, elem_id="compare-page")
        run = gr.Button(t("compare_run"), variant="primary", elem_id="compare-run")
        summary = gr.Markdown(elem_id="compare-summary")
        with gr.Row():
            outcomes = gr.Dataframe(interactive=False, label=t("compare_outcomes"), elem_id="compare-outcomes")
            accuracy = gr.Dataframe(interactive=False, label=t("compare_types"), elem_id="compare-types")
        by_domain = gr.Dataframe(interactive=False, label=t("compare_domains"), elem_id="compare-domains")
        note = gr.Markdown(elem_id="compare-note")
        items = gr.Dataframe(
            interactive=False, wrap=True, label=t("compare_items"), elem_id="compare-items", max_height=600
        )
    with gr.Tab(t("tab_model"), elem_id="tab-model"):
        with gr.Row():
            model = gr.Dropdown([], label=t("model_select"), filterable=True, elem_id="model-select")
            show = gr.Button(t("model_show"), variant="primary", elem_id="model-show")
        model_summary = gr.Markdown(elem_id="model-summary")
        with gr.Row():
            domain_table = gr.Dataframe(interactive=False, label=t("model_domains"), elem_id="model-domains")
            domain_plot = gr.Plot(label=t("model_domain_plot"), elem_id="model-domain-plot")
        with gr.Row():
            difficulty_table = gr.Dataframe(interactive=False, label=t("model_difficulty"), elem_id="model-difficulty")
            difficulty_plot = gr.Plot(label=t("model_difficulty_plot"), elem_id="model-difficulty-plot")
        consensus_table = gr.Dataframe(interactive=False, label=t("model_consensus"), elem_id="model-consensus")
        consensus_plot = gr.Plot(label=t("model_consensus_plot"), elem_id="model-consensus-plot")  # 2 panels: wide
        with gr.Row():
            calibration = gr.Dataframe(
                interactive=False, wrap=True, label=t("model_calibration"), elem_id="model-calibration"
            )
            probes = gr.Dataframe(interactive=False, wrap=True, label=t("model_probes"), elem_id="model-probes")
    demo.load(model_choices, None, [model_a, model_b, model], api_name=False, show_progress="hidden")
    compared = [summary, accuracy, by_domain, outcomes, items, note]
    gr.on(
        [run.click, page.submit, which.input],
        show_compare,
        [model_a, model_b, which, page],
        compared,
        api_name="compare",
    )
    items.select(open_item, None, item_id, api_name=False).then(None, js=OPEN_ITEM_JS)
    shown = [
        model_summary,
        domain_table,
        domain_plot,
        difficulty_table,
        difficulty_plot,
        consensus_table,
        consensus_plot,
        calibration,
        probes,
    ]
    gr.on([show.click, model.input], show_model, model, shown, api_name="model_page")
