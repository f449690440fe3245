"""Answers without an LLM: quote the sentences of the retrieved provisions that answer the question.

Every sentence of the answer is a verbatim span of a retrieved chunk, followed by its citation number,
so nothing can be invented. When the retrieved provisions do not contain the question's key terms, the
generator abstains and cites nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from core.answer_type import AskedValue, asked_value, describe, states_value
from core.termstats import TermStats
from core.text import QUESTION_FRAMING, content_terms, sentence_spans
from core.types import Answer, Chunk, Citation, ScoredChunk, Turn

REFUSAL_TEXT = "The loaded regulations don't address this question."


@dataclass(frozen=True)
class ExtractiveConfig:
    max_sentences: int = 3
    max_words: int = 130
    # Share of the question's (idf-weighted) key terms the retrieved provisions must contain.
    min_support: float = 0.3
    # Weight of a chunk's retrieval rank in a sentence's score (0 = ignore rank).
    rank_weight: float = 0.35
    # Later sentences must score at least this share of the best one.
    relative_floor: float = 0.5
    # Commentary (preambles, statements of basis and purpose, recitals) explains the rules; the
    # answer should lead with the rule itself, so commentary sentences count for this much.
    commentary_weight: float = 0.8
    # A lead-in that ends in ":" ("... by doing any of the following:") is quoted with the items
    # after it, up to this many words.
    list_words: int = 110
    # With an embedder, the best lexical candidates are re-scored by meaning: score + this weight
    # x cosine(question, sentence). Word overlap finds the right provision; meaning picks the
    # sentence in it that answers (measured on the dev set: docs/RESULTS.md).
    semantic_weight: float = 1.0
    semantic_candidates: int = 10
    # A specific question (at least `specific_terms` key terms) whose closest candidate sentence is
    # less similar than this is about something the provisions do not say ("Who developed the
    # AEDT software?"). Short generic questions ("What is the purpose?") embed far from everything,
    # so the test does not apply to them. Dev set: answerable questions >= 0.58, calibrated with margin.
    min_similarity: float = 0.55
    specific_terms: int = 3
    # A question that asks for a value (how long, how much, how many, the average ..., the
    # sentiment ...; core/answer_type.py) is answered only if some clause states such a value and,
    # with the clause before it ("Such information shall be provided within 30 days"), covers at
    # least this share of the question's other key terms: the value must be about what was asked.
    # Measured (docs/RESULTS.md): answerable value questions >= 0.30; the value is about something
    # else (a complaint deadline, a share of employers, counts of reviews) <= 0.22.
    min_value_binding: float = 0.25
    # Added to the score of a sentence that states the asked value, so the answer leads with it.
    value_weight: float = 0.5


@dataclass(frozen=True)
class _Sentence:
    context_rank: int
    start: int
    end: int
    text: str
    terms: frozenset[str]
    normalised: str  # the content terms in order, for phrase matching

    @classmethod
    def of(cls, context_rank: int, start: int, end: int, text: str) -> "_Sentence":
        terms = content_terms(text)
        return cls(context_rank, start, end, text, frozenset(terms), " ".join(terms))


# Labels of operative provisions: sections, articles, annexes (and their worked examples).
_OPERATIVE_LABEL = re.compile(r"§|\bArt\.|\bAnnex\b")
# Clauses of one sentence: "... before such use; and 3. If not disclosed ..."
_CLAUSE_END = re.compile(r"(?<=;)\s+")
_LIST_ITEM = re.compile(r"^\s*(?:\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]+\)|[•\-–])\s")


class ExtractiveGenerator:
    """Implements core.pipeline.Generator."""

    model_name = "extractive"

    def __init__(
        self,
        term_stats: Callable[[str], TermStats],
        config: ExtractiveConfig = ExtractiveConfig(),
        sentence_vectors: SentenceVectors | None = None,
    ) -> None:
        # term_stats(collection) -> statistics of that collection (cached by the caller).
        self._term_stats = term_stats
        self.config = config
        self._sentence_vectors = sentence_vectors

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: np.ndarray | None = None,
    ) -> Answer:
        chunks = [sc.chunk for sc in contexts if sc.kind == "chunk"]
        if not chunks:
            return self._refusal(contexts)
        stats = self._term_stats(chunks[0].collection)
        weights = {t: stats.idf(t) for t in set(content_terms(question)) - QUESTION_FRAMING}
        sentences = _sentences(chunks)
        if not weights or not sentences:
            return self._refusal(contexts)
        # A term the question quotes names its subject. If the provisions never use it, the law
        # does not regulate that thing; if they do, the subject is found however the rest of the
        # question is worded ("I came across the term 'impact ratio' in a policy...").
        quoted = quoted_terms(question)
        if any(not _uses_phrase(sentences, phrase) for phrase in quoted):
            return self._refusal(contexts)
        if not quoted and _coverage(frozenset().union(*(s.terms for s in sentences)), weights) < self.config.min_support:
            return self._refusal(contexts)
        asked = asked_value(question)
        stating: set[_Sentence] = set()
        if asked is not None:
            stating = self._stating_asked_value(sentences, asked, weights)
            if not stating:
                return self._refusal(contexts, f"They state no {describe(asked)} for it.")
        scored = {s: self._score(s, chunks[s.context_rank], weights) for s in sentences}
        for s in stating:  # the answer leads with the value asked for
            scored[s] += self.config.value_weight
        if self._sentence_vectors is not None and query_vector is not None:
            sentences = sorted(sentences, key=lambda s: -scored[s])[: self.config.semantic_candidates]
            vectors = self._sentence_vectors.get([s.text for s in sentences])
            cosines = vectors @ np.asarray(query_vector, dtype=np.float32)
            if len(weights) >= self.config.specific_terms and float(cosines.max()) < self.config.min_similarity:
                return self._refusal(contexts)
            for s, cosine in zip(sentences, cosines):
                scored[s] += self.config.semantic_weight * float(cosine)
        chosen = self._choose(sentences, scored, weights)
        if not chosen:
            return self._refusal(contexts)
        return self._render([self._with_list(s, chunks) for s in chosen], chunks)

    def _stating_asked_value(
        self, sentences: list[_Sentence], asked: AskedValue, weights: dict[str, float]
    ) -> set[_Sentence]:
        """The sentences with a clause that states the asked kind of value about what was asked."""
        about = {t: w for t, w in weights.items() if t not in asked.words}
        # Provisions (by rank) that mention the question's subject; a value elsewhere is someone else's.
        about_subject = {s.context_rank for s in sentences if asked.subject is None or asked.subject in s.terms}
        stating: set[_Sentence] = set()
        previous: frozenset[str] = frozenset()
        rank = -1
        for s in sentences:
            if s.context_rank != rank:  # the clause before must come from the same provision
                rank, previous = s.context_rank, frozenset()
            if rank not in about_subject:
                continue
            for clause in _CLAUSE_END.split(s.text):
                terms = frozenset(content_terms(clause))
                if states_value(clause, asked) and (
                    not about or _coverage(terms | previous, about) >= self.config.min_value_binding
                ):
                    stating.add(s)
                previous = terms
        return stating

    # -- choosing sentences --------------------------------------------------------------------

    def _score(self, s: _Sentence, chunk: Chunk, weights: dict[str, float]) -> float:
        rank_prior = 1.0 / (1.0 + s.context_rank)
        score = _coverage(s.terms, weights) * (
            (1.0 - self.config.rank_weight) + self.config.rank_weight * rank_prior
        )
        if not _OPERATIVE_LABEL.search(chunk.label):
            score *= self.config.commentary_weight
        return score

    def _choose(
        self, sentences: list[_Sentence], scored: dict[_Sentence, float], weights: dict[str, float]
    ) -> list[_Sentence]:
        """Greedy: the best sentence, then those that add question terms the answer lacks."""
        best = max(sentences, key=lambda s: (scored[s], -s.context_rank, -s.start))
        if scored[best] <= 0.0:
            return []
        chosen = [best]
        covered = set(best.terms)
        words = len(best.text.split())
        floor = self.config.relative_floor * scored[best]
        while len(chosen) < self.config.max_sentences:
            candidates = [
                s
                for s in sentences
                if s not in chosen
                and scored[s] >= floor
                and not any(_near_duplicate(s, c) for c in chosen)
                and words + len(s.text.split()) <= self.config.max_words
            ]
            if not candidates:
                break

            def gain(s: _Sentence) -> tuple[float, int, int]:
                novelty = _coverage(s.terms - covered, weights)
                return (scored[s] + novelty, -s.context_rank, -s.start)

            nxt = max(candidates, key=gain)
            chosen.append(nxt)
            covered |= nxt.terms
            words += len(nxt.text.split())
        return chosen

    def _with_list(self, s: _Sentence, chunks: list[Chunk]) -> _Sentence:
        """A lead-in ending in ':' is quoted together with the list items that follow it."""
        if not s.text.rstrip().endswith(":"):
            return s
        text = chunks[s.context_rank].text
        end = s.end
        budget = self.config.list_words
        for a, b in sentence_spans(text[s.end :]):
            piece = text[s.end + a : s.end + b]
            if not _LIST_ITEM.match(piece) and end != s.end:
                break
            budget -= len(piece.split())
            if budget < 0:
                break
            end = s.end + b
        full = text[s.start : end]
        return _Sentence.of(s.context_rank, s.start, end, full)

    # -- output --------------------------------------------------------------------------------

    def _render(self, chosen: list[_Sentence], chunks: list[Chunk]) -> Answer:
        """Provisions in the order they were chosen (the best first); within one, the law's order."""
        first_use = {s.context_rank: i for i, s in reversed(list(enumerate(chosen)))}
        chosen = sorted(chosen, key=lambda s: (first_use[s.context_rank], s.start))
        numbers: dict[int, int] = {}
        citations: list[Citation] = []
        parts: list[str] = []
        for s in chosen:
            chunk = chunks[s.context_rank]
            n = numbers.setdefault(s.context_rank, len(numbers) + 1)
            citations.append(Citation(n=n, chunk_id=chunk.id, label=chunk.label, quote=s.text))
            parts.append(f"{' '.join(s.text.split())} [{n}]")
        return Answer(text=" ".join(parts), refused=False, citations=citations, model=self.model_name)

    def _refusal(self, contexts: Sequence[ScoredChunk], why: str = "") -> Answer:
        nearest: list[str] = []
        for sc in contexts[:3]:
            if sc.chunk.label not in nearest:
                nearest.append(sc.chunk.label)
        text = f"{REFUSAL_TEXT} {why}" if why else REFUSAL_TEXT
        if nearest:
            text += " The nearest provisions I found are " + "; ".join(nearest) + "."
        return Answer(text=text, refused=True, citations=[], model=self.model_name)


