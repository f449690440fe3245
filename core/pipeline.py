"""The conversation pipeline every front end uses: question (+ thread) -> retrieval -> cited answer.

Stages are small components with explicit inputs and outputs (Haystack-style); this module only
sequences them, validates the question and times each stage.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np

from core.adaptive import FixedPolicy, ParamPolicy
from core.annex_content import asks_for_content, with_annex_content
from core.comparison import Comparison, compared
from core.context_budget import select_contexts
from core.followup import asking_part, key_terms, new_topic
from core.fusion import reciprocal_rank_fusion
from core.glossary_provisions import folded, stating, with_stating
from core.index import ChunkIndex
from core.language import LanguageDetector
from core.lexicon import Lexicon, NormalisedQuestion
from core.precedents import Precedents
from core.query import QueryPlan
from core.ranking import BM25_CANDIDATES, FeatureBuilder, ProvisionRanker
from core.rerank import NoReranker, Reranker
from core.rewriter import OfflineRewriter, QueryRewriter
from core.text import word_runs, word_set
from core.thread_units import last_answer_units, unit_of_label
from core.types import Answer, Chunk, PipelineResult, RetrievalParams, ScoredChunk, Turn, with_scores_of_places

log = logging.getLogger(__name__)


class GraphRetrieval(Protocol):
    """What the knowledge-graph stage returns (core/kg/retriever.KGResult fits)."""

    contexts: list[ScoredChunk]  # facts, kind="kg"
    provisions: list  # the Chunks the facts came from


class GraphRetriever(Protocol):
    def retrieve(
        self, question: str, *, keywords: int, depth: int, query_vector: np.ndarray | None = None
    ) -> GraphRetrieval: ...


class Generator(Protocol):
    """Writes the answer from the retrieved contexts (extractive now; an LLM plugs in here)."""

    def generate(
        self,
        question: str,
        contexts: Sequence[ScoredChunk],
        history: Sequence[Turn] = (),
        query_vector: np.ndarray | None = None,
        asked: str | None = None,
        asking_vectors: np.ndarray | None = None,
    ) -> Answer:
        """`question` is the standalone English question; `query_vector` its embedding, already
        computed for retrieval (may be None); `asked` the user's own words when they are in another
        language (an LLM answers in that language; the extractive generator cannot);
        `asking_vectors` one row per part of the question, each embedded on its own (its focus
        pieces, or a follow-up's own words), also already computed (may be None)."""


@dataclass(frozen=True)
class QuestionLimits:
    max_chars: int = 4000


@dataclass(frozen=True)
class ProvisionSearch:
    """The learned provision ranking (RetrievalParams.ranking == "provisions") and what it reads:
    each collection's lexicon (spelling, abbreviations) and its segment features, both built once
    per collection version by the caller."""

    ranker: ProvisionRanker
    features: Callable[[str], FeatureBuilder]
    lexicon: Callable[[str], Lexicon]
    # collection -> its precedents (core/precedents.py), aligned with features(collection)'s chunks;
    # None: no precedents.
    precedents: Callable[[str], Precedents] | None = None


@dataclass(frozen=True)
class Retrieved:
    """What retrieval hands the generator for one question."""

    plan: QueryPlan
    contexts: list[ScoredChunk]
    query_vector: np.ndarray | None  # what the answer's sentences are judged by (see FOLLOW_UP_ANSWER_WEIGHT)
    queries: list[str]  # the texts searched
    params: RetrievalParams
    complexity: int | None
    language: str = "en"  # of the question as asked (core/rewriter.Rewrite.language)
    # The parts of the question, each embedded on its own: the focus pieces (core/query.py), or a
    # follow-up's own words without the thread.
    asking_vectors: np.ndarray | None = None


# What an offline answer says to a question in another language (core/language.py).
NOT_ENGLISH = (
    "I can only answer questions written in English without an AI model, and this one looks {language}. "
    "Please ask it in English (the regulations are searched in English)."
)


# The share of the smaller of two same-labelled chunks' word runs the other must hold for them to be
# copies: the copies in the collections hold all of them; the overlapping halves of a paragraph cut
# in two (Art. 26(10)) hold close to nine in ten.
COPY_SHARE = 0.95


def drop_near_duplicates(results: Sequence[ScoredChunk], threshold: float = 0.9) -> list[ScoredChunk]:
    """Keep the best-ranked copy of chunks that say the same: word sets overlapping by `threshold`
    (Jaccard) or more, or one provision's two copies (the law as enacted and as codified, cut at
    different places: "Bias audit" alone and "Bias audit; Employment decision") where one holds
    nearly all of the other's runs of words (COPY_SHARE). Runs, not words: the two halves of a long
    paragraph share most of their words but not their sentences. Across provisions only the Jaccard
    test applies: different provisions often repeat a short one's wording (Art. 53(2) and 54(6))."""
    kept: list[tuple[ScoredChunk, frozenset[str]]] = []
    for sc in results:
        words = word_set(sc.chunk.text)
        if any(_same_text(sc, words, other, other_words, threshold) for other, other_words in kept):
            continue
        kept.append((sc, words))
    return [sc for sc, _ in kept]


def _same_text(
    a: ScoredChunk, a_words: frozenset[str], b: ScoredChunk, b_words: frozenset[str], threshold: float
) -> bool:
    """Whether two retrieved chunks say the same (see drop_near_duplicates)."""
    if _jaccard(a_words, b_words) >= threshold:
        return True
    if a.chunk.label != b.chunk.label:
        return False
    a_runs, b_runs = word_runs(a.chunk.text), word_runs(b.chunk.text)
    smaller = min(len(a_runs), len(b_runs))
    return smaller > 0 and len(a_runs & b_runs) / smaller >= COPY_SHARE


def _without_added_duplicates(
    fused: Sequence[ScoredChunk], added: set[str], threshold: float = 0.9
) -> list[ScoredChunk]:
    """`fused` in order, without chunks that nearly duplicate a kept one when either of the two is
    a graph addition (the hybrid list is already de-duplicated among itself)."""
    kept: list[ScoredChunk] = []
    for sc in fused:
        rivals = kept if sc.chunk.id in added else [k for k in kept if k.chunk.id in added]
        if any(_jaccard(word_set(sc.chunk.text), word_set(k.chunk.text)) >= threshold for k in rivals):
            continue
        kept.append(sc)
    return kept


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
        params: RetrievalParams | ParamPolicy,
        *,
        default_collection: str,
        count_tokens: Callable[[str], int],
        limits: QuestionLimits = QuestionLimits(),
        embed_queries: Callable[[list[str]], np.ndarray] | None = None,
        rewriter: QueryRewriter | None = None,
        reranker: Reranker | None = None,
        rerank_candidates: int = 20,
        knowledge_graph: Callable[[str], GraphRetriever | None] | None = None,
        provisions: ProvisionSearch | None = None,
        language: LanguageDetector | None = None,
        context_tokens: Mapping[str, int] | None = None,
    ) -> None:
        self.index = index
        self.generator = generator
        self.policy: ParamPolicy = FixedPolicy(params) if isinstance(params, RetrievalParams) else params
        self.default_collection = default_collection
        # Chunks are immutable and few; tokenizing one costs ~0.4 ms and each is counted for the budget
        # and for usage, question after question: remember the counts (bounded, per pipeline).
        self.count_tokens = lru_cache(maxsize=8192)(count_tokens)
        self.limits = limits
        self.embed_queries = embed_queries
        self.rewriter: QueryRewriter = rewriter or OfflineRewriter()
        self.reranker = reranker if reranker is not None and not isinstance(reranker, NoReranker) else None
        self.rerank_candidates = rerank_candidates
        self.knowledge_graph = knowledge_graph  # collection -> its graph retriever (None: no graph)
        self.provisions = provisions
        # Set for offline answering only: with an LLM the rewriter translates the question instead.
        self.language = language
        # collection -> token budget of the default config, where a collection needs its own.
        self.context_tokens = dict(context_tokens or {})
        # collection -> what its chunks were read as, once per collection version (`_readings`)
        self._chunk_readings: dict[str, _ChunkReadings] = {}

    def answer(
        self, question: str, history: Sequence[Turn] = (), *, collection: str | None = None
    ) -> PipelineResult:
        clock = _Stopwatch()
        question = question.strip()
        problem = self._validate(question)
        if problem:
            return self._unanswered(question, problem, INVALID_QUESTION, clock)
        collection = collection or self.default_collection
        t = time.perf_counter()
        if self.language is not None:
            guess = self.language.detect(question)
            if not guess.english:
                text = NOT_ENGLISH.format(language=f"like {guess.name}")
                return self._unanswered(question, text, f"language: {guess.code}", clock)
        found = self.retrieve(question, history, collection=collection, clock=clock)
        t = time.perf_counter()
        asked = question if found.language != "en" else None
        answer = self.generator.generate(
            found.plan.question, found.contexts, history, found.query_vector, asked=asked, asking_vectors=found.asking_vectors
        )
        answer.usage.context_tokens = sum(self.count_tokens(c.chunk.text) for c in found.contexts)  # facts too
        clock.lap("generate", t)
        return PipelineResult(
            question=question,
            answer=answer,
            contexts=list(found.contexts),
            queries=found.queries,
            params=found.params,
            complexity=found.complexity,
            timings_ms=clock.total(),
        )

    def retrieve(
        self,
        question: str,
        history: Sequence[Turn] = (),
        *,
        collection: str | None = None,
        clock: _Stopwatch | None = None,
    ) -> Retrieved:
        """Everything `answer` does before the generator: rewrite, plan, embed, choose the
        parameters, rank and select the contexts. ValueError (saying why) for an empty, too long or
        wordless question."""
        problem = self._validate(question.strip())
        if problem:
            raise ValueError(problem)
        clock = clock or _Stopwatch()
        collection = collection or self.default_collection
        t = time.perf_counter()
        # One rewrite for the most queries any question may get; the label then decides how many are used.
        rewrite = self.rewriter.rewrite(question.strip(), history, self.policy.max_queries - 1)
        plan = self._plan(rewrite.standalone, collection)
        t = clock.lap("rewrite", t)
        asking = asking_part(rewrite.standalone, history)
        texts = [plan.text, *rewrite.sub_queries, *plan.pieces, *([asking] if asking else [])]
        vectors = self.embed_queries(texts) if self.embed_queries else None
        vectors, follow_up = _follow_up_vector(vectors, asking)
        t = clock.lap("embed", t)
        params, complexity = self.policy.select(plan.text, None if vectors is None else vectors[0])
        if params.config == "default" and collection in self.context_tokens:
            params = replace(params, max_context_tokens=self.context_tokens[collection])
        if self.reranker is not None:
            params = replace(params, rerank=True)
        t = clock.lap("classify", t)
        queries = [plan.text, *rewrite.sub_queries[: params.q - 1]]
        # Search leans toward a follow-up's own part, the answer more so when that part names
        # something: the question before it says what is talked about, the follow-up what is asked
        # ("And for SMEs?"); "What are they?" names nothing to lean toward.
        answer_weight = FOLLOW_UP_ANSWER_WEIGHT if asking and key_terms(asking) else FOLLOW_UP_WEIGHT
        answer_vector = None if vectors is None else _leaning_on(vectors[0], follow_up, answer_weight)
        if vectors is not None and follow_up is not None:
            vectors = vectors.copy()
            vectors[0] = _leaning_on(vectors[0], follow_up, FOLLOW_UP_WEIGHT)
        query_vector = None if vectors is None else vectors[0]
        asking_vectors = _asking_vectors(vectors, follow_up, 1 + len(rewrite.sub_queries))
        if params.ranking == "provisions" and self.provisions is not None and vectors is not None and query_vector is not None:
            pieces = vectors[1 + len(rewrite.sub_queries) :]
            # a follow-up asks on about what the thread's last answer cited (core/thread_units.py)
            cited = last_answer_units(history) if asking else frozenset()
            contexts = self._rank_provisions(plan, collection, query_vector, pieces, params, cited)
            if asking and new_topic(rewrite.standalone, asking):
                contexts = self._with_follow_up_best(asking, contexts, collection, params, query_vector)
            comparison = compared(plan.question)
            if comparison is not None:
                # a side's best provision may be another copy of one already ranked
                contexts = drop_near_duplicates(self._with_each_side(comparison, contexts, collection, params))
            if plan.expansions:
                # the one provision that states the law's words for a user's phrase (core/glossary_provisions.py)
                contexts = with_stating(contexts, self._stating(collection, [law for _, law in plan.expansions]))
            if asks_for_content(asking or plan.question):
                # "the information set out in Annex V": what the question asks for is in the annex
                features = self.provisions.features(collection)
                contexts = with_annex_content(contexts, features.segments.chunks, self._units_of(collection, features))
        else:
            contexts = self._retrieve(queries, vectors, params, collection)
        t = clock.lap("retrieve", t)
        if self.reranker is not None:
            contexts = self.reranker.rerank(plan.text, contexts, params.top_k)
            t = clock.lap("rerank", t)
        if params.kg and self.knowledge_graph is not None:
            contexts = self._with_graph(plan.text, contexts, params, collection, query_vector)
            clock.lap("kg", t)
        else:
            contexts = select_contexts(contexts, params, self.count_tokens)  # top_k, token budget, novelty
        return Retrieved(plan, contexts, answer_vector, queries, params, complexity, rewrite.language, asking_vectors)

    def provision_features(
        self, question: str, history: Sequence[Turn] = (), *, collection: str | None = None
    ) -> tuple[np.ndarray, list[str]]:
        """The ranker's feature matrix for a question, computed exactly as `answer` computes it, and
        the text of the provision each row describes (for training: core/ranking_train.py)."""
        if self.provisions is None or self.embed_queries is None:
            raise RuntimeError("this pipeline has no provision ranking")
        collection = collection or self.default_collection
        rewrite = self.rewriter.rewrite(question.strip(), history, 0)
        plan = self._plan(rewrite.standalone, collection)
        asking = asking_part(rewrite.standalone, history)
        embedded = self.embed_queries([plan.text, *plan.pieces, *([asking] if asking else [])])
        vectors, follow_up = _follow_up_vector(embedded, asking)
        assert vectors is not None
        features = self.provisions.features(collection)
        bm25_ids = self.provisions.ranker.bm25.ranked_ids(plan.text, collection, BM25_CANDIDATES)
        query_vector = _leaning_on(vectors[0], follow_up, FOLLOW_UP_WEIGHT)
        return features.build(plan, query_vector, vectors[1:], bm25_ids), [c.text for c in features.segments.chunks]

    def _unanswered(self, question: str, text: str, note: str, clock: _Stopwatch) -> PipelineResult:
        """A reply that is not an answer (an empty question, one in another language): nothing searched."""
        params, _ = self.policy.select(question, None)
        return PipelineResult(
            question=question,
            answer=Answer(text=text, refused=True, model="none", note=note),
            contexts=[],
            queries=[],
            params=params,
            timings_ms=clock.total(),
        )

    def _plan(self, standalone: str, collection: str) -> QueryPlan:
        """The standalone question with the collection's spelling and abbreviations applied, and its
        focus pieces (only the provision ranking searches the pieces)."""
        if self.provisions is None:
            return QueryPlan(text=standalone)
        try:
            normalised = self.provisions.lexicon(collection).normalise(standalone)
        except Exception:  # a broken lexicon must not cost the answer: search the words as typed
            log.exception("lexicon failed for collection %r; searching the question as typed", collection)
            normalised = NormalisedQuestion(standalone)
        return QueryPlan.of(normalised)

    def _rank_provisions(
        self,
        plan: QueryPlan,
        collection: str,
        query_vector: np.ndarray,
        piece_vectors: np.ndarray,
        params: RetrievalParams,
        cited: frozenset[str] = frozenset(),
    ) -> list[ScoredChunk]:
        """The best provisions for `plan`; those of the units in `cited` (the thread's last answer's)
        lifted by THREAD_UNIT_WEIGHT."""
        assert self.provisions is not None
        pool = max(params.top_k * 3, self.rerank_candidates if self.reranker is not None else 0, 30)
        features = self.provisions.features(collection)
        prior: np.ndarray | None = None
        if self.provisions.precedents is not None:
            precedents = self.provisions.precedents(collection)
            prior = precedents.config.weight * precedents.votes(query_vector)
        if cited:
            lean = THREAD_UNIT_WEIGHT * np.array([u in cited for u in self._units_of(collection, features)], dtype=np.float32)
            prior = lean if prior is None else prior + lean
        ranked = self.provisions.ranker.rank(plan, collection, features, query_vector, piece_vectors, pool, prior)
        return drop_near_duplicates(ranked)

    def _stating(self, collection: str, law_words: list[str]) -> list[Chunk]:
        """The chunks stating any of `law_words` that few chunks state (core/glossary_provisions.py)."""
        assert self.provisions is not None
        features = self.provisions.features(collection)
        return stating(law_words, features.segments.chunks, self._readings(collection, features).folded)

    def _units_of(self, collection: str, features: FeatureBuilder) -> list[str | None]:
        """The unit of each chunk `features` ranks (core/thread_units.py)."""
        return self._readings(collection, features).units

    def _readings(self, collection: str, features: FeatureBuilder) -> "_ChunkReadings":
        """What the chunks `features` ranks were read as, read once per collection version."""
        known = self._chunk_readings.get(collection)
        if known is None or known.features is not features:
            chunks = features.segments.chunks
            known = _ChunkReadings(features, [unit_of_label(c.label) for c in chunks], [folded(c.text) for c in chunks])
            self._chunk_readings[collection] = known
        return known

    def _with_follow_up_best(
        self, asking: str, ranked: list[ScoredChunk], collection: str, params: RetrievalParams, thread_vector: np.ndarray
    ) -> list[ScoredChunk]:
        """`ranked` with the best provision for a short follow-up's own part ("and the penalties?"),
        ranked on its own words and leaning toward the thread, second when it is not among the first
        few: searched together with a long question before it, what the follow-up names is one word
        of many and its provision can miss the context altogether."""
        assert self.embed_queries is not None
        plan = self._plan(asking, collection)
        vectors = self.embed_queries([plan.text, *plan.pieces])
        own = _leaning_on(vectors[0], thread_vector, FOLLOW_UP_THREAD_WEIGHT)
        found = self._rank_provisions(plan, collection, own, vectors[1:], params)
        if not found or any(sc.chunk.id == found[0].chunk.id for sc in ranked[:FOLLOW_UP_BEST_KEPT]):
            return ranked
        order = [sc for sc in ranked if sc.chunk.id != found[0].chunk.id]
        order.insert(1, found[0])
        return with_scores_of_places(order, ranked)

    def _with_each_side(
        self, comparison: Comparison, ranked: list[ScoredChunk], collection: str, params: RetrievalParams
    ) -> list[ScoredChunk]:
        """`ranked` with the best provision for each side of the comparison, ranked on its own,
        placed right after the best one overall. Scores stay those of the places (a provision
        moved up takes the score of the place it takes), so they still fall with the rank."""
        assert self.embed_queries is not None
        # Two names the collection defines are told apart by their definitions ("provider vs
        # deployer": Art. 3(3) beside Art. 3(4), not a duty that names providers).
        if self.provisions is not None and comparison.between_names():
            features = self.provisions.features(collection)
            defining = [features.defining(side) for side in (comparison.first, comparison.second)]
            if all(defining):
                return with_scores_of_places(_after_best(ranked, [ScoredChunk(c, 0.0) for c in defining if c]), ranked)
        plans = [self._plan(query, collection) for query in comparison.side_queries()]
        vectors = self.embed_queries([text for p in plans for text in (p.text, *p.pieces)])
        best: list[ScoredChunk] = []
        at = 0
        for side in plans:
            own = vectors[at : at + 1 + len(side.pieces)]
            at += 1 + len(side.pieces)
            found = self._rank_provisions(side, collection, own[0], own[1:], params)
            if found:
                best.append(found[0])
        return with_scores_of_places(_after_best(ranked, best), ranked)

    def _retrieve(
        self, queries: list[str], vectors: np.ndarray | None, params: RetrievalParams, collection: str
    ) -> list[ScoredChunk]:
        """Hybrid search per query, every list fused by reciprocal rank, duplicates dropped.

        More than k candidates are kept: the same provision often appears in two documents (the
        law as enacted and as codified), and a reranker needs a pool to choose from.
        """
        pool = max(params.top_k * 2, self.rerank_candidates if self.reranker is not None else 0)
        lists = [
            self.index.hybrid_search(
                query,
                collection=collection,
                limit=pool,
                fusion=params.fusion,  # type: ignore[arg-type]
                alpha=params.alpha,
                vector=None if vectors is None else vectors[i],
            )
            for i, query in enumerate(queries)
        ]
        if len(lists) == 1:
            found = lists[0]
        else:
            by_id = {sc.chunk.id: sc.chunk for hits in lists for sc in hits}
            fused = reciprocal_rank_fusion([[(sc.chunk.id, sc.score) for sc in hits] for hits in lists])
            found = [ScoredChunk(by_id[chunk_id], score) for chunk_id, score in fused[:pool]]
        return drop_near_duplicates(found)

    def _with_graph(
        self,
        question: str,
        ranked: list[ScoredChunk],
        params: RetrievalParams,
        collection: str,
        query_vector: np.ndarray | None,
    ) -> list[ScoredChunk]:
        """The top_k of the hybrid ranking fused (RRF) with the provisions the graph's facts came
        from, followed by the facts themselves (kind "kg")."""
        try:
            graph = self.knowledge_graph(collection) if self.knowledge_graph is not None else None
            if graph is None:
                return select_contexts(ranked, params, self.count_tokens)
            found = graph.retrieve(
                question, keywords=params.kg_keywords, depth=params.kg_depth, query_vector=query_vector
            )
        except Exception:  # the graph only adds to the hybrid results: a fault in it must not cost the answer
            log.exception("knowledge-graph stage failed for collection %r; answering from the hybrid results", collection)
            return select_contexts(ranked, params, self.count_tokens)
        # A token budget covers the whole context: the facts' lines come out of it first.
        if params.max_context_tokens > 0:
            fact_tokens = sum(self.count_tokens(sc.chunk.text) for sc in found.contexts)
            params = replace(params, max_context_tokens=max(1, params.max_context_tokens - fact_tokens))
        if not found.provisions:
            return [*select_contexts(ranked, params, self.count_tokens), *found.contexts]
        by_id = {sc.chunk.id: sc for sc in ranked}
        added = {c.id for c in found.provisions if c.id not in by_id}
        for chunk in found.provisions:
            by_id.setdefault(chunk.id, ScoredChunk(chunk, 0.0))
        fused = reciprocal_rank_fusion(
            [[(sc.chunk.id, sc.score) for sc in ranked], [(c.id, 0.0) for c in found.provisions]]
        )
        candidates = [ScoredChunk(by_id[cid].chunk, score) for cid, score in fused]
        merged = _without_added_duplicates(candidates, added)
        return [*select_contexts(merged, params, self.count_tokens), *found.contexts]

    def _validate(self, question: str) -> str | None:
        if not question:
            # An example that fits every collection (the LL144 one read oddly beside the EU AI Act).
            return "Please ask a question about the loaded regulations, e.g. “What must we do before using this tool?”"
        if len(question) > self.limits.max_chars:
            return (
                f"That message is {len(question):,} characters long; please ask a question of at most "
                f"{self.limits.max_chars:,} characters (quote only the part you need answered)."
            )
        if not any(ch.isalnum() for ch in question):
            return "I could not find a question in that message; please ask in words."
        return None


