"""Knowledge-graph retrieval: question -> up to K entities -> walk S hops -> the most relevant facts.

1. Entities matching the question, best first, at most K: exact (the question's words, normalized
   like entity names, contain a name or an abbreviation of it; or it cites a provision), fuzzy
   (rapidfuzz partial ratio of a name within the question) and by meaning (cosine between the
   question vector the pipeline already computed and entity-name vectors, computed once per graph).
2. Breadth-first walk over entity nodes up to depth S (documents are not walked through: every
   section hangs off them).
3. Facts touching a reached node, scored by how much of the question they cover (idf-weighted
   content terms), how close they are to a matched entity, and whether they are about one.
4. The top facts become `ScoredChunk(kind="kg")` lines "subject — predicate — object [label]";
   the chunks they came from are returned too, to be merged with the hybrid results.
"""
from __future__ import annotations

import hashlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import networkx as nx
import numpy as np
from rapidfuzz import fuzz, process

from core.kg import model as m
from core.kg.model import KGData
from core.kg.normalize import entity_key
from core.kg.provisions import find_references, lineage
from core.text import QUESTION_FRAMING, content_terms
from core.types import Chunk, ScoredChunk

EmbedTexts = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class KGSettings:
    max_facts: int = 8  # facts passed to the generator
    max_object_words: int = (
        25  # a literal object longer than this is shortened (dev set: 25 vs 40 words, same recall, fewer tokens)
    )
    fuzzy_cutoff: float = 88.0  # rapidfuzz partial_ratio, 0-100
    embed_cutoff: float = 0.5  # cosine between question and entity name
    generic_entity_weight: float = 0.6  # an undefined one-word entity ("notice") matched exactly
    distance_penalty: float = 0.15  # per hop from a matched entity
    subject_bonus: float = 0.3  # fact is about a matched entity
    definition_bonus: float = 0.2  # a matched term's definition


@dataclass(frozen=True)
class EntityMatch:
    key: str
    name: str
    score: float
    how: str  # "exact" | "fuzzy" | "embedding" | "provision"


@dataclass(frozen=True)
class Fact:
    index: int
    subjects: tuple[str, ...]  # subject display names (one fact may hold for several actors)
    predicate: str
    object: str
    chunk_id: str
    label: str
    score: float

    def line(self, max_words: int) -> str:
        words = self.object.split()
        obj = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
        return f"{' / '.join(self.subjects)} — {self.predicate} — {obj} [{self.label}]"


@dataclass(frozen=True)
class KGResult:
    entities: list[EntityMatch]
    facts: list[Fact]
    contexts: list[ScoredChunk]  # the facts as kind="kg" contexts
    provisions: list[Chunk]  # the chunks the facts came from, in fact order, unique


@dataclass(frozen=True)
class _FactRow:
    subject: str
    predicate: str
    object: str
    object_key: str | None
    chunk_id: str
    label: str
    terms: frozenset[str]


