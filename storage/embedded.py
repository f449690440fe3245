"""The default chunk index: in-process, on disk, no server. Weaviate-compatible hybrid search.

Layout under `root` (settings.index_dir), one directory per collection:

    <root>/<collection>/CURRENT          name of the live version directory (the commit point)
    <root>/<collection>/v<ns>-<rand>/    one immutable version of the collection
        meta.json                        format, embedder id, tokenizer, BM25 params, {doc_id: hash},
                                         {doc_id: {source, ingested_at}}
        chunks.jsonl                     Chunk.to_dict() per line, in document order
        vectors.npy                      float32 (n, dim), L2-normalised, row i = chunk i
        bm25/                            bm25s index (lucene, k1=1.2, b=0.75) over the same rows

Writes build a complete new version in a `.tmp-*` directory, rename it into place and then swap
CURRENT with os.replace (atomic on POSIX and Windows). A crash or exception at any point before
that swap leaves the previous version live and untouched; leftovers are removed by the next write.
Readers hold an immutable in-memory snapshot per collection, so concurrent queries need no lock;
each access re-reads CURRENT (a few bytes) so a process sees another process's ingest.

BM25 follows Weaviate's defaults for `text` properties: `word` tokenization (split on anything that
is not a letter or digit, lowercased), the `en` stopword preset removed from the *query* only
(Weaviate keeps stopwords in the index, so they count in document length), Lucene IDF, k1=1.2,
b=0.75. bm25s's "lucene" score omits Lucene's constant (k1 + 1) factor, which changes no ranking
and cancels in relativeScoreFusion's min-max scaling.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import bm25s
import numpy as np

from core.errors import CollectionNotFound, EmbedderMismatch, IndexCorrupted
from core.fusion import Hit, check_hybrid_args, fuse
from core.index import DocumentInfo, FusionMethod
from core.types import Chunk, ScoredChunk
from storage.embedder import TextEmbedder

FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"
LOCK_FILE = ".lock"
META_FILE = "meta.json"
CHUNKS_FILE = "chunks.jsonl"
VECTORS_FILE = "vectors.npy"
BM25_DIR = "bm25"
_TMP_PREFIX = ".tmp-"
_VERSION_PREFIX = "v"

# Weaviate's BM25 defaults (schema BM25Config): k1=1.2, b=0.75.
BM25_PARAMS: dict[str, str | float] = {"method": "lucene", "k1": 1.2, "b": 0.75}

# Weaviate's "en" stopword preset, verbatim: adapters/repos/db/inverted/stopwords/presets.go
WEAVIATE_EN_STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for",
    "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that",
    "the", "their", "then", "there", "these", "they", "this", "to", "was", "will",
    "with",
})

_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# Letters and digits only: `[^\W_]` is \w without the underscore (Weaviate: !IsLetter && !IsNumber).
_WORD = re.compile(r"[^\W_]+")
_LOAD_ATTEMPTS = 3  # a concurrent writer may delete the version we were about to read: retry


@dataclass(frozen=True)
class DocumentUpdate:
    """One document's complete new chunk list (empty list: the document has no chunks)."""

    doc_id: str
    content_hash: str
    chunks: Sequence[Chunk]
    source: str = ""  # the file it was ingested from (recorded, with the time of this write)
    ingested_at: str = ""  # empty: now (a migration passes the original time on)
    source_url: str = ""  # where its citations link to (core/links.py pattern), "" = none


# -- text views -------------------------------------------------------------------------------


def embedded_view(chunk: Chunk) -> str:
    """The text that is indexed by BM25 and embedded (Chunk.search_view: label, heading, body)."""
    return chunk.search_view()


def word_tokens(text: str) -> list[str]:
    """Weaviate `word` tokenization: split on non-alphanumerics, lowercase."""
    return [token.lower() for token in _WORD.findall(text)]


