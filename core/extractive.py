"""Answers without an LLM: say which provision answers, and quote the sentences of it that do.

Every quote is a verbatim span of a retrieved chunk, followed by its citation number, so nothing can be
invented; the only words that are not the law's are the frame naming the provision ("Under 6 RCNY
§ 5-303(c) (Published Results): “…” [1]").

Choosing what to quote. The sentences of the best-ranked provisions compete on
* meaning: cosine of the question to the sentence (vectors stored at ingest),
* words: the share of the question's idf-weighted key terms the sentence holds,
* rank: the provision's place in the ranking (core/ranking.py already weighed the whole provision),
* role: operative text before examples, commentary and recitals (core/roles.py),
* the asked value: a question asking how long / how much / how many leads with the sentence that
  states such a value (core/answer_type.py).
The best sentence leads; up to two more follow when they score close to it and add key terms.

Abstaining by meaning, not by word overlap. Users rarely use the law's words ("careers page" for "the
employment section of its website"), so the share of question words found in the provisions says little
about whether they answer. The generator declines when
* the question asks for a value (a period, an amount, a number, an average, a sentiment) and no
  retrieved clause states one about what was asked ("They state no period or deadline for it."), or
* no sentence of the retrieved provisions is close in meaning to the question (cosine below
  `min_similarity`, set from questions written for this project, docs/RESULTS.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from core.answer_type import AskedValue, asked_value, describe, states_value
from core.roles import role_of
from core.termstats import TermStats
from core.text import QUESTION_FRAMING, content_terms, quotable_spans, sentence_spans
from core.types import Answer, Chunk, Citation, ScoredChunk, Turn

REFUSAL_TEXT = "The loaded regulations don't address this question."


@dataclass(frozen=True)
class ExtractiveConfig:
    # Provisions the answer may quote from, best-ranked first.
    quote_provisions: int = 4
    max_sentences: int = 3
    max_words: int = 120
    # A lead-in that ends in ":" ("... by doing any of the following:") is quoted with the items
    # after it, up to this many words.
    list_words: int = 110
    # Sentence score = semantic x cosine + lexical x key-term coverage + rank x 1/(1 + provision rank)
    # + the role's weight (+ value_weight when it states the asked value).
    semantic_weight: float = 1.0
    lexical_weight: float = 0.5
    rank_weight: float = 0.3
    value_weight: float = 0.5
    role_weights: dict[str, float] = field(
        default_factory=lambda: {
            "operative": 0.0, "definition": 0.0, "example": -0.1, "commentary": -0.2, "recital": -0.25, "front": -0.3,
        }
    )
    # Sentences after the first must score at least this share of the first.
    follow_share: float = 0.8
    # No sentence this close in meaning to the question: the provisions do not answer it.
    min_similarity: float = 0.3
    # Without sentence vectors (no embedding model), the same test by words: the quoted provisions
    # must hold this share of the question's idf-weighted key terms.
    min_support: float = 0.3
    # A clause stating the asked value must (with the clause before it) hold this share of the
    # question's other key terms: the value must be about what was asked. Measured (docs/RESULTS.md):
    # answerable value questions >= 0.30; a value about something else (a complaint deadline, a share
    # of employers, counts of reviews) <= 0.22.
    min_value_binding: float = 0.25


class SentenceVectors(Protocol):
    def get(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised embedding per text (storage/sentence_vectors.py)."""


@dataclass(frozen=True)
class _Sentence:
    rank: int  # the provision's place among the quoted ones
    start: int  # quoted span in the chunk's text (heading lines excluded)
    end: int
    unit: str  # the quotable unit as stored at ingest (for its vector)
    terms: frozenset[str]

    def text(self, chunks: Sequence[Chunk]) -> str:
        return chunks[self.rank].text[self.start : self.end]


