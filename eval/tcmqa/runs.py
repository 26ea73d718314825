"""What a run shares between ``tcmqa eval`` (:mod:`tcmqa.harness`), ``tcmqa probe`` (:mod:`tcmqa.probes.run`)
and the worker: the data fingerprint, items in chunks, and the exit status of a run that failed for a passing
cause. It sits below them all, so none imports another for these.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item", bound=Mapping[str, Any])


def data_fingerprint(items: Sequence[Mapping[str, Any]]) -> str:
    """Hash of what the model is asked and scored against, in order.

    The results row carries the fingerprint of the whole scorable corpus (every unflagged item), so a
    --limit run and a full run on the same data share it; the run manifest carries that of the items
    this run evaluates, so that --resume continues only the same selection.
    """
    digest = hashlib.sha256()
    for item in items:
        fields = [item["id"], item["question"], item["options"], item["answer"], item["answer_type"]]
        digest.update(json.dumps(fields, ensure_ascii=False, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def chunked(items: Sequence[Item], size: int) -> list[list[Item]]:
    """``items`` in consecutive chunks of ``size`` (the last one shorter): one output or probe part each."""
    return [list(items[start : start + size]) for start in range(0, len(items), size)]


EXIT_TRANSIENT = 75  # sysexits' EX_TEMPFAIL: the run failed for a passing cause (Hub or network down); retry later
_NETWORK_ERRORS = {"ConnectError", "ConnectTimeout", "ReadTimeout", "RemoteProtocolError", "ProxyError"}


def is_transient(err: BaseException | None) -> bool:
    """Whether ``err`` or what caused it is the network or the Hub being down (429 or 5xx), not the model's fault."""
    while err is not None:
        if isinstance(err, (ConnectionError, TimeoutError)) or type(err).__name__ in _NETWORK_ERRORS:
            return True
        status = getattr(getattr(err, "response", None), "status_code", None)
        if isinstance(status, int) and (status == 429 or status >= 500):
            return True
        err = err.__cause__ or err.__context__
    return False
