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
from tcmqa.leaderboard import formats, lang
from tcmqa.leaderboard.compare import PAGE_SIZE, Comparator, availability, not_comparable
from tcmqa.leaderboard.lang import t
from tcmqa.leaderboard.model_page import ModelPages
from tcmqa.leaderboard.plots import ability_figure, figure2, left_off, subset_figure
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.leaderboard.scale import Scales
from tcmqa.leaderboard.settings import Settings
from tcmqa.store import Store

Safe = Callable[[Callable[..., Any]], Callable[..., Any]]
# which differing items the Compare tab lists: the model that got them right (None: either)
WHICH = {"one is right, the other wrong": None, "A right, B wrong": "A", "B right, A wrong": "B"}
WHICH_CHOICES = list(WHICH)
PRACTITIONER_COLUMNS = ["practitioner", "ability", "ability SE", "items", "accuracy %"]
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
    """The Plots tab: the paper's Figure 2 from the board, the one scale of models and practitioners, Subset
    accuracy high to low, and what they leave off. The figures are drawn once per board and scale (the board's
    frame is rebuilt only when its rows change) and sent to a page only when they changed: a refresh tick of an
    unchanged board sends nothing."""
    drawn: dict[tuple[int, int, float], tuple[Any, ...]] = {}  # the latest board's figures, tables and note

    @safe
    def show_plots(seen: tuple[int, int, float] | None = None) -> tuple[Any, ...]:
        frame = board.frame()
        latest = board.scales.latest if board.scales is not None else None
        mark = board.pass_mark
        key = (id(frame), id(latest), mark)
        if seen == key:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), seen
        if key not in drawn:
            people = pd.DataFrame(columns=PRACTITIONER_COLUMNS)
            if latest is not None:
                names = {"name": "practitioner", "theta": "ability", "theta_se": "ability SE", "n_items": "items"}
                people = latest.practitioners().rename(columns={**names, "accuracy": "accuracy %"})
                people = people[PRACTITIONER_COLUMNS].sort_values("ability", ascending=False).round(2)
            drawn.clear()
            drawn[key] = (
                figure2(frame, mark),
                ability_figure(frame, latest, mark),
                table(people),  # hidden until the scale is fitted: the figure above says so
                subset_figure(frame),
                left_off(frame),
            )
        return (*drawn[key], key)

    with gr.Tab(t("tab_plots"), elem_id="tab-plots"):
        size = gr.Plot(label=t("plots_figure2"), elem_id="plots-figure2")
        ability = gr.Plot(label="One scale: models and practitioners", elem_id="plots-ability")
        practitioners = formats.table(
            interactive=False, label="Practitioners on the scale (each on the items they answered)",
            max_height=300, elem_id="plots-practitioners",
        )  # fmt: skip
        bars = gr.Plot(label=t("plots_subset"), elem_id="plots-subset")
        note = gr.Markdown(elem_id="plots-note")
        shown_board = gr.State(None)  # the board and scale this page's plots were drawn from
    gr.on(
        [demo.load, timer.tick],
        show_plots,
        shown_board,
        [size, ability, practitioners, bars, note, shown_board],
        api_name="plots",
        show_progress="hidden",
    )


HIDDEN = gr.update(visible=False)  # an empty table or plot: its tab says why instead (tcmqa.leaderboard.empty)


def shown(value: Any, visible: bool) -> Any:
    """A table's or plot's value, the component hidden where it would show nothing (its tab says why)."""
    return gr.update(value=value, visible=visible)


def table(frame: pd.DataFrame | None) -> Any:
    """A table, hidden when it has no row."""
    return shown(frame, frame is not None and not frame.empty)


def _no_comparison(text: str) -> tuple[Any, ...]:
    return text, HIDDEN, HIDDEN, HIDDEN, HIDDEN, ""


