"""The conversation pipeline every front end uses: question (+ thread) -> retrieval -> cited answer.

Stages are small components with explicit inputs and outputs (Haystack-style); this module only
sequences them, validates the question and times each stage.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from core.followup import standalone_query
from core.text import tokens
from core.types import Answer, PipelineResult, RetrievalParams, ScoredChunk, Turn
from storage.index import ChunkIndex


class Generator(Protocol):
    """Writes the answer from the retrieved contexts (extractive now; an LLM plugs in here)."""

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: np.ndarray | None = None,
    ) -> Answer:
        """`query_vector` is the question's embedding, already computed for retrieval (may be None)."""


@dataclass(frozen=True)
class QuestionLimits:
    max_chars: int = 4000


def drop_near_duplicates(results: Sequence[ScoredChunk], threshold: float = 0.9) -> list[ScoredChunk]:
    """Keep the best-ranked copy of chunks whose word sets overlap by `threshold` (Jaccard) or more."""
    kept: list[tuple[ScoredChunk, frozenset[str]]] = []
    for sc in results:
        words = frozenset(tokens(sc.chunk.text))
        if any(_jaccard(words, other) >= threshold for _, other in kept):
            continue
        kept.append((sc, words))
    return [sc for sc, _ in kept]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


class _Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = time.perf_counter()

    def lap(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[stage] = (now - since) * 1000.0
        return now

    def total(self) -> dict[str, float]:
        self.timings["total"] = (time.perf_counter() - self._start) * 1000.0
        return self.timings


class AnswerPipeline:
    def __init__(
        self,
        index: ChunkIndex,
        generator: Generator,
        params: RetrievalParams,
        *,
        default_collection: str,
        count_tokens: Callable[[str], int],
        limits: QuestionLimits = QuestionLimits(),
        embed_query: Callable[[str], np.ndarray] | None = None,
    ) -> None:
        self.index = index
        self.generator = generator
        self.params = params
        self.default_collection = default_collection
        self.count_tokens = count_tokens
        self.limits = limits
        self.embed_query = embed_query

    def answer(
        self, question: str, history: Sequence[Turn] = (), *, collection: str | None = None
    ) -> PipelineResult:
        clock = _Stopwatch()
        question = question.strip()
        problem = self._validate(question)
        if problem:
            return PipelineResult(
                question=question,
                answer=Answer(text=problem, refused=True, model="none", note="invalid question"),
                contexts=[],
                queries=[],
                params=self.params,
                timings_ms=clock.total(),
            )
        t = time.perf_counter()
        query = standalone_query(question, history)
        t = clock.lap("rewrite", t)
        # Embedded once, used by retrieval and by answer selection.
        vector = self.embed_query(query) if self.embed_query else None
        t = clock.lap("embed", t)
        # Ask for more than k: the same provision often appears in two documents (e.g. the law as
        # enacted and as codified); duplicates are dropped before the cut to k.
        found = self.index.hybrid_search(
            query,
            collection=collection or self.default_collection,
            limit=self.params.top_k * 2,
            fusion=self.params.fusion,  # type: ignore[arg-type]
            alpha=self.params.alpha,
            vector=vector,
        )
        contexts = drop_near_duplicates(found)[: self.params.top_k]
        t = clock.lap("retrieve", t)
        answer = self.generator.generate(query, contexts, history, vector)
        answer.usage.context_tokens = sum(self.count_tokens(c.chunk.text) for c in contexts)
        clock.lap("generate", t)
        return PipelineResult(
            question=question,
            answer=answer,
            contexts=list(contexts),
            queries=[query],
            params=self.params,
            timings_ms=clock.total(),
        )

    def _validate(self, question: str) -> str | None:
        if not question:
            return "Please ask a question, e.g. “Do I need a bias audit before using an AEDT?”"
        if len(question) > self.limits.max_chars:
            return (
                f"That message is {len(question):,} characters long; please ask a question of at most "
                f"{self.limits.max_chars:,} characters (quote only the part you need answered)."
            )
        if not any(ch.isalnum() for ch in question):
            return "I could not find a question in that message; please ask in words."
        return None