class SentenceVectors(Protocol):
    def get(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised embedding per text (storage/sentence_vectors.py)."""


def candidate_sentences(chunks: Sequence[Chunk]) -> list[str]:
    """The texts the generator may quote from these chunks (ingest embeds them ahead of time)."""
    return [s.text for s in _sentences(list(chunks))]


def _sentences(chunks: list[Chunk]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for rank, chunk in enumerate(chunks):
        text = chunk.text
        for a, b in _merge_headings(text, sentence_spans(text)):
            out.append(_Sentence.of(rank, a, b, text[a:b]))
    return out


def _coverage(terms: frozenset[str] | set[str], weights: dict[str, float]) -> float:
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in terms) / total if total else 0.0


def _near_duplicate(a: _Sentence, b: _Sentence, threshold: float = 0.8) -> bool:
    """The same rule worded for another audience ("to candidates" / "to employees") adds nothing."""
    union = a.terms | b.terms
    return bool(union) and len(a.terms & b.terms) / len(union) >= threshold


# A quoted term: the quote marks must stand outside words, so "I'm" or "law's" never open one.
_QUOTED = re.compile(r"(?<![A-Za-z0-9])[‘“'\"]([^‘’“”'\"]{3,80}?)[’”'\"](?![A-Za-z0-9])")


def quoted_terms(question: str) -> list[str]:
    """The stemmed content of each term the question puts in quotes."""
    found = (" ".join(content_terms(m.group(1))) for m in _QUOTED.finditer(question))
    return [phrase for phrase in found if phrase]


def _uses_phrase(sentences: list[_Sentence], phrase: str) -> bool:
    return any(f" {phrase} " in f" {s.normalised} " for s in sentences)


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
