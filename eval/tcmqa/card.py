"""Render the dataset's README.md (YAML metadata + card text) for a built tree.

The YAML header is produced by the same libraries the Hub reads it with: ``DatasetCardData``
for the configs and license, ``DatasetInfosDict`` for the ``dataset_info`` features, so the card
can never disagree with the Parquet files it describes.
"""

from __future__ import annotations

from pathlib import Path

from datasets.info import DatasetInfo, DatasetInfosDict
from datasets.splits import SplitDict, SplitInfo
from huggingface_hub import DatasetCard, DatasetCardData

from tcmqa.schema import DOMAINS, FEATURES, LICENSE, SPLIT

TEMPLATE = Path(__file__).with_name("card_template.md")
BUILT_CONFIGS = ("corpus", "responses", "subset", "errata")  # written by `tcmqa build`, declared when they have rows
# appended by the leaderboard's publisher (tcmqa.hub), file by file: always declared
APPENDED_CONFIGS = ("outputs", "results", "probes")
CONFIG_ORDER = BUILT_CONFIGS + APPENDED_CONFIGS


def size_category(n: int) -> str:
    """The Hub's size bucket for ``n`` rows."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def card_data(counts: dict[str, int]) -> DatasetCardData:
    """The YAML header: configs (Parquet globs), dataset_info features, license, language, tasks.

    ``outputs``, ``results`` and ``probes`` are declared even before they hold a row: the Space's
    publisher adds their Parquet files later, commit by commit, so their ``dataset_info`` gives features
    but no split sizes (a declared size would be stale after the next commit, and ``load_dataset`` checks sizes).
    """
    configs = [c for c in BUILT_CONFIGS if counts.get(c)] + list(APPENDED_CONFIGS)
    data = DatasetCardData(
        pretty_name="TCMQA",
        license=LICENSE,
        language=["zh"],
        task_categories=["question-answering", "multiple-choice"],
        task_ids=["multiple-choice-qa"],
        size_categories=[size_category(counts["corpus"])],
        tags=["medical", "traditional-chinese-medicine", "benchmark"],
        configs=[
            {
                "config_name": c,
                "data_files": [{"split": SPLIT, "path": f"{c}/*.parquet"}],
                **({"default": True} if c == "corpus" else {}),
            }
            for c in configs
        ],
    )
    infos = DatasetInfosDict(
        {
            c: DatasetInfo(
                features=FEATURES[c],
                config_name=c,
                splits=None
                if c in APPENDED_CONFIGS
                else SplitDict({SPLIT: SplitInfo(name=SPLIT, num_examples=counts[c])}),
            )
            for c in configs
        }
    )
    infos.to_dataset_card_data(data)
    return data


def render_card(report: dict) -> str:
    """README.md text for a tree whose build report (``build_report.json``) is ``report``."""
    counts = report["counts"]
    card = DatasetCard.from_template(
        card_data(counts),
        template_path=str(TEMPLATE),
        counts=counts,
        dropped=report["dropped_by_reason"],
        notes=report["notes_by_reason"],
        items_read=report["items_read"],
        domains=DOMAINS,
    )
    return str(card)