class BM25Tokenizer:
    """Weaviate-style tokens; optional English Snowball stemming (not a Weaviate feature, off by default)."""

    def __init__(self, stemmer: bool = False) -> None:
        self.stemmer = stemmer
        self._stem: Callable[[list[str]], list[str]] | None = _load_stemmer() if stemmer else None

    @property
    def config(self) -> dict:
        return {
            "tokenization": "word",
            "stopwords": "en",
            "stopwords_removed_from": "query",
            "stemmer": "snowball-english" if self.stemmer else None,
        }

    @classmethod
    def from_config(cls, config: dict) -> BM25Tokenizer:
        return cls(stemmer=bool(config.get("stemmer")))

    def document(self, text: str) -> list[str]:
        tokens = word_tokens(text)
        return self._stem(tokens) if self._stem else tokens

    def query(self, text: str) -> list[str]:
        tokens = [t for t in word_tokens(text) if t not in WEAVIATE_EN_STOPWORDS]
        return self._stem(tokens) if self._stem else tokens


def _load_stemmer() -> Callable[[list[str]], list[str]]:
    try:
        import Stemmer  # PyStemmer
    except ImportError as exc:
        raise ImportError("stemmer=True needs PyStemmer: `pip install PyStemmer`") from exc
    return Stemmer.Stemmer("english").stemWords


# -- snapshot ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Snapshot:
    """One immutable version of a collection, fully in memory."""

    name: str
    version: str
    chunks: tuple[Chunk, ...]
    vectors: np.ndarray  # (n, dim) float32, read-only
    bm25: bm25s.BM25 | None  # None when no chunk has a single token
    documents: dict[str, str]
    model_id: str
    tokenizer: BM25Tokenizer
    row_of: dict[str, int] = field(repr=False)
    # {doc_id: {"source": ..., "ingested_at": ..., "source_url": ...}}; absent (or without
    # "source_url") for documents written by older versions.
    document_info: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.chunks)

    @cached_property
    def chunk_counts(self) -> dict[str, int]:
        """Chunks per document, counted once per version: document_info is read for every answer
        (the links of its citations), and counting 100,000 chunks each time cost ~10 ms."""
        counts: dict[str, int] = {}
        for chunk in self.chunks:
            counts[chunk.doc_id] = counts.get(chunk.doc_id, 0) + 1
        return counts


def _empty_snapshot(name: str, dim: int, model_id: str, tokenizer: BM25Tokenizer) -> _Snapshot:
    vectors = np.zeros((0, dim), dtype=np.float32)
    return _Snapshot(name, "", (), vectors, None, {}, model_id, tokenizer, {})


def _new_version() -> str:
    return f"{_VERSION_PREFIX}{time.time_ns()}-{uuid.uuid4().hex[:8]}"


def _relinked(old: _Snapshot, source_urls: Mapping[str, str]) -> _Snapshot:
    """`old` as a new version whose documents in `source_urls` link there (KeyError for an unknown one)."""
    info = {d: dict(i) for d, i in old.document_info.items()}
    for doc_id, url in source_urls.items():
        if doc_id not in old.documents:
            raise KeyError(f"no document {doc_id!r} in collection {old.name!r}")
        info.setdefault(doc_id, {"source": "", "ingested_at": ""})["source_url"] = url
    return dataclasses.replace(old, version=_new_version(), document_info=dict(sorted(info.items())))


# -- small filesystem helpers -----------------------------------------------------------------


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    # Makes renames durable on POSIX; directories cannot be opened this way on Windows.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    for file in path.rglob("*"):
        if file.is_file():
            _fsync_file(file)
    _fsync_dir(path)


