"""Which retrieval parameters a question gets: fixed, or chosen by its predicted complexity.

A policy turns a (standalone) question into RetrievalParams. The adaptive policy asks the complexity
classifier for a label and looks the label up in a config of core/params.py; without a classifier
it uses the config's fallback row, and says so in the params (`fallback = true`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import numpy as np

from core.blas_threads import single_blas_thread
from core.params import ParamRow, RetrievalConfig
from core.types import RetrievalParams


class Classifier(Protocol):
    def predict(self, question: str, vector: np.ndarray | None = None) -> int: ...


class ParamPolicy(Protocol):
    max_queries: int  # the most queries any question can get (to ask a rewriter once)

    def select(self, question: str, vector: np.ndarray | None) -> tuple[RetrievalParams, int | None]:
        """Parameters for this question, and its complexity label (None when not classified)."""


class FixedPolicy:
    def __init__(self, params: RetrievalParams) -> None:
        self.params = params
        self.max_queries = params.q

    def select(self, question: str, vector: np.ndarray | None) -> tuple[RetrievalParams, int | None]:
        return self.params, None


class ConfigPolicy:
    """A named config from bot/retrieval_configs.toml; adaptive configs consult the classifier."""

    def __init__(
        self, config: RetrievalConfig, base: RetrievalParams, classifier: Classifier | None = None
    ) -> None:
        self.config = config
        self.base = base  # fusion, alpha and anything the config does not set
        self.classifier = classifier if config.adaptive else None
        rows = [config.params_for(None)]
        if config.adaptive:
            rows += [config.params_for(label) for label in range(config.classes or 0)]
        self.max_queries = max(r.q for r in rows)

    def select(self, question: str, vector: np.ndarray | None) -> tuple[RetrievalParams, int | None]:
        label = None
        if self.classifier is not None:
            # Tiny matrix products: on a machine whose cores are busy, BLAS's default threads made
            # 1.5 ms take tens of ms (core/blas_threads.py). No OPENBLAS_NUM_THREADS needed.
            with single_blas_thread():
                label = self.classifier.predict(question, vector)
        return self._params(self.config.params_for(label)), label

    def _params(self, row: ParamRow) -> RetrievalParams:
        return replace(
            self.base,
            top_k=row.top_k,
            q=row.q,
            kg_keywords=row.kg_keywords,
            kg_depth=row.kg_depth,
            max_context_tokens=row.max_context_tokens,
            min_novelty=row.min_novelty,
            config=self.config.name,
            fallback=row.fallback,
            kg=self.config.kg,
            ranking="hybrid",  # the named configs are the paper's hybrid-retrieval ablations
        )
