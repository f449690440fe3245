"""ChunkIndex on a Weaviate server (HYPA_INDEX=weaviate), for several replicas, workspaces or regulations.

Same ranking as the embedded index (storage/embedded.py) when a Weaviate shard holds one ChunkIndex
collection (multi-tenancy, or one collection per Weaviate class: BM25's IDF and average length are
computed over the whole shard, filters do not narrow them), because both follow Weaviate's hybrid query:
the same MiniLM vectors (computed here, stored as self-provided vectors: no Weaviate vectorizer), one
BM25 field holding the same text view (`embedded_view`: label, heading, body), BM25 k1=1.2 b=0.75 and
the `en` stopword preset set explicitly, and `alpha` and the fusion type passed on every query
(their defaults changed across Weaviate versions).

Schema (two Weaviate collections, names from settings.weaviate_collection):
  * `<C>` (default HypaChunk): one object per chunk, every ChunkIndex collection in it. Properties:
    `collection`, `doc_id`, `chunk_id`, `content_hash` (field tokenization: exact filters), the chunk's
    citation metadata (`doc_title`, `label`, `heading`, `text`, pages, character offsets, `position` in
    its document; stored but not keyword-searchable) and `search_text`, the only BM25 field.
    Object ids are uuid5(collection/chunk id), so re-importing a chunk overwrites it.
  * `<C>Document`: one object per (collection, document): its content hash, chunk count, the file it
    was ingested from and when, and where its citations link to (`source_url`). It is written *last*
    by replace_document, so it is the commit marker (see replace_document). A document class created
    before `source`/`ingested_at`/`source_url` existed gets them added by ensure_schema.

Multi-tenancy (settings.weaviate_multi_tenancy): both collections become multi-tenant and each ChunkIndex
collection is its own tenant (auto-created on first import). Give every workspace its own collection
(e.g. `ws-T0123`) and its data lives in its own shard, deletable as a whole.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from core.errors import (
    CollectionNotFound,
    HypaError,
    MigrationError,
    WeaviateImportError,
    WeaviateRequestError,
    WeaviateUnavailable,
    WeaviateWriteError,
)
from core.fusion import check_hybrid_args
from core.index import DocumentInfo, FusionMethod
from core.types import Chunk, ScoredChunk
from storage.embedded import BM25_PARAMS, embedded_view
from storage.embedder import TextEmbedder

log = logging.getLogger(__name__)

# Weaviate's hybrid query takes max(100, limit) hits from each sub-search before fusing
# (usecases/traverser/explorer.go, `hybrid.DefaultLimit`); an embedded index built with
# candidates=WEAVIATE_SUBSEARCH_LIMIT fuses exactly the same candidate lists.
WEAVIATE_SUBSEARCH_LIMIT = 100
VECTOR_NAME = "default"
SEARCH_FIELD = "search_text"
BATCH_SIZE = 200  # objects per gRPC BatchObjects call (~1.5 KB vector + ~2 KB text each)
PAGE_LIMIT = 10_000  # Weaviate's QUERY_MAXIMUM_RESULTS default: the most one query may return
_INT_PROPERTIES = ("page_start", "page_end", "char_start", "char_end", "position")
_EXACT_PROPERTIES = ("collection", "doc_id", "chunk_id", "content_hash")
_STORED_TEXT = ("doc_title", "label", "heading", "text", "role", "references")
CHUNK_PROPERTIES = (*_EXACT_PROPERTIES, *_STORED_TEXT, *_INT_PROPERTIES)
_TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Weaviate's tenant name rule
_FUSION_TYPES = {"rankedFusion": "RANKED", "relativeScoreFusion": "RELATIVE_SCORE"}
# Stored with each document record, never searched: its file, when it was ingested, where its
# citations link to (core/links.py pattern).
_DOCUMENT_STORED_TEXT = ("source", "ingested_at", "source_url")


# -- errors -------------------------------------------------------------------------------------
# Callers of the ChunkIndex see hypa's errors only (core/errors.py): the client's WeaviateBaseError
# (a failed gRPC call, an unexpected HTTP status) is wrapped where it leaves a public method.


def _is_client_error(exc: BaseException) -> bool:
    if isinstance(exc, HypaError):
        return False
    from weaviate.exceptions import WeaviateBaseError  # loaded already: the client raised it

    return isinstance(exc, WeaviateBaseError)


def _reads(method):
    """A read that Weaviate fails raises WeaviateRequestError (an IndexUnavailable): it cannot serve."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            if not _is_client_error(exc):
                raise
            raise WeaviateRequestError(f"Weaviate answered with an error: {exc}") from exc

    return wrapper


