"""A model's identity and size: the one home of both, for the harness, the worker and the Space.

A model is pinned by a revision: the Hub's commit sha for a Hub id (the snapshot folder's name,
``ModelInfo.sha``), ``local-<hash of every file>`` for a local folder. Its size is counted from the
safetensors headers, so nothing is loaded to know it.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

MODEL_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]  # what an engine reads
LOCAL_PREFIX = "local-"


def resolve_model(model: str, revision: str | None = None) -> tuple[Path, str]:
    """A local folder or a Hub id -> (folder holding the files, the revision that pins them)."""
    path = Path(model).expanduser()
    if path.is_dir():
        if revision is not None:
            raise ValueError(f"--revision applies to Hub models; {model} is a local folder")
        return path.resolve(), local_revision(path)
    from huggingface_hub import snapshot_download

    try:
        snapshot = Path(snapshot_download(model, revision=revision, allow_patterns=MODEL_FILES))
    except Exception as err:
        raise RuntimeError(
            f"could not get {model}@{revision or 'main'} from the Hub ({err}). Check the id, your token for gated "
            "models, or pass a local folder."
        ) from err
    return snapshot, snapshot.name  # snapshot folders are named by commit sha


def local_revision(path: str | Path) -> str:
    """``local-`` and the first 16 hex digits of a SHA-256 over the names and contents of every file.

    Everything in the folder counts, so any change to weights, tokenizer or template changes it.
    """
    path = Path(path).expanduser().resolve()
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        with file.open("rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
    return LOCAL_PREFIX + digest.hexdigest()[:16]


def count_parameters(path: str | Path) -> int:
    """Parameters in the folder's safetensors files, read from their headers (no weights are loaded).

    A safetensors file starts with an 8-byte little-endian header length, then a JSON header that
    gives every tensor's shape.
    """
    total = 0
    for file in sorted(Path(path).glob("*.safetensors")):
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        total += sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
    return total
