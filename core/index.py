"""The seam between core/ and any chunk index backend (embedded default, Weaviate)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, Sequence, runtime_checkable

from core.types import Chunk, ScoredChunk

FusionMethod = Literal["rankedFusion", "relativeScoreFusion"]


@dataclass(frozen=True)
class DocumentInfo:
    """What the index records about one document (`hypa index documents`)."""

    doc_id: str
    content_hash: str  # sha256 of the file's bytes
    chunks: int
    # The absolute path it was ingested from, and when (ISO 8601, UTC). Empty for documents
    # ingested before hypa recorded them.
    source: str = ""
    ingested_at: str = ""
    # Where its citations link to: a URL pattern (core/links.py) given with `hypa ingest --source-url`;
    # "" = none (a manifest corpus's links come from bot/corpora.toml instead).
    source_url: str = ""


@runtime_checkable
class ChunkIndex(Protocol):
    def document_hash(self, collection: str, doc_id: str) -> str | None:
        """Content hash recorded when the document was last ingested, or None."""

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
        """Atomically replace every chunk of one document (insert if new); records `source` (the
        file it came from), `source_url` (where its citations link to) and the time."""

    def set_source_url(self, collection: str, doc_id: str, source_url: str) -> None:
        """Change where a document's citations link to ("" = nowhere), leaving its chunks, hash, file
        and ingest time as they are (nothing is embedded again). KeyError for an unknown document."""

    def delete_document(self, collection: str, doc_id: str) -> None: ...

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
        """Dense + BM25 search fused like Weaviate's `hybrid` query; best first.

        `vector` is the query's embedding when the caller already has it (saves a model call).
        """

    def collections(self) -> list[str]: ...

    def documents(self, collection: str) -> dict[str, str]:
        """{doc_id: content_hash} of every document in the collection (its version, for caches)."""

    def document_info(self, collection: str) -> list[DocumentInfo]:
        """Every document of the collection with its hash, chunk count, source and ingest time, by
        doc_id; empty for a collection that does not exist."""

    def chunks(self, collection: str) -> list[Chunk]:
        """Every chunk of a collection, in document order."""
