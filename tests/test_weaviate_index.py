"""The Weaviate backend through the REAL weaviate-client v4 against a fake Weaviate (REST + gRPC) on 127.0.0.1.

No Weaviate server runs here, so these tests check the client boundary: the schema we create, the
requests the client sends (hybrid alpha / fusion / filters / vector, batch objects, tenants) and how
replies map back to Chunks. Ranking parity with a real server: tests/test_weaviate_live.py.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner
from weaviate.proto.v1 import base_pb2, base_search_pb2

from bot.settings import Settings
from bot.wiring import Components
from core.errors import CollectionNotFound, MigrationError, WeaviateImportError, WeaviateUnavailable, WeaviateWriteError
from core.index import ChunkIndex
from core.types import Chunk
from hypa_testkit.fakes.weaviate_server import FakeWeaviate
from hypa_testkit.toy import TOY_CHUNKS, make_chunk
from storage.embedded import EmbeddedIndex, embedded_view
from storage.embedder import HashingEmbedder
from storage.weaviate_index import (
    WeaviateEndpoint,
    WeaviateIndex,
    build_hybrid_kwargs,
    chunk_to_properties,
    connect_weaviate,
    copy_collection,
    properties_to_chunk,
)

EMBEDDER = HashingEmbedder(32)


@pytest.fixture
def fake():
    with FakeWeaviate() as server:
        yield server


def make_index(fake: FakeWeaviate, **kwargs) -> WeaviateIndex:
    return WeaviateIndex(lambda: connect_weaviate(fake.url, fake.grpc_port), embedder=EMBEDDER, **kwargs)


@pytest.fixture
def index(fake):
    idx = make_index(fake)
    yield idx
    idx.close()


def _vector(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4")


# -- connection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:8080", ("localhost", 8080, False)),
        ("https://cluster.weaviate.cloud", ("cluster.weaviate.cloud", 443, True)),
        ("weaviate:8080", ("weaviate", 8080, False)),
    ],
)
def test_endpoint_parsed_from_url_and_grpc_port(url, expected):
    endpoint = WeaviateEndpoint.parse(url, 50052)
    assert (endpoint.http_host, endpoint.http_port, endpoint.http_secure) == expected
    assert (endpoint.grpc_host, endpoint.grpc_port, endpoint.grpc_secure) == (expected[0], 50052, expected[2])


def test_unset_or_bad_url_is_a_clear_error():
    with pytest.raises(WeaviateUnavailable, match="WEAVIATE_URL is not set"):
        WeaviateEndpoint.parse("", 50051)
    with pytest.raises(WeaviateUnavailable, match="http\\(s\\)://host"):
        WeaviateEndpoint.parse("ftp://x", 50051)


def test_unreachable_server_names_the_address_not_the_key():
    with pytest.raises(WeaviateUnavailable) as caught:
        connect_weaviate("http://127.0.0.1:9", 10, "secret-api-key", init_timeout_s=1)
    assert "127.0.0.1:9" in str(caught.value) and "secret-api-key" not in str(caught.value)
    with pytest.raises(WeaviateUnavailable, match="Invalid Weaviate address"):
        connect_weaviate("http://127.0.0.1:9", 9)


def test_api_key_sent_as_bearer_header(fake):
    client = connect_weaviate(fake.url, fake.grpc_port, "wv-key-123")
    try:
        client.collections.exists("HypaChunk")
    finally:
        client.close()
    assert any(h.get("authorization") == "Bearer wv-key-123" for _, _, h in fake.rest_requests)


# -- schema and import ------------------------------------------------------------------------------


def test_schema_self_provided_vectors_bm25_params_and_one_searchable_field(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    schema = fake.state.schemas["HypaChunk"]
    assert schema["invertedIndexConfig"]["bm25"] == {"k1": 1.2, "b": 0.75}
    assert schema["invertedIndexConfig"]["stopwords"]["preset"] == "en"
    assert schema["vectorConfig"]["default"]["vectorizer"] == {"none": {}}
    assert schema["vectorConfig"]["default"]["vectorIndexConfig"]["distance"] == "cosine"
    props = {p["name"]: p for p in schema["properties"]}
    assert [n for n, p in props.items() if p.get("indexSearchable")] == ["search_text"]
    for name in ("collection", "doc_id", "content_hash"):
        assert props[name]["tokenization"] == "field" and props[name]["indexFilterable"]
    assert "HypaChunkDocument" in fake.state.schemas


def test_import_sends_the_embedded_vectors_and_metadata(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    stored = {o.properties["chunk_id"]: o for o in fake.objects("HypaChunk")}
    assert set(stored) == {c.id for c in TOY_CHUNKS}
    for position, chunk in enumerate(TOY_CHUNKS):
        obj = stored[chunk.id]
        assert obj.properties["search_text"] == embedded_view(chunk)
        assert obj.properties["position"] == position and obj.properties["content_hash"] == "h1"
        np.testing.assert_allclose(obj.vector, EMBEDDER.embed_passages([embedded_view(chunk)])[0], rtol=1e-6)


def test_read_back_chunks_documents_collections(index):
    other = [make_chunk("Other § 1", "Other text.", collection="toy", doc_id="a-doc")]
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    index.replace_document("toy", "a-doc", "h2", other)
    index.replace_document("eu", "eu-doc", "h3", [make_chunk("EU 1", "x", collection="eu", doc_id="eu-doc")])
    assert index.collections() == ["eu", "toy"]
    assert index.documents("toy") == {"a-doc": "h2", "toy-doc": "h1"}
    assert index.document_hash("toy", "toy-doc") == "h1"
    assert index.document_hash("toy", "missing") is None and index.document_hash("nope", "x") is None
    assert index.chunks("toy") == other + TOY_CHUNKS  # document order: by doc_id, then position
    assert index.chunks("nope") == [] and index.documents("nope") == {}


@pytest.mark.parametrize("multi_tenancy", [False, True])
def test_more_objects_than_one_query_returns_are_read_with_the_cursor(fake, monkeypatch, multi_tenancy):
    """Weaviate returns at most QUERY_MAXIMUM_RESULTS objects per filtered query (PAGE_LIMIT, 10,000
    by default); a full page means there may be more, read through the cursor API and matched here."""
    import storage.weaviate_index as weaviate_index

    idx = make_index(fake, multi_tenancy=multi_tenancy)
    many = [make_chunk(f"Toy § {i}", f"Rule number {i}.", collection="toy", doc_id="big") for i in range(7)]
    idx.replace_document("toy", "big", "h1", many)
    for n in range(4):
        idx.replace_document("toy", f"doc-{n}", f"d{n}", [make_chunk(f"D{n}", "x", collection="toy", doc_id=f"doc-{n}")])
    idx.replace_document("other", "big", "h9", [make_chunk("O", "y", collection="other", doc_id="big")])
    expected_documents = idx.documents("toy")
    monkeypatch.setattr(weaviate_index, "PAGE_LIMIT", 3)
    fake.searches.clear()
    assert idx.documents("toy") == expected_documents and len(expected_documents) == 5
    assert [c.text for c in idx.chunks("toy") if c.doc_id == "big"] == [f"Rule number {i}." for i in range(7)]
    assert any(s.after for s in fake.searches)  # the cursor was used
    idx.close()


def test_replace_document_removes_stale_chunks_and_updates_the_hash(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    index.replace_document("toy", "toy-doc", "h2", TOY_CHUNKS[:2])
    assert index.chunks("toy") == TOY_CHUNKS[:2]
    assert index.document_hash("toy", "toy-doc") == "h2"
    assert {o.properties["content_hash"] for o in fake.objects("HypaChunk")} == {"h2"}
    index.replace_document("toy", "toy-doc", "h3", [])  # a document without chunks stays recorded
    assert index.chunks("toy") == [] and index.documents("toy") == {"toy-doc": "h3"}


def test_rejected_objects_are_listed_and_the_old_hash_kept(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    fake.reject = lambda props: "vector dimension mismatch" if props["chunk_id"] == TOY_CHUNKS[2].id else None
    with pytest.raises(WeaviateImportError) as caught:
        index.replace_document("toy", "toy-doc", "h2", TOY_CHUNKS)
    assert caught.value.failures == [(TOY_CHUNKS[2].id, "vector dimension mismatch")]
    assert TOY_CHUNKS[2].id in str(caught.value) and "1 chunk(s)" in str(caught.value)
    assert index.document_hash("toy", "toy-doc") == "h1"  # the next ingest retries


def test_large_documents_are_imported_in_batches(fake):
    idx = make_index(fake, batch_size=2)
    idx.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    assert [len(b.objects) for b in fake.batches[:2]] == [2, 1]
    assert idx.chunks("toy") == TOY_CHUNKS
    idx.close()


def test_chunk_belonging_elsewhere_is_refused(index):
    with pytest.raises(ValueError, match="belongs to toy/toy-doc"):
        index.replace_document("toy", "other-doc", "h", TOY_CHUNKS)


def test_delete_document(index):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    index.delete_document("toy", "toy-doc")
    index.delete_document("toy", "unknown")  # no-op
    assert index.chunks("toy") == [] and index.documents("toy") == {}


# -- hybrid query -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fusion", "wire"),
    [("rankedFusion", base_search_pb2.Hybrid.FUSION_TYPE_RANKED),
     ("relativeScoreFusion", base_search_pb2.Hybrid.FUSION_TYPE_RELATIVE_SCORE)],
)
def test_hybrid_request_carries_alpha_fusion_filter_vector_limit(index, fake, fusion, wire):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    vector = EMBEDDER.embed_queries(["civil penalty"])[0]
    results = index.hybrid_search("civil penalty", collection="toy", limit=2, fusion=fusion, alpha=0.25, vector=vector)
    request = fake.searches[-1]
    hybrid = request.hybrid_search
    assert hybrid.query == "civil penalty" and list(hybrid.properties) == ["search_text"]
    assert hybrid.alpha == pytest.approx(0.25) and hybrid.fusion_type == wire
    np.testing.assert_allclose(_vector(hybrid.vector_bytes), vector, rtol=1e-6)
    assert request.limit == 2 and request.collection == "HypaChunk"
    assert request.filters.operator == base_pb2.Filters.OPERATOR_EQUAL
    assert (request.filters.target.property, request.filters.value_text) == ("collection", "toy")
    assert request.metadata.score
    # Mapping: the fake ranks by cosine and reports it as the score; we get whole Chunks back in that order.
    cosine = EMBEDDER.embed_passages([embedded_view(c) for c in TOY_CHUNKS]) @ vector
    expected = sorted(zip(TOY_CHUNKS, cosine), key=lambda pair: -pair[1])[:2]
    assert [(r.chunk, r.kind) for r in results] == [(c, "chunk") for c, _ in expected]
    assert [r.score for r in results] == pytest.approx([float(s) for _, s in expected], rel=1e-5)


def test_hybrid_embeds_the_query_when_no_vector_is_given(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    index.hybrid_search("notice by mail", collection="toy", limit=1)
    np.testing.assert_allclose(_vector(fake.searches[-1].hybrid_search.vector_bytes),
                               EMBEDDER.embed_queries(["notice by mail"])[0], rtol=1e-6)


def test_hybrid_validates_like_the_embedded_index(index, tmp_path):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    with pytest.raises(ValueError, match="unknown fusion"):
        index.hybrid_search("x", collection="toy", limit=3, fusion="rrf", vector=[0.0] * 32)
    with pytest.raises(ValueError, match="alpha"):
        index.hybrid_search("x", collection="toy", limit=3, alpha=1.5, vector=[0.0] * 32)
    assert index.hybrid_search("x", collection="toy", limit=0, vector=[0.0] * 32) == []
    # An unknown collection is an error on both backends (an empty list would read as "not in the documents").
    embedded = EmbeddedIndex(tmp_path / "index", embedder=EMBEDDER)
    for backend in (embedded, index):
        with pytest.raises(CollectionNotFound, match="never-written"):
            backend.hybrid_search("x", collection="never-written", limit=3, vector=[0.0] * 32)
    with pytest.raises(CollectionNotFound, match="Known collections: toy"):
        index.hybrid_search("x", collection="never-written", limit=3, vector=[0.0] * 32)


def test_build_hybrid_kwargs_always_explicit():
    kwargs = build_hybrid_kwargs("q", np.ones(3), collection="c", limit=5, fusion="rankedFusion", alpha=0.5)
    assert kwargs["alpha"] == 0.5 and kwargs["fusion_type"].name == "RANKED"
    assert kwargs["query_properties"] == ["search_text"] and kwargs["limit"] == 5
    assert kwargs["return_metadata"].score is True


def test_properties_round_trip():
    chunk = TOY_CHUNKS[1]
    assert properties_to_chunk(chunk_to_properties(chunk, "h", 0)) == chunk
    with_role = replace(chunk, role="definition")  # roles are stored with the chunk (core/roles.py)
    assert properties_to_chunk(chunk_to_properties(with_role, "h", 0)).role == "definition"
    sparse = {"chunk_id": "c", "collection": "x", "doc_id": "d"}  # Weaviate omits unset properties
    assert properties_to_chunk(sparse) == Chunk("c", "x", "d", "", "", "", "", 0, 0, 0, 0)


# -- multi-tenancy ----------------------------------------------------------------------------------


def test_multi_tenancy_one_tenant_per_collection(fake):
    idx = make_index(fake, multi_tenancy=True)
    idx.replace_document("ws-T1", "doc", "h1", [make_chunk("A 1", "alpha text", collection="ws-T1", doc_id="doc")])
    idx.replace_document("ws-T2", "doc", "h2", [make_chunk("B 1", "beta text", collection="ws-T2", doc_id="doc")])
    assert fake.state.schemas["HypaChunk"]["multiTenancyConfig"]["autoTenantCreation"] is True
    assert {o.tenant for b in fake.batches for o in b.objects} == {"ws-T1", "ws-T2"}
    assert idx.collections() == ["ws-T1", "ws-T2"]
    results = idx.hybrid_search("alpha", collection="ws-T1", limit=5)
    assert fake.searches[-1].tenant == "ws-T1" and [r.chunk.label for r in results] == ["A 1"]
    assert idx.documents("ws-T2") == {"doc": "h2"}
    with pytest.raises(ValueError, match="cannot be a Weaviate tenant"):
        idx.replace_document("bad.name", "doc", "h", [])
    idx.close()


# -- backend switch and migration -------------------------------------------------------------------


def test_hypa_index_weaviate_switches_the_backend(fake, tmp_path):
    settings = Settings(data_dir=tmp_path, index_backend="weaviate", weaviate_url=fake.url,
                        weaviate_grpc_port=fake.grpc_port)
    components = Components(settings)
    assert isinstance(components.index, WeaviateIndex) and isinstance(components.index, ChunkIndex)
    assert components.index.collections() == []
    components.index.close()
    assert isinstance(Components(Settings(data_dir=tmp_path)).index, EmbeddedIndex)


def _embedded_source(root) -> EmbeddedIndex:
    # The CLI queries with the packaged MiniLM: the copied vectors must have its 384 dimensions.
    source = EmbeddedIndex(root, embedder=HashingEmbedder(384))
    source.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    source.replace_document("eu", "eu-doc", "h9", [make_chunk("EU 1", "eu text", collection="eu", doc_id="eu-doc")])
    return source


def test_migrate_copies_chunks_and_stored_vectors(fake, tmp_path, monkeypatch):
    from bot.cli import app

    source = _embedded_source(tmp_path / "index")
    env = {"HYPA_DATA_DIR": str(tmp_path), "WEAVIATE_URL": fake.url, "WEAVIATE_GRPC_PORT": str(fake.grpc_port),
           "HYPA_WEAVIATE_MULTI_TENANCY": "false"}  # one shared class; tenants: test_multi_tenancy_*
    result = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate", "--collection", "toy"], env=env)
    assert result.exit_code == 0, result.output
    assert "3 chunks copied" in result.output
    stored = {o.properties["chunk_id"]: o.vector for o in fake.objects("HypaChunk")}
    for chunk, vector in zip(source.chunks("toy"), source.vectors("toy")):
        np.testing.assert_allclose(stored[chunk.id], vector, rtol=1e-6)
    target = make_index(fake)
    assert target.chunks("toy") == source.chunks("toy") and target.collections() == ["toy"]
    again = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate"], env=env)  # all, resumable
    assert again.exit_code == 0, again.output
    assert "1 already up to date" in again.output and target.collections() == ["eu", "toy"]
    target.close()


def test_migrate_errors_are_clear(tmp_path):
    from bot.cli import app

    _embedded_source(tmp_path / "index")
    base = {"HYPA_DATA_DIR": str(tmp_path)}
    unset = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate"], env={**base, "WEAVIATE_URL": ""})
    assert unset.exit_code == 1 and "WEAVIATE_URL is not set" in unset.output
    down = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate"],
                              env={**base, "WEAVIATE_URL": "http://127.0.0.1:9", "WEAVIATE_GRPC_PORT": "10"})
    assert down.exit_code == 1 and "Cannot reach Weaviate at http://127.0.0.1:9" in down.output
    assert "Traceback" not in down.output
    wrong = CliRunner().invoke(app, ["index", "migrate", "--to", "qdrant"], env=base)
    assert wrong.exit_code == 1 and "--to must be weaviate" in wrong.output
    missing = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate", "-c", "nope"], env=base)
    assert missing.exit_code == 1 and "not in the embedded index" in missing.output


def test_schema_existence_is_checked_once_not_per_query(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    before = len(fake.rest_requests)
    for _ in range(3):
        index.hybrid_search("notice", collection="toy", limit=2, vector=[0.0] * 32)
        index.documents("toy")
    assert len(fake.rest_requests) == before  # queries and reads go over gRPC only


def test_cli_reports_an_unreachable_weaviate_without_a_traceback(tmp_path):
    from bot.cli import app

    env = {"HYPA_DATA_DIR": str(tmp_path), "HYPA_INDEX": "weaviate", "WEAVIATE_URL": "http://127.0.0.1:9",
           "WEAVIATE_GRPC_PORT": "10"}
    for args in (["index", "list"], ["ask", "Who must be notified?", "--collection", "ll144"]):
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 1, result.output
        assert "Cannot reach Weaviate at http://127.0.0.1:9" in result.output and "Traceback" not in result.output


def test_chunks_are_the_committed_version_after_a_failed_import(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS[:2])
    fake.reject = lambda props: "disk full" if props["chunk_id"] == TOY_CHUNKS[1].id else None
    with pytest.raises(WeaviateImportError):
        index.replace_document("toy", "toy-doc", "h2", TOY_CHUNKS)  # chunk 0 and 2 written with h2
    assert index.document_hash("toy", "toy-doc") == "h1"
    assert index.chunks("toy") == [TOY_CHUNKS[1]]  # chunk 0 now carries h2: not part of version h1
    fake.reject = None
    index.replace_document("toy", "toy-doc", "h2", TOY_CHUNKS)  # the retry repairs the document
    assert index.chunks("toy") == TOY_CHUNKS


# -- review fixes: write failures, deletes, client lifecycle, CLI errors -------------------------------


def test_stale_chunks_weaviate_cannot_delete_fail_the_import_and_keep_the_old_hash(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    fake.delete_fails = True
    with pytest.raises(WeaviateWriteError, match="could not delete 1 chunk"):
        index.replace_document("toy", "toy-doc", "h2", TOY_CHUNKS[:2])  # chunk 2 (h1) must go, and cannot
    assert index.document_hash("toy", "toy-doc") == "h1"  # not committed: the next ingest retries
    with pytest.raises(WeaviateWriteError, match="stays recorded"):
        index.delete_document("toy", "toy-doc")
    assert index.document_hash("toy", "toy-doc") == "h1"


def test_deletes_repeat_until_nothing_matches(index, fake):
    chunks = [make_chunk(f"T § {i}", f"text {i}", collection="toy", doc_id="big") for i in range(5)]
    index.replace_document("toy", "big", "h1", chunks)
    fake.delete_limit = 2  # like Weaviate's QUERY_MAXIMUM_RESULTS cap on one batch delete
    index.replace_document("toy", "big", "h2", chunks[:1])
    assert {o.properties["content_hash"] for o in fake.objects("HypaChunk")} == {"h2"}
    assert len(fake.objects("HypaChunk")) == 1
    index.delete_document("toy", "big")
    assert fake.objects("HypaChunk") == [] and index.documents("toy") == {}


def test_import_stops_at_a_transport_error_and_lists_every_chunk_not_written(fake):
    idx = make_index(fake, batch_size=1)
    idx.ensure_schema()
    fake.batch_abort = "connection reset"
    with pytest.raises(WeaviateImportError) as caught:
        idx.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    assert len(fake.batches) == 1  # not one failing call (with its timeout) per remaining batch
    assert [cid for cid, _ in caught.value.failures] == [c.id for c in TOY_CHUNKS]
    assert "connection reset" in caught.value.failures[0][1] and "not sent" in caught.value.failures[1][1]
    assert idx.document_hash("toy", "toy-doc") is None
    idx.close()


def test_client_closed_by_close_and_when_the_index_is_dropped(fake):
    import gc

    idx = make_index(fake)
    idx.collections()
    client = idx.client
    idx.close()
    assert not client.is_connected()
    idx.close()  # twice is fine
    dropped = make_index(fake)
    dropped.collections()
    client = dropped.client
    del dropped
    gc.collect()
    assert not client.is_connected()  # finalizer (also runs at interpreter exit): no open gRPC channel


def test_migrate_refuses_vectors_the_query_embedder_cannot_match(fake, tmp_path):
    source = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(48))
    source.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    target = make_index(fake)  # queries with 32-dimension vectors
    with pytest.raises(MigrationError, match="48-dimension vectors"):
        copy_collection(source, target, "toy")
    assert fake.objects("HypaChunk") == []
    target.close()


def test_migrate_and_index_list_report_weaviate_errors_without_a_traceback(fake, tmp_path):
    from bot.cli import app

    _embedded_source(tmp_path / "index")
    fake.schema_status = 500
    env = {"HYPA_DATA_DIR": str(tmp_path), "WEAVIATE_URL": fake.url, "WEAVIATE_GRPC_PORT": str(fake.grpc_port)}
    migrate = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate"], env=env)
    assert migrate.exit_code == 1 and isinstance(migrate.exception, SystemExit), migrate.output
    assert "migration stopped" in migrate.output and "Traceback" not in migrate.output
    listing = CliRunner().invoke(app, ["index", "list"], env={**env, "HYPA_INDEX": "weaviate"})
    assert listing.exit_code == 1 and isinstance(listing.exception, SystemExit), listing.output
    assert "Weaviate answered with an error" in listing.output


@pytest.mark.parametrize("url", ["http://weaviate:80a", "http://weaviate:99999", "ftp://admin:hunter2@weaviate"])
def test_malformed_url_is_a_clear_error_without_its_password(url):
    with pytest.raises(WeaviateUnavailable, match="must look like") as caught:
        WeaviateEndpoint.parse(url, 50051)
    assert "hunter2" not in str(caught.value)


def test_migrate_refuses_a_collection_name_weaviate_cannot_use_as_tenant_before_copying(fake, tmp_path):
    from bot.cli import app

    source = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(384))
    source.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    dotted = [make_chunk("EU 1", "eu text", collection="eu.ai.act", doc_id="eu-doc")]
    source.replace_document("eu.ai.act", "eu-doc", "h9", dotted)
    env = {"HYPA_DATA_DIR": str(tmp_path), "WEAVIATE_URL": fake.url, "WEAVIATE_GRPC_PORT": str(fake.grpc_port),
           "HYPA_WEAVIATE_MULTI_TENANCY": "true"}
    result = CliRunner().invoke(app, ["index", "migrate", "--to", "weaviate"], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "cannot be a Weaviate tenant" in result.output and fake.batches == []


def test_a_rejected_document_record_is_an_import_error_and_keeps_the_old_hash(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    fake.reject = lambda props: "record refused" if "chunk_count" in props else None
    with pytest.raises(WeaviateImportError, match="record refused") as caught:
        index.replace_document("toy", "toy-doc", "h2", TOY_CHUNKS)
    assert caught.value.failures[0][0] == "document:toy-doc"
    assert index.document_hash("toy", "toy-doc") == "h1"


def test_ingest_reports_an_unreachable_weaviate_as_a_failed_file_not_a_traceback(tmp_path):
    """`hypa ingest` with HYPA_INDEX=weaviate and the server down: a failed outcome naming the backend."""
    from core.errors import IndexUnavailable
    from core.ingestion import ingest_file

    class DownIndex:
        def document_info(self, collection):
            raise WeaviateUnavailable("Cannot reach Weaviate at http://127.0.0.1:9")

    doc = tmp_path / "toy.md"
    doc.write_text("# Toy\n\n§ 1 Test. The seller shall notify the buyer.\n", encoding="utf-8")
    outcome = ingest_file(doc, collection="toy", index=DownIndex(), chunk_tokens=256, chunk_overlap=32,
                          count_tokens=lambda t: len(t.split()))
    assert issubclass(WeaviateUnavailable, IndexUnavailable)
    assert outcome.status == "failed" and outcome.error.startswith("index backend: Cannot reach Weaviate")


# -- documents: source and time (hypa index documents) ----------------------------------------------


def test_document_records_carry_source_and_time(index):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS, source="/docs/toy.md")
    [info] = index.document_info("toy")
    assert (info.doc_id, info.content_hash, info.chunks, info.source) == ("toy-doc", "h1", len(TOY_CHUNKS), "/docs/toy.md")
    assert info.ingested_at.endswith("Z")
    assert index.document_info("nope") == []


def test_a_document_class_from_an_older_hypa_gets_source_and_time_added(fake):
    """The document class an older hypa created has no `source`/`ingested_at`: writing adds them, and
    the records written before list with empty ones."""
    from weaviate.classes.data import DataObject

    old = make_index(fake)
    client = old.client
    schema = document_schema_without_source(old.document_class)
    client.collections.create(**schema)
    client.collections.use(old.document_class).data.insert_many([DataObject(
        properties={"collection": "toy", "doc_id": "legacy", "content_hash": "h0", "chunk_count": 0},
    )])
    old.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS, source="/docs/toy.md")
    names = {p["name"] for p in fake.state.schemas[old.document_class]["properties"]}
    assert {"source", "ingested_at"} <= names
    info = {d.doc_id: d for d in old.document_info("toy")}
    assert (info["legacy"].source, info["legacy"].ingested_at) == ("", "")
    assert info["toy-doc"].source == "/docs/toy.md"
    old.close()


def document_schema_without_source(name: str) -> dict:
    from storage.weaviate_index import document_schema

    schema = document_schema(name, multi_tenancy=False)
    schema["properties"] = [p for p in schema["properties"] if p.name not in ("source", "ingested_at")]
    return {k: v for k, v in schema.items() if v is not None}


def test_migrate_keeps_each_documents_source_and_time(fake, tmp_path):
    source = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(32))
    source.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS, source="/docs/toy.md")
    target = make_index(fake)
    copy_collection(source, target, "toy")
    [copied] = target.document_info("toy")
    [original] = source.document_info("toy")
    assert copied == original
    target.close()


def test_an_import_interrupted_between_batches_takes_its_chunks_out_again(fake):
    """Ctrl-C during `hypa ingest` into Weaviate: neither a new document's nor a new version's partial
    chunks stay searchable."""
    index = make_index(fake, batch_size=2)
    chunks = [make_chunk(f"T {i}", f"text number {i}") for i in range(6)]
    vectors = EMBEDDER.embed_passages([embedded_view(c) for c in chunks])

    def interrupt_after_first_batch(_: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        index.import_document("toy", "toy-doc", "h-new", chunks, vectors, on_batch=interrupt_after_first_batch)
    assert [o for o in fake.objects("HypaChunk") if o.properties["doc_id"] == "toy-doc"] == []
    assert index.document_info("toy") == []
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    with pytest.raises(KeyboardInterrupt):
        index.import_document("toy", "toy-doc", "h2", chunks, vectors, on_batch=interrupt_after_first_batch)
    assert {o.properties["content_hash"] for o in fake.objects("HypaChunk")} == {"h1"}
    assert index.chunks("toy") == TOY_CHUNKS
    index.close()


# -- the learned provision ranking on Weaviate ---------------------------------------------------------


def test_the_provision_ranking_reads_bm25_ranks_from_weaviate_and_ranks_locally(index, fake):
    """The ranker's only backend signal is the BM25 rank (a hybrid query with alpha 0); the meaning
    signals come from stored vectors, the same for every backend (core/segments.py)."""
    from core.linear import LinearModel
    from core.query import QueryPlan
    from core.ranking import FEATURES, BM25Search, FeatureBuilder, ProvisionRanker
    from core.segments import SegmentIndex

    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    bm25 = BM25Search(index)
    ids = bm25.ranked_ids("civil penalty", "toy", limit=3)
    request = fake.searches[-1].hybrid_search
    assert request.alpha == pytest.approx(0.0) and request.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RANKED
    assert set(ids) <= {c.id for c in TOY_CHUNKS} and len(ids) == 3

    class Vectors:
        def get(self, texts):
            return EMBEDDER.embed_passages(list(texts))

    features = FeatureBuilder(SegmentIndex(index.chunks("toy"), Vectors()))
    only_bm25 = ProvisionRanker(LinearModel.of(FEATURES, {"bm25": 1.0}), bm25)
    plan = QueryPlan(text="civil penalty")
    ranked = only_bm25.rank(plan, "toy", features, EMBEDDER.embed_queries([plan.text])[0], None, limit=3)
    assert [sc.chunk.id for sc in ranked] == ids  # the order the backend returned


@pytest.mark.parametrize(
    "call",
    [
        lambda ix: ix.collections(),
        lambda ix: ix.documents("toy"),
        lambda ix: ix.document_info("toy"),
        lambda ix: ix.document_hash("toy", "toy-doc"),
        lambda ix: ix.chunks("toy"),
        lambda ix: ix.hybrid_search("audit", collection="toy", limit=3),
        lambda ix: ix.delete_document("toy", "toy-doc"),
    ],
    ids=["collections", "documents", "document_info", "document_hash", "chunks", "hybrid_search", "delete_document"],
)
def test_weaviate_errors_do_not_leak_through_the_index_interface(index, fake, call):
    """A server that is reached but fails the request: callers of the ChunkIndex see hypa's
    IndexUnavailable (WeaviateRequestError) with Weaviate's message, never the client's own error."""
    from weaviate.exceptions import WeaviateBaseError

    from core.errors import IndexUnavailable, WeaviateRequestError

    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    fake.schema_status = 500
    fake.request_abort = "fake Weaviate: request failed"
    with pytest.raises(IndexUnavailable) as caught:
        call(index)
    assert isinstance(caught.value, WeaviateRequestError) and not isinstance(caught.value, WeaviateBaseError)
    assert "Weaviate" in str(caught.value)


# -- documents: where their citations link to (hypa ingest --source-url) ------------------------------


def test_a_documents_source_url_is_recorded_and_changed_by_rewriting_only_its_record(index, fake):
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS, source="/docs/toy.md",
                           source_url="https://x.example/toy#s{section}")
    [info] = index.document_info("toy")
    assert info.source_url == "https://x.example/toy#s{section}"
    chunk_objects = {o.uuid: dict(o.properties) for o in fake.objects("HypaChunk")}
    index.set_source_url("toy", "toy-doc", "https://x.example/new.pdf")
    [changed] = index.document_info("toy")
    assert changed == replace(info, source_url="https://x.example/new.pdf")
    assert {o.uuid: dict(o.properties) for o in fake.objects("HypaChunk")} == chunk_objects
    with pytest.raises(KeyError, match="no document 'nope'"):
        index.set_source_url("toy", "nope", "https://x.example/")


def test_a_document_class_without_source_url_gets_it_added(fake):
    old = make_index(fake)
    schema = document_schema_without_source(old.document_class)
    schema["properties"] = [p for p in schema["properties"] if p.name != "source_url"]
    old.client.collections.create(**schema)
    old.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS, source_url="https://x.example/toy")
    assert "source_url" in {p["name"] for p in fake.state.schemas[old.document_class]["properties"]}
    assert old.document_info("toy")[0].source_url == "https://x.example/toy"
    old.close()


def test_migrate_keeps_each_documents_source_url(fake, tmp_path):
    source = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(32))
    source.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS, source_url="https://x.example/toy#p{page}")
    target = make_index(fake)
    copy_collection(source, target, "toy")
    assert target.document_info("toy")[0].source_url == "https://x.example/toy#p{page}"
    # a link changed after the migration is carried over by the next one, without copying the chunks
    source.set_source_url("toy", "toy-doc", "https://x.example/other")
    outcome = copy_collection(source, target, "toy")
    assert (outcome.documents_unchanged, outcome.chunks_copied) == (1, 0)
    assert target.document_info("toy")[0].source_url == "https://x.example/other"
    target.close()
