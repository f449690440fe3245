"""Typed values passed between pipeline stages (ingest -> index -> retrieval -> generation -> eval)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

ContextKind = Literal["chunk", "kg"]
Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit of a regulation, with everything needed to cite it."""

    id: str  # stable: same file + same text -> same id
    collection: str
    doc_id: str  # stable id of the source document within the collection (file name stem)
    doc_title: str
    label: str  # human citation label, e.g. "6 RCNY § 5-301(b)", "EU AI Act Art. 26(1)"
    heading: str  # the unit's own heading, e.g. "Bias Audit."
    text: str
    page_start: int  # 1-based, inclusive
    page_end: int
    char_start: int  # offsets into the document's extracted text
    char_end: int
    # What the unit is (core/roles.py): operative, definition, example, recital, commentary, front.
    # Set at ingest; empty for chunks stored before roles existed (core.roles.role_of fills it in).
    role: str = ""
    # Titles of the chapters, articles and sections the text cites (core/ingest/references.py):
    # searched with the chunk, never quoted.
    references: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def search_view(self) -> str:
        """The text that is indexed by BM25 and embedded: citation label, heading, body, and the
        titles of what the body cites."""
        return "\n".join(part for part in (self.label, self.heading, self.text, self.references) if part)

    @classmethod
    def from_dict(cls, d: dict) -> "Chunk":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class ScoredChunk:
    chunk: Chunk
    score: float
    kind: ContextKind = "chunk"


def with_scores_of_places(order: Sequence[ScoredChunk], ranked: Sequence[ScoredChunk]) -> list[ScoredChunk]:
    """`order` (a reordering of `ranked`, perhaps longer) with the scores of `ranked` by place: a
    provision moved up takes the score of the place it takes, so scores still fall with the rank."""
    scores = [sc.score for sc in ranked] + [ranked[-1].score if ranked else 0.0] * len(order)
    return [replace(sc, score=scores[i]) for i, sc in enumerate(order)]


@dataclass(frozen=True)
class Turn:
    role: Role
    content: str


@dataclass(frozen=True)
class Citation:
    n: int  # the number shown in the answer text, [n]
    chunk_id: str
    label: str
    quote: str  # verbatim text from the chunk
    # The official text it points to (core/links.py), "" when its document has no link pattern.
    url: str = ""


@dataclass
class Usage:
    context_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass
class Answer:
    """What any generator returns (extractive now, an LLM later)."""

    text: str
    refused: bool
    citations: list[Citation] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = "extractive"
    note: str = ""  # one-line remark shown to the user (e.g. a fallback), empty if none
    # Counters about how the answer was made (e.g. citations dropped or repaired by verification).
    diagnostics: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalParams:
    top_k: int
    fusion: str
    alpha: float
    q: int = 1  # queries searched: the question + (q - 1) rewrites
    kg_keywords: int = 0  # K, for the knowledge-graph retriever
    kg_depth: int = 0  # S
    config: str = "default"
    fallback: bool = False  # an adaptive config without a classifier label used its fallback row
    rerank: bool = False
    kg: bool = False  # add the knowledge-graph stage (facts + their provisions)
    max_context_tokens: int = 0  # token budget for the kept chunks (0 = none; core/context_budget.py)
    min_novelty: float = 0.0  # share of a chunk's words that must be new to the kept ones (0 = off)
    # "provisions": every provision scored by the learned ranker (core/ranking.py); "hybrid": the
    # index's hybrid search fused by rank across queries (the configs of bot/retrieval_configs.toml).
    ranking: str = "hybrid"


@dataclass
class PipelineResult:
    """Everything a run produced for one question: the answer and how it was reached."""

    question: str
    answer: Answer
    contexts: list[ScoredChunk]
    queries: list[str]
    params: RetrievalParams
    complexity: int | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_record(self) -> dict:
        """The JSON shape shared by `hypa ask --json` and `hypa eval run`."""
        return {
            "question": self.question,
            "answer": self.answer.text,
            "refused": self.answer.refused,
            "note": self.answer.note,
            "model": self.answer.model,
            "citations": [asdict(c) for c in self.answer.citations],
            "contexts": [
                {
                    "chunk_id": sc.chunk.id,
                    "label": sc.chunk.label,
                    "text": sc.chunk.text,
                    "score": round(sc.score, 6),
                    "kind": sc.kind,
                }
                for sc in self.contexts
            ],
            "queries": list(self.queries),
            "complexity": self.complexity,
            "params": asdict(self.params),
            "usage": asdict(self.answer.usage),
            "diagnostics": dict(self.answer.diagnostics),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
