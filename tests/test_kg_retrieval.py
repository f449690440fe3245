"""KG retrieval: entity matching (exact, alias, fuzzy, embedding), the S-hop walk, fact ranking,
the pipeline's "kg" stage and the per-collection cache that follows the index version."""
from __future__ import annotations

import json

import numpy as np

from core.extractive import ExtractiveGenerator
from core.kg.build import KnowledgeGraphs
from core.kg.graph import build_graph
from core.kg.offline import OfflineExtractor
from core.kg.retriever import KGRetriever, KGSettings
from core.pipeline import AnswerPipeline
from core.termstats import TermStats
from core.types import RetrievalParams
from hypa_testkit.toy import TOY_CHUNKS, make_chunk
from storage.embedded import EmbeddedIndex
from storage.embedder import HashingEmbedder
from storage.kg_store import KGStore

CHUNKS = [
    *TOY_CHUNKS,
    make_chunk(
        "Toy Code § 1-104",
        "§ 1-104 Reviews. A widget maker shall obtain a widget audit (“WA”) before selling a widget. "
        "The widget audit must be conducted pursuant to section 1-101.",
    ),
]


def _retriever(embed=None, **settings) -> KGRetriever:
    data = OfflineExtractor().extract("toy", CHUNKS, {})
    return KGRetriever(data, build_graph(data), CHUNKS, embed=embed, settings=KGSettings(**settings))


def test_exact_alias_and_fuzzy_entity_matches():
    r = _retriever()
    assert [e.key for e in r.match_entities("What is a widget audit?", 3)][:1] == ["widget audit"]
    assert "widget audit" in [e.key for e in r.match_entities("Does a WA need a reviewer?", 3)]  # abbreviation
    fuzzy = r.match_entities("What does a widgett auditt involve?", 3)
    assert fuzzy and fuzzy[0].key == "widget audit" and fuzzy[0].how == "fuzzy"
    assert r.match_entities("What does section 1-103 say?", 2)[0].key == "§ 1-103"
    assert r.match_entities("Completely unrelated words here", 3) == []


def test_embedding_match_uses_the_given_question_vector_and_embeds_names_once():
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return np.stack([np.eye(8)[i % 8] for i, _ in enumerate(texts)])

    r = _retriever(embed=embed)
    names = r._name_keys
    target = names.index("reviewer")
    vector = np.eye(8)[target % 8]
    found = r.match_entities("zzz qqq", 1, vector)
    assert found[0].how == "embedding" and found[0].key == names[target]
    r.match_entities("yyy", 1, vector)
    assert len(calls) == 1  # entity-name vectors are computed once per graph


def test_depth_limits_the_walk_and_facts_carry_labels():
    r = _retriever()
    shallow = r.retrieve("What must a widget maker obtain?", keywords=1, depth=0)
    deep = r.retrieve("What must a widget maker obtain?", keywords=1, depth=2)
    assert shallow.entities[0].key == "widget maker"
    assert {f.label for f in shallow.facts} == {"Toy Code § 1-104"}
    assert len(deep.facts) >= len(shallow.facts)
    top = deep.contexts[0]
    assert top.kind == "kg" and top.chunk.text == (
        "widget maker — must — obtain a widget audit (\"WA\") before selling a widget [Toy Code § 1-104]"
    )
    assert deep.provisions[0].label == "Toy Code § 1-104"
    assert r.retrieve("anything", keywords=0, depth=2).facts == []


def test_facts_are_ranked_by_the_question_and_capped():
    r = _retriever(max_facts=2)
    result = r.retrieve("What penalty is a seller liable for?", keywords=3, depth=2)
    assert len(result.facts) == 2
    assert result.facts[0].predicate == "penalty"
    assert result.provisions[0].label == "Toy Code § 1-103"


def _index(tmp_path):
    index = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(64))
    index.replace_document("toy", "toy-doc", "v1", CHUNKS)
    return index


def _pipeline(index, graphs, kg: bool, **params) -> AnswerPipeline:
    stats = TermStats.from_texts(c.text for c in CHUNKS)
    return AnswerPipeline(
        index,
        ExtractiveGenerator(lambda c: stats),
        RetrievalParams(
            **{"top_k": 2, "fusion": "rankedFusion", "alpha": 0.5, "kg_keywords": 3, "kg_depth": 2, "kg": kg, **params}
        ),
        default_collection="toy",
        count_tokens=lambda t: len(t.split()),
        knowledge_graph=graphs,
    )