# The note of a reply to a message that is not a question (empty, too long, no words): callers
# that report success or failure (`hypa ask`'s exit status) tell it from an answer by it.
INVALID_QUESTION = "invalid question"


# A follow-up searched together with the question before it ("How quickly must the provider report?
# ok and if we cross that threshold, how soon do we tell the Commission?") is searched with a vector
# leaning toward its own part, so the earlier question's provision does not take every place; the
# weight was chosen on the study parts (docs/RESULTS.md, eighth update).
FOLLOW_UP_WEIGHT = 0.5
# ... and the answer's sentences are judged by a vector leaning further ("And for SMEs?" after "What's
# the max fine for a banned practice?" asks about the SME rule, not the maximum). Chosen on the study
# parts' follow-ups (docs/RESULTS.md, twelfth update); questions asked second in a thread that are
# not follow-ups do not change.
FOLLOW_UP_ANSWER_WEIGHT = 1.5
# A short follow-up's own best provision (`_with_follow_up_best`) is ranked leaning this much toward
# the thread, and left where it is when already among the first FOLLOW_UP_BEST_KEPT.
FOLLOW_UP_THREAD_WEIGHT = 0.5
FOLLOW_UP_BEST_KEPT = 4
# What a follow-up's ranking adds to the score of each chunk of a unit the thread's last answer
# cited (core/thread_units.py): a nudge, since a follow-up may ask on about another unit ("do we
# then have to do a fundamental rights impact assessment?" after Annex III); a weight of 1.0 lost
# such a follow-up's answer on our sets (docs/RESULTS.md, seventeenth update).
THREAD_UNIT_WEIGHT = 0.5


