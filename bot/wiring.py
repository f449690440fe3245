"""The composition root: builds the application's components from Settings, with the typed configs
of bot/configs.py. The only place that knows concrete classes and plugs them into core's Protocols."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

import numpy as np

from bot.configs import (
    answer_config,
    classifier_config,
    kg_extractor_config,
    kg_load_limits,
    llm_client_config,
    rewriter_client_config,
    rewriter_config,
    weaviate_config,
)
from bot.settings import Settings
from core.adaptive import ConfigPolicy, FixedPolicy, ParamPolicy
from core.answer_watch import AnswerWatch
from core.extractive import SENTENCE_FEATURES, ExtractiveGenerator
from core.glossary import Glossary
from core.index import ChunkIndex
from core.ingestion import IngestOutcome, IngestProgress, ingest_file
from core.language import LanguageDetector
from core.lexicon import Lexicon
from core.linear import DEFAULT_WEIGHTS_FILE, LinearModel, load_model
from core.links import CitationLinks, DocumentLinks, LinkingGenerator
from core.params import get_config
from core.pipeline import AnswerPipeline, Generator, ProvisionSearch, QuestionLimits
from core.places import place_and_language_names
from core.precedents import Precedent, PrecedentConfig, Precedents, read_precedents
from core.ranking import FEATURES, BM25Search, FeatureBuilder, ProvisionRanker
from core.rerank import build_reranker
from core.rewriter import NoRewriter, OfflineRewriter, QueryRewriter
from core.segments import SegmentIndex, unit_texts
from core.termstats import TermStats
from core.types import Chunk, RetrievalParams
from storage.embedded import EmbeddedIndex
from storage.embedder import Embedder, embedding_progress
from storage.embedder_tuning import is_tuned_model
from storage.sentence_vectors import SentenceVectorStore

T = TypeVar("T")

if TYPE_CHECKING:
    from core.conversation_service import StoredConversationService
    from core.llm.client import FailureRecorder
    from core.metrics import Metrics
    from storage.sql import ConversationStore


def _ignore(_: int) -> None:
    pass


def embedding_model(s: Settings) -> str | None:
    """HYPA_EMBEDDING_MODEL; else the model tuned on the corpora when there is one; else None (the
    package's all-MiniLM-L6-v2)."""
    if s.embedding_model:
        return s.embedding_model
    return str(s.tuned_model_dir) if is_tuned_model(s.tuned_model_dir) else None


def make_embedder(s: Settings) -> Embedder:
    """HYPA_EMBEDDING_MODEL / _DEVICE / _BACKEND; cheap: the model loads on first use."""
    return Embedder(
        embedding_model(s), device=s.embedding_device, backend=s.embedding_backend, onnx_dir=s.data_dir / "models"
    )


def failure_recorder(s: Settings) -> FailureRecorder:
    """Failed LLM calls, one JSON line each in the data directory; the question's text only with
    HYPA_LOG_MESSAGE_TEXT, like the logs."""
    from storage.llm_failures import JsonlFailureRecorder

    return JsonlFailureRecorder(s.llm_failures_path, keep_text=s.log_message_text)


def answer_generator(
    s: Settings, fallback: Generator, *, wrap_primary: Callable[[Generator], Generator] | None = None
) -> Generator:
    """Claude (HYPA_ANSWER_MODEL) with `fallback` answering whenever Claude cannot, when
    ANTHROPIC_API_KEY is set; else `fallback` alone (and the anthropic SDK, 2 s to import, stays
    unloaded). One instance per process, so the circuit breaker's state is shared across questions.
    `wrap_primary(claude)` decorates Claude's generator inside the fallback (core.links.LinkingGenerator),
    so its answers, late ones included, pass through the decorator like the fallback's."""
    if not s.anthropic_api_key:
        return fallback
    from core.llm.claude_generator import ClaudeGenerator
    from core.llm.client import ClaudeClient, FallbackGenerator

    client = ClaudeClient(llm_client_config(s))
    claude: Generator = ClaudeGenerator(client, answer_config(s))
    primary = wrap_primary(claude) if wrap_primary is not None else claude
    return FallbackGenerator(primary, fallback, failure_recorder(s), breaker=client.breaker)


def collection_hint(collection: str) -> str:
    """The command that creates a collection: the manifest corpora are built, anything else ingested."""
    if collection in ("ll144", "eu-ai-act"):
        return f"`hypa index build {collection}`"
    return f"`hypa ingest FILES --collection {collection}`"


class PerCollection(Generic[T]):
    """A value derived from a collection's chunks (term statistics, lexicon, segment features),
    rebuilt only when the collection's documents change.

    Keyed by the index's {doc_id: content_hash}, so a bot keeps correct values while another
    process ingests (the index itself picks up the new version on the next query).
    """

    def __init__(self, index: ChunkIndex, build: Callable[[list[Chunk]], T]) -> None:
        self._index = index
        self._build = build
        self._by_collection: dict[str, tuple[frozenset, T]] = {}
        self._lock = threading.Lock()

    def __call__(self, collection: str) -> T:
        version = frozenset(self._index.documents(collection).items())
        with self._lock:
            cached = self._by_collection.get(collection)
            if cached is None or cached[0] != version:
                cached = (version, self._build(self._index.chunks(collection)))
                self._by_collection[collection] = cached
            return cached[1]


def collection_context_tokens() -> dict[str, int]:
    """The manifest corpora's own context budgets (bot/corpora.toml `context_tokens`)."""
    from bot.corpus import load_manifest

    return {c.collection: c.context_tokens for c in load_manifest().corpora.values() if c.context_tokens}


def term_stats_of(chunks: list[Chunk]) -> TermStats:
    return TermStats.from_texts(f"{c.heading} {c.text}" for c in chunks)


def lexicon_of(chunks: list[Chunk], glossary: Glossary | None = None) -> Lexicon:
    return Lexicon.from_texts((f"{c.heading}\n{c.text}" for c in chunks), glossary)


def collection_glossaries(settings: Settings) -> dict[str, Glossary]:
    """{collection: glossary}: the manifest corpora's (bot/corpora.toml `glossary`) with the entries
    of `<collection>.toml` in HYPA_GLOSSARY_DIR added; empty when HYPA_GLOSSARY=false. A file that
    cannot be read raises GlossaryError naming it."""
    from bot.corpus import load_manifest

    if not settings.glossary:
        return {}
    glossaries: dict[str, Glossary] = {}
    for corpus in load_manifest().corpora.values():
        path = corpus.glossary_path()
        if path is not None:
            glossaries[corpus.collection] = Glossary.read(path)
    own = settings.glossaries_dir
    for path in sorted(own.glob("*.toml")) if own.is_dir() else []:
        glossaries[path.stem] = glossaries.get(path.stem, Glossary()) + Glossary.read(path)
    return glossaries


def collection_precedents(settings: Settings) -> dict[str, list[Precedent]]:
    """{collection: precedents}: the manifest corpora's (bot/corpora.toml `precedents`) and those of
    the `*.jsonl` files in HYPA_PRECEDENTS_DIR, each for the collection its file is named after unless
    the row names its own (`hypa feedback export --reviewed` writes every collection's in one file);
    empty when HYPA_PRECEDENTS=false. A file that cannot be read raises PrecedentError naming it."""
    from bot.corpus import load_manifest

    if not settings.precedents:
        return {}
    found: dict[str, list[Precedent]] = {}
    files = [(corpus.collection, corpus.precedents_path()) for corpus in load_manifest().corpora.values()]
    own = settings.own_precedents_dir
    files += [(path.stem, path) for path in (sorted(own.glob("*.jsonl")) if own.is_dir() else [])]
    for collection, path in files:
        for precedent in read_precedents(path) if path is not None else []:
            found.setdefault(precedent.collection or collection, []).append(precedent)
    return found


@dataclass
class Components:
    """Lazily built components; the embedding model loads only when first needed."""

    settings: Settings
    overrides: dict = field(default_factory=dict)

    @cached_property
    def embedder(self) -> Embedder:
        return make_embedder(self.settings)

    @cached_property
    def index(self) -> ChunkIndex:
        """HYPA_INDEX=embedded (files under the data directory) or weaviate (WEAVIATE_URL)."""
        if self.settings.index_backend == "weaviate":
            from storage.weaviate_index import WeaviateIndex  # weaviate-client only when chosen

            return WeaviateIndex.from_config(weaviate_config(self.settings), embedder=self.embedder)
        return EmbeddedIndex(
            self.settings.index_dir, embedder=self.embedder, candidates=self.settings.candidates
        )

    @cached_property
    def sentence_vectors(self) -> SentenceVectorStore:
        # Keyed by text only, so each model keeps its own (the package's model where it always did).
        directory = self.settings.data_dir / "sentence_vectors"
        if embedding_model(self.settings) is not None:
            directory = directory / self.embedder.model_id.replace(":", "-")
        return SentenceVectorStore(directory, self.embedder.embed_passages)

    @cached_property
    def term_stats(self) -> PerCollection[TermStats]:
        return PerCollection(self.index, term_stats_of)

    @cached_property
    def glossaries(self) -> dict[str, Glossary]:
        return collection_glossaries(self.settings)

    @cached_property
    def lexicon(self) -> PerCollection[Lexicon]:
        def build(chunks: list[Chunk]) -> Lexicon:
            return lexicon_of(chunks, self.glossaries.get(chunks[0].collection) if chunks else None)

        return PerCollection(self.index, build)

    @cached_property
    def segment_features(self) -> PerCollection[FeatureBuilder]:
        def build(chunks: list[Chunk]) -> FeatureBuilder:
            # Ingest stores these vectors; a collection ingested before the ranker existed gets
            # them here once (persisted), instead of on every start.
            self.sentence_vectors.add(unit_texts(chunks))
            return FeatureBuilder(SegmentIndex(chunks, self.sentence_vectors))

        return PerCollection(self.index, build)

    def learned_model(self, name: str, features: tuple[str, ...]) -> LinearModel:
        """Model `name` of HYPA_RANKER_WEIGHTS (default: the weights shipped with hypa); an override
        `models` = {name: LinearModel} (e.g. while training) wins."""
        override = (self.overrides.get("models") or {}).get(name)
        if override is not None:
            return override
        return load_model(self.settings.ranker_weights or DEFAULT_WEIGHTS_FILE, name, features)

    @cached_property
    def provision_search(self) -> ProvisionSearch:
        """The learned provision ranking (HYPA_RANKER_WEIGHTS, or the weights shipped with hypa)."""
        return ProvisionSearch(
            ranker=ProvisionRanker(self.learned_model("provisions", FEATURES), BM25Search(self.index)),
            features=self.segment_features,
            lexicon=self.lexicon,
            precedents=self.precedents if self.settings.precedents else None,
        )

    @cached_property
    def precedent_files(self) -> dict[str, list[Precedent]]:
        return collection_precedents(self.settings)

    @cached_property
    def precedents(self) -> PerCollection[Precedents]:
        """Each collection's precedents, tied to the chunks its segment features rank (same order)."""

        def build(chunks: list[Chunk]) -> Precedents:
            collection = chunks[0].collection if chunks else ""
            ranked = self.segment_features(collection).segments.chunks if chunks else []
            lexicon = self.lexicon(collection) if chunks else None

            def embed(questions: list[str]) -> np.ndarray:
                # as the pipeline embeds a question: read with the collection's spelling, abbreviations
                # and glossary, so a precedent asked again word for word is at cosine 1. Kept in the
                # sentence-vector store (the embedder encodes questions and passages alike), so a
                # restart reads them from disk instead of embedding them again.
                searched = [lexicon.normalise(q).text for q in questions] if lexicon is not None else questions
                self.sentence_vectors.add(searched)
                return self.sentence_vectors.get(searched)

            return Precedents(ranked, self.precedent_files.get(collection, []), embed, PrecedentConfig())

        return PerCollection(self.index, build)

    def ingest(
        self,
        path: Path,
        collection: str,
        *,
        update_graph: bool = True,
        doc_id: str | None = None,
        progress: IngestProgress | None = None,
        source_url: str | None = None,
    ) -> IngestOutcome:
        """Chunk one file into the index, embed the sentences answers may quote from it, and update
        the collection's knowledge graph (`update_graph=False`: the caller ingests several files and
        calls update_knowledge_graph once after the last, instead of re-extracting after each).
        `doc_id`: put the file under this id (core.ingestion.explicit_key); `progress`: told the stage
        and, while embedding, every block of texts done; `source_url`: where its citations link to
        (core/links.py; None keeps the document's)."""
        s = self.settings

        def embed_sentences(chunks: list[Chunk]) -> None:
            # the units the ranker and the generator embed: provisions, headings, sentences
            units = unit_texts(chunks)
            if progress is not None:
                progress.stage("embedding sentences", len(units))
            self.sentence_vectors.add(units)

        with embedding_progress(progress.advance if progress is not None else _ignore):
            outcome = ingest_file(
                path,
                collection=collection,
                index=self.index,
                chunk_tokens=s.chunk_tokens,
                chunk_overlap=s.chunk_overlap,
                count_tokens=self.embedder.count_tokens,
                after_replace=embed_sentences,
                doc_id=doc_id,
                max_file_bytes=int(s.ingest_max_file_mb * 1_000_000),
                progress=progress,
                source_url=source_url,
            )
        if update_graph and outcome.status != "failed":
            self.update_knowledge_graph(collection)
        return outcome

    # --- knowledge graph (docs/KG.md) -------------------------------------------------------------

    def triplet_extractor(self):  # -> core.kg.build.TripletExtractor
        """HYPA_KG_EXTRACTOR: offline patterns, or offline + Claude (cached per chunk) with a key."""
        from core.kg.offline import OfflineExtractor

        s = self.settings
        if s.kg_extractor == "llm" and s.anthropic_api_key:
            from core.kg.llm import ExtractionCache, LLMExtractor
            from core.llm.client import ClaudeClient

            cache = ExtractionCache(s.kg_dir / "llm_triplets.json")
            return LLMExtractor(ClaudeClient(llm_client_config(s)), OfflineExtractor(), cache, kg_extractor_config(s))
        return OfflineExtractor()

    @cached_property
    def kg_store(self):  # -> storage.kg_store.KGStore
        from storage.kg_store import KGStore

        return KGStore(self.settings.kg_dir, kg_load_limits(self.settings))

    def update_knowledge_graph(self, collection: str) -> None:
        """Re-extract the collection's triplets unless the stored graph already matches the index."""
        if self.settings.kg_extractor == "none":
            return
        from core.kg.build import build_collection, stored_if_current

        if stored_if_current(self.kg_store, collection, self.index.documents(collection)) is None:
            build_collection(self.index, self.kg_store, collection, self.triplet_extractor())

    @cached_property
    def knowledge_graph(self):  # -> core.kg.build.KnowledgeGraphs | None
        """collection -> KGRetriever, loaded lazily and cached per index version (None: HYPA_KG_EXTRACTOR=none)."""
        if self.settings.kg_extractor == "none":
            return None
        from core.kg.build import KnowledgeGraphs
        from core.kg.retriever import KGSettings

        return KnowledgeGraphs(
            self.index,
            self.kg_store,
            self.triplet_extractor,
            embed=self.embedder.embed_queries,
            settings=KGSettings(max_facts=self.settings.kg_max_facts),
        )

    def retrieval_params(self) -> RetrievalParams:
        """The fixed parameters from settings (and command-line overrides)."""
        s = self.settings
        return RetrievalParams(
            top_k=self.overrides.get("top_k") or s.top_k,
            fusion=self.overrides.get("fusion") or s.fusion,
            alpha=s.alpha if self.overrides.get("alpha") is None else self.overrides["alpha"],
            ranking=self.overrides.get("ranking") or s.ranking,
            max_context_tokens=s.max_context_tokens,
        )

    def param_policy(self) -> ParamPolicy:
        """`default` = the settings' fixed top_k with no rewrites; any other name is a config of
        bot/retrieval_configs.toml (fixed-k*, pa-2class, pa-3class)."""
        name = self.overrides.get("config") or self.settings.retrieval_config
        base = self.retrieval_params()
        if name == "default":
            return FixedPolicy(base)
        config = get_config(name)
        classifier = None
        if config.adaptive:
            from core.complexity import (
                ensure_classifier,  # scikit-learn: only for adaptive configs
            )

            assert config.classes is not None  # an adaptive config has them
            classifier = ensure_classifier(
                classifier_config(self.settings), config.classes, embed=self.embedder.embed_queries
            )
        return ConfigPolicy(config, base, classifier)

    @cached_property
    def citation_links(self) -> CitationLinks:
        """Where citations link to: a document's own `--source-url` (its index record), else its
        manifest entry's patterns (bot/corpora.toml), read when an answer is made — so an index built
        before links existed links too, and a changed pattern needs no re-ingest."""
        from bot.corpus import load_manifest, manifest_links

        manifest = manifest_links(load_manifest())
        index = self.index

        def links_of(collection: str) -> dict[str, DocumentLinks]:
            links = dict(manifest.get(collection, {}))
            for info in index.document_info(collection):  # per answer: a link changed by ingest shows at once
                if info.source_url:
                    links[info.doc_id] = DocumentLinks.single(info.source_url)
            return links

        return CitationLinks(links_of)

    @cached_property
    def generator(self) -> Generator:
        """Claude (with the extractive answer as fallback) when ANTHROPIC_API_KEY is set, else extractive.
        Each one's citations get their links (core/links.py), Claude's late answers included.

        One instance per process, so the circuit breaker's state is shared across questions.
        """
        extractive = LinkingGenerator(
            ExtractiveGenerator(
                self.term_stats,
                sentence_vectors=self.sentence_vectors,
                model=self.learned_model("sentences", SENTENCE_FEATURES),
                # the configured glossary, not the lexicon's: no index lookup per answer, and a
                # phrasing the lexicon leaves out holds only words the collection uses anyway
                glossary=lambda collection: self.glossaries.get(collection, Glossary()),
                # for the abbreviations the law never writes ("GPAI"); per collection version, as
                # the term statistics are
                lexicon=self.lexicon,
                # precedents the law does not answer (core/precedents.py)
                unanswered=self.precedents if self.settings.precedents else None,
            ),
            self.citation_links,
        )
        return answer_generator(
            self.settings, extractive, wrap_primary=lambda claude: LinkingGenerator(claude, self.citation_links)
        )

    def rewriter(self) -> QueryRewriter:
        if self.overrides.get("no_rewrite"):
            return NoRewriter()
        if not self.settings.anthropic_api_key:
            return OfflineRewriter(embed=self.embedder.embed_queries)
        from core.llm.client import ClaudeClient
        from core.llm.rewriter import LLMRewriter

        client = ClaudeClient(rewriter_client_config(self.settings))  # its own timeouts and circuit breaker
        return LLMRewriter(client, rewriter_config(self.settings), recorder=failure_recorder(self.settings))

    @cached_property
    def pipeline(self) -> AnswerPipeline:
        s = self.settings
        return AnswerPipeline(
            self.index,
            self.generator,
            self.param_policy(),
            default_collection=s.collection,
            count_tokens=self.embedder.count_tokens,
            limits=QuestionLimits(max_chars=s.max_question_chars),
            embed_queries=self.embedder.embed_queries,
            rewriter=self.rewriter(),
            reranker=build_reranker(s.reranker_model, max_length=s.reranker_max_length, device=s.embedding_device),
            rerank_candidates=s.reranker_candidates,
            knowledge_graph=self.knowledge_graph,
            provisions=self.provision_search,
            # Offline answers need an English question; with a key the rewriter translates it.
            language=None if s.anthropic_api_key else LanguageDetector(),
            context_tokens=collection_context_tokens(),
        )

    def served_collections(self) -> list[str]:
        """HYPA_COLLECTION and every per-workspace collection (HYPA_WORKSPACE_COLLECTIONS), once each."""
        s = self.settings
        return list(dict.fromkeys([s.collection, *s.workspace_collections.values()]))

    def missing_collections(self) -> list[str]:
        """Served collections the index does not have (a bot must not start without them)."""
        present = set(self.index.collections())
        return [c for c in self.served_collections() if c not in present]

    def missing_collections_problem(self) -> str | None:
        """Why a bot cannot start yet (served collections missing from the index, and the command
        that creates the first), or None when every served collection is there."""
        missing = self.missing_collections()
        if not missing:
            return None
        return (
            f"collection(s) {', '.join(repr(c) for c in missing)} not in the index; "
            f"run {collection_hint(missing[0])} first"
        )

    def warm_up(self, collection: str | None = None) -> None:
        """Load what the first question would otherwise wait for: the pipeline (and its classifier),
        the embedding model, the term statistics, the lexicon and segment features of the provision
        ranking, the language model of the offline language check, the table of place and language
        names and, for graph configs, the knowledge graph. Without `collection`: for every served
        collection."""
        collections = [collection] if collection else self.served_collections()
        self.pipeline  # noqa: B018 - builds the embedder, generator, policy (trains a missing classifier)
        self.embedder.embed_queries(["warm up"])  # loads the model (or exports it to ONNX once)
        name = self.overrides.get("config") or self.settings.retrieval_config
        uses_graph = name != "default" and get_config(name).kg and self.knowledge_graph is not None
        if self.pipeline.language is not None:
            self.pipeline.language.warm_up()
        place_and_language_names()  # the extractive generator's name check (tens of ms on first use)
        for name_ in collections:
            self.term_stats(name_)
            self.lexicon(name_)
            self.segment_features(name_)
            if self.settings.precedents:
                self.precedents(name_)  # ties them to chunks; their vectors are embedded once, then read from disk
            if uses_graph:
                self.knowledge_graph(name_)  # loads the graph, embeds its entity names (seconds on big corpora)

    # --- conversations (chat adapters, `hypa feedback`) -----------------------------------------

    @cached_property
    def store(self) -> ConversationStore:
        """The SQL store for threads, answers and feedback (HYPA_DATABASE_URL; migrated on open)."""
        from datetime import timedelta

        from storage.sql import ConversationStore  # SQLAlchemy + Alembic load only when needed

        s = self.settings
        return ConversationStore(
            s.sql_url, lease=timedelta(seconds=s.delivery_lease_s), recovery_window=timedelta(hours=s.recovery_window_h)
        )

    @cached_property
    def answer_watch(self) -> AnswerWatch:
        """The answers this process is computing (one per process): /readyz reports a stuck pipeline."""
        return AnswerWatch()

    def conversation(
        self, metrics: Metrics | None = None, *, collection: str | None = None
    ) -> StoredConversationService:
        """The ConversationService the chat adapters call (one per process); `collection` overrides
        HYPA_COLLECTION (e.g. `hypa chat --collection`)."""
        from core.conversation_service import StoredConversationService

        s = self.settings
        return StoredConversationService(
            self.pipeline,
            self.store,
            history_turns=s.thread_history_turns,
            metrics=metrics,
            collection=collection or s.collection,
            workspace_collections=s.workspace_collections,
            log_message_text=s.log_message_text,
            watch=self.answer_watch,
            answer_wait_s=s.chat_answer_wait_s,
        )
