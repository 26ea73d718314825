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
CONFIG_ORDER = ("corpus", "responses", "subset", "outputs", "results")


def size_category(n: int) -> str:
    """The Hub's size bucket for ``n`` rows."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def card_data(counts: dict[str, int]) -> DatasetCardData:
    """The YAML header: configs (Parquet globs), dataset_info features, license, language, tasks."""
    configs = [c for c in CONFIG_ORDER if counts.get(c)]
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
                splits=SplitDict({SPLIT: SplitInfo(name=SPLIT, num_examples=counts[c])}),
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