@contextmanager
def _process_lock(path: Path) -> Iterator[None]:
    """Serialise writers across processes (POSIX flock); threads are serialised separately."""
    with open(path, "a+b") as fh:
        try:
            import fcntl
        except ImportError:  # Windows: in-process lock only
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _normalise_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _top_k_desc(scores: np.ndarray, k: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (default: all) with the k highest scores, best first; equal scores by row, so deterministic."""
    candidates = scores if rows is None else scores[rows]
    if len(candidates) > k:
        picked = np.argpartition(-candidates, k - 1)[:k]
    else:
        picked = np.arange(len(candidates))
    picked = picked[np.lexsort((picked, -candidates[picked]))]
    return picked if rows is None else rows[picked]


# -- the index --------------------------------------------------------------------------------


class EmbeddedIndex:
    """ChunkIndex backed by files under `root`; see the module docstring for layout and guarantees."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        embedder: TextEmbedder | None = None,
        candidates: int = 100,
        stemmer: bool = False,
        show_progress: bool = False,
    ) -> None:
        """`embedder` defaults to the packaged all-MiniLM-L6-v2, created on first need (not here).

        `candidates`: hits each side (BM25, dense) hands to fusion (at least `limit`); 100 like Weaviate.
        `stemmer`: English stemming for BM25 in collections this instance writes (PyStemmer).
        """
        if candidates < 1:
            raise ValueError("candidates must be >= 1")
        self.root = Path(root)
        self.candidates = candidates
        self.show_progress = show_progress
        self._tokenizer = BM25Tokenizer(stemmer=stemmer)
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self._snapshots: dict[str, _Snapshot] = {}
        self._load_lock = threading.Lock()
        self._write_lock = threading.Lock()
        # OpenBLAS called from many threads at once oversubscribes the cores (measured: 8 concurrent
        # askers fell from ~90 to ~26 dense queries/s at 100k chunks). The matvec is memory-bound,
        # so running one at a time loses nothing.
        self._matvec_lock = threading.Lock()

    # -- embedder access (shared with other stages) ----------------------------------------------

    @property
    def embedder(self) -> TextEmbedder:
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    from storage.embedder import Embedder

                    self._embedder = Embedder()
        return self._embedder

    def embed_query(self, text: str) -> np.ndarray:
        """The query vector hybrid_search would compute; pass it back as `vector=` to reuse it."""
        return self.embedder.embed_queries([text])[0]

    # -- read API ----------------------------------------------------------------------------

    def collections(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name for p in self.root.iterdir() if p.is_dir() and (p / CURRENT_FILE).is_file()
        )

    def chunks(self, collection: str) -> list[Chunk]:
        return list(self._snapshot(collection).chunks)

    def vectors(self, collection: str) -> np.ndarray:
        """Read-only (n, dim) float32 matrix; row i belongs to chunks(collection)[i]."""
        return self._snapshot(collection).vectors

    def documents(self, collection: str) -> dict[str, str]:
        """{doc_id: content_hash} of every document in the collection."""
        return dict(self._snapshot(collection).documents)

    def document_hash(self, collection: str, doc_id: str) -> str | None:
        try:
            return self._snapshot(collection).documents.get(doc_id)
        except CollectionNotFound:
            return None

    def document_info(self, collection: str) -> list[DocumentInfo]:
        try:
            snap = self._snapshot(collection)
        except CollectionNotFound:
            return []
        counts = snap.chunk_counts
        return [
            DocumentInfo(
                doc_id, content_hash, counts.get(doc_id, 0),
                source=snap.document_info.get(doc_id, {}).get("source", ""),
                ingested_at=snap.document_info.get(doc_id, {}).get("ingested_at", ""),
                source_url=snap.document_info.get(doc_id, {}).get("source_url", ""),
            )
            for doc_id, content_hash in sorted(snap.documents.items())
        ]

    def hybrid_search(
        self,
        query: str,
        *,
        collection: str,
        limit: int,
        fusion: FusionMethod = "rankedFusion",
        alpha: float = 0.5,
        vector: Sequence[float] | None = None,
    ) -> list[ScoredChunk]:
        check_hybrid_args(fusion, alpha)
        snap = self._snapshot(collection)
        if limit < 1 or len(snap) == 0:
            return []
        k = min(len(snap), max(self.candidates, limit))
        # Like Weaviate, a side whose weight is zero is not searched at all.
        keyword = self._keyword_hits(snap, query, k) if alpha < 1 else []
        dense = self._dense_hits(snap, self._query_vector(snap, query, vector), k) if alpha > 0 else []
        fused = fuse(fusion, keyword, dense, alpha)[:limit]
        return [ScoredChunk(snap.chunks[snap.row_of[cid]], score) for cid, score in fused]

    def keyword_search(self, query: str, *, collection: str, limit: int) -> list[ScoredChunk]:
        """BM25 alone, raw scores (for diagnostics and evaluation)."""
        snap = self._snapshot(collection)
        hits = self._keyword_hits(snap, query, min(len(snap), limit)) if len(snap) and limit > 0 else []
        return [ScoredChunk(snap.chunks[snap.row_of[cid]], score) for cid, score in hits]

    def dense_search(
        self, query: str, *, collection: str, limit: int, vector: Sequence[float] | None = None
    ) -> list[ScoredChunk]:
        """Cosine similarity alone (1 - cosine distance), for diagnostics and evaluation."""
        snap = self._snapshot(collection)
        if not len(snap) or limit < 1:
            return []
        hits = self._dense_hits(snap, self._query_vector(snap, query, vector), min(len(snap), limit))
        return [ScoredChunk(snap.chunks[snap.row_of[cid]], score) for cid, score in hits]

    # -- write API ---------------------------------------------------------------------------

    def replace_document(
        self,
        collection: str,
        doc_id: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        *,
        source: str = "",
        source_url: str = "",
    ) -> None:
        self.replace_documents(
            collection, [DocumentUpdate(doc_id, content_hash, chunks, source=source, source_url=source_url)]
        )

    def set_source_url(self, collection: str, doc_id: str, source_url: str) -> None:
        """A new version whose only change is the document's record: chunks, vectors and BM25 are
        written as they are (nothing embedded or rebuilt)."""
        self._write(collection, updates=(), deletions=(), create=False, source_urls={doc_id: source_url})

    def replace_documents(self, collection: str, updates: Sequence[DocumentUpdate]) -> None:
        """Replace several documents in one atomic version (one BM25 build instead of one per document)."""
        doc_ids = [u.doc_id for u in updates]
        if len(set(doc_ids)) != len(doc_ids):
            raise ValueError(f"A document appears twice in one batch: {sorted(doc_ids)}")
        for update in updates:
            _check_chunks(collection, update)
        self._write(collection, updates=updates, deletions=(), create=True)

    def delete_document(self, collection: str, doc_id: str) -> None:
        """Remove a document's chunks and manifest entry; unknown doc_id is a no-op."""
        if doc_id not in self._snapshot(collection).documents:
            return
        self._write(collection, updates=(), deletions=(doc_id,), create=False)

    def drop_collection(self, collection: str) -> None:
        """Delete a whole collection from disk (CURRENT first, so readers never see half of it)."""
        directory = self._collection_dir(collection)
        with self._write_lock:
            if not (directory / CURRENT_FILE).is_file():
                raise CollectionNotFound(collection, self.collections(), self.root)
            with _process_lock(directory / LOCK_FILE):
                (directory / CURRENT_FILE).unlink()
            shutil.rmtree(directory, ignore_errors=True)
            with self._load_lock:
                self._snapshots.pop(collection, None)

    # -- search internals --------------------------------------------------------------------

    def _keyword_hits(self, snap: _Snapshot, query: str, k: int) -> list[Hit]:
        if snap.bm25 is None:
            return []
        token_ids = snap.bm25.get_tokens_ids(snap.tokenizer.query(query))
        if not token_ids:  # Weaviate runs no keyword search for an empty/stopword-only query
            return []
        scores = snap.bm25.get_scores_from_ids(token_ids)
        matching = np.flatnonzero(scores > 0)  # BM25 only returns documents containing a term
        rows = _top_k_desc(scores, k, matching)
        return [(snap.chunks[r].id, float(scores[r])) for r in rows]

    def _dense_hits(self, snap: _Snapshot, query_vector: np.ndarray, k: int) -> list[Hit]:
        with self._matvec_lock:
            similarities = snap.vectors @ query_vector  # = 1 - cosine distance, both normalised
        rows = _top_k_desc(similarities, k)
        return [(snap.chunks[r].id, float(similarities[r])) for r in rows]

    def _query_vector(
        self, snap: _Snapshot, query: str, vector: Sequence[float] | None
    ) -> np.ndarray:
        if vector is None:
            if self.embedder.model_id != snap.model_id:
                raise EmbedderMismatch(
                    f"Collection {snap.name!r} was embedded with {snap.model_id}, but the current "
                    f"embedder is {self.embedder.model_id}; re-ingest the collection."
                )
            return self._checked(snap, self.embed_query(query))
        return self._checked(snap, vector)

    def _checked(self, snap: _Snapshot, vector: Sequence[float] | np.ndarray) -> np.ndarray:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != snap.vectors.shape[1]:
            raise EmbedderMismatch(
                f"Query vector has {q.shape[0]} dimensions; collection {snap.name!r} has "
                f"{snap.vectors.shape[1]}."
            )
        return q / max(float(np.linalg.norm(q)), 1e-12)

    # -- loading -----------------------------------------------------------------------------

    def _collection_dir(self, collection: str) -> Path:
        if not _COLLECTION_NAME.match(collection):
            raise ValueError(
                f"Invalid collection name {collection!r}: use letters, digits, '_', '-', '.'"
            )
        return self.root / collection

    def _current_version(self, collection: str) -> str | None:
        if not _COLLECTION_NAME.match(collection):
            return None  # such a name cannot have been written (and must not escape `root`)
        return _read_current(self.root / collection)

    def _snapshot(self, collection: str) -> _Snapshot:
        """The live snapshot; reloads when CURRENT changed (another process or instance wrote)."""
        version = self._current_version(collection)
        cached = self._snapshots.get(collection)
        if cached is not None and cached.version == version:
            return cached
        with self._load_lock:
            for _ in range(_LOAD_ATTEMPTS):
                version = self._current_version(collection)
                if version is None:
                    self._snapshots.pop(collection, None)
                    raise CollectionNotFound(collection, self.collections(), self.root)
                cached = self._snapshots.get(collection)
                if cached is not None and cached.version == version:
                    return cached
                try:
                    snap = self._load(collection, version)
                except FileNotFoundError:
                    continue  # the version was replaced and removed while we read it
                self._snapshots[collection] = snap
                return snap
        raise IndexCorrupted(f"Collection {collection!r} kept changing or is missing files: {version}")

    def _load(self, collection: str, version: str) -> _Snapshot:
        directory = self.root / collection / version
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise IndexCorrupted(
                f"{directory} has index format {meta.get('format')}, expected {FORMAT_VERSION}; re-ingest."
            )
        chunks = _read_chunks(directory / CHUNKS_FILE)
        vectors = np.load(directory / VECTORS_FILE)  # no mmap: a later write may delete the file
        vectors.flags.writeable = False
        bm25 = None
        if meta["bm25_built"]:
            bm25 = bm25s.BM25.load(str(directory / BM25_DIR), mmap=False, show_progress=False)
        _check_consistent(directory, meta, chunks, vectors, bm25)
        return _Snapshot(
            name=collection,
            version=version,
            chunks=tuple(chunks),
            vectors=vectors,
            bm25=bm25,
            documents=dict(meta["documents"]),
            model_id=meta["model_id"],
            tokenizer=BM25Tokenizer.from_config(meta["tokenizer"]),
            row_of={c.id: i for i, c in enumerate(chunks)},
            document_info=dict(meta.get("document_info", {})),
        )

    # -- writing -----------------------------------------------------------------------------

    def _write(
        self,
        collection: str,
        *,
        updates: Sequence[DocumentUpdate],
        deletions: Sequence[str],
        create: bool,
        source_urls: Mapping[str, str] | None = None,
    ) -> None:
        directory = self._collection_dir(collection)
        with self._write_lock:
            directory.mkdir(parents=True, exist_ok=True)
            with _process_lock(directory / LOCK_FILE):
                try:
                    old = self._base_for_write(collection, create)
                    if source_urls:
                        snap = _relinked(old, source_urls)
                    else:
                        snap = self._build(old, updates, deletions)  # embeds: minutes for a big document
                    self._commit(directory, snap)
                except BaseException:  # Ctrl-C included: the first write of a collection leaves no trace
                    if _read_current(directory) is None:
                        _remove_unborn_collection(directory)
                    raise
                with self._load_lock:
                    self._snapshots[collection] = snap
                # Under the process lock: another writer's .tmp-* directory must not vanish.
                _remove_stale_versions(directory, keep=snap.version)

    def _base_for_write(self, collection: str, create: bool) -> _Snapshot:
        """The latest committed state, re-read under the process lock (not a stale cache)."""
        try:
            return self._snapshot(collection)
        except CollectionNotFound:
            if not create:
                raise
            embedder = self.embedder
            return _empty_snapshot(collection, embedder.dim, embedder.model_id, self._tokenizer)

    def _build(
        self, old: _Snapshot, updates: Sequence[DocumentUpdate], deletions: Sequence[str]
    ) -> _Snapshot:
        replaced = {u.doc_id for u in updates} | set(deletions)
        documents = {d: h for d, h in old.documents.items() if d not in replaced}
        documents.update({u.doc_id: u.content_hash for u in updates})
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        info = {d: i for d, i in old.document_info.items() if d not in replaced}
        info.update({
            u.doc_id: {"source": u.source, "ingested_at": u.ingested_at or now, "source_url": u.source_url}
            for u in updates
        })
        kept = [c for c in old.chunks if c.doc_id not in replaced]
        new = [c for u in updates for c in u.chunks]
        # Document order: by doc_id, each document's chunks in the order they were given.
        chunks = sorted(kept + new, key=lambda c: c.doc_id)
        _check_unique_ids(chunks)
        vectors, model_id = self._vectors_for(old, chunks)
        bm25 = _build_bm25(self._tokenizer, chunks)
        version = _new_version()
        return _Snapshot(
            name=old.name,
            version=version,
            chunks=tuple(chunks),
            vectors=vectors,
            bm25=bm25,
            documents=dict(sorted(documents.items())),
            model_id=model_id,
            tokenizer=self._tokenizer,
            row_of={c.id: i for i, c in enumerate(chunks)},
            document_info=dict(sorted(info.items())),
        )

    def _vectors_for(self, old: _Snapshot, chunks: Sequence[Chunk]) -> tuple[np.ndarray, str]:
        """Reuse stored vectors of unchanged chunks (same id, same embedded text, same model)."""
        embedder = self.embedder  # constructing it is cheap; the model loads only if we embed
        model_id, dim = embedder.model_id, embedder.dim
        reusable = old.row_of if old.model_id == model_id else {}
        views = [embedded_view(c) for c in chunks]
        vectors = np.empty((len(chunks), dim), dtype=np.float32)
        missing: list[int] = []
        for i, (chunk, view) in enumerate(zip(chunks, views)):
            row = reusable.get(chunk.id)
            if row is not None and embedded_view(old.chunks[row]) == view:
                vectors[i] = old.vectors[row]
            else:
                missing.append(i)
        if missing:
            fresh = embedder.embed_passages([views[i] for i in missing], show_progress=self.show_progress)
            vectors[missing] = _normalise_rows(_checked_shape(fresh, len(missing), dim))
        vectors.flags.writeable = False
        return vectors, model_id

    def _commit(self, directory: Path, snap: _Snapshot) -> None:
        """Write the version beside the live one, then switch CURRENT: the only visible step."""
        tmp = directory / f"{_TMP_PREFIX}{snap.version}"
        final = directory / snap.version
        try:
            tmp.mkdir()
            _write_version(tmp, snap)
            _fsync_tree(tmp)
            os.replace(tmp, final)
            _publish_current(directory, snap.version)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if _read_current(directory) != snap.version:
                shutil.rmtree(final, ignore_errors=True)
            raise