# Labels and headings that open a unit: "Article 4", "ANNEX III", "§ 5-301 Bias Audit.", "CHAPTER V".
_HEADING_LINE = re.compile(
    r"^\s*(?:Article\s+\d+[a-z]?|ANNEX\s+[IVXLC]+|Annex\s+[IVXLC]+|CHAPTER\s+[IVXLC]+|SECTION\s+\d+|Section\s+\d+"
    r"|§+\s*[\d-]+\.?)\s*$"
)
_CLAUSE_END = re.compile(r"(?<=;)\s+")
_LIST_ITEM = re.compile(r"^\s*(?:\(?\d{1,2}[.)]|\(?[a-z][.)]|\([ivx]+\)|[•\-–])\s")
_ENUMERATOR = re.compile(r"^\s*(?:\((?P<paren>[a-z]{1,2}|[ivx]{1,5}|\d{1,2})\)|(?P<dot>\d{1,2})\.)\s")
MIN_QUOTE_WORDS = 4
MAX_HEADING_WORDS = 10


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
        chunks = [sc.chunk for sc in contexts if sc.kind == "chunk"][: self.config.quote_provisions]
        if not chunks:
            return self._refusal(contexts)
        stats = self._term_stats(chunks[0].collection)
        weights = {t: stats.idf(t) for t in set(content_terms(question)) - QUESTION_FRAMING}
        sentences = _sentences(chunks)
        if not sentences:
            return self._refusal(contexts)
        cosines = self._cosines(sentences, query_vector)
        asked = asked_value(question)
        stating: set[_Sentence] = set()
        if asked is not None:
            stating = self._stating_asked_value(sentences, chunks, asked, weights)
            if not stating:
                return self._refusal(contexts, f"They state no {describe(asked)} for it.")
        if cosines is not None:
            if float(max(cosines.values())) < self.config.min_similarity:
                return self._refusal(contexts)
        elif _coverage(frozenset().union(*(s.terms for s in sentences)), weights) < self.config.min_support:
            return self._refusal(contexts)
        asks_example = "exampl" in weights
        scored = {s: self._score(s, chunks, weights, cosines, asks_example) for s in sentences}
        for s in stating:  # the answer leads with the value asked for
            scored[s] += self.config.value_weight
        chosen = self._choose(sentences, scored, weights, chunks)
        return self._render([self._with_list(s, chunks) for s in chosen], chunks)

    # -- signals -------------------------------------------------------------------------------

    def _cosines(self, sentences: list[_Sentence], query_vector: np.ndarray | None) -> dict[_Sentence, float] | None:
        if self._sentence_vectors is None or query_vector is None:
            return None
        vectors = self._sentence_vectors.get([s.unit for s in sentences])
        values = vectors @ np.asarray(query_vector, dtype=np.float32)
        return {s: float(v) for s, v in zip(sentences, values)}

    def _score(
        self,
        s: _Sentence,
        chunks: list[Chunk],
        weights: dict[str, float],
        cosines: dict[_Sentence, float] | None,
        asks_example: bool,
    ) -> float:
        c = self.config
        score = c.lexical_weight * _coverage(s.terms, weights) + c.rank_weight / (1.0 + s.rank)
        role = role_of(chunks[s.rank])
        if role != "example" or not asks_example:  # a question about the example wants the example
            score += c.role_weights.get(role, 0.0)
        if cosines is not None:
            score += c.semantic_weight * cosines[s]
        return score

    def _stating_asked_value(
        self,
        sentences: list[_Sentence],
        chunks: list[Chunk],
        asked: AskedValue,
        weights: dict[str, float],
    ) -> set[_Sentence]:
        """The sentences with a clause that states the asked kind of value about what was asked."""
        about = {t: w for t, w in weights.items() if t not in asked.words}
        # Provisions that mention the question's subject; a value elsewhere is someone else's.
        about_subject = {
            s.rank for s in sentences if asked.subject is None or asked.subject in s.terms
        }
        stating: set[_Sentence] = set()
        previous: frozenset[str] = frozenset()
        rank = -1
        for s in sentences:
            if s.rank != rank:  # the clause before must come from the same provision
                rank, previous = s.rank, frozenset()
            if rank not in about_subject:
                continue
            for clause in _CLAUSE_END.split(s.text(chunks)):
                terms = frozenset(content_terms(clause))
                if states_value(clause, asked) and (
                    not about or _coverage(terms | previous, about) >= self.config.min_value_binding
                ):
                    stating.add(s)
                previous = terms
        return stating

    # -- choosing sentences --------------------------------------------------------------------

    def _choose(
        self, sentences: list[_Sentence], scored: dict[_Sentence, float], weights: dict[str, float], chunks: list[Chunk]
    ) -> list[_Sentence]:
        """The best sentence, then those that score close to it and add key terms the answer lacks."""
        best = max(sentences, key=lambda s: (scored[s], -s.rank, -s.start))
        chosen = [best]
        covered = set(best.terms)
        words = len(best.text(chunks).split())
        floor = self.config.follow_share * scored[best]
        while len(chosen) < self.config.max_sentences:
            candidates = [
                s
                for s in sentences
                if s not in chosen
                and scored[s] >= floor
                and not any(_near_duplicate(s, c) for c in chosen)
                and words + len(s.text(chunks).split()) <= self.config.max_words
            ]
            if not candidates:
                break

            def gain(s: _Sentence) -> tuple[float, int, int]:
                novelty = _coverage(s.terms - covered, weights)
                return (scored[s] + novelty, -s.rank, -s.start)

            nxt = max(candidates, key=gain)
            chosen.append(nxt)
            covered |= nxt.terms
            words += len(nxt.text(chunks).split())
        return chosen

    def _with_list(self, s: _Sentence, chunks: list[Chunk]) -> _Sentence:
        """A lead-in ending in ':' is quoted together with the list items that follow it."""
        text = chunks[s.rank].text
        if not text[s.start : s.end].rstrip().endswith(":"):
            return s
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
        return _Sentence(s.rank, s.start, end, s.unit, frozenset(content_terms(text[s.start : end])))

    # -- output --------------------------------------------------------------------------------

    def _render(self, chosen: list[_Sentence], chunks: list[Chunk]) -> Answer:
        """One frame per provision, in the order they were chosen (the best first); within a
        provision, its sentences in the law's order."""
        first_use = {s.rank: i for i, s in reversed(list(enumerate(chosen)))}
        chosen = sorted(chosen, key=lambda s: (first_use[s.rank], s.start))
        numbers: dict[int, int] = {}
        citations: list[Citation] = []
        parts: list[str] = []
        for rank in dict.fromkeys(s.rank for s in chosen):
            chunk = chunks[rank]
            n = numbers.setdefault(rank, len(numbers) + 1)
            quotes = [s.text(chunks) for s in chosen if s.rank == rank]
            for quote in quotes:
                citations.append(Citation(n=n, chunk_id=chunk.id, label=chunk.label, quote=quote))
            label = provision_name(chunk, quotes[0])
            body = " … ".join(" ".join(q.split()) for q in quotes)
            parts.append(f"{'Under' if not parts else 'And under'} {label}: “{body}” [{n}]")
        return Answer(text="\n".join(parts), refused=False, citations=citations, model=self.model_name)

    def _refusal(self, contexts: Sequence[ScoredChunk], why: str = "") -> Answer:
        nearest: list[str] = []
        for sc in contexts[:3]:
            if sc.chunk.label not in nearest:
                nearest.append(sc.chunk.label)
        text = f"{REFUSAL_TEXT} {why}" if why else REFUSAL_TEXT
        if nearest:
            text += " The nearest provisions I found are " + "; ".join(nearest) + "."
        return Answer(text=text, refused=True, citations=[], model=self.model_name)


