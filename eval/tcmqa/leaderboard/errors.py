"""What a visitor is told of a failure: its kind and an id; the operator's log holds the full text.

An exception's text can name a database host, user or password (a connection error does), so it never
reaches a page or an API response; the id ties the visitor's report to the log line.
"""

from __future__ import annotations

import logging
import secrets

LOG = logging.getLogger("tcmqa.space")


def kind_of(err: BaseException) -> str:
    """A short, secret-free description of what failed, from the exception's type alone."""
    name = f"{type(err).__module__}.{type(err).__name__}".lower()
    if any(word in name for word in ("sqlite", "psycopg", "operationalerror", "databaseerror", "interfaceerror")):
        return "database unavailable"
    if any(word in name for word in ("httpx", "requests", "huggingface_hub", "connection", "timeout")):
        return "the Hub is unreachable"
    return "internal error"


def reported(err: BaseException, what: str) -> str:
    """Log ``err`` with a fresh id (operator) and return what the visitor sees: kind and id only."""
    error_id = secrets.token_hex(3)
    LOG.error("%s failed (error %s): %s", what, error_id, err, exc_info=err)
    return f"{kind_of(err)} (error {error_id})"
