"""Weaviate fusion, checked against rankings and scores computed by hand."""
from __future__ import annotations

import pytest

from core.fusion import fuse, ranked_fusion, relative_score_fusion

KEYWORD = [("A", 10.0), ("B", 6.0), ("C", 2.0)]
VECTOR = [("B", 0.9), ("D", 0.7), ("A", 0.5)]


def ids(hits):
    return [doc_id for doc_id, _ in hits]


def scores(hits):
    return dict(hits)


# -- rankedFusion: weight / (rank + 60), rank from 0 ---------------------------------------------


def test_ranked_equal_weights():
    hits = ranked_fusion(KEYWORD, VECTOR, alpha=0.5)
    # A: .5/60 + .5/62 = .0163978   B: .5/61 + .5/60 = .0165301   C: .5/62   D: .5/61
    assert ids(hits) == ["B", "A", "D", "C"]
    s = scores(hits)
    assert s["B"] == pytest.approx(0.5 / 61 + 0.5 / 60, rel=1e-6)
    assert s["A"] == pytest.approx(0.5 / 60 + 0.5 / 62, rel=1e-6)
    assert s["D"] == pytest.approx(0.5 / 61, rel=1e-6)
    assert s["C"] == pytest.approx(0.5 / 62, rel=1e-6)


def test_ranked_alpha_weights_keyword_by_one_minus_alpha():
    hits = ranked_fusion(KEYWORD, VECTOR, alpha=0.25)
    # A: .75/60 + .25/62 = .0165323   B: .75/61 + .25/60 = .0164617   C: .75/62   D: .25/61
    assert ids(hits) == ["A", "B", "C", "D"]
    assert scores(hits)["A"] == pytest.approx(0.75 / 60 + 0.25 / 62, rel=1e-6)


def test_ranked_alpha_zero_ignores_vector_set_entirely():
    hits = ranked_fusion(KEYWORD, VECTOR, alpha=0.0)
    assert ids(hits) == ["A", "B", "C"]  # D (vector only) is not even present with score 0
    assert scores(hits)["A"] == pytest.approx(1 / 60, rel=1e-6)


def test_ranked_alpha_one_ignores_keyword_set_entirely():
    hits = ranked_fusion(KEYWORD, VECTOR, alpha=1.0)
    assert ids(hits) == ["B", "D", "A"]
    assert scores(hits)["D"] == pytest.approx(1 / 61, rel=1e-6)


def test_ranked_tie_breaks_on_secondary_value_then_id_descending():
    # X is first in BM25, Y first in vectors: both score .5/60. Weaviate then compares the
    # original scores (BM25 3.2 vs cosine 0.9): the larger number wins, whatever its scale.
    assert ids(ranked_fusion([("X", 3.2)], [("Y", 0.9)], 0.5)) == ["X", "Y"]
    # Equal secondary values: id descending.
    assert ids(ranked_fusion([("a", 0.9)], [("b", 0.9)], 0.5)) == ["b", "a"]
    assert ids(ranked_fusion([("b", 0.9)], [("a", 0.9)], 0.5)) == ["b", "a"]


def test_ranked_secondary_value_is_vector_score_when_in_both():
    # P and Q tie on rank score (P: kw0+vec1, Q: kw1+vec0 -> .5/60 + .5/61 each).
    # Secondary values come from the vector set (the later one): P .80, Q .81 -> Q first.
    keyword = [("P", 9.0), ("Q", 1.0)]
    vector = [("Q", 0.81), ("P", 0.80)]
    hits = ranked_fusion(keyword, vector, 0.5)
    assert ids(hits) == ["Q", "P"]
    assert scores(hits)["P"] == pytest.approx(scores(hits)["Q"], abs=1e-9)


def test_ranked_empty():
    assert ranked_fusion([], [], 0.5) == []


# -- relativeScoreFusion: min-max per set, weighted, summed ---------------------------------------


def test_relative_equal_weights():
    hits = relative_score_fusion(KEYWORD, VECTOR, alpha=0.5)
    # keyword 10,6,2 -> 1,.5,0 ; vector .9,.7,.5 -> 1,.5,0 ; each x .5
    # A: .5 + 0 = .5   B: .25 + .5 = .75   C: 0   D: .25
    assert ids(hits) == ["B", "A", "D", "C"]
    assert scores(hits) == pytest.approx({"B": 0.75, "A": 0.5, "D": 0.25, "C": 0.0}, abs=1e-6)


def test_relative_alpha_weights():
    hits = relative_score_fusion(KEYWORD, VECTOR, alpha=0.8)
    # A: .2*1 + .8*0 = .2   B: .2*.5 + .8*1 = .9   C: 0   D: .8*.5 = .4
    assert ids(hits) == ["B", "D", "A", "C"]
    assert scores(hits) == pytest.approx({"B": 0.9, "D": 0.4, "A": 0.2, "C": 0.0}, abs=1e-6)


def test_relative_weaviate_doc_example():
    # hybrid_fusion.go: "Input score = [1, 8, 6, 11] => [0, 0.7, 0.5, 1]"
    keyword = [("w", 11.0), ("x", 8.0), ("y", 6.0), ("z", 1.0)]
    hits = relative_score_fusion(keyword, [], alpha=0.0)
    assert ids(hits) == ["w", "x", "y", "z"]
    assert scores(hits) == pytest.approx({"w": 1.0, "x": 0.7, "y": 0.5, "z": 0.0}, abs=1e-6)


def test_relative_all_equal_scores_get_full_weight():
    # max == min: Weaviate sets each score to the set's weight instead of dividing by zero.
    hits = relative_score_fusion([("A", 3.0)], [("A", 0.8), ("B", 0.6)], alpha=0.5)
    assert scores(hits) == pytest.approx({"A": 1.0, "B": 0.0}, abs=1e-6)
    hits = relative_score_fusion([("A", 2.0), ("B", 2.0)], [], alpha=0.5)
    assert scores(hits) == pytest.approx({"A": 0.5, "B": 0.5}, abs=1e-6)


def test_relative_alpha_extremes_skip_the_zero_weight_set():
    assert ids(relative_score_fusion(KEYWORD, VECTOR, 0.0)) == ["A", "B", "C"]
    assert ids(relative_score_fusion(KEYWORD, VECTOR, 1.0)) == ["B", "D", "A"]


def test_relative_empty():
    assert relative_score_fusion([], [], 0.5) == []
    assert relative_score_fusion([], [("A", 0.3)], 0.0) == []


def test_relative_tie_breaks_like_weaviate():
    # Both get .5 (top of their own set); secondary: BM25 4.0 vs cosine .7 -> the BM25 hit first.
    assert ids(relative_score_fusion([("K", 4.0)], [("V", 0.7)], 0.5)) == ["K", "V"]
    assert ids(relative_score_fusion([("a", 0.7)], [("b", 0.7)], 0.5)) == ["b", "a"]


# -- dispatch and validation ---------------------------------------------------------------------


def test_fuse_dispatch_and_validation():
    assert fuse("rankedFusion", KEYWORD, VECTOR, 0.5) == ranked_fusion(KEYWORD, VECTOR, 0.5)
    assert fuse("relativeScoreFusion", KEYWORD, VECTOR, 0.5) == relative_score_fusion(KEYWORD, VECTOR, 0.5)
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse("rrf", KEYWORD, VECTOR, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        ranked_fusion(KEYWORD, VECTOR, 1.5)


def test_deterministic_for_same_input():
    first = ranked_fusion(KEYWORD, VECTOR, 0.5)
    for _ in range(5):
        assert ranked_fusion(KEYWORD, VECTOR, 0.5) == first
