"""Which fused chunks reach the generator: top_k, token budget, novelty rule (core/context_budget.py)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.context_budget import select_contexts
from core.pipeline import AnswerPipeline
from core.types import Answer, RetrievalParams, ScoredChunk
from hypa_testkit.toy import make_chunk


def words(n: int, prefix: str) -> str:
    """n distinct words: `prefix`0 ... `prefix`(n-1), so word overlap between chunks is exact."""
    return " ".join(f"{prefix}{i}" for i in range(n))


def count_words(text: str) -> int:
    return len(text.split())


# Ranked best first. Sizes in "tokens" (= words here): 50, 300, 40, 45 (a near copy of A), 60.
A = make_chunk("A", words(50, "a"))
BIG = make_chunk("BIG", words(300, "b"))
C = make_chunk("C", words(40, "c"))
A_COPY = make_chunk("A copy", words(45, "a") + " " + words(5, "x"))  # 45 of its 50 words are in A
D = make_chunk("D", words(60, "d"))
RANKED = [ScoredChunk(c, 1.0 / (i + 1)) for i, c in enumerate([A, BIG, C, A_COPY, D])]

BASE = RetrievalParams(top_k=10, fusion="rankedFusion", alpha=0.5)


def labels(chunks: list[ScoredChunk]) -> list[str]:
    return [sc.chunk.label for sc in chunks]


def test_without_budget_or_novelty_it_is_the_first_top_k():
    params = replace(BASE, top_k=3)
    assert select_contexts(RANKED, params, count_words) == RANKED[:3]


def test_a_chunk_that_does_not_fit_is_skipped_and_a_shorter_one_below_comes_in():
    params = replace(BASE, max_context_tokens=200)
    kept = select_contexts(RANKED, params, count_words)
    assert labels(kept) == ["A", "C", "A copy", "D"]  # BIG (300) skipped; 50 + 40 + 50 + 60 = 200
    assert sum(count_words(sc.chunk.text) for sc in kept) <= 200


def test_the_budget_is_never_exceeded_except_by_the_first_chunk():
    ranked = [ScoredChunk(BIG, 1.0), ScoredChunk(A, 0.5), ScoredChunk(C, 0.3)]
    kept = select_contexts(ranked, replace(BASE, max_context_tokens=100), count_words)
    # The best provision is kept even though it alone is over the budget: never answer from nothing.
    assert labels(kept) == ["BIG"]


def test_top_k_still_caps_the_count_under_a_budget():
    kept = select_contexts(RANKED, replace(BASE, top_k=2, max_context_tokens=10_000), count_words)
    assert labels(kept) == ["A", "BIG"]


def test_novelty_rule_skips_a_chunk_that_repeats_kept_ones():
    kept = select_contexts(RANKED, replace(BASE, min_novelty=0.4), count_words)
    # A copy: 5 of its 50 distinct words are new (10% < 40%): skipped. Every other chunk is all new.
    assert labels(kept) == ["A", "BIG", "C", "D"]
    # At a threshold below its 10% of new words it stays.
    assert "A copy" in labels(select_contexts(RANKED, replace(BASE, min_novelty=0.05), count_words))


def test_the_first_chunk_is_kept_whatever_the_rules():
    only = [ScoredChunk(make_chunk("empty", ""), 1.0)]
    assert labels(select_contexts(only, replace(BASE, min_novelty=0.9, max_context_tokens=1), count_words)) == ["empty"]
    assert select_contexts([], replace(BASE, min_novelty=0.4, max_context_tokens=100), count_words) == []


def test_chunks_are_counted_only_when_there_is_a_budget():
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return count_words(text)

    select_contexts(RANKED, replace(BASE, min_novelty=0.4), counting)
    assert calls == []
    select_contexts(RANKED, replace(BASE, max_context_tokens=200), counting)
    assert calls


class _ListIndex:
    def __init__(self, ranked: list[ScoredChunk]):
        self.ranked = ranked

    def hybrid_search(self, query, *, collection, limit, fusion="rankedFusion", alpha=0.5, vector=None):
        return self.ranked[:limit]


class _EchoGenerator:
    def generate(self, question, contexts, history=(), query_vector=None, asked=None, asking_vectors=None) -> Answer:
        return Answer(text=f"{len(contexts)} contexts", refused=False)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (replace(BASE, top_k=3), ["A", "BIG", "C"]),
        (replace(BASE, top_k=5, max_context_tokens=200), ["A", "C", "A copy", "D"]),
        (replace(BASE, top_k=5, min_novelty=0.4), ["A", "BIG", "C", "D"]),
    ],
)
def test_pipeline_applies_budget_and_novelty_and_counts_the_kept_tokens(params, expected):
    pipeline = AnswerPipeline(
        _ListIndex(RANKED), _EchoGenerator(), params, default_collection="toy", count_tokens=count_words
    )
    result = pipeline.answer("What does the toy law say?")
    assert labels(result.contexts) == expected
    assert result.answer.usage.context_tokens == sum(count_words(sc.chunk.text) for sc in result.contexts)
    assert result.to_record()["params"]["max_context_tokens"] == params.max_context_tokens