# -- module-level helpers (pure, or file-format specific) -------------------------------------


def _check_chunks(collection: str, update: DocumentUpdate) -> None:
    for chunk in update.chunks:
        if chunk.collection != collection or chunk.doc_id != update.doc_id:
            raise ValueError(
                f"Chunk {chunk.id} belongs to {chunk.collection}/{chunk.doc_id}, "
                f"not {collection}/{update.doc_id}"
            )


def _check_unique_ids(chunks: Sequence[Chunk]) -> None:
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.id in seen:
            raise ValueError(f"Duplicate chunk id {chunk.id} (doc {chunk.doc_id})")
        seen.add(chunk.id)


def _checked_shape(vectors: np.ndarray, rows: int, dim: int) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (rows, dim):
        raise EmbedderMismatch(f"Embedder returned shape {vectors.shape}, expected {(rows, dim)}")
    return vectors


def _build_bm25(tokenizer: BM25Tokenizer, chunks: Sequence[Chunk]) -> bm25s.BM25 | None:
    corpus = [tokenizer.document(embedded_view(c)) for c in chunks]
    if not any(corpus):  # bm25s cannot build a vocabulary out of nothing
        return None
    bm25 = bm25s.BM25(**BM25_PARAMS)
    bm25.index(corpus, show_progress=False)
    return bm25