def _writes(method):
    """A write that Weaviate fails raises WeaviateWriteError (an IndexWriteError)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            if not _is_client_error(exc):
                raise
            raise WeaviateWriteError(f"Weaviate answered a write with an error: {exc}") from exc

    return wrapper


# -- connection ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeaviateEndpoint:
    """Where the server listens, parsed from WEAVIATE_URL and WEAVIATE_GRPC_PORT."""

    http_host: str
    http_port: int
    http_secure: bool
    grpc_host: str
    grpc_port: int
    grpc_secure: bool

    @classmethod
    def parse(cls, url: str, grpc_port: int) -> WeaviateEndpoint:
        if not url.strip():
            raise WeaviateUnavailable(
                "WEAVIATE_URL is not set; set it (e.g. http://localhost:8080) to use HYPA_INDEX=weaviate."
            )
        parts = urlsplit(url.strip() if "://" in url else f"http://{url.strip()}")
        try:
            explicit_port = parts.port  # ValueError for a non-numeric or out-of-range port
        except ValueError:
            explicit_port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or explicit_port == -1:
            shown = url.strip()
            if parts.password:  # never echo a password given as user:password@host
                shown = shown.replace(parts.password, "[REDACTED]")
            raise WeaviateUnavailable(f"WEAVIATE_URL must look like http(s)://host[:port], got {shown!r}")
        secure = parts.scheme == "https"
        port = explicit_port or (443 if secure else 80)
        return cls(parts.hostname, port, secure, parts.hostname, grpc_port, secure)

    def __str__(self) -> str:
        scheme = "https" if self.http_secure else "http"
        return f"{scheme}://{self.http_host}:{self.http_port} (gRPC port {self.grpc_port})"


@dataclass(frozen=True)
class WeaviateConfig:
    """The server (WEAVIATE_URL, WEAVIATE_GRPC_PORT, WEAVIATE_API_KEY) and the schema
    (HYPA_WEAVIATE_COLLECTION, HYPA_WEAVIATE_MULTI_TENANCY)."""

    url: str
    grpc_port: int = 50051
    api_key: str = ""
    class_name: str = "HypaChunk"
    multi_tenancy: bool = True


def connect_weaviate(url: str, grpc_port: int, api_key: str = "", *, init_timeout_s: float = 5.0):
    """A connected weaviate-client v4 `WeaviateClient`, or WeaviateUnavailable with the reason."""
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, Timeout
    from weaviate.exceptions import WeaviateBaseError

    endpoint = WeaviateEndpoint.parse(url, grpc_port)
    try:
        return weaviate.connect_to_custom(
            http_host=endpoint.http_host, http_port=endpoint.http_port, http_secure=endpoint.http_secure,
            grpc_host=endpoint.grpc_host, grpc_port=endpoint.grpc_port, grpc_secure=endpoint.grpc_secure,
            auth_credentials=Auth.api_key(api_key) if api_key else None,
            additional_config=AdditionalConfig(timeout=Timeout(init=init_timeout_s, query=30, insert=120)),
        )
    except ValueError as exc:  # the client's pydantic check, e.g. HTTP and gRPC on one host:port
        raise WeaviateUnavailable(f"Invalid Weaviate address {endpoint}: {exc}") from exc
    except WeaviateBaseError as exc:
        # The message never contains the API key (it travels in a header, not the URL).
        raise WeaviateUnavailable(f"Cannot reach Weaviate at {endpoint}: {exc}") from exc


# -- pure mapping functions (the client boundary, tested without a server) -----------------------


def chunk_uuid(collection: str, chunk_id: str) -> str:
    from weaviate.util import generate_uuid5

    return generate_uuid5(f"{collection}/{chunk_id}")


def chunk_to_properties(chunk: Chunk, content_hash: str, position: int) -> dict[str, Any]:
    return {
        "collection": chunk.collection,
        "doc_id": chunk.doc_id,
        "chunk_id": chunk.id,
        "content_hash": content_hash,
        "doc_title": chunk.doc_title,
        "label": chunk.label,
        "heading": chunk.heading,
        "text": chunk.text,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "role": chunk.role,
        "references": chunk.references,
        "position": position,
        SEARCH_FIELD: embedded_view(chunk),
    }


def properties_to_chunk(props: Mapping[str, Any]) -> Chunk:
    """The Chunk a stored object describes (Weaviate may omit empty text properties: default '')."""
    return Chunk(
        id=str(props["chunk_id"]),
        collection=str(props["collection"]),
        doc_id=str(props["doc_id"]),
        doc_title=str(props.get("doc_title") or ""),
        label=str(props.get("label") or ""),
        heading=str(props.get("heading") or ""),
        text=str(props.get("text") or ""),
        page_start=int(props.get("page_start") or 0),
        page_end=int(props.get("page_end") or 0),
        char_start=int(props.get("char_start") or 0),
        char_end=int(props.get("char_end") or 0),
        role=str(props.get("role") or ""),
        references=str(props.get("references") or ""),
    )


def objects_to_scored_chunks(objects: Iterable[Any]) -> list[ScoredChunk]:
    """Weaviate query results (best first) -> ScoredChunks with Weaviate's fused score."""
    scored = []
    for obj in objects:
        score = obj.metadata.score if obj.metadata is not None else None
        scored.append(ScoredChunk(properties_to_chunk(obj.properties), float(score or 0.0)))
    return scored