def provision_name(chunk: Chunk, quote: str) -> str:
    """How the answer names a provision in words: its citation label, narrowed to the item the quote
    opens with ("Annex III(4)" quoting "(a) AI systems ..." -> "Annex III(4)(a)"; "Art. 9(1)–(2)"
    quoting "2. The risk ..." -> "Art. 9(2)"), with its heading ("(Penalties)")."""
    label = chunk.label
    m = _ENUMERATOR.match(quote)
    if m:
        item = m.group("paren") or m.group("dot")
        ranged = re.match(r"^(.*?)\(([^()]+)\)–\(([^()]+)\)$", label)
        if ranged and item in (ranged.group(2), ranged.group(3)):
            label = f"{ranged.group(1)}({item})"
        elif not label.endswith(f"({item})") and f"({item})" not in label and not ranged:
            label = f"{label}({item})"
    heading = chunk.heading.strip().rstrip(".`")
    return f"{label} ({heading})" if heading else label


def candidate_sentences(chunks: Sequence[Chunk]) -> list[str]:
    """The units the generator may quote from these chunks (ingest embeds them ahead of time)."""
    return [chunk.text[a:b] for chunk in chunks for a, b in quotable_spans(chunk.text)]


def _sentences(chunks: list[Chunk]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for rank, chunk in enumerate(chunks):
        text = chunk.text
        for a, b in quotable_spans(text):
            start = _after_heading_lines(text, a, b, chunk.heading)
            quote = text[start:b]
            if len(quote.split()) < MIN_QUOTE_WORDS or not any(ch.islower() for ch in quote):
                continue  # a page number, a running header, a bare heading
            out.append(_Sentence(rank, start, b, text[a:b], frozenset(content_terms(quote))))
    return out


def _after_heading_lines(text: str, a: int, b: int, heading: str) -> int:
    """Where the sentence proper starts: past the unit's label and heading lines ("Article 4\\nAI
    literacy\\nProviders and deployers ..." quotes from "Providers")."""
    start = a
    heading_key = " ".join(heading.split()).lower().rstrip(".")
    while True:
        newline = text.find("\n", start, b)
        if newline < 0:
            return start
        line = text[start:newline].strip()
        key = " ".join(line.split()).lower().rstrip(".")
        if line and (
            _HEADING_LINE.match(line)
            or (heading_key and key == heading_key)
            or (line.startswith("§") and len(line.split()) <= MAX_HEADING_WORDS)  # "§ 5-301 Bias Audit."
        ):
            start = newline + 1
            continue
        return start


def _coverage(terms: frozenset[str] | set[str], weights: dict[str, float]) -> float:
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in terms) / total if total else 0.0


def _near_duplicate(a: _Sentence, b: _Sentence, threshold: float = 0.8) -> bool:
    """The same rule worded for another audience ("to candidates" / "to employees") adds nothing."""
    union = a.terms | b.terms
    return bool(union) and len(a.terms & b.terms) / len(union) >= threshold
