"""The item explorer: one item's question and options, its answer, the practitioners' answers and
every evaluated model's output. Corpus and responses load once per process (lazily: the board must
not wait for them); outputs are re-read when the store's results change.
"""

from __future__ import annotations

import functools
import threading

import pandas as pd

from tcmqa.data import has_config, load_config
from tcmqa.store import Store

OUTPUT_COLUMNS = ["model", "prediction", "correct", "lp_prediction", "lp_correct", "margin", "generated_text"]
RESPONSE_COLUMNS = ["practitioner_id", "selected", "correct", "difficulty", "domains", "flagged", "seconds"]


class Explorer:
    def __init__(self, data: str, store: Store):
        self.data = data
        self.store = store
        self._lock = threading.Lock()
        self._outputs_version: str | None = None
        self._outputs = pd.DataFrame(columns=["item_id", *OUTPUT_COLUMNS])

    @functools.cached_property
    def corpus(self) -> pd.DataFrame:
        return load_config(self.data, "corpus").to_pandas().set_index("id", drop=False)

    @functools.cached_property
    def responses(self) -> pd.DataFrame:
        """Practitioner responses; a tree built without the platform database has none."""
        if not has_config(self.data, "responses"):
            return pd.DataFrame(columns=["item_id", *RESPONSE_COLUMNS])
        return load_config(self.data, "responses").to_pandas()

    def item_ids(self) -> list[str]:
        return self.corpus.index.tolist()

    def outputs(self) -> pd.DataFrame:
        version = self.store.version()
        with self._lock:
            if version != self._outputs_version:
                parts = [pd.read_parquet(p, columns=["item_id", *OUTPUT_COLUMNS]) for p in self.store.outputs_files()]
                if parts:
                    self._outputs = pd.concat(parts, ignore_index=True)
                self._outputs_version = version
            return self._outputs

    def item(self, item_id: str) -> tuple[str, pd.DataFrame, pd.DataFrame]:
        """Markdown for the item, its practitioners' responses, and the models' outputs on it."""
        item_id = (item_id or "").strip()
        if item_id not in self.corpus.index:
            return f"No item with id `{item_id}` in {self.data}.", pd.DataFrame(), pd.DataFrame()
        row = self.corpus.loc[item_id]
        options = "\n".join(f"- **{letter}.** {text}" for letter, text in row["options"].items())
        answer = ", ".join(row["answer"])
        text = (
            f"### Item {item_id} ({row['answer_type']}-answer, topic {row['topic'] or 'n/a'})\n\n{row['question']}\n\n"
            f"{options}\n\n**Answer:** {answer}\n\n{row['explanation'] or ''}"
        )
        responses = self.responses[self.responses["item_id"] == item_id][RESPONSE_COLUMNS].copy()
        outputs = self.outputs()
        outputs = outputs[outputs["item_id"] == item_id][OUTPUT_COLUMNS].copy()
        for frame in (responses, outputs):
            for col in ("selected", "prediction", "domains"):
                if col in frame:
                    frame[col] = frame[col].map(lambda v: ", ".join(v) if v is not None else "")
        return text, responses.reset_index(drop=True), outputs.reset_index(drop=True)