def collection_filter(collection: str, doc_id: str | None = None):
    from weaviate.classes.query import Filter

    where = Filter.by_property("collection").equal(collection)
    if doc_id is not None:
        where = where & Filter.by_property("doc_id").equal(doc_id)
    return where


def _fetch_matching(handle: Any, equal: dict[str, str], properties: list[str] | None) -> list[Any]:
    """Every object whose properties equal `equal`, however many there are.

    One filtered query returns at most QUERY_MAXIMUM_RESULTS objects (PAGE_LIMIT, Weaviate's
    default). When it comes back full there may be more, and Weaviate's cursor API (`iterator`),
    which pages through any number, takes no filter: so walk the class (or tenant) and match here.
    """
    from weaviate.classes.query import Filter

    filters = None
    for name, value in equal.items():
        condition = Filter.by_property(name).equal(value)
        filters = condition if filters is None else filters & condition
    result = handle.query.fetch_objects(filters=filters, limit=PAGE_LIMIT, return_properties=properties)
    if len(result.objects) < PAGE_LIMIT:
        return list(result.objects)
    log.info("more than %d objects match %s: reading them with the cursor API", PAGE_LIMIT, equal)
    return [
        o for o in handle.iterator(return_properties=properties)
        if all(str(o.properties.get(name)) == value for name, value in equal.items())
    ]


def build_hybrid_kwargs(
    query: str,
    vector: Sequence[float],
    *,
    collection: str,
    limit: int,
    fusion: str,
    alpha: float,
) -> dict[str, Any]:
    """Arguments of `collection.query.hybrid`: alpha and fusion always explicit, one BM25 field."""
    from weaviate.classes.query import HybridFusion, MetadataQuery

    check_hybrid_args(fusion, alpha)
    return {
        "query": query,
        "vector": [float(x) for x in vector],
        "alpha": float(alpha),
        "fusion_type": getattr(HybridFusion, _FUSION_TYPES[fusion]),
        "query_properties": [SEARCH_FIELD],
        "target_vector": VECTOR_NAME,
        "limit": int(limit),
        "filters": collection_filter(collection),
        "return_metadata": MetadataQuery(score=True),
        "return_properties": list(CHUNK_PROPERTIES),
    }


