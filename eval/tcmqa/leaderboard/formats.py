"""How a value is shown in the Space's tables: the one home of rounding, headers and read-only tables.

A number is rounded to what it means, by its kind (:data:`Kind`): a percentage or a score to 2 decimals (the
paper's precision), a p-value to 2 significant digits (1.2e-09 is not 0.0, and 0.051 is not 0.05), a margin,
a log-prob, a probability or a statistic to 2 decimals, a count as an integer; a value below 0.1 keeps 2
significant digits whatever its kind (so a p-value in a column of mixed values is never flattened to 0).
A header is words, never a field name (``lp_prediction`` reads "LP prediction"). Every table of the Space
is a :class:`Table`, which applies both to whatever frame a handler returns (:func:`shown`), is read-only
(a click never opens an editor), and says what it is waiting for instead of gradio's "1 2 3" headers when
it has no columns.

The rounding happens where a frame becomes a table, so the logic modules keep full precision for tests and
for the sort (the board sorts its numbers, not their text).
"""

from __future__ import annotations

import math
import re
from abc import ABCMeta
from typing import Any, Literal

import gradio as gr
import pandas as pd
from gradio.component_meta import ComponentMeta

Kind = Literal["percent", "p_value", "decimal", "count"]
DECIMALS = 2  # percentages, margins, probe values, statistics
P_DIGITS = 2  # significant digits of a p-value, and of any value below SMALL
SMALL = 0.1  # below it 2 decimals would lose the value (0.0031 is not 0.0): 2 significant digits instead
EMPTY = "nothing to show yet"  # the header of a table that has no columns yet
CSS = """
.tcmqa-table th, .tcmqa-table td { min-width: 5.5em; }
.tcmqa-table th:first-child, .tcmqa-table td:first-child { min-width: 8em; }
"""  # no column so narrow that its words wrap a letter a line: the table scrolls sideways instead
_P_HEADER = re.compile(r"(^|[\s(])(p|p-value|p value)$", re.IGNORECASE)  # "p", "Order p", "McNemar p-value"
_ACRONYMS = {"lp": "LP", "id": "id", "ci": "CI", "ece": "ECE"}


def significant(value: float, digits: int = P_DIGITS) -> float:
    """``value`` to ``digits`` significant digits (2.345e-09 -> 2.3e-09, never 0.0); NaN stays NaN."""
    return value if math.isnan(value) or value == 0 else float(f"{value:.{digits}g}")


def rounded(value: Any, kind: Kind) -> Any:
    """A number as a table cell shows it, still a number (so a column sorts by value); None for no value."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if math.isnan(value):
        return None
    if kind == "count":
        return round(value)
    if kind == "p_value" or abs(value) < SMALL:
        return significant(float(value))
    return round(float(value), DECIMALS)


def field_kind(name: str) -> Kind:
    """The kind of a results field's values (``tcmqa.schema.RESULT_COLUMNS``): a count for an integer field, a
    p-value for ``*_p``, else a decimal: what a table of one model's fields, one a row, rounds each value by."""
    from tcmqa.schema import RESULTS

    if name.endswith("_p"):
        return "p_value"
    dtype = RESULTS[name].dtype if name in RESULTS else "float32"
    return "count" if dtype.startswith("int") else "decimal"


def header(name: Any) -> str:
    """A column's header in words: a field name's underscores become spaces, known acronyms capitals."""
    words = str(name).split("_")
    if len(words) == 1:
        return str(name)
    words = [_ACRONYMS.get(w.lower(), w) for w in words]
    return " ".join(words)


def kind_of(header_text: str, values: pd.Series) -> Kind | None:
    """The kind of a column's numbers: a p-value by its header, a count when every value is whole, a percentage
    by its header, else a decimal; None for a column of no numbers."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool) and not pd.isna(v)]
    if not numbers:
        return None
    if _P_HEADER.search(header_text.strip()):
        return "p_value"
    if all(float(v).is_integer() for v in numbers):
        return "count"
    return "percent" if "%" in header_text else "decimal"


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a table shows it: headers in words, every number rounded by its column's kind."""
    if len(frame.columns) == 0:
        return pd.DataFrame(columns=[EMPTY])
    out = frame.copy()
    out.columns = [header(c) for c in out.columns]
    for position in range(out.shape[1]):
        column = out.iloc[:, position]
        kind = kind_of(str(out.columns[position]), column)
        if kind is not None:
            out.isetitem(position, column.astype(object).map(lambda v, k=kind: rounded(v, k)))
    return out


def _postprocess(self: gr.Dataframe, value: Any) -> Any:
    """gr.Dataframe's postprocess of what a handler returned, :func:`shown` first."""
    if isinstance(value, pd.DataFrame):
        value = shown(value)
    elif value is None:
        value = pd.DataFrame(columns=[EMPTY])
    return gr.Dataframe.postprocess(self, value)


# A gr.Dataframe whose values are :func:`shown` (see the module doc), rendered by gradio's own Dataframe
# (``is_template``). Made with ABCMeta's ``__new__``, not a class statement: gradio's ComponentMeta writes a
# .pyi stub beside the module of every component class it sees defined, and this class adds no constructor
# and no event for a stub to declare. A class (not a patched instance) because gradio rebuilds a component
# from its class when a handler returns gr.update(...).
Table: type[gr.Dataframe] = ABCMeta.__new__(
    ComponentMeta, "Table", (gr.Dataframe,), {"postprocess": _postprocess, "is_template": True, "__module__": __name__}
)


def table(value: Any = None, **kwargs: Any) -> gr.Dataframe:
    """A read-only :data:`Table` (a click never opens an editor); ``kwargs``: gr.Dataframe's."""
    kwargs["interactive"] = False
    kwargs["elem_classes"] = ["tcmqa-table", *(kwargs.get("elem_classes") or [])]
    return Table(pd.DataFrame(columns=[EMPTY]) if value is None else value, **kwargs)