def analysis_tabs(
    settings: Settings,
    store: Store,
    practice: PracticeLoader,
    item_id: gr.Textbox,
    demo: gr.Blocks,
    safe: Safe,
    board: board_lib.Board,
    scales: Scales | None = None,
) -> None:
    """The Compare and Model tabs. ``practice``: the Space's ``PracticeLoader`` (used in practitioner mode
    only); ``item_id``: the Item explorer's id box, which a clicked differing item fills; ``board``: the rows
    Compare says it cannot compare."""
    comparator = Comparator(settings.data, store, settings.practice_raters)
    pages = ModelPages(comparator, practice if settings.practice else None, scales, settings.pass_mark)

    @safe
    def model_choices() -> tuple[Any, Any, Any, str]:
        """The models with outputs for the three choosers (the only one preset where there is one), and what
        Compare can and cannot compare."""
        runs = comparator.outputs.runs()
        names = sorted(runs)
        only = names[0] if len(names) == 1 else None
        return (
            gr.update(choices=names, value=only),
            gr.update(choices=names),
            gr.update(choices=names, value=only),
            availability(board.frame(), runs),
        )

    @safe
    def show_compare(
        model_a: str | None, model_b: str | None, which: str | None, page: float | None
    ) -> tuple[Any, ...]:
        if not model_a or not model_b:
            return _no_comparison("Choose two models (the rows listed above with per-item outputs).")
        known = comparator.outputs.runs()
        why = not_comparable(board.frame(), known)
        missing = [m for m in (model_a, model_b) if m not in known]
        if missing:
            return _no_comparison(
                " ".join(f"`{m}` cannot be compared: {why.get(m, 'no per-item outputs here')}." for m in missing)
            )
        c = comparator.compare(model_a, model_b)
        if not c.n:
            return _no_comparison(c.summary())
        right = WHICH.get(which or "")
        pages = c.pages(right=right)
        number = min(max(int(page or 1), 1), pages)
        note = (
            f"{len(c.listed(right)):,} items where {which or WHICH_CHOICES[0]}; page {number} of {pages} "
            f"({PAGE_SIZE} a page). Click a row to open the item."
        )
        if c.withheld:
            note += f" {c.withheld:,} more are withheld: they are in practitioner blocks still being answered."
        listed = c.page(number, right=right)
        domains = lang.domain_names(c.by_domain)
        return c.summary(), table(c.accuracy), table(domains), table(c.outcomes), table(listed), note

    @safe
    def open_item(event: gr.SelectData) -> str:
        """The id of the clicked row of the differing items (its first column)."""
        if event is None or not event.row_value:
            return gr.update()  # pyright: ignore[reportReturnType]
        return str(event.row_value[0])

    @safe
    def show_model(model: str | None) -> tuple[Any, ...]:
        """The page's summary and parts; a part with nothing to show is hidden and the summary says why."""
        if not model:
            return ("Choose a model.", *[HIDDEN] * 10)
        if model not in comparator.outputs.runs():
            return (f"No outputs for `{model}`.", *[HIDDEN] * 10)
        p = pages.page(model)
        on = bool(p.n_subset)  # no subset item: nothing to set beside the practitioners
        return (
            p.summary(),
            table(p.scale),
            table(p.passes),
            shown(lang.domain_names(p.by_domain), on),
            shown(p.domain_figure() if on else None, on),
            shown(p.by_difficulty, on),
            shown(p.difficulty_figure() if on else None, on),
            shown(p.by_consensus, on),
            shown(p.consensus_figure() if on else None, on),
            table(p.calibration),
            table(p.probes),
        )

    # choices come at page load; an API caller may name any row (one without outputs is told why it cannot be used)
    with gr.Tab(t("tab_compare"), elem_id="tab-compare"):
        offer = gr.Markdown(elem_id="compare-offer")  # which rows can be compared, which cannot and why
        with gr.Row():
            model_a = gr.Dropdown(
                [], label=t("compare_a"), filterable=True, allow_custom_value=True, elem_id="compare-a"
            )
            model_b = gr.Dropdown(
                [], label=t("compare_b"), filterable=True, allow_custom_value=True, elem_id="compare-b"
            )
            which = gr.Radio(
                [(t(WHICH_KEYS[w]), w) for w in WHICH_CHOICES],
                value=WHICH_CHOICES[0],
                label=t("compare_which"),
                elem_id="compare-which",
            )
            page = gr.Number(1, label=t("compare_page"), minimum=1, precision=0, elem_id="compare-page")
        run = gr.Button(t("compare_run"), variant="primary", elem_id="compare-run")
        summary = gr.Markdown(elem_id="compare-summary")
        with gr.Row():  # every table hidden until a comparison fills it (show_compare)
            outcomes = formats.table(
                interactive=False, label=t("compare_outcomes"), visible=False, elem_id="compare-outcomes"
            )
            accuracy = formats.table(
                interactive=False, label=t("compare_types"), visible=False, elem_id="compare-types"
            )
        by_domain = formats.table(
            interactive=False, label=t("compare_domains"), visible=False, elem_id="compare-domains"
        )
        note = gr.Markdown(elem_id="compare-note")
        items = formats.table(
            interactive=False,
            wrap=True,
            label=t("compare_items"),
            visible=False,
            elem_id="compare-items",
            max_height=600,
        )
    with gr.Tab(t("tab_model"), elem_id="tab-model"):
        with gr.Row():
            model = gr.Dropdown(
                [], label=t("model_select"), filterable=True, allow_custom_value=True, elem_id="model-select"
            )
            show = gr.Button(t("model_show"), variant="primary", elem_id="model-show")
        model_summary = gr.Markdown(elem_id="model-summary")
        # every part hidden until it has something to show (show_model)
        with gr.Row():
            scale_table = formats.table(
                interactive=False, wrap=True, label="On the one scale", visible=False, elem_id="model-scale"
            )
            pass_table = formats.table(
                interactive=False, label=f"Pass mark {settings.pass_mark:g}%", visible=False, elem_id="model-passes"
            )
        with gr.Row():
            domain_table = formats.table(
                interactive=False, label=t("model_domains"), visible=False, elem_id="model-domains"
            )
            domain_plot = gr.Plot(label=t("model_domain_plot"), visible=False, elem_id="model-domain-plot")
        with gr.Row():
            difficulty_table = formats.table(
                interactive=False, label=t("model_difficulty"), visible=False, elem_id="model-difficulty"
            )
            difficulty_plot = gr.Plot(label=t("model_difficulty_plot"), visible=False, elem_id="model-difficulty-plot")
        consensus_table = formats.table(
            interactive=False, label=t("model_consensus"), visible=False, elem_id="model-consensus"
        )
        consensus_plot = gr.Plot(
            label=t("model_consensus_plot"), visible=False, elem_id="model-consensus-plot"
        )  # 2 panels: wide
        with gr.Row():
            calibration = formats.table(
                interactive=False, wrap=True, label=t("model_calibration"), visible=False, elem_id="model-calibration"
            )
            probes = formats.table(
                interactive=False, wrap=True, label=t("model_probes"), visible=False, elem_id="model-probes"
            )
    demo.load(model_choices, None, [model_a, model_b, model, offer], api_name=False, show_progress="hidden")
    compared = [summary, accuracy, by_domain, outcomes, items, note]
    gr.on(
        [run.click, page.submit, which.input],
        show_compare,
        [model_a, model_b, which, page],
        compared,
        api_name="compare",
    )
    items.select(open_item, None, item_id, api_name=False).then(None, js=OPEN_ITEM_JS)
    parts = [
        model_summary,
        scale_table,
        pass_table,
        domain_table,
        domain_plot,
        difficulty_table,
        difficulty_plot,
        consensus_table,
        consensus_plot,
        calibration,
        probes,
    ]
    gr.on([show.click, model.input], show_model, model, parts, api_name="model_page")
