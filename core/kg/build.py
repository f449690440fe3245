"""Building a collection's graph and keeping it in step with the index.

`KnowledgeGraphs(index, store, make_extractor, embed)` is called with a collection name and returns
a `KGRetriever` (or None for an empty collection). It is cached per collection and keyed by the
index's `documents()` version, like the term-statistics cache: when another process ingests, the
next question loads (or, if the stored graph is older than the index, rebuilds and saves) the graph.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from core.kg.graph import build_graph
from core.kg.model import KGData
from core.kg.retriever import KGRetriever, KGSettings
from core.types import Chunk
from storage.index import ChunkIndex
from storage.kg_store import KGStore

log = logging.getLogger(__name__)


class TripletExtractor(Protocol):
    name: str

    def extract(self, collection: str, chunks: Sequence[Chunk], source_version: dict[str, str]) -> KGData: ...


def build_collection(index: ChunkIndex, store: KGStore, collection: str, extractor: TripletExtractor) -> KGData:
    """Extract the collection's triplets from the index's current chunks and save them."""
    version = index.documents(collection)
    data = extractor.extract(collection, index.chunks(collection), version)
    store.save(data)
    return data


class KnowledgeGraphs:
    def __init__(
        self,
        index: ChunkIndex,
        store: KGStore,
        make_extractor: Callable[[], TripletExtractor],
        *,
        embed: Callable[[list[str]], np.ndarray] | None = None,
        settings: KGSettings | None = None,
    ) -> None:
        self._index = index
        self._store = store
        self._make_extractor = make_extractor
        self._embed = embed
        self._settings = settings or KGSettings()
        self._by_collection: dict[str, tuple[frozenset, KGRetriever | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, collection: str) -> KGRetriever | None:
        try:
            version_map = self._index.documents(collection)
        except LookupError:  # a collection the index does not have: no graph either
            return None
        version = frozenset(version_map.items())
        with self._lock:
            cached = self._by_collection.get(collection)
            if cached is not None and cached[0] == version:
                return cached[1]
            retriever = self._load(collection, version_map)
            self._by_collection[collection] = (version, retriever)
            return retriever

    def _load(self, collection: str, version: dict[str, str]) -> KGRetriever | None:
        if not version:
            return None
        data = self._store.load(collection)
        if data is None or data.source_version != version:
            log.info("knowledge graph of %r is missing or older than the index: rebuilding", collection)
            data = build_collection(self._index, self._store, collection, self._make_extractor())
        chunks = self._index.chunks(collection)
        return KGRetriever(data, build_graph(data), chunks, embed=self._embed, settings=self._settings)