def _write_version(directory: Path, snap: _Snapshot) -> None:
    with open(directory / CHUNKS_FILE, "w", encoding="utf-8") as fh:
        for chunk in snap.chunks:
            fh.write(json.dumps(chunk.to_dict(), ensure_ascii=False))
            fh.write("\n")
    np.save(directory / VECTORS_FILE, np.ascontiguousarray(snap.vectors, dtype=np.float32))
    if snap.bm25 is not None:
        snap.bm25.save(str(directory / BM25_DIR), show_progress=False)
    meta = {
        "format": FORMAT_VERSION,
        "collection": snap.name,
        "version": snap.version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "count": len(snap.chunks),
        "model_id": snap.model_id,
        "dim": int(snap.vectors.shape[1]),
        "tokenizer": snap.tokenizer.config,
        "bm25": BM25_PARAMS,
        "bm25_built": snap.bm25 is not None,
        "documents": snap.documents,
        "document_info": snap.document_info,
    }
    # meta.json last: a version directory without it is visibly incomplete.
    (directory / META_FILE).write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")


_CHUNK_FIELDS = frozenset(Chunk.__dataclass_fields__)


def _read_chunks(path: Path) -> list[Chunk]:
    """Parse chunks.jsonl. At 100,000 chunks this is most of the load time, so: orjson when present
    (3x faster than json), and rows holding exactly Chunk's fields are built without the frozen
    dataclass's per-field object.__setattr__ (2x faster; same object: equality and hash use fields)."""
    loads = _json_loads()
    new = object.__new__
    chunks: list[Chunk] = []
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = loads(line)
            if row.keys() == _CHUNK_FIELDS:
                chunk = new(Chunk)
                chunk.__dict__.update(row)
            else:  # an older or newer row layout: the checked path
                chunk = Chunk.from_dict(row)
            chunks.append(chunk)
    return chunks


