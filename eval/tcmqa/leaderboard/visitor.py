"""What a Space handler's failure shows a visitor: its kind and an id, never its text (the text goes to the
log, :func:`tcmqa.leaderboard.errors.reported`). Every tab's handlers go through :func:`visitor_safe`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr

from tcmqa.leaderboard.errors import reported

Handler = TypeVar("Handler", bound=Callable[..., Any])


def visitor_safe(fn: Handler) -> Handler:
    """A handler whose failure reaches the visitor as its kind and an id only (``tcmqa.leaderboard.errors``)."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as err:
            raise gr.Error(reported(err, fn.__name__)) from None

    return guarded  # pyright: ignore[reportReturnType]