def chunk_schema(name: str, multi_tenancy: bool) -> dict[str, Any]:
    """Arguments of `client.collections.create` for the chunk collection."""
    from weaviate.classes.config import (
        Configure,
        DataType,
        Property,
        StopwordsPreset,
        Tokenization,
        VectorDistances,
    )

    def exact(prop: str) -> Property:
        return Property(name=prop, data_type=DataType.TEXT, tokenization=Tokenization.FIELD,
                        index_searchable=False, index_filterable=True)

    properties = [exact(p) for p in _EXACT_PROPERTIES]
    properties += [
        Property(name=p, data_type=DataType.TEXT, index_searchable=False, index_filterable=False)
        for p in _STORED_TEXT
    ]
    properties += [Property(name=p, data_type=DataType.INT, index_filterable=False) for p in _INT_PROPERTIES]
    properties.append(Property(
        name=SEARCH_FIELD, data_type=DataType.TEXT, tokenization=Tokenization.WORD,
        index_searchable=True, index_filterable=False,
    ))
    return {
        "name": name,
        "description": "hypa chunks: self-provided all-MiniLM-L6-v2 vectors + one BM25 field",
        "properties": properties,
        "vector_config": Configure.Vectors.self_provided(
            name=VECTOR_NAME,
            vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.COSINE),
        ),
        "inverted_index_config": Configure.inverted_index(
            bm25_k1=float(BM25_PARAMS["k1"]), bm25_b=float(BM25_PARAMS["b"]), stopwords_preset=StopwordsPreset.EN,
        ),
        "multi_tenancy_config": _multi_tenancy(multi_tenancy),
    }


def document_schema(name: str, multi_tenancy: bool) -> dict[str, Any]:
    from weaviate.classes.config import Configure, DataType, Property, Tokenization

    return {
        "name": name,
        "description": "hypa documents: content hash and chunk count, written after the chunks",
        "properties": [
            Property(name="collection", data_type=DataType.TEXT, tokenization=Tokenization.FIELD,
                     index_searchable=False),
            Property(name="doc_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD,
                     index_searchable=False),
            Property(name="content_hash", data_type=DataType.TEXT, index_searchable=False,
                     index_filterable=False),
            Property(name="chunk_count", data_type=DataType.INT, index_filterable=False),
            *(_stored_text(p) for p in _DOCUMENT_STORED_TEXT),
        ],
        "vector_config": Configure.Vectors.self_provided(),
        "multi_tenancy_config": _multi_tenancy(multi_tenancy),
    }


def _stored_text(name: str):
    from weaviate.classes.config import DataType, Property

    return Property(name=name, data_type=DataType.TEXT, index_searchable=False, index_filterable=False)


def _multi_tenancy(enabled: bool):
    from weaviate.classes.config import Configure

    if not enabled:
        return None
    return Configure.multi_tenancy(enabled=True, auto_tenant_creation=True, auto_tenant_activation=True)


def tenant_name(collection: str) -> str:
    if not _TENANT_NAME.match(collection):
        raise ValueError(
            f"Collection {collection!r} cannot be a Weaviate tenant (letters, digits, '_' and '-', "
            "at most 64): rename it or turn off HYPA_WEAVIATE_MULTI_TENANCY."
        )
    return collection


# -- the index ----------------------------------------------------------------------------------


