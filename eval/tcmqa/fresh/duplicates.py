"""The near-duplicate check a written item passes before review: it must not be a public item lightly edited.

An item is compared as a set of character trigrams of its stem and options, after NFKC, with
punctuation and white space removed and the options sorted (swapping two options, or restyling
punctuation, changes nothing). Similarity is the Jaccard index of two such sets, computed exactly
for every indexed item at once from the query's columns of one sparse matrix (scikit-learn's hashing
of character n-grams, 2^22 buckets, so collisions are negligible at the corpus's size). Chinese has no word boundaries,
so characters, not words, are the unit; trigrams keep a changed character from touching more than
three of an item's n-grams.

``THRESHOLD`` (0.5) was set on the platform sample's 4,100 real items: of 1,000 items, the nearest
other item lies below 0.2 for 81% and below 0.5 for 91%; nearly all the rest are at 1.0, the same
question reissued in another paper. 300 public items with two options swapped, punctuation
restyled and two characters changed lie above it (tests/test_fresh.py). A stem of under ten
characters with three characters changed can fall just below it.

>>> index = DuplicateIndex()
>>> index.add("pub-1", "下列属于六淫的是", {"A": "风", "B": "寒", "C": "暑", "D": "湿", "E": "七情"})
>>> index.nearest("下列属于六淫的是？", {"A": "寒", "B": "风", "C": "暑", "D": "湿", "E": "七情"}).similarity
1.0
>>> spleen = {"A": "主运化", "B": "主藏血", "C": "主疏泄", "D": "主纳气", "E": "主宣发"}
>>> index.nearest("脾的主要生理功能是", spleen) is None
True
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer

NGRAM = 3
SETTLE_AFTER = 1000  # rows added since the column copy was made, beyond which it is made again
THRESHOLD = 0.5  # Jaccard of trigram sets at or above which a written item is refused as a near-duplicate

_NOT_TEXT = re.compile(r"[\W_]+")  # punctuation, symbols and white space: restyling them changes nothing
_HASHER = HashingVectorizer(
    analyzer="char", ngram_range=(NGRAM, NGRAM), n_features=2**22, binary=True, norm=None, alternate_sign=False
)


def canonical_text(question: str, options: Mapping[str, str]) -> str:
    """The text compared: NFKC, lower case, no punctuation or spaces, options in sorted order, one per line."""

    def clean(text: str) -> str:
        return _NOT_TEXT.sub("", unicodedata.normalize("NFKC", text or "").lower())

    return "\n".join([clean(question), *sorted(clean(text) for text in options.values())])


@dataclass(frozen=True)
class Match:
    """The nearest indexed item and its trigram Jaccard similarity to the item checked."""

    item_id: str
    similarity: float


class DuplicateIndex:
    """Every public and pooled item's trigram set, searched exactly for the nearest one."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._pending: list[str] = []
        self._rows = sparse.csr_matrix((0, _HASHER.n_features))  # items x hashed trigrams, appended cheaply
        self._columns: sparse.csc_matrix | None = None  # the first ``_settled`` rows by column: a search reads a few
        self._settled = 0
        self._sizes = np.zeros(0)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, item_id: str, question: str, options: Mapping[str, str]) -> None:
        """Index one item (a public corpus item, or a pool item once written)."""
        self.extend([(item_id, question, options)])

    def extend(self, items: Iterable[tuple[str, str, Mapping[str, str]]]) -> None:
        """Index many items; vectorised once, when next searched."""
        for item_id, question, options in items:
            self._ids.append(item_id)
            self._pending.append(canonical_text(question, options))

    def _vectors(self) -> np.ndarray:
        if self._pending:
            self._rows = sparse.vstack([self._rows, _HASHER.transform(self._pending)], format="csr")
            self._sizes = np.asarray(self._rows.getnnz(axis=1), dtype=float)
            self._pending = []
        if self._rows.shape[0] - self._settled > SETTLE_AFTER:
            self._columns, self._settled = self._rows.tocsc(), self._rows.shape[0]
        return self._sizes

    def similarities(self, question: str, options: Mapping[str, str]) -> np.ndarray:
        """Jaccard similarity of the item's trigram set to every indexed item's, in the order added.

        The shared trigrams are the query's columns summed per item: of the settled rows by column (0.1 ms
        for the sample; a sparse product takes 11 ms, transposing the 2^22-wide query), of the rows added
        since by matching their trigrams (an import adds one item per search)."""
        if not self._ids:
            return np.zeros(0)
        sizes = self._vectors()
        query = _HASHER.transform([canonical_text(question, options)]).tocsr()
        shared = np.zeros(len(sizes))
        if self._columns is not None:
            shared[: self._settled] = np.asarray(self._columns[:, query.indices].sum(axis=1)).ravel()
        recent = self._rows[self._settled :]
        hits = np.isin(recent.indices, query.indices)
        rows = np.repeat(np.arange(recent.shape[0]), np.diff(recent.indptr))
        shared[self._settled :] = np.bincount(rows, weights=hits, minlength=recent.shape[0])
        union = sizes + query.getnnz() - shared
        return np.divide(shared, union, out=np.zeros_like(shared), where=union > 0)

    def nearest(
        self, question: str, options: Mapping[str, str], threshold: float = THRESHOLD, exclude: str | None = None
    ) -> Match | None:
        """The most similar indexed item at or above ``threshold`` (``exclude``: the item's own id), else None."""
        scores = self.similarities(question, options)
        if exclude is not None and exclude in self._ids:
            scores[self._ids.index(exclude)] = -1.0
        if not len(scores) or scores.max() < threshold:
            return None
        best = int(scores.argmax())
        return Match(self._ids[best], round(float(scores[best]), 4))
