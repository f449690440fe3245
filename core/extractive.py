"""Answers without an LLM: quote the sentences of the retrieved provisions that answer the question.

Every sentence of the answer is a verbatim span of a retrieved chunk, followed by its citation number,
so nothing can be invented. When the retrieved provisions do not contain the question's key terms, the
generator abstains and cites nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from core.termstats import TermStats
from core.text import content_terms, sentence_spans
from core.types import Answer, Citation, ScoredChunk, Turn

REFUSAL_TEXT = "The loaded regulations don't address this question."


@dataclass(frozen=True)
class ExtractiveConfig:
    max_sentences: int = 3
    max_words: int = 110
    # Share of the question's (idf-weighted) key terms the best provisions must contain to answer.
    min_support: float = 0.5
    # Weight of a chunk's retrieval rank in a sentence's score (0 = ignore rank).
    rank_weight: float = 0.35
    # A sentence is added after the first only if it scores at least this share of the best one.
    relative_floor: float = 0.6


@dataclass(frozen=True)
class _Sentence:
    context_rank: int
    chunk_index: int
    start: int
    end: int
    text: str
    terms: frozenset[str]


class ExtractiveGenerator:
    """Implements core.pipeline.Generator."""

    model_name = "extractive"

    def __init__(
        self,
        term_stats: Callable[[str], TermStats],
        config: ExtractiveConfig = ExtractiveConfig(),
    ) -> None:
        # term_stats(collection) -> statistics of that collection (cached by the caller).
        self._term_stats = term_stats
        self.config = config

    def generate(
        self, question: str, contexts: Sequence[ScoredChunk], history: Sequence[Turn] = ()
    ) -> Answer:
        if not contexts:
            return self._refusal(contexts)
        stats = self._term_stats(contexts[0].chunk.collection)
        weights = {t: stats.idf(t) for t in set(content_terms(question))}
        if not weights:
            return self._refusal(contexts)
        sentences = self._sentences(contexts)
        scored = sorted(
            ((self._score(s, weights), s) for s in sentences), key=lambda x: (-x[0], x[1].context_rank, x[1].start)
        )
        chosen = self._choose(scored, weights)
        if not chosen or self._support(chosen, weights) < self.config.min_support:
            return self._refusal(contexts)
        return self._render(chosen, contexts)

    # -- candidate sentences -------------------------------------------------------------------

    def _sentences(self, contexts: Sequence[ScoredChunk]) -> list[_Sentence]:
        out: list[_Sentence] = []
        for rank, sc in enumerate(contexts):
            if sc.kind != "chunk":
                continue
            text = sc.chunk.text
            for a, b in _merge_headings(text, sentence_spans(text)):
                span = text[a:b]
                out.append(_Sentence(rank, rank, a, b, span, frozenset(content_terms(span))))
        return out

    def _score(self, s: _Sentence, weights: dict[str, float]) -> float:
        total = sum(weights.values())
        covered = sum(w for t, w in weights.items() if t in s.terms)
        rank_prior = 1.0 / (1.0 + s.context_rank)
        return (covered / total) * ((1.0 - self.config.rank_weight) + self.config.rank_weight * rank_prior)

    def _choose(self, scored: list[tuple[float, _Sentence]], weights: dict[str, float]) -> list[_Sentence]:
        if not scored or scored[0][0] <= 0.0:
            return []
        best_score = scored[0][0]
        chosen: list[_Sentence] = []
        words = 0
        for score, s in scored:
            if len(chosen) >= self.config.max_sentences:
                break
            if chosen and score < self.config.relative_floor * best_score:
                break
            n_words = len(s.text.split())
            if chosen and words + n_words > self.config.max_words:
                continue
            chosen.append(s)
            words += n_words
        return chosen

    @staticmethod
    def _support(chosen: list[_Sentence], weights: dict[str, float]) -> float:
        covered_terms = frozenset().union(*(s.terms for s in chosen))
        total = sum(weights.values())
        return sum(w for t, w in weights.items() if t in covered_terms) / total

    # -- output --------------------------------------------------------------------------------

    def _render(self, chosen: list[_Sentence], contexts: Sequence[ScoredChunk]) -> Answer:
        numbers: dict[int, int] = {}
        citations: list[Citation] = []
        parts: list[str] = []
        for s in chosen:
            chunk = contexts[s.chunk_index].chunk
            n = numbers.setdefault(s.chunk_index, len(numbers) + 1)
            citations.append(Citation(n=n, chunk_id=chunk.id, label=chunk.label, quote=s.text))
            parts.append(f"{' '.join(s.text.split())} [{n}]")
        return Answer(text=" ".join(parts), refused=False, citations=citations, model=self.model_name)

    def _refusal(self, contexts: Sequence[ScoredChunk]) -> Answer:
        nearest = []
        for sc in contexts[:3]:
            if sc.chunk.label not in nearest:
                nearest.append(sc.chunk.label)
        text = REFUSAL_TEXT
        if nearest:
            text += " The nearest provisions I found are " + "; ".join(nearest) + "."
        return Answer(text=text, refused=True, citations=[], model=self.model_name)


def _merge_headings(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Join a bare heading ("(b) Test Data.") to the sentence after it, so neither stands alone."""
    merged: list[tuple[int, int]] = []
    pending: int | None = None
    for a, b in spans:
        if pending is not None:
            a = pending
            pending = None
        if len(text[a:b].split()) <= 5 and b < len(text):
            pending = a
            continue
        merged.append((a, b))
    if pending is not None:
        merged.append((pending, spans[-1][1]))
    return merged
