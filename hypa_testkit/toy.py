"""The toy regulation: synthetic chunks (written for the tests, not taken from any corpus) and a
model-free pipeline and conversation service over them."""
from __future__ import annotations

from pathlib import Path

from core.conversation_service import StoredConversationService
from core.extractive import ExtractiveGenerator
from core.pipeline import AnswerPipeline
from core.termstats import TermStats
from core.types import Chunk, RetrievalParams, ScoredChunk
from storage.embedded import EmbeddedIndex
from storage.embedder import HashingEmbedder
from storage.sql import ConversationStore


def make_chunk(label: str, text: str, *, collection: str = "toy", doc_id: str = "toy-doc", heading: str = "") -> Chunk:
    return Chunk(
        id=f"{doc_id}:{label}",
        collection=collection,
        doc_id=doc_id,
        doc_title="Toy Regulation",
        label=label,
        heading=heading,
        text=text,
        page_start=1,
        page_end=1,
        char_start=0,
        char_end=len(text),
    )


TOY_CHUNKS = [
    make_chunk(
        "Toy Code § 1-101",
        "§ 1-101 Definitions. For the purposes of this chapter, the term “widget audit” means an impartial "
        "evaluation by an independent reviewer of a widget. The term “reviewer” means a person who is not "
        "employed by the widget maker.",
    ),
    make_chunk(
        "Toy Code § 1-102(a)",
        "(a) Notice. A seller shall notify each buyer no less than ten business days before selling a widget. "
        "Notice may be given by mail or e-mail.",
    ),
    make_chunk(
        "Toy Code § 1-103",
        "§ 1-103 Penalties. A seller that violates this chapter is liable for a civil penalty of not more than "
        "$500 for a first violation and not more than $1,500 for each subsequent violation.",
    ),
]


def scored(chunks=TOY_CHUNKS) -> list[ScoredChunk]:
    return [ScoredChunk(c, 1.0 / (i + 1)) for i, c in enumerate(chunks)]


def toy_generator() -> ExtractiveGenerator:
    """The offline answer generator with term statistics of TOY_CHUNKS."""
    stats = TermStats.from_texts(c.text for c in TOY_CHUNKS)
    return ExtractiveGenerator(lambda collection: stats)


def toy_pipeline(index_dir: Path, generator=None) -> AnswerPipeline:
    """A model-free pipeline over TOY_CHUNKS (collection "toy"), persisted in `index_dir`."""
    embedder = HashingEmbedder()
    index = EmbeddedIndex(index_dir, embedder=embedder, candidates=10)
    if not (index_dir / "toy").exists():
        index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    return AnswerPipeline(
        index,
        generator or toy_generator(),
        RetrievalParams(top_k=3, fusion="rankedFusion", alpha=0.5),
        default_collection="toy",
        count_tokens=lambda t: len(t.split()),
        embed_queries=embedder.embed_queries,
    )


def toy_service(data_dir: Path, generator=None, metrics=None, db: str = "bot.sqlite3") -> StoredConversationService:
    """The stored conversation service over `toy_pipeline` and a SQLite store, both under `data_dir`."""
    store = ConversationStore(f"sqlite:///{data_dir / db}")
    return StoredConversationService(
        toy_pipeline(data_dir / "index", generator), store, history_turns=6, metrics=metrics, collection="toy"
    )
