"""Building a collection's graph and keeping it in step with the index.

`KnowledgeGraphs(index, store, make_extractor, embed)` is called with a collection name and returns
a `KGRetriever` (or None for an empty collection). It is cached per collection and keyed by the
index's `documents()` version, like the term-statistics cache, and by the stored file's identity:
when another process ingests, the next question loads (or, if the stored graph is older than the
index, rebuilds and saves) the graph; when another process rebuilds the graph (`hypa kg build`, e.g.
with the LLM extractor), the next question loads the new file. A stored file that cannot be read or
is refused as unsafe is rebuilt from the index (it is derived data), and a graph that cannot be
saved is still used from memory: a question is never failed by the graph's file.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from core.errors import KGFormatError, UnsafeKGFile
from core.index import ChunkIndex
from core.kg.graph import build_graph
from core.kg.model import KGData
from core.kg.retriever import KGRetriever, KGSettings
from core.types import Chunk

log = logging.getLogger(__name__)


class KGStore(Protocol):
    """Where each collection's graph is kept between processes (storage.kg_store.KGStore: one file
    per collection)."""

    def stamp(self, collection: str) -> object | None:
        """Changes whenever the stored graph is replaced (None: nothing stored), so caches follow it."""

    def save(self, data: KGData) -> object: ...

    def load(self, collection: str) -> KGData | None:
        """The stored graph, None if there is none; UnsafeKGFile / KGFormatError for a bad file."""


class TripletExtractor(Protocol):
    name: str

    def extract(self, collection: str, chunks: Sequence[Chunk], source_version: dict[str, str]) -> KGData: ...


def extract_collection(index: ChunkIndex, collection: str, extractor: TripletExtractor) -> KGData:
    """The collection's triplets from the index's current chunks. The version is read before the
    chunks: if an ingest lands in between, the graph looks older than it is and is rebuilt, never
    the other way round."""
    version = index.documents(collection)
    return extractor.extract(collection, index.chunks(collection), version)


def build_collection(index: ChunkIndex, store: KGStore, collection: str, extractor: TripletExtractor) -> KGData:
    """Extract the collection's triplets from the index's current chunks and save them."""
    data = extract_collection(index, collection, extractor)
    store.save(data)
    return data


def stored_if_current(store: KGStore, collection: str, version: dict[str, str]) -> KGData | None:
    """The stored graph when it was built from exactly this index version (`index.documents()`);
    None when it is missing, older, unreadable or refused as unsafe: it is derived data, rebuilt
    from the index by the caller, never a reason to fail."""
    try:
        data = store.load(collection)
    except UnsafeKGFile as exc:
        log.error("refused the stored knowledge graph of %r, rebuilding it from the index: %s", collection, exc)
        return None
    except (KGFormatError, OSError) as exc:
        log.warning("stored knowledge graph of %r is unreadable, rebuilding it from the index: %s", collection, exc)
        return None
    return data if data is not None and data.source_version == version else None


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
        self._by_collection: dict[str, tuple[tuple, KGRetriever | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, collection: str) -> KGRetriever | None:
        try:
            version_map = self._index.documents(collection)
        except LookupError:  # a collection the index does not have: no graph either
            return None
        version = frozenset(version_map.items())
        with self._lock:
            cached = self._by_collection.get(collection)
            if cached is not None and cached[0] == (version, self._store.stamp(collection)):
                return cached[1]
            retriever = self._load(collection, version_map)
            # The file's identity after loading (a rebuild just wrote it): another process's
            # `hypa kg build` changes it, and the next question loads that graph.
            self._by_collection[collection] = ((version, self._store.stamp(collection)), retriever)
            return retriever

    def _load(self, collection: str, version: dict[str, str]) -> KGRetriever | None:
        if not version:
            return None
        data = stored_if_current(self._store, collection, version)
        if data is None:
            log.info("knowledge graph of %r is missing or older than the index: rebuilding", collection)
            data = extract_collection(self._index, collection, self._make_extractor())
            try:
                self._store.save(data)
            except OSError as exc:
                log.error("could not save the knowledge graph of %r (%s); using it from memory", collection, exc)
        chunks = self._index.chunks(collection)
        return KGRetriever(data, build_graph(data), chunks, embed=self._embed, settings=self._settings)
