"""An in-memory fake of the HfApi calls the Space, the publisher and ``tcmqa publish`` make (no tests here).

Repos are commit chains of {path: bytes}; ``create_commit`` refuses a stale ``parent_commit`` with
HTTP 412, as the Hub does. Models are plain records answered by ``model_info``/``auth_check``.
Test modules import it as ``from fakehub import FakeHub`` (pytest puts tests/ on the path).

It behaves like the Hub where it hurts:

- a commit cap per repo per rolling window (``commit_cap`` commits per ``window_s``; the Hub's is
  about 128 an hour), answered with HTTP 429 and ``Retry-After`` past it;
- injectable failures: ``fail_next(n, status)`` (a 5xx, a 429, ``"connect"`` or ``"timeout"``, and
  ``after_commit=True`` for a commit that lands but whose answer is lost), a random ``failure_rate``
  drawn from a seeded RNG, and ``down`` (every call fails) for an outage;
- an outage switch (``go_down``/``come_back``, or the ``outage`` block) that other processes see too:
  ``down_flag`` is a file that exists while the Hub is down, which the stand-in harness
  (tests/stand_in.py, ``$STAND_IN_HUB_DOWN``) reads as its model download failing; ``outages`` keeps
  when each began and ended and ``refused_commits`` which repos a commit was refused to;
- ``latency_s`` of sleep per call.

HTTP errors are real ``HfHubHTTPError``s raised by huggingface_hub's own ``hf_raise_for_status`` from
a real response; connection errors are the client's ``httpx2`` errors. ``upload_folder`` computes
its additions and ``delete_patterns`` deletions with huggingface_hub's own code (fnmatch, where ``*``
crosses ``/``). ``snapshot_download`` writes a repo's files into a folder, which the real
``datasets.load_dataset(folder, config)`` reads with the repo's README configs.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects, hf_raise_for_status


def _response(status: int) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("POST", "https://huggingface.co/api/fake"))


COMMIT_QUOTA_MESSAGE = "You have exceeded our hourly quotas for action: commit. We invite you to retry later."
SERVER_MESSAGES = {
    401: "Invalid credentials in Authorization header",
    403: "You have no write access to this repository.",
    404: "Repository not found",
    429: "Too many requests. We invite you to retry later.",
    500: "Internal Error - We're working hard to fix this as soon as possible!",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def http_error(
    status: int, message: str | None = None, *, url: str = "https://huggingface.co/api/fake", headers=None
) -> HfHubHTTPError:
    """The error huggingface_hub's own ``hf_raise_for_status`` raises for this answer from the Hub."""
    body = {"error": message or SERVER_MESSAGES.get(status, "error")}
    response = httpx2.Response(status, headers=headers or {}, json=body, request=httpx2.Request("POST", url))
    try:
        hf_raise_for_status(response)
    except HfHubHTTPError as err:
        return err
    raise AssertionError(f"HTTP {status} is not an error")


def transport_error(kind: str, url: str = "https://huggingface.co/api/fake") -> Exception:
    """What the Hub client raises when the connection fails (``"connect"``) or times out (``"timeout"``)."""
    request = httpx2.Request("POST", url)
    if kind == "timeout":
        return httpx2.ReadTimeout("The read operation timed out", request=request)
    return httpx2.ConnectError("[Errno 111] Connection refused", request=request)


Failure = int | str  # an HTTP status, or "connect" / "timeout"


@dataclasses.dataclass
class Injected:
    """One queued failure: what to raise, on which calls, and whether the commit lands anyway."""

    failure: Failure
    calls: frozenset[str] | None = None
    retry_after: float | None = None
    after_commit: bool = False


@dataclasses.dataclass
class Commit:
    """One commit that landed: for assertions on what went where and when."""

    repo_id: str
    sha: str
    at: float
    message: str
    added: tuple[str, ...]
    deleted: tuple[str, ...]
    answer_lost: bool = False  # it landed, but the client was told it failed


