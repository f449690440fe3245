"""Builds the application's components from Settings (the only place that knows concrete classes)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property

from bot.settings import Settings
from core.extractive import ExtractiveGenerator
from core.llm.claude_generator import answer_generator_from_settings
from core.adaptive import ConfigPolicy, FixedPolicy, ParamPolicy
from core.complexity import ensure_classifier
from core.params import get_config
from core.pipeline import AnswerPipeline, Generator, QuestionLimits
from core.rerank import reranker_from_settings
from core.rewriter import NoRewriter, OfflineRewriter
from core.termstats import TermStats
from core.types import RetrievalParams
from storage.embedded import EmbeddedIndex
from storage.embedder import Embedder


class TermStatsCache:
    """Per-collection term statistics, computed once from the index's chunks."""

    def __init__(self, index: EmbeddedIndex) -> None:
        self._index = index
        self._by_collection: dict[str, TermStats] = {}
        self._lock = threading.Lock()

    def __call__(self, collection: str) -> TermStats:
        with self._lock:
            stats = self._by_collection.get(collection)
            if stats is None:
                chunks = self._index.chunks(collection)
                stats = TermStats.from_texts(f"{c.heading} {c.text}" for c in chunks)
                self._by_collection[collection] = stats
            return stats

    def invalidate(self, collection: str | None = None) -> None:
        with self._lock:
            if collection is None:
                self._by_collection.clear()
            else:
                self._by_collection.pop(collection, None)


@dataclass
class Components:
    """Lazily built components; the embedding model loads only when first needed."""

    settings: Settings
    overrides: dict = field(default_factory=dict)

    @cached_property
    def embedder(self) -> Embedder:
        return Embedder.from_settings(self.settings)

    @cached_property
    def index(self) -> EmbeddedIndex:
        return EmbeddedIndex(
            self.settings.index_dir, embedder=self.embedder, candidates=self.settings.candidates
        )

    @cached_property
    def term_stats(self) -> TermStatsCache:
        return TermStatsCache(self.index)

    def retrieval_params(self) -> RetrievalParams:
        """The fixed parameters from settings (and command-line overrides)."""
        s = self.settings
        return RetrievalParams(
            top_k=self.overrides.get("top_k") or s.top_k,
            fusion=self.overrides.get("fusion") or s.fusion,
            alpha=s.alpha if self.overrides.get("alpha") is None else self.overrides["alpha"],
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
            classifier = ensure_classifier(self.settings, config.classes, embed=self.embedder.embed_queries)
        return ConfigPolicy(config, base, classifier)

    @cached_property
    def generator(self) -> Generator:
        """Claude (with the extractive answer as fallback) when ANTHROPIC_API_KEY is set, else extractive.

        One instance per process, so the circuit breaker's state is shared across questions.
        """
        extractive = ExtractiveGenerator(self.term_stats, embed_passages=self.embedder.embed_passages)
        return answer_generator_from_settings(self.settings, extractive)

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
            rewriter=NoRewriter() if self.overrides.get("no_rewrite") else OfflineRewriter(),
            reranker=reranker_from_settings(s),
            rerank_candidates=s.reranker_candidates,
        )
