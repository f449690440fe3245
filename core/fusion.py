"""Weaviate's hybrid-search fusion (rankedFusion, relativeScoreFusion), ported line by line.

Source followed (weaviate/weaviate, Go):
  * usecases/traverser/hybrid/hybrid_fusion.go  - FusionRanked, FusionRelativeScore (the 2024+
    version: rank constant `i+60` with i from 0, tolerance-based tie-breaking ending on the id);
  * usecases/traverser/hybrid/searcher.go       - Search: which result sets exist and their weights.
Older Weaviate releases (usecases/traverser/hybrid/rank_fusion.go, FusionReciprocal) used `i+60+1`
and had no id tie-break; we follow the current code.

What Weaviate does, and so what these functions do:
  * Weights: the keyword (BM25) set gets `1 - alpha`, the vector set gets `alpha`. A set is only
    *searched* when its weight is non-zero (`alpha < 1` for BM25, `alpha > 0` for vectors), so at
    alpha=0 the vector hits are ignored entirely (not added with score 0), and vice versa at alpha=1.
  * rankedFusion: each set adds `weight / (rank + 60)` (rank 0 = best) to a document's score.
  * relativeScoreFusion: each set's scores are min-max scaled to [0, 1] and multiplied by the
    weight; when every score in a set is equal (max == min, e.g. a single hit), every hit of that
    set gets the full weight. Vector scores are similarities, `1 - cosine distance`.
  * Arithmetic is float32, as in Weaviate (`Score float32`), so near-ties resolve the same way.
  * Order: score descending; scores within 1e-7 of each other (Weaviate: `(a-b)^2 < 1e-14`) are
    ordered by the "secondary sort value" descending, then by id descending (string comparison).
    The secondary value is the document's original score in the *last* set that held it: the
    vector similarity when the document had a vector hit, else its BM25 score (Weaviate keeps the
    later set's result object). Python's sort on a deterministic input order makes this
    deterministic even though a tolerance comparison is not strictly transitive.

Inputs are `(id, score)` lists, best first, with unique ids per list, as a search engine returns them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Literal

import numpy as np

Hit = tuple[str, float]
FusionName = Literal["rankedFusion", "relativeScoreFusion"]
FUSION_METHODS: tuple[str, ...] = ("rankedFusion", "relativeScoreFusion")

RANK_CONSTANT = 60  # Weaviate hard-codes 60 ("TODO replace 60 with a class configured variable")
_TIE_EPSILON_SQ = 1e-14  # Weaviate compares squared differences against this


@dataclass
class _Fused:
    id: str
    score: np.float32
    secondary: np.float32  # original score from the last set that contained the document


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within [0, 1], got {alpha}")


def check_hybrid_args(fusion: str, alpha: float) -> None:
    """ValueError for a fusion method or alpha a hybrid query does not accept (every index backend)."""
    if fusion not in FUSION_METHODS:
        raise ValueError(f"unknown fusion {fusion!r}; expected one of {', '.join(FUSION_METHODS)}")
    _check_alpha(alpha)


def _weighted_sets(
    keyword: Sequence[Hit], vector: Sequence[Hit], alpha: float
) -> list[tuple[float, Sequence[Hit]]]:
    """Keyword set first, vector set second: the order matters for the secondary sort value."""
    _check_alpha(alpha)
    sets: list[tuple[float, Sequence[Hit]]] = []
    if alpha < 1:
        sets.append((1.0 - alpha, keyword))
    if alpha > 0:
        sets.append((alpha, vector))
    return sets


def _compare(a: _Fused, b: _Fused) -> int:
    """Weaviate's sort.Slice less-function for descending order, as a cmp function."""
    diff = float(b.score - a.score)
    if diff * diff < _TIE_EPSILON_SQ:
        diff2 = float(b.secondary - a.secondary)
        if diff2 * diff2 < _TIE_EPSILON_SQ:
            return -1 if a.id > b.id else (1 if a.id < b.id else 0)
        return -1 if a.secondary > b.secondary else 1
    return -1 if a.score > b.score else 1


def _ordered(fused: dict[str, _Fused]) -> list[Hit]:
    ordered = sorted(fused.values(), key=cmp_to_key(_compare))
    return [(f.id, float(f.score)) for f in ordered]


def _accumulate(fused: dict[str, _Fused], doc_id: str, score: np.float32, original: float) -> None:
    previous = fused.get(doc_id)
    if previous is not None:
        score = np.float32(score + previous.score)
    fused[doc_id] = _Fused(doc_id, score, np.float32(original))


def ranked_fusion(keyword: Sequence[Hit], vector: Sequence[Hit], alpha: float) -> list[Hit]:
    """Weaviate rankedFusion: sum over sets of `weight / (rank + 60)`, rank from 0. Best first."""
    fused: dict[str, _Fused] = {}
    for weight, hits in _weighted_sets(keyword, vector, alpha):
        for rank, (doc_id, original) in enumerate(hits):
            contribution = np.float32(weight / (rank + RANK_CONSTANT))
            _accumulate(fused, doc_id, contribution, original)
    return _ordered(fused)


def _min_max(hits: Sequence[Hit]) -> tuple[np.float32, np.float32]:
    values = [np.float32(score) for _, score in hits]
    return min(values), max(values)


def relative_score_fusion(keyword: Sequence[Hit], vector: Sequence[Hit], alpha: float) -> list[Hit]:
    """Weaviate relativeScoreFusion: per-set min-max scaling to [0, 1], weighted, summed. Best first."""
    sets = _weighted_sets(keyword, vector, alpha)
    fused: dict[str, _Fused] = {}
    for weight, hits in sets:
        if not hits:
            continue
        low, high = _min_max(hits)
        w = np.float32(weight)
        for doc_id, original in hits:
            score = w
            if high != low:  # all-equal scores: every hit keeps the full weight (Weaviate)
                score = np.float32(w * ((np.float32(original) - low) / (high - low)))
            _accumulate(fused, doc_id, score, original)
    return _ordered(fused)


def fuse(
    method: str, keyword: Sequence[Hit], vector: Sequence[Hit], alpha: float
) -> list[Hit]:
    if method == "rankedFusion":
        return ranked_fusion(keyword, vector, alpha)
    if method == "relativeScoreFusion":
        return relative_score_fusion(keyword, vector, alpha)
    raise ValueError(f"unknown fusion method {method!r}; expected one of {', '.join(FUSION_METHODS)}")


def reciprocal_rank_fusion(result_lists: Sequence[Sequence[Hit]]) -> list[Hit]:
    """Fuse any number of ranked lists (one per query): each list adds `1 / (rank + 60)`, rank from 0.

    Every list counts (the HyPA-RAG authors' code kept only the first N lists, dropping BM25
    results whenever no rewriter ran). The same ordering rules as ranked_fusion apply to ties.
    """
    fused: dict[str, _Fused] = {}
    for hits in result_lists:
        for rank, (doc_id, original) in enumerate(hits):
            _accumulate(fused, doc_id, np.float32(1.0 / (rank + RANK_CONSTANT)), original)
    return _ordered(fused)
