"""Collection-level term statistics (document frequencies) used to weigh question terms."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from core.text import content_terms


@dataclass(frozen=True)
class TermStats:
    n_docs: int
    doc_freq: dict[str, int]

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "TermStats":
        df: Counter[str] = Counter()
        n = 0
        for text in texts:
            n += 1
            df.update(set(content_terms(text)))
        return cls(n_docs=n, doc_freq=dict(df))

    def idf(self, term: str) -> float:
        """BM25-style idf; a term the collection never uses gets the highest weight there is."""
        n = self.doc_freq.get(term, 0)
        return math.log(1.0 + (self.n_docs - n + 0.5) / (n + 0.5))
