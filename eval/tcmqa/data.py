"""Load a TCMQA config from the Hub or from a tree written by ``tcmqa build``."""

from __future__ import annotations

from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

from tcmqa.schema import SPLIT


def load_config(data: str | Path, config: str, revision: str | None = None) -> datasets.Dataset:
    """Return one config as a Dataset; ``data`` is a Hub id or a local built tree.

    A local tree's Parquet files are read as they are, in memory. ``load_dataset`` on a local folder
    caches what it built under the folder's name and card, not its files (datasets 5.2), so a tree
    rebuilt in place, or another tree of the same name, would be served stale rows. The features come
    from the files' schema metadata, which ``tcmqa build`` writes from ``tcmqa.schema``. Files written
    before a column was added lack it and read as null there, as ``load_dataset`` reads them from the Hub.
    """
    path = Path(data).expanduser()
    if path.exists():
        if revision is not None:
            raise ValueError(f"a data revision applies to Hub datasets; {data} is a local tree")
        files = sorted((path / config).glob("*.parquet"))
        if not files:
            raise ValueError(f"{data} has no '{config}' config (no {config}/*.parquet). Rebuild it with `tcmqa build`.")
        return datasets.Dataset(pa.concat_tables([pq.read_table(f) for f in files], promote_options="default"))
    try:
        return datasets.load_dataset(str(data), config, split=SPLIT, revision=revision)
    except ValueError as err:
        if "BuilderConfig" in str(err) or "not found" in str(err):
            raise ValueError(f"{data} has no '{config}' config ({err}). Check the dataset id and revision.") from err
        raise


def has_config(data: str | Path, config: str) -> bool:
    """Whether a local tree holds ``config`` (a Hub id is assumed to hold every config)."""
    path = Path(data).expanduser()
    return not path.exists() or any((path / config).glob("*.parquet"))