class FakeHub:
    """Dataset repos (commit chains) and model repos, shared by every thread that holds it.

    ``commit_cap`` commits per repo per ``window_s`` seconds of ``clock`` (the Hub's cap; None: no cap);
    ``latency_s`` sleep per call; ``failure_rate`` of calls in ``failing_calls`` fail with one of
    ``failure_kinds`` drawn from ``random.Random(seed)``.
    """

    def __init__(
        self,
        *,
        commit_cap: int | None = 128,
        window_s: float = 3600.0,
        latency_s: float = 0.0,
        failure_rate: float = 0.0,
        failure_kinds: tuple[Failure, ...] = (429, 500, 502, 503, "connect", "timeout"),
        failing_calls: frozenset[str] | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self._lock = threading.Lock()
        self._repos: dict[str, list[tuple[str, dict[str, bytes]]]] = {}
        self.models: dict[str, dict[str, Any]] = {}
        self.commits = 0
        self.conflicts = 0
        self._tmp = Path(tempfile.mkdtemp(prefix="fakehub-"))
        self.commit_cap, self.window_s = commit_cap, window_s
        self.latency_s = latency_s
        self.failure_rate, self.failure_kinds, self.failing_calls = failure_rate, failure_kinds, failing_calls
        self._rng = random.Random(seed)
        self.clock, self._sleep = clock, sleep
        self.down: Failure | None = None  # set to a status or "connect" and every call fails
        self.down_retry_after: float | None = None  # the Retry-After (seconds) the outage's answers carry
        self.down_flag = self._tmp / "down"  # exists while down: the outage as processes outside this one see it
        self.outages: list[list[float]] = []  # [began, ended] by ``clock``; an ongoing one has no end yet
        self.refused_commits: collections.Counter[str] = collections.Counter()  # failed create_commit, by repo
        self._injected: collections.deque[Injected] = collections.deque()
        self.commit_log: list[Commit] = []
        self.calls: collections.Counter[str] = collections.Counter()  # calls made, by name
        self.failed: collections.Counter[str] = collections.Counter()  # failures raised, by failure
        self.rate_limited = 0  # commits refused by the cap

    # -- failures, latency, the cap -------------------------------------------------------------------
    def fail_next(
        self,
        n: int = 1,
        status: Failure = 503,
        *,
        calls: tuple[str, ...] | None = None,
        retry_after: float | None = None,
        after_commit: bool = False,
    ) -> None:
        """The next ``n`` calls (of the ``calls`` named, default any) fail with ``status``.

        ``after_commit``: a ``create_commit`` lands and then the answer is lost (the client sees the error).
        """
        names = frozenset(calls) if calls else None
        with self._lock:
            self._injected.extend(Injected(status, names, retry_after, after_commit) for _ in range(n))

    def go_down(self, failure: Failure = 503, retry_after: float | None = None) -> None:
        """An outage begins: every call fails with ``failure`` (a 429 or 5xx answers ``Retry-After: retry_after``
        when given), here and, through ``down_flag``, for the stand-in harness's model downloads."""
        with self._lock:
            self.down, self.down_retry_after = failure, retry_after
            self.outages.append([self.clock()])
        self.down_flag.write_text(str(failure))

    def come_back(self) -> None:
        """The outage ends: calls succeed again (injected failures and the cap aside)."""
        self.down_flag.unlink(missing_ok=True)
        with self._lock:
            self.down, self.down_retry_after = None, None
            if self.outages and len(self.outages[-1]) == 1:
                self.outages[-1].append(self.clock())

    @contextlib.contextmanager
    def outage(self, failure: Failure = 503, retry_after: float | None = None) -> Iterator[None]:
        """Every call fails while the block runs."""
        self.go_down(failure, retry_after)
        try:
            yield
        finally:
            self.come_back()

    def _raise(self, failure: Failure, call: str, retry_after: float | None = None) -> None:
        with self._lock:
            self.failed[str(failure)] += 1
        url = f"https://huggingface.co/api/fake/{call}"
        if isinstance(failure, str):
            raise transport_error(failure, url)
        headers = {"Retry-After": str(math.ceil(retry_after))} if retry_after is not None else {}
        if failure == 429 and not headers:
            headers = {"Retry-After": "1"}
        raise http_error(failure, url=url, headers=headers)

    def _gate(self, call: str) -> Injected | None:
        """Latency, then a failure if one is due. An ``after_commit`` failure is returned, not raised."""
        if self.latency_s:
            self._sleep(self.latency_s)
        with self._lock:
            self.calls[call] += 1
            if self.down is not None:
                failure: Injected | None = Injected(self.down, retry_after=self.down_retry_after)
            elif self._injected and (self._injected[0].calls is None or call in self._injected[0].calls):
                failure = self._injected.popleft()
            elif self.failure_rate and (self.failing_calls is None or call in self.failing_calls):
                drawn = self._rng.random() < self.failure_rate
                failure = Injected(self._rng.choice(self.failure_kinds)) if drawn else None
            else:
                failure = None
        if failure is None:
            return None
        if failure.after_commit and call == "create_commit":
            return failure
        self._raise(failure.failure, call, failure.retry_after)
        return None  # unreachable

    def _cap_wait(self, repo_id: str, now: float) -> float:
        """Seconds until ``repo_id`` may commit again (0: now). Call with the lock held."""
        if self.commit_cap is None:
            return 0.0
        recent = [c.at for c in self.commit_log if c.repo_id == repo_id and c.at > now - self.window_s]
        return 0.0 if len(recent) < self.commit_cap else recent[-self.commit_cap] + self.window_s - now

    def max_commits_in_window(self, repo_id: str, window_s: float | None = None) -> int:
        """The most commits ``repo_id`` received in any window of ``window_s`` (default the cap's)."""
        window = self.window_s if window_s is None else window_s
        times = [c.at for c in self.commit_log if c.repo_id == repo_id]
        return max((sum(1 for u in times if t <= u < t + window) for t in times), default=0)

    def commits_to(self, repo_id: str) -> list[Commit]:
        return [c for c in self.commit_log if c.repo_id == repo_id]

    # -- dataset repos ------------------------------------------------------------------------------
    def create_repo(self, repo_id: str, repo_type: str = "dataset", exist_ok: bool = True, **_: Any) -> None:
        self._gate("create_repo")
        with self._lock:
            self._repos.setdefault(repo_id, [(hashlib.sha1(repo_id.encode()).hexdigest(), {})])

    def _chain(self, repo_id: str) -> list[tuple[str, dict[str, bytes]]]:
        if repo_id not in self._repos:
            raise RepositoryNotFoundError(f"{repo_id} not found", response=_response(404))
        return self._repos[repo_id]

    def _files(self, repo_id: str, revision: str | None) -> dict[str, bytes]:
        chain = self._chain(repo_id)
        if revision is None:
            return chain[-1][1]
        for sha, files in chain:
            if sha == revision:
                return files
        raise RevisionNotFoundError(f"{revision} not in {repo_id}", response=_response(404))

    def repo_info(self, repo_id: str, repo_type: str | None = None, **_: Any) -> SimpleNamespace:
        self._gate("repo_info")
        with self._lock:
            return SimpleNamespace(sha=self._chain(repo_id)[-1][0])

    def list_repo_files(
        self, repo_id: str, repo_type: str | None = None, revision: str | None = None, **_: Any
    ) -> list[str]:
        self._gate("list_repo_files")
        with self._lock:
            return sorted(self._files(repo_id, revision))

    def hf_hub_download(
        self, repo_id: str, filename: str, repo_type: str | None = None, revision: str | None = None, **_: Any
    ) -> str:
        self._gate("hf_hub_download")
        if repo_type in (None, "model"):
            return self._write(f"models/{repo_id}/{filename}", self.model_file(repo_id, filename))
        with self._lock:
            files = self._files(repo_id, revision)
            if filename not in files:
                raise EntryNotFoundError(f"{filename} not in {repo_id}")
            data = files[filename]
        return self._write(hashlib.sha1(data).hexdigest() + "/" + Path(filename).name, data)

    def _write(self, name: str, data: bytes) -> str:
        """Write atomically: concurrent readers of the same name never see a partial file."""
        path = self._tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return str(path)

    def create_commit(
        self,
        repo_id: str,
        operations: list[Any],
        *,
        commit_message: str,
        repo_type: str | None = None,
        parent_commit: str | None = None,
        **_: Any,
    ) -> SimpleNamespace:
        try:
            lost = self._gate("create_commit")
        except Exception:
            with self._lock:
                self.refused_commits[repo_id] += 1
            raise
        with self._lock:
            if repo_id not in self._repos:
                self._repos[repo_id] = [(hashlib.sha1(repo_id.encode()).hexdigest(), {})]
            chain = self._repos[repo_id]
            if parent_commit is not None and parent_commit != chain[-1][0]:
                self.conflicts += 1
                raise HfHubHTTPError(
                    "A commit has happened since. Please refresh and try again.", response=_response(412)
                )
            now = self.clock()
            wait = self._cap_wait(repo_id, now)
            if wait > 0:
                self.rate_limited += 1
                self.failed["429 cap"] += 1
                raise http_error(
                    429,
                    COMMIT_QUOTA_MESSAGE,
                    url=f"https://huggingface.co/api/datasets/{repo_id}/commit/main",
                    headers={"Retry-After": str(max(1, math.ceil(wait)))},
                )
            files = dict(chain[-1][1])
            added, deleted = [], []
            for op in operations:
                if isinstance(op, CommitOperationDelete):
                    doomed = [p for p in files if p.startswith(op.path_in_repo)] if op.is_folder else [op.path_in_repo]
                    if not doomed or doomed[0] not in files:
                        raise EntryNotFoundError(f"{op.path_in_repo} not in {repo_id}")
                    for path in doomed:
                        del files[path]
                    deleted += doomed
                    continue
                assert isinstance(op, CommitOperationAdd)
                src = op.path_or_fileobj
                files[op.path_in_repo] = src if isinstance(src, bytes) else Path(src).read_bytes()
                added.append(op.path_in_repo)
            sha = hashlib.sha1(f"{chain[-1][0]}{commit_message}{len(chain)}".encode()).hexdigest()
            chain.append((sha, files))
            self.commits += 1
            self.commit_log.append(
                Commit(repo_id, sha, now, commit_message, tuple(added), tuple(deleted), lost is not None)
            )
        if lost is not None:  # the commit landed, the answer did not
            self._raise(lost.failure, "create_commit", lost.retry_after)
        return SimpleNamespace(oid=sha, commit_url=f"https://huggingface.co/datasets/{repo_id}/commit/{sha}")

    def upload_folder(
        self,
        *,
        repo_id: str,
        folder_path: str | Path,
        path_in_repo: str | None = None,
        commit_message: str | None = None,
        repo_type: str | None = None,
        allow_patterns: list[str] | str | None = None,
        ignore_patterns: list[str] | str | None = None,
        delete_patterns: list[str] | str | None = None,
        **_: Any,
    ) -> SimpleNamespace:
        """``HfApi.upload_folder`` (single-commit path), computed by huggingface_hub's own helpers."""
        path_in_repo = path_in_repo or ""
        ignore = [ignore_patterns] if isinstance(ignore_patterns, str) else list(ignore_patterns or [])
        ignore += DEFAULT_IGNORE_PATTERNS
        deletions = HfApi._prepare_folder_deletions(
            self,  # type: ignore[arg-type]  # it only calls list_repo_files
            repo_id=repo_id,
            repo_type=repo_type,
            revision=None,
            path_in_repo=path_in_repo,
            delete_patterns=delete_patterns,
        )
        additions = HfApi._prepare_upload_folder_additions(
            self,  # type: ignore[arg-type]  # it only calls _validate_yaml
            folder_path,
            path_in_repo,
            allow_patterns=allow_patterns,
            ignore_patterns=ignore,
            repo_type=repo_type,
        )
        added = {op.path_in_repo for op in additions}
        operations = [op for op in deletions if op.path_in_repo not in added] + additions
        return self.create_commit(
            repo_id,
            operations,
            commit_message=commit_message or "Upload folder using huggingface_hub",
            repo_type=repo_type,
        )

    def _validate_yaml(self, content: str, *, repo_type: str | None = None, **_: Any) -> None:
        """The Hub validates a README's YAML before a commit; parsing it as a card is the local stand-in."""
        DatasetCard(content).data.to_dict()

    def snapshot_download(
        self,
        repo_id: str,
        *,
        repo_type: str | None = None,
        revision: str | None = None,
        local_dir: str | Path | None = None,
        allow_patterns: list[str] | str | None = None,
        ignore_patterns: list[str] | str | None = None,
        **_: Any,
    ) -> str:
        """Write a dataset repo's files (at ``revision``, default the head) into ``local_dir``; its path.

        ``datasets.load_dataset(path, config, split=...)`` then reads it as the Hub would serve it.
        Leave ``local_dir`` out to get a folder with a fresh name: datasets 5.2 caches what it built
        from a local folder under the folder's name and README, not its files, so a second snapshot
        under the same name (a later commit, another test) would load the first one's rows.
        """
        self._gate("snapshot_download")
        with self._lock:
            files = dict(self._files(repo_id, revision))
        dest = Path(local_dir) if local_dir else Path(tempfile.mkdtemp(prefix="snapshot-", dir=self._tmp))
        for name in filter_repo_objects(sorted(files), allow_patterns=allow_patterns, ignore_patterns=ignore_patterns):
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(files[name])
        return str(dest.resolve())

    def files(self, repo_id: str, revision: str | None = None) -> dict[str, bytes]:
        """A repo's files at ``revision`` (default the head), for assertions; no failure, no latency."""
        with self._lock:
            return dict(self._files(repo_id, revision))

    # -- model repos ----------------------------------------------------------------------------------
    def add_model(
        self,
        repo_id: str,
        *,
        sha: str = "a" * 40,
        revisions: tuple[str, ...] = ("main",),
        files: tuple[str, ...] = ("config.json", "model.safetensors", "tokenizer_config.json"),
        params: int | None = 270_000_000,
        gated: bool | str = False,
        access: bool = True,
        config: dict[str, Any] | None = None,
        tokenizer_config: dict[str, Any] | None = None,
        private: bool = False,
        disabled: bool = False,
        card_data: dict[str, Any] | None = None,
        created_at: str = "2025-03-12T08:00:00Z",
    ) -> None:
        self.models[repo_id] = dict(
            created_at=created_at,
            private=private,
            disabled=disabled,
            card_data=card_data,
            sha=sha,
            revisions=revisions,
            files=files,
            params=params,
            gated=gated,
            access=access,
            config=config
            if config is not None
            else {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text"},
            tokenizer_config=tokenizer_config if tokenizer_config is not None else {"chat_template": "{{ messages }}"},
        )

    def _canonical(self, repo_id: str) -> str:
        """The model's id as it was added: the Hub resolves ids case-insensitively and answers its own spelling."""
        if repo_id in self.models:
            return repo_id
        found = [k for k in self.models if k.lower() == repo_id.lower()]
        if not found:
            raise RepositoryNotFoundError(f"Repository Not Found for url: .../{repo_id}", response=_response(404))
        return found[0]

    def _model(self, repo_id: str) -> dict[str, Any]:
        return self.models[self._canonical(repo_id)]

    def model_info(self, repo_id: str, *, revision: str | None = None, **_: Any) -> SimpleNamespace:
        self._gate("model_info")
        model = self._model(repo_id)
        if revision is not None and revision not in model["revisions"] and revision != model["sha"]:
            raise RevisionNotFoundError(f"Invalid rev id: {revision}", response=_response(404))
        safetensors = (
            SimpleNamespace(total=model["params"], parameters={"BF16": model["params"]}) if model["params"] else None
        )
        return SimpleNamespace(
            id=self._canonical(repo_id),
            sha=model["sha"],
            private=model["private"],
            disabled=model["disabled"],
            card_data=model["card_data"],
            gated=model["gated"],
            config=model["config"],
            safetensors=safetensors,
            siblings=[SimpleNamespace(rfilename=f) for f in model["files"]],
            created_at=dt.datetime.fromisoformat(model["created_at"].replace("Z", "+00:00")),
            last_modified=dt.datetime.fromisoformat(model["created_at"].replace("Z", "+00:00")),
            pipeline_tag="text-generation",
        )

    def auth_check(self, repo_id: str, **_: Any) -> None:
        self._gate("auth_check")
        if not self._model(repo_id)["access"]:
            raise GatedRepoError(f"Access to model {repo_id} is restricted.", response=_response(403))

    def model_file(self, repo_id: str, filename: str) -> bytes:
        """What ``hf_hub_download`` of a model file returns (only tokenizer_config.json is served)."""
        model = self._model(repo_id)
        if filename != "tokenizer_config.json" or filename not in model["files"]:
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        return json.dumps(model["tokenizer_config"]).encode()
