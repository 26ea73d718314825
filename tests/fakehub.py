"""A thin in-memory fake of the few HfApi calls the Space and the Hub store make (no tests here).

Repos are commit chains of {path: bytes}; ``create_commit`` refuses a stale ``parent_commit`` with
HTTP 412, as the Hub does. Models are plain records answered by ``model_info``/``auth_check``.
Test modules import it as ``from fakehub import FakeHub`` (pytest puts tests/ on the path).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
from huggingface_hub import CommitOperationAdd
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)


def _response(status: int) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("POST", "https://huggingface.co/api/fake"))


class FakeHub:
    """Dataset repos (commit chains) and model repos, shared by every thread that holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._repos: dict[str, list[tuple[str, dict[str, bytes]]]] = {}
        self.models: dict[str, dict[str, Any]] = {}
        self.commits = 0
        self.conflicts = 0
        self._tmp = Path(tempfile.mkdtemp(prefix="fakehub-"))

    # -- dataset repos ------------------------------------------------------------------------------
    def create_repo(self, repo_id: str, repo_type: str = "dataset", exist_ok: bool = True) -> None:
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
        with self._lock:
            return SimpleNamespace(sha=self._chain(repo_id)[-1][0])

    def list_repo_files(
        self, repo_id: str, repo_type: str | None = None, revision: str | None = None, **_: Any
    ) -> list[str]:
        with self._lock:
            return sorted(self._files(repo_id, revision))

    def hf_hub_download(
        self, repo_id: str, filename: str, repo_type: str | None = None, revision: str | None = None, **_: Any
    ) -> str:
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
        with self._lock:
            if repo_id not in self._repos:
                self._repos[repo_id] = [(hashlib.sha1(repo_id.encode()).hexdigest(), {})]
            chain = self._repos[repo_id]
            if parent_commit is not None and parent_commit != chain[-1][0]:
                self.conflicts += 1
                raise HfHubHTTPError(
                    "A commit has happened since. Please refresh and try again.", response=_response(412)
                )
            files = dict(chain[-1][1])
            for op in operations:
                assert isinstance(op, CommitOperationAdd)
                src = op.path_or_fileobj
                files[op.path_in_repo] = src if isinstance(src, bytes) else Path(src).read_bytes()
            sha = hashlib.sha1(f"{chain[-1][0]}{commit_message}{len(chain)}".encode()).hexdigest()
            chain.append((sha, files))
            self.commits += 1
            return SimpleNamespace(oid=sha)

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
    ) -> None:
        self.models[repo_id] = dict(
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

    def _model(self, repo_id: str) -> dict[str, Any]:
        if repo_id not in self.models:
            raise RepositoryNotFoundError(f"Repository Not Found for url: .../{repo_id}", response=_response(404))
        return self.models[repo_id]

    def model_info(self, repo_id: str, *, revision: str | None = None, **_: Any) -> SimpleNamespace:
        model = self._model(repo_id)
        if revision is not None and revision not in model["revisions"] and revision != model["sha"]:
            raise RevisionNotFoundError(f"Invalid rev id: {revision}", response=_response(404))
        safetensors = (
            SimpleNamespace(total=model["params"], parameters={"BF16": model["params"]}) if model["params"] else None
        )
        return SimpleNamespace(
            id=repo_id,
            sha=model["sha"],
            gated=model["gated"],
            config=model["config"],
            safetensors=safetensors,
            siblings=[SimpleNamespace(rfilename=f) for f in model["files"]],
            pipeline_tag="text-generation",
        )

    def auth_check(self, repo_id: str, **_: Any) -> None:
        if not self._model(repo_id)["access"]:
            raise GatedRepoError(f"Access to model {repo_id} is restricted.", response=_response(403))

    def model_file(self, repo_id: str, filename: str) -> bytes:
        """What ``hf_hub_download`` of a model file returns (only tokenizer_config.json is served)."""
        model = self._model(repo_id)
        if filename != "tokenizer_config.json" or filename not in model["files"]:
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        return json.dumps(model["tokenizer_config"]).encode()
