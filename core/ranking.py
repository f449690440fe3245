"""Rank a collection's provisions for a question: several signals, one learned linear score.

Hybrid search fuses a BM25 list and a dense list by rank. On questions written in users' words it
puts the answering provision first about a third of the time on the EU AI Act: recitals repeat the
rules at length, long provisions embed as the average of their topics, and a message's scenario pulls
its embedding away from what it asks. `ProvisionRanker` scores every provision by

* meaning: cosine of the question to the whole provision, to its heading, to its best sentence, and
  the same for the question's focus pieces (core/segments.py, core/query.py);
* words: the provision's BM25 rank from the index backend (embedded or Weaviate alike);
* role: definition, worked example, recital, commentary, front matter, or operative text (core/roles.py);
* fit: the question asks for a value (a period, an amount ...) and the provision states one; the
  question names a term the provision defines;

and adds them with weights learned from questions written for this project (`hypa ranker train`,
core/ranking_train.py): the weights that make the provisions holding each question's evidence most
likely under a softmax over all provisions. The weights ship in core/ranking_weights.json (model
"provisions", core/linear.py).
"""
from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from core.answer_type import asked_value, states_value
from core.asks import asks_actor, asks_definition, asks_list, defined_terms, leads_a_list
from core.linear import LinearModel
from core.query import QueryPlan
from core.roles import role_of
from core.segments import SegmentIndex, chunk_segments
from core.termstats import TermStats
from core.text import content_terms, framing_terms
from core.types import Chunk, ScoredChunk

FEATURES: tuple[str, ...] = (
    "chunk",  # cosine(question, provision)
    "segment",  # cosine(question, the provision's best sentence)
    "piece_chunk",  # the best cosine of a focus piece to the provision
    "piece_segment",  # ... to the provision's best sentence
    "heading",  # cosine(question, the provision's heading)
    "piece_heading",  # the best cosine of a focus piece to the provision's heading
    "bm25",  # 1 / (1 + BM25 rank), 0 when BM25 does not return it
    "bm25_sqrt",  # sqrt of that: BM25's top few matter, its tail still counts
    "length",  # log(1 + words) / 6
    "definition",  # role indicators (operative text is the baseline)
    "example",
    "recital",
    "commentary",
    "front",
    "states_value",  # the question asks for a value and the provision states one of that kind
    "defines_asked_term",  # the provision defines a term the question uses
    "asked_example",  # the question asks about an example and the provision is one
    "terms",  # share of the question's idf-weighted key terms in the provision
    "segment_terms",  # ... in the provision's best sentence
    "named",  # the question names this provision ("Article 50", "§ 5-303", "Annex III", "Example 3")
    "actor_defined",  # a "who / which authority" question, and the provision defines a term it uses
    "list_asked",  # a "what must it include / calculate" question, and the provision leads a list
    "definition_asked",  # a "what is / what counts as" question, and the provision is a definition
    "listed_subject",  # "is X high-risk?": the item of a list defining that category that best matches X
)
ROLE_FEATURES = ("definition", "example", "recital", "commentary", "front")
BM25_CANDIDATES = 100

# A provision named in a question or a label: "Article 50", "Art. 99", "§ 5-303", "Annex III",
# "Example 3", "Recital 12" -> ("art", "50") ...
_NAMED = re.compile(
    r"\b(?P<kind>Articles?|Art\.|Annex|Example|Recital|Chapter)\s*(?P<num>[0-9]+[a-z]?|[IVXLC]+)\b|§+\s*(?P<sec>\d+-\d+)",
)
# "AI systems referred to in Annex III", "the legislation listed in Annex I": a list the text relies on.
_LIST_REFERENCE = re.compile(r"\b(?:referred\s+to|listed|set\s+out)\s+in\s+Annex\s+([IVXLC]+)\b")
# Heading words that introduce a category rather than name it ("Classification rules for ...", "List of ...").
_CLASSIFYING_HEADING = frozenset(content_terms("classification rules list of"))
# The best and second-best matching items of each list a category relies on.
_LIST_ITEM_SCORES = (1.0, 0.5)
_NAME_KIND = {"article": "art", "articles": "art", "art.": "art", "annex": "annex", "example": "example",
              "recital": "recital", "chapter": "chapter"}


def named_provisions(text: str) -> frozenset[tuple[str, str]]:
    """The provisions a text names, as (kind, number) pairs."""
    out = set()
    for m in _NAMED.finditer(text):
        if m.group("sec"):
            out.add(("section", m.group("sec")))
        else:
            out.add((_NAME_KIND[m.group("kind").lower()], m.group("num")))
    return frozenset(out)