def _after_best(ranked: list[ScoredChunk], moved: list[ScoredChunk]) -> list[ScoredChunk]:
    """`ranked` with `moved` placed right after its best provision (each provision once)."""
    order: list[ScoredChunk] = ranked[:1]
    for sc in [*moved, *ranked[1:]]:
        if all(sc.chunk.id != kept.chunk.id for kept in order):
            order.append(sc)
    return order


@dataclass(frozen=True)
class _ChunkReadings:
    """A collection's chunks (as `features` ranks them) read once: each chunk's unit ("art:50",
    core/thread_units.py) and its folded text (core/glossary_provisions.py)."""

    features: FeatureBuilder
    units: list[str | None]
    folded: list[str]


def _follow_up_vector(vectors: np.ndarray | None, asking: str | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(the other vectors, the follow-up's own vector) of vectors embedded with the follow-up's part last."""
    if vectors is None or not asking:
        return vectors, None
    return vectors[:-1], vectors[-1]


def _asking_vectors(vectors: np.ndarray | None, follow_up: np.ndarray | None, first_piece: int) -> np.ndarray | None:
    """The parts of the question, embedded each on its own: a follow-up's own part (the question
    before it only says what is talked about), else the focus pieces (the rows from `first_piece`
    on); None when there are none."""
    if vectors is None:
        return None
    asking = follow_up[None, :] if follow_up is not None else vectors[first_piece:]
    return asking if len(asking) else None


def _leaning_on(vector: np.ndarray, toward: np.ndarray | None, weight: float) -> np.ndarray:
    """`vector` turned toward another (unit length, as embeddings are)."""
    if toward is None:
        return vector
    blended = vector + weight * toward
    return (blended / np.linalg.norm(blended)).astype(vector.dtype)
