"""Ranking parity on the embedded side: the same candidate lists Weaviate's hybrid query fuses.

Fusion itself (rankedFusion 1/(rank+60) with rank from 0, relativeScoreFusion min-max, vector score
1 - distance) is ported and tested in tests/test_fusion.py. What this file pins down is *which* hits
get fused: Weaviate takes max(100, limit) hits from each sub-search (BM25 and vector) before fusing
(usecases/traverser/explorer.go, `hybrid.DefaultLimit = 100`). With fewer candidates the min-max
scaling of relativeScoreFusion sees another minimum, and ranks change: measured on the LL144 dev
questions, 50 instead of 100 candidates changed the top-7 of 37 of 125 questions with
relativeScoreFusion (1 of 125 with rankedFusion).
"""
from __future__ import annotations

import numpy as np
import pytest

from bot.settings import Settings
from bot.wiring import Components
from core.fusion import fuse
from hypa_testkit.toy import make_chunk
from storage.embedded import EmbeddedIndex
from storage.embedder import HashingEmbedder
from storage.weaviate_index import WEAVIATE_SUBSEARCH_LIMIT

WORDS = [f"w{i}" for i in range(60)]


@pytest.fixture(scope="module")
def large_index(tmp_path_factory) -> EmbeddedIndex:
    """250 chunks of random words: more than 100 match most queries on both sides."""
    rng = np.random.default_rng(3)
    chunks = [
        make_chunk(f"T § {i}", " ".join(rng.choice(WORDS, size=int(rng.integers(20, 60)))), collection="big", doc_id="big-doc")
        for i in range(250)
    ]
    index = EmbeddedIndex(tmp_path_factory.mktemp("parity") / "index", embedder=HashingEmbedder(48))
    index.replace_document("big", "big-doc", "h", chunks)
    return index


def test_defaults_fuse_weaviates_candidate_count(tmp_path):
    assert WEAVIATE_SUBSEARCH_LIMIT == 100
    assert Settings().candidates == WEAVIATE_SUBSEARCH_LIMIT
    assert EmbeddedIndex(tmp_path).candidates == WEAVIATE_SUBSEARCH_LIMIT
    assert Components(Settings(data_dir=tmp_path)).index.candidates == WEAVIATE_SUBSEARCH_LIMIT


@pytest.mark.parametrize("fusion", ["rankedFusion", "relativeScoreFusion"])
@pytest.mark.parametrize("query", ["w1 w2 w3", "w10 w11 w40 w59", "w7"])
def test_hybrid_equals_fusion_of_weaviates_sub_search_lists(large_index, fusion, query):
    index = EmbeddedIndex(large_index.root, embedder=HashingEmbedder(48))  # default candidates
    keyword = [(r.chunk.id, r.score) for r in index.keyword_search(query, collection="big", limit=WEAVIATE_SUBSEARCH_LIMIT)]
    dense = [(r.chunk.id, r.score) for r in index.dense_search(query, collection="big", limit=WEAVIATE_SUBSEARCH_LIMIT)]
    assert len(keyword) == len(dense) == WEAVIATE_SUBSEARCH_LIMIT  # the cut matters for this query
    expected = fuse(fusion, keyword, dense, 0.5)[:10]
    got = index.hybrid_search(query, collection="big", limit=10, fusion=fusion, alpha=0.5)
    assert [(r.chunk.id, pytest.approx(r.score)) for r in got] == [(cid, pytest.approx(s)) for cid, s in expected]
