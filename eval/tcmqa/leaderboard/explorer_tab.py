"""The Space's Item explorer tab: search and filters, pages of results, and the item page a row opens.

Gradio wiring only: the logic is :class:`tcmqa.leaderboard.explorer.Explorer` (what is withheld for items
in open practitioner blocks) over :mod:`tcmqa.leaderboard.browse` (the filters and pages).
:mod:`tcmqa.leaderboard.space` calls :func:`explorer_tab` inside its ``gr.Tab``; every handler goes through
``public``, the guard's public declaration (:meth:`tcmqa.leaderboard.identity.Guard.public`).
The endpoints, each classified in tests/test_practitioner_open_block.py's ENDPOINTS: ``/browse`` (a page),
``/item`` (an item page), and the private ``first_page`` (a filter changed), ``previous_page``,
``next_page``, ``open_row`` (a result row clicked) and ``refresh_choices`` (page load: the models with
outputs, the leading comparable one first, and the source difficulties).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import pandas as pd

from tcmqa.leaderboard import browse, lang
from tcmqa.leaderboard.board import Board
from tcmqa.leaderboard.errors import reported
from tcmqa.leaderboard.explorer import MODELS_PER_PAGE, Explorer
from tcmqa.leaderboard.formats import table
from tcmqa.leaderboard.lang import t
from tcmqa.schema import DOMAINS, RATERS_PER_ITEM

ANY = ""  # every dropdown's "no filter" value
ANY_CHOICE = (t("any"), ANY)
DOMAIN_CHOICES = [ANY_CHOICE, *[(lang.domain_label(key), key) for key in DOMAINS]]
TYPE_CHOICES = [ANY_CHOICE, (t("single_answer"), "single"), (t("multi_answer"), "multi")]
RATED_NAMES = {1: t("explorer_easiest"), 5: t("explorer_hardest")}
RATED_CHOICES = [ANY_CHOICE, *[(RATED_NAMES.get(k, str(k)), str(k)) for k in browse.RATED_LEVELS]]
OUTCOME_CHOICES = [ANY_CHOICE, *[(label, label) for label in browse.OUTCOMES]]
# the item page's tables before an item is shown (not the tables' own headers: those are what the open-block
# test looks for in a page's traffic to tell that a table of an item was sent)
NO_ITEM = pd.DataFrame(columns=["no item shown yet"])
SHOW_ITEM_JS = '() => document.querySelector("#item-text")?.scrollIntoView({behavior: "smooth"})'  # after a row click


def _number(value: str | None) -> int | None:
    """A dropdown's value as a filter: None for "any", else its integer."""
    if value in (None, ANY):
        return None
    try:
        return int(str(value))
    except ValueError:
        raise browse.Refused(f"{value!r} is not a number") from None


def filters(
    search: str,
    domain: str | None,
    answer_type: str | None,
    rated_difficulty: str | None,
    source_difficulty: str | None,
    consensus: str | None,
    outcome: str | None,
) -> browse.Filters:
    """The controls' values as a query (:class:`browse.Refused` for a value no control offers)."""
    return browse.Filters(
        search=search or "",
        domain=domain or None,
        answer_type=answer_type or None,
        rated_difficulty=_number(rated_difficulty),
        source_difficulty=_number(source_difficulty),
        consensus=_number(consensus),
        outcome=outcome or None,
    )