def _json_loads() -> Callable[[bytes], dict]:
    try:
        import orjson
    except ImportError:
        return json.loads
    return orjson.loads


def _check_consistent(
    directory: Path, meta: dict, chunks: list[Chunk], vectors: np.ndarray, bm25: bm25s.BM25 | None
) -> None:
    n = meta["count"]
    sizes = {"chunks.jsonl": len(chunks), "vectors.npy": vectors.shape[0]}
    if bm25 is not None:
        sizes["bm25"] = int(bm25.scores["num_docs"])
    if any(size != n for size in sizes.values()) or vectors.shape[1] != meta["dim"]:
        raise IndexCorrupted(f"{directory}: meta count {n}, dim {meta['dim']}, but found {sizes}")


def _read_current(directory: Path) -> str | None:
    try:
        return (directory / CURRENT_FILE).read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def _publish_current(directory: Path, version: str) -> None:
    """Atomically point CURRENT at `version` (write a temp file, fsync, os.replace, fsync dir)."""
    tmp = directory / f"{_TMP_PREFIX}{CURRENT_FILE}-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(version + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / CURRENT_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(directory)


def _remove_unborn_collection(directory: Path) -> None:
    """Remove the directory of a collection whose first write failed or was interrupted (it holds
    only the lock file and leftovers, never a committed version). Best effort."""
    if not any(entry.name == CURRENT_FILE or entry.name.startswith(_VERSION_PREFIX) for entry in directory.iterdir()):
        shutil.rmtree(directory, ignore_errors=True)


def _remove_stale_versions(directory: Path, keep: str) -> None:
    """Best effort: old versions and leftovers of interrupted writes. Readers hold data in memory."""
    for entry in directory.iterdir():
        if entry.name in (keep, CURRENT_FILE, LOCK_FILE):
            continue
        if entry.name.startswith((_VERSION_PREFIX, _TMP_PREFIX)):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