class BM25Search:
    """What the ranker needs from an index backend: BM25 ranks (core.pipeline's ChunkIndex fits
    through `hybrid_search(..., alpha=0)`)."""

    def __init__(self, index) -> None:  # noqa: ANN001 - core.pipeline.ChunkIndex
        self._index = index

    def ranked_ids(self, query: str, collection: str, limit: int) -> list[str]:
        hits = self._index.hybrid_search(query, collection=collection, limit=limit, fusion="rankedFusion", alpha=0.0)
        return [sc.chunk.id for sc in hits]


class FeatureBuilder:
    """The feature matrix (chunks x FEATURES) of one question against one collection."""

    def __init__(self, segments: SegmentIndex) -> None:
        self.segments = segments
        chunks = segments.chunks
        roles = [role_of(c) for c in chunks]
        self._static = np.zeros((len(chunks), len(FEATURES)), dtype=np.float32)
        col = {name: i for i, name in enumerate(FEATURES)}
        for i, (chunk, role) in enumerate(zip(chunks, roles)):
            self._static[i, col["length"]] = math.log1p(len(chunk.text.split())) / 6.0
            if role in ROLE_FEATURES:
                self._static[i, col[role]] = 1.0
        self._defined = [defined_terms(c) if r == "definition" else frozenset() for c, r in zip(chunks, roles)]
        self._names = [named_provisions(c.label) for c in chunks]
        self._lists = np.array([any(leads_a_list(seg) for seg in chunk_segments(c)) for c in chunks], dtype=np.float32)
        self._col = col
        self._category_lists = _CategoryLists(chunks)
        # Which chunks and which segments hold each term, for the key-term coverage signals.
        self._stats = TermStats.from_texts(f"{c.heading} {c.text}" for c in chunks)
        self._chunks_with: dict[str, list[int]] = {}
        for i, chunk in enumerate(chunks):
            for term in set(content_terms(f"{chunk.heading} {chunk.text}")):
                self._chunks_with.setdefault(term, []).append(i)
        self._segments_with: dict[str, list[int]] = {}
        for j, text in enumerate(segments.segment_texts):
            for term in set(content_terms(text)):
                self._segments_with.setdefault(term, []).append(j)

    def defining(self, name: str) -> Chunk | None:
        """The definition that defines `name` ("provider": Art. 3(3)), None when none does or the
        collection defines it more than once (which one is meant is then not known)."""
        wanted = " ".join(content_terms(name))
        found = [self.segments.chunks[i] for i, terms in enumerate(self._defined) if wanted and wanted in terms]
        return found[0] if len(found) == 1 else None

    def build(
        self,
        plan: QueryPlan,
        query_vector: np.ndarray,
        piece_vectors: np.ndarray | None,
        bm25_ids: Sequence[str],
    ) -> np.ndarray:
        col = self._col
        x = self._static.copy()
        s = self.segments.signals(query_vector, piece_vectors)
        x[:, col["chunk"]] = s.chunk
        x[:, col["segment"]] = s.segment
        x[:, col["piece_chunk"]] = s.piece_chunk
        x[:, col["piece_segment"]] = s.piece_segment
        x[:, col["heading"]] = s.heading
        x[:, col["piece_heading"]] = s.piece_heading
        for rank, chunk_id in enumerate(bm25_ids):
            row = self.segments.row_of.get(chunk_id)
            if row is not None:
                x[row, col["bm25"]] = 1.0 / (1 + rank)
                x[row, col["bm25_sqrt"]] = math.sqrt(1.0 / (1 + rank))
        asked = asked_value(plan.text)
        if asked is not None:
            for i, chunk in enumerate(self.segments.chunks):
                if states_value(chunk.text, asked):
                    x[i, col["states_value"]] = 1.0
        question = " " + " ".join(content_terms(plan.text)) + " "
        for i, terms in enumerate(self._defined):
            if any(f" {t} " in question for t in terms):
                x[i, col["defines_asked_term"]] = 1.0
        if " exampl " in question:
            x[:, col["asked_example"]] = x[:, col["example"]]
        self._coverage(plan.question, x)
        asked_names = named_provisions(plan.question)
        if asked_names:
            for i, names in enumerate(self._names):
                if names & asked_names:
                    x[i, col["named"]] = 1.0
        if asks_actor(plan.question):
            x[:, col["actor_defined"]] = x[:, col["defines_asked_term"]]
        if asks_list(plan.question):
            x[:, col["list_asked"]] = self._lists
        if asks_definition(plan.question):
            x[:, col["definition_asked"]] = x[:, col["definition"]]
        if plan.category and piece_vectors is not None and plan.subject in plan.pieces:
            lists = self._category_lists.lists_for(plan.category)
            if lists:
                subject = self.segments.best_segment_cosines(piece_vectors[plan.pieces.index(plan.subject)])
                for rows in lists:
                    best = sorted(rows, key=lambda i: -subject[i])
                    for i, value in zip(best, _LIST_ITEM_SCORES):
                        x[i, col["listed_subject"]] = max(x[i, col["listed_subject"]], value)
        return x

    def _coverage(self, question: str, x: np.ndarray) -> None:
        """The `terms` and `segment_terms` columns: idf-weighted share of the question's key terms."""
        weights = {t: self._stats.idf(t) for t in set(content_terms(question)) - framing_terms(question)}
        total = sum(weights.values())
        if not total:
            return
        in_chunk = np.zeros(len(self.segments.chunks), dtype=np.float32)
        in_segment = np.zeros(len(self.segments.segment_texts), dtype=np.float32)
        for term, w in weights.items():
            in_chunk[self._chunks_with.get(term, [])] += w / total
            in_segment[self._segments_with.get(term, [])] += w / total
        x[:, self._col["terms"]] = in_chunk
        best = np.zeros(len(self.segments.chunks), dtype=np.float32)
        if len(in_segment):
            np.maximum.at(best, self.segments.segment_owner, in_segment)
        x[:, self._col["segment_terms"]] = best


