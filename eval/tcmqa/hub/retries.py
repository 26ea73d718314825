"""Hub errors: which are worth another try (429, 5xx, dropped connections, timeouts), how long the Hub asked
us to wait, and ``with_retries`` (exponential backoff with full jitter, ``Retry-After`` honoured)."""

from __future__ import annotations

import datetime as dt
import email.utils
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

log = logging.getLogger("tcmqa.hub")
T = TypeVar("T")


def _network_errors() -> tuple[type[BaseException], ...]:
    """Connection errors and timeouts of every HTTP client the Hub client may be running on."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        import httpx2

        errors.append(httpx2.TransportError)
    except ImportError:  # pragma: no cover - huggingface_hub < 2 runs on requests/httpx
        pass
    try:
        import httpx

        errors.append(httpx.TransportError)
    except ImportError:  # pragma: no cover
        pass
    try:
        import requests

        errors += [requests.ConnectionError, requests.Timeout]
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


NETWORK_ERRORS = _network_errors()


def http_status(err: BaseException) -> int | None:
    """The HTTP status of a Hub error, None for anything that is not an HTTP answer."""
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def retry_after(err: BaseException) -> float | None:
    """Seconds the Hub asked us to wait (``Retry-After``: seconds or an HTTP date), if it did."""
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


def is_transient(err: BaseException) -> bool:
    """429, 5xx, dropped connections and timeouts: worth another try. Any other error is final."""
    if isinstance(err, OfflineModeIsEnabled):  # a ConnectionError, but one that no waiting cures
        return False
    if isinstance(err, HfHubHTTPError):
        status = http_status(err)
        return status == 429 or (status is not None and status >= 500)
    return isinstance(err, NETWORK_ERRORS)


def with_retries(
    call: Callable[[], T],
    *,
    attempts: int = 5,
    base_s: float = 1.0,
    max_s: float = 60.0,
    sleep: Callable[[float], Any] = time.sleep,
    rng: random.Random | None = None,
    what: str = "Hub call",
) -> T:
    """``call()``, retried on transient errors (``is_transient``) up to ``attempts`` tries in all.

    Waits between tries are exponential with full jitter (uniform in ``[0, min(max_s, base_s * 2**i)]``);
    a ``Retry-After`` from the Hub is honoured (waited at least). A Hub that asks for more than ``max_s``
    is not waited on here: its error is raised at once, and the caller reschedules with ``retry_after(err)``.
    Errors that no retry can cure (4xx other than 429, offline mode, bugs) are raised at once as they
    are: a ``HfHubHTTPError`` carries the Hub's own message.
    """
    rng = rng or random.Random()
    attempts = max(1, attempts)
    for attempt in range(attempts):
        try:
            return call()
        except Exception as err:
            if not is_transient(err) or attempt == attempts - 1:
                raise
            asked = retry_after(err)
            if asked is not None and asked > max_s:
                raise
            delay = rng.uniform(0.0, min(max_s, base_s * 2**attempt))
            if asked is not None:
                delay = max(delay, asked)
            log.info("%s failed (%s), try %d/%d; retrying in %.2fs", what, short(err), attempt + 1, attempts, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def job_level(err: BaseException) -> bool:
    """Whether a failed publication is likely the fault of what was sent, not of the Hub or the repo.

    A local error (a row that does not fit ``RESULTS``) or a request the Hub refused as such (400, 413,
    422) is; a transient error, an auth or missing-repo error (401, 403, 404) or offline mode is not.
    """
    status = http_status(err)
    if status is not None:
        return status in (400, 413, 422)
    return not isinstance(err, (*NETWORK_ERRORS, OfflineModeIsEnabled))


def short(err: BaseException, limit: int = 300) -> str:
    """An error as one line for a log or the outbox: its HTTP status first, capped at ``limit``."""
    status = http_status(err)
    text = " ".join(str(err).split()) or type(err).__name__
    text = f"HTTP {status}: {text}" if status and not text.startswith(str(status)) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"
