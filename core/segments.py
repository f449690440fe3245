"""Segment-level meaning signals for ranking whole provisions (the SEAS idea: fine-grained "action
segments" retrieved beside whole provisions and used to re-rank them).

A provision of 200 words that answers "do we have to train our staff?" in one sentence embeds far
from the question: its vector averages every topic the provision touches, and the embedding model
reads at most 256 word pieces of it. Scored by its best sentence instead, it ranks first. So each
chunk of a collection is held as three kinds of unit, all embedded with the same model:

* the chunk itself (its search view: label, heading, text),
* its heading (e.g. Art. 99 "Penalties", Art. 50 "Transparency obligations for providers and
  deployers of certain AI systems"), one vector per distinct heading,
* its segments: the sentences and list items the extractive generator may quote.

`SegmentIndex.signals` gives, for every chunk of the collection, the cosine of the question to the
chunk, to its heading and to its best segment, for the whole question and for its focus pieces
(core/query.py). The vectors come from the sentence-vector store filled at ingest, so the signals
are the same whichever index backend holds the chunks (embedded or Weaviate); held in memory they
cost about 1.5 KB a segment (the EU AI Act: about 6,000 segments, 9 MB).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from core.ingest.references import with_cited_titles
from core.text import quotable_spans
from core.types import Chunk


class TextVectors(Protocol):
    def get(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised embedding per text, in order (storage/sentence_vectors.py)."""


def chunk_segments(chunk: Chunk) -> list[str]:
    """The sentences and list items of a chunk: the same units the extractive generator quotes."""
    return [chunk.text[a:b] for a, b in quotable_spans(chunk.text)]


def search_segments(chunk: Chunk) -> list[str]:
    """The chunk's segments as the ranker reads them: each with the titles of the units it cites, so
    "(a) Chapters I and II shall apply from …" is about prohibited AI practices (Chapter II)."""
    return [with_cited_titles(segment, chunk.references) for segment in chunk_segments(chunk)]


def unit_texts(chunks: Sequence[Chunk]) -> list[str]:
    """Every text a SegmentIndex of these chunks embeds, and the segments answers quote (ingest
    stores them ahead of time)."""
    texts: list[str] = []
    for chunk in chunks:
        texts.append(chunk.search_view())
        if chunk.heading:
            texts.append(chunk.heading)
        quoted = chunk_segments(chunk)
        texts.extend(quoted)
        searched = (with_cited_titles(segment, chunk.references) for segment in quoted)  # search_segments
        texts.extend(t for t in searched if t not in quoted)
    return texts


@dataclass(frozen=True)
class Signals:
    """Cosines per chunk (arrays aligned with SegmentIndex.chunks); `piece_*` are the maxima over
    the question's focus pieces (equal to the whole question's when it has none)."""

    chunk: np.ndarray
    heading: np.ndarray
    segment: np.ndarray
    piece_chunk: np.ndarray
    piece_segment: np.ndarray
    piece_heading: np.ndarray


class SegmentIndex:
    def __init__(self, chunks: Sequence[Chunk], vectors: TextVectors) -> None:
        self.chunks = list(chunks)
        self.row_of = {c.id: i for i, c in enumerate(self.chunks)}
        n = len(self.chunks)
        self.chunk_vectors = vectors.get([c.search_view() for c in self.chunks]) if n else np.zeros((0, 0))
        headings = sorted({c.heading for c in self.chunks if c.heading})
        heading_rows = {h: i for i, h in enumerate(headings)}
        self.heading_vectors = vectors.get(headings) if headings else np.zeros((0, 0), dtype=np.float32)
        # -1: the chunk has no heading (its heading cosine is 0)
        self.heading_of = np.array([heading_rows.get(c.heading, -1) for c in self.chunks], dtype=np.int64)
        owners: list[int] = []
        texts: list[str] = []
        for i, chunk in enumerate(self.chunks):
            for segment in search_segments(chunk):
                owners.append(i)
                texts.append(segment)
        self.segment_owner = np.array(owners, dtype=np.int64)
        self.segment_texts = texts
        self.segment_vectors = vectors.get(texts) if texts else np.zeros((0, 0), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.chunks)

    def signals(self, query_vector: np.ndarray, piece_vectors: np.ndarray | None = None) -> Signals:
        n = len(self.chunks)
        if n == 0:
            empty = np.zeros(0, dtype=np.float32)
            return Signals(empty, empty, empty, empty, empty, empty)
        q = np.asarray(query_vector, dtype=np.float32)
        chunk = self.chunk_vectors @ q
        heading = self._headings(q[:, None])[:, 0]
        segment = self._best_segments(q[:, None])[:, 0]
        if piece_vectors is None or len(piece_vectors) == 0:
            return Signals(chunk, heading, segment, chunk, segment, heading)
        p = np.asarray(piece_vectors, dtype=np.float32).T  # dim x pieces
        piece_chunk = (self.chunk_vectors @ p).max(axis=1)
        piece_segment = self._best_segments(p).max(axis=1)
        piece_heading = self._headings(p).max(axis=1)
        return Signals(chunk, heading, segment, piece_chunk, piece_segment, piece_heading)

    def best_segment_cosines(self, query_vector: np.ndarray) -> np.ndarray:
        return self._best_segments(np.asarray(query_vector, dtype=np.float32)[:, None])[:, 0]

    def _headings(self, q: np.ndarray) -> np.ndarray:
        out = np.zeros((len(self.chunks), q.shape[1]), dtype=np.float32)
        if len(self.heading_vectors):
            cos = self.heading_vectors @ q
            has = self.heading_of >= 0
            out[has] = cos[self.heading_of[has]]
        return out

    def _best_segments(self, q: np.ndarray) -> np.ndarray:
        """Per chunk and query column: the best cosine over the chunk's segments (-1 without any)."""
        best = np.full((len(self.chunks), q.shape[1]), -1.0, dtype=np.float32)
        if len(self.segment_vectors):
            np.maximum.at(best, self.segment_owner, self.segment_vectors @ q)
        return best