def explorer_tab(explorer: Explorer, board: Board, demo: gr.Blocks, public: Callable[[Any], Any]) -> gr.Textbox:
    """The tab's components and events (call inside ``gr.Tab("Item explorer")``); returns the item id box,
    which other tabs fill to open an item (then they click ``#item-show``)."""

    def show_page(
        search: str,
        domain: str | None,
        answer_type: str | None,
        rated_difficulty: str | None,
        source_difficulty: str | None,
        consensus: str | None,
        outcome: str | None,
        model: str | None,
        page_number: float | None,
    ) -> tuple[pd.DataFrame, str, int]:
        """A page of matching items, what the summary says, and the page number shown."""
        try:
            query = filters(search, domain, answer_type, rated_difficulty, source_difficulty, consensus, outcome)
            result = explorer.browse(query, model or None, int(page_number or 1))
        except browse.Refused as err:  # the visitor's own input: said back, nothing else
            raise gr.Error(f"{str(err)[:1].upper()}{str(err)[1:]}.") from None
        shown = f" · outcomes of `{model}`" if model else ""
        return result.rows, f"{result.summary()}{shown}", result.number

    def first_page(*controls: Any) -> tuple[pd.DataFrame, str, int]:
        return show_page(*controls[:-1], 1)

    def previous_page(*controls: Any) -> tuple[pd.DataFrame, str, int]:
        return show_page(*controls[:-1], int(controls[-1] or 1) - 1)

    def next_page(*controls: Any) -> tuple[pd.DataFrame, str, int]:
        return show_page(*controls[:-1], int(controls[-1] or 1) + 1)

    def show_item(item_id: str, models_page: float | None = 1) -> tuple[str, pd.DataFrame, pd.DataFrame]:
        """The item page, its models' outputs a page at a time in the model chooser's order."""
        try:
            return explorer.item(item_id, int(models_page or 1), explorer.models(board.frame()))
        except Exception as err:  # the data or the store may be unreachable: say so, with no secret
            return f"The item could not be shown: {reported(err, 'show_item')}.", pd.DataFrame(), pd.DataFrame()

    def open_row(event: gr.SelectData) -> tuple[str, int, str, pd.DataFrame, pd.DataFrame]:
        """A clicked result row's item page (its id is the row's first cell), its first page of models."""
        row = getattr(event, "row_value", None)
        if not row:
            return "", 1, "Click a row of the results to open its item.", pd.DataFrame(), pd.DataFrame()
        item_id = str(row[0])
        return (item_id, 1, *show_item(item_id))

    def fit_tables(*frames: pd.DataFrame | None) -> tuple[Any, ...]:
        """Each of the item page's tables shown only with a row: ``/item`` returns the tables as they are (its
        API callers read them), and the item's text says why one is empty."""
        return tuple(gr.update(visible=frame is not None and not frame.empty) for frame in frames)

    def refresh_choices() -> tuple[Any, Any]:
        """The models with outputs (the leading comparable model first, the default) and the source difficulties."""
        models = explorer.models(board.frame())
        levels = sorted(int(v) for v in explorer.corpus_table["source_difficulty"].dropna().unique())
        return (
            gr.update(choices=models, value=models[0] if models else None),
            gr.update(choices=[(lang.text("any"), ANY), *[(str(v), str(v)) for v in levels]]),
        )

    raters = max(RATERS_PER_ITEM, explorer.raters)  # consensus: 0..N practitioners correct
    gr.Markdown(t("explorer_hint"))
    with gr.Row():
        search = gr.Textbox(
            label=t("explorer_search"), placeholder=t("explorer_search_hint"), elem_id="explorer-search"
        )
        # choices come at page load; an API caller may name any model with outputs (or source difficulty)
        model = gr.Dropdown(
            [], label=t("explorer_model"), filterable=True, allow_custom_value=True, elem_id="explorer-model"
        )
    with gr.Row():
        domain = gr.Dropdown(DOMAIN_CHOICES, value=ANY, label=t("explorer_domain"), elem_id="explorer-domain")
        answer_type = gr.Dropdown(TYPE_CHOICES, value=ANY, label=t("explorer_type"), elem_id="explorer-type")
        rated = gr.Dropdown(RATED_CHOICES, value=ANY, label=t("explorer_rated"), elem_id="explorer-rated")
        source = gr.Dropdown(
            [ANY_CHOICE], value=ANY, label=t("explorer_source"), allow_custom_value=True, elem_id="explorer-source"
        )
        consensus = gr.Dropdown(
            [ANY_CHOICE, *[(f"{k} " + t("explorer_correct"), str(k)) for k in range(raters + 1)]],
            value=ANY,
            label=t("explorer_consensus"),
            elem_id="explorer-consensus",
        )
        outcome = gr.Dropdown(
            OUTCOME_CHOICES, value=ANY, label=t("explorer_outcome"), scale=2, elem_id="explorer-outcome"
        )
    with gr.Row():
        previous_button = gr.Button(
            t("explorer_previous"), size="sm", scale=0, min_width=110, elem_id="explorer-previous"
        )
        page = gr.Number(
            1,
            label=t("explorer_page"),
            precision=0,
            minimum=1,
            scale=0,
            min_width=110,
            container=False,
            elem_id="explorer-page",
        )
        next_button = gr.Button(t("explorer_next"), size="sm", scale=0, min_width=110, elem_id="explorer-next")
        summary = gr.Markdown(elem_id="explorer-summary")
    results = table(
        headers=browse.ROW_COLUMNS,
        interactive=False,
        wrap=True,
        max_height=900,
        column_widths=["8%", "32%", "8%", "17%", "8%", "13%", "7%", "7%"],
        elem_id="explorer-results",
    )
    controls = [search, domain, answer_type, rated, source, consensus, outcome, model, page]
    listing = [results, summary, page]
    for control in (domain, answer_type, rated, source, consensus, outcome, model):
        control.input(public(first_page), controls, listing, api_name=False)
    search.submit(public(first_page), controls, listing, api_name=False)
    page.submit(public(show_page), controls, listing, api_name="browse")
    previous_button.click(public(previous_page), controls, listing, api_name=False)
    next_button.click(public(next_page), controls, listing, api_name=False)
    demo.load(public(refresh_choices), None, [model, source], api_name=False).then(
        public(first_page), controls, listing, api_name=False
    )

    gr.Markdown("### " + t("explorer_item"))
    with gr.Row():
        item_id = gr.Textbox(label=t("explorer_item_id"), elem_id="item-id", scale=3)
        models_page = gr.Number(
            1,
            label=t("explorer_models_page") + f" ({MODELS_PER_PAGE})",
            precision=0,
            minimum=1,
            scale=1,
            elem_id="item-models-page",
        )
        item_button = gr.Button(t("explorer_show"), elem_id="item-show", scale=0, min_width=140)
    item_text = gr.Markdown(elem_id="item-text")
    # each table hidden until it has a row (fit_tables); the item's text says why one is empty
    item_responses = table(
        NO_ITEM, interactive=False, label=t("explorer_responses"), visible=False, elem_id="item-responses"
    )
    item_outputs = table(
        NO_ITEM, interactive=False, wrap=True, label=t("explorer_outputs"), visible=False, elem_id="item-outputs"
    )
    page_outputs = [item_text, item_responses, item_outputs]
    tables = [item_responses, item_outputs]
    gr.on(
        [item_button.click, item_id.submit, models_page.submit],
        public(show_item),
        [item_id, models_page],
        page_outputs,
        api_name="item",
    ).then(public(fit_tables), tables, tables, api_name=False, show_progress="hidden")
    results.select(public(open_row), None, [item_id, models_page, *page_outputs], api_name=False).then(
        public(fit_tables), tables, tables, api_name=False, show_progress="hidden"
    ).then(None, js=SHOW_ITEM_JS)
    return item_id