def test_pipeline_kg_stage_adds_facts_and_provisions(tmp_path):
    index = _index(tmp_path)
    graphs = KnowledgeGraphs(index, KGStore(tmp_path / "kg"), OfflineExtractor)
    result = _pipeline(index, graphs, kg=True).answer("What penalty applies to a seller who violates the chapter?")
    kinds = [c.kind for c in result.contexts]
    assert kinds[:2] == ["chunk", "chunk"] and "kg" in kinds
    assert "kg" in result.timings_ms
    record = json.loads(json.dumps(result.to_record()))
    facts = [c for c in record["contexts"] if c["kind"] == "kg"]
    assert facts and all(" — " in c["text"] and c["text"].endswith("]") for c in facts)
    assert record["usage"]["context_tokens"] == sum(len(c["text"].split()) for c in record["contexts"])
    assert not any(c.chunk_id.startswith("kg:") for c in result.answer.citations)  # answers quote provisions
    assert (tmp_path / "kg" / "toy.kg.pkl").is_file()  # built on first use and saved

    plain = _pipeline(index, graphs, kg=False).answer("What penalty applies to a seller who violates the chapter?")
    assert [c.kind for c in plain.contexts] == ["chunk", "chunk"] and "kg" not in plain.timings_ms


def test_token_budget_with_the_graph_covers_facts_and_provisions(tmp_path):
    index = _index(tmp_path)
    graphs = KnowledgeGraphs(index, KGStore(tmp_path / "kg"), OfflineExtractor)
    question = "What penalty applies to a seller who violates the chapter?"
    unlimited = _pipeline(index, graphs, kg=True, top_k=4).answer(question)
    facts = sum(len(c.chunk.text.split()) for c in unlimited.contexts if c.kind == "kg")
    chunks = [c for c in unlimited.contexts if c.kind == "chunk"]
    assert facts and len(chunks) >= 2
    # Room for the facts and the first provision only: the rest of the ranking is skipped.
    budget = facts + len(chunks[0].chunk.text.split())
    limited = _pipeline(index, graphs, kg=True, top_k=4, max_context_tokens=budget).answer(question)
    assert [c.chunk.id for c in limited.contexts if c.kind == "chunk"] == [chunks[0].chunk.id]
    assert [c.chunk.id for c in limited.contexts if c.kind == "kg"] == [
        c.chunk.id for c in unlimited.contexts if c.kind == "kg"
    ]
    assert limited.answer.usage.context_tokens <= budget


def test_graph_cache_follows_the_index_version(tmp_path):
    index = _index(tmp_path)
    store = KGStore(tmp_path / "kg")
    graphs = KnowledgeGraphs(index, store, OfflineExtractor)
    first = graphs("toy")
    assert graphs("toy") is first
    new = make_chunk("Toy Code § 1-105", "§ 1-105 Gizmos. The term “gizmo” means a small widget.", doc_id="more")
    index.replace_document("toy", "more", "v2", [new])
    second = graphs("toy")
    assert second is not first and "gizmo" in second.data.entities
    assert store.load("toy").source_version == {"toy-doc": "v1", "more": "v2"}
    assert graphs("empty-collection") is None


def test_graph_additions_that_repeat_a_hybrid_chunk_are_dropped():
    from core.pipeline import _without_added_duplicates
    from core.types import ScoredChunk

    law = make_chunk("Code § 1", "A seller shall notify each buyer ten days before a sale.", doc_id="law")
    codified = make_chunk("Code § 1", "A seller shall notify each buyer ten days before a sale.", doc_id="code")
    other = make_chunk("Code § 2", "Penalties are set by the department.", doc_id="law")
    fused = [ScoredChunk(law, 0.3), ScoredChunk(codified, 0.2), ScoredChunk(other, 0.1)]
    kept = _without_added_duplicates(fused, {codified.id})
    assert [sc.chunk.id for sc in kept] == [law.id, other.id]
    # A duplicate within the hybrid list itself is left alone (that list is de-duplicated upstream).
    assert len(_without_added_duplicates(fused, set())) == 3


class _WordEmbedder:
    """HashingEmbedder plus the word count the ingestion's chunker needs (no model load)."""

    def __init__(self):
        self._inner = HashingEmbedder(64)
        self.model_id, self.dim = self._inner.model_id, self._inner.dim
        self.embed_queries, self.embed_passages = self._inner.embed_queries, self._inner.embed_passages

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_ingest_builds_the_graph_and_kg_configs_use_it(tmp_path):
    from bot.settings import Settings
    from bot.wiring import Components

    doc = tmp_path / "widgets.md"
    doc.write_text(
        "# Widget Rules\n\n## § 1-101 Definitions\n\nThe term “widget audit” means an impartial evaluation "
        "by an independent reviewer.\n\n## § 1-102 Notice\n\nA seller shall notify each buyer no less than ten "
        "business days before selling a widget, and the seller must obtain a widget audit first.\n",
        encoding="utf-8",
    )
    components = Components(Settings(data_dir=tmp_path / "data"), overrides={"config": "fixed-k7-kg"})
    components.__dict__["embedder"] = _WordEmbedder()  # the cached_property, filled without the model
    assert components.ingest(doc, "widgets").status == "added"
    stored = components.kg_store.load("widgets")
    assert stored is not None and "widget audit" in stored.entities
    assert stored.source_version == components.index.documents("widgets")
    result = components.pipeline.answer("What is a widget audit?", collection="widgets")
    assert result.params.kg and any(c.kind == "kg" for c in result.contexts)


