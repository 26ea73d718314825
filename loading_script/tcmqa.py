"""TCMQA as a ``datasets`` builder: raw sources in, the corpus, responses and subset configs out.

The features come from ``tcmqa.schema`` and the rows from ``tcmqa.ingest`` (the same code
``tcmqa build`` runs), so this builder and the published Parquet cannot disagree. datasets 5.x no
longer runs dataset scripts from ``load_dataset``; load this file by path and instantiate it::

    import importlib.util
    spec = importlib.util.spec_from_file_location("tcmqa_builder", "loading_script/tcmqa.py")
    module = sys.modules["tcmqa_builder"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builder = module.TCMQA("corpus", items=["items.jsonl"])
    builder.download_and_prepare()
    ds = builder.as_dataset("test")

(Load it under a name other than ``tcmqa``: the file shares its name with the package it imports.)
"""

from __future__ import annotations

import dataclasses

import datasets

from tcmqa.ingest import build_tables
from tcmqa.schema import CITATION, DESCRIPTION, FEATURES, HOMEPAGE, LICENSE, SPLIT


@dataclasses.dataclass
class TCMQAConfig(datasets.BuilderConfig):
    """``items``: item record files; ``platform_db``: the platform's SQLite file (responses, subset)."""

    items: list[str] = dataclasses.field(default_factory=list)
    platform_db: str | None = None
    include_flagged: bool = False


class TCMQA(datasets.GeneratorBasedBuilder):
    """Generates the corpus, responses and subset configs from raw sources."""

    BUILDER_CONFIG_CLASS = TCMQAConfig
    BUILDER_CONFIGS = [TCMQAConfig(name=name) for name in ("corpus", "responses", "subset")]  # noqa: RUF012

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=DESCRIPTION,
            features=FEATURES[self.config.name],
            homepage=HOMEPAGE,
            license=LICENSE,
            citation=CITATION,
        )

    def _split_generators(self, dl_manager):
        if not self.config.items:
            raise ValueError("pass items=[paths to item records] when instantiating TCMQA")
        if self.config.name != "corpus" and self.config.platform_db is None:
            raise ValueError(f"the {self.config.name} config needs platform_db=path to the platform's SQLite file")
        return [datasets.SplitGenerator(name=SPLIT)]

    def _generate_examples(self):
        tables, _ = build_tables(self.config.items, self.config.platform_db, self.config.include_flagged)
        yield from enumerate(tables[self.config.name])