class KGRetriever:
    def __init__(
        self,
        data: KGData,
        graph: nx.MultiDiGraph,
        chunks: Sequence[Chunk],
        *,
        embed: EmbedTexts | None = None,
        settings: KGSettings | None = None,
    ) -> None:
        self.data = data
        self.settings = settings or KGSettings()
        self._embed = embed
        self._chunks = {c.id: c for c in chunks}
        self._names = {k: e.name for k, e in data.entities.items()}
        self._kinds = {k: e.kind for k, e in data.entities.items()}
        self._rows: list[_FactRow] = []
        # The walk follows the graph's entity-to-entity edges in both directions.
        self.graph = graph
        self._neighbours: dict[str, set[str]] = {}
        for u, v in graph.edges():
            if self._walkable(u) and self._walkable(v):
                self._neighbours.setdefault(u, set()).add(v)
                self._neighbours.setdefault(v, set()).add(u)
        for t in data.triplets:
            obj_key = t.object if t.object_is_entity else None
            if t.predicate in m.STRUCTURAL or t.chunk_id not in self._chunks:
                continue
            obj_text = self._names.get(t.object, t.object) if obj_key else t.object
            row = _FactRow(
                subject=t.subject,
                predicate=t.predicate,
                object=obj_text,
                object_key=obj_key,
                chunk_id=t.chunk_id,
                label=t.label,
                terms=frozenset(content_terms(f"{self._names.get(t.subject, t.subject)} {t.predicate} {obj_text}")),
            )
            self._rows.append(row)
        df = Counter(term for row in self._rows for term in row.terms)
        n = max(1, len(self._rows))
        self._idf = {t: math.log(1.0 + n / c) for t, c in df.items()}
        self._max_idf = math.log(1.0 + n)
        self._index_arrays()
        # Names (and aliases) that can be matched in a question: key -> entity key.
        self._lookup: dict[str, str] = {}
        for key, entity in data.entities.items():
            if entity.kind in ("term", "entity"):
                self._lookup.setdefault(key, key)
                for alias in entity.aliases:
                    self._lookup.setdefault(entity_key(alias), key)
        self._longest = max((len(k.split()) for k in self._lookup), default=1)
        self._fuzzy_names = [k for k in self._lookup if len(k) >= 5]
        self._name_keys = [k for k, e in data.entities.items() if e.kind in ("term", "entity")]
        self._name_vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    # -- public --------------------------------------------------------------------------------

    @property
    def fact_count(self) -> int:
        return len(self._rows)

    def retrieve(
        self, question: str, *, keywords: int, depth: int, query_vector: np.ndarray | None = None
    ) -> KGResult:
        if keywords <= 0 or not self._rows:
            return KGResult([], [], [], [])
        entities = self.match_entities(question, keywords, query_vector)
        if not entities:
            return KGResult([], [], [], [])
        distance = self._walk([e.key for e in entities], depth)
        facts = self._rank(question, entities, distance)
        contexts = [self._context(f) for f in facts]
        provisions: list[Chunk] = []
        for f in facts:
            chunk = self._chunks[f.chunk_id]
            if chunk not in provisions:
                provisions.append(chunk)
        return KGResult(entities, facts, [c for c in contexts if c is not None], provisions)

    def match_entities(self, question: str, k: int, query_vector: np.ndarray | None = None) -> list[EntityMatch]:
        best: dict[str, EntityMatch] = {}

        def offer(key: str, score: float, how: str) -> None:
            if key not in best or best[key].score < score:
                best[key] = EntityMatch(key, self._names.get(key, key), score, how)

        words = entity_key(question).split()
        i = 0
        while i < len(words):
            for n in range(min(self._longest, len(words) - i), 0, -1):
                key = self._lookup.get(" ".join(words[i : i + n]))
                if key is not None:
                    generic = self._kinds.get(key) == "entity" and n == 1
                    offer(key, self.settings.generic_entity_weight if generic else 1.0, "exact")
                    i += n
                    break
            else:
                i += 1
        for ref in find_references(question):
            for key in lineage(ref.key):
                if key in self._kinds:
                    offer(key, 1.0, "provision")
                    break
        text = " ".join(words)
        for name, score, _ in process.extract(
            text, self._fuzzy_names, scorer=fuzz.partial_ratio, limit=2 * k, score_cutoff=self.settings.fuzzy_cutoff
        ):
            offer(self._lookup[name], 0.9 * score / 100.0, "fuzzy")
        if query_vector is not None and self._embed is not None and self._name_keys:
            vectors = self._entity_vectors()
            q = np.asarray(query_vector, dtype=np.float32).ravel()
            norm = float(np.linalg.norm(q)) or 1.0
            cos = vectors @ (q / norm)
            for j in np.argsort(-cos)[: 2 * k]:
                if cos[j] >= self.settings.embed_cutoff:
                    offer(self._name_keys[j], 0.8 * float(cos[j]), "embedding")
        ranked = sorted(best.values(), key=lambda e: (-e.score, e.key))
        return ranked[:k]

    # -- internals -----------------------------------------------------------------------------

    def _entity_vectors(self) -> np.ndarray:
        """Entity-name vectors, computed once per graph (i.e. per retriever) on first use."""
        with self._lock:
            if self._name_vectors is None:
                names = [self._names[k] for k in self._name_keys]
                vectors = np.asarray(self._embed(names), dtype=np.float32)  # type: ignore[misc]
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                self._name_vectors = vectors / np.where(norms == 0, 1.0, norms)
            return self._name_vectors

    def _walkable(self, key: str) -> bool:
        kind = self.graph.nodes[key].get("kind", "entity") if key in self.graph else "entity"
        return kind not in ("document", "value")

    def _index_arrays(self) -> None:
        """Integer ids and numpy arrays for the walk and the ranking. On a large graph a hub entity
        ("AI system" in the EU AI Act) reaches most nodes within two hops, and a Python loop over
        every fact it touches cost up to ~20 ms per question; the same arithmetic over arrays
        (walk and ranking together) costs about a millisecond."""
        ids: dict[str, int] = {}
        for row in self._rows:
            ids.setdefault(row.subject, len(ids))
            if row.object_key:
                ids.setdefault(row.object_key, len(ids))
        for node in self._neighbours:
            ids.setdefault(node, len(ids))
        self._node_ids = ids
        # Walkable neighbours in CSR form (node id -> indices[indptr[id]:indptr[id + 1]]).
        indptr = [0]
        indices: list[int] = []
        for node in ids:
            indices.extend(ids[v] for v in self._neighbours.get(node, ()))
            indptr.append(len(indices))
        self._indptr = np.asarray(indptr, dtype=np.int64)
        self._indices = np.asarray(indices, dtype=np.int64)
        self._row_subject = np.asarray([ids[r.subject] for r in self._rows], dtype=np.int64)
        self._row_object = np.asarray([ids[r.object_key] if r.object_key else -1 for r in self._rows], dtype=np.int64)
        self._row_means = np.asarray([r.predicate == m.MEANS for r in self._rows], dtype=bool)
        postings: dict[str, list[int]] = {}
        for i, row in enumerate(self._rows):
            for term in row.terms:
                postings.setdefault(term, []).append(i)
        self._postings = {t: np.asarray(rows, dtype=np.int64) for t, rows in postings.items()}
        groups: dict[tuple[str, str, str], int] = {}
        self._row_group = np.asarray(
            [groups.setdefault((r.predicate, r.object, r.label), len(groups)) for r in self._rows], dtype=np.int64
        )

    def _walk(self, seeds: list[str], depth: int) -> np.ndarray:
        """Hops from the nearest seed for every node id (breadth first, at most `depth`); -1 = not reached."""
        distance = np.full(len(self._node_ids), -1, dtype=np.int64)
        frontier = np.unique(np.asarray([self._node_ids[s] for s in seeds if s in self._node_ids], dtype=np.int64))
        distance[frontier] = 0
        for hop in range(1, depth + 1):
            starts, ends = self._indptr[frontier], self._indptr[frontier + 1]
            counts = ends - starts
            total = int(counts.sum())
            if total == 0:
                break
            # The concatenation of indices[start:end] for every frontier node, without a Python loop.
            offsets = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
            reached = self._indices[offsets]
            frontier = np.unique(reached[distance[reached] < 0])
            distance[frontier] = hop
        return distance

    def _rank(self, question: str, entities: list[EntityMatch], distance: np.ndarray) -> list[Fact]:
        s = self.settings
        q_terms = {t for t in content_terms(question) if t not in QUESTION_FRAMING}
        q_weight = sum(self._idf.get(t, self._max_idf) for t in q_terms) or 1.0
        subject_d = distance[self._row_subject]
        object_d = np.where(self._row_object >= 0, distance[self._row_object], -1)
        # A fact is reached when either end is; its distance is that of the nearer reached end.
        hops = np.where(subject_d < 0, object_d, np.where(object_d < 0, subject_d, np.minimum(subject_d, object_d)))
        candidates = np.flatnonzero(hops >= 0)
        if candidates.size == 0:
            return []
        overlap = np.zeros(len(self._rows))
        for t in q_terms:
            rows = self._postings.get(t)
            if rows is not None:
                overlap[rows] += self._idf[t]
        score = overlap / q_weight - s.distance_penalty * hops
        bonus = np.zeros(len(self._node_ids))
        matched = np.zeros(len(self._node_ids), dtype=bool)
        for e in entities:
            j = self._node_ids.get(e.key)
            if j is not None:
                bonus[j] = s.subject_bonus * e.score
                matched[j] = True
        score = score + bonus[self._row_subject]
        score = score + np.where(matched[self._row_subject] & self._row_means, s.definition_bonus, 0.0)
        ordered = candidates[np.lexsort((candidates, -score[candidates]))]  # best first, then fact order

        facts: list[Fact] = []
        seen: dict[tuple[str, str, str], int] = {}

        def take(i: int) -> None:
            row = self._rows[i]
            same = (row.predicate, row.object, row.label)
            subject = self._names.get(row.subject, row.subject)
            if same in seen:  # one obligation of "employer" and "employment agency": one line
                f = facts[seen[same]]
                if subject not in f.subjects and len(f.subjects) < 3:
                    facts[seen[same]] = replace(f, subjects=(*f.subjects, subject))
            elif len(facts) < s.max_facts:
                seen[same] = len(facts)
                facts.append(Fact(i, (subject,), row.predicate, row.object, row.chunk_id, row.label, float(score[i])))

        done = 0
        for i in ordered.tolist():
            if len(facts) >= s.max_facts:
                break
            take(i)
            done += 1
        if facts and done < ordered.size:
            # Facts are full: later rows only add their subject to a fact with the same statement.
            rest = ordered[done:]
            chosen = self._row_group[[f.index for f in facts]]
            for i in rest[np.isin(self._row_group[rest], chosen)].tolist():
                take(i)
        return facts

    def _context(self, fact: Fact) -> ScoredChunk | None:
        source = self._chunks.get(fact.chunk_id)
        if source is None:
            return None
        line = fact.line(self.settings.max_object_words)
        chunk = Chunk(
            id="kg:" + hashlib.sha1(f"{fact.chunk_id}\x1f{line}".encode()).hexdigest()[:20],
            collection=source.collection,
            doc_id=source.doc_id,
            doc_title=source.doc_title,
            label=source.label,
            heading="Knowledge-graph fact",
            text=line,
            page_start=source.page_start,
            page_end=source.page_end,
            char_start=source.char_start,
            char_end=source.char_end,
        )
        return ScoredChunk(chunk, float(fact.score), kind="kg")