def test_an_unreadable_or_unsafe_stored_graph_is_rebuilt_not_fatal(tmp_path):
    index = _index(tmp_path)
    store = KGStore(tmp_path / "kg")
    store.directory.mkdir(parents=True)
    store.path("toy").write_bytes(b"\x80\x04not a pickle")
    assert "widget audit" in KnowledgeGraphs(index, store, OfflineExtractor)("toy").data.entities
    assert store.load("toy").source_version == {"toy-doc": "v1"}  # replaced by a good file
    store.path("toy").write_bytes(b"cos\nsystem\n(Vtouch pwned\ntR.")
    assert KnowledgeGraphs(index, store, OfflineExtractor)("toy") is not None
    assert store.load("toy") is not None and not (tmp_path / "pwned").exists()


def test_a_graph_that_cannot_be_saved_is_still_used(tmp_path, monkeypatch):
    index = _index(tmp_path)
    store = KGStore(tmp_path / "kg")

    def disk_full(data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "save", disk_full)
    retriever = KnowledgeGraphs(index, store, OfflineExtractor)("toy")
    assert retriever is not None and retriever.fact_count > 0


def test_graph_cache_follows_a_rebuild_by_another_process(tmp_path):
    index = _index(tmp_path)
    store = KGStore(tmp_path / "kg")
    graphs = KnowledgeGraphs(index, store, OfflineExtractor)
    first = graphs("toy")
    data = store.load("toy")
    data.extractor = "offline+llm:test"  # e.g. `hypa kg build` with HYPA_KG_EXTRACTOR=llm
    KGStore(tmp_path / "kg").save(data)
    second = graphs("toy")
    assert second is not first and second.data.extractor == "offline+llm:test"
    assert graphs("toy") is second


def test_a_failing_graph_stage_still_answers_from_the_hybrid_results(tmp_path, caplog):
    index = _index(tmp_path)

    def broken(collection):
        raise RuntimeError("graph exploded")

    result = _pipeline(index, broken, kg=True).answer("What penalty applies to a seller who violates the chapter?")
    assert [c.kind for c in result.contexts] == ["chunk", "chunk"]
    assert not result.answer.refused
    assert "graph exploded" in caplog.text


def _reference_rank(r: KGRetriever, question, entities, depth):
    """The ranking written as plain loops (the original implementation): the array version must agree."""
    from core.text import QUESTION_FRAMING, content_terms

    s = r.settings
    distance = {e.key: 0 for e in entities}
    frontier = [e.key for e in entities]
    for hop in range(1, depth + 1):
        frontier = [n for node in frontier for n in sorted(r._neighbours.get(node, ())) if n not in distance]
        for n in frontier:
            distance.setdefault(n, hop)
    q_terms = {t for t in content_terms(question) if t not in QUESTION_FRAMING}
    q_weight = sum(r._idf.get(t, r._max_idf) for t in q_terms) or 1.0
    matched = {e.key: e.score for e in entities}
    scores = {}
    for i, row in enumerate(r._rows):
        ends = [distance[k] for k in (row.subject, row.object_key) if k in distance]
        if not ends:
            continue
        score = sum(r._idf.get(t, 0.0) for t in q_terms & row.terms) / q_weight - s.distance_penalty * min(ends)
        if row.subject in matched:
            score += s.subject_bonus * matched[row.subject] + (s.definition_bonus if row.predicate == "means" else 0.0)
        scores[i] = score
    facts, seen = [], {}
    for i, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        row = r._rows[i]
        same, subject = (row.predicate, row.object, row.label), r._names.get(row.subject, row.subject)
        if same in seen:
            if subject not in facts[seen[same]][1] and len(facts[seen[same]][1]) < 3:
                facts[seen[same]][1].append(subject)
        elif len(facts) < s.max_facts:
            seen[same] = len(facts)
            facts.append([i, [subject], round(score, 9)])
    return facts


def test_array_ranking_matches_the_plain_loop_definition():
    r = _retriever(max_facts=3)
    questions = ["What must a widget maker obtain?", "What penalty is a seller liable for?", "What is a WA?",
                 "Who reviews widgets under section 1-101?", "notice to buyers"]
    for q in questions:
        for keywords, depth in ((1, 0), (2, 1), (3, 2), (5, 3)):
            entities = r.match_entities(q, keywords)
            got = [
                [f.index, list(f.subjects), round(f.score, 9)]
                for f in r._rank(q, entities, r._walk([e.key for e in entities], depth))
            ]
            assert got == _reference_rank(r, q, entities, depth), (q, keywords, depth)
