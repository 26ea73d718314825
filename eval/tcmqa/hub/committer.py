"""What every commit of the publisher shares: one lock, Hub calls through ``with_retries``, its own commit
budget per repo, and a repo held after a failed commit (the delay doubling, the Hub's ``Retry-After`` honoured).
The publications (:mod:`tcmqa.hub.publisher`, :mod:`tcmqa.hub.mirror`, :mod:`tcmqa.hub.responses`) build on it."""

from __future__ import annotations

import collections
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tcmqa.hub.retries import retry_after, with_retries
from tcmqa.schema import RATERS_PER_ITEM

log = logging.getLogger("tcmqa.hub")
T = TypeVar("T")


@dataclasses.dataclass
class _Budget:
    """Commits made to one repo in the last ``window_s`` seconds (the Publisher's own cap)."""

    limit: int
    window_s: float
    times: collections.deque[float] = dataclasses.field(default_factory=collections.deque)

    def wait(self, now: float) -> float:
        """Seconds until one more commit fits (0 when it fits now)."""
        while self.times and self.times[0] <= now - self.window_s:
            self.times.popleft()
        return 0.0 if len(self.times) < self.limit else self.times[0] + self.window_s - now


class Committer:
    """The commit plumbing and the publisher's state; the arguments are :class:`tcmqa.hub.publisher.Publisher`'s."""

    def __init__(
        self,
        store: Any,
        api: Any,
        repo_id: str,
        requests_repo: str | None = None,
        mirror_every_s: float = 60.0,
        batch: int = 50,
        *,
        commit_limit: tuple[int, float] | None = (100, 3600.0),
        attempts: int = 5,
        base_s: float = 1.0,
        max_s: float = 60.0,
        fail_base_s: float = 30.0,
        fail_max_s: float = 3600.0,
        max_batch_bytes: int = 1 << 30,
        mirror_overlap_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Any] = time.sleep,
        rng: random.Random | None = None,
        raters: int = RATERS_PER_ITEM,
    ):
        self.store = store
        self.raters = raters  # practice blocks' N where the store does not keep it (tcmqa.hub.withheld)
        self.api = api
        self.repo_id = repo_id
        self.requests_repo = requests_repo
        self.mirror_every_s = mirror_every_s
        self.batch = batch
        self.commit_limit = commit_limit
        self.attempts, self.base_s, self.max_s = attempts, base_s, max_s
        self.fail_base_s, self.fail_max_s = fail_base_s, fail_max_s
        self.max_batch_bytes = max_batch_bytes
        self.mirror_overlap_s = mirror_overlap_s
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self._budgets: dict[str, _Budget] = {}
        self._held_until: dict[str, float] = {}  # repo -> clock time before which we leave it alone
        self._failures: dict[str, int] = collections.defaultdict(int)  # repo -> consecutive failed commits
        self._mirrored: dict[str, tuple[str, float]] | None = None  # job id -> (status, status_at) mirrored
        self._requests_repo_ready = False
        self._suspects: set[str] = set()  # jobs of a batch that failed for good: published one by one
        self._lock = threading.RLock()
        self.commits = 0  # commits this Publisher made (results and mirror)

    # -- plumbing --------------------------------------------------------------------------------
    def _call(self, fn: Callable[[], T], what: str) -> T:
        return with_retries(
            fn, attempts=self.attempts, base_s=self.base_s, max_s=self.max_s, sleep=self.sleep, rng=self.rng, what=what
        )

    def _budget(self, repo: str) -> _Budget | None:
        if self.commit_limit is None:
            return None
        return self._budgets.setdefault(repo, _Budget(*self.commit_limit))

    def _ready(self, repo: str) -> bool:
        """Whether ``repo`` may be committed to now (not held after failures, budget left)."""
        now = self.clock()
        if self._held_until.get(repo, 0.0) > now:
            return False
        budget = self._budget(repo)
        wait = budget.wait(now) if budget else 0.0
        if wait > 0:
            log.debug("%s: commit budget %s spent; next commit in %.0fs", repo, self.commit_limit, wait)
            return False
        return True

    def _commit(self, repo: str, operations: list[Any], message: str) -> str:
        info = self._call(
            lambda: self.api.create_commit(repo, operations, commit_message=message, repo_type="dataset"),
            f"commit to {repo}",
        )
        budget = self._budget(repo)
        if budget:
            budget.times.append(self.clock())
        self._failures.pop(repo, None)
        self.commits += 1
        return str(getattr(info, "oid", None) or getattr(info, "commit_url", None) or info)

    def _failed(self, repo: str, err: BaseException, attempts: int = 0) -> float:
        """Hold ``repo`` after a failed commit; returns the delay before the next try.

        The delay doubles with the repo's consecutive failures (or the jobs' earlier ``attempts``, which
        survive a restart), capped at ``fail_max_s``; a longer ``Retry-After`` from the Hub wins.
        """
        self._failures[repo] += 1
        asked = retry_after(err)
        n = max(self._failures[repo], attempts + 1)
        backoff = min(self.fail_max_s, self.fail_base_s * 2 ** min(n - 1, 30))
        delay = max(asked, backoff) if asked is not None else backoff
        self._held_until[repo] = self.clock() + delay
        return delay
