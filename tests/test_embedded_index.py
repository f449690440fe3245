"""EmbeddedIndex: round trip, vector reuse, atomic replace, hybrid behaviour. Fake embedder unless marked."""
from __future__ import annotations

import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

from core.errors import CollectionNotFound, EmbedderMismatch
from core.index import ChunkIndex
from core.types import Chunk
from storage import embedded
from storage.embedded import DocumentUpdate, EmbeddedIndex, embedded_view, word_tokens
from storage.embedder import HashingEmbedder

COLL = "ll144"


class CountingEmbedder(HashingEmbedder):
    """Records every text it embeds, so tests can see what was (re-)embedded."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.passages: list[str] = []
        self.queries: list[str] = []

    def embed_passages(self, texts, show_progress=False):
        self.passages.extend(texts)
        return super().embed_passages(texts)

    def embed_queries(self, texts):
        self.queries.extend(texts)
        return super().embed_passages(texts)


class FailingEmbedder(HashingEmbedder):
    def embed_passages(self, texts, show_progress=False):
        raise RuntimeError("embedding service exploded")


def chunk(doc: str, n: int, text: str, *, label: str = "", heading: str = "", coll: str = COLL) -> Chunk:
    return Chunk(
        id=f"{doc}-{n}-{zlib.crc32(text.encode()):08x}",
        collection=coll,
        doc_id=doc,
        doc_title=doc.upper(),
        label=label or f"{doc} § {n}",
        heading=heading,
        text=text,
        page_start=1,
        page_end=1,
        char_start=n * 100,
        char_end=n * 100 + len(text),
    )


RULES = [
    chunk("rules", 1, "An employer must conduct a bias audit of the automated employment decision tool.", heading="Bias Audit."),
    chunk("rules", 2, "Candidates shall receive notice ten business days before the tool is used.", heading="Notice."),
    chunk("rules", 3, "Records of the selection rate and impact ratio must be retained.", heading="Records."),
]
LAW = [
    chunk("law", 1, "Penalties: a civil penalty of up to five hundred dollars for a first violation."),
    chunk("law", 2, "Definitions: independent auditor means a person not involved in developing the tool."),
]


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def index(tmp_path: Path, embedder: CountingEmbedder) -> EmbeddedIndex:
    idx = EmbeddedIndex(tmp_path / "index", embedder=embedder, candidates=10)
    idx.replace_document(COLL, "rules", "h-rules-1", RULES)
    idx.replace_document(COLL, "law", "h-law-1", LAW)
    return idx


def reopen(idx: EmbeddedIndex, embedder=None) -> EmbeddedIndex:
    return EmbeddedIndex(idx.root, embedder=embedder or HashingEmbedder(), candidates=idx.candidates)


def version_dirs(idx: EmbeddedIndex, coll: str = COLL) -> list[str]:
    return sorted(p.name for p in (idx.root / coll).iterdir() if p.is_dir())


# -- protocol, tokenization ----------------------------------------------------------------------


def test_implements_chunk_index_protocol(index):
    assert isinstance(index, ChunkIndex)


def test_word_tokenization_matches_weaviate_word():
    assert word_tokens("Bias-Audit_2023 of AEDTs, § 5-301(b)") == [
        "bias", "audit", "2023", "of", "aedts", "5", "301", "b"
    ]


def test_optional_stemmer(tmp_path):
    pytest.importorskip("Stemmer")
    idx = EmbeddedIndex(tmp_path, embedder=HashingEmbedder(), stemmer=True)
    idx.replace_document(COLL, "rules", "h", RULES)
    hits = idx.keyword_search("audits retaining", collection=COLL, limit=3)
    assert {h.chunk.id for h in hits} == {RULES[0].id, RULES[2].id}
    # The stemmer choice is stored with the collection, so a plain reader queries it the same way.
    assert len(reopen(idx).keyword_search("audits", collection=COLL, limit=3)) == 1
    plain = EmbeddedIndex(tmp_path / "plain", embedder=HashingEmbedder())
    plain.replace_document(COLL, "rules", "h", RULES)
    assert plain.keyword_search("audits retaining", collection=COLL, limit=3) == []


def test_embedded_view_is_label_heading_text():
    c = RULES[0]
    assert embedded_view(c) == f"{c.label}\n{c.heading}\n{c.text}"


# -- round trip ----------------------------------------------------------------------------------


def test_round_trip_from_disk(index):
    fresh = reopen(index)
    assert fresh.collections() == [COLL]
    assert fresh.chunks(COLL) == LAW + RULES  # document order: by doc_id, then given order
    assert fresh.document_hash(COLL, "rules") == "h-rules-1"
    assert fresh.document_hash(COLL, "nope") is None
    assert fresh.documents(COLL) == {"law": "h-law-1", "rules": "h-rules-1"}
    vectors = fresh.vectors(COLL)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 64)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors, index.vectors(COLL))
    hits = fresh.hybrid_search("bias audit", collection=COLL, limit=3)
    assert hits[0].chunk == RULES[0]


def test_hybrid_returns_at_most_limit_best_first(index):
    hits = index.hybrid_search("tool", collection=COLL, limit=2)
    assert len(hits) == 2
    assert hits[0].score >= hits[1].score
    assert all(h.kind == "chunk" for h in hits)
    assert index.hybrid_search("tool", collection=COLL, limit=0) == []


def test_heading_and_label_are_searchable(index):
    hits = index.hybrid_search("notice", collection=COLL, limit=1, alpha=0.0)
    assert hits[0].chunk == RULES[1]
    hits = index.hybrid_search("law § 2", collection=COLL, limit=1, alpha=0.0)
    assert hits[0].chunk == LAW[1]


# -- replace semantics and vector reuse ------------------------------------------------------------


def test_replace_with_changed_chunks_removes_old_ones(index):
    new_rules = [RULES[0], chunk("rules", 4, "Published summary of the audit results on the website.")]
    index.replace_document(COLL, "rules", "h-rules-2", new_rules)
    for idx in (index, reopen(index)):
        ids = [c.id for c in idx.chunks(COLL)]
        assert ids == [c.id for c in LAW + new_rules]
        assert idx.document_hash(COLL, "rules") == "h-rules-2"
        hits = idx.hybrid_search("notice business days", collection=COLL, limit=10)
        assert RULES[1].id not in {h.chunk.id for h in hits}


def test_only_new_chunks_are_embedded(index, embedder):
    embedder.passages.clear()
    added = chunk("rules", 4, "Published summary of the audit results.")
    index.replace_document(COLL, "rules", "h-rules-2", [*RULES, added])
    assert embedder.passages == [embedded_view(added)]


def test_vectors_reused_after_reopen(index):
    counting = CountingEmbedder()
    fresh = reopen(index, counting)
    added = chunk("law", 3, "Enforcement by the corporation counsel.")
    fresh.replace_document(COLL, "law", "h-law-2", [*LAW, added])
    assert counting.passages == [embedded_view(added)]


def test_same_id_with_changed_label_is_re_embedded(index, embedder):
    embedder.passages.clear()
    relabelled = Chunk(**{**RULES[0].to_dict(), "label": "6 RCNY § 5-301"})
    index.replace_document(COLL, "rules", "h-rules-2", [relabelled, *RULES[1:]])
    assert embedder.passages == [embedded_view(relabelled)]


def test_other_embedder_model_re_embeds_everything(index):
    other = CountingEmbedder(dim=32)
    fresh = reopen(index, other)
    fresh.replace_document(COLL, "law", "h-law-2", LAW)
    assert len(other.passages) == len(LAW) + len(RULES)
    assert fresh.vectors(COLL).shape == (5, 32)


def test_replace_documents_batch(tmp_path):
    idx = EmbeddedIndex(tmp_path, embedder=HashingEmbedder())
    idx.replace_documents(COLL, [DocumentUpdate("rules", "a", RULES), DocumentUpdate("law", "b", LAW)])
    assert len(idx.chunks(COLL)) == 5
    assert len(version_dirs(idx)) == 1


def test_delete_document(index):
    index.delete_document(COLL, "rules")
    index.delete_document(COLL, "rules")  # idempotent
    for idx in (index, reopen(index)):
        assert idx.chunks(COLL) == LAW
        assert idx.document_hash(COLL, "rules") is None
    index.delete_document(COLL, "law")
    assert index.collections() == [COLL]  # an emptied collection still exists
    assert index.chunks(COLL) == []
    assert index.hybrid_search("penalty", collection=COLL, limit=5) == []


def test_chunks_must_belong_to_the_document(index):
    with pytest.raises(ValueError, match="belongs to"):
        index.replace_document(COLL, "law", "x", RULES)
    with pytest.raises(ValueError, match="Duplicate chunk id"):
        index.replace_document(COLL, "law", "x", [LAW[0], LAW[0]])
    with pytest.raises(ValueError, match="twice"):
        index.replace_documents(COLL, [DocumentUpdate("law", "x", LAW), DocumentUpdate("law", "y", [])])


def test_old_versions_are_cleaned_up(index):
    index.replace_document(COLL, "law", "h-law-2", LAW[:1])
    assert len(version_dirs(index)) == 1


def test_drop_collection(index):
    index.drop_collection(COLL)
    assert index.collections() == []
    with pytest.raises(CollectionNotFound):
        index.chunks(COLL)


# -- atomicity -----------------------------------------------------------------------------------


def assert_old_state(idx: EmbeddedIndex) -> None:
    for view in (idx, reopen(idx)):
        assert [c.id for c in view.chunks(COLL)] == [c.id for c in LAW + RULES]
        assert view.document_hash(COLL, "rules") == "h-rules-1"
        assert view.hybrid_search("bias audit", collection=COLL, limit=1)[0].chunk == RULES[0]
    assert len(version_dirs(idx)) == 1  # no half-written version left behind


def test_exception_while_embedding_leaves_old_index(index, tmp_path):
    broken = EmbeddedIndex(index.root, embedder=FailingEmbedder(), candidates=10)
    with pytest.raises(RuntimeError, match="exploded"):
        broken.replace_document(COLL, "rules", "h-rules-2", [chunk("rules", 9, "brand new text")])
    assert_old_state(index)


def test_exception_while_writing_files_leaves_old_index(index, monkeypatch):
    real_write = embedded._write_version

    def write_then_fail(directory, snap):
        real_write(directory, snap)
        raise OSError("disk full")

    monkeypatch.setattr(embedded, "_write_version", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        index.replace_document(COLL, "rules", "h-rules-2", RULES[:1])
    monkeypatch.undo()
    assert_old_state(index)


def test_exception_at_commit_point_leaves_old_index(index, monkeypatch):
    def fail(directory, version):
        raise OSError("power cut before CURRENT was switched")

    monkeypatch.setattr(embedded, "_publish_current", fail)
    with pytest.raises(OSError, match="power cut"):
        index.replace_document(COLL, "rules", "h-rules-2", RULES[:1])
    monkeypatch.undo()
    assert_old_state(index)


def test_leftovers_of_a_crash_are_ignored_then_removed(index):
    (index.root / COLL / ".tmp-v1-deadbeef").mkdir()  # as if a writer died mid-build
    assert_old_state_count = len(reopen(index).chunks(COLL))
    assert assert_old_state_count == 5
    index.replace_document(COLL, "law", "h-law-2", LAW)
    assert not (index.root / COLL / ".tmp-v1-deadbeef").exists()


# -- errors --------------------------------------------------------------------------------------


def test_unknown_collection(index):
    with pytest.raises(CollectionNotFound) as err:
        index.hybrid_search("x", collection="nyc", limit=3)
    assert isinstance(err.value, LookupError)
    assert err.value.known == [COLL]
    assert "ll144" in str(err.value) and "'nyc'" in str(err.value)
    with pytest.raises(CollectionNotFound):
        index.chunks("../etc")
    with pytest.raises(CollectionNotFound):
        index.delete_document("nyc", "rules")
    assert index.document_hash("nyc", "rules") is None


def test_empty_index_has_no_collections(tmp_path):
    idx = EmbeddedIndex(tmp_path / "missing", embedder=HashingEmbedder())
    assert idx.collections() == []
    with pytest.raises(CollectionNotFound, match="none yet"):
        idx.chunks(COLL)


def test_invalid_arguments(index):
    with pytest.raises(ValueError, match="fusion"):
        index.hybrid_search("x", collection=COLL, limit=3, fusion="rrf")
    with pytest.raises(ValueError, match="alpha"):
        index.hybrid_search("x", collection=COLL, limit=3, alpha=-0.1)
    with pytest.raises(EmbedderMismatch):
        index.hybrid_search("x", collection=COLL, limit=3, vector=[0.1] * 7)
    with pytest.raises(ValueError, match="Invalid collection name"):
        index.replace_document("a/b", "law", "x", [])


def test_query_with_a_different_embedder_is_refused(index):
    with pytest.raises(EmbedderMismatch, match="re-ingest"):
        reopen(index, HashingEmbedder(dim=64 + 1)).hybrid_search("x", collection=COLL, limit=1)


# -- alpha, fusion, query vector -----------------------------------------------------------------


def vector_for(idx: EmbeddedIndex, target: Chunk) -> np.ndarray:
    return idx.vectors(COLL)[[c.id for c in idx.chunks(COLL)].index(target.id)]


def test_alpha_zero_is_bm25_ranking_and_alpha_one_is_vector_ranking(index):
    # The words point at the penalties chunk; the vector points at the records chunk.
    query, vector = "civil penalty violation", vector_for(index, RULES[2])
    for fusion in ("rankedFusion", "relativeScoreFusion"):
        bm25_only = index.hybrid_search(query, collection=COLL, limit=5, alpha=0.0, fusion=fusion, vector=vector)
        dense_only = index.hybrid_search(query, collection=COLL, limit=5, alpha=1.0, fusion=fusion, vector=vector)
        assert bm25_only[0].chunk == LAW[0]
        assert dense_only[0].chunk == RULES[2]
        assert [h.chunk.id for h in bm25_only] == [
            h.chunk.id for h in index.keyword_search(query, collection=COLL, limit=5)
        ]
        assert [h.chunk.id for h in dense_only] == [
            h.chunk.id for h in index.dense_search(query, collection=COLL, limit=5, vector=vector)
        ]
    assert len(dense_only) == 5  # every chunk has a cosine similarity
    assert len(bm25_only) == 1  # only chunks containing a query term


def test_ranked_fusion_scores_are_weaviate_rank_scores(index):
    query, vector = "civil penalty violation", vector_for(index, RULES[2])
    hits = index.hybrid_search(query, collection=COLL, limit=5, alpha=0.5, vector=vector)
    by_id = {h.chunk.id: h.score for h in hits}
    # LAW[0]: BM25 rank 0, and some vector rank r; RULES[2]: vector rank 0 only (no BM25 match).
    assert by_id[RULES[2].id] == pytest.approx(0.5 / 60, rel=1e-6)
    assert by_id[LAW[0].id] > 0.5 / 60


def test_stopword_only_query_has_no_keyword_hits(index):
    assert index.hybrid_search("the of and", collection=COLL, limit=5, alpha=0.0) == []
    assert index.keyword_search("the", collection=COLL, limit=5) == []


def test_given_vector_skips_query_embedding(index, embedder):
    embedder.queries.clear()
    index.hybrid_search("bias", collection=COLL, limit=3, vector=index.embed_query("bias"))
    assert embedder.queries == ["bias"]  # only the explicit embed_query call
    index.hybrid_search("bias", collection=COLL, limit=3, alpha=0.0)
    assert embedder.queries == ["bias"]  # alpha=0 never needs a vector


def test_index_sees_writes_of_another_instance(index):
    reader = reopen(index)
    assert len(reader.chunks(COLL)) == 5
    index.replace_document(COLL, "law", "h-law-2", LAW[:1])
    assert len(reader.chunks(COLL)) == 4


def test_concurrent_readers_during_writes(index):
    errors: list[BaseException] = []
    stop = threading.Event()

    def ask() -> None:
        try:
            while not stop.is_set():
                hits = index.hybrid_search("bias audit tool", collection=COLL, limit=3)
                assert hits and hits[0].chunk.doc_id == "rules"
        except BaseException as exc:  # noqa: BLE001 - re-raised via the assert below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for n in range(5):
        index.replace_document(COLL, "law", f"h-law-{n}", LAW[: 1 + n % 2])
    stop.set()
    for t in threads:
        t.join()
    assert not errors


# -- real model ----------------------------------------------------------------------------------


@pytest.mark.model
def test_real_model_ranks_the_semantically_related_chunk_first(tmp_path):
    from storage.embedder import Embedder

    idx = EmbeddedIndex(tmp_path, embedder=Embedder())
    idx.replace_document(COLL, "rules", "h", RULES)
    idx.replace_document(COLL, "law", "h", LAW)
    # No word of the query occurs in the target chunk's text; only meaning links them.
    hits = idx.hybrid_search(
        "independent evaluation of hiring software for discrimination",
        collection=COLL, limit=3, alpha=1.0,
    )
    assert hits[0].chunk == RULES[0]
    hits = idx.hybrid_search("how much is the fine", collection=COLL, limit=3, alpha=1.0)
    assert hits[0].chunk == LAW[0]


def test_top_k_is_best_first_with_ties_by_row():
    scores = np.array([1.0, 3.0, 3.0, 2.0, 0.0], dtype=np.float32)
    assert embedded._top_k_desc(scores, 3).tolist() == [1, 2, 3]
    assert embedded._top_k_desc(scores, 10).tolist() == [1, 2, 3, 0, 4]
    assert embedded._top_k_desc(scores, 2, np.array([0, 2, 3])).tolist() == [2, 3]


def test_roles_are_stored_and_old_rows_without_one_still_load(tmp_path):
    from dataclasses import replace

    from storage.embedder import HashingEmbedder

    index = EmbeddedIndex(tmp_path, embedder=HashingEmbedder())
    chunk = replace(LAW[0], role="definition")
    index.replace_document(COLL, "law", "h", [chunk])
    assert reopen(index).chunks(COLL)[0].role == "definition"
    # a chunk row written before roles existed has no "role" key
    row = {k: v for k, v in chunk.to_dict().items() if k != "role"}
    assert Chunk.from_dict(row).role == ""


# -- documents: source, time, chunk count (hypa index documents) --------------------------------------


def test_document_info_records_source_time_and_chunks_and_survives_other_writes(tmp_path, embedder):
    idx = EmbeddedIndex(tmp_path / "index", embedder=embedder)
    idx.replace_document(COLL, "rules", "h-rules-1", RULES, source="/docs/rules.md")
    idx.replace_document(COLL, "law", "h-law-1", LAW, source="/docs/law.md")
    info = {d.doc_id: d for d in reopen(idx).document_info(COLL)}
    assert (info["rules"].content_hash, info["rules"].chunks, info["rules"].source) == ("h-rules-1", 3, "/docs/rules.md")
    assert (info["law"].chunks, info["law"].source) == (2, "/docs/law.md")
    assert info["rules"].ingested_at.endswith("Z") and info["rules"].ingested_at[:2] == "20"
    idx.delete_document(COLL, "law")
    assert [d.doc_id for d in reopen(idx).document_info(COLL)] == ["rules"]
    assert reopen(idx).document_info("no-such-collection") == []


def test_an_index_written_before_sources_were_recorded_lists_its_documents_without_them(tmp_path, embedder):
    import json

    idx = EmbeddedIndex(tmp_path / "index", embedder=embedder)
    idx.replace_document(COLL, "rules", "h-rules-1", RULES, source="/docs/rules.md")
    version = (tmp_path / "index" / COLL / "CURRENT").read_text().strip()
    meta_path = tmp_path / "index" / COLL / version / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["document_info"]  # as an older hypa wrote it
    meta_path.write_text(json.dumps(meta))
    [legacy] = reopen(idx).document_info(COLL)
    assert (legacy.doc_id, legacy.chunks, legacy.source, legacy.ingested_at) == ("rules", 3, "", "")


def test_a_failed_first_write_leaves_no_collection_folder(tmp_path):
    class Interrupted(HashingEmbedder):
        def embed_passages(self, texts, show_progress=False):
            raise KeyboardInterrupt  # Ctrl-C while a big document is being embedded

    idx = EmbeddedIndex(tmp_path / "index", embedder=Interrupted())
    with pytest.raises(KeyboardInterrupt):
        idx.replace_document(COLL, "rules", "h", RULES)
    assert not (tmp_path / "index" / COLL).exists()
    assert idx.collections() == []
    # An existing collection keeps its folder and its data when a later write fails.
    good = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder())
    good.replace_document(COLL, "rules", "h", RULES)
    with pytest.raises(KeyboardInterrupt):
        EmbeddedIndex(tmp_path / "index", embedder=Interrupted()).replace_document(COLL, "law", "h2", LAW)
    assert [d.doc_id for d in reopen(good).document_info(COLL)] == ["rules"]


# -- documents: where their citations link to (hypa ingest --source-url) ------------------------------


def test_a_documents_source_url_is_recorded_and_changed_without_touching_its_chunks(tmp_path):
    counting = CountingEmbedder()
    idx = EmbeddedIndex(tmp_path / "index", embedder=counting)
    idx.replace_document(COLL, "rules", "h-rules-1", RULES, source="/docs/rules.md",
                         source_url="https://x.example/rules#s{section}")
    idx.replace_document(COLL, "law", "h-law-1", LAW, source="/docs/law.md")
    info = {d.doc_id: d for d in reopen(idx).document_info(COLL)}
    assert info["rules"].source_url == "https://x.example/rules#s{section}" and info["law"].source_url == ""
    embedded, ingested_at, chunks = len(counting.passages), info["rules"].ingested_at, reopen(idx).chunks(COLL)

    idx.set_source_url(COLL, "rules", "https://x.example/new.pdf")
    info = {d.doc_id: d for d in reopen(idx).document_info(COLL)}
    assert info["rules"].source_url == "https://x.example/new.pdf"
    # the same document otherwise: hash, file, time, chunks; nothing embedded again
    rules = info["rules"]
    assert (rules.content_hash, rules.source, rules.ingested_at) == ("h-rules-1", "/docs/rules.md", ingested_at)
    assert reopen(idx).chunks(COLL) == chunks and len(counting.passages) == embedded
    idx.set_source_url(COLL, "rules", "")
    assert {d.doc_id: d.source_url for d in reopen(idx).document_info(COLL)} == {"law": "", "rules": ""}
    with pytest.raises(KeyError, match="no document 'nope'"):
        idx.set_source_url(COLL, "nope", "https://x.example/")