class WeaviateIndex:
    """ChunkIndex on Weaviate; see the module docstring for the schema."""

    def __init__(
        self,
        client_factory: Callable[[], Any],
        *,
        embedder: TextEmbedder,
        class_name: str = "HypaChunk",
        multi_tenancy: bool = False,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        """`client_factory` returns a connected WeaviateClient; it is called on first use, once."""
        self._client_factory = client_factory
        self._client = None
        self._finalizer: weakref.finalize | None = None
        self._client_lock = threading.Lock()
        self.embedder = embedder
        self.class_name = class_name
        self.document_class = f"{class_name}Document"
        self.multi_tenancy = multi_tenancy
        self.batch_size = batch_size
        self._schema_ready = False
        self._known_collections: set[str] = set()  # written to (cached once seen; never un-known)

    @classmethod
    def from_config(cls, config: WeaviateConfig, *, embedder: TextEmbedder) -> WeaviateIndex:
        WeaviateEndpoint.parse(config.url, config.grpc_port)  # fail early if unset or malformed
        return cls(
            lambda: connect_weaviate(config.url, config.grpc_port, config.api_key),
            embedder=embedder,
            class_name=config.class_name,
            multi_tenancy=config.multi_tenancy,
        )

    # -- client and schema --------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    client = self._client_factory()
                    # Closed by close(), or when the index is garbage-collected or the interpreter exits
                    # (Components never closes its index): no gRPC channel or HTTP pool is left open.
                    self._finalizer = weakref.finalize(self, _close_quietly, client)
                    self._client = client
        return self._client

    def close(self) -> None:
        with self._client_lock:
            finalizer, self._finalizer, self._client = self._finalizer, None, None
        if finalizer is not None:
            finalizer()  # closes the client (once)

    @_writes
    def ensure_schema(self) -> None:
        """Create both Weaviate collections if missing (idempotent; writers call it)."""
        if self._schema_ready:
            return
        from weaviate.exceptions import WeaviateBaseError

        for schema in (chunk_schema(self.class_name, self.multi_tenancy),
                       document_schema(self.document_class, self.multi_tenancy)):
            if not self.client.collections.exists(schema["name"]):
                try:
                    self.client.collections.create(**{k: v for k, v in schema.items() if v is not None})
                except WeaviateBaseError:
                    if not self.client.collections.exists(schema["name"]):  # not another replica's create
                        raise
        self._add_missing_document_properties()
        self._schema_ready = True

    def _add_missing_document_properties(self) -> None:
        """A document class created by an older hypa lacks `source`, `ingested_at` or `source_url`: add
        them (a schema without them would make Weaviate guess their type, or refuse the record)."""
        handle = self.client.collections.use(self.document_class)
        present = {p.name for p in handle.config.get(simple=True).properties}
        for name in _DOCUMENT_STORED_TEXT:
            if name not in present:
                handle.config.add_property(_stored_text(name))

    def _handle(self, class_name: str, collection: str):
        handle = self.client.collections.use(class_name)
        return handle.with_tenant(tenant_name(collection)) if self.multi_tenancy else handle

    def _has_schema(self) -> bool:
        """Both Weaviate collections exist (checked once true: one REST call, not one per query).

        ensure_schema creates the document collection last, so its existence implies both."""
        if not self._schema_ready and self.client.collections.exists(self.document_class):
            self._schema_ready = True
        return self._schema_ready

    def _known(self, collection: str) -> bool:
        """The collection has been written (a document record; multi-tenant: its tenant)."""
        if collection in self._known_collections:
            return True
        if self._has_schema() and collection in self.collections():
            self._known_collections.add(collection)
            return True
        return False

    # -- read API ------------------------------------------------------------------------------

    @_reads
    def collections(self) -> list[str]:
        if not self._has_schema():
            return []
        documents = self.client.collections.use(self.document_class)
        if self.multi_tenancy:
            return sorted(documents.tenants.get())
        names = {str(o.properties["collection"]) for o in documents.iterator(return_properties=["collection"])}
        return sorted(names)

    def _document_records(self, collection: str) -> dict[str, DocumentInfo]:
        if not self._known(collection):
            return {}
        # All properties (None): a document class from an older hypa has no `source`/`ingested_at`,
        # and naming a property the schema lacks would fail the query.
        objects = _fetch_matching(self._handle(self.document_class, collection), {"collection": collection}, None)
        records = {}
        for o in objects:
            p = o.properties
            records[str(p["doc_id"])] = DocumentInfo(
                str(p["doc_id"]), str(p["content_hash"]), int(p.get("chunk_count") or 0),
                source=str(p.get("source") or ""), ingested_at=str(p.get("ingested_at") or ""),
                source_url=str(p.get("source_url") or ""),
            )
        return records

    @_reads
    def documents(self, collection: str) -> dict[str, str]:
        return {doc: r.content_hash for doc, r in sorted(self._document_records(collection).items())}

    @_reads
    def document_info(self, collection: str) -> list[DocumentInfo]:
        return [r for _, r in sorted(self._document_records(collection).items())]

    @_reads
    def document_hash(self, collection: str, doc_id: str) -> str | None:
        record = self._document_records(collection).get(doc_id)
        return record.content_hash if record else None

    @_reads
    def chunks(self, collection: str) -> list[Chunk]:
        """Every chunk in document order (by doc_id, then position), one query per document."""
        chunks: list[Chunk] = []
        records = sorted(self._document_records(collection).items())
        if not records:
            return chunks
        handle = self._handle(self.class_name, collection)  # (a Collection's bool() would count it)
        for doc_id, record in records:
            if record.chunks == 0:
                continue
            # The recorded version only: an interrupted re-import may have left chunks of another.
            committed = {"collection": collection, "doc_id": doc_id, "content_hash": record.content_hash}
            objects = _fetch_matching(handle, committed, list(CHUNK_PROPERTIES))
            ordered = sorted(objects, key=lambda o: int(o.properties.get("position") or 0))
            chunks.extend(properties_to_chunk(o.properties) for o in ordered)
        return chunks

    @_reads
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
        if not self._known(collection):
            # Like the embedded index: an unknown collection (a typo, or a Weaviate nobody migrated
            # into) is an error, not an empty result the pipeline would turn into "not in the documents".
            raise CollectionNotFound(collection, self.collections(), f"Weaviate {self.class_name}")
        if vector is None:
            vector = self.embedder.embed_queries([query])[0]
        kwargs = build_hybrid_kwargs(query, vector, collection=collection, limit=limit, fusion=fusion, alpha=alpha)
        if limit < 1:
            return []
        result = self._handle(self.class_name, collection).query.hybrid(**kwargs)
        return objects_to_scored_chunks(result.objects)

    # -- write API -----------------------------------------------------------------------------

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
        vectors = self.embedder.embed_passages([embedded_view(c) for c in chunks]) if chunks else None
        self.import_document(collection, doc_id, content_hash, chunks, vectors, source=source, source_url=source_url)

    def set_source_url(self, collection: str, doc_id: str, source_url: str) -> None:
        """Rewrite the document's record only (the chunks are not touched)."""
        record = self._document_records(collection).get(doc_id)
        if record is None:
            raise KeyError(f"no document {doc_id!r} in collection {collection!r}")
        self.ensure_schema()  # a class from before source_url existed gets the property first
        self._write_record(
            collection, doc_id, record.content_hash, record.chunks, record.source, record.ingested_at, source_url
        )

    @_writes
    def import_document(
        self,
        collection: str,
        doc_id: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: np.ndarray | None,
        on_batch: Callable[[int], None] | None = None,
        *,
        source: str = "",
        ingested_at: str = "",
        source_url: str = "",
    ) -> None:
        """Replace one document with chunks whose vectors are given (row i = chunk i).

        Order, and why: (1) upsert the new chunks (ids are deterministic, so unchanged chunks are
        overwritten in place), (2) delete the document's chunks with another content hash, (3) write
        the document record. Searches never see the document missing; between (1) and (2) they may see
        old and new chunks side by side (a few milliseconds), and between (2) and (3) chunks() lists
        none of the document's chunks (it lists the recorded version's). Weaviate has no multi-object
        transactions: if (1) or (2) fails, WeaviateImportError / WeaviateWriteError says what is left
        and the record keeps the old hash, so the next ingest repeats the import. Until then the
        document is mixed: searches may return chunks of either version, and chunks() lists only the
        recorded version's chunks that were not overwritten (tests/test_weaviate_index.py shows it).
        """
        for chunk in chunks:
            if chunk.collection != collection or chunk.doc_id != doc_id:
                raise ValueError(f"Chunk {chunk.id} belongs to {chunk.collection}/{chunk.doc_id}, not {collection}/{doc_id}")
        if chunks and (vectors is None or len(vectors) != len(chunks)):
            raise ValueError(f"{len(chunks)} chunks need as many vectors, got {0 if vectors is None else len(vectors)}")
        self.ensure_schema()
        chunk_handle = self._handle(self.class_name, collection)
        from weaviate.classes.query import Filter

        try:
            self._insert(collection, doc_id, chunk_handle, chunks, content_hash, vectors, on_batch)
        except KeyboardInterrupt:
            # Ctrl-C (`hypa ingest`) part-way through the batches: take this version's chunks out again,
            # so the index is as it was (unless this version is the recorded one: then they are it).
            if self.document_hash(collection, doc_id) != content_hash:
                partial = collection_filter(collection, doc_id) & Filter.by_property("content_hash").equal(content_hash)
                _delete_all(chunk_handle, partial, f"chunk(s) of the interrupted import of {collection}/{doc_id}",
                            "the next ingest of the document replaces them")
            raise

        stale = collection_filter(collection, doc_id) & Filter.by_property("content_hash").not_equal(content_hash)
        _delete_all(chunk_handle, stale, f"chunk(s) of the previous version of {collection}/{doc_id}",
                    "the document's recorded hash is unchanged, so the next ingest retries it")
        ingested_at = ingested_at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._write_record(collection, doc_id, content_hash, len(chunks), source, ingested_at, source_url)

    def _insert(self, collection, doc_id, handle, chunks, content_hash, vectors, on_batch) -> None:
        from weaviate.classes.data import DataObject
        from weaviate.exceptions import (
            WeaviateBaseError,
            WeaviateInsertManyAllFailedError,
        )

        failures: list[tuple[str, str]] = []
        for start in range(0, len(chunks), self.batch_size):
            part = chunks[start:start + self.batch_size]
            objects = [
                DataObject(
                    properties=chunk_to_properties(c, content_hash, start + i),
                    uuid=chunk_uuid(collection, c.id),
                    vector={VECTOR_NAME: [float(x) for x in vectors[start + i]]},
                )
                for i, c in enumerate(part)
            ]
            try:
                result = handle.data.insert_many(objects)
            except WeaviateInsertManyAllFailedError as exc:  # the server refused each object: go on
                failures.extend((c.id, str(exc)) for c in part)
                continue
            except WeaviateBaseError as exc:  # server gone, timeout, gRPC error: the next batch would wait too
                failures.extend((c.id, str(exc)) for c in part)
                failures.extend((c.id, "not sent: the import stopped at the error above") for c in chunks[start + len(part):])
                break
            failures.extend((part[i].id, err.message) for i, err in sorted(result.errors.items()))
            if on_batch is not None:
                on_batch(len(part))
        if failures:
            raise WeaviateImportError(collection, doc_id, failures)

    def _write_record(
        self, collection: str, doc_id: str, content_hash: str, count: int, source: str, ingested_at: str,
        source_url: str = "",
    ) -> None:
        from weaviate.classes.data import DataObject

        record = DataObject(
            properties={"collection": collection, "doc_id": doc_id, "content_hash": content_hash, "chunk_count": count,
                        "source": source, "ingested_at": ingested_at, "source_url": source_url},
            uuid=chunk_uuid(collection, f"document:{doc_id}"),
        )
        from weaviate.exceptions import WeaviateBaseError

        try:
            result = self._handle(self.document_class, collection).data.insert_many([record])
        except WeaviateBaseError as exc:  # one object: a rejection raises "every object failed"
            raise WeaviateImportError(collection, doc_id, [(f"document:{doc_id}", str(exc))]) from exc
        if result.errors:
            raise WeaviateImportError(collection, doc_id, [(f"document:{doc_id}", e.message) for e in result.errors.values()])

    @_writes
    def delete_document(self, collection: str, doc_id: str) -> None:
        """Remove a document's chunks, then its record; unknown doc_id is a no-op."""
        if self.document_hash(collection, doc_id) is None:
            return
        where = collection_filter(collection, doc_id)
        retry = "the document stays recorded, so deleting it again retries"
        _delete_all(self._handle(self.class_name, collection), where, f"chunk(s) of {collection}/{doc_id}", retry)
        _delete_all(self._handle(self.document_class, collection), where, f"record of {collection}/{doc_id}", retry)


def _close_quietly(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001, S110 - at exit or in GC there is no one to report to
        pass


def _delete_all(handle, where, what: str, consequence: str) -> None:
    """delete_many until nothing matches (one call deletes at most QUERY_MAXIMUM_RESULTS objects);
    WeaviateWriteError when Weaviate reports objects it could not delete (stale chunks stay searchable)."""
    while True:
        result = handle.data.delete_many(where=where)
        if result.failed:
            raise WeaviateWriteError(f"Weaviate could not delete {result.failed} {what}; {consequence}.")
        if result.matches == 0 or result.successful == 0:
            return


# -- migration from the embedded index ----------------------------------------------------------


@dataclass
class MigrationOutcome:
    collection: str
    documents_copied: int
    documents_unchanged: int
    chunks_copied: int


def copy_collection(
    source,
    target: WeaviateIndex,
    collection: str,
    *,
    on_chunks: Callable[[int], None] | None = None,
) -> MigrationOutcome:
    """Copy one embedded collection with its stored vectors (no re-embedding); resumable.

    A document whose hash Weaviate already records is skipped, so an interrupted migration
    continues where it stopped. Raises WeaviateImportError listing any rejected chunk, and
    MigrationError when the stored vectors do not fit the query embedder or the source keeps changing.
    """
    for _ in range(3):
        # Chunks, vectors and hashes must come from one version: an ingest running meanwhile would
        # otherwise pair chunks with another version's vectors. Each version has its own (read-only)
        # vectors array, so the same array before and after means nothing was swapped in between.
        vectors = source.vectors(collection)
        chunks = source.chunks(collection)
        documents = source.documents(collection)
        if source.vectors(collection) is vectors:
            break
    else:
        raise MigrationError(f"collection '{collection}' changed during every read (an ingest is running?); run again")
    if len(chunks) and vectors.shape[1] != target.embedder.dim:
        raise MigrationError(
            f"collection '{collection}' has {vectors.shape[1]}-dimension vectors but the query embedder "
            f"({target.embedder.model_id}) makes {target.embedder.dim}: re-ingest it with that model first"
        )
    rows: dict[str, list[int]] = {}
    for row, chunk in enumerate(chunks):
        rows.setdefault(chunk.doc_id, []).append(row)
    already = {d.doc_id: d for d in target.document_info(collection)}
    info = {d.doc_id: d for d in source.document_info(collection)}
    copied = unchanged = chunk_count = 0
    for doc_id, content_hash in documents.items():
        doc_rows = rows.get(doc_id, [])
        recorded = info.get(doc_id)
        there = already.get(doc_id)
        if there is not None and there.content_hash == content_hash:
            unchanged += 1
            if recorded is not None and recorded.source_url != there.source_url:  # relinked since
                target.set_source_url(collection, doc_id, recorded.source_url)
            if on_chunks is not None:
                on_chunks(len(doc_rows))
            continue
        target.import_document(
            collection, doc_id, content_hash, [chunks[r] for r in doc_rows],
            vectors[doc_rows] if doc_rows else None, on_batch=on_chunks,
            source=recorded.source if recorded else "", ingested_at=recorded.ingested_at if recorded else "",
            source_url=recorded.source_url if recorded else "",
        )
        copied += 1
        chunk_count += len(doc_rows)
    return MigrationOutcome(collection, copied, unchanged, chunk_count)
