"""Load a TCMQA config from the Hub or from a tree written by ``tcmqa build``."""

from __future__ import annotations

from pathlib import Path

import datasets

from tcmqa.schema import SPLIT


def load_config(data: str | Path, config: str, revision: str | None = None) -> datasets.Dataset:
    """Return one config as a Dataset; ``data`` is a Hub id or a local built tree.

    A local tree is passed to ``load_dataset`` as an absolute path: datasets 5.x does not
    resolve ``"."`` or relative paths to a local repo reliably.
    """
    path = Path(data).expanduser()
    source = str(path.resolve()) if path.exists() else str(data)
    try:
        return datasets.load_dataset(source, config, split=SPLIT, revision=revision)
    except ValueError as err:
        if "BuilderConfig" in str(err) or "not found" in str(err):
            raise ValueError(f"{data} has no '{config}' config ({err}). Rebuild it with `tcmqa build`.") from err
        raise


def has_config(data: str | Path, config: str) -> bool:
    """Whether a local tree holds ``config`` (a Hub id is assumed to hold every config)."""
    path = Path(data).expanduser()
    return not path.exists() or any((path / config).glob("*.parquet"))