def _heading_subject(heading: str) -> tuple[str, ...]:
    """The heading's word stems after words that introduce a category: what the heading is about
    first ("Classification rules for high-risk AI systems" -> high, risk, ai, system)."""
    terms = content_terms(heading)
    while terms and terms[0] in _CLASSIFYING_HEADING:
        terms = terms[1:]
    return tuple(terms)


class _CategoryLists:
    """The lists that say what belongs to a category, for "is X high-risk?" questions: the provisions
    whose heading is about the category itself (Art. 5 "Prohibited AI practices", Annex III "High-risk
    AI systems referred to in Article 6(2)", Art. 6 "Classification rules for high-risk AI systems"),
    not about something of it ("Obligations of providers of high-risk AI systems"), and the annexes
    those provisions rely on ("... listed in Annex I"). Which item of such a list matches X best is
    what answers the question."""

    def __init__(self, chunks: Sequence) -> None:  # noqa: ANN001 - core.types.Chunk
        self._by_heading: dict[str, list[int]] = {}
        self._heading_terms: dict[str, tuple[str, ...]] = {}
        self._annex: dict[str, list[int]] = {}
        self._references: dict[str, set[str]] = {}
        for i, chunk in enumerate(chunks):
            self._by_heading.setdefault(chunk.heading, []).append(i)
            self._heading_terms.setdefault(chunk.heading, _heading_subject(chunk.heading))
            self._references.setdefault(chunk.heading, set()).update(_LIST_REFERENCE.findall(chunk.text))
            for kind, number in named_provisions(chunk.label):
                if kind == "annex":
                    self._annex.setdefault(number, []).append(i)

    def lists_for(self, category: frozenset[str]) -> list[list[int]]:
        """The rows of each list of provisions that defines `category` (word stems)."""
        headings = [h for h, terms in self._heading_terms.items() if h and frozenset(terms[: len(category)]) == category]
        lists = [self._by_heading[h] for h in headings if len(self._by_heading[h]) > 1]
        for annex in sorted({a for h in headings for a in self._references[h]}):
            if annex in self._annex and self._annex[annex] not in lists:
                lists.append(self._annex[annex])
        return lists


class ProvisionRanker:
    """Scores every provision of a collection; the best first."""

    def __init__(self, model: LinearModel, bm25: BM25Search) -> None:
        if model.features != FEATURES:
            raise ValueError("the provision model must score FEATURES")
        self.model = model
        self.bm25 = bm25

    def rank(
        self,
        plan: QueryPlan,
        collection: str,
        features: FeatureBuilder,
        query_vector: np.ndarray,
        piece_vectors: np.ndarray | None,
        limit: int,
        prior: np.ndarray | None = None,
    ) -> list[ScoredChunk]:
        """The `limit` best chunks; `prior` (one value per chunk of `features`, e.g. precedents'
        votes: core/precedents.py) is added to the learned score."""
        bm25_ids = self.bm25.ranked_ids(plan.text, collection, BM25_CANDIDATES)
        x = features.build(plan, query_vector, piece_vectors, bm25_ids)
        scores = self.model.score(x)
        if prior is not None:
            scores = scores + prior
        order = np.argsort(-scores, kind="stable")[:limit]
        chunks = features.segments.chunks
        return [ScoredChunk(chunks[i], float(scores[i])) for i in order]
