"""The hidden pool as a run sees it: the file a worker hands the harness, and the run folder's hidden part.

A worker reads the accepted pool from its store (never from the Hub) and writes it into the run folder
as ``hidden/pool.json``: the pool's version, its items in the corpus's shape with their ``release_date``,
and the practitioners' reference on each (the majority of the blind answers correct). The harness
evaluates those items after the public ones, in the same engine load, and writes their output rows under
``hidden/<version>/outputs/`` (one folder per pool version, so a run resumed on a grown pool starts the
pool afresh). Everything under ``hidden/`` stays on the worker: the store records the public parts only,
so nothing of it reaches the publisher. What the run prints while it evaluates the pool goes to
``hidden/pool.log`` (:func:`hidden_log`), not to the log whose tail the worker stores and the Queue tab shows:
a model's chat template can raise with the prompt in its message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

HIDDEN_DIR = "hidden"  # a run folder's hidden part: never recorded in the store's parts, never published
POOL_FILE = "pool.json"
LOG_FILE = "pool.log"  # what the run printed while it evaluated the pool
# what a run reads of a pool item (corpus fields): the prompt, the key, and when it was accepted
_ITEM_FIELDS = ("id", "question", "options", "answer", "answer_type", "release_date")


@dataclasses.dataclass(frozen=True)
class HiddenPool:
    """The accepted pool at one version: items (corpus shape plus ``release_date``) and the practitioners'
    reference (item id -> their majority of blind answers correct; an item without one is absent)."""

    version: str
    items: list[dict[str, Any]]
    reference: dict[str, bool]

    def __post_init__(self) -> None:
        if not self.version:
            raise ValueError("a pool needs its version (Store.fresh_pool_version())")
        for item in self.items:
            missing = [name for name in _ITEM_FIELDS if name not in item]
            if missing:
                raise ValueError(f"pool item {item.get('id')!r} lacks {', '.join(missing)}")
            dt.date.fromisoformat(str(item["release_date"])[:10])  # a bad date fails here, not in a column

    def outputs_dir(self, run_dir: Path) -> Path:
        """Where this version's output rows go in ``run_dir`` (``tcmqa.outputs`` writes ``outputs/`` under it)."""
        return Path(run_dir) / HIDDEN_DIR / self.version[:16]


def write_pool(run_dir: Path, version: str, items: Sequence[Mapping[str, Any]], reference: Mapping[str, bool]) -> Path:
    """Write the pool into ``run_dir``'s hidden part (atomically); returns the file the harness reads."""
    pool = HiddenPool(version, [dict(item) for item in items], {str(k): bool(v) for k, v in reference.items()})
    path = Path(run_dir) / HIDDEN_DIR / POOL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(pool), ensure_ascii=False, default=str), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_pool(path: Path) -> HiddenPool:
    """The pool a worker wrote (:func:`write_pool`)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return HiddenPool(str(data["version"]), list(data["items"]), dict(data["reference"]))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"--pool {path}: not a pool file written by the worker ({err})") from err


@contextlib.contextmanager
def hidden_log(run_dir: Path) -> Iterator[None]:
    """Send this process's output (file descriptors 1 and 2: Python's, the engine's, tqdm's) to the run's hidden
    log while the pool is evaluated. A failure is written there with its traceback and raised again without its
    detail, so the log the worker keeps a tail of holds nothing of a pool item."""
    print("evaluating the hidden pool: its log stays on the worker", file=sys.stderr, flush=True)
    path = Path(run_dir) / HIDDEN_DIR / LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    saved = [os.dup(1), os.dup(2)]
    failed = False
    with path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        except Exception:
            traceback.print_exc()
            failed = True
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
    if failed:
        # from None: the failure being handled (its message may hold the prompt) is not printed as its context
        message = f"evaluating the hidden pool failed; its log stays on the worker ({HIDDEN_DIR}/{LOG_FILE})"
        raise RuntimeError(message) from None
